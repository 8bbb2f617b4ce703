"""``mlp models upload`` with moto: bucket and prefix from the Storage stack's outputs."""

from __future__ import annotations

import shutil

import boto3

from ml_platform.triton.repository import archive_problems
from tests.cli.support import ENSEMBLE, MODEL, create_storage_stack, write_tar


def _keys(bucket: str) -> list[str]:
    listing = boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_uploads_a_folder_of_archives_under_the_prefix(aws, project, archives, mlp):
    bucket = create_storage_stack()
    result = mlp("--cdk-json", project, "models", "upload", archives.folder)
    assert result.code == 0, result.err
    assert _keys(bucket) == ["models/model_onnx_python.tar.gz", "models/model_tf_dali.tar.gz"]
    assert result.out.splitlines() == [
        f"s3://{bucket}/models/model_onnx_python.tar.gz  (TargetModel model_onnx_python.tar.gz)",
        f"s3://{bucket}/models/model_tf_dali.tar.gz  (TargetModel model_tf_dali.tar.gz)",
    ]
    body = boto3.client("s3", region_name="us-west-2").get_object(
        Bucket=bucket, Key="models/model_onnx_python.tar.gz")["Body"].read()
    assert body == archives.text.read_bytes()
    assert "model_onnx_python.tar.gz" in result.err  # the progress bar, on stderr


def test_prefix_and_stack_prefix_come_from_the_stack(aws, project, archives, mlp):
    bucket = create_storage_stack("Team-Storage", prefix="serving/v2/")
    result = mlp("--cdk-json", project, "--stack-prefix", "Team", "models", "upload",
                 archives.image)
    assert result.code == 0, result.err
    assert _keys(bucket) == ["serving/v2/model_tf_dali.tar.gz"]


def test_refuses_bad_archives_and_uploads_nothing(aws, project, archives, tmp_path, mlp):
    bucket = create_storage_stack()
    no_ensemble = write_tar(tmp_path / "no_ensemble.tar.gz", {"encoder/config.pbtxt": MODEL})
    nested = write_tar(tmp_path / "nested.tar.gz", {"repo/ensemble/config.pbtxt": ENSEMBLE})
    broken = write_tar(tmp_path / "broken.tar.gz", {"ensemble/config.pbtxt": "platform: ["})
    not_tar = tmp_path / "not_tar.tar.gz"
    not_tar.write_bytes(b"plain bytes")
    bad_name = tmp_path / "model tf.tar.gz"
    shutil.copy(archives.image, bad_name)
    wrong_suffix = tmp_path / "model.zip"
    shutil.copy(archives.image, wrong_suffix)

    result = mlp("--cdk-json", project, "models", "upload", archives.text, no_ensemble, nested,
                 broken, not_tar, bad_name, wrong_suffix, tmp_path / "missing.tar.gz")

    assert result.code == 1
    lines = result.err.splitlines()
    assert lines[0] == "mlp: error: refusing to upload:"
    assert any("missing.tar.gz: no such file or folder" in line for line in lines)
    missing_ensemble = 'no <model>/config.pbtxt with platform: "ensemble" at the archive root'
    assert f"  - {no_ensemble}: {missing_ensemble}" in lines
    assert f"  - {nested}: {missing_ensemble}" in lines
    assert any(line.startswith(f"  - {broken}: ensemble/config.pbtxt: not a Triton model config")
               for line in lines)
    assert f"  - {not_tar}: not a gzip-compressed tar archive (not a gzip file)" in lines
    assert any(str(bad_name) in line and "characters outside" in line for line in lines)
    assert any(str(wrong_suffix) in line and "must end with" in line for line in lines)
    assert "Traceback" not in result.err
    assert _keys(bucket) == []  # not even the good archive


def test_archive_with_two_ensembles_is_refused(tmp_path):
    two = write_tar(tmp_path / "two.tar.gz",
                    {"a/config.pbtxt": ENSEMBLE, "b/config.pbtxt": ENSEMBLE})
    assert archive_problems(two) == ["2 ensembles at the root (a, b), expected exactly one"]


def test_miswired_ensemble_is_refused_with_step_and_tensor(tmp_path):
    wrong = write_tar(tmp_path / "wrong.tar.gz", {
        "ensemble/config.pbtxt": ENSEMBLE,
        "encoder/config.pbtxt": MODEL.replace("TYPE_FP32 dims: 4 }\noutput", "TYPE_INT32 dims: 4 }\noutput"),
    })
    problems = archive_problems(wrong)
    assert problems and all("encoder" in p for p in problems)
    assert any("'x'" in p and "INT32" in p for p in problems), problems


def test_leading_dot_slash_members_are_accepted(tmp_path):
    dotted = write_tar(tmp_path / "dotted.tar.gz", {"./ensemble/config.pbtxt": ENSEMBLE,
                                                    "./encoder/config.pbtxt": MODEL})
    assert archive_problems(dotted) == []


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
