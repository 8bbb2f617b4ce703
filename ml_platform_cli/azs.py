"""``mlp azs``: find the AZ that offers Trainium and record it, and the caller's IAM role as
the cluster admin, in ``cdk.json`` (where ``cdk synth`` reads it).

Trainium is offered in a few AZ *IDs* per region, and each account maps AZ names to IDs
differently, so the choice is made by ID and then translated into this account's name.

The CDK CLI deep-merges its context files, ``~/.cdk.json`` < ``cdk.context.json`` <
``cdk.json``: for the same key, nested ones included, cdk.json wins. So the command writes
its keys (``env.account``, ``env.region``, ``network.availability_zones``,
``network.trainium_az``, the ``cluster`` keys below, and ``trainium.instance_type`` when
``--instance-type`` is given) into cdk.json's ``ml-platform`` object, where ``cdk synth``
will read them. An ``ml-platform`` object an earlier version of the command left in
cdk.context.json is folded into cdk.json the way the CLI merged it (cdk.json winning), so
what synthesis sees changes only by this command's keys. The region's AZ names go where
CDK caches lookups, cdk.context.json (``availability-zones:account=...:region=...``), or
into cdk.json when cdk.json already holds that key.

Cluster access: the cluster grants cluster-admin only to ``cluster.admin_role_arn`` (and to
the stack's kubectl provider). The command needs that role named: ``--admin-role-arn ARN``,
or ``--admin-role-mine`` for the caller's own role (often an SSO administrator permission
set: say so deliberately), unless ``cdk.json`` (or an earlier run) already sets one. An
assumed-role session ARN (``arn:aws:sts::<account>:assumed-role/<name>/<session>``) is
resolved to the role's ARN with ``iam:GetRole``, which includes the role's path (SSO roles
live under ``/aws-reserved/sso.amazonaws.com/``). IAM users and the root user are not roles:
then nothing is written and the command says so.

API endpoint: private by default. ``--public-access-mine`` opens the public endpoint to the
caller's public IPv4 address only (a /32, as https://checkip.amazonaws.com reports it), and
``--public-access-cidr`` (repeatable) to named networks; either sets
``cluster.endpoint_access`` to ``public_and_private``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

MAX_AZS = 3
CHECKIP_URL = "https://checkip.amazonaws.com"
"""AWS's own what-is-my-address service: the caller's public IPv4 address and a newline."""


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "azs",
        parents=parents,
        help="choose the AZ that offers Trainium and write it into cdk.json",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--instance-type",
        help="Trainium node type, written as trainium.instance_type too (one of "
        f"{', '.join(sorted(TRAINIUM_INSTANCES))}; default: "
        "trainium.instance_type of the settings)",
    )
    p.add_argument(
        "--az-id",
        help="AZ ID to use among those offering the type (e.g. usw2-az4); "
        "default: the first in sorted order",
    )
    admin = p.add_mutually_exclusive_group()
    admin.add_argument(
        "--admin-role-arn",
        help="IAM role given cluster-admin (required unless "
        "cluster.admin_role_arn is already set, or --admin-role-mine)",
    )
    admin.add_argument(
        "--admin-role-mine",
        action="store_true",
        help="give cluster-admin to the IAM role of your own credentials",
    )
    p.add_argument(
        "--public-access-mine",
        action="store_true",
        help="open the public API endpoint to your public IPv4 address (/32) only",
    )
    p.add_argument(
        "--public-access-cidr",
        action="append",
        default=[],
        metavar="CIDR",
        help="open the public API endpoint to this IPv4 block (repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be written")
    p.set_defaults(run=run)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CliError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise CliError(f"{path}: expected a JSON object")
    return data


def _object(value: Any, where: str) -> dict[str, Any]:
    """The ``ml-platform`` context object of file ``where``: an object, its JSON text (as
    ``-c ml-platform='{...}'`` gives it) or null; a CliError naming the file and key else."""
    from ml_platform.config import CONTEXT_KEY

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as error:
            raise CliError(
                f"{where}: context key {CONTEXT_KEY!r} is a string that is not JSON "
                f"({error}); expected an object"
            ) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CliError(
            f"{where}: context key {CONTEXT_KEY!r} = {json.dumps(value)[:80]}: expected an object"
        )
    return value


def _setting(values: dict[str, Any], group: str, key: str, default: Any) -> Any:
    section = values.get(group)
    value = section.get(key) if isinstance(section, dict) else None
    return default if value is None else value


def choose_azs(trainium_az: str, current: list[str], region_azs: list[str]) -> list[str]:
    """The Trainium AZ plus others to make 2 (or as many as configured, at most 3).

    AZs already configured are kept where they exist in the region; the rest are taken in
    name order. The result is sorted, so the VPC's subnet order stays stable.
    """
    wanted = min(MAX_AZS, max(2, len(current)))
    picked = [trainium_az]
    for az in [a for a in current if a in region_azs] + sorted(region_azs):
        if len(picked) == wanted:
            break
        if az not in picked:
            picked.append(az)
    return sorted(picked)


_ASSUMED_ROLE = re.compile(r"arn:(aws[a-z-]*):sts::([0-9]{12}):assumed-role/([^/]+)/.+")
_ROLE = re.compile(r"arn:(aws[a-z-]*):iam::([0-9]{12}):role/.+")


def caller_role_arn(caller_arn: str, iam: Any) -> tuple[str | None, str]:
    """The IAM role behind the caller's ARN (from STS GetCallerIdentity), and how it was found.

    Returns:
        (role ARN, note); the ARN is ``None`` when the caller is not a role (IAM user, root,
        federated user).
    """
    match = _ASSUMED_ROLE.fullmatch(caller_arn)
    if match:
        partition, account, name = match.groups()
        try:
            return iam.get_role(RoleName=name)["Role"]["Arn"], f"role of session {caller_arn}"
        except Exception as error:  # e.g. AccessDenied on iam:GetRole
            from ml_platform_cli.aws import error_code

            arn = f"arn:{partition}:iam::{account}:role/{name}"
            return arn, (
                f"role of session {caller_arn}; iam:GetRole failed ({error_code(error) or error}), "
                "so a path the role may have is missing: set cluster.admin_role_arn if it has one"
            )
    if _ROLE.fullmatch(caller_arn):
        return caller_arn, "the caller"
    return None, (
        f"the caller {caller_arn} is not an IAM role; cluster.admin_role_arn not written (set it "
        "in cdk.json or pass --admin-role-arn)"
    )


def public_ipv4(url: str = CHECKIP_URL, timeout: float = 10.0) -> str:
    """The caller's public IPv4 address as ``url`` (:data:`CHECKIP_URL`) reports it."""
    import ipaddress
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            text = reply.read(64).decode("ascii", "replace").strip()
    except OSError as error:
        raise CliError(
            f"--public-access-mine: cannot ask {url} for your address ({error}); pass "
            "--public-access-cidr with your network instead"
        ) from None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise CliError(
            f"--public-access-mine: {url} answered {text[:40]!r}, not an address"
        ) from None
    if address.version != 4:
        raise CliError(f"--public-access-mine: {address} is IPv6; EKS takes IPv4 blocks only")
    return str(address)


