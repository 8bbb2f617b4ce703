"""inference.upload_dir: passes cdk-nag, sized from the folder, fingerprinted by content."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from ml_platform.app import new_app
from ml_platform.config import InferenceSettings
from ml_platform.constructs._model_upload import (
    UPLOAD_DIR_MAX_BYTES,
    archives_fingerprint,
    deployment_sizing,
    upload_role_name,
)
from ml_platform.stacks.inference import InferenceStack


def _archive(folder: Path, name: str) -> Path:
    from ml_platform_cli.archives import version_archive
    from tests.helpers.cli import ENSEMBLE, MODEL, write_tar

    path = folder / name
    write_tar(path, {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL})
    return version_archive(path)[0]  # upload_dir takes versioned names, as upload does


@pytest.fixture(scope="module")
def nagged(tmp_path_factory: pytest.TempPathFactory) -> tuple[InferenceStack, Path, Path]:
    folder = tmp_path_factory.mktemp("upload")
    _archive(folder, "model_small.tar.gz")
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = new_app(outdir=str(outdir))
    stack = InferenceStack(
        app,
        "Inference",
        settings=InferenceSettings(upload_dir=str(folder)),
        bucket_arn_export="Storage-ModelBucketArn",
        model_prefix="models/",
        env=cdk.Environment(account="123456789012", region="us-west-2"),
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises ValidationFailed on any unacknowledged finding (9 before)
    return stack, outdir, folder


def test_upload_dir_passes_cdk_nag(nagged) -> None:
    _, outdir, _ = nagged
    report = outdir / "validation-report.json"
    violations = (
        [v for p in json.loads(report.read_text())["pluginReports"] for v in p["violations"]]
        if report.exists()
        else []
    )
    assert violations == []


def test_the_deployment_function_is_sized_from_the_folder(nagged) -> None:
    _, outdir, _ = nagged
    template = json.loads((outdir / "Inference.template.json").read_text())
    functions = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Role"]["Fn::GetAtt"][0].startswith("UploadRole")
    ]
    assert [(f["MemorySize"], f["EphemeralStorage"]) for f in functions] == [(512, {"Size": 514})]
    assert deployment_sizing(3 * 2**30) == (2048, 6656)
    assert deployment_sizing(UPLOAD_DIR_MAX_BYTES)[1] <= 10_240
    message = deployment_sizing(UPLOAD_DIR_MAX_BYTES + 1)
    assert isinstance(message, str) and "at most 4,800 MiB" in message
    assert "mlp models upload" in message


def test_the_asset_is_named_by_content_not_rehashed(nagged, tmp_path: Path) -> None:
    _, outdir, folder = nagged
    assets = json.loads((outdir / "Inference.assets.json").read_text())["files"]
    fingerprint = archives_fingerprint(sorted(folder.glob("*.tar.gz")))
    # CDK names a custom-hashed asset by the SHA-256 of the given hash.
    assert hashlib.sha256(fingerprint.encode()).hexdigest() in assets
    # A versioned name carries its content's hash: name and size are the fingerprint. Other
    # files are hashed: the fingerprint follows content, not a touch.
    plain = _archive(tmp_path, "model.tar.gz")
    before = archives_fingerprint([plain])
    os.utime(plain, (1, 1))
    assert archives_fingerprint([plain]) == before
    plain.write_bytes(plain.read_bytes() + b"\0")
    assert archives_fingerprint([plain]) != before


def test_upload_dir_roles_are_conditioned_or_listed(nagged) -> None:
    """The BucketDeployment role exists only with upload_dir: walked like the app's roles."""
    from tests.helpers.trust import UNCONDITIONED, trust_problems

    _, outdir, _ = nagged
    template = json.loads((outdir / "Inference.template.json").read_text())
    problems, used = trust_problems("Inference", template)
    assert problems == []
    assert [e for e in UNCONDITIONED if not e.default_app and e in used] != []


def test_the_upload_role_is_named_and_scoped_to_the_model_prefix(nagged) -> None:
    """Exactly: read the asset zip, list and put under the prefix. aws-cdk's own grant
    (read-write on the whole model bucket, deletes included) is not there."""
    _, outdir, _ = nagged
    template = json.loads((outdir / "Inference.template.json").read_text())
    resources = template["Resources"]
    roles = {
        k: v
        for k, v in resources.items()
        if v["Type"] == "AWS::IAM::Role" and k.startswith("UploadRole")
    }
    ((role_id, role),) = roles.items()
    # The model bucket's policy names this role as a publisher by this fixed name.
    assert role["Properties"]["RoleName"] == "Inference-ArchiveUpload-us-west-2"
    assert upload_role_name("Inference", "us-west-2") == "Inference-ArchiveUpload-us-west-2"
    assert len(upload_role_name("X" * 60, "ap-southeast-7")) == 64
    policies = [
        v
        for v in resources.values()
        if v["Type"] == "AWS::IAM::Policy" and v["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    (policy,) = policies
    bucket = {"Fn::ImportValue": "Storage-ModelBucketArn"}
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
                        ":s3:::cdk-hnb659fds-assets-123456789012-us-west-2/*",
                    ],
                ]
            },
        },
        {
            "Action": "s3:ListBucket",
            "Effect": "Allow",
            "Resource": bucket,
            "Condition": {"StringLike": {"s3:prefix": ["models/*"]}},
        },
        {
            "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [bucket, "/models/*"]]},
        },
    ]
    # The upload waits for its role's policy (the function is given the role, not its grants).
    (upload,) = [k for k, v in resources.items() if v["Type"] == "Custom::CDKBucketDeployment"]
    assert policies and any(d.startswith("UploadRole") for d in resources[upload]["DependsOn"])
