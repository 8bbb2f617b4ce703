"""Helpers for acknowledging cdk-nag findings precisely, next to the code they excuse, and the
AWS managed policies those findings name."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct


def rendered_resource(scope: IConstruct, value: str) -> str:
    """How cdk-nag writes ``value`` (an ARN, maybe a token) in a finding id.

    Plain strings stay as they are, ``Fn::GetAtt`` becomes ``<LogicalId.Attr>``, ``Ref``
    ``<LogicalId>``, ``Fn::ImportValue`` its export name, and ``Fn::Join`` the join of its parts.
    """
    return _render(Stack.of(scope).resolve(value))


def _render(node: Any) -> str:
    if isinstance(node, str):
        return str(node)
    if isinstance(node, dict) and len(node) == 1:
        ((fn, arg),) = node.items()
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::ImportValue":
            return _render(arg)
        if fn == "Fn::Join":
            return str(arg[0]).join(_render(part) for part in arg[1])
    raise ValueError(f"cannot render {node!r} as cdk-nag does; acknowledge it explicitly")


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (full id, e.g. ``AwsSolutions-IAM5[Resource::*]``)."""
    acknowledge_each(scope, {finding: reason})


def acknowledge_each(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """Acknowledge several cdk-nag findings on one construct, in order (finding id to reason).

    The same as one :func:`acknowledge` per finding, in two calls into jsii instead of two per
    finding: a construct's findings are acknowledged together where they are known together.
    """
    for finding, reason in reasons.items():
        if not reason.strip():
            raise ValueError(f"{scope.node.path}: acknowledging {finding} needs a reason")
    Validations.of(scope).acknowledge(
        *(Acknowledgment(id=finding, reason=reason) for finding, reason in reasons.items())
    )


@functools.cache
def aws_managed_policy(name: str) -> iam.IManagedPolicy:
    """The AWS managed policy ``name``, made once: it is no construct (its ARN resolves to the
    partition of whichever stack uses it), so every role can share it."""
    return iam.ManagedPolicy.from_aws_managed_policy_name(name)


def managed_policy_finding(policy: str) -> str:
    """cdk-nag's finding id for an AWS managed policy on a role."""
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]"


#: The name under which aws-cdk reports the Control Tower proactive controls run by
#: ``cdklabs-cdk-validator-cfnguard`` (its plugin name; findings are ``<name>::<rule>``).
GUARD_PLUGIN = "cdk-validator-cfnguard"

#: Control Tower proactive controls the platform acknowledges somewhere, by control id, with
#: the Guard rule that implements each in the plugin's bundled rule files
#: (``rules/control-tower/cfn-guard/<service>/ct-<service>-pr-<n>.guard``; a test reads them).
CONTROL_RULES: Mapping[str, str] = {
    "CT.CLOUDWATCH.PR.1": "cloudwatch_alarm_action_check",
    "CT.CLOUDWATCH.PR.2": "cloudwatch_log_group_retention_period_check",
    "CT.CLOUDWATCH.PR.3": "cloudwatch_log_group_encrypted_check",
    "CT.EC2.PR.9": "ec2_launch_template_public_ip_disabled_check",
    "CT.LAMBDA.PR.3": "lambda_inside_vpc_check",
    "CT.S3.PR.2": "s3_bucket_logging_enabled_check",
    "CT.S3.PR.4": "s3_event_notifications_enabled_check",
    "CT.S3.PR.9": "s3_bucket_object_lock_enabled_check",
    "CT.S3.PR.10": "s3_bucket_default_encryption_kms_check",
}


def control_finding(control: str) -> str:
    """aws-cdk's finding id of Control Tower control ``control`` (e.g. ``CT.KMS.PR.3``)."""
    return f"{GUARD_PLUGIN}::{CONTROL_RULES[control]}"


def acknowledge_controls(scope: IConstruct, reasons: Mapping[str, str]) -> None:
    """Accept Control Tower findings (control id to reason) on ``scope``: the resource they
    concern, never a stack (aws-cdk applies an acknowledgment to the construct and all below
    it, so a stack-wide one would hide every new resource's finding)."""
    acknowledge_each(scope, {control_finding(c): reason for c, reason in reasons.items()})
