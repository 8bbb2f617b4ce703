"""An autoscaled endpoint can change instance type: the template's order, the handler's
permissions, and the handler run through CloudFormation's update and rollback sequences.

SageMaker refuses ``UpdateEndpoint`` when it changes the instance type of a variant that is
registered with Application Auto Scaling
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html). moto does not
implement ``UpdateEndpoint``, so :class:`SageMakerModel` below models the endpoint with that
documented rule, while the registrations and policies live in moto's real Application Auto
Scaling backend. The handler gets the custom resources' properties exactly as the synthesized
templates carry them, and the sequences follow the template's ``DependsOn`` (asserted first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from botocore.exceptions import ClientError
from moto import mock_aws

from ml_platform.app import new_app
from ml_platform.constructs._endpoint_scaling import HANDLER_DIR, RESOURCE_TYPE
from ml_platform.constructs.endpoint_scaling_handler import index as handler
from ml_platform.constructs.sagemaker_mme import (
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from tests.support import SynthesizedPlatform

REGION = "us-west-2"
ACCOUNT = "123456789012"
NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def stack_with(*endpoints: dict, **props) -> cdk.Stack:
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(account=ACCOUNT, region=REGION))
    bucket = s3.Bucket.from_bucket_name(stack, "B", "models-bucket")
    for i, endpoint in enumerate(endpoints):
        values = {"archives": ["model_tf_dali"], **props, **endpoint}
        TritonMultiModelEndpoint(
            stack, f"Ep{i}", bucket=bucket, props=TritonMultiModelEndpointProps(**values)
        )
    return stack


def custom_resources(template: Template) -> dict[str, dict]:
    return template.find_resources(RESOURCE_TYPE)


def by_phase(template: Template) -> dict[str, dict]:
    """The two custom resources' properties by phase, without the service token."""
    out = {}
    for resource in custom_resources(template).values():
        props = {k: v for k, v in resource["Properties"].items() if k != "ServiceToken"}
        out[props["Phase"]] = props
    return out


# --- the template ------------------------------------------------------------------------


def test_guard_before_the_endpoint_policy_after_the_target(synth: SynthesizedPlatform) -> None:
    t = synth.template("Inference")
    resources = t.to_json()["Resources"]
    crs = custom_resources(t)
    assert len(crs) == 2
    guard = next(k for k, v in crs.items() if v["Properties"]["Phase"] == "before")
    policy = next(k for k, v in crs.items() if v["Properties"]["Phase"] == "after")
    (endpoint,) = t.find_resources("AWS::SageMaker::Endpoint")
    (target,) = t.find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    assert guard in resources[endpoint]["DependsOn"]
    assert target in resources[policy]["DependsOn"]
    assert endpoint in resources[target]["DependsOn"]
    common = {
        "EndpointName": "triton-ensembles",
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g4dn.4xlarge",
        "MinCapacity": 1,
        "MaxCapacity": 2,
        "PolicyName": "triton-ensembles-invocations-per-instance",
        "TargetValue": 1000,
        "ScaleInCooldown": 600,
        "ScaleOutCooldown": 120,
        "TagKey": "ml-platform:endpoint-scaling",
        "TagValue": "MlPlatform-Inference",
    }
    assert by_phase(t) == {
        "before": {**common, "Phase": "before"},
        "after": {**common, "Phase": "after"},
    }
    # CloudFormation tags the target it creates, so the handler's tag-conditioned role may act.
    assert {"Key": "ml-platform:endpoint-scaling", "Value": "MlPlatform-Inference"} in (
        resources[target]["Properties"]["Tags"]
    )
    # The policy belongs to the custom resource; a second, native one would fight it.
    t.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 0)


