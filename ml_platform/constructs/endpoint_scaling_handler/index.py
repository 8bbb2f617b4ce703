"""Custom-resource handler that lets an autoscaled SageMaker endpoint change instance type.

SageMaker refuses an endpoint update that changes the instance type of a variant registered
with Application Auto Scaling, and the removal of such a variant: the target must be
deregistered first and registered again afterwards
(https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html).
CloudFormation has no step for that, so two custom resources of this handler sit around the
endpoint: ``Phase: before`` (the endpoint depends on it) and ``Phase: after`` (it depends on
the endpoint's scalable target, and owns the target-tracking policy).

Both run the same reconciliation, on Create and Update, against what the endpoint runs now:

* the endpoint does not exist yet: nothing to do;
* it runs another instance type than the resource's properties ask for (it is about to be
  moved there, forward or in a rollback): delete the variant's scaling policies (all of them,
  as SageMaker's steps say; a policy added outside this stack is not restored) and deregister
  the target
  (https://docs.aws.amazon.com/autoscaling/application/APIReference/API_DeregisterScalableTarget.html);
* it runs the requested type: register the target with the requested capacities and put the
  target-tracking policy (both calls are upserts, by name).

Every target it acts on carries the owner tag of the resource's ``TagKey``/``TagValue``
properties (the stack's name): its role may only register, tag, deregister and change policies
of targets with that tag (or untagged ones, which it tags first), so it cannot touch another
stack's scalable targets. ``RegisterScalableTarget`` tags only the targets it creates, so an
existing target is tagged with ``TagResource`` before anything else.

Everything is found by name (endpoint, variant, policy), never by a stored ARN, so a rollback
restores the previous registration whatever ran before. Only the ``after`` resource deletes
its policy on Delete; the scalable target itself belongs to CloudFormation's
``AWS::ApplicationAutoScaling::ScalableTarget`` and is deregistered by it.

Standard library and boto3 only (the Lambda Python runtime ships boto3).
"""

from __future__ import annotations

import logging
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
METRIC = "SageMakerVariantInvocationsPerInstance"


def resource_id(props: dict[str, Any]) -> str:
    """Application Auto Scaling's id of the endpoint's variant."""
    return f"endpoint/{props['EndpointName']}/variant/{props['VariantName']}"


def current_instance_type(sagemaker, props: dict[str, Any]) -> str | None:
    """The instance type the endpoint's variant runs now; None if there is no endpoint."""
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=props["EndpointName"])
    except ClientError as error:
        if error.response["Error"]["Code"] == "ValidationException":  # "Could not find endpoint"
            return None
        raise
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    for variant in config["ProductionVariants"]:
        if variant["VariantName"] == props["VariantName"]:
            return variant.get("InstanceType")
    return None  # the variant is being added by this update


def owner_tag(props: dict[str, Any]) -> dict[str, str]:
    return {props["TagKey"]: props["TagValue"]}


def target_arn(autoscaling, props: dict[str, Any]) -> str | None:
    found = autoscaling.describe_scalable_targets(
        ServiceNamespace=NAMESPACE, ResourceIds=[resource_id(props)], ScalableDimension=DIMENSION
    )["ScalableTargets"]
    return found[0]["ScalableTargetARN"] if found else None


def tag(autoscaling, props: dict[str, Any], arn: str) -> None:
    """Put the owner tag on an existing target (its role refuses a target another owner
    tagged), so the tag-conditioned calls after it are allowed."""
    autoscaling.tag_resource(ResourceARN=arn, Tags=owner_tag(props))


def register(autoscaling, props: dict[str, Any]) -> None:
    existing = target_arn(autoscaling, props)
    if existing is not None:
        tag(autoscaling, props, existing)
    autoscaling.register_scalable_target(
        ServiceNamespace=NAMESPACE,
        ResourceId=resource_id(props),
        ScalableDimension=DIMENSION,
        MinCapacity=int(props["MinCapacity"]),
        MaxCapacity=int(props["MaxCapacity"]),
        Tags=owner_tag(props),
    )
    autoscaling.put_scaling_policy(
        PolicyName=props["PolicyName"],
        ServiceNamespace=NAMESPACE,
        ResourceId=resource_id(props),
        ScalableDimension=DIMENSION,
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": float(props["TargetValue"]),
            "PredefinedMetricSpecification": {"PredefinedMetricType": METRIC},
            "ScaleInCooldown": int(props["ScaleInCooldown"]),
            "ScaleOutCooldown": int(props["ScaleOutCooldown"]),
        },
    )


def policy_names(autoscaling, props: dict[str, Any]) -> list[str]:
    pages = autoscaling.get_paginator("describe_scaling_policies").paginate(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(props), ScalableDimension=DIMENSION
    )
    return [p["PolicyName"] for page in pages for p in page["ScalingPolicies"]]


def deregister(autoscaling, props: dict[str, Any]) -> None:
    """Delete the variant's scaling policies, then deregister it, as SageMaker's update steps
    say (deregistering alone also drops the policies, per the API reference above)."""
    for name in policy_names(autoscaling, props):
        autoscaling.delete_scaling_policy(
            PolicyName=name, ServiceNamespace=NAMESPACE,
            ResourceId=resource_id(props), ScalableDimension=DIMENSION,
        )
    autoscaling.deregister_scalable_target(
        ServiceNamespace=NAMESPACE, ResourceId=resource_id(props), ScalableDimension=DIMENSION
    )


def reconcile(props: dict[str, Any], sagemaker, autoscaling) -> str:
    """Bring the registration in line with the endpoint; returns what it did."""
    running = current_instance_type(sagemaker, props)
    if running is None:
        return "no endpoint yet"
    if running != props["InstanceType"]:
        arn = target_arn(autoscaling, props)
        if arn is not None:
            tag(autoscaling, props, arn)
            deregister(autoscaling, props)
            return f"deregistered ({running} -> {props['InstanceType']})"
        return f"not registered ({running} -> {props['InstanceType']})"
    register(autoscaling, props)
    return f"registered on {running}"


def delete_policy(autoscaling, props: dict[str, Any]) -> None:
    if props["PolicyName"] in policy_names(autoscaling, props):
        # The target this stack registered carries the tag already (CloudFormation's and the
        # handler's), so deleting the policy needs no tagging.
        autoscaling.delete_scaling_policy(
            PolicyName=props["PolicyName"], ServiceNamespace=NAMESPACE,
            ResourceId=resource_id(props), ScalableDimension=DIMENSION,
        )


def handle(event: dict[str, Any], sagemaker, autoscaling) -> dict[str, Any]:
    """One CloudFormation event (aws-cdk's custom-resource Provider framework shape)."""
    props = event["ResourceProperties"]
    physical_id = f"{props['Phase']}:{resource_id(props)}"
    if event["RequestType"] == "Delete":
        if props["Phase"] == "after":
            delete_policy(autoscaling, props)
        return {"PhysicalResourceId": event.get("PhysicalResourceId", physical_id)}
    outcome = reconcile(props, sagemaker, autoscaling)
    LOG.info("%s %s: %s", props["Phase"], resource_id(props), outcome)
    return {"PhysicalResourceId": physical_id, "Data": {"Outcome": outcome}}


def on_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, boto3.client("sagemaker"), boto3.client("application-autoscaling"))
