"""The create-order walk over a synthesized cloud assembly (used by the platform and library
tests).

For every ``AWS::FSx::FileSystem`` and ``AWS::EKS::Nodegroup`` of every template: the security
groups it uses (the file system's ``SecurityGroupIds``; a node group's launch template, in its
stack or imported, with ``SecurityGroupIds`` and every network interface's ``Groups``, plus
``RemoteAccess.SourceSecurityGroups``), and every ``AWS::EC2::SecurityGroupIngress``/``Egress``
resource anywhere in the assembly whose group, source or destination is one of them. Such a
rule must exist before the resource is created:

- in the same template: in the resource's transitive dependencies (``DependsOn``, ``Ref`` and
  ``Fn::GetAtt``, which CloudFormation orders by);
- in another template: in a stack the resource's stack depends on (transitively);
- or in a stack deployed after the resource's, only when that rule connects one of the
  resource's groups to a group the resource does not use: a connection made for a later
  client (the Trainium nodes' control-plane rules on the cluster group, seen from the system
  nodes). A rule among the resource's own groups (the Lustre self rules, the EFA self rules)
  is always needed at create time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RULE_TYPES = ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
RULE_PEER = {
    "AWS::EC2::SecurityGroupIngress": "SourceSecurityGroupId",
    "AWS::EC2::SecurityGroupEgress": "DestinationSecurityGroupId",
}

Group = tuple[str, str, str]  # (stack, logical id, attribute) of the group's id
Rule = tuple[str, str]  # (stack, logical id)


@dataclass
class Assembly:
    templates: dict[str, dict[str, Any]]
    stack_deps: dict[str, set[str]]  # stack -> stacks it depends on, transitively
    exports: dict[str, tuple[str, Any]] = field(default_factory=dict)  # name -> (stack, value)

    @classmethod
    def load(cls, outdir: Path) -> Assembly:
        manifest = json.loads((outdir / "manifest.json").read_text())
        stacks = {
            name: art
            for name, art in manifest["artifacts"].items()
            if art["type"] == "aws:cloudformation:stack"
        }
        templates = {
            name: json.loads((outdir / art["properties"]["templateFile"]).read_text())
            for name, art in stacks.items()
        }
        direct = {
            n: {d for d in a.get("dependencies", []) if d in stacks} for n, a in stacks.items()
        }
        deps: dict[str, set[str]] = {}

        def closure(name: str) -> set[str]:
            if name not in deps:
                deps[name] = set()
                for d in direct[name]:
                    deps[name] |= {d} | closure(d)
            return deps[name]

        for name in stacks:
            closure(name)
        out = cls(templates=templates, stack_deps=deps)
        for name, template in templates.items():
            for output in template.get("Outputs", {}).values():
                export = output.get("Export", {}).get("Name")
                if isinstance(export, str):
                    out.exports[export] = (name, output["Value"])
        return out

    def group(self, stack: str, value: Any) -> Group | None:
        """Which group a ``GroupId``-like value means, wherever the group is defined."""
        if isinstance(value, dict) and "Fn::ImportValue" in value:
            name = value["Fn::ImportValue"]
            if isinstance(name, str) and name in self.exports:
                return self.group(*self.exports[name])
            return None
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            logical, attr = value["Fn::GetAtt"]
            return (stack, logical, attr)
        if isinstance(value, dict) and "Ref" in value:
            return (stack, value["Ref"], "Ref")
        if isinstance(value, str):
            return ("", value, "literal")  # a group id given as text
        return None

    def resource(self, stack: str, value: Any) -> tuple[str, str] | None:
        """The (stack, logical id) a ``Ref``/``GetAtt``/import points to."""
        group = self.group(stack, value)
        return None if group is None or group[2] == "literal" else group[:2]


def _refs(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        if "Ref" in node and isinstance(node["Ref"], str):
            out.add(node["Ref"])
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            out.add(target[0] if isinstance(target, list) else str(target).split(".")[0])
        for v in node.values():
            out |= _refs(v)
    elif isinstance(node, list):
        for v in node:
            out |= _refs(v)
    return out


def dependencies(template: dict[str, Any], logical: str) -> set[str]:
    """Every resource ``logical`` waits for in its template: DependsOn, Ref and GetAtt,
    transitively."""
    resources = template["Resources"]
    seen: set[str] = set()
    todo = [logical]
    while todo:
        body = resources.get(todo.pop(), {})
        depends = body.get("DependsOn", [])
        direct = ({depends} if isinstance(depends, str) else set(depends)) | _refs(
            body.get("Properties", {})
        )
        for d in direct & set(resources):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def groups_used(asm: Assembly, stack: str, body: dict[str, Any]) -> list[Any]:
    """The group-id values an FSx file system or a node group is created with."""
    props = body.get("Properties", {})
    if body["Type"] == "AWS::FSx::FileSystem":
        return list(props.get("SecurityGroupIds", []))
    values = list(props.get("RemoteAccess", {}).get("SourceSecurityGroups", []))
    spec = props.get("LaunchTemplate")
    if spec:
        target = asm.resource(stack, spec.get("Id", spec.get("Name")))
        if target is not None:
            lt_stack, lt_id = target
            data = asm.templates[lt_stack]["Resources"][lt_id]["Properties"]["LaunchTemplateData"]
            found = list(data.get("SecurityGroupIds", []))
            for interface in data.get("NetworkInterfaces", []):
                found += interface.get("Groups", [])
            # Values read from the launch template's own stack.
            return values + [(lt_stack, v) for v in found]
    return values


@dataclass
class Finding:
    resource: tuple[str, str, str]  # stack, logical id, type
    groups: set[Group]
    rules: dict[Rule, str]  # rule -> how it is ordered ("depends on", "earlier stack", ...)
    problems: list[str]


def walk(outdir: Path) -> list[Finding]:
    asm = Assembly.load(outdir)
    rules: list[tuple[Rule, set[Group]]] = []
    for stack, template in asm.templates.items():
        for logical, body in template.get("Resources", {}).items():
            if body["Type"] in RULE_TYPES:
                props = body.get("Properties", {})
                named = {
                    asm.group(stack, props.get("GroupId")),
                    asm.group(stack, props.get(RULE_PEER[body["Type"]])),
                } - {None}
                rules.append(((stack, logical), named))  # type: ignore[arg-type]
    findings = []
    for stack, template in asm.templates.items():
        for logical, body in template.get("Resources", {}).items():
            if body["Type"] not in ("AWS::FSx::FileSystem", "AWS::EKS::Nodegroup"):
                continue
            groups: set[Group] = set()
            for value in groups_used(asm, stack, body):
                where, value = value if isinstance(value, tuple) else (stack, value)
                group = asm.group(where, value)
                if group is not None:
                    groups.add(group)
            before = dependencies(template, logical)
            ordered: dict[Rule, str] = {}
            problems = []
            for rule, named in rules:
                if not named & groups:
                    continue
                rule_stack, rule_id = rule
                if rule_stack == stack:
                    if rule_id in before:
                        ordered[rule] = "depends on"
                    else:
                        problems.append(f"{stack}/{rule_id} is not in {logical}'s dependencies")
                elif rule_stack in asm.stack_deps[stack]:
                    ordered[rule] = "earlier stack"
                elif stack in asm.stack_deps[rule_stack] and named - groups:
                    ordered[rule] = "later stack, to a group the resource does not use"
                else:
                    problems.append(
                        f"{rule_stack}/{rule_id} is in a stack not deployed before {stack}"
                    )
            findings.append(Finding((stack, logical, body["Type"]), groups, ordered, problems))
    return findings
