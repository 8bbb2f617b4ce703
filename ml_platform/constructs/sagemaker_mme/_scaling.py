"""The endpoint's autoscaling: a scalable target and its invocations-per-instance
target-tracking policy, registered around instance-type changes when asked
(:mod:`ml_platform.constructs._endpoint_scaling`)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CustomResource, Duration, Tags
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ml_platform.constructs._endpoint_scaling import (
    RESOURCE_TYPE,
    SCALING_TAG_KEY,
    EndpointScalingProvider,
)
from ml_platform.constructs.sagemaker_mme.metrics import VARIANT_NAME

SCALE_IN_COOLDOWN = Duration.minutes(10)  # loading models on a new instance is slow
SCALE_OUT_COOLDOWN = Duration.minutes(2)


@dataclass(frozen=True)
class EndpointScaling:
    """What :func:`add_scaling` made: the target, and the custom resources that deregister it
    before an instance-type change and register it (with the policy) after (``None`` without
    ``instance_type_changes``)."""

    scalable_target: appscaling.ScalableTarget
    scaling_guard: CustomResource | None
    scaling_policy: CustomResource | None


def add_scaling(
    scope: Construct,
    *,
    endpoint: sagemaker.CfnEndpoint,
    endpoint_name: str,
    min_instances: int,
    max_instances: int,
    invocations_per_instance: int,
    instance_type: str,
    instance_type_changes: bool,
) -> EndpointScaling:
    """Scale ``endpoint``'s variant between ``min_instances`` and ``max_instances`` on
    invocations per instance; the resources go in ``scope`` (the endpoint construct). Taking
    the values, not the endpoint class, keeps this module below :mod:`.endpoint`, which
    imports it."""
    scalable_target = appscaling.ScalableTarget(
        scope,
        "Scaling",
        service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
        resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT_NAME}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=min_instances,
        max_capacity=max_instances,
    )
    scalable_target.node.add_dependency(endpoint)
    if not instance_type_changes:
        scalable_target.scale_to_track_metric(
            "InvocationsPerInstance",
            target_value=invocations_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
            scale_in_cooldown=SCALE_IN_COOLDOWN,
            scale_out_cooldown=SCALE_OUT_COOLDOWN,
        )
        return EndpointScaling(scalable_target, None, None)
    # SageMaker refuses an update that changes the instance type of an autoscaled
    # variant: the custom resources deregister the target before the endpoint moves
    # and register it, with the policy, after (_endpoint_scaling.py).
    provider = EndpointScalingProvider.of(scope)
    provider.serve(endpoint_name, VARIANT_NAME)
    properties = {
        "EndpointName": endpoint_name,
        "VariantName": VARIANT_NAME,
        "InstanceType": instance_type,
        "MinCapacity": min_instances,
        "MaxCapacity": max_instances,
        "PolicyName": f"{endpoint_name}-invocations-per-instance",
        "TargetValue": invocations_per_instance,
        "ScaleInCooldown": SCALE_IN_COOLDOWN.to_seconds(),
        "ScaleOutCooldown": SCALE_OUT_COOLDOWN.to_seconds(),
        "TagKey": SCALING_TAG_KEY,
        "TagValue": provider.tag_value,
    }
    # The handler may act only on targets with its stack's tag: CloudFormation tags the
    # target it creates (an in-place update on existing targets).
    Tags.of(scalable_target).add(SCALING_TAG_KEY, provider.tag_value)
    scaling_guard = CustomResource(
        scope,
        "ScalingGuard",
        service_token=provider.service_token,
        resource_type=RESOURCE_TYPE,
        properties={**properties, "Phase": "before"},
    )
    endpoint.node.add_dependency(scaling_guard)
    scaling_policy = CustomResource(
        scope,
        "ScalingPolicy",
        service_token=provider.service_token,
        resource_type=RESOURCE_TYPE,
        properties={**properties, "Phase": "after"},
    )
    scaling_policy.node.add_dependency(scalable_target)
    return EndpointScaling(scalable_target, scaling_guard, scaling_policy)