def endpoint_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cluster`` keys the endpoint options write (none without those options)."""
    cidrs = list(args.public_access_cidr)
    if args.public_access_mine:
        cidrs.append(f"{public_ipv4(CHECKIP_URL)}/32")
    if not cidrs:
        return {}
    return {
        "endpoint_access": "public_and_private",
        "public_access_cidrs": list(dict.fromkeys(cidrs)),
    }


def flag_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with ``--admin-role-arn`` and ``--public-access-cidr``, checked before any
    AWS call (each names its flag, the value and what is allowed)."""
    from ml_platform import limits

    out = []
    if args.admin_role_arn is not None and not limits.ROLE_ARN.fullmatch(args.admin_role_arn):
        out.append(
            f"--admin-role-arn {limits.shown(args.admin_role_arn)}: expected an IAM role ARN "
            "(arn:<partition>:iam::<12-digit account>:role/<name>)"
        )
    for cidr in args.public_access_cidr:
        # A /0 depends on cluster.public_access_from_anywhere: the settings check, later, has it.
        for _, text in limits.public_access_findings("public_and_private", [cidr], True):
            out.append(f"--public-access-cidr {limits.shown(cidr)}: {text}")
    return out


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform.config import (
        CONTEXT_KEY,
        EnvironmentSettings,
        NetworkSettings,
        Settings,
        SettingsError,
        deep_merge,
    )

    problems = flag_problems(args)
    if problems:  # before any AWS call
        raise CliError("; ".join(problems) + "; nothing written")
    project, base, local_path, local, effective = _read_context(ctx)
    current_region = _setting(effective, "env", "region", EnvironmentSettings.region)
    current_azs = _setting(
        effective, "network", "availability_zones", list(NetworkSettings.availability_zones)
    )
    region = ctx.region if ctx.region_override else current_region
    from ml_platform.regions import region_problem

    problem = region_problem("env.region", region)
    if problem:  # before asking EC2 in a region that does not exist
        raise CliError(f"{ctx.cdk_json}: {problem} (or pass --region)")
    instance_type = _instance_type(args, effective)
    usable, names_by_id = _offering_azs(ctx.client("ec2", region), instance_type, region)
    if args.az_id and args.az_id not in usable:
        raise CliError(
            f"--az-id {args.az_id}: {instance_type} is offered in {region} only in "
            + ", ".join(f"{i} ({names_by_id[i]})" for i in usable)
        )
    az_id = args.az_id or usable[0]
    trainium_az = names_by_id[az_id]
    region_azs = sorted(names_by_id.values())
    identity = ctx.client("sts", region).get_caller_identity()
    account = identity["Account"]
    admin_role, admin_note = _admin_role(ctx, args, identity, region, base, effective, local_path)
    cluster_keys = {
        **endpoint_settings(args),
        **({"admin_role_arn": admin_role} if admin_role else {}),
    }

    keep = list(current_azs) if region == current_region and isinstance(current_azs, list) else []
    vpc_azs = choose_azs(trainium_az, keep, region_azs)
    # cdk.context.json's object (an earlier version of this command wrote it) folded under
    # cdk.json's as the CDK CLI merges them, then this command's keys.
    new_object = deep_merge(
        deep_merge(_object(local.get(CONTEXT_KEY), str(local_path)), base),
        {
            "env": {"account": account, "region": region},
            "network": {"availability_zones": vpc_azs, "trainium_az": trainium_az},
            **({"cluster": cluster_keys} if cluster_keys else {}),
            # The AZ was chosen for this type: the node group must use it too.
            **({"trainium": {"instance_type": instance_type}} if args.instance_type else {}),
        },
    )
    az_key = f"availability-zones:account={account}:region={region}"
    try:
        Settings.from_context(new_object, known_azs={az_key: region_azs})
    except SettingsError as error:
        raise CliError(f"the settings would be invalid, nothing written: {error}") from None

    project_text, local_text, notes = _updated_files(
        project, local, local_path, new_object, az_key, region_azs, _indent(ctx.cdk_json)
    )
    print(
        f"{instance_type} in {region} (account {account}) is offered in: "
        + ", ".join(f"{i} ({names_by_id[i]})" for i in usable)
    )
    print(f"Trainium AZ: {az_id} -> {trainium_az}; VPC AZs: {', '.join(vpc_azs)}")
    _print_access(admin_role, admin_note, new_object.get("cluster", {}))
    if args.dry_run:
        print(f"--dry-run: would write {ctx.cdk_json} ({', '.join(notes['cdk.json'])}):")
        print(project_text, end="")
        if local_text is not None:
            print(f"--dry-run: would write {local_path} ({', '.join(notes[local_path.name])}):")
            print(local_text, end="")
        return 0
    ctx.cdk_json.write_text(project_text)
    print(f"wrote {ctx.cdk_json} ({', '.join(notes['cdk.json'])})")
    if local_text is not None:
        local_path.write_text(local_text)
        print(f"wrote {local_path} ({', '.join(notes[local_path.name])})")
    return 0


