"""SageMaker's Triton Inference Server container: where it is published, per release and region.

Source: the SageMaker Python SDK's image registry for Triton, ``image_uri_config/
sagemaker-tritonserver.json``, as shipped on PyPI in ``sagemaker-core``
(https://github.com/aws/sagemaker-python-sdk, ``sagemaker-core/src/sagemaker/core/
image_uri_config/sagemaker-tritonserver.json``). ``ml_platform/sagemaker-tritonserver.json`` is
that file byte for byte, from the wheel named by :data:`SDK_SOURCE`;
``tests/unit/test_sagemaker_images.py`` checks the copy against its recorded digest and against
the wheel itself. A region the SDK does not list for a release has no image of that release:
synthesis refuses it rather than pulling from another region's account. What each release needs
and ships is in :mod:`ml_platform.triton.releases`.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_INFERENCE_AMI_VERSION",
    "DEFAULT_TRITON_VERSION",
    "INFERENCE_AMI_VERSIONS",
    "SDK_SOURCE",
    "TRITON_REGISTRIES",
    "TRITON_REPOSITORY",
    "TRITON_VERSIONS",
    "UNPATCHED_TRITON_WARNING",
    "InferenceAmi",
    "SdkSource",
    "compute_capability_problem",
    "inference_ami_problem",
    "triton_account",
    "triton_image_uri",
    "triton_region_problem",
    "triton_release_warning",
]

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ml_platform.instances import instance_compute_capability
from ml_platform.regions import ecr_registry
from ml_platform.triton.releases import (  # noqa: F401 - re-exported: the per-release facts
    DEFAULT_TRITON_VERSION,
    PATCHED_TRITON_RELEASE,
    TENSORFLOW_LAST_RELEASE,
    TRITON_CVES,
    TRITON_RELEASES,
    TritonRelease,
    release_key,
)

TRITON_REPOSITORY = "sagemaker-tritonserver"


@dataclass(frozen=True)
class SdkSource:
    """Where the bundled registry file comes from: a PyPI wheel and the file inside it."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str
    sha256: str


#: The PyPI wheel whose ``sagemaker-tritonserver.json`` is bundled here (sagemaker-core
#: 2.27.0, the newest on 2026-12-02; ``pip download --no-deps sagemaker-core==2.27.0``).
SDK_SOURCE = SdkSource(
    package="sagemaker-core",
    version="2.27.0",
    wheel="sagemaker_core-2.27.0-py3-none-any.whl",
    wheel_sha256="62e5b4e2296dd26c042f28d26b9292501cdcf0c83a02656e280d61f132114312",
    member="sagemaker/core/image_uri_config/sagemaker-tritonserver.json",
    sha256="4bbcafa4f27ad4332376d9501617d2288631b7167fcd2fd5cf940e4a319c50b8",
)
#: The bundled copy of the SDK's file (package data).
SDK_REGISTRY_FILE = "sagemaker-tritonserver.json"


def registries_from_sdk(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Release -> region -> account, from the SDK's ``sagemaker-tritonserver.json``
    (``versions.<release>.registries``), releases in order."""
    versions: dict[str, dict[str, Any]] = data["versions"]
    table = {
        release: dict(sorted(entry["registries"].items()))
        for release, entry in versions.items()
        if entry.get("repository") == TRITON_REPOSITORY
    }
    return {release: table[release] for release in sorted(table, key=release_key)}


def _bundled_registries() -> dict[str, dict[str, str]]:
    text = resources.files("ml_platform").joinpath(SDK_REGISTRY_FILE).read_text("utf-8")
    return registries_from_sdk(json.loads(text))


#: Release -> region -> account of its image, as the SDK lists it. Each release has its own
#: regions: 25.09 and 26.05 are in none of the China regions, and in ten regions older
#: releases are not (ap-east-2, ap-south-2, ap-southeast-4/5/6/7, eu-central-2, eu-south-2,
#: me-central-1, mx-central-1).
TRITON_REGISTRIES: dict[str, dict[str, str]] = _bundled_registries()
#: Releases SageMaker publishes, oldest first.
TRITON_VERSIONS = tuple(TRITON_REGISTRIES)
#: Annotation id of the synth-time warning for an unpatched release (acknowledge it with
#: ``Annotations.of(scope).acknowledge_warning(...)`` once the risk is accepted).
UNPATCHED_TRITON_WARNING = "ml-platform:triton-unpatched-release"


def triton_release_warning(version: str) -> str | None:
    """The security warning for Triton ``version`` (``None`` for a patched release)."""
    if version >= PATCHED_TRITON_RELEASE:
        return None
    return (
        f"Triton {version} predates NVIDIA's August 2025 security bulletin "
        f"({', '.join(TRITON_CVES)}: the Python backend and shared memory chain to "
        f"unauthenticated remote code execution, fixed in {PATCHED_TRITON_RELEASE}; "
        "https://nvidia.custhelp.com/app/answers/detail/a_id/5687). Use a release from "
        f"{PATCHED_TRITON_RELEASE} on (default {DEFAULT_TRITON_VERSION})"
        + (" unless you need its TensorFlow backend" if version <= TENSORFLOW_LAST_RELEASE else "")
    )


def triton_region_problem(region: str, version: str = DEFAULT_TRITON_VERSION) -> str | None:
    """Why SageMaker's Triton ``version`` image cannot be used in ``region`` (``None`` if it
    can): the message lists the regions where it is published."""
    if version not in TRITON_REGISTRIES:
        return f"Triton version {version!r}: expected one of {list(TRITON_VERSIONS)}"
    if region in TRITON_REGISTRIES[version]:
        return None
    return (
        f"SageMaker publishes no Triton {version} image in {region!r} (an image from another "
        f"region's registry is not pulled); it is published in {sorted(TRITON_REGISTRIES[version])}"
    )


def triton_account(region: str, version: str = DEFAULT_TRITON_VERSION) -> str:
    """Account that hosts SageMaker's Triton ``version`` image in ``region``."""
    problem = triton_region_problem(region, version)
    if problem:
        raise ValueError(problem)
    return TRITON_REGISTRIES[version][region]