def test_one_handler_per_stack_with_exact_permissions() -> None:
    stack = stack_with(
        {"name": "Team-A", "instance_type": "ml.g4dn.xlarge"},
        {"name": "team-b", "instance_type": "ml.g5.xlarge"},
    )
    t = Template.from_stack(stack)
    assert len(custom_resources(t)) == 4
    functions = t.find_resources("AWS::Lambda::Function")
    handlers = [f for f in functions.values() if f["Properties"].get("Handler") == "index.on_event"]
    assert len(handlers) == 1
    assert handlers[0]["Properties"]["Runtime"] == "python3.14"
    role = handlers[0]["Properties"]["Role"]["Fn::GetAtt"][0]
    (policy,) = [
        p
        for p in t.find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role}]
    ]
    statements = {
        json.dumps(s["Action"]): (s["Resource"], s.get("Condition"))
        for s in stack.resolve(policy["Properties"]["PolicyDocument"])["Statement"]
    }
    partition = {"Ref": "AWS::Partition"}

    def arn(tail: str) -> dict:
        return {"Fn::Join": ["", ["arn:", partition, tail]]}

    targets = arn(f":application-autoscaling:{REGION}:{ACCOUNT}:scalable-target/*")
    owned = {"aws:ResourceTag/ml-platform:endpoint-scaling": "S"}  # the stack's name
    assert statements == {
        '"sagemaker:DescribeEndpointConfig"': (
            arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint-config/*"),
            None,
        ),
        # AWS documents the target-tracking alarm calls on "*" for SageMaker scaling; an alarm
        # ARN pattern Application Auto Scaling does not match fails the first registration.
        '["cloudwatch:DescribeAlarms", "cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"]': (
            "*",
            None,
        ),
        json.dumps(
            [
                "application-autoscaling:DescribeScalableTargets",
                "application-autoscaling:DescribeScalingPolicies",
            ]
        ): ("*", None),
        json.dumps(
            [
                "application-autoscaling:RegisterScalableTarget",
                "application-autoscaling:TagResource",
            ]
        ): (
            targets,
            {
                "StringEquals": {"aws:RequestTag/ml-platform:endpoint-scaling": "S"},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["ml-platform:endpoint-scaling"]},
                "StringEqualsIfExists": owned,
            },
        ),
        json.dumps(
            [
                "application-autoscaling:DeregisterScalableTarget",
                "application-autoscaling:PutScalingPolicy",
                "application-autoscaling:DeleteScalingPolicy",
            ]
        ): (targets, {"StringEquals": owned}),
        # SageMaker ARNs carry endpoint names in lower case.
        '["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpointWeightsAndCapacities"]': (
            [
                arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint/team-a"),
                arn(f":sagemaker:{REGION}:{ACCOUNT}:endpoint/team-b"),
            ],
            None,
        ),
    }
    for target in t.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values():
        assert target["Properties"]["Tags"] == [
            {"Key": "ml-platform:endpoint-scaling", "Value": "S"}
        ]


def test_without_the_guard_a_plain_policy_and_no_lambda() -> None:
    t = Template.from_stack(stack_with({"name": "ep"}, instance_type_changes=False))
    assert custom_resources(t) == {}
    t.resource_count_is("AWS::Lambda::Function", 0)
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
                "TargetValue": 1000,
                "ScaleInCooldown": 600,
                "ScaleOutCooldown": 120,
            },
        },
    )


def test_the_handler_asset_is_the_handler_alone() -> None:
    shipped = sorted(p.name for p in HANDLER_DIR.iterdir() if p.name != "__pycache__")
    assert shipped == ["index.py"]
    imports = [
        line.split()[1]
        for line in (HANDLER_DIR / "index.py").read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    # What the Lambda Python runtime has: the standard library and boto3/botocore.
    assert {name.split(".")[0] for name in imports} <= {
        "__future__",
        "logging",
        "typing",
        "boto3",
        "botocore",
    }


# --- the handler through CloudFormation's sequences ---------------------------------------


@dataclass
class SageMakerModel:
    """The endpoint as SageMaker documents it, for the calls the handler and CloudFormation
    make; registrations are read from the real (moto) Application Auto Scaling backend."""

    autoscaling: object
    endpoints: dict[str, str] = field(default_factory=dict)  # name -> config name
    configs: dict[str, str] = field(default_factory=dict)  # config name -> instance type
    refused: list[str] = field(default_factory=list)

    def _missing(self, name: str) -> ClientError:
        return ClientError(
            {
                "Error": {
                    "Code": "ValidationException",
                    "Message": f"Could not find endpoint {name}",
                }
            },
            "DescribeEndpoint",
        )

    def describe_endpoint(self, EndpointName: str) -> dict:
        if EndpointName not in self.endpoints:
            raise self._missing(EndpointName)
        return {"EndpointName": EndpointName, "EndpointConfigName": self.endpoints[EndpointName]}

    def describe_endpoint_config(self, EndpointConfigName: str) -> dict:
        return {
            "ProductionVariants": [
                {"VariantName": "AllTraffic", "InstanceType": self.configs[EndpointConfigName]}
            ]
        }

    def put_config(self, instance_type: str) -> str:
        name = f"config-{len(self.configs)}"
        self.configs[name] = instance_type
        return name

    def create_endpoint(self, name: str, instance_type: str) -> None:
        self.endpoints[name] = self.put_config(instance_type)

    def update_endpoint(self, name: str, instance_type: str) -> None:
        current = self.configs[self.endpoints[name]]
        registered = self.autoscaling.describe_scalable_targets(
            ServiceNamespace=NAMESPACE,
            ResourceIds=[f"endpoint/{name}/variant/AllTraffic"],
            ScalableDimension=DIMENSION,
        )["ScalableTargets"]
        if registered and current != instance_type:
            self.refused.append(f"{current} -> {instance_type}")
            raise ClientError(
                {
                    "Error": {
                        "Code": "ValidationException",
                        "Message": "The variant(s) include auto scaling configuration",
                    }
                },
                "UpdateEndpoint",
            )
        self.endpoints[name] = self.put_config(instance_type)

    def delete_endpoint(self, name: str) -> None:
        del self.endpoints[name]


@pytest.fixture(scope="module")
def props() -> dict[str, dict[str, dict]]:
    """The custom resources' properties, synthesized for three settings of one endpoint."""
    out = {}
    for key, settings in {
        "small": {"instance_type": "ml.g4dn.xlarge"},
        "large": {"instance_type": "ml.g4dn.2xlarge"},
        "small-wider": {
            "instance_type": "ml.g4dn.xlarge",
            "max_instances": 4,
            "invocations_per_instance": 500,
        },
    }.items():
        t = Template.from_stack(stack_with({"name": "ep", **settings}))
        out[key] = by_phase(t)
    return out


class OwnerTagGuard:
    """moto's Application Auto Scaling behind the handler role's tag conditions (moto has no
    tagging API and no IAM): Register/TagResource must carry the owner tag and may not retag
    another owner's target; Deregister/PutScalingPolicy/DeleteScalingPolicy need the tag on
    the target. Everything else goes to moto unchanged."""

    KEY = "ml-platform:endpoint-scaling"

    def __init__(self, autoscaling, owner: str = "S") -> None:  # stack_with's stack
        self._real = autoscaling
        self.owner = owner
        self.tags: dict[str, dict[str, str]] = {}  # target ARN -> tags
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def _denied(self, operation: str) -> ClientError:
        return ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": operation}}, operation
        )

    def _arn(self, **kwargs) -> str | None:
        found = self._real.describe_scalable_targets(
            ServiceNamespace=kwargs["ServiceNamespace"],
            ResourceIds=[kwargs["ResourceId"]],
            ScalableDimension=kwargs["ScalableDimension"],
        )["ScalableTargets"]
        return found[0]["ScalableTargetARN"] if found else None

    def _check_new_tags(self, operation: str, arn: str | None, tags: dict | None) -> None:
        if (tags or {}).get(self.KEY) != self.owner or set(tags) != {self.KEY}:
            raise self._denied(operation)  # aws:RequestTag / aws:TagKeys
        existing = self.tags.get(arn, {}).get(self.KEY) if arn else None
        if existing is not None and existing != self.owner:
            raise self._denied(operation)  # StringEqualsIfExists aws:ResourceTag

    def register_scalable_target(self, **kwargs):
        self.calls.append("register")
        arn = self._arn(**kwargs)
        self._check_new_tags("RegisterScalableTarget", arn, kwargs.get("Tags"))
        out = self._real.register_scalable_target(**kwargs)
        if arn is None:  # Tags apply to a target the call creates only
            self.tags[out["ScalableTargetARN"]] = dict(kwargs["Tags"])
        return out

    def tag_resource(self, ResourceARN: str, Tags: dict) -> dict:
        self.calls.append("tag")
        self._check_new_tags("TagResource", ResourceARN, Tags)
        self.tags.setdefault(ResourceARN, {}).update(Tags)
        return {}

    def _owned(self, operation: str, **kwargs) -> None:
        self.calls.append(operation)
        arn = self._arn(**kwargs)
        if arn is None or self.tags.get(arn, {}).get(self.KEY) != self.owner:
            raise self._denied(operation)

    def deregister_scalable_target(self, **kwargs):
        self._owned("DeregisterScalableTarget", **kwargs)
        arn = self._arn(**kwargs)
        self.tags.pop(arn, None)
        return self._real.deregister_scalable_target(**kwargs)

    def put_scaling_policy(self, **kwargs):
        self._owned("PutScalingPolicy", **kwargs)
        return self._real.put_scaling_policy(**kwargs)

    def delete_scaling_policy(self, **kwargs):
        self._owned("DeleteScalingPolicy", **kwargs)
        return self._real.delete_scaling_policy(**kwargs)


@pytest.fixture
def cloud():
    with mock_aws():
        autoscaling = OwnerTagGuard(boto3.client("application-autoscaling", region_name=REGION))
        yield SageMakerModel(autoscaling), autoscaling


def event(request_type: str, properties: dict) -> dict:
    return {"RequestType": request_type, "ResourceProperties": properties}


def registration(autoscaling) -> tuple[tuple[int, int] | None, dict | None]:
    """(min, max) of the registered target and the policy's configuration, or None."""
    targets = autoscaling.describe_scalable_targets(ServiceNamespace=NAMESPACE)["ScalableTargets"]
    policies = autoscaling.describe_scaling_policies(ServiceNamespace=NAMESPACE)["ScalingPolicies"]
    assert len(targets) <= 1 and len(policies) <= 1
    target = (targets[0]["MinCapacity"], targets[0]["MaxCapacity"]) if targets else None
    policy = None
    if policies:
        config = policies[0]["TargetTrackingScalingPolicyConfiguration"]
        policy = {
            "name": policies[0]["PolicyName"],
            "target": config["TargetValue"],
            "in": config["ScaleInCooldown"],
            "out": config["ScaleOutCooldown"],
        }
    return target, policy


def native_target(autoscaling, p: dict, tagged: bool = True) -> None:
    """What AWS::ApplicationAutoScaling::ScalableTarget does on create or update (with its
    Tags property; ``tagged=False``: a target deployed before the stack tagged it)."""
    real = autoscaling._real if isinstance(autoscaling, OwnerTagGuard) else autoscaling
    out = real.register_scalable_target(
        ServiceNamespace=NAMESPACE,
        ResourceId="endpoint/ep/variant/AllTraffic",
        ScalableDimension=DIMENSION,
        MinCapacity=p["MinCapacity"],
        MaxCapacity=p["MaxCapacity"],
    )
    if tagged and isinstance(autoscaling, OwnerTagGuard):
        autoscaling.tags.setdefault(out["ScalableTargetARN"], {})[OwnerTagGuard.KEY] = (
            autoscaling.owner
        )


def create(sagemaker: SageMakerModel, autoscaling, p: dict[str, dict]) -> None:
    """Stack creation, in the template's order: guard, endpoint, target, policy."""
    assert handler.handle(event("Create", p["before"]), sagemaker, autoscaling)["Data"] == {
        "Outcome": "no endpoint yet"
    }
    sagemaker.create_endpoint("ep", p["before"]["InstanceType"])
    native_target(autoscaling, p["before"])
    handler.handle(event("Create", p["after"]), sagemaker, autoscaling)


SMALL_POLICY = {"name": "ep-invocations-per-instance", "target": 1000.0, "in": 600, "out": 120}


def test_create_registers_target_and_policy(cloud, props) -> None:
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)


def test_the_rule_is_real_without_the_guard(cloud, props) -> None:
    """Control: with the target registered, the modelled SageMaker refuses the change."""
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    with pytest.raises(ClientError, match="auto scaling"):
        sagemaker.update_endpoint("ep", "ml.g4dn.2xlarge")
    assert sagemaker.refused == ["ml.g4dn.xlarge -> ml.g4dn.2xlarge"]


def test_instance_type_change_deploys_and_keeps_scaling(cloud, props) -> None:
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    new = props["large"]
    out = handler.handle(event("Update", new["before"]), sagemaker, autoscaling)
    assert out["Data"]["Outcome"] == "deregistered (ml.g4dn.xlarge -> ml.g4dn.2xlarge)"
    assert registration(autoscaling) == (None, None)
    sagemaker.update_endpoint("ep", "ml.g4dn.2xlarge")  # not refused
    # The native target is unchanged (same properties): CloudFormation skips it.
    out = handler.handle(event("Update", new["after"]), sagemaker, autoscaling)
    assert out["Data"]["Outcome"] == "registered on ml.g4dn.2xlarge"
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)
    assert sagemaker.refused == []


def as_sent(properties: dict) -> dict:
    """Custom-resource properties as CloudFormation delivers them: every value a string
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html)."""
    return {k: str(v) for k, v in properties.items()}


def test_string_properties_as_cloudformation_sends_them(cloud, props) -> None:
    sagemaker, autoscaling = cloud
    small, large = props["small"], props["large"]
    handler.handle(event("Create", as_sent(small["before"])), sagemaker, autoscaling)
    sagemaker.create_endpoint("ep", "ml.g4dn.xlarge")
    native_target(autoscaling, small["before"])
    handler.handle(event("Create", as_sent(small["after"])), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)
    handler.handle(event("Update", as_sent(large["before"])), sagemaker, autoscaling)
    sagemaker.update_endpoint("ep", "ml.g4dn.2xlarge")
    handler.handle(event("Update", as_sent(large["after"])), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)
    assert sagemaker.refused == []


def test_capacity_and_target_change_on_the_same_type(cloud, props) -> None:
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    wider = props["small-wider"]
    handler.handle(event("Update", wider["before"]), sagemaker, autoscaling)
    native_target(autoscaling, wider["before"])
    handler.handle(event("Update", wider["after"]), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 4), {**SMALL_POLICY, "target": 500.0})


def test_rollback_after_the_endpoint_update_fails(cloud, props) -> None:
    """Say the account has no quota for the new type: UpdateEndpoint fails, and
    CloudFormation rolls back in reverse order (the endpoint stays, then the guard)."""
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    handler.handle(event("Update", props["large"]["before"]), sagemaker, autoscaling)
    # UpdateEndpoint fails (ResourceLimitExceeded): the endpoint keeps the old type.
    out = handler.handle(event("Update", props["small"]["before"]), sagemaker, autoscaling)
    assert out["Data"]["Outcome"] == "registered on ml.g4dn.xlarge"
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)


def test_rollback_after_the_policy_step_fails(cloud, props, monkeypatch) -> None:
    """The endpoint moved, then registering its policy failed: the rollback must deregister
    before the endpoint moves back, or SageMaker refuses the rollback itself."""
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    handler.handle(event("Update", props["large"]["before"]), sagemaker, autoscaling)
    sagemaker.update_endpoint("ep", "ml.g4dn.2xlarge")
    real = autoscaling.put_scaling_policy

    def throttled(**kwargs):
        raise ClientError(
            {"Error": {"Code": "ConcurrentUpdateException", "Message": "x"}}, "PutScalingPolicy"
        )

    monkeypatch.setattr(autoscaling, "put_scaling_policy", throttled)
    with pytest.raises(ClientError):
        handler.handle(event("Update", props["large"]["after"]), sagemaker, autoscaling)
    monkeypatch.setattr(autoscaling, "put_scaling_policy", real)
    assert registration(autoscaling)[0] == (1, 2)  # registered, without policy
    # Rollback, dependents first: policy resource (old properties), endpoint, guard.
    out = handler.handle(event("Update", props["small"]["after"]), sagemaker, autoscaling)
    assert out["Data"]["Outcome"] == "deregistered (ml.g4dn.2xlarge -> ml.g4dn.xlarge)"
    sagemaker.update_endpoint("ep", "ml.g4dn.xlarge")  # not refused
    handler.handle(event("Update", props["small"]["before"]), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)
    assert sagemaker.refused == []


def test_delete_removes_the_policy_and_leaves_the_target_to_cloudformation(cloud, props) -> None:
    sagemaker, autoscaling = cloud
    create(sagemaker, autoscaling, props["small"])
    p = props["small"]
    done = handler.handle(
        {**event("Delete", p["after"]), "PhysicalResourceId": "x"}, sagemaker, autoscaling
    )
    assert done["PhysicalResourceId"] == "x"
    assert registration(autoscaling) == ((1, 2), None)
    handler.handle(
        {**event("Delete", p["before"]), "PhysicalResourceId": "y"}, sagemaker, autoscaling
    )
    assert registration(autoscaling) == ((1, 2), None)  # the guard deletes nothing
    # Deleting again (a retried delete) is not an error.
    handler.handle(
        {**event("Delete", p["after"]), "PhysicalResourceId": "x"}, sagemaker, autoscaling
    )


def test_a_target_deployed_untagged_is_tagged_before_an_instance_type_change(cloud, props) -> None:
    """The first update after upgrading: CloudFormation tags the target only after the guard
    ran, so the guard tags it itself before it deregisters."""
    sagemaker, autoscaling = cloud
    handler.handle(event("Create", props["small"]["before"]), sagemaker, autoscaling)
    sagemaker.create_endpoint("ep", "ml.g4dn.xlarge")
    native_target(autoscaling, props["small"]["before"], tagged=False)
    out = handler.handle(event("Update", props["large"]["before"]), sagemaker, autoscaling)
    assert out["Data"]["Outcome"] == "deregistered (ml.g4dn.xlarge -> ml.g4dn.2xlarge)"
    assert autoscaling.calls[:2] == ["tag", "DeregisterScalableTarget"]
    sagemaker.update_endpoint("ep", "ml.g4dn.2xlarge")
    handler.handle(event("Update", props["large"]["after"]), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 2), SMALL_POLICY)
    assert sagemaker.refused == []


def test_another_owners_target_is_left_alone(cloud, props) -> None:
    """A target another stack's handler tagged: every change the role would make is refused,
    and the target keeps its registration."""
    sagemaker, autoscaling = cloud
    sagemaker.create_endpoint("ep", "ml.g4dn.xlarge")
    native_target(autoscaling, props["small"]["before"], tagged=False)
    (arn,) = autoscaling.tags or [
        t["ScalableTargetARN"]
        for t in autoscaling.describe_scalable_targets(ServiceNamespace=NAMESPACE)[
            "ScalableTargets"
        ]
    ]
    autoscaling.tags[arn] = {OwnerTagGuard.KEY: "SomeOtherStack"}
    for phase in ("before", "after"):
        with pytest.raises(ClientError, match="AccessDenied"):
            handler.handle(event("Update", props["large"][phase]), sagemaker, autoscaling)
        with pytest.raises(ClientError, match="AccessDenied"):
            handler.handle(event("Update", props["small"][phase]), sagemaker, autoscaling)
    assert registration(autoscaling) == ((1, 2), None)