def _indent(path: Path) -> int:
    """The indent of the file's first indented line (cdk.json keeps its style), else 2."""
    match = re.search(r"^( +)\S", path.read_text(), re.MULTILINE)
    return len(match.group(1)) if match else 2


def _updated_files(
    project: dict[str, Any],
    local: dict[str, Any],
    local_path: Path,
    new_object: dict[str, Any],
    az_key: str,
    region_azs: list[str],
    indent: int = 2,
) -> tuple[str, str | None, dict[str, list[str]]]:
    """The new text of cdk.json and of cdk.context.json (``None``: unchanged), and what
    changes in each. The settings go into cdk.json; the AZ names stay CDK's lookup cache
    (cdk.context.json) unless cdk.json holds that key itself (it would win)."""
    from ml_platform.config import CONTEXT_KEY

    project = json.loads(json.dumps(project))  # a copy; key order kept
    context = project.setdefault("context", {})
    context[CONTEXT_KEY] = new_object
    notes: dict[str, list[str]] = {"cdk.json": [f"key {CONTEXT_KEY!r}"], local_path.name: []}
    updated = dict(local)
    if CONTEXT_KEY in updated:
        del updated[CONTEXT_KEY]
        notes[local_path.name].append(f"{CONTEXT_KEY!r} moved into cdk.json")
    if az_key in context:
        context[az_key] = region_azs
        notes["cdk.json"].append(f"key {az_key!r}")
        if updated.pop(az_key, None) is not None:
            notes[local_path.name].append(f"{az_key!r} removed (cdk.json has it)")
    else:
        updated[az_key] = region_azs
        notes[local_path.name].append(f"key {az_key!r}")
    project_text = json.dumps(project, indent=indent) + "\n"
    local_text = json.dumps(updated, indent=2) + "\n" if updated != local else None
    return project_text, local_text, notes


