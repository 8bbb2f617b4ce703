"""SageMaker's Triton Inference Server container: where it is published, per release and region.

Source: the SageMaker Python SDK's image registry for Triton,
https://github.com/aws/sagemaker-python-sdk/blob/master/src/sagemaker/image_uri_config/sagemaker-tritonserver.json
(repository ``sagemaker-tritonserver``, tags ``<version>-py3`` for GPU), and the SageMaker
"Docker Registry Paths and Example Code" pages. A region missing here has no image: synthesis
refuses it rather than pulling from another region's account.
"""

from __future__ import annotations

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
# Releases SageMaker publishes; 24.09 is the newest with the TensorFlow backend. The SDK's
# registry names the regions of 23.12-24.09; the later releases (listed on the SageMaker
# Triton release page) are taken to be in the same registries.
TRITON_VERSIONS = ("23.12", "24.01", "24.03", "24.05", "24.09", "25.04", "25.09", "26.05")
DEFAULT_TRITON_VERSION = "24.09"
#: Release -> region -> account of its image.
TRITON_REGISTRIES: dict[str, dict[str, str]] = {v: dict(_REGISTRIES) for v in TRITON_VERSIONS}
# Kept for callers of the earlier module: the exceptions to the main account.
DEFAULT_TRITON_ACCOUNT = _MAIN
TRITON_ACCOUNTS: dict[str, str] = {r: a for r, a in _REGISTRIES.items() if a != _MAIN}


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
    suffix = ".cn" if region.startswith("cn-") else ""
    return (
        f"{triton_account(region, version)}.dkr.ecr.{region}.amazonaws.com{suffix}/"
        f"{TRITON_REPOSITORY}:{version}-py3"
    )


# The endpoint instances' AMI: SageMaker's ProductionVariant InferenceAmiVersion values
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html;
# CloudFormation: AWS::SageMaker::EndpointConfig ProductionVariant InferenceAmiVersion).
INFERENCE_AMI_VERSIONS = (
    "al2-ami-sagemaker-inference-gpu-2",  # NVIDIA 535, CUDA 12.2
    "al2-ami-sagemaker-inference-gpu-2-1",  # NVIDIA 535, CUDA 12.2, no CUDA-compat mounting
    "al2-ami-sagemaker-inference-gpu-3-1",  # NVIDIA 550, CUDA 12.4, no CUDA-compat mounting
)
# Triton 24.09 is built on CUDA 12.6; on data-center GPUs (T4, A10G) NVIDIA supports it on
# older production drivers such as R535 through the CUDA forward-compatibility package
# (Triton release notes, "Driver Requirements":
# https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-24-09.html).
# gpu-2 keeps the toolkit's CUDA-compat mounting that this needs; the "-1" variants turn it off.
DEFAULT_INFERENCE_AMI_VERSION = "al2-ami-sagemaker-inference-gpu-2"
