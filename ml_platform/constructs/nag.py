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
