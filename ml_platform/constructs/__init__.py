"""Reusable CDK constructs of the platform; each can be used in any stack."""

from ml_platform.constructs.addons import PlatformAddons, PodIdentityAddon
from ml_platform.constructs.dashboards import EndpointDashboard, TrainingDashboard
from ml_platform.constructs.eks_cluster import TrainingEksCluster
from ml_platform.constructs.gpu_nodes import GpuNodeGroup
from ml_platform.constructs.model_upload import ModelArchiveUpload
from ml_platform.constructs.network import PlatformVpc, TrainingNodeSecurityGroup
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint
from ml_platform.constructs.storage import (
    LustreStorage,
    ModelArtifactBucket,
    TrainingImageRepository,
)
from ml_platform.constructs.trainium import EfaLaunchTemplate, TrainiumNodeGroup
from ml_platform.constructs.triton_eks import TritonOnEks

__all__ = [
    "EfaLaunchTemplate",
    "EndpointDashboard",
    "GpuNodeGroup",
    "LustreStorage",
    "ModelArchiveUpload",
    "ModelArtifactBucket",
    "PlatformAddons",
    "PlatformVpc",
    "PodIdentityAddon",
    "TrainingDashboard",
    "TrainingEksCluster",
    "TrainingImageRepository",
    "TrainingNodeSecurityGroup",
    "TrainiumNodeGroup",
    "TritonMultiModelEndpoint",
    "TritonOnEks",
]
