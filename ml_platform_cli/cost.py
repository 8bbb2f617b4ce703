"""``mlp cost``: the on-demand cost of what ``cdk deploy`` would create, from ``cdk.out/``;
each stack priced in its own region (manifest.json) unless ``--region`` is given.

Reads the synthesized templates (manifest.json gives the stacks and their regions), prices
every resource that bills by the hour or by size from the price table shipped with the
package, lists what bills by use, and compares each multi-model endpoint with one
single-model endpoint per archive. ``--refresh`` rebuilds the table from the AWS Price List
API (needs credentials allowed ``pricing:GetProducts``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ml_platform.limits import shown
from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary

if TYPE_CHECKING:
    from ml_platform_pricing.estimate import MultiModelComparison, StackEstimate


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "cost",
        parents=parents,
        help="hourly and monthly on-demand cost of the synthesized stacks",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--cdk-out",
        default="cdk.out",
        metavar="DIR",
        help="the cloud assembly to read (default: cdk.out)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--training-hours",
        type=_hours,
        metavar="N",
        help="also print the cost of a training run of N hours (N > 0)",
    )
    p.add_argument(
        "--archives",
        action="append",
        default=[],
        metavar="ENDPOINT=N",
        help="archives served by a multi-model endpoint (default: the endpoint's "
        "archives in the settings, when it is named there)",
    )
    p.add_argument(
        "--prices",
        metavar="PATH",
        help="price table to use instead of the shipped one and the refreshed one",
    )
    p.add_argument(
        "--refresh",
        action="store_true",
        help="rebuild the price table from the AWS Price List API first, into "
        "--prices PATH or else $XDG_DATA_HOME/ml-platform/prices.json, which "
        "later runs read over the shipped table",
    )
    p.add_argument(
        "--refresh-regions",
        metavar="R1,R2",
        help="regions to fetch with --refresh (default: us-east-1,us-east-2,"
        "us-west-2 and every region in the templates)",
    )
    p.set_defaults(run=run)


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a number of hours") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{shown(text)}: expected a number of hours above 0")
    return value


def _archives(ctx: Context, args: argparse.Namespace) -> dict[str, int]:
    counts: dict[str, int] = {}
    try:
        for endpoint in ctx.settings.inference.endpoints:
            counts[endpoint.name] = len(endpoint.archives)
    except CliError:
        if ctx.cdk_json_given:  # the settings asked for must be read; ./cdk.json is optional
            raise
    for spec in args.archives:
        name, _, number = spec.partition("=")
        if not number.isdigit() or int(number) < 1:
            raise CliError(f"--archives {shown(spec)}: expected ENDPOINT=N with N >= 1")
        counts[name] = int(number)
    return counts


def build_report(
    stacks: list[Any],
    table: Any,
    *,
    region: str | None,
    archives: dict[str, int],
    training_hours: float | None,
    archives_given: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Everything ``mlp cost`` prints, as data (``--json`` prints exactly this).
    ``archives_given``: the endpoint names of ``--archives``; each must be a multi-model
    endpoint of the assembly."""
    from ml_platform_pricing.estimate import MULTI_MODEL_ASSUMPTION
    from ml_platform_pricing.table import aws_owned

    estimates = _estimates(stacks, table, region)
    comparisons, comparison_notes, multi_model = _multi_model_comparisons(
        estimates, table, archives
    )
    unknown = sorted(set(archives_given) - multi_model)
    if unknown:
        raise CliError(
            f"--archives {', '.join(unknown)}: no such multi-model endpoint in the "
            f"synthesized stacks; expected one of {sorted(multi_model) or 'none'}"
        )
    training = _training_summary(estimates, training_hours)
    total_h = sum(e.hourly for e in estimates)
    total_m = sum(e.monthly for e in estimates)
    incomplete = [i for e in estimates for i in e.incomplete]
    sources = sorted(
        {
            (p["source"], p["taken"])
            for e in estimates
            for i in e.items
            for p in (x.to_dict() for x in i.prices)
        }
    )
    return {
        "currency": "USD",
        "hours_per_month": 730,
        "total": {
            "hourly_usd": round(total_h, 4),
            "monthly_usd": round(total_m, 2),
            "ceiling_monthly_usd": round(sum(e.ceiling_monthly for e in estimates), 2),
            "complete": not incomplete,
            "not_counted": [f"{i.stack}/{i.logical_id} ({i.status})" for i in incomplete],
            "not_estimated": [f"{e.stack}/{note}" for e in estimates for note in e.not_estimated],
        },
        "stacks": [e.to_dict() for e in estimates],
        "multi_model": [c.to_dict() for c in comparisons],
        "multi_model_assumption": MULTI_MODEL_ASSUMPTION if comparisons else None,
        "multi_model_notes": comparison_notes,
        "sources": [
            {"source": src, "taken": taken, "third_party": not aws_owned(src)}
            for src, taken in sources
        ],
        "training": training,
        "unclassified_types": sorted({t for e in estimates for t in e.unclassified_types()}),
    }


