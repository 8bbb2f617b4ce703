"""SageMaker's Triton Inference Server container: where it lives per region.

Source: the SageMaker "Docker Registry Paths and Example Code" pages for Triton (account per
region, repository ``sagemaker-tritonserver``, tags ``<version>-py3`` for GPU).
"""

from __future__ import annotations

TRITON_REPOSITORY = "sagemaker-tritonserver"
DEFAULT_TRITON_ACCOUNT = "763104351884"  # most commercial regions
TRITON_ACCOUNTS: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-southeast-3": "907027046896",
    "ca-west-1": "204538143572",
    "eu-south-1": "692866216735",
    "il-central-1": "780543022126",
    "me-south-1": "217643126080",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}
# Releases SageMaker publishes; 24.09 is the newest with the TensorFlow backend.
TRITON_VERSIONS = ("23.12", "24.01", "24.03", "24.05", "24.09", "25.04", "25.09", "26.05")
DEFAULT_TRITON_VERSION = "24.09"


def triton_account(region: str) -> str:
    """Account that hosts SageMaker's Triton images in ``region``."""
    return TRITON_ACCOUNTS.get(region, DEFAULT_TRITON_ACCOUNT)


def triton_image_uri(region: str, version: str = DEFAULT_TRITON_VERSION) -> str:
    """URI of SageMaker's GPU Triton image for ``region`` and ``version``."""
    if version not in TRITON_VERSIONS:
        raise ValueError(f"version={version!r}: expected one of {list(TRITON_VERSIONS)}")
    suffix = ".cn" if region.startswith("cn-") else ""
    return (
        f"{triton_account(region)}.dkr.ecr.{region}.amazonaws.com{suffix}/"
        f"{TRITON_REPOSITORY}:{version}-py3"
    )
