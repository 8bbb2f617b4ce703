"""EndpointScalingProvider on its own: one per stack, its handler, its role's exact
statements, what it is wired to, and what serve() adds."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs._endpoint_scaling import (
    HANDLER_DIR,
    PROVIDER_ID,
    SCALING_TAG_KEY,
    EndpointScalingProvider,
)

REGION, ACCOUNT = "us-west-2", "123456789012"
PARTITION = {"Ref": "AWS::Partition"}


def arn(tail: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", PARTITION, tail]]}


def _stack(name: str = "S") -> cdk.Stack:
    return cdk.Stack(new_app(), name, env=cdk.Environment(account=ACCOUNT, region=REGION))


def _resources(stack: cdk.Stack, kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = Template.from_stack(stack).find_resources(kind)
    return found


def _id(stack: cdk.Stack, construct: Any) -> str:
    return str(stack.get_logical_id(construct.node.default_child))


def _handler_statements(stack: cdk.Stack, provider: EndpointScalingProvider) -> list[Any]:
    role_id = _id(stack, provider.handler.role)
    (policy,) = [
        p
        for p in _resources(stack, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    statements: list[Any] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


@pytest.fixture(scope="module")
def served() -> tuple[cdk.Stack, EndpointScalingProvider]:
    stack = _stack()
    provider = EndpointScalingProvider.of(stack)
    provider.serve("Team-A", "AllTraffic")
    provider.serve("team-b", "AllTraffic")
    provider.serve("Team-A", "AllTraffic")  # again: no second resource
    return stack, provider


def test_one_provider_per_stack_at_the_stack_root() -> None:
    one, other = _stack("One"), _stack("Other")
    inner = cdk.Stack(one, "Inner")  # a nested scope of its own stack
    provider = EndpointScalingProvider.of(one)
    assert EndpointScalingProvider.of(cdk.CfnResource(one, "R", type="X::Y::Z")) is provider
    assert provider.node.path == f"One/{PROVIDER_ID}"
    assert EndpointScalingProvider.of(other) is not provider
    assert EndpointScalingProvider.of(inner).node.path == f"One/Inner/{PROVIDER_ID}"
    assert provider.tag_value == "One"


def test_the_handler_function(served: tuple[cdk.Stack, EndpointScalingProvider]) -> None:
    stack, provider = served
    functions = _resources(stack, "AWS::Lambda::Function")
    handler = functions[_id(stack, provider.handler)]["Properties"]
    assert {k: handler[k] for k in ("Handler", "Runtime", "Timeout", "MemorySize")} == {
        "Handler": "index.on_event",
        "Runtime": "python3.14",
        "Timeout": 60,
        "MemorySize": 128,
    }
    # Its own log group, kept a year.
    logs_id = _id(stack, provider.log_group)
    assert handler["LoggingConfig"] == {"LogGroup": {"Ref": logs_id}}
    assert _resources(stack, "AWS::Logs::LogGroup")[logs_id]["Properties"] == {
        "RetentionInDays": 365
    }
    # The asset is the handler directory (index.py alone: test_endpoint_scaling pins that).
    assert provider.handler.node.find_child("Code").node.path.endswith("Handler/Code")
    assert HANDLER_DIR.name == "endpoint_scaling_handler"
    # Its role: Lambda's, with the basic execution policy only as a managed policy.
    role = _resources(stack, "AWS::IAM::Role")[_id(stack, provider.handler.role)]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
        }
    ]
    assert role["ManagedPolicyArns"] == [
        arn(":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole")
    ]


def test_the_custom_resources_reach_the_handler_through_the_framework(
    served: tuple[cdk.Stack, EndpointScalingProvider],
) -> None:
    stack, provider = served
    framework = provider.provider.node.find_child("framework-onEvent")
    framework_id, handler_id = _id(stack, framework), _id(stack, provider.handler)
    assert stack.resolve(provider.service_token) == {"Fn::GetAtt": [framework_id, "Arn"]}
    functions = _resources(stack, "AWS::Lambda::Function")
    assert functions[framework_id]["Properties"]["Environment"]["Variables"] == {
        "USER_ON_EVENT_FUNCTION_ARN": {"Fn::GetAtt": [handler_id, "Arn"]}
    }
    # cfn-lint's W3005 is silenced on exactly these two functions.
    silenced = {
        k for k, f in functions.items() if "W3005" in str(f.get("Metadata", {}).get("cfn-lint"))
    }
    assert silenced == {framework_id, handler_id}


def test_the_handler_role_has_exactly_these_statements(
    served: tuple[cdk.Stack, EndpointScalingProvider],
) -> None:
    stack, provider = served
    targets = arn(f":application-autoscaling:{REGION}:{ACCOUNT}:scalable-target/*")
    owned = {f"aws:ResourceTag/{SCALING_TAG_KEY}": "S"}
    assert _handler_statements(stack, provider) == [
        {
            "Action": [
                "cloudwatch:DescribeAlarms",
                "cloudwatch:PutMetricAlarm",
                "cloudwatch:DeleteAlarms",
            ],
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": "sagemaker:DescribeEndpointConfig",
            "Effect": "Allow",
            "Resource": arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint-config/*"),
        },
        {
            "Action": [
                "application-autoscaling:DescribeScalableTargets",
                "application-autoscaling:DescribeScalingPolicies",
            ],
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": [
                "application-autoscaling:RegisterScalableTarget",
                "application-autoscaling:TagResource",
            ],
            "Condition": {
                "StringEquals": {f"aws:RequestTag/{SCALING_TAG_KEY}": "S"},
                "ForAllValues:StringEquals": {"aws:TagKeys": [SCALING_TAG_KEY]},
                "StringEqualsIfExists": owned,
            },
            "Effect": "Allow",
            "Resource": targets,
        },
        {
            "Action": [
                "application-autoscaling:DeregisterScalableTarget",
                "application-autoscaling:PutScalingPolicy",
                "application-autoscaling:DeleteScalingPolicy",
            ],
            "Condition": {"StringEquals": owned},
            "Effect": "Allow",
            "Resource": targets,
        },
        {
            "Action": [
                "sagemaker:DescribeEndpoint",
                "sagemaker:UpdateEndpointWeightsAndCapacities",
            ],
            "Effect": "Allow",
            # Each served endpoint once, lower-cased as SageMaker's ARNs carry it.
            "Resource": [
                arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint/team-a"),
                arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint/team-b"),
            ],
        },
    ]


def test_before_serve_the_role_may_touch_no_endpoint() -> None:
    stack = _stack()
    provider = EndpointScalingProvider.of(stack)
    actions = [
        action
        for statement in _handler_statements(stack, provider)
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    ]
    assert "sagemaker:DescribeEndpointConfig" in actions
    assert "sagemaker:DescribeEndpoint" not in actions
    assert "sagemaker:UpdateEndpointWeightsAndCapacities" not in actions
