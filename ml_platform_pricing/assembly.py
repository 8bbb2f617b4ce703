"""Templates to estimate: the stacks of a synthesized cloud assembly, or a stack in memory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StackTemplate:
    name: str
    region: str | None  # None when the stack is environment-agnostic
    template: dict[str, Any]
    account: str | None = None  # None when the stack is environment-agnostic


class AssemblyError(ValueError):
    """A file of the cloud assembly is missing, unreadable or not the JSON object expected;
    the message names the file."""


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AssemblyError(f"{path}: no such file") from None
    except OSError as error:
        raise AssemblyError(f"{path}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise AssemblyError(f"{path}: not UTF-8 text") from None
    except (ValueError, RecursionError) as error:
        raise AssemblyError(f"{path}: not valid JSON ({str(error)[:120]})") from None
    if not isinstance(data, dict):
        raise AssemblyError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_assembly(outdir: str | Path) -> list[StackTemplate]:
    """Every CloudFormation stack in ``outdir``/manifest.json, with its region and template."""
    outdir = Path(outdir)
    manifest_path = outdir / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: no cloud assembly (run `make synth` first)")
    manifest = _json_object(manifest_path)
    artifacts = manifest.get("artifacts", {})
    if not isinstance(artifacts, dict) or not all(isinstance(a, dict) for a in artifacts.values()):
        raise AssemblyError(f"{manifest_path}: 'artifacts' is not an object of objects")
    stacks = []
    for name, artifact in artifacts.items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        template_file = artifact.get("properties", {}).get("templateFile", f"{name}.template.json")
        template = _json_object(outdir / template_file)
        env = artifact.get("environment", "")
        account, _, region = (
            env[len("aws://") :].partition("/") if env.startswith("aws://") else (None, "", None)
        )
        stacks.append(
            StackTemplate(
                artifact.get("displayName", name),
                None if region == "unknown-region" else region,
                template,
                None if account in (None, "unknown-account") else account,
            )
        )
    # Nested cloud assemblies (stages) hold more stacks.
    for artifact in manifest.get("artifacts", {}).values():
        if artifact.get("type") == "cdk:cloud-assembly":
            stacks += read_assembly(outdir / artifact["properties"]["directoryName"])
    return stacks


# Types whose properties the estimator reads; the others need only their type.
_READ_PROPERTIES = frozenset(
    {
        "AWS::EKS::Cluster",
        "AWS::EKS::Nodegroup",
        "AWS::EC2::LaunchTemplate",
        "AWS::SageMaker::Endpoint",
        "AWS::SageMaker::EndpointConfig",
        "AWS::SageMaker::Model",
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::FSx::FileSystem",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::VPCEndpoint",
        "AWS::KMS::Key",
        "AWS::CloudWatch::Alarm",
        "AWS::Logs::MetricFilter",
        "AWS::CloudWatch::Dashboard",
        "AWS::SecretsManager::Secret",
        "AWS::EKS::Addon",
    }
)


def template_in_memory(stack: Any, *, priced_only: bool = False) -> dict[str, Any]:
    """The resources of a CDK ``stack`` as they will synthesize, without synthesizing.

    Built from each L1 resource's properties (``_cfn_properties`` and ``_render_properties``
    are the jsii protected members every ``CfnResource`` exposes), resolved in the stack, for
    the types the estimator reads. A property only synthesis can resolve (a cross-stack
    reference) becomes an ``Fn::ImportValue`` marker, which the estimator reports as unknown.
    Property overrides (``add_property_override``) are not seen. ``priced_only`` leaves out
    the resources whose type the estimate does not read (they cost nothing in a total); it
    halves the jsii round trips, which is what synth-time annotation uses.
    """
    import aws_cdk as cdk

    resources: dict[str, Any] = {}
    parameters: dict[str, Any] = {}
    # Type checks run in Python first: every jsii call costs a round trip to Node.
    for child in stack.node.find_all():
        if isinstance(child, cdk.CfnResource):
            type_ = child.cfn_resource_type
            if (priced_only and type_ not in _READ_PROPERTIES) or child.stack is not stack:
                continue
            props = _properties(stack, child) if type_ in _READ_PROPERTIES else {}
            resources[stack.resolve(child.logical_id)] = {"Type": type_, "Properties": props}
        elif isinstance(child, cdk.CfnParameter) and child.stack is stack:
            parameters[stack.resolve(child.logical_id)] = {"Type": child.type}
    return {"Resources": resources, "Parameters": parameters}


def _properties(stack: Any, child: Any) -> dict[str, Any]:
    try:
        return stack.resolve(child._render_properties(stack.resolve(child._cfn_properties))) or {}
    except Exception:  # a value only synthesis resolves: render key by key
        pass
    out: dict[str, Any] = {}
    for key, value in (child._cfn_properties or {}).items():
        try:
            resolved = stack.resolve(value)
            rendered = stack.resolve(child._render_properties({key: resolved})) or {}
        except Exception:
            rendered = {key[:1].upper() + key[1:]: {"Fn::ImportValue": "unresolved at synth"}}
        out.update(rendered)
    return out
