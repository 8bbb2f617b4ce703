"""``mlp models upload`` and ``retire`` under the model bucket's archive policy.

moto applies a bucket policy's Deny statements but ignores their conditions, and its
CloudFormation does not create bucket policies. Here the synthesized policy is put on moto's
bucket and moto's permission check is replaced by :func:`tests.s3_policy.denied`, fed with what
each HTTP request really carries: its operation (PutObject, CreateMultipartUpload, UploadPart,
CompleteMultipartUpload, DeleteObject), its ``If-None-Match`` header and the caller's ARN. So
the CLI's own requests, single-part and multipart, meet the policy's real conditions.
"""

from __future__ import annotations

import base64
import contextvars
import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from botocore.exceptions import ClientError

from ml_platform.app import new_app
from ml_platform.constructs.storage import ModelArtifactBucket, ModelArtifactBucketProps
from ml_platform_cli.archives import version_archive
from tests.helpers.cli import ENSEMBLE, MODEL, create_storage_stack, write_tar, write_versioned
from tests.s3_policy import denied
from tests.unit.constructs.test_archive_bucket_policy import BUCKET_ARN, bucket_policy

PUBLISHER = "arn:aws:iam::123456789012:role/Publisher"
OTHER = "arn:aws:iam::123456789012:role/SomeAppWithS3FullAccess"
_REQUEST = contextvars.ContextVar("s3_request", default=None)


def operation(method: str, query: dict, headers) -> tuple[str, bool | None]:
    """(IAM action, s3:ObjectCreationOperation) of an object request."""
    if method == "PUT":
        return "s3:PutObject", "partNumber" not in query  # UploadPart is no creation
    if method == "POST" and "uploads" in query:
        return "s3:PutObject", False  # CreateMultipartUpload
    if method == "POST" and "uploadId" in query:
        return "s3:PutObject", True  # CompleteMultipartUpload
    if method == "DELETE":
        return ("s3:DeleteObjectVersion" if "versionId" in query else "s3:DeleteObject"), None
    return f"s3:{method.capitalize()}Object", None


class Enforcer:
    caller = PUBLISHER


@pytest.fixture
def enforced(aws, monkeypatch):
    from moto.iam.access_control import PermissionResult
    from moto.s3 import models, responses

    real = responses.S3Response._key_response

    def key_response(self, request, full_url):
        token = _REQUEST.set((request, full_url))
        try:
            return real(self, request, full_url)
        finally:
            _REQUEST.reset(token)

    def get_permission(bucket, action: str, resource: str):
        if bucket.policy is None:
            return PermissionResult.NEUTRAL
        context = {"aws:PrincipalArn": Enforcer.caller, "aws:SecureTransport": "true"}
        current = _REQUEST.get()
        if current is not None:
            request, url = current
            query = parse_qs(urlparse(url).query, keep_blank_values=True)
            action, creation = operation(request.method, query, request.headers)
            if creation is not None:
                context["s3:ObjectCreationOperation"] = str(creation).lower()
            if request.headers.get("If-None-Match"):
                context["s3:if-none-match"] = request.headers["If-None-Match"]
        refused = denied(json.loads(bucket.policy), action, resource, context)
        return PermissionResult.DENIED if refused else PermissionResult.NEUTRAL

    monkeypatch.setattr(responses.S3Response, "_key_response", key_response)
    monkeypatch.setattr(models.FakeBucket, "get_permission", get_permission)
    Enforcer.caller = PUBLISHER
    bucket = create_storage_stack()
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(publishers=(PUBLISHER,)))
    policy = json.dumps(bucket_policy(Template.from_stack(stack).to_json()))
    boto3.client("s3", region_name="us-west-2").put_bucket_policy(
        Bucket=bucket, Policy=policy.replace(BUCKET_ARN, f"arn:aws:s3:::{bucket}")
    )
    return bucket


def large_archive(folder: Path) -> Path:
    """A valid archive above the 8 MiB multipart threshold (incompressible text)."""
    folder.mkdir(parents=True, exist_ok=True)
    noise = base64.b64encode(os.urandom(12 * 1024 * 1024)).decode()
    path = write_tar(
        folder / "model_big.tar.gz",
        {
            "ensemble/config.pbtxt": ENSEMBLE,
            "encoder/config.pbtxt": MODEL,
            "encoder/1/weights.txt": noise,
        },
    )
    assert path.stat().st_size > 8 * 1024 * 1024
    return version_archive(path)[0]


def test_the_publisher_uploads_single_part_and_multipart(enforced, project, mlp, tmp_path) -> None:
    small = write_versioned(tmp_path / "out", "model_small")
    big = large_archive(tmp_path / "out")
    result = mlp("--cdk-json", project, "models", "upload", tmp_path / "out")
    assert result.code == 0, result.err
    assert sorted(result.out.splitlines()) == sorted(
        [
            f"s3://{enforced}/models/{small.name}  (uploaded)",
            f"s3://{enforced}/models/{big.name}  (uploaded)",
        ]
    )
    # Again: both skipped (same content), nothing is overwritten.
    again = mlp("--cdk-json", project, "models", "upload", tmp_path / "out")
    assert again.code == 0, again.err
    assert "0 uploaded" in again.err and "2 skipped" in again.err


def test_a_put_without_if_none_match_is_refused_even_for_the_publisher(enforced) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    key = "models/model_x-v0123abcd.tar.gz"
    with pytest.raises(ClientError) as error:
        s3.put_object(Bucket=enforced, Key=key, Body=b"x")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    s3.put_object(Bucket=enforced, Key=key, Body=b"x", IfNoneMatch="*")
    # Outside the prefix the archive statements do not apply.
    s3.put_object(Bucket=enforced, Key="notes/readme.txt", Body=b"x")


def test_anyone_else_may_neither_upload_nor_delete(enforced, project, mlp, tmp_path) -> None:
    write_versioned(tmp_path / "out", "model_small")
    Enforcer.caller = OTHER
    result = mlp("--cdk-json", project, "models", "upload", tmp_path / "out")
    assert result.code != 0
    s3 = boto3.client("s3", region_name="us-west-2")
    assert s3.list_objects_v2(Bucket=enforced, Prefix="models/").get("KeyCount") == 0
    Enforcer.caller = PUBLISHER
    key = "models/model_x-v0123abcd.tar.gz"
    s3.put_object(Bucket=enforced, Key=key, Body=b"x", IfNoneMatch="*")
    Enforcer.caller = OTHER
    with pytest.raises(ClientError):
        s3.delete_object(Bucket=enforced, Key=key)
    Enforcer.caller = PUBLISHER
    s3.delete_object(Bucket=enforced, Key=key)
