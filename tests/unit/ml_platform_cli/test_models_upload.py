"""``mlp models upload`` with moto: versioned keys, never an overwrite, parallel uploads under
one progress display; bucket and prefix from the Storage stack's outputs."""

from __future__ import annotations

import base64
import hashlib
import io
import random
import shutil
import threading
import time
from pathlib import Path

import boto3
import pytest
from rich.console import Console

from ml_platform.triton.archive_names import content_version
from ml_platform.triton.repository import archive_problems
from ml_platform_cli import upload
from ml_platform_cli.archives import SHA256_METADATA
from tests.helpers.cli import ENSEMBLE, MODEL, create_storage_stack, write_tar, write_versioned

REGION = "us-west-2"


def _s3():
    return boto3.client("s3", region_name=REGION)


def _keys(bucket: str) -> list[str]:
    listing = _s3().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=120)


def _count_calls(s3, operation: str) -> list[dict]:
    calls: list[dict] = []
    s3.meta.events.register(f"before-call.s3.{operation}", lambda params, **_: calls.append(params))
    return calls


def test_uploads_versioned_archives_with_their_sha256(aws, project, archives, mlp):
    bucket = create_storage_stack()
    image, text = archives.image.name, archives.text.name
    assert image == f"model_tf_dali-{content_version(archives.image)}.tar.gz"

    result = mlp("--cdk-json", project, "models", "upload", archives.folder)

    assert result.code == 0, result.err
    assert _keys(bucket) == sorted([f"models/{image}", f"models/{text}"])
    assert result.out.splitlines() == sorted(
        [
            f"s3://{bucket}/models/{image}  (uploaded)",
            f"s3://{bucket}/models/{text}  (uploaded)",
        ]
    )
    got = _s3().get_object(Bucket=bucket, Key=f"models/{text}")
    assert got["Body"].read() == archives.text.read_bytes()
    assert got["Metadata"] == {
        SHA256_METADATA: hashlib.sha256(archives.text.read_bytes()).hexdigest(),
        # What it needs of the release (archive_meta): read from its configs.
        "mlp-backends": "onnxruntime,python",
    }
    assert "2/2 archives (2 uploaded, 0 skipped)" in result.err  # the one progress display
    assert "2 archive(s): 2 uploaded" in result.err


def test_same_content_again_is_skipped_without_sending_it(aws, project, archives):
    bucket = create_storage_stack()
    s3 = _s3()
    first = upload.upload_archives(
        s3, [archives.image, archives.text], bucket, "models/", console=_quiet()
    )
    assert [o.state for o in first.outcomes] == ["uploaded", "uploaded"]
    puts = _count_calls(s3, "PutObject")
    second = upload.upload_archives(
        s3, [archives.image, archives.text], bucket, "models/", console=_quiet()
    )
    assert [o.state for o in second.outcomes] == ["skipped", "skipped"]
    assert puts == []


def test_same_content_without_metadata_is_recognised_by_its_md5_etag(aws, archives):
    # e.g. put there by the stack's deploy-time upload (inference.upload_dir), no sha256.
    bucket = create_storage_stack()
    s3 = _s3()
    s3.put_object(
        Bucket=bucket, Key=f"models/{archives.text.name}", Body=archives.text.read_bytes()
    )
    report = upload.upload_archives(s3, [archives.text], bucket, "models/", console=_quiet())
    assert [o.state for o in report.outcomes] == ["skipped"]


@pytest.mark.parametrize("metadata", [{}, {SHA256_METADATA: "0" * 64}])
def test_never_overwrites_a_key_holding_other_content(aws, project, archives, mlp, metadata):
    bucket = create_storage_stack()
    key = f"models/{archives.text.name}"
    _s3().put_object(Bucket=bucket, Key=key, Body=b"other bytes", Metadata=metadata)

    result = mlp("--cdk-json", project, "models", "upload", archives.text)

    assert result.code == 1
    assert result.err.splitlines()[-2:] == [
        "mlp: error: refusing to upload:",
        f"  - s3://{bucket}/{key} already exists with different content; archives are "
        "immutable, so it was left alone (repackage to get a new version)",
    ]
    assert _s3().get_object(Bucket=bucket, Key=key)["Body"].read() == b"other bytes"
    assert "Traceback" not in result.err


