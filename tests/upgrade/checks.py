"""What breaks a ``cdk deploy --all`` from one release's templates to the next one's.

Compares two sets of synthesized templates (stack short name -> template) and names each
change CloudFormation refuses, or that loses data or traffic on the way:

* ``export-dropped``: an export the old templates import is gone. CloudFormation refuses to
  delete an export another stack imports, so the exporting stack's update rolls back.
* ``export-changed``: an imported export now resolves to something else; CloudFormation
  refuses to change an export in use too.
* ``create-only``: a create-only property (``createOnlyProperties`` of the resource's
  provider schema, as cfn-lint ships it) changes on a stateful or custom-named resource.
  The change means replacement: a new, empty resource for a stateful one, and for a custom
  name CloudFormation refuses ("cannot update a stack when a custom-named resource requires
  replacing").
* ``stateful-removed``: a stateful resource of the old templates is gone (or changed type).
* ``sg-rule-removed``: a security-group rule of the old templates is gone. The stacks update
  one after the other and a stack deletes what it drops at the end of its own update, so a
  rule removed in one stack is gone before a replacement in a later stack exists (nodes that
  carry the old group lose the traffic in between). Keep such rules one release, until the
  replacements are deployed.
* ``sg-rule-moved``: a rule of the old templates is now another resource (new logical ID or
  stack): CloudFormation creates the new one first, and EC2 refuses a duplicate rule.
* ``name-taken``: a new resource's fixed name is one the old templates use without creating
  it (so it exists outside the stack): the create fails with "already exists".
* ``release-pinned``: a managed node group that had no ``ReleaseVersion`` (EKS gave it the
  newest AMI of its create day, or of its last update) now names one, or names an earlier one
  than before. EKS refuses to move a node group to an earlier AMI ("You cannot roll back a node
  group to an earlier Kubernetes version or AMI version", EKS API reference,
  ``UpdateNodegroupVersion``), so whenever the group already runs a newer release the update
  fails and the stack rolls back. From a template alone the running release is unknown: a
  pinned release is a finding unless it only moves forward from an earlier pin.

Each finding has a stable id (``kind location detail``) for the upgrade guide to accept.
Resources and exports are compared by logical ID and by what a reference resolves to
(``stack/LogicalId.Attribute``), so an export renamed for the same value is not a finding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Templates = Mapping[str, Mapping[str, Any]]
"""Stack short name (``Storage``) -> CloudFormation template."""

STATEFUL_TYPES = frozenset(
    {
        "AWS::FSx::FileSystem",
        "AWS::S3::Bucket",
        "AWS::ECR::Repository",
        "AWS::KMS::Key",
        "AWS::Logs::LogGroup",
        "AWS::EKS::Cluster",
        "AWS::SageMaker::Endpoint",
        "AWS::DynamoDB::Table",
        "AWS::EFS::FileSystem",
        "AWS::SecretsManager::Secret",
    }
)
"""Resources whose replacement or removal loses data or in-resource state (the platform's own
stateful types, whose logical IDs tests/app/test_stateful_ids.py pins, plus common ones a
user's app may add).
An endpoint config is left out: it holds no data, and an unnamed one is replaced on every
change by design (the endpoint moves to the new config)."""

_RULE_TYPES = {
    "AWS::EC2::SecurityGroupIngress": "ingress",
    "AWS::EC2::SecurityGroupEgress": "egress",
}
_PEER_KEYS = (
    "SourceSecurityGroupId",
    "DestinationSecurityGroupId",
    "CidrIp",
    "CidrIpv6",
    "SourcePrefixListId",
    "DestinationPrefixListId",
)
_PROTOCOLS = {"6": "tcp", "17": "udp", "1": "icmp", "58": "icmpv6"}


@dataclass(frozen=True)
class Finding:
    kind: str
    where: str  # stack/LogicalId, or the export name
    detail: str = ""

    @property
    def id(self) -> str:
        return " ".join(p for p in (self.kind, self.where, self.detail) if p)


def breaking_changes(old: Templates, new: Templates, region: str = "us-west-2") -> list[Finding]:
    """Every finding of the module docstring's kinds, sorted by id."""
    findings = [
        *_exports(old, new),
        *_resources(old, new, region),
        *_rules(old, new),
        *_names_taken(old, new, region),
        *_release_pins(old, new),
    ]
    return sorted(set(findings), key=lambda f: f.id)


# --- references ------------------------------------------------------------------------------


def _exports_of(templates: Templates) -> dict[str, tuple[str, Any]]:
    """Export name -> (stack, the output's value)."""
    out: dict[str, tuple[str, Any]] = {}
    for stack, template in templates.items():
        for output in template.get("Outputs", {}).values():
            name = output.get("Export", {}).get("Name")
            if isinstance(name, str):
                out[name] = (stack, output["Value"])
    return out


def _canon(value: Any, stack: str, exports: Mapping[str, tuple[str, Any]], depth: int = 0) -> Any:
    """``value`` with references written as what they point at: ``Ref``/``Fn::GetAtt`` as
    ``stack/LogicalId[.Attribute]``, ``Fn::ImportValue`` as the exported value's canon."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref" and isinstance(arg, str):
            return arg if arg.startswith("AWS::") else f"{stack}/{arg}"
        if key == "Fn::GetAtt" and isinstance(arg, list) and len(arg) == 2:
            return f"{stack}/{arg[0]}.{arg[1]}"
        if key == "Fn::ImportValue" and isinstance(arg, str) and arg in exports and depth < 5:
            source, exported = exports[arg]
            return _canon(exported, source, exports, depth + 1)
    if isinstance(value, dict):
        return {k: _canon(v, stack, exports, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [_canon(v, stack, exports, depth) for v in value]
    return value


def _imports(templates: Templates) -> Iterator[tuple[str, str]]:
    """(importing stack, export name) of every ``Fn::ImportValue`` with a literal name."""
    pattern = re.compile(r'"Fn::ImportValue": "([^"]+)"')
    for stack, template in templates.items():
        for name in pattern.findall(json.dumps(template.get("Resources", {}))):
            yield stack, name
        for name in pattern.findall(json.dumps(template.get("Outputs", {}))):
            yield stack, name


# --- the checks ------------------------------------------------------------------------------


def _exports(old: Templates, new: Templates) -> Iterator[Finding]:
    old_exports, new_exports = _exports_of(old), _exports_of(new)
    for importer, name in sorted(set(_imports(old))):
        if name not in old_exports:
            continue  # exported by a stack outside these templates
        if name not in new_exports:
            yield Finding("export-dropped", name, f"imported by {importer}")
            continue
        before = _canon(old_exports[name][1], old_exports[name][0], old_exports)
        after = _canon(new_exports[name][1], new_exports[name][0], new_exports)
        if before != after:
            yield Finding("export-changed", name, f"imported by {importer}")


def _pointer_values(properties: Any, pointer: str) -> list[Any]:
    """The values at a provider-schema pointer (``/properties/A/B``, ``*`` for list items);
    an unset property is ``None``."""
    parts = pointer.split("/")[2:]
    values: list[Any] = [properties]
    for part in parts:
        nxt: list[Any] = []
        for value in values:
            if part == "*":
                nxt.extend(value if isinstance(value, list) else [None])
            elif isinstance(value, dict):
                nxt.append(value.get(part))
            else:
                nxt.append(None)
        values = nxt
    return values


def create_only_properties(resource_type: str, region: str = "us-west-2") -> list[str]:
    """``createOnlyProperties`` of the type's provider schema, as cfn-lint ships it."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except Exception:  # not a registry type (Custom::...): CloudFormation cannot say
        return []
    return list(schema.get("createOnlyProperties", []))


def _custom_name(resource: Mapping[str, Any], create_only: list[str]) -> str | None:
    """The create-only property that fixes the resource's physical name, when set: ``Name``,
    ``<Type>Name`` or ``<last word of Type>Name`` (``BucketName``, ``LogGroupName``,
    ``GroupName`` of a security group, ``FilterName`` of a metric filter)."""
    properties = resource.get("Properties", {})
    suffix = str(resource.get("Type", "")).rsplit("::", 1)[-1]
    words = re.findall(r"[A-Z][a-z0-9]*", suffix)
    names = {"Name", f"{suffix}Name", f"{words[-1] if words else suffix}Name"}
    for pointer in create_only:
        parts = pointer.split("/")[2:]
        if len(parts) == 1 and parts[0] in names and properties.get(parts[0]) is not None:
            return parts[0]
    return None


def _resources(old: Templates, new: Templates, region: str) -> Iterator[Finding]:
    old_exports, new_exports = _exports_of(old), _exports_of(new)
    for stack, template in old.items():
        new_resources = new.get(stack, {}).get("Resources", {})
        for logical_id, resource in template.get("Resources", {}).items():
            kind = resource.get("Type", "")
            where = f"{stack}/{logical_id}"
            after = new_resources.get(logical_id)
            stateful = kind in STATEFUL_TYPES
            if after is None or after.get("Type") != kind:
                if stateful:
                    yield Finding("stateful-removed", where, kind)
                continue
            create_only = create_only_properties(kind, region)
            if not (stateful or _custom_name(resource, create_only)):
                continue
            for pointer in create_only:
                before = _canon(
                    _pointer_values(resource.get("Properties", {}), pointer), stack, old_exports
                )
                now = _canon(
                    _pointer_values(after.get("Properties", {}), pointer), stack, new_exports
                )
                if before != now:
                    yield Finding("create-only", where, pointer)


def _names_taken(old: Templates, new: Templates, region: str) -> Iterator[Finding]:
    """New resources whose fixed name the old templates use without creating it (a metric
    filter on a log group an AWS service made): the name exists outside the stack, so the
    create fails with "already exists" until the resource is imported."""
    old_text = json.dumps(old)
    for stack, template in new.items():
        before = old.get(stack, {}).get("Resources", {})
        for logical_id, resource in template.get("Resources", {}).items():
            if logical_id in before:
                continue
            prop = _custom_name(resource, create_only_properties(resource.get("Type", ""), region))
            value = resource.get("Properties", {}).get(prop) if prop else None
            if isinstance(value, str) and json.dumps(value) in old_text:
                yield Finding("name-taken", f"{stack}/{logical_id}", f"{prop} {value}")


@dataclass(frozen=True)
class Rule:
    direction: str
    group: str
    protocol: str
    ports: str
    peer: str

    def __str__(self) -> str:
        return f"{self.direction} {self.group} {self.protocol}:{self.ports} {self.peer}"


def _rule(direction: str, group: Any, props: Mapping[str, Any], canon: Any) -> Rule:
    protocol = str(props.get("IpProtocol", ""))
    protocol = _PROTOCOLS.get(protocol, protocol)
    ports = "all" if protocol == "-1" else f"{props.get('FromPort')}-{props.get('ToPort')}"
    peer = next((canon(props[k]) for k in _PEER_KEYS if k in props), None)
    return Rule(direction, json.dumps(canon(group)), protocol, ports, json.dumps(peer))


def security_group_rules(templates: Templates) -> dict[Rule, str]:
    """Every rule (standalone resources and inline ones) -> where the first is defined."""
    exports = _exports_of(templates)
    rules: dict[Rule, str] = {}
    for stack, template in templates.items():

        def canon(value: Any, stack: str = stack) -> Any:
            return _canon(value, stack, exports)

        for logical_id, resource in template.get("Resources", {}).items():
            kind, props = resource.get("Type"), resource.get("Properties", {})
            where = f"{stack}/{logical_id}"
            if kind in _RULE_TYPES:
                rule = _rule(_RULE_TYPES[kind], props.get("GroupId"), props, canon)
                rules.setdefault(rule, where)
            elif kind == "AWS::EC2::SecurityGroup":
                group = {"Fn::GetAtt": [logical_id, "GroupId"]}
                for key, direction in (
                    ("SecurityGroupIngress", "ingress"),
                    ("SecurityGroupEgress", "egress"),
                ):
                    for inline in props.get(key, []):
                        rules.setdefault(_rule(direction, group, inline, canon), where)
    return rules


def _rules(old: Templates, new: Templates) -> Iterator[Finding]:
    kept = security_group_rules(new)
    for rule, where in security_group_rules(old).items():
        ports = f"{rule.direction} {rule.protocol}:{rule.ports}"
        if rule not in kept:
            yield Finding("sg-rule-removed", where, ports)
        elif kept[rule] != where:
            # Same rule, new logical ID or stack: CloudFormation creates the new resource
            # before deleting the old, and EC2 refuses the duplicate rule.
            yield Finding("sg-rule-moved", where, f"{ports} to {kept[rule]}")


# --- baselines -------------------------------------------------------------------------------

_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalized_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """What a baseline keeps of a template: asset hashes replaced (they change with every
    build), construct metadata and the CDKMetadata resource dropped (no deploy effect)."""
    text = _HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True))
    out: dict[str, Any] = json.loads(text)
    resources = out.get("Resources", {})
    resources.pop("CDKMetadata", None)
    for resource in resources.values():
        resource.pop("Metadata", None)
    return out


# --- node group AMI releases ---------------------------------------------------------------


def _release_key(release: str) -> tuple[int, ...]:
    """``1.35.4-20260505`` -> (1, 35, 4, 20260505): EKS release versions order this way (the
    Kubernetes patch, then the AMI's build date)."""
    return tuple(int(part) for part in re.split(r"[.-]", release) if part.isdigit())


def _release_pins(old: Templates, new: Templates) -> Iterator[Finding]:
    for stack, template in old.items():
        new_resources = new.get(stack, {}).get("Resources", {})
        for logical_id, resource in template.get("Resources", {}).items():
            after = new_resources.get(logical_id)
            if resource.get("Type") != "AWS::EKS::Nodegroup" or after is None:
                continue
            before = resource.get("Properties", {}).get("ReleaseVersion")
            now = after.get("Properties", {}).get("ReleaseVersion")
            if not isinstance(now, str) or now == before:
                continue
            if not isinstance(before, str) or _release_key(now) < _release_key(before):
                yield Finding("release-pinned", f"{stack}/{logical_id}", f"ReleaseVersion {now}")
