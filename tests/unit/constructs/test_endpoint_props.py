"""TritonMultiModelEndpoint's role and endpoint-name props, as an outside app uses them."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs import TritonMultiModelEndpoint
from ml_platform.constructs._props import shared_problems
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpointProps
from ml_platform.limits import MODEL_PREFIX_TEXT, shown

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def _stack() -> tuple[cdk.Stack, s3.IBucket]:
    stack = cdk.Stack(new_app(), "Inference", env=ENV)
    return stack, s3.Bucket.from_bucket_name(stack, "Models", "team-models")


@pytest.mark.parametrize(
    "name", ["-lead", "trail-", "under_score", "dot.name", "a" * 64, "", "sp ace"]
)
def test_endpoint_name_is_validated(name: str) -> None:
    stack, bucket = _stack()
    with pytest.raises(ValueError) as error:
        TritonMultiModelEndpoint(
            stack,
            "Mme",
            bucket=bucket,
            props=TritonMultiModelEndpointProps(name=name, archives=["a"]),
        )
    assert str(error.value) == (
        f"Inference/Mme: name = {shown(name)}: expected letters, digits and '-', at most 63"
    )


def test_a_given_role_is_used_and_gets_the_statements() -> None:
    stack, bucket = _stack()
    role = iam.Role(stack, "Exec", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    mme = TritonMultiModelEndpoint(
        stack,
        "Mme",
        bucket=bucket,
        props=TritonMultiModelEndpointProps(name="a" * 63, archives=["a"]),
        role=role,
    )
    assert mme.role is role
    template = Template.from_stack(stack)
    assert mme.node.try_find_child("ExecutionRole") is None
    role_id = stack.get_logical_id(role.node.default_child)
    model = template.find_resources("AWS::SageMaker::Model")
    ((_, props),) = model.items()
    assert props["Properties"]["ExecutionRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    ((policy_id, policy),) = [
        (k, p)
        for k, p in template.find_resources("AWS::IAM::Policy").items()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    assert policy_id in props["DependsOn"]
    actions = {
        a
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"s3:GetObject", "s3:ListBucket", "ecr:BatchGetImage"} <= actions


def test_an_imported_role_is_referenced_as_is() -> None:
    stack, bucket = _stack()
    arn = "arn:aws:iam::111122223333:role/team-sagemaker"
    role = iam.Role.from_role_arn(stack, "Exec", arn, mutable=False)
    TritonMultiModelEndpoint(
        stack,
        "Mme",
        bucket=bucket,
        props=TritonMultiModelEndpointProps(name="team", archives=["a"]),
        role=role,
    )
    template = Template.from_stack(stack)
    assert not [k for k in template.find_resources("AWS::IAM::Role") if "Execution" in k]
    template.has_resource_properties("AWS::SageMaker::Model", {"ExecutionRoleArn": arn})


def test_the_props_object_holds_every_rule_and_reports_them_at_once() -> None:
    """The rules live with the props: the shared fields' in the base the settings use too,
    checked as the settings check them; the construct-only ones in construct_problems(). The
    construct keeps the props it checked."""
    from ml_platform.props.endpoint import TritonMultiModelEndpointPropsBase

    bad = TritonMultiModelEndpointProps(
        name="bad_name",
        archives=["../x"],
        min_instances=3,
        max_instances=2,
        instance_type="ml.p4d.24xlarge",
    )
    found = shared_problems(bad, TritonMultiModelEndpointPropsBase)
    assert [p.split(" = ", 1)[0] for p in found] == ["name", "instance_type"]
    fields_ok = dataclasses.replace(bad, name="ok", instance_type="ml.g5.xlarge")
    found = shared_problems(fields_ok, TritonMultiModelEndpointPropsBase)
    assert [p.split(" = ", 1)[0] for p in found] == ["min_instances", "archives[0]"]
    assert bad.construct_problems(region="us-east-1", model_prefix="models/") == []
    assert bad.construct_problems(region="us-east-1", model_prefix="/x") == [
        f"model_prefix = '/x': {MODEL_PREFIX_TEXT}"
    ]
    good = TritonMultiModelEndpointProps(name="ok", archives=["model_tf_dali"])
    assert shared_problems(good, TritonMultiModelEndpointPropsBase) == []
    assert good.construct_problems(region="us-east-1", model_prefix="models/") == []
    stack, bucket = _stack()
    mme = TritonMultiModelEndpoint(stack, "Mme", bucket=bucket, props=good)
    assert mme.props is good and mme.props.min_instances == 1 and mme.endpoint_name == "ok"


def test_the_settings_build_the_props_from_their_sections() -> None:
    """An endpoint of the settings and the inference section give the props their shared
    fields: one declaration each."""
    from ml_platform.config import Settings

    inference = Settings.from_context(
        {"inference": {"triton_log_verbose": 2, "endpoints": [{"name": "e", "max_instances": 3}]}}
    ).inference
    props = TritonMultiModelEndpointProps.from_bases(inference.endpoints[0], inference)
    assert (props.name, props.max_instances, props.triton_log_verbose) == ("e", 3, 2)
    assert props.archives == inference.endpoints[0].archives