def test_a_key_created_after_the_listing_is_not_overwritten(aws, archives):
    # Another writer wins the race: the conditional PutObject (If-None-Match: *) gets 412.
    bucket = create_storage_stack()
    s3, other = _s3(), _s3()
    key = f"models/{archives.text.name}"

    def race(params, **_):
        if params["Key"] == key and not other.list_objects_v2(Bucket=bucket)["KeyCount"]:
            other.put_object(Bucket=bucket, Key=key, Body=b"the other writer's bytes")

    s3.meta.events.register("before-parameter-build.s3.PutObject", race)
    report = upload.upload_archives(s3, [archives.text], bucket, "models/", console=_quiet())
    (outcome,) = report.outcomes
    assert outcome.state == "refused"
    assert "already exists with different content" in outcome.problems[0]
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"the other writer's bytes"


def test_refuses_bad_archives_listing_every_problem(aws, project, archives, tmp_path, mlp):
    bucket = create_storage_stack()
    no_ensemble = write_versioned(tmp_path, "no_ensemble")
    no_ensemble = _retar(no_ensemble, {"encoder/config.pbtxt": MODEL})
    nested = _retar(no_ensemble, {"repo/ensemble/config.pbtxt": ENSEMBLE}, "nested")
    broken = _retar(no_ensemble, {"ensemble/config.pbtxt": "platform: ["}, "broken")
    renamed = tmp_path / f"renamed-{content_version(archives.image)}.tar.gz"
    shutil.copy(archives.text, renamed)  # a name whose version is not its content's

    # The good archive last and one at a time: the first problem stops further uploads.
    result = mlp(
        "--cdk-json",
        project,
        "models",
        "upload",
        "--concurrency",
        "1",
        no_ensemble,
        nested,
        broken,
        renamed,
        archives.text,
    )

    assert result.code == 1
    lines = result.err.splitlines()
    assert "mlp: error: refusing to upload:" in lines
    missing_ensemble = 'no <model>/config.pbtxt with platform: "ensemble" at the archive root'
    assert f"  - {no_ensemble}: {missing_ensemble}" in lines
    assert f"  - {nested}: {missing_ensemble}" in lines
    assert any(
        line.startswith(f"  - {broken}: ensemble/config.pbtxt: not a Triton model config")
        for line in lines
    )
    assert (
        f"  - {renamed}: named version {content_version(archives.image)}, but its content "
        f"is version {content_version(archives.text)} (repackage it with mlp models "
        "package)"
    ) in lines
    assert (
        "5 archive(s): 0 uploaded (0 B), 0 skipped (same content), 4 refused, "
        "1 not started" in result.err
    )
    assert "Traceback" not in result.err
    assert _keys(bucket) == []  # not even the good archive


def _retar(like: Path, files: dict[str, str], logical: str | None = None) -> Path:
    """A versioned archive of ``files``, named like ``like`` (or with ``logical``)."""
    from ml_platform_cli.archives import version_archive

    name = logical or like.name.split("-v")[0]
    for old in like.parent.glob(f"{name}-v*.tar.gz"):
        old.unlink()
    return version_archive(write_tar(like.parent / f"{name}.tar.gz", files))[0]


