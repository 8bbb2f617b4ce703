"""What the endpoint grants: its execution role's statements, and ``grant_invoke``'s
``sagemaker:TargetModel``-conditioned invoke statement within IAM's policy-size quotas."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from ml_platform.constructs._nag import acknowledge_each, rendered_resource
from ml_platform.sagemaker_images import TRITON_REPOSITORY, triton_account
from ml_platform.triton.archive_names import ARCHIVE_SUFFIX, ArchiveRef, parse_ref

# IAM quotas (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html):
# managed policy 6,144 characters, a role's inline policies 10,240 in all (whitespace not
# counted). One grant stays below the smaller, leaving room for the policy's envelope.
GRANT_POLICY_BUDGET = 6_000
_ARN_ALLOWANCE = 120  # a resolved endpoint ARN is longer than the {"Ref": ...} it replaces
_LOGICAL_GLOB = re.compile(r"^[a-z0-9*][a-z0-9_*-]{0,99}$")


def policy_size(stack: Stack, statement: iam.PolicyStatement) -> int:
    """Characters ``statement`` takes in a policy document (IAM does not count whitespace),
    with an allowance for the ARNs its tokens resolve to."""
    resolved = stack.resolve(statement.to_statement_json())
    return len(json.dumps(resolved, separators=(",", ":"))) + _ARN_ALLOWANCE


def _target_model_pattern(entry: str | ArchiveRef) -> str:
    """The ``sagemaker:TargetModel`` pattern of a reference or a logical-name pattern."""
    if isinstance(entry, ArchiveRef):
        return entry.key_pattern
    if isinstance(entry, str) and "*" in entry and "@" not in entry:
        if not _LOGICAL_GLOB.match(entry):
            raise ValueError(
                f"target_models: {entry!r} is not a logical-name pattern: expected lower-case "
                "letters, digits, '_', '-' and '*'"
            )
        return f"{entry}-v*{ARCHIVE_SUFFIX}"
    try:
        return parse_ref(entry).key_pattern
    except ValueError as error:
        raise ValueError(f"target_models: {error}") from None


def invoke_grant(
    endpoint: Construct,
    endpoint_arn: str,
    grantee: iam.IGrantable,
    target_models: Sequence[str | ArchiveRef] | None,
    archives: Sequence[ArchiveRef],
) -> iam.Grant:
    """``sagemaker:InvokeEndpoint`` on ``endpoint_arn`` for ``grantee``, conditioned on the
    ``sagemaker:TargetModel`` patterns of ``target_models`` (default: ``archives``); see
    :meth:`TritonMultiModelEndpoint.grant_invoke`."""
    path, stack = endpoint.node.path, Stack.of(endpoint)
    entries = list(target_models if target_models is not None else archives)
    if not entries:
        raise ValueError(f"{path}: grant_invoke: target_models must not be empty")
    patterns: list[str] = []
    errors: list[str] = []
    for entry in entries:
        try:
            patterns.append(_target_model_pattern(entry))
        except ValueError as error:
            errors.append(str(error))
    if errors:
        raise ValueError(f"{path}: grant_invoke: " + "; ".join(errors))
    patterns = sorted(set(patterns))
    actions = ["sagemaker:InvokeEndpoint"]
    conditions = {"StringLike": {"sagemaker:TargetModel": patterns}}
    statement = iam.PolicyStatement(
        actions=actions, resources=[endpoint_arn], conditions=conditions
    )
    size = policy_size(stack, statement)
    if size > GRANT_POLICY_BUDGET:
        raise ValueError(
            f"{path}: grant_invoke: {len(patterns)} target models make a "
            f"{size:,}-character statement; IAM allows 6,144 characters per managed policy "
            f"and 10,240 for all inline policies of a role, so one grant may use at most "
            f"{GRANT_POLICY_BUDGET:,}: grant logical-name patterns such as 'team_a_*' "
            "(name archives with a shared prefix) instead of listing each archive"
        )
    # The statement measured above, as the grant adds it to the grantee's policy.
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=actions, resource_arns=[endpoint_arn], conditions=conditions
    )


def grant_image_pull(scope: Construct, role: iam.IRole, region: str, triton_version: str) -> None:
    """Pull SageMaker's Triton image of ``triton_version`` in ``region`` (its account's
    repository only)."""
    partition = Stack.of(scope).partition
    account = triton_account(region, triton_version)
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
                "ecr:BatchCheckLayerAvailability",
            ],
            resources=[f"arn:{partition}:ecr:{region}:{account}:repository/{TRITON_REPOSITORY}"],
        )
    )


def grant_registry_token(role: iam.IRole) -> None:
    """``ecr:GetAuthorizationToken``, which has no resource-level permission."""
    token_statement = iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
    role.add_to_principal_policy(token_statement)


def grant_logs_and_metrics(
    scope: Construct, role: iam.IRole, log_group_arns: Sequence[str], archives_arn: str
) -> None:
    """Write the endpoint's own log group and SageMaker's metric namespaces; the cdk-nag
    findings on the role's wildcards, each with why."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "logs:DescribeLogStreams",
            ],
            resources=list(log_group_arns),
        )
    )
    reasons = {
        f"AwsSolutions-IAM5[Resource::{rendered_resource(scope, arn)}]": (
            "SageMaker names the log streams of an endpoint after its instances; the "
            "wildcard covers only the streams of this endpoint's own log group."
        )
        for arn in log_group_arns
    }
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={
                "StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}
            },
        )
    )
    reasons["AwsSolutions-IAM5[Resource::*]"] = (
        "ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level "
        "permissions; PutMetricData is limited to SageMaker's namespaces by condition."
    )
    reasons[f"AwsSolutions-IAM5[Resource::{rendered_resource(scope, archives_arn)}]"] = (
        "A multi-model endpoint loads any archive under its prefix on demand: read access "
        "is to that prefix only, with s3:GetObject alone."
    )
    acknowledge_each(role, reasons)


def sagemaker_trust_conditions(scope: Construct) -> dict[str, Any]:
    """Confused-deputy guard on an execution role SageMaker hosting assumes: only SageMaker
    acting for this account and region. For real-time inference AWS documents exactly the
    source ARN ``arn:<partition>:sagemaker:<region>:<account>:*`` and says not to narrow it to
    a model or endpoint ARN (CreateModel and endpoints would fail to assume the role).
    https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html
    (section "SageMaker AI Inference")."""
    stack = Stack.of(scope)
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": stack.format_arn(service="sagemaker", resource="*")},
    }