def triton_image_uri(region: str, version: str = DEFAULT_TRITON_VERSION) -> str:
    """URI of SageMaker's GPU Triton image for ``region`` and ``version``."""
    if version not in TRITON_VERSIONS:
        raise ValueError(f"version={version!r}: expected one of {list(TRITON_VERSIONS)}")
    registry = ecr_registry(triton_account(region, version), region)
    return f"{registry}/{TRITON_REPOSITORY}:{version}-py3"


@dataclass(frozen=True)
class InferenceAmi:
    """An endpoint AMI's NVIDIA driver branch, its CUDA major version and whether the NVIDIA
    Container Toolkit mounts the container's CUDA forward-compatibility libraries."""

    driver: int
    cuda_major: int
    compat_mounting: bool


# The endpoint instances' AMI: SageMaker's ProductionVariant InferenceAmiVersion values
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html;
# CloudFormation: AWS::SageMaker::EndpointConfig ProductionVariant InferenceAmiVersion).
INFERENCE_AMIS: dict[str, InferenceAmi] = {
    "al2-ami-sagemaker-inference-gpu-2": InferenceAmi(535, 12, True),  # CUDA 12.2
    "al2-ami-sagemaker-inference-gpu-2-1": InferenceAmi(535, 12, False),  # CUDA 12.2
    "al2-ami-sagemaker-inference-gpu-3-1": InferenceAmi(550, 12, False),  # CUDA 12.4
    "al2023-ami-sagemaker-inference-gpu-4-1": InferenceAmi(580, 13, False),  # CUDA 13.0
}
INFERENCE_AMI_VERSIONS = tuple(INFERENCE_AMIS)
# Driver 580 runs the default release's CUDA 13.0 natively (the release notes ask for 575 or
# later) and, as a newer driver, every CUDA 12 release too (CUDA Compatibility guide:
# https://docs.nvidia.com/deploy/cuda-compatibility/). The 535 AMIs run CUDA 12.x through
# minor-version compatibility; CUDA 13 only with the forward-compatibility package that gpu-2
# mounts (R535 on data-center GPUs, per the release notes).
DEFAULT_INFERENCE_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"


def inference_ami_problem(version: str, ami: str) -> str | None:
    """Why endpoint AMI ``ami`` cannot run Triton ``version``'s CUDA (``None`` if it can)."""
    release, image = TRITON_RELEASES.get(version), INFERENCE_AMIS.get(ami)
    if release is None or image is None:
        return None  # reported as unknown values elsewhere
    if release.cuda_major <= image.cuda_major or image.compat_mounting:
        return None
    fits = sorted(
        name
        for name, other in INFERENCE_AMIS.items()
        if other.cuda_major >= release.cuda_major or other.compat_mounting
    )
    return (
        f"Triton {version} is built on CUDA {release.cuda_major}, which needs NVIDIA driver "
        f"575 or later; {ami} has driver {image.driver} (CUDA {image.cuda_major}) without the "
        f"CUDA forward-compatibility mount: expected one of {fits}"
    )


def compute_capability_problem(version: str, instance_type: str) -> str | None:
    """Why Triton ``version`` cannot run on ``instance_type``'s GPU (``None`` if it can, or
    either is unknown): releases from 25.03 drop GPUs below compute capability 7.5 (V100)."""
    release = TRITON_RELEASES.get(version)
    capability = instance_compute_capability(instance_type)
    if release is None or capability is None or capability >= release.min_compute_capability:
        return None
    return (
        f"its GPU has compute capability {capability}, below the "
        f"{release.min_compute_capability} that Triton {version} supports (release notes, GPU "
        "Requirements); use a g4dn or g5 instance, or a release before 25.03"
    )
