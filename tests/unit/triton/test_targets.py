"""One archive per GPU target, and Triton releases that have the backends an archive needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ml_platform.config import Settings, SettingsError
from ml_platform.instances import EKS_GPU_INSTANCES, SAGEMAKER_MME_GPU_INSTANCES, instance_gpu
from ml_platform.sagemaker_images import (
    INFERENCE_AMI_VERSIONS,
    PATCHED_TRITON_RELEASE,
    TRITON_VERSIONS,
    triton_release_warning,
)
from ml_platform.triton import package, text_ensemble
from ml_platform.triton.repository import archive_gpu_target
from ml_platform.triton.targets import archive_gpu, logical_name, serving_problems
from tests.helpers.triton_support import MINILM_DIR, TENSORRT, write_artifacts


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
        "inference.endpoints[0].archives[1] = 'model_trt_python_t4': holds a "
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
        inference={
            "endpoints": [{"instance_type": "ml.g5.xlarge", "archives": ["model_trt_python_a10g"]}]
        },
        triton_on_eks={
            "gpu_instance_type": "g4dn.xlarge",
            "archives": ["model_trt_python_t4", "model_onnx_python"],
        },
    )


def test_every_release_serves_the_default_archives() -> None:
    """The image ensemble runs on onnxruntime and DALI, which every release ships: no release
    is refused for it (24.09 was the newest before, for the TensorFlow backend)."""
    for version in TRITON_VERSIONS:
        assert settings(inference={"triton_version": version}).inference.triton_version == version
    defaults = settings()
    assert defaults.inference.triton_version == "25.09" >= PATCHED_TRITON_RELEASE
    assert defaults.inference.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"


def test_a_cuda_13_release_needs_an_ami_whose_driver_runs_it() -> None:
    problems = problems_of(
        inference={
            "triton_version": "25.09",
            "inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1",
        }
    )
    assert problems == [
        "inference.triton_version = '25.09', inference.inference_ami_version = "
        "'al2-ami-sagemaker-inference-gpu-3-1': Triton 25.09 is built on CUDA 13, which needs "
        "NVIDIA driver 575 or later; al2-ami-sagemaker-inference-gpu-3-1 has driver 550 (CUDA "
        "12) without the CUDA forward-compatibility mount: expected one of "
        "['al2-ami-sagemaker-inference-gpu-2', 'al2023-ami-sagemaker-inference-gpu-4-1']"
    ]
    # R535 with the forward-compatibility mount runs it; CUDA 12 releases run on every AMI.
    settings(
        inference={
            "triton_version": "26.05",
            "inference_ami_version": "al2-ami-sagemaker-inference-gpu-2",
        }
    )
    for ami in INFERENCE_AMI_VERSIONS:
        settings(inference={"triton_version": "24.09", "inference_ami_version": ami})


def test_a_release_refuses_gpus_older_than_it_supports() -> None:
    endpoint = {"instance_type": "ml.p3.2xlarge", "archives": ["model_onnx_python"]}
    problems = problems_of(inference={"triton_version": "25.09", "endpoints": [endpoint]})
    assert problems == [
        "inference.endpoints[0].instance_type = 'ml.p3.2xlarge': its GPU has compute "
        "capability 7.0, below the 7.5 that Triton 25.09 supports (release notes, GPU "
        "Requirements); use a g4dn or g5 instance, or a release before 25.03"
    ]
    settings(inference={"triton_version": "24.09", "endpoints": [endpoint]})


def test_unpatched_releases_are_named_with_their_cves() -> None:
    warning = triton_release_warning("24.09")
    for cve in ("CVE-2025-23319", "CVE-2025-23320", "CVE-2025-23334"):
        assert cve in warning
    assert "nvidia.custhelp.com/app/answers/detail/a_id/5687" in warning
    assert warning.endswith("(default 25.09) unless you need its TensorFlow backend")
    assert triton_release_warning("25.04").endswith("(default 25.09)")  # no TensorFlow there
    assert [v for v in TRITON_VERSIONS if triton_release_warning(v) is None] == ["25.09", "26.05"]


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
        spec = text_ensemble(
            tokenizer_dir=MINILM_DIR,
            encoder_path=artifacts.plan,
            gpu_target=gpu,
            tensorrt_version=TENSORRT,
        )
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
        [
            "its plan targets T4 (config parameter 'gpu_target') but its name says A10G: "
            "expected a name ending in _t4"
        ],
    )


def test_serving_problems_follow_the_settings(plans: dict[str, Path]) -> None:
    s = settings(
        inference={
            "endpoints": [
                {
                    "name": "a",
                    "instance_type": "ml.g4dn.xlarge",
                    "archives": ["model_trt_python_t4"],
                },
                {"name": "b", "instance_type": "ml.g5.xlarge", "archives": ["model_onnx_python"]},
            ]
        }
    )
    assert serving_problems("model_trt_python_t4.tar.gz", "T4", s) == []
    assert serving_problems("model_onnx_python.tar.gz", None, s) == []
    # An archive file whose name hides the plan's GPU is judged by its config.
    endpoint, eks = serving_problems("model_onnx_python.tar.gz", "T4", s)
    assert endpoint.startswith(
        "inference.endpoints[1] (b): archive 'model_onnx_python.tar.gz' "
        "holds a TensorRT plan built for T4, but 'ml.g5.xlarge' has A10G"
    )
    assert eks.startswith(
        "triton_on_eks: archive 'model_onnx_python.tar.gz' holds a TensorRT "
        "plan built for T4, but 'g5.2xlarge' has A10G"
    )


def test_every_published_release_has_its_requirements_recorded() -> None:
    """CUDA, GPUs, stub Python and DALI version, for every release settings accept."""
    from ml_platform.sagemaker_images import TRITON_RELEASES

    assert list(TRITON_RELEASES) == list(TRITON_VERSIONS)
    default = TRITON_RELEASES["25.09"]
    assert (default.cuda_major, default.dali) == (13, "1.51.2")
    assert TRITON_RELEASES["24.09"].dali == "1.39.0"
    from ml_platform.triton.releases import stub_python

    assert (stub_python("24.09"), stub_python("25.09"), stub_python("26.05")) == (
        "3.10",
        "3.12",
        "3.12",
    )
