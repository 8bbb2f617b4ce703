"""TritonMultiModelEndpoint over a bucket construct or a plain bucket: one grant, same output."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from ml_platform.app import new_app
from ml_platform.constructs.sagemaker_mme import (
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.constructs.storage import ImportedModelArtifactBucket, ModelArtifactBucket

ENV = cdk.Environment(account="111122223333", region="us-east-1")
PREFIX_OBJECTS = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::team/ens/*"]]}


def _s3_statements(stack: cdk.Stack, endpoint: TritonMultiModelEndpoint) -> list[dict]:
    policy = endpoint.role.node.find_child("DefaultPolicy").node.default_child
    statements = stack.resolve(policy.policy_document.to_json())["Statement"]
    return [s for s in statements if str(s["Action"]).startswith("s3:")]


def test_a_bucket_construct_and_a_plain_bucket_give_the_same_role_and_model() -> None:
    stack = cdk.Stack(new_app(), "S", env=ENV)
    models = ModelArtifactBucket.from_bucket_name(stack, "Models", "team", model_prefix="ens/")
    assert isinstance(models, ImportedModelArtifactBucket)
    plain = TritonMultiModelEndpoint(
        stack,
        "Plain",
        bucket=s3.Bucket.from_bucket_name(stack, "B", "team"),
        model_prefix="ens/",
        props=TritonMultiModelEndpointProps(name="plain", archives=["model_tf_dali"]),
    )
    built = TritonMultiModelEndpoint(
        stack,
        "Built",
        bucket=models,
        props=TritonMultiModelEndpointProps(name="built", archives=["model_tf_dali"]),
    )
    expected = [
        {"Action": "s3:GetObject", "Effect": "Allow", "Resource": PREFIX_OBJECTS},
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["ens/*"]}},
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::team"]]},
        },
    ]
    assert _s3_statements(stack, plain) == expected
    assert _s3_statements(stack, built) == expected
    assert built.model_bucket is models
    for endpoint in (plain, built):
        container = stack.resolve(endpoint.model.primary_container)
        assert container["modelDataUrl"] == "s3://team/ens/"


def test_a_prefix_beside_a_bucket_construct_must_be_its_own() -> None:
    stack = cdk.Stack(new_app(), "S", env=ENV)
    models = ModelArtifactBucket.from_bucket_name(stack, "Models", "team", model_prefix="ens/")
    same = TritonMultiModelEndpoint(
        stack,
        "Same",
        bucket=models,
        model_prefix="ens/",
        props=TritonMultiModelEndpointProps(name="s", archives=["a"]),
    )
    assert same.model_bucket.model_prefix == "ens/"
    with pytest.raises(
        ValueError, match=r"model_prefix = 'other/': the bucket construct's prefix is 'ens/'"
    ):
        TritonMultiModelEndpoint(
            stack,
            "Other",
            bucket=models,
            model_prefix="other/",
            props=TritonMultiModelEndpointProps(name="o", archives=["a"]),
        )
