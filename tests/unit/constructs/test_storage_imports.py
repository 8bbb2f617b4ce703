"""The from_* methods of the storage constructs return import classes, fully initialised."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.storage import (
    ImportedLustreStorage,
    ImportedModelArtifactBucket,
    LustreStorage,
    LustreStorageBase,
    ModelArtifactBucket,
    ModelArtifactBucketBase,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def test_model_bucket_import_is_its_own_class_with_the_shared_interface() -> None:
    stack = cdk.Stack(new_app(), "S", env=ENV)
    models = ModelArtifactBucket.from_bucket_name(stack, "Models", "team", model_prefix="ens/")
    assert type(models) is ImportedModelArtifactBucket
    assert isinstance(models, ModelArtifactBucketBase)
    assert not isinstance(models, ModelArtifactBucket)
    assert (models.model_prefix, models.access_logs) == ("ens/", None)
    # Same tree as before: the imported s3 bucket is the child "Resource".
    assert models.bucket.node.path == "S/Models/Resource"
    assert stack.resolve(models.bucket.bucket_name) == "team"
    assert stack.resolve(models.archive_arn("x")) == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::team/ens/x"]]
    }
    Template.from_stack(stack).resource_count_is("AWS::S3::Bucket", 0)
    with pytest.raises(
        ValueError, match=r"Bad: model_prefix = '/x': expected a relative S3 key prefix"
    ):
        ModelArtifactBucket.from_bucket_name(stack, "Bad", "team", model_prefix="/x")


def test_wrapping_an_existing_bucket_adds_no_child() -> None:
    stack = cdk.Stack(new_app(), "S", env=ENV)
    created = ModelArtifactBucket(stack, "Models")
    wrapped = ModelArtifactBucket.from_bucket(stack, "Again", created.bucket, model_prefix="m/")
    assert wrapped.bucket.node.path == "S/Models/Resource" and wrapped.node.children == []
    role = iam.Role(stack, "R", assumed_by=iam.AccountRootPrincipal())
    wrapped.grant_write_models(role)
    policy = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    ((_, body),) = policy.items()
    (statement,) = body["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "s3:PutObject"
    assert statement["Resource"]["Fn::Join"][1][1] == "/m/*"


def test_lustre_import_is_its_own_class_and_opens_the_ports_to_clients() -> None:
    stack = cdk.Stack(new_app(), "S", env=ENV)
    group = ec2.SecurityGroup.from_security_group_id(stack, "G", "sg-0f0e0d0c0b0a09080")
    lustre = LustreStorage.from_file_system_attributes(
        stack,
        "Lustre",
        file_system_id="fs-0123456789abcdef0",
        dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        mount_name="abcdefgh",
        security_group=group,
    )
    assert type(lustre) is ImportedLustreStorage and isinstance(lustre, LustreStorageBase)
    assert not isinstance(lustre, LustreStorage)
    assert (lustre.mount_name, lustre.client_security_group) == ("abcdefgh", None)
    assert lustre.security_group.node.path == "S/G"
    assert stack.resolve(lustre.file_system.file_system_id) == "fs-0123456789abcdef0"
    metric = lustre.metric_free_capacity()
    assert (metric.statistic, metric.dimensions) == (
        "Minimum",
        {"FileSystemId": "fs-0123456789abcdef0"},
    )
