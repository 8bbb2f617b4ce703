"""storage.model_bucket_kms and storage.image_repository_kms: customer managed keys for the
model bucket and the training image repository, off by default (SSE-S3 / AES256), and who may
use the bucket's key (issue 34, finding 2)."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.storage import (
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)
from tests.support import GRANTS_ONLY_FOR_AWS_RESOURCES, synthesize


def _stack() -> cdk.Stack:
    return cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )


def _of(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_customer_key_encrypts_the_model_bucket_only_and_readers_get_decrypt() -> None:
    stack = _stack()
    models = ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(customer_key=True))
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    models.grant_read_models(reader)
    iam.Role(stack, "Bystander", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    template = Template.from_stack(stack).to_json()
    ((key_id, key),) = _of(template, "AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert GRANTS_ONLY_FOR_AWS_RESOURCES in key["Properties"]["KeyPolicy"]["Statement"]
    buckets = _of(template, "AWS::S3::Bucket")
    rules = {
        k: b["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        for k, b in buckets.items()
    }
    model_id = stack.get_logical_id(models.bucket.node.default_child)
    assert rules.pop(model_id) == [
        {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {
                "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]},
                "SSEAlgorithm": "aws:kms",
            },
        }
    ]
    # S3 log delivery supports only SSE-S3 destinations.
    assert list(rules.values()) == [[{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]]
    decrypters = [
        policy["Properties"]["Roles"]
        for policy in _of(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "kms:Decrypt"
        and statement["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    ]
    assert decrypters == [[{"Ref": stack.get_logical_id(reader.node.default_child)}]]


def test_default_stays_sse_s3_and_aes256() -> None:
    stack = _stack()
    ModelArtifactBucket(stack, "Models")
    TrainingImageRepository(
        stack, "Images", props=TrainingImageRepositoryProps(repository_name="training")
    )
    template = Template.from_stack(stack).to_json()
    assert _of(template, "AWS::KMS::Key") == {}
    (repo,) = _of(template, "AWS::ECR::Repository").values()
    # No EncryptionConfiguration: ECR's default, AES256 (unchanged from earlier releases).
    assert "EncryptionConfiguration" not in repo["Properties"]


def test_image_repository_customer_key() -> None:
    stack = _stack()
    TrainingImageRepository(
        stack,
        "Images",
        props=TrainingImageRepositoryProps(repository_name="training", customer_key=True),
    )
    template = Template.from_stack(stack).to_json()
    ((key_id, key),) = _of(template, "AWS::KMS::Key").items()
    assert GRANTS_ONLY_FOR_AWS_RESOURCES in key["Properties"]["KeyPolicy"]["Statement"]
    (repo,) = _of(template, "AWS::ECR::Repository").values()
    assert repo["Properties"]["EncryptionConfiguration"] == {
        "EncryptionType": "KMS",
        "KmsKey": {"Fn::GetAtt": [key_id, "Arn"]},
    }


@pytest.fixture(scope="module")
def with_keys(tmp_path_factory: pytest.TempPathFactory):
    return synthesize(
        tmp_path_factory.mktemp("kms"),
        {"storage": {"model_bucket_kms": True, "image_repository_kms": True}},
        nag=False,
    )


def test_only_the_endpoint_and_triton_roles_use_the_bucket_key(with_keys) -> None:
    """The other stacks import the key's ARN; kms:Decrypt goes to the endpoint's execution role
    and Triton's pod role, nothing else (cdk.json sets no upload_dir, whose deploy-time upload
    would add GenerateDataKey and Decrypt for its multipart puts)."""
    export = {"Fn::ImportValue": "MlPlatform-Storage-ModelBucketKeyArn"}
    users: dict[str, set[str]] = {}
    for stack in ("Inference", "TrainingCluster", "GpuNodes", "TrainiumNodes"):
        for policy in _of(with_keys.template_json(stack), "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if json.dumps(export) in json.dumps(statement["Resource"]):
                    actions = statement["Action"]
                    for role in policy["Properties"]["Roles"]:
                        users.setdefault(json.dumps(role), set()).update(
                            actions if isinstance(actions, list) else [actions]
                        )
    assert users == {
        '{"Ref": "TritonEnsemblesExecutionRoleADDAC302"}': {"kms:Decrypt"},
        '{"Ref": "TritonPodRole23DF5911"}': {"kms:Decrypt"},
    }
    outputs = with_keys.template_json("Storage")["Outputs"]
    assert outputs["ModelBucketKeyArn"]["Export"]["Name"] == "MlPlatform-Storage-ModelBucketKeyArn"


@pytest.fixture(scope="module")
def key_and_upload_dir(tmp_path_factory: pytest.TempPathFactory):
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    folder = tmp_path_factory.mktemp("upload")
    archive = folder / "model_small.tar.gz"
    write_tar(archive, {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL})
    version_archive(archive)  # upload_dir takes versioned names, as `mlp models upload` does
    return synthesize(
        tmp_path_factory.mktemp("kms-upload"),
        {"storage": {"model_bucket_kms": True}, "inference": {"upload_dir": str(folder)}},
    )


def test_the_upload_role_gets_exactly_what_sse_kms_puts_need(key_and_upload_dir) -> None:
    """With the bucket key and an upload_dir, the deploy-time upload's role gets one KMS
    statement: kms:GenerateDataKey (a data key per object it writes) and kms:Decrypt (S3 needs it
    to complete a multipart upload, which `aws s3 sync` uses above 8 MiB), on the imported key's
    ARN and nothing else. Observed: the synthesized Inference template. Taken from AWS: the
    actions SSE-KMS puts need, S3 user guide "Multipart upload and permissions"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html) and "Specifying
    server-side encryption with AWS KMS" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
    specifying-kms-encryption.html). The endpoint and Triton roles keep decrypt only."""
    synthesized = key_and_upload_dir
    assert synthesized.validation_error is None  # cdk-nag passes with both on
    template = synthesized.template_json("Inference")
    key_arn = {"Fn::ImportValue": "MlPlatform-Storage-ModelBucketKeyArn"}
    (upload_role,) = [
        k
        for k, r in _of(template, "AWS::IAM::Role").items()
        if r["Properties"]
        .get("Description", "")
        .startswith("Deploy-time upload of inference.upload_dir")
    ]
    kms_statements: dict[str, list[dict]] = {}
    for policy in _of(template, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if any(a.startswith("kms:") for a in actions) or "*" in actions:
                for role in policy["Properties"]["Roles"]:
                    kms_statements.setdefault(role["Ref"], []).append(statement)
    assert kms_statements.pop(upload_role) == [
        {
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Effect": "Allow",
            "Resource": key_arn,
        }
    ]
    assert kms_statements == {
        "TritonEnsemblesExecutionRoleADDAC302": [
            {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": key_arn}
        ]
    }
    # Triton's pod role lives in the cluster stack; still decrypt only, and no one else there.
    (triton,) = [
        s
        for p in _of(synthesized.template_json("TrainingCluster"), "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "kms:" in json.dumps(s["Action"])
    ]
    assert triton == {"Action": "kms:Decrypt", "Effect": "Allow", "Resource": key_arn}
