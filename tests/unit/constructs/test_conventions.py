"""aws-cdk conventions on the constructs: connections, grant_*, metric_* with options, from_*."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs import (
    LustreStorage,
    ModelArtifactBucket,
    TrainingImageRepository,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


@pytest.fixture()
def stack() -> cdk.Stack:
    return cdk.Stack(new_app(), "Team", env=ENV)


def test_metrics_take_the_usual_options(stack: cdk.Stack) -> None:
    bucket = s3.Bucket.from_bucket_name(stack, "B", "team-models")
    mme = TritonMultiModelEndpoint(
        stack,
        "Mme",
        bucket=bucket,
        props=TritonMultiModelEndpointProps(name="team", archives=["a"]),
    )
    metric = mme.metric_model_cache_hit(
        period=cdk.Duration.minutes(1), statistic="Minimum", label="cache hits"
    )
    assert (metric.period.to_minutes(), metric.statistic, metric.label) == (
        1,
        "Minimum",
        "cache hits",
    )
    assert metric.dimensions == {"EndpointName": "team", "VariantName": "AllTraffic"}
    default = mme.metric_invocation_5xx_errors()
    assert (default.period.to_minutes(), default.statistic) == (5, "Sum")
    models = ModelArtifactBucket(stack, "Models")
    size = models.metric_bucket_size_bytes(period=cdk.Duration.days(2))
    assert (size.namespace, size.metric_name, size.period.to_days()) == (
        "AWS/S3",
        "BucketSizeBytes",
        2,
    )
    assert models.metric_object_count().statistic == "Average"


def test_lustre_imports_grants_and_connections(stack: cdk.Stack) -> None:
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a", "us-east-1f"])
    existing_sg = ec2.SecurityGroup.from_security_group_id(
        stack, "FsSg", "sg-0f0e0d0c0b0a09080", allow_all_outbound=False
    )
    lustre = LustreStorage.from_file_system_attributes(
        stack,
        "Existing",
        file_system_id="fs-0123456789abcdef0",
        dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        mount_name="abcdefgh",
        security_group=existing_sg,
    )
    clients = ec2.SecurityGroup(stack, "Clients", vpc=vpc)
    lustre.allow_client(clients)
    assert lustre.file_system.file_system_id == "fs-0123456789abcdef0"
    assert [g.security_group_id for g in lustre.connections.security_groups] == [
        "sg-0f0e0d0c0b0a09080"
    ]
    free = lustre.metric_free_capacity(period=cdk.Duration.minutes(1))
    assert (free.statistic, free.dimensions) == (
        "Minimum",
        {"FileSystemId": "fs-0123456789abcdef0"},
    )
    template = Template.from_stack(stack)
    ingress = [
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == "sg-0f0e0d0c0b0a09080"
    ]
    assert sorted(ingress) == [(988, 988), (1018, 1023)]
    template.resource_count_is("AWS::FSx::FileSystem", 0)


def test_model_bucket_from_name_grants_read_under_the_prefix_only(stack: cdk.Stack) -> None:
    models = ModelArtifactBucket.from_bucket_name(
        stack, "Models", "team-models", model_prefix="ensembles/"
    )
    role = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    models.grant_read_models(role)
    models.grant_write_models(role)
    images = TrainingImageRepository(stack, "Images")
    images.grant_pull(role)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 0)
    ((_, policy),) = template.find_resources("AWS::IAM::Policy").items()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    s3_statements = [s for s in statements if str(s["Action"]).startswith("s3:")]

    def arn(suffix):
        return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::team-models{suffix}"]]}

    assert s3_statements == [
        {"Action": "s3:GetObject", "Effect": "Allow", "Resource": arn("/ensembles/*")},
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["ensembles/*"]}},
            "Effect": "Allow",
            "Resource": arn(""),
        },
        {"Action": "s3:PutObject", "Effect": "Allow", "Resource": arn("/ensembles/*")},
    ]
    assert any("ecr:BatchGetImage" in s["Action"] for s in statements)
    with pytest.raises(ValueError, match=r"^Team/Bad: model_prefix = '/abs/': expected a relative"):
        ModelArtifactBucket.from_bucket_name(stack, "Bad", "x", model_prefix="/abs/")
