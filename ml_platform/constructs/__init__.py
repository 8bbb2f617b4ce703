"""Reusable CDK constructs of the platform; each can be used in any stack.

``__all__`` is the construct library's public surface: the constructs, the props objects they
take, and the types their ``from_*`` methods return. Helpers shared by the constructs live in ``_``-prefixed modules."""

from ml_platform.constructs.addons import PlatformAddons, PodIdentityAddon
from ml_platform.constructs.dashboards import EndpointDashboard, TrainingDashboard
from ml_platform.constructs.eks_cluster import TrainingEksCluster
from ml_platform.constructs.gpu_nodes import GpuNodeGroup
from ml_platform.constructs.network import PlatformVpc, TrainingNodeSecurityGroup
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint
from ml_platform.constructs.storage import (
    ImportedLustreStorage,
    ImportedModelArtifactBucket,
    LustreStorage,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)
from ml_platform.constructs.trainium import EfaLaunchTemplate, TrainiumNodeGroup
from ml_platform.constructs.triton_eks import TritonOnEks

__all__ = [
    "EfaLaunchTemplate",
    "EndpointDashboard",
    "GpuNodeGroup",
    "ImportedLustreStorage",
    "ImportedModelArtifactBucket",
    "LustreStorage",
    "ModelArtifactBucket",
    "ModelArtifactBucketProps",
    "PlatformAddons",
    "PlatformVpc",
    "PodIdentityAddon",
    "TrainingDashboard",
    "TrainingEksCluster",
    "TrainingImageRepository",
    "TrainingImageRepositoryProps",
    "TrainingNodeSecurityGroup",
    "TrainiumNodeGroup",
    "TritonMultiModelEndpoint",
    "TritonOnEks",
]