def test_name_problems_and_content_problems_come_together(aws, project, archives, tmp_path, mlp):
    bad_name = tmp_path / "model tf.tar.gz"
    shutil.copy(archives.image, bad_name)
    wrong_suffix = tmp_path / "model.zip"
    shutil.copy(archives.image, wrong_suffix)
    not_tar = tmp_path / "not_tar-v00000000.tar.gz"
    not_tar.write_bytes(b"plain bytes")
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(archives.image, twice / archives.image.name)

    result = mlp(
        "--cdk-json",
        project,
        "models",
        "upload",
        archives.image,
        twice,
        bad_name,
        wrong_suffix,
        not_tar,
        tmp_path / "missing.tar.gz",
    )

    assert result.code == 1
    lines = result.err.splitlines()
    assert lines[0] == "mlp: error: refusing to upload:"
    assert f"  - {tmp_path / 'missing.tar.gz'}: no such file or folder" in lines
    assert f"  - {archives.image.name}: given more than once (archives share one prefix)" in lines
    versioned = "not a versioned archive name: expected <logical>-v<8 hex digits>.tar.gz"
    assert any(line.startswith(f"  - {bad_name}: {versioned}") for line in lines)
    assert any(str(bad_name) in line and "characters outside" in line for line in lines)
    assert any(str(wrong_suffix) in line and "must end with" in line for line in lines)
    assert f"  - {not_tar}: not a gzip-compressed tar archive (not a gzip file)" in lines
    assert "Traceback" not in result.err  # and no AWS call was needed: no stack exists here


def test_one_progress_task_for_200_archives(aws, tmp_path, monkeypatch):
    bucket = create_storage_stack()
    monkeypatch.setattr(upload, "ARCHIVE_CHECKS", [])  # checks are tested above; this is I/O
    paths = [write_versioned(tmp_path, f"bulk-{i:03d}", salt=str(i)) for i in range(200)]
    made = []

    def spy(console):
        made.append(upload_new_progress(console))
        return made[-1]

    upload_new_progress = upload.new_progress
    monkeypatch.setattr(upload, "new_progress", spy)
    console = Console(file=io.StringIO(), width=120)
    report = upload.upload_archives(_s3(), paths, bucket, "models/", console=console)

    assert report.count("uploaded") == 200
    (progress,) = made
    (task,) = progress.tasks
    assert task.fields["done"] == 200 and task.fields["uploaded"] == 200
    assert task.completed == task.total == sum(p.stat().st_size for p in paths)
    assert "200/200 archives (200 uploaded, 0 skipped)" in console.file.getvalue()
    assert len(_keys(bucket)) == 200


@pytest.mark.parametrize("concurrency", [1, 6])
def test_uploads_run_in_parallel_up_to_the_concurrency(aws, tmp_path, concurrency):
    bucket = create_storage_stack()
    paths = [write_versioned(tmp_path, f"par-{i:02d}", salt=str(i)) for i in range(12)]
    s3 = _s3()
    lock = threading.Lock()
    in_flight, peak, threads = [0], [0], set()

    def enter(**_):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            threads.add(threading.get_ident())
        time.sleep(0.05)  # a slow request, so that overlapping ones are seen

    def leave(**_):
        with lock:
            in_flight[0] -= 1

    s3.meta.events.register("before-call.s3.PutObject", enter)
    s3.meta.events.register("after-call.s3.PutObject", leave)
    report = upload.upload_archives(
        s3, paths, bucket, "models/", concurrency=concurrency, console=_quiet()
    )

    assert report.count("uploaded") == 12
    if concurrency == 1:
        assert peak[0] == 1 and len(threads) == 1
    else:  # overlapping requests from several threads, never more than the flag allows
        assert 2 <= peak[0] <= concurrency and len(threads) >= 2


