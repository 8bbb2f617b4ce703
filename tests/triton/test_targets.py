"""One archive per GPU target, and Triton releases that have the backends an archive needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ml_platform.config import Settings, SettingsError
from ml_platform.instances import EKS_GPU_INSTANCES, SAGEMAKER_MME_GPU_INSTANCES, instance_gpu
from ml_platform.triton import package, text_ensemble
from ml_platform.triton.repository import archive_gpu_target
from ml_platform.triton.targets import archive_gpu, logical_name, serving_problems
from tests.triton.support import MINILM_DIR, write_artifacts

SAGEMAKER_VERSIONS_WITH_TF = ["23.12", "24.01", "24.03", "24.05", "24.09"]


def settings(**values) -> Settings:
    return Settings.from_context(values)


def problems_of(**values) -> list[str]:
    with pytest.raises(SettingsError) as error:
        settings(**values)
    return error.value.problems


def test_every_allowed_instance_type_knows_its_gpu() -> None:
    allowed = SAGEMAKER_MME_GPU_INSTANCES | EKS_GPU_INSTANCES
    assert [t for t in sorted(allowed) if instance_gpu(t) is None] == []
    assert instance_gpu("ml.g4dn.4xlarge") == instance_gpu("g4dn.xlarge") == "T4"
    assert instance_gpu("ml.g5.2xlarge") == instance_gpu("g5.2xlarge") == "A10G"
    assert instance_gpu("g6.xlarge") == "L4"
    assert instance_gpu("ml.p3.2xlarge") == "V100"
    assert instance_gpu("m6i.large") is None


@pytest.mark.parametrize(
    ("entry", "logical", "gpu"),
    [
        ("model_trt_python_t4.tar.gz", "model_trt_python_t4", "T4"),
        ("model_trt_python_a10g-v0123abcd.tar.gz", "model_trt_python_a10g", "A10G"),
        ("model_trt_python_l4@v0123abcd", "model_trt_python_l4", "L4"),
        ("model_trt_python_v100", "model_trt_python_v100", "V100"),
        ("model_onnx_python.tar.gz", "model_onnx_python", None),
        ("model_tf_dali", "model_tf_dali", None),
        ("t4", "t4", None),
    ],
)
def test_archive_names_carry_the_gpu_target(entry: str, logical: str, gpu: str | None) -> None:
    assert (logical_name(entry), archive_gpu(entry)) == (logical, gpu)


def test_defaults_serve_each_target_its_own_text_archive() -> None:
    s = settings()
    assert s.inference.endpoints[0].instance_type == "ml.g4dn.4xlarge"
    assert s.inference.endpoints[0].archives[1] == "model_trt_python_t4"
    assert s.triton_on_eks.gpu_instance_type == "g5.2xlarge"
    assert s.triton_on_eks.archives[1] == "model_onnx_python"  # runs on any GPU


def test_settings_refuse_a_plan_for_another_gpu() -> None:
    problems = problems_of(
        inference={"endpoints": [{"instance_type": "ml.g5.xlarge"}]},
        triton_on_eks={"archives": ["model_trt_python_t4"]},
    )
    assert problems == [
        "inference.endpoints[0].archives[1]: archive 'model_trt_python_t4' holds a "
        "TensorRT plan built for T4, but 'ml.g5.xlarge' has A10G; a plan only loads on the GPU "
        "it was built for: build one for A10G (mlp models package --gpu-target a10g -> "
        "model_trt_python_a10g) or serve the ONNX archive 'model_onnx_python'",
        "triton_on_eks.archives[0]: archive 'model_trt_python_t4' holds a TensorRT plan "
        "built for T4, but 'g5.2xlarge' has A10G; a plan only loads on the GPU it was built "
        "for: build one for A10G (mlp models package --gpu-target a10g -> "
        "model_trt_python_a10g) or serve the ONNX archive 'model_onnx_python'",
    ]
    # The matching targets are fine, and so is ONNX anywhere.
    settings(
        inference={"endpoints": [{"instance_type": "ml.g5.xlarge",
                                  "archives": ["model_trt_python_a10g"]}]},
        triton_on_eks={"gpu_instance_type": "g4dn.xlarge",
                       "archives": ["model_trt_python_t4", "model_onnx_python"]},
    )


def test_triton_version_must_have_the_tensorflow_backend_for_the_image_ensemble() -> None:
    problems = problems_of(inference={"triton_version": "25.04"})
    assert problems == [
        "inference.triton_version = '25.04': Triton images after 25.02 have no TensorFlow "
        "backend, which inference.endpoints[0].archives 'model_tf_dali' needs; expected "
        f"one of {SAGEMAKER_VERSIONS_WITH_TF}",
        "inference.triton_version = '25.04': Triton images after 25.02 have no TensorFlow "
        "backend, which triton_on_eks.archives 'model_tf_dali' needs; expected one of "
        f"{SAGEMAKER_VERSIONS_WITH_TF}",
    ]
    # Without the image ensemble any listed release will do; with it, 24.09 and older.
    settings(
        inference={"triton_version": "26.05",
                   "endpoints": [{"archives": ["model_trt_python_t4"]}]},
        triton_on_eks={"archives": ["model_onnx_python"]},
    )
    settings(inference={"triton_version": "23.12"})
    settings(
        inference={"triton_version": "25.09",
                   "endpoints": [{"archives": ["model_onnx_python"]}]},
        features={"triton_on_eks": False},
    )


def test_the_checks_import_without_protobuf() -> None:
    code = (
        "import sys, ml_platform.config, ml_platform.triton.targets, ml_platform.instances\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('google', 'tritonclient', 'nvidia', 'numpy'))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("plans")
    artifacts = write_artifacts(folder / "in")
    out = {}
    for gpu in ("t4", "a10g"):
        spec = text_ensemble(tokenizer_dir=MINILM_DIR, encoder_path=artifacts.plan, gpu_target=gpu)
        out[gpu] = package(spec, folder / gpu)
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR, encoder_path=artifacts.onnx, encoder_format="onnx"
    )
    out["onnx"] = package(spec, folder / "onnx")
    return out


def test_archives_record_their_gpu_in_the_config(plans: dict[str, Path], tmp_path: Path) -> None:
    assert archive_gpu_target(plans["t4"]) == ("T4", [])
    assert archive_gpu_target(plans["a10g"]) == ("A10G", [])
    assert archive_gpu_target(plans["onnx"]) == (None, [])
    renamed = tmp_path / "model_trt_python_a10g.tar.gz"
    renamed.write_bytes(plans["t4"].read_bytes())
    assert archive_gpu_target(renamed) == (
        "T4",
        ["its plan targets T4 (config parameter 'gpu_target') but its name says A10G: "
         "expected a name ending in _t4"],
    )


def test_serving_problems_follow_the_settings(plans: dict[str, Path]) -> None:
    s = settings(inference={"endpoints": [
        {"name": "a", "instance_type": "ml.g4dn.xlarge",
         "archives": ["model_trt_python_t4"]},
        {"name": "b", "instance_type": "ml.g5.xlarge", "archives": ["model_onnx_python"]},
    ]})
    assert serving_problems("model_trt_python_t4.tar.gz", "T4", s) == []
    assert serving_problems("model_onnx_python.tar.gz", None, s) == []
    # An archive file whose name hides the plan's GPU is judged by its config.
    endpoint, eks = serving_problems("model_onnx_python.tar.gz", "T4", s)
    assert endpoint.startswith("inference.endpoints[1] (b): archive 'model_onnx_python.tar.gz' "
                               "holds a TensorRT plan built for T4, but 'ml.g5.xlarge' has A10G")
    assert eks.startswith("triton_on_eks: archive 'model_onnx_python.tar.gz' holds a TensorRT "
                          "plan built for T4, but 'g5.2xlarge' has A10G")
