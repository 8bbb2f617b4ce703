"""Reusable CDK constructs of the platform; each can be used in any stack."""

from ml_platform.constructs.network import PlatformVpc, TrainingNodeSecurityGroup
from ml_platform.constructs.storage import (
    LustreStorage,
    ModelArtifactBucket,
    TrainingImageRepository,
)

__all__ = [
    "LustreStorage",
    "ModelArtifactBucket",
    "PlatformVpc",
    "TrainingImageRepository",
    "TrainingNodeSecurityGroup",
]
