"""Where an ensemble archive can run: the GPU its TensorRT plan was built for.

Kept free of heavy imports (no protobuf, no tritonclient): settings validation uses it.

**GPU targets.** A TensorRT engine runs only on the GPU model it was built for (and with
the TensorRT version that built it). TensorRT's hardware-compatible mode lifts the first
limit only for Ampere and newer GPUs, so it cannot serve a T4 (Turing) or a V100 (Volta):
https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/advanced.html#hardware-compatibility
So there is one text archive per GPU target, and the archive says which, twice:

* in its logical name: ``model_trt_python_<gpu>`` (``model_trt_python_t4``,
  ``model_trt_python_a10g``, ...), so settings, IAM and listings show it;
* in its config: the TensorRT model's parameter ``gpu_target`` (``"T4"``), so that
  ``mlp models upload`` can check the archive itself, whatever its file is called.

The ONNX text ensemble (``model_onnx_python``) and the image ensemble (``model_tf_dali``, an
ONNX classifier despite the source design's name) hold no plan and run on any GPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from ml_platform.instances import instance_gpu
from ml_platform.triton.archive_names import ARCHIVE_SUFFIX

__all__ = [
    "GPU_PARAMETER",
    "GPU_TARGETS",
    "TEXT_ONNX_LOGICAL",
    "TEXT_TRT_LOGICAL",
    "ServingSettings",
    "archive_gpu",
    "gpu_mismatch",
    "gpu_problem",
    "logical_name",
    "serving_problems",
    "text_logical_name",
]

#: GPU targets: name suffix -> the GPU (as ``instances.instance_gpu`` names it).
GPU_TARGETS: dict[str, str] = {
    "t4": "T4",
    "a10g": "A10G",
    "l4": "L4",
    "l40s": "L40S",
    "v100": "V100",
    "a100": "A100",
}
#: The TensorRT model's config parameter that records its GPU target.
GPU_PARAMETER = "gpu_target"

TEXT_TRT_LOGICAL = "model_trt_python"
TEXT_ONNX_LOGICAL = "model_onnx_python"

_VERSIONED = re.compile(r"^(?P<logical>.+?)(?:-v[0-9a-f]{8})?$")


def logical_name(entry: str) -> str:
    """The logical archive an entry names, whatever its form: ``NAME``, ``NAME@vXXXXXXXX``,
    ``NAME.tar.gz`` or ``NAME-vXXXXXXXX.tar.gz``."""
    name = entry.split("@", 1)[0]
    if name.endswith(ARCHIVE_SUFFIX):
        match = _VERSIONED.match(name.removesuffix(ARCHIVE_SUFFIX))
        if match is not None:  # it matches every name but the empty one
            name = match["logical"]
    return name


def text_logical_name(gpu_target: str | None) -> str:
    """``model_trt_python_<gpu>`` for a TensorRT plan, ``model_onnx_python`` without one."""
    if gpu_target is None:
        return TEXT_ONNX_LOGICAL
    if gpu_target not in GPU_TARGETS:
        raise ValueError(f"gpu_target={gpu_target!r}: expected one of {sorted(GPU_TARGETS)}")
    return f"{TEXT_TRT_LOGICAL}_{gpu_target}"


def archive_gpu(entry: str) -> str | None:
    """The GPU an archive's name says its plan targets (``"T4"``), or ``None`` for an
    archive without a GPU suffix (no plan: runs anywhere)."""
    logical = logical_name(entry)
    head, _, suffix = logical.rpartition("_")
    return GPU_TARGETS.get(suffix) if head else None


def gpu_problem(
    where: str, entry: str, instance_type: str, plan_gpu: str | None = None
) -> str | None:
    """Why ``instance_type`` cannot serve archive ``entry`` (``None`` if it can).

    ``plan_gpu`` is the GPU recorded in the archive's config, when the archive itself is at
    hand (``mlp models upload``); otherwise the name decides.
    """
    text = gpu_mismatch(entry, instance_type, plan_gpu)
    return None if text is None else f"{where}: archive {entry!r} {text}"


def gpu_mismatch(entry: str, instance_type: str, plan_gpu: str | None = None) -> str | None:
    """What :func:`gpu_problem` says after the archive: why ``instance_type`` cannot serve
    archive ``entry`` (``None`` if it can)."""
    wanted = plan_gpu or archive_gpu(entry)
    if wanted is None:
        return None
    gpu = instance_gpu(instance_type)
    if gpu == wanted:
        return None
    return (
        f"holds a TensorRT plan built for {wanted}, but "
        f"{instance_type!r} has {gpu or 'an unknown GPU'}; a plan only loads on the GPU it was "
        f"built for: build one for {gpu or 'that GPU'} "
        f"({_suffix_hint(gpu)}) or serve the ONNX archive {TEXT_ONNX_LOGICAL!r}"
    )


def _suffix_hint(gpu: str | None) -> str:
    suffix = next((s for s, g in GPU_TARGETS.items() if g == gpu), None)
    if suffix is None:
        return "no GPU target is defined for it"
    return f"mlp models package --gpu-target {suffix} -> {TEXT_TRT_LOGICAL}_{suffix}"


# What serving_problems reads of the settings, as protocols: this data module stays below
# ml_platform.config (which imports it), and any Settings fits.
class _Endpoint(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def archives(self) -> Sequence[str]: ...


class _Inference(Protocol):
    @property
    def endpoints(self) -> Sequence[_Endpoint]: ...


class _Eks(Protocol):
    @property
    def archives(self) -> Sequence[str]: ...
    @property
    def gpu_instance_type(self) -> str: ...


class _Features(Protocol):
    @property
    def triton_on_eks(self) -> bool: ...


class ServingSettings(Protocol):
    """The parts of :class:`~ml_platform.config.Settings` that say where archives are served."""

    @property
    def inference(self) -> _Inference: ...
    @property
    def triton_on_eks(self) -> _Eks: ...
    @property
    def features(self) -> _Features: ...


def serving_problems(entry: str, plan_gpu: str | None, settings: ServingSettings) -> list[str]:
    """Why the endpoints and the EKS node group that ``settings`` (a
    :class:`~ml_platform.config.Settings`) give archive ``entry`` cannot serve its plan
    for ``plan_gpu`` (read from the archive's config)."""
    logical = logical_name(entry)
    users = [
        (f"inference.endpoints[{i}] ({endpoint.name})", endpoint.instance_type)
        for i, endpoint in enumerate(settings.inference.endpoints)
        if any(logical_name(a) == logical for a in endpoint.archives)
    ]
    eks = settings.triton_on_eks
    if settings.features.triton_on_eks and any(logical_name(a) == logical for a in eks.archives):
        users.append(("triton_on_eks", eks.gpu_instance_type))
    problems = (gpu_problem(where, entry, instance, plan_gpu) for where, instance in users)
    return [p for p in problems if p]
