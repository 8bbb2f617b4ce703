"""Autoscaling of a SageMaker endpoint that survives a change of instance type.

SageMaker refuses to update an endpoint when the update changes the instance type of a
variant registered with Application Auto Scaling
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html), so a plain
``ScalableTarget`` plus policy makes every instance-type change a failed stack update. The
custom resources made here deregister the target before the endpoint moves and register it
(with its target-tracking policy) again afterwards; the handler's docstring
(:mod:`ml_platform.constructs.endpoint_scaling_handler.index`) has the full sequence,
rollbacks included.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from ml_platform.constructs._l1 import default_child
from ml_platform.constructs._nag import (
    acknowledge,
    acknowledge_controls,
    acknowledge_each,
    managed_policy_finding,
    rendered_resource,
)

HANDLER_DIR = Path(__file__).with_name("endpoint_scaling_handler")
RESOURCE_TYPE = "Custom::EndpointScaling"
PROVIDER_ID = "EndpointScalingProvider"
#: Tag key marking the scalable targets an endpoint-scaling handler owns; its value is the
#: owning stack's name.
SCALING_TAG_KEY = "ml-platform:endpoint-scaling"


class EndpointScalingProvider(Construct):
    """One handler per stack, shared by every endpoint of the stack (use :meth:`of`)."""

    @classmethod
    def of(cls, scope: Construct) -> EndpointScalingProvider:
        stack = Stack.of(scope)
        found = stack.node.try_find_child(PROVIDER_ID)
        return found if isinstance(found, cls) else cls(stack, PROVIDER_ID)

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self._endpoints: list[str] = []
        self._add_handler()
        stack = Stack.of(self)
        #: The tag on every scalable target this handler may act on (the endpoints' targets:
        #: CloudFormation tags them, and the handler tags what it registers).
        self.tag_value = stack.stack_name
        self._statements = {
            "endpoints": iam.PolicyStatement(
                actions=[
                    "sagemaker:DescribeEndpoint",
                    # Application Auto Scaling calls these with the caller's permissions when it
                    # registers an endpoint variant
                    # (https://docs.aws.amazon.com/autoscaling/application/userguide/security_iam_id-based-policy-examples.html).
                    "sagemaker:UpdateEndpointWeightsAndCapacities",
                ],
            ),
        }
        self._grant_alarms_and_configs()
        self._grant_scalable_targets()
        self._acknowledge()

    def _add_handler(self) -> None:
        """The handler function, its log group and aws-cdk's custom-resource provider."""
        self.log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_YEAR)
        self.handler = lambda_.Function(
            self,
            "Handler",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=Duration.minutes(1),
            memory_size=128,
            log_group=self.log_group,
            description="Deregisters and registers SageMaker endpoint autoscaling around "
            "instance-type changes",
        )
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.handler)
        # aws-cdk makes both functions depend on their role explicitly although the role is
        # already referenced; cfn-lint flags that (W3005) on these two resources only.
        framework = self.provider.node.find_child("framework-onEvent")
        for function in (self.handler, framework):
            resource = default_child(function, CfnResource)
            resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
            acknowledge_controls(
                function,
                {
                    "CT.LAMBDA.PR.3": (
                        "The handler and aws-cdk's provider framework call only regional AWS APIs "
                        "(SageMaker, Application Auto Scaling, CloudWatch, Lambda), no resource "
                        "inside the VPC; in the VPC they would need NAT or interface endpoints "
                        "for nothing."
                    )
                },
            )
        acknowledge_controls(
            self.log_group,
            {
                "CT.CLOUDWATCH.PR.3": (
                    "The endpoint-scaling handler logs one line per event (endpoint name, "
                    "instance types, what it did), no request data, encrypted with the "
                    "CloudWatch Logs service key; a customer key would add a key and its "
                    "monthly charge per inference stack for that."
                )
            },
        )

    def _grant_alarms_and_configs(self) -> None:
        """Target tracking's alarm calls, and reading any endpoint config."""
        # Target tracking creates, reads and deletes its alarms with the caller's permissions,
        # and AWS documents these three actions on "*" for SageMaker scaling (same page,
        # "Permissions required for API actions on target services and CloudWatch", and the
        # permissions list of https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-prerequisites.html): an alarm
        # ARN pattern that Application Auto Scaling does not match fails the first
        # registration, and the rollback of an instance-type change with it.
        self.handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "cloudwatch:DescribeAlarms",
                    "cloudwatch:PutMetricAlarm",
                    "cloudwatch:DeleteAlarms",
                ],
                resources=["*"],
            )
        )
        stack = Stack.of(self)
        # CloudFormation names the endpoint configs: any config of this account/region.
        configs = stack.format_arn(
            service="sagemaker", resource="endpoint-config", resource_name="*"
        )
        self.handler.add_to_role_policy(
            iam.PolicyStatement(actions=["sagemaker:DescribeEndpointConfig"], resources=[configs])
        )
        acknowledge(
            self,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, configs)}]",
            "CloudFormation generates the endpoint-config names; DescribeEndpointConfig is "
            "read-only.",
        )

    def _grant_scalable_targets(self) -> None:
        """Application Auto Scaling on the scalable targets carrying this stack's tag."""
        stack = Stack.of(self)
        # Application Auto Scaling's actions, from its Service Authorization Reference
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsapplicationautoscaling.html):
        # the Describe* actions have no resource type ("*"); RegisterScalableTarget,
        # DeregisterScalableTarget, PutScalingPolicy, DeleteScalingPolicy and TagResource act
        # on the scalable-target resource type and take aws:ResourceTag/${TagKey} (Register and
        # TagResource also aws:RequestTag/${TagKey} and aws:TagKeys). A target's ARN carries an
        # opaque id, not the endpoint's name, so the scope is the tag, not the ARN.
        targets = stack.format_arn(
            service="application-autoscaling", resource="scalable-target", resource_name="*"
        )
        tag = f"aws:ResourceTag/{SCALING_TAG_KEY}"
        self.handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "application-autoscaling:DescribeScalableTargets",
                    "application-autoscaling:DescribeScalingPolicies",
                ],
                resources=["*"],
            )
        )
        # Registering (or tagging) puts this stack's tag on the target, and is refused on a
        # target another owner tagged. A target that does not exist yet (the handler registers
        # it again after an instance-type change) has no tags, hence IfExists.
        self.handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "application-autoscaling:RegisterScalableTarget",
                    "application-autoscaling:TagResource",
                ],
                resources=[targets],
                conditions={
                    "StringEquals": {f"aws:RequestTag/{SCALING_TAG_KEY}": self.tag_value},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [SCALING_TAG_KEY]},
                    "StringEqualsIfExists": {tag: self.tag_value},
                },
            )
        )
        self.handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "application-autoscaling:DeregisterScalableTarget",
                    "application-autoscaling:PutScalingPolicy",
                    "application-autoscaling:DeleteScalingPolicy",
                ],
                resources=[targets],
                conditions={"StringEquals": {tag: self.tag_value}},
            )
        )
        acknowledge(
            self,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, targets)}]",
            "Scalable-target ARNs end in an opaque id, not the endpoint's name: these actions "
            "are limited to targets carrying this stack's ml-platform:endpoint-scaling tag.",
        )

    @property
    def service_token(self) -> str:
        return self.provider.service_token

    def serve(self, endpoint_name: str, variant_name: str) -> None:
        """Let the handler act on ``endpoint_name``'s variant (and nothing else)."""
        if endpoint_name in self._endpoints:
            return
        first = not self._endpoints
        self._endpoints.append(endpoint_name)
        stack = Stack.of(self)
        # SageMaker ARNs carry the endpoint name in lower case.
        self._statements["endpoints"].add_resources(
            stack.format_arn(
                service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower()
            )
        )
        if first:
            for statement in self._statements.values():
                self.handler.add_to_role_policy(statement)

    def _acknowledge(self) -> None:
        handler_arn = rendered_resource(self, self.handler.function_arn)
        acknowledge_each(
            self,
            {
                managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"): (
                    "Log delivery of the endpoint-scaling handler and of aws-cdk's "
                    "custom-resource framework function."
                ),
                "AwsSolutions-IAM5[Resource::*]": (
                    "Application Auto Scaling's Describe* actions have no resource type, and "
                    "AWS documents the target-tracking alarm calls (cloudwatch:DescribeAlarms, "
                    "PutMetricAlarm, DeleteAlarms) on '*' for SageMaker scaling."
                ),
                f"AwsSolutions-IAM5[Resource::{handler_arn}:*]": (
                    "aws-cdk's custom-resource framework invokes any version of this handler, "
                    "only it."
                ),
            },
        )