def _estimates(stacks: list[Any], table: Any, region: str | None) -> list[StackEstimate]:
    """The estimate of each stack, in ``region`` or the stack's own."""
    from ml_platform_pricing import estimate_template

    estimates = []
    for stack in stacks:
        where = region or stack.region
        if where is None:
            raise CliError(f"stack {stack.name} is environment-agnostic: pass --region")
        estimates.append(
            estimate_template(
                stack.template,
                stack=stack.name,
                region=where,
                table=table,
                account=getattr(stack, "account", None),
            )
        )
    return estimates


def _multi_model_comparisons(
    estimates: list[StackEstimate], table: Any, archives: dict[str, int]
) -> tuple[list[MultiModelComparison], list[str], set[str]]:
    """Multi-model endpoints against one endpoint per archive (at the initial and at the
    maximum instance count), the notes on those that cannot be compared, and the names of
    every multi-model endpoint."""
    from ml_platform_pricing import compare_multi_model
    from ml_platform_pricing.table import SAGEMAKER_HOSTING

    comparisons: list[MultiModelComparison] = []
    comparison_notes: list[str] = []
    multi_model: set[str] = set()
    for estimate in estimates:
        for item in estimate.items:
            endpoint = item.endpoint or {}
            for variant in endpoint.get("variants", []):
                if not variant.get("multi_model"):
                    continue
                name = endpoint.get("name") or item.logical_id
                multi_model.add(name)
                count = archives.get(name)
                price = table.get(estimate.region, SAGEMAKER_HOSTING, variant["instance_type"])
                if count is None:
                    comparison_notes.append(f"{name}: archive count unknown (--archives {name}=N)")
                elif price is None:
                    comparison_notes.append(
                        f"{name}: no price for {variant['instance_type']} in {estimate.region}"
                    )
                else:
                    comparisons.append(
                        compare_multi_model(
                            name,
                            variant["instance_type"],
                            variant["initial_instances"],
                            count,
                            price,
                        )
                    )
                    maximum = variant.get("max_instances")
                    if maximum and maximum != variant["initial_instances"]:
                        comparisons.append(
                            compare_multi_model(
                                name, variant["instance_type"], maximum, count, price, "maximum"
                            )
                        )
    return comparisons, comparison_notes, multi_model


def _training_summary(
    estimates: list[StackEstimate], training_hours: float | None
) -> dict[str, Any]:
    """The training node groups' hourly cost, and a run's for ``training_hours``."""
    from ml_platform_pricing import training_hourly

    train_hourly, train_unknown = training_hourly(estimates)
    training: dict[str, Any] = {
        "node_groups": [i.logical_id for e in estimates for i in e.items if i.training],
        "hourly_usd": round(train_hourly, 4),
        "not_counted": [i.logical_id for i in train_unknown],
    }
    if training_hours is not None:
        training["run_hours"] = training_hours
        training["run_usd"] = round(train_hourly * training_hours, 2)
    return training


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _rate(value: float | None) -> str:
    if value is not None and 0 < value < 0.0005:
        return "<$0.001"
    return "-" if value is None else f"${value:,.3f}"


