"""Issue #13 point 2: one-line errors instead of "run with --debug", and unsafe archives are
refused by name before anything is uploaded."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform_cli import invoke
from ml_platform_cli.aws import Context
from tests.helpers.cli import ENSEMBLE, create_storage_stack


def _tar_with_symlink(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        data = ENSEMBLE.encode()
        info = tarfile.TarInfo("ensemble/config.pbtxt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("ensemble/passwd")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return path


def _keys(bucket: str) -> list[str]:
    listing = boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_upload_refuses_an_unsafe_archive_naming_the_member(aws, project, archives, tmp_path, mlp):
    bucket = create_storage_stack()
    bad = _tar_with_symlink(tmp_path / "model_evil.tar.gz")
    result = mlp("--cdk-json", project, "models", "upload", archives.image, bad)
    assert result.code == 1
    assert f"{bad}: member 'ensemble/passwd': is a symbolic link" in result.err
    assert _keys(bucket) == []


def test_upload_failure_is_one_line_naming_what_was_already_uploaded(
    aws, project, archives, monkeypatch, mlp
):
    from botocore.exceptions import ClientError

    from ml_platform_cli import upload

    bucket = create_storage_stack()
    first, second = sorted(archives.folder.glob("*.tar.gz"))[:2]
    original = upload.upload_client

    def deny_second(params, **_):
        if params["Key"].endswith(second.name):
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject"
            )

    def client(ctx, concurrency):
        s3 = original(ctx, concurrency)
        s3.meta.events.register("before-parameter-build.s3.PutObject", deny_second)
        return s3

    monkeypatch.setattr(upload, "upload_client", client)
    result = mlp("--cdk-json", project, "models", "upload", "--concurrency", "1", archives.folder)
    assert result.code == 1
    lines = result.err.strip().splitlines()
    error = [line for line in lines if line.startswith("mlp: error:")]
    assert error == [
        f"mlp: error: uploading {second.name} to s3://{bucket}/models/"
        f"{second.name} failed: An error occurred (AccessDenied) "
        "when calling the PutObject operation: Access Denied; already uploaded: "
        f"s3://{bucket}/models/{first.name}"
    ]
    assert "--debug" not in result.err


def test_upload_to_a_missing_bucket_is_one_line(aws, project, archives, mlp):
    bucket = create_storage_stack()
    boto3.client("s3", region_name="us-west-2").delete_bucket(Bucket=bucket)
    result = mlp("--cdk-json", project, "models", "upload", archives.image)
    assert result.code == 1
    # The upload lists the prefix first (to skip archives already there): that call fails.
    assert result.err.startswith("mlp: error: AWS error in ListObjectsV2 (NoSuchBucket): ")
    assert len(result.err.strip().splitlines()) == 1
    assert "Traceback" not in result.err and "--debug" not in result.err


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"[1]", "expected a JSON object, got list"), (b"\xff{", "not UTF-8")],
)
def test_cdk_json_that_is_not_a_json_object_is_one_line(aws_env, tmp_path, mlp, content, expected):
    cdk_json = tmp_path / "cdk.json"
    cdk_json.write_bytes(content)
    result = mlp("--cdk-json", cdk_json, "status")
    assert result.code == 1
    assert expected in result.err and str(cdk_json) in result.err
    assert "Traceback" not in result.err and "--debug" not in result.err


def test_cdk_context_json_that_is_not_an_object_is_one_line(aws_env, project, mlp):
    (project.parent / "cdk.context.json").write_text('"x"')
    result = mlp("--cdk-json", project, "status")
    assert result.code == 1
    assert "cdk.context.json: expected a JSON object, got str" in result.err


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "-1", "soon"])
def test_invoke_refuses_a_timeout_that_is_not_finite_seconds(
    aws_env, project, mlp, capsys, timeout
):
    with pytest.raises(SystemExit) as info:
        mlp("--cdk-json", project, "invoke", "--text", "hi", f"--timeout={timeout}")
    assert info.value.code == 2
    assert f"--timeout: {timeout!r}" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://localhost:8000", "https://x:8000", "localhost", "h:0"])
def test_invoke_refuses_a_triton_url_with_a_scheme_or_without_a_port(
    aws_env, project, mlp, capsys, url
):
    with pytest.raises(SystemExit) as info:
        mlp("--cdk-json", project, "invoke", "--text", "hi", "--triton-url", url)
    assert info.value.code == 2
    assert f"--triton-url: {url!r}" in capsys.readouterr().err


def test_invoke_labels_that_are_not_utf8_are_one_line(aws_env, project, tmp_path, mlp):
    labels = tmp_path / "labels.txt"
    labels.write_bytes(b"cat\n\xffdog\n")
    image = tmp_path / "x.jpg"
    image.write_bytes(b"\xff\xd8\xff")
    result = mlp("--cdk-json", project, "invoke", "--image", image, "--labels", labels)
    assert result.code == 1
    assert result.err.strip() == f"mlp: error: --labels {labels}: not UTF-8 text (byte 4)"


def test_a_missing_target_model_is_not_reported_as_a_missing_endpoint(
    aws_env, project, monkeypatch, mlp
):
    client = boto3.client("sagemaker-runtime", region_name="us-west-2")
    monkeypatch.setattr(Context, "client", lambda self, service, *a, **k: client)
    monkeypatch.setattr(invoke, "_sleep", lambda s: None)
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "invoke_endpoint",
            service_error_code="ValidationError",
            http_status_code=400,
            service_message="Failed to download model data(bucket: b, key: models/nope.tar.gz). "
            "Please ensure that there is an object located at the URL and that the role passed "
            "to CreateModel has permissions to download the model.",
        )
        result = mlp(
            "--cdk-json", project, "invoke", "--text", "hi", "--target-model", "nope.tar.gz"
        )
    assert result.code == 1
    assert result.err.startswith(
        "mlp: error: nope.tar.gz not found under triton-ensembles's model prefix"
    )
    assert "endpoint 'triton-ensembles' not found" not in result.err


def test_package_out_that_is_a_file_is_one_line(aws_env, tmp_path, mlp):
    out = tmp_path / "out"
    out.write_text("a file")
    result = mlp("models", "package", "--out", out / "models")
    assert result.code == 1
    assert (
        result.err.strip() == f"mlp: error: --out {out / 'models'}: {out} is a file, not a folder"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_package_out_that_is_not_writable_is_one_line(aws_env, tmp_path, mlp):
    out = tmp_path / "ro"
    out.mkdir(mode=0o555)
    result = mlp("models", "package", "--out", out)
    assert result.code == 1
    assert result.err.strip() == f"mlp: error: --out {out}: {out} is not writable"
