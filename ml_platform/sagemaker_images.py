"""SageMaker's Triton Inference Server container: where it is published, per release and region.

Source: the SageMaker Python SDK's image registry for Triton,
https://github.com/aws/sagemaker-python-sdk/blob/master/src/sagemaker/image_uri_config/sagemaker-tritonserver.json
(repository ``sagemaker-tritonserver``, tags ``<version>-py3`` for GPU), and the SageMaker
"Docker Registry Paths and Example Code" pages. A region missing here has no image: synthesis
refuses it rather than pulling from another region's account.
"""

from __future__ import annotations

from dataclasses import dataclass

from ml_platform.instances import instance_compute_capability
from ml_platform.regions import ecr_registry

TRITON_REPOSITORY = "sagemaker-tritonserver"
_MAIN = "763104351884"  # most commercial regions
# Region -> account of the Triton image, as the SDK lists it for 23.12 to 24.09 (the same
# registries for each of those releases).
_REGISTRIES: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-1": _MAIN,
    "ap-northeast-2": _MAIN,
    "ap-northeast-3": "364406365360",
    "ap-south-1": _MAIN,
    "ap-southeast-1": _MAIN,
    "ap-southeast-2": _MAIN,
    "ap-southeast-3": "907027046896",
    "ca-central-1": _MAIN,
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-1": _MAIN,
    "eu-north-1": _MAIN,
    "eu-south-1": "692866216735",
    "eu-west-1": _MAIN,
    "eu-west-2": _MAIN,
    "eu-west-3": _MAIN,
    "il-central-1": "780543022126",
    "me-south-1": "217643126080",
    "sa-east-1": _MAIN,
    "us-east-1": _MAIN,
    "us-east-2": _MAIN,
    "us-west-1": _MAIN,
    "us-west-2": _MAIN,
}
# Releases SageMaker publishes. The SDK's registry names the regions of 23.12-24.09; the later
# releases (listed on the SageMaker Triton release page) are taken to be in the same registries.
TRITON_VERSIONS = ("23.12", "24.01", "24.03", "24.05", "24.09", "25.04", "25.09", "26.05")


@dataclass(frozen=True)
class TritonRelease:
    """What a Triton release needs and ships, from NVIDIA's sources (cited at TRITON_RELEASES).

    Attributes:
        cuda_major: Major version of the CUDA the container is built on.
        min_compute_capability: Oldest GPU architecture it supports (7.5 = Turing: T4).
        dali: DALI version of its DALI backend (the ``DALI_VERSION`` file of dali_backend's
            ``r<release>`` branch), which serializes the image ensemble's ``dali.py``.
    """

    cuda_major: int
    min_compute_capability: float
    dali: str

    def __post_init__(self) -> None:
        if self.cuda_major < 12:
            raise ValueError(f"cuda_major={self.cuda_major}: releases here are CUDA 12 or later")


# Sources, per field:
# * CUDA and GPUs: the release notes' "Driver Requirements" and "GPU Requirements",
#   https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-<yy-mm>.html
#   (24.09: CUDA 12.6, compute capability 6.0+; 25.03 and later: 7.5+ only; 25.06: CUDA
#   12.9.1; 25.08: CUDA 13.0.0 and 25.10: CUDA 13.0.2, so 25.09 is CUDA 13.0, "NVIDIA Driver
#   release 575 or later", or R535 on data-center GPUs through the CUDA forward-compatibility
#   package). 26.05 follows 25.08's CUDA 13 line.
# * Stub Python (what an execution environment must match): ml_platform.triton.releases,
#   which also covers releases SageMaker does not publish (the local server's 24.10).
# * DALI: https://github.com/triton-inference-server/dali_backend/blob/r25.09/DALI_VERSION
#   (and r23.12 ... r26.05 alike): 1.31, 1.31, 1.31, 1.36, 1.39.0, 1.47.0, 1.51.2, 2.1.0.
TRITON_RELEASES: dict[str, TritonRelease] = {
    "23.12": TritonRelease(12, 6.0, "1.31"),
    "24.01": TritonRelease(12, 6.0, "1.31"),
    "24.03": TritonRelease(12, 6.0, "1.31"),
    "24.05": TritonRelease(12, 6.0, "1.36"),
    "24.09": TritonRelease(12, 6.0, "1.39.0"),
    "25.04": TritonRelease(12, 7.5, "1.47.0"),
    "25.09": TritonRelease(13, 7.5, "1.51.2"),
    "26.05": TritonRelease(13, 7.5, "2.1.0"),
}
# The default: the first patched release SageMaker publishes (see PATCHED_TRITON_RELEASE).
# It keeps the Python 3.10 stub of 23.05-25.11, so execution environments built for 24.09
# still match (26.05 needs 3.12 ones), and runs the image ensemble's dali.py with DALI
# 1.51.2. Its CUDA 13 needs driver 575+ natively: DEFAULT_INFERENCE_AMI_VERSION has 580.
DEFAULT_TRITON_VERSION = "25.09"

# NVIDIA's August 2025 security bulletin: a chain through the Python backend and shared
# memory to unauthenticated remote code execution in every Triton before 25.07,
# https://nvidia.custhelp.com/app/answers/detail/a_id/5687
TRITON_CVES = ("CVE-2025-23319", "CVE-2025-23320", "CVE-2025-23334")
PATCHED_TRITON_RELEASE = "25.07"
#: The TensorFlow backend shipped last in Triton 25.02 and left with 25.03 (no archive built
#: here needs it: the image ensemble's Inception v3 runs on onnxruntime):
#: https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-25-03.html
TENSORFLOW_LAST_RELEASE = "25.02"
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


#: Release -> region -> account of its image.
TRITON_REGISTRIES: dict[str, dict[str, str]] = {v: dict(_REGISTRIES) for v in TRITON_VERSIONS}


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