def _read_context(
    ctx: Context,
) -> tuple[dict[str, Any], dict[str, Any], Path, dict[str, Any], dict[str, Any]]:
    """cdk.json's content and its ``ml-platform`` object, the path and content of
    cdk.context.json, and the object synthesis sees today: the context files merged as the
    CDK CLI merges them (:func:`ml_platform.config.cdk_context`)."""
    from ml_platform.config import CONTEXT_KEY, PROJECT_CONTEXT_FILE, SettingsError, cdk_context

    ctx.check_cdk_json()
    if not ctx.cdk_json.is_file():
        raise CliError(
            f"{ctx.cdk_json}: no such file (run in the project folder or pass --cdk-json)"
        )
    project = _read_json(ctx.cdk_json)
    context = project.get("context") or {}
    if not isinstance(context, dict):
        raise CliError(f"{ctx.cdk_json}: 'context' must be a JSON object")
    base = _object(context.get(CONTEXT_KEY), str(ctx.cdk_json))
    local_path = ctx.cdk_json.with_name(PROJECT_CONTEXT_FILE)
    local = _read_json(local_path) if local_path.is_file() else {}
    _object(local.get(CONTEXT_KEY), str(local_path))  # a CliError naming the file if wrong
    try:
        merged = cdk_context(ctx.cdk_json)
    except SettingsError as error:
        raise CliError(str(error)) from None
    # Read without validation: wrong AZs are what this command is there to fix; the result
    # is validated before it is written.
    effective = _object(merged.get(CONTEXT_KEY), "the merged context")
    return project, base, local_path, local, effective


