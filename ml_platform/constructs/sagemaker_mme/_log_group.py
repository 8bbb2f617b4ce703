"""The endpoint's log group: its name, and the stack's shared key that encrypts it."""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs.network import FLOW_LOG_KEY_ACTIONS

LOG_KEY_ID = "EndpointLogsKey"


def shared_log_key(scope: Construct, removal_policy: RemovalPolicy) -> kms.IKey:
    """The stack's key for endpoint log groups, created on first use. One key per stack, not
    per endpoint: a stack holds 30 endpoints within CloudFormation's 500 resources.

    Its policy lets CloudWatch Logs of the stack's region use it under the
    ``kms:EncryptionContext:aws:logs:arn`` condition, for SageMaker endpoint log groups of this
    account only (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
    """
    stack = Stack.of(scope)
    found = stack.node.try_find_child(LOG_KEY_ID)
    if isinstance(found, kms.Key):
        return found
    key = kms.Key(
        stack,
        LOG_KEY_ID,
        description="Encryption of the SageMaker endpoint log groups of this stack",
        enable_key_rotation=True,
        removal_policy=removal_policy,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfEndpointLogGroups",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=list(FLOW_LOG_KEY_ACTIONS),
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=endpoint_log_group_name("*"),
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    restrict_grants(key)
    return key


def endpoint_log_group_name(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's container logs to.
    https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html"""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def endpoint_log_group_arns(scope: Construct, endpoint_name: str) -> list[str]:
    """ARNs of the endpoint's log group (``:*``) and of its streams (``:log-stream:*``).
    Typed arguments: a plain dict given to a jsii struct parameter silently loses its
    snake_case keys (resource_name, arn_format)."""
    stack = Stack.of(scope)
    log_group = endpoint_log_group_name(endpoint_name)
    return [
        stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{log_group}{suffix}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for suffix in (":*", ":log-stream:*")
    ]
