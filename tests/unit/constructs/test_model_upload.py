"""ModelArchiveUpload on its own, in a stack of the user's with the bucket in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs._model_upload import ModelArchiveUpload
from ml_platform.constructs.storage import ModelArtifactBucket, ModelArtifactBucketProps

ENV = cdk.Environment(account="111122223333", region="eu-west-1")


def _folder(tmp_path: Path) -> Path:
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    path = tmp_path / "model_small.tar.gz"
    write_tar(path, {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL})
    version_archive(path)
    return tmp_path


def test_the_upload_sits_in_its_scope_and_writes_only_under_the_prefix(tmp_path: Path) -> None:
    stack = cdk.Stack(new_app(), "Team", env=ENV)
    models = ModelArtifactBucket(
        stack, "Models", props=ModelArtifactBucketProps(model_prefix="ens/")
    )
    upload = ModelArchiveUpload(stack, source_dir=str(_folder(tmp_path)), models=models)
    # No construct level of its own: the ids the inference stack always gave them.
    assert (upload.role.node.path, upload.deployment.node.path) == (
        "Team/UploadRole",
        "Team/UploadArchives",
    )
    template = Template.from_stack(stack)
    role_id = stack.get_logical_id(upload.role.node.default_child)
    role = template.find_resources("AWS::IAM::Role")[role_id]["Properties"]
    assert role["RoleName"] == "Team-ArchiveUpload-eu-west-1"
    policies: dict[str, Any] = template.find_resources("AWS::IAM::Policy")
    (policy,) = [p for p in policies.values() if p["Properties"]["Roles"] == [{"Ref": role_id}]]
    bucket_id = stack.get_logical_id(models.bucket.node.default_child)
    bucket_arn = {"Fn::GetAtt": [bucket_id, "Arn"]}
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":s3:::cdk-hnb659fds-assets-111122223333-eu-west-1/*",
                    ],
                ]
            },
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["ens/*"]}},
            "Effect": "Allow",
            "Resource": bucket_arn,
        },
        {
            "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [bucket_arn, "/ens/*"]]},
        },
    ]
    template.has_resource_properties(
        "Custom::CDKBucketDeployment", {"DestinationBucketKeyPrefix": "ens/", "Prune": False}
    )


def test_a_missing_folder_is_named_with_its_setting(tmp_path: Path) -> None:
    stack = cdk.Stack(new_app(), "Team", env=ENV)
    models = ModelArtifactBucket(stack, "Models")
    with pytest.raises(ValueError, match=r"^Team: uploads='.*nowhere': not a directory$"):
        ModelArchiveUpload(
            stack, source_dir=str(tmp_path / "nowhere"), models=models, setting="uploads"
        )