def test_large_archives_go_in_parts_with_a_conditional_completion(aws, tmp_path, monkeypatch):
    bucket = create_storage_stack()
    monkeypatch.setattr(upload, "MULTIPART_THRESHOLD", 1024 * 1024)
    noise = base64.b64encode(random.Random(0).randbytes(1_200_000)).decode()
    big = write_versioned(tmp_path, "big", salt=noise)  # incompressible: > 1 MiB gzipped
    assert big.stat().st_size > 1024 * 1024
    s3 = _s3()
    completions = _count_calls(s3, "CompleteMultipartUpload")
    report = upload.upload_archives(s3, [big], bucket, "models/", console=_quiet())
    assert [o.state for o in report.outcomes] == ["uploaded"]
    assert [c["headers"].get("If-None-Match") for c in completions] == ["*"]
    got = s3.get_object(Bucket=bucket, Key=f"models/{big.name}")
    assert got["Body"].read() == big.read_bytes()
    assert got["Metadata"][SHA256_METADATA] == hashlib.sha256(big.read_bytes()).hexdigest()


def test_duplicate_check_is_linear():
    # 200,000 names: a pairwise (quadratic) check would take minutes; one pass takes well
    # under a second, so 10 s separates the two even on a loaded machine.
    names = [f"a-{i:06d}.tar.gz" for i in range(200_000)] + ["a-000009.tar.gz", "a-000007.tar.gz"]
    started = time.perf_counter()
    assert upload.duplicate_names(names) == ["a-000007.tar.gz", "a-000009.tar.gz"]
    assert time.perf_counter() - started < 10.0


def test_concurrency_flag_is_bounded(aws, project, archives, mlp):
    result = mlp("--cdk-json", project, "models", "upload", "--concurrency", "0", archives.text)
    assert result.code == 1
    assert result.err.strip() == "mlp: error: --concurrency 0: expected 1 to 128"


def test_archive_with_two_ensembles_is_refused(tmp_path):
    two = write_tar(
        tmp_path / "two.tar.gz", {"a/config.pbtxt": ENSEMBLE, "b/config.pbtxt": ENSEMBLE}
    )
    assert archive_problems(two) == ["2 ensembles at the root (a, b), expected exactly one"]


def test_miswired_ensemble_is_refused_with_step_and_tensor(tmp_path):
    wrong = write_tar(
        tmp_path / "wrong.tar.gz",
        {
            "ensemble/config.pbtxt": ENSEMBLE,
            "encoder/config.pbtxt": MODEL.replace(
                "TYPE_FP32 dims: 4 }\noutput", "TYPE_INT32 dims: 4 }\noutput"
            ),
        },
    )
    problems = archive_problems(wrong)
    assert problems and all("encoder" in p for p in problems)
    assert any("'x'" in p and "INT32" in p for p in problems), problems


def test_leading_dot_slash_members_are_accepted(tmp_path):
    dotted = write_tar(
        tmp_path / "dotted.tar.gz",
        {"./ensemble/config.pbtxt": ENSEMBLE, "./encoder/config.pbtxt": MODEL},
    )
    assert archive_problems(dotted) == []


def test_prefix_and_stack_prefix_come_from_the_stack(aws, project, archives, mlp):
    bucket = create_storage_stack("Team-Storage", prefix="serving/v2/")
    result = mlp(
        "--cdk-json", project, "--stack-prefix", "Team", "models", "upload", archives.image
    )
    assert result.code == 0, result.err
    assert _keys(bucket) == [f"serving/v2/{archives.image.name}"]


def test_empty_folder(aws, project, tmp_path, mlp):
    result = mlp("--cdk-json", project, "models", "upload", tmp_path)
    assert result.code == 1
    assert f"{tmp_path}: no *.tar.gz archives in this folder" in result.err


def test_unknown_stack(aws, project, archives, mlp):
    result = mlp("--cdk-json", project, "models", "upload", archives.image)
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: stack 'MlPlatform-Storage' not found in us-west-2: deploy it "
        "(npx cdk deploy MlPlatform-Storage) or pass the right --stack-prefix/--region/--profile"
    )


def test_missing_output(aws, project, archives, mlp):
    create_storage_stack(prefix=None)
    result = mlp("--cdk-json", project, "models", "upload", archives.image)
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: stack 'MlPlatform-Storage' has no output 'ModelPrefix' "
        "(outputs: ModelBucketName); redeploy it with this version of the app"
    )