def _instance_type(args: argparse.Namespace, effective: dict[str, Any]) -> str:
    """``--instance-type``, else the settings' ``trainium.instance_type``: a Trainium type."""
    from ml_platform.config import TrainiumSettings

    instance_type: str = args.instance_type or _setting(
        effective, "trainium", "instance_type", TrainiumSettings.instance_type
    )
    if instance_type not in TRAINIUM_INSTANCES:
        given = "--instance-type" if args.instance_type else "trainium.instance_type"
        raise CliError(
            f"{given} {instance_type}: not a Trainium node type this platform runs; "
            f"expected one of {', '.join(sorted(TRAINIUM_INSTANCES))}"
        )
    return instance_type


def _offering_azs(ec2: Any, instance_type: str, region: str) -> tuple[list[str], dict[str, str]]:
    """The ids of the available AZs that offer ``instance_type`` (at least one), and the
    name of every available AZ by id."""
    offered: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": [instance_type]}],
    )
    for page in pages:
        offered.update(o["Location"] for o in page["InstanceTypeOfferings"])
    zones = ec2.describe_availability_zones(
        Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
    )["AvailabilityZones"]
    names_by_id = {z["ZoneId"]: z["ZoneName"] for z in zones if z.get("State") == "available"}
    usable = sorted(i for i in offered if i in names_by_id)
    if not usable:
        raise CliError(f"{instance_type} is not offered in any available AZ of {region}")
    return usable, names_by_id


def _admin_role(
    ctx: Context,
    args: argparse.Namespace,
    identity: dict[str, Any],
    region: str,
    base: dict[str, Any],
    effective: dict[str, Any],
    local_path: Path,
) -> tuple[str | None, str]:
    """The cluster admin role and where it comes from: ``--admin-role-arn``, the caller's
    role (``--admin-role-mine``), or ``cluster.admin_role_arn`` already configured."""
    admin_role, admin_note = args.admin_role_arn, "--admin-role-arn"
    if args.admin_role_mine:
        admin_role, admin_note = caller_role_arn(identity["Arn"], ctx.client("iam", region))
    for source, values in (("cdk.json", base), (local_path.name, effective)):
        configured = _setting(values, "cluster", "admin_role_arn", None)
        if admin_role is None and not args.admin_role_mine and configured is not None:
            admin_role, admin_note = configured, f"cluster.admin_role_arn of {source}"
    if admin_role is None and not args.admin_role_mine:
        raise CliError(
            "name the cluster admin: --admin-role-arn ARN, or --admin-role-mine for the role of "
            f"your credentials ({identity['Arn']}); nothing written"
        )
    return admin_role, admin_note


def _print_access(admin_role: str | None, admin_note: str, cluster: dict[str, Any]) -> None:
    """Who administers the cluster and from where its API endpoint is reachable."""
    if admin_role:
        print(f"cluster admin: {admin_role} ({admin_note})")
    else:
        print(f"cluster admin: none: {admin_note}")
    if cluster.get("endpoint_access", "private") == "private":
        # Session Manager reaches the nodes only while their roles carry the SSM policy, which
        # is break-glass and off by default (cluster.node_ssm_access).
        ssm = (
            "Session Manager port forwarding through a node: on (cluster.node_ssm_access)"
            if cluster.get("node_ssm_access") is True
            else "break-glass: Session Manager port forwarding after setting "
            "cluster.node_ssm_access: true and deploying"
        )
        print(
            "API endpoint: private (reach it from the VPC, a VPN or a peered network; "
            f"--public-access-mine opens it to your address only; {ssm}; "
            "see docs/security.md#cluster-access)"
        )
    else:
        print(
            f"API endpoint: public to {', '.join(cluster.get('public_access_cidrs', []))} "
            "and private"
        )