def render_text(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for stack in report["stacks"]:
        lines.append(
            f"{stack['stack']} ({stack['region']}): {_money(stack['hourly_usd'])}/hour, "
            f"{_money(stack['monthly_usd'])}/month"
            + ("" if stack["complete"] else "  [incomplete: see below]")
        )
        priced = [r for r in stack["resources"] if r["category"] == "priced"]
        width = max([36] + [len(r["logical_id"]) for r in priced])
        pad = f"  {'':<{width}} {'':>28}  "
        for r in priced:
            if r["status"] == "ok":
                figure = f"{_rate(r['hourly_usd']):>10}/h {_money(r['monthly_usd']):>12}/mo"
            else:
                figure = f"{r['status'].upper():>12} {'':>15}"
            lines.append(f"  {r['logical_id']:<{width}} {figure}  {r['description']}")
            if "ceiling_monthly_usd" in r:
                lines.append(f"{pad}up to {_money(r['ceiling_monthly_usd'])}/mo at the maximum")
            if r.get("reason"):  # why missing or unknown, or the caveats of a priced line
                lines.append(f"{pad}{r['reason']}")
        usage = [r for r in stack["resources"] if r["category"] == "usage-based"]
        if usage:
            types = sorted({r["type"].split("::", 1)[1] for r in usage})
            lines.append(f"  usage-based (not estimated): {', '.join(types)}")
        unpriced = [r for r in stack["resources"] if r["category"] == "unclassified"]
        if unpriced:
            types = sorted({r["type"] for r in unpriced})
            lines.append(f"  unpriced (type unknown to the estimator): {', '.join(types)}")
        free = [r for r in stack["resources"] if r["category"] == "free"]
        lines.append(f"  free: {len(free)} resources")
        lines.append("")
    total = report["total"]
    lines.append(
        f"Total: {_money(total['hourly_usd'])}/hour, {_money(total['monthly_usd'])}/month "
        f"(730 h), up to {_money(total['ceiling_monthly_usd'])}/month at the maxima"
    )
    if not total["complete"]:
        why = "missing price or unknown value"
        if report["unclassified_types"]:
            why = "missing price, unknown value or unpriced type"
        lines.append(f"Not counted in the totals ({why}):")
        lines += [f"  {name}" for name in total["not_counted"]]
    if total["not_estimated"]:
        lines.append("Not estimated (charges the templates imply but do not fix):")
        lines += [f"  {note}" for note in total["not_estimated"]]
    for c in report["multi_model"]:
        lines.append(
            f"Multi-model endpoint {c['endpoint']} ({c['at']} size): {c['archives']} archives on "
            f"{c['instances']:g} x {c['instance_type']} = {_rate(c['configured_hourly_usd'])}/h; "
            f"one endpoint per archive = {_rate(c['single_model_endpoints_hourly_usd'])}/h; "
            f"saving {c['saving_percent']:.0f}%, {_money(c['saving_per_year_usd'])}/year"
        )
    if report.get("multi_model_assumption"):
        lines.append(f"  The comparison {report['multi_model_assumption']}.")
    for note in report["multi_model_notes"]:
        lines.append(f"Multi-model comparison not possible: {note}")
    training = report["training"]
    if training["node_groups"]:
        text = f"Training node groups: {_money(training['hourly_usd'])}/hour"
        if "run_usd" in training:
            text += f"; a {training['run_hours']:g}-hour run: {_money(training['run_usd'])}"
        if training["not_counted"]:
            text += f" (not counted: {', '.join(training['not_counted'])})"
        lines.append(text)
    if report["unclassified_types"]:
        lines.append(
            "Unpriced resource types (the estimator has no rule for them; their resources are "
            "not counted): " + ", ".join(report["unclassified_types"])
        )
    if report["sources"]:
        lines.append("Prices from:")
        lines += [
            f"  {s['source']} (taken {s['taken']})"
            + (" [third-party: replace with `mlp cost --refresh`]" if s["third_party"] else "")
            for s in report["sources"]
        ]
    return "\n".join(lines)


def _refresh(ctx: Context, args: argparse.Namespace, stacks: list[Any], target: Path) -> Any:
    from ml_platform_pricing.refresh import DEFAULT_REGIONS, PRICING_API_REGION, rebuild

    if args.refresh_regions:
        regions = [r.strip() for r in args.refresh_regions.split(",") if r.strip()]
    else:
        regions = list(DEFAULT_REGIONS)
        regions += [s.region for s in stacks if s.region and s.region not in regions]
    if ctx.region_override and ctx.region_override not in regions:
        regions.append(ctx.region_override)
    types = _instance_types(stacks)
    client = ctx.client("pricing", PRICING_API_REGION)
    table, missing = rebuild(
        client, regions, types, progress=lambda line: print(line, file=sys.stderr)
    )
    table.write(target)
    print(
        f"wrote {len(table.prices)} prices to {target}; {len(missing)} not found "
        "(reported as missing)",
        file=sys.stderr,
    )
    return table


def _instance_types(stacks: list[Any]) -> set[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("InstanceType", "InstanceTypes"):
                    for v in inner if isinstance(inner, list) else [inner]:
                        if isinstance(v, str):
                            found.add(v)
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for stack in stacks:
        walk(stack.template.get("Resources", {}))
    return found


def load_table(path: Path, flag: str) -> Any:
    """The price table at ``path``, or a one-line error naming ``flag``, the file and why."""
    from ml_platform_pricing import PriceTable

    if path.is_dir():
        raise CliError(f"{flag} {path}: is a directory, expected a prices.json file")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CliError(f"{flag} {path}: no such file") from None
    except OSError as error:
        raise CliError(f"{flag} {path}: cannot read it ({error.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CliError(
            f"{flag} {path}: not JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    try:
        return PriceTable.from_dict(data)
    except (ValueError, KeyError, TypeError) as error:
        raise CliError(f"{flag} {path}: not a price table: {error}") from None


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ml_platform_pricing import PriceTable
    from ml_platform_pricing.assembly import AssemblyError, read_assembly
    from ml_platform_pricing.table import user_table_path

    # Flags first, before any file is priced: an explicit --cdk-json must be read, --region
    # must be a region, --stack-prefix a stack prefix (each names its flag).
    ctx.check_cdk_json()
    region = ctx.region if ctx.region_override is not None else None
    prefix = ctx.stack_prefix if ctx.stack_prefix_override is not None else None
    if ctx.cdk_json_given:
        ctx.settings  # noqa: B018 - reads and checks the file now
    try:
        stacks = read_assembly(args.cdk_out)
    except FileNotFoundError as error:
        raise CliError(str(error)) from None
    except AssemblyError as error:
        raise CliError(f"--cdk-out {args.cdk_out}: {error}") from None
    if not stacks:
        raise CliError(f"{args.cdk_out}: no CloudFormation stacks in the cloud assembly")
    if prefix is not None:
        chosen = [s for s in stacks if s.name.startswith(f"{prefix}-")]
        if not chosen:
            names = ", ".join(s.name for s in stacks)
            raise CliError(
                f"--stack-prefix {prefix}: no stack named {prefix}-* in {args.cdk_out} "
                f"(its stacks: {names})"
            )
        stacks = chosen
    if args.prices:  # exactly that table
        target = Path(args.prices)
        table = (
            _refresh(ctx, args, stacks, target) if args.refresh else load_table(target, "--prices")
        )
    else:
        # The shipped table, with what `--refresh` wrote to the user's own path over it.
        user = user_table_path()
        table = PriceTable.load()
        if args.refresh:
            user.parent.mkdir(parents=True, exist_ok=True)
            table = table.overlay(_refresh(ctx, args, stacks, user))
        elif user.is_file():
            table = table.overlay(load_table(user, "refreshed price table"))
            print(
                f"prices: the shipped table, with {user} (from `mlp cost --refresh`) over it",
                file=sys.stderr,
            )
    report = build_report(
        stacks,
        table,
        region=region,
        archives=_archives(ctx, args),
        training_hours=args.training_hours,
        archives_given=tuple(a.partition("=")[0] for a in args.archives),
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render_text(report))
    return 0
