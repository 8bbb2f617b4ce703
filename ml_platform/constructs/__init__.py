"""Reusable CDK constructs of the platform; each can be used in any stack.

``__all__`` is the construct library's public surface: the constructs, the props object each
takes (``<Construct>Props``) and the types their ``from_*`` methods return. Helpers shared by
the constructs live in ``_``-prefixed modules."""

from ml_platform.constructs.addons import (
    PlatformAddons,
    PlatformAddonsProps,
    PodIdentityAddon,
    PodIdentityAddonProps,
)
from ml_platform.constructs.dashboards import (
    EndpointDashboard,
    EndpointDashboardProps,
    TrainingDashboard,
    TrainingDashboardProps,
)
from ml_platform.constructs.eks_cluster import TrainingEksCluster, TrainingEksClusterProps
from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps
from ml_platform.constructs.network import PlatformVpc, PlatformVpcProps, TrainingNodeSecurityGroup
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint
from ml_platform.constructs.sagemaker_mme.endpoint import TritonMultiModelEndpointProps
from ml_platform.constructs.storage import (
    ImportedLustreStorage,
    ImportedModelArtifactBucket,
    LustreStorage,
    LustreStorageProps,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)
from ml_platform.constructs.trainium import (
    EfaLaunchTemplate,
    EfaLaunchTemplateProps,
    TrainiumNodeGroup,
    TrainiumNodeGroupProps,
)
from ml_platform.constructs.triton_eks import TritonOnEks, TritonOnEksProps

__all__ = [
    "EfaLaunchTemplate",
    "EfaLaunchTemplateProps",
    "EndpointDashboard",
    "EndpointDashboardProps",
    "GpuNodeGroup",
    "GpuNodeGroupProps",
    "ImportedLustreStorage",
    "ImportedModelArtifactBucket",
    "LustreStorage",
    "LustreStorageProps",
    "ModelArtifactBucket",
    "ModelArtifactBucketProps",
    "PlatformAddons",
    "PlatformAddonsProps",
    "PlatformVpc",
    "PlatformVpcProps",
    "PodIdentityAddon",
    "PodIdentityAddonProps",
    "TrainingDashboard",
    "TrainingDashboardProps",
    "TrainingEksCluster",
    "TrainingEksClusterProps",
    "TrainingImageRepository",
    "TrainingImageRepositoryProps",
    "TrainingNodeSecurityGroup",
    "TrainiumNodeGroup",
    "TrainiumNodeGroupProps",
    "TritonMultiModelEndpoint",
    "TritonMultiModelEndpointProps",
    "TritonOnEks",
    "TritonOnEksProps",
]
