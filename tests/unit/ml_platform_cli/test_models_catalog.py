"""``mlp models list``, ``mlp models retire`` and ``mlp invoke --model``: versions under the
prefix, what the settings reference, newest/exact resolution; moto, and Stubber for paging."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from ml_platform.config import EndpointSettings, InferenceSettings, Settings, TritonOnEksSettings
from ml_platform_cli import invoke
from ml_platform_cli.archives import (
    Reference,
    StoredArchive,
    list_archives,
    referenced_by,
    resolve,
)
from ml_platform_cli.aws import CliError, Context
from tests.helpers.cli import ACCOUNT, create_storage_stack, triton_binary_response

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
OLD, MID, NEW = "v0000000a", "v0000000b", "v0000000c"


def _stored(key: str, minutes: int) -> StoredArchive:
    return StoredArchive(key, 100, T0 + timedelta(minutes=minutes), "etag")


# --- pure logic -------------------------------------------------------------------------


def test_references_by_exact_version_by_logical_name_and_by_legacy_key():
    archives = [
        _stored(f"text-{OLD}.tar.gz", 0),
        _stored(f"text-{MID}.tar.gz", 5),
        _stored(f"text-{NEW}.tar.gz", 9),
        _stored(f"image-{OLD}.tar.gz", 1),
        _stored("legacy.tar.gz", 0),
    ]
    refs = [
        Reference("a", "text"),
        Reference("b", f"text@{OLD}"),
        Reference("b", "image"),
        Reference("c", "legacy.tar.gz"),
        Reference("c", "gone"),
    ]
    assert referenced_by(archives, refs) == {
        f"text-{NEW}.tar.gz": ["a"],  # the newest of a logical name
        f"text-{OLD}.tar.gz": ["b"],  # an exact version
        f"image-{OLD}.tar.gz": ["b"],
        "legacy.tar.gz": ["c"],
    }


def test_a_last_modified_tie_references_every_tied_version():
    archives = [_stored(f"text-{OLD}.tar.gz", 3), _stored(f"text-{NEW}.tar.gz", 3)]
    users = referenced_by(archives, [Reference("a", "text")])
    assert users == {f"text-{OLD}.tar.gz": ["a"], f"text-{NEW}.tar.gz": ["a"]}


# --- paging and resolution against stubbed S3 pages --------------------------------------


def _page(keys: list[tuple[str, int]], token: str | None = None) -> dict:
    page = {
        "IsTruncated": token is not None,
        "KeyCount": len(keys),
        "Contents": [
            {
                "Key": f"models/{k}",
                "Size": 10,
                "LastModified": T0 + timedelta(minutes=m),
                "ETag": '"e"',
            }
            for k, m in keys
        ],
    }
    if token:
        page["NextContinuationToken"] = token
    return page


def test_listing_reads_every_page():
    s3 = boto3.client(
        "s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x"
    )
    first = [(f"m{i:04d}-{OLD}.tar.gz", 0) for i in range(1000)]
    second = [(f"m{i:04d}-{OLD}.tar.gz", 0) for i in range(1000, 1003)] + [("notes.txt", 0)]
    with Stubber(s3) as stub:
        stub.add_response(
            "list_objects_v2", _page(first, "page-2"), {"Bucket": "b", "Prefix": "models/"}
        )
        stub.add_response(
            "list_objects_v2",
            _page(second),
            {"Bucket": "b", "Prefix": "models/", "ContinuationToken": "page-2"},
        )
        archives = list_archives(s3, "b", "models/")
        stub.assert_no_pending_responses()
    assert len(archives) == 1003  # every page; notes.txt is no archive
    assert archives[-1].key == f"m1002-{OLD}.tar.gz" and archives[-1].ref.version == OLD


@pytest.fixture
def stubbed_s3():
    s3 = boto3.client(
        "s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(s3) as stub:
        yield s3, stub
        stub.assert_no_pending_responses()


def test_a_logical_name_resolves_to_its_newest_version(stubbed_s3):
    s3, stub = stubbed_s3
    versions = [(f"text-{OLD}.tar.gz", 0), (f"text-{NEW}.tar.gz", 9), (f"text-{MID}.tar.gz", 5)]
    stub.add_response(
        "list_objects_v2", _page(versions), {"Bucket": "b", "Prefix": "models/text-v"}
    )  # only this name's versions
    assert resolve(s3, "b", "models/", "text")[0] == f"text-{NEW}.tar.gz"


def test_an_exact_version_resolves_to_itself_even_when_older(stubbed_s3):
    s3, stub = stubbed_s3
    versions = [(f"text-{OLD}.tar.gz", 0), (f"text-{NEW}.tar.gz", 9)]
    stub.add_response("list_objects_v2", _page(versions), {"Bucket": "b", "Prefix": ANY})
    assert resolve(s3, "b", "models/", f"text@{OLD}")[0] == f"text-{OLD}.tar.gz"


def test_resolution_refusals(stubbed_s3):
    s3, stub = stubbed_s3
    tied = _page([(f"text-{OLD}.tar.gz", 3), (f"text-{NEW}.tar.gz", 3)])
    stub.add_response("list_objects_v2", tied, {"Bucket": "b", "Prefix": ANY})
    with pytest.raises(CliError) as missing:
        resolve(s3, "b", "models/", f"text@{MID}")
    assert str(missing.value) == (
        f"archive text@{MID} not found under s3://b/models/ (versions of text there: {OLD}, {NEW})"
    )
    stub.add_response("list_objects_v2", tied, {"Bucket": "b", "Prefix": ANY})
    with pytest.raises(CliError) as tie:
        resolve(s3, "b", "models/", "text")
    assert str(tie.value) == (
        f"archive 'text': 2 versions share the newest upload time "
        f"(text@{OLD}, text@{NEW}); name one as NAME@VERSION"
    )
    stub.add_response(
        "list_objects_v2", {"IsTruncated": False, "KeyCount": 0}, {"Bucket": "b", "Prefix": ANY}
    )
    with pytest.raises(CliError, match=r"no version of archive 'image' under s3://b/models/"):
        resolve(s3, "b", "models/", "image")
    with pytest.raises(CliError, match="is not an archive reference"):
        resolve(s3, "b", "models/", "Text.tar.gz")  # refused before any call


# --- the commands, against moto ------------------------------------------------------------


@pytest.fixture
def settings(monkeypatch):
    """Two endpoints and Triton on EKS referencing archives by logical name and by version."""
    value = Settings(
        inference=InferenceSettings(
            endpoints=(
                EndpointSettings(name="images", archives=("image",)),
                EndpointSettings(name="text-pinned", archives=(f"text@{OLD}",)),
            )
        ),
        triton_on_eks=TritonOnEksSettings(archives=("image",)),
    )
    monkeypatch.setattr(Context, "settings", property(lambda self: value))
    return value


def _put(
    bucket: str,
    key: str,
    minutes: int,
    body: bytes = b"archive bytes",
    metadata: dict[str, str] | None = None,
) -> None:
    from moto.s3.models import s3_backends

    boto3.client("s3", region_name="us-west-2").put_object(
        Bucket=bucket, Key=f"models/{key}", Body=body, Metadata=metadata or {}
    )
    stored = s3_backends[ACCOUNT]["global"].buckets[bucket].keys[f"models/{key}"]
    stored.last_modified = (T0 + timedelta(minutes=minutes)).replace(tzinfo=None)


@pytest.fixture
def bucket(aws, settings):
    name = create_storage_stack()
    _put(name, f"text-{OLD}.tar.gz", 0, b"x" * 2048)
    # What `mlp models upload` records (archive_meta.S3_METADATA): a text archive built for the
    # configured 25.09, and an image archive of 24.09 that needs the TensorFlow backend.
    current = {"mlp-triton-release": "25.09", "mlp-backends": "onnxruntime,python"}
    _put(name, f"text-{NEW}.tar.gz", 9, metadata=current)
    _put(name, f"image-{OLD}.tar.gz", 1)
    legacy = {"mlp-triton-release": "24.09", "mlp-backends": "dali,tensorflow_graphdef"}
    _put(name, f"image-{NEW}.tar.gz", 7, metadata=legacy)
    return name


def test_list_as_json_and_as_a_table(bucket, project, mlp):
    result = mlp("--cdk-json", project, "models", "list", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert (report["bucket"], report["prefix"]) == (bucket, "models/")
    assert [
        (a["logical"], a["version"], a["size"], a["last_modified"], a["referenced_by"])
        for a in report["archives"]
    ] == [
        ("image", OLD, 13, "2026-11-01T12:01:00+00:00", []),
        ("image", NEW, 13, "2026-11-01T12:07:00+00:00", ["images", "triton-on-eks"]),
        ("text", OLD, 2048, "2026-11-01T12:00:00+00:00", ["text-pinned"]),
        ("text", NEW, 13, "2026-11-01T12:09:00+00:00", []),
    ]
    assert report["triton_version"] == "25.09"
    assert [(a["built_for"], a["release_problems"]) for a in report["archives"]] == [
        (None, None),  # nothing recorded
        (
            "24.09",
            [
                f"image@{NEW}: it needs the TensorFlow backend, which Triton shipped last in "
                "25.02; Triton 25.09 cannot load it: convert the model to ONNX and package the "
                "archive again"
            ],
        ),
        (None, None),
        ("25.09", []),
    ]

    result = mlp("--cdk-json", project, "models", "list")
    assert result.code == 0, result.err
    assert result.out.splitlines()[0] == (
        f"s3://{bucket}/models/: 4 archive(s) of 2 logical name(s), 2,087 bytes"
    )
    rows = [line for line in result.out.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row.split("│")[1:-1]] for row in rows] == [
        ["image", OLD, "13 B", "2026-11-01 12:01:00", "-", "-", "?"],
        ["image", NEW, "13 B", "2026-11-01 12:07:00", "images, triton-on-eks", "24.09", "no"],
        ["text", OLD, "2.0 KiB", "2026-11-01 12:00:00", "text-pinned", "-", "?"],
        ["text", NEW, "13 B", "2026-11-01 12:09:00", "-", "25.09", "yes"],
    ]
    assert (
        f"cannot load on Triton 25.09 (inference.triton_version): image@{NEW}: it needs the "
        "TensorFlow backend"
    ) in result.out


def test_retire_refuses_referenced_versions_then_removes_unreferenced_ones(bucket, project, mlp):
    result = mlp("--cdk-json", project, "models", "retire", "text", "Bad Name")
    assert result.code == 1
    lines = result.err.splitlines()
    assert lines[1] == (
        "  - text: name the version to retire (NAME@VERSION); `mlp models list` shows them"
    )
    assert "'Bad Name' is not an archive reference" in lines[2]

    result = mlp(
        "--cdk-json",
        project,
        "models",
        "retire",
        f"image@{NEW}",
        f"text@{OLD}",
        f"text@{NEW}",
        f"text@{MID}",
    )
    assert result.code == 1
    assert result.err.splitlines() == [
        "mlp: error: refusing to retire:",
        f"  - image@{NEW}: in use by images, triton-on-eks (settings name it, or name its "
        "logical name and it is the newest version)",
        f"  - text@{OLD}: in use by text-pinned (settings name it, or name its logical name "
        "and it is the newest version)",
        f"  - text@{NEW}: the newest version of text: clients granted text-v* and endpoint "
        "instances that cached it may still use it; pass --force to retire it anyway",
        f"  - text@{MID}: no such archive under s3://{bucket}/models/",
    ]
    assert len(_keys(bucket)) == 4  # nothing deleted, not even text@NEW

    # text@NEW is the newest version of text: retired only with --force (issue 20).
    result = mlp(
        "--cdk-json", project, "models", "retire", f"image@{OLD}", f"text@{NEW}", "--force"
    )
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        f"retired s3://{bucket}/models/image-{OLD}.tar.gz",
        f"retired s3://{bucket}/models/text-{NEW}.tar.gz",
    ]
    assert _keys(bucket) == [f"models/image-{NEW}.tar.gz", f"models/text-{OLD}.tar.gz"]


def test_retire_refuses_the_newest_and_recently_superseded_versions_without_force(
    bucket, project, mlp, monkeypatch
):
    from ml_platform_cli import retire

    # image@NEW was uploaded at T0 + 7 min: image@OLD has been superseded for 3 h at T0 + 3h7m.
    monkeypatch.setattr(retire, "_now", lambda: T0 + timedelta(hours=3, minutes=7))
    result = mlp("--cdk-json", project, "models", "retire", f"image@{OLD}", f"text@{NEW}")
    assert result.code == 1
    assert result.err.splitlines() == [
        "mlp: error: refusing to retire:",
        f"  - image@{OLD}: superseded by image@{NEW} only 3.0 h ago (less than "
        "--min-superseded-hours 24); clients and cached instances may still use it; pass "
        "--force to retire it anyway",
        f"  - text@{NEW}: the newest version of text: clients granted text-v* and endpoint "
        "instances that cached it may still use it; pass --force to retire it anyway",
    ]
    assert len(_keys(bucket)) == 4
    result = mlp(
        "--cdk-json", project, "models", "retire", f"image@{OLD}", "--min-superseded-hours", "3"
    )
    assert result.code == 0, result.err
    assert f"models/image-{OLD}.tar.gz" not in _keys(bucket)


def test_retire_given_the_key_upload_printed_names_the_reference(bucket, project, mlp):
    uri = f"s3://{bucket}/models/text-{NEW}.tar.gz"
    result = mlp("--cdk-json", project, "models", "retire", uri, f"text-{NEW}.tar.gz", "x y")
    assert result.code == 1
    assert result.err.splitlines()[1:] == [
        f"  - {uri!r} is an object key; name the version as text@{NEW}",
        f"  - 'text-{NEW}.tar.gz' is an object key; name the version as text@{NEW}",
        "  - 'x y' is not an archive reference: expected NAME or NAME@vXXXXXXXX (NAME of "
        "lower-case letters, digits, '_' and '-'; the version 'v' and 8 hex digits), e.g. "
        "model_trt_python_t4@v1a2b3c4d",
    ]


def _keys(bucket: str) -> list[str]:
    listing = boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


@pytest.fixture
def runtime(bucket, monkeypatch):
    client = boto3.client("sagemaker-runtime", region_name="us-west-2")
    original = Context.client
    monkeypatch.setattr(
        Context,
        "client",
        lambda self, service, region=None, **kw: (
            client if service == "sagemaker-runtime" else original(self, service, region)
        ),
    )
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_invoke_resolves_the_newest_or_the_exact_version(runtime, bucket, project, mlp):
    import numpy as np

    for model, key in [("text", f"text-{NEW}.tar.gz"), (f"text@{OLD}", f"text-{OLD}.tar.gz")]:
        body, content_type = triton_binary_response("finaloutput", np.eye(1, 384, dtype="f4"))
        runtime.add_response(
            "invoke_endpoint",
            {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": content_type},
            {"EndpointName": "e", "TargetModel": key, "ContentType": ANY, "Body": ANY},
        )
        result = mlp(
            "--cdk-json", project, "invoke", "--endpoint", "e", "--model", model, "--text", "hi"
        )
        assert result.code == 0, result.err
        assert result.out.startswith(f"e / {key}: 1 attempt(s)")

    result = mlp("--cdk-json", project, "invoke", "--model", f"text@{MID}", "--text", "hi")
    assert result.code == 1
    assert result.err == (
        f"mlp: error: archive text@{MID} not found under s3://{bucket}"
        f"/models/ (versions of text there: {OLD}, {NEW})\n"
    )


def test_invoke_model_and_target_model_exclude_each_other(project, mlp, capsys):
    with pytest.raises(SystemExit):
        mlp(
            "--cdk-json",
            project,
            "invoke",
            "--model",
            "text",
            "--target-model",
            "x.tar.gz",
            "--text",
            "hi",
        )
    assert "not allowed with argument" in capsys.readouterr().err
    assert invoke.TEXT_OUTPUT == "finaloutput"
