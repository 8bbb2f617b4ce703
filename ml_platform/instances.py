"""Facts about the instance types the platform knows, in one place.

Sources: the EC2 accelerated-computing instance pages (Trn1/Trn1n, G4dn, G5) and the
SageMaker multi-model endpoint GPU support list (REFERENCE.md).
"""

from __future__ import annotations

__all__ = [
    "ACCELERATORS",
    "EKS_GPU_INSTANCES",
    "GPU",
    "SAGEMAKER_MME_GPU_INSTANCES",
    "TRAINIUM",
    "TRAINIUM_INSTANCES",
    "AcceleratorKind",
    "TrainiumInstance",
    "instance_compute_capability",
    "instance_gpu",
]

from collections.abc import Set
from dataclasses import dataclass

from ml_platform.k8s_names import (
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    NEURON_RESOURCE,
    NEURON_TAINT_KEY,
)


@dataclass(frozen=True)
class TrainiumInstance:
    """One Trainium instance type: its accelerators, network cards and what they imply for a
    training job. Every other module reads these rows instead of testing for a family.

    Attributes:
        name: The EC2 instance type.
        neuron_devices: Trainium chips, the ``aws.amazon.com/neuron`` resource.
        neuron_cores: NeuronCores the Neuron runtime shows at :attr:`lnc_default`: one
            training worker (torchrun rank) each, so the default ``nproc_per_node``.
        efa_interfaces: Network cards; one EFA interface per card.
        vcpus: vCPUs, for pod sizing.
        memory_gib: Memory in GiB, for pod sizing.
        physical_cores_per_device: Physical NeuronCores of one chip.
        lnc_default: Logical NeuronCore size: physical cores the runtime groups into one
            (``NEURON_LOGICAL_NC_CONFIG``, the compiler's ``--logical-nc-config``); 1 on Trn1.
        compiler_target: The Neuron compiler's ``--target`` for this hardware (trn1n has
            Trn1's chip; only its network differs).
        ultraserver_instances: Instances joined by NeuronLink in one UltraServer; 1 when the
            type is not sold as an UltraServer.
    """

    name: str
    neuron_devices: int
    neuron_cores: int
    efa_interfaces: int
    vcpus: int
    memory_gib: int
    physical_cores_per_device: int
    lnc_default: int
    compiler_target: str
    ultraserver_instances: int = 1

    @property
    def physical_neuron_cores(self) -> int:
        """Physical NeuronCores of the instance (``neuron_cores`` x ``lnc_default``)."""
        return self.neuron_devices * self.physical_cores_per_device


# Devices, cores, vCPUs, memory and network cards: EC2 DescribeInstanceTypes (`NeuronInfo`,
# `VCpuInfo`, `MemoryInfo`, `NetworkInfo.MaximumNetworkCards` / `EfaInfo`), as moto 5.2.5 ships
# it (moto/ec2/resources/instance_types.json.gz); tests/unit/test_instances.py compares every
# row with that data. LNC defaults, compiler targets and the UltraServer size come from the
# Neuron docs, aws-neuron/aws-neuron-sdk@81ce03ae (2026-08-21), beside the rows.
TRAINIUM_INSTANCES: dict[str, TrainiumInstance] = {
    # trn1.2xlarge has no EFA and a single chip: not a distributed-training node.
    # LNC 1: "LNC applies only to Trn2 and Trn3 instances"
    # (about-neuron/arch/neuron-features/logical-neuroncore-config.rst). Target `trn1`: the
    # chip's (compiler/neuronx-cc/api-reference-guide/index.rst, `--target`: inf2, trn1,
    # trn1n, trn2). neuronx-cc also has a `trn1n` target (release-notes/components/
    # compiler.rst, 2.5.0.28); the trn1n row keeps `trn1`, the target of its chip.
    "trn1.32xlarge": TrainiumInstance("trn1.32xlarge", 16, 32, 8, 128, 512, 2, 1, "trn1"),
    "trn1n.32xlarge": TrainiumInstance("trn1n.32xlarge", 16, 32, 16, 128, 512, 2, 1, "trn1"),
    # Trainium2: 8 physical NeuronCores per chip, grouped in pairs by default, so 64 logical
    # cores per instance: "LNC can only be set to 1 or 2 ... On Trn2 ... LNC=2 (default)"
    # (logical-neuroncore-config.rst); `--logical-nc-config` "Default: 2" on trn2 and
    # `--target trn2` (compiler/neuronx-cc/api-reference-guide/index.rst). trn2.3xlarge (one
    # chip, one network card) is left out as trn1.2xlarge is. trn2u is the same instance sold
    # as part of an UltraServer: "A Trn2 UltraServer comprises four trn2u.48xlarge instances
    # ... a total of 64 Trainium2 chips" (about-neuron/arch/neuron-hardware/trn2-arch.rst).
    # EC2 gives trn2u no NeuronInfo; the same page gives both types 16 Trainium2 chips.
    "trn2.48xlarge": TrainiumInstance("trn2.48xlarge", 16, 64, 16, 192, 2048, 8, 2, "trn2"),
    "trn2u.48xlarge": TrainiumInstance(
        "trn2u.48xlarge", 16, 64, 16, 192, 2048, 8, 2, "trn2", ultraserver_instances=4
    ),
}

# Single-GPU instance families that SageMaker multi-model endpoints on GPU accept.
SAGEMAKER_MME_GPU_INSTANCES: frozenset[str] = frozenset(
    [f"ml.g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")]
    + [f"ml.g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")]
    + ["ml.p3.2xlarge"]
)

# Single-GPU EC2 instances for the optional in-cluster Triton node group.
EKS_GPU_INSTANCES: frozenset[str] = frozenset(
    [f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")]
    + [f"g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")]
    + [f"g6.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")]
)

# The GPU of each accelerated instance family that the settings allow (one GPU model per
# family), from the EC2 accelerated-computing instance pages; SageMaker's ml.* types use
# the same hardware as the EC2 family of the same name.
GPU_BY_FAMILY: dict[str, str] = {
    "g4dn": "T4",  # NVIDIA T4 (Turing)
    "g5": "A10G",  # NVIDIA A10G (Ampere)
    "g6": "L4",  # NVIDIA L4 (Ada Lovelace)
    "g6e": "L40S",  # NVIDIA L40S (Ada Lovelace)
    "p3": "V100",  # NVIDIA V100 (Volta)
    "p4d": "A100",  # NVIDIA A100 (Ampere)
}


# CUDA compute capability of each GPU above (NVIDIA, "CUDA GPUs - Compute Capability":
# https://developer.nvidia.com/cuda-gpus).
GPU_COMPUTE_CAPABILITY: dict[str, float] = {
    "T4": 7.5,
    "A10G": 8.6,
    "L4": 8.9,
    "L40S": 8.9,
    "V100": 7.0,
    "A100": 8.0,
}


def instance_compute_capability(instance_type: str) -> float | None:
    """Compute capability of the instance type's GPU, or ``None`` if it is not known."""
    gpu = instance_gpu(instance_type)
    return GPU_COMPUTE_CAPABILITY.get(gpu) if gpu else None


def instance_gpu(instance_type: str) -> str | None:
    """The GPU of an EC2 (``g5.2xlarge``) or SageMaker (``ml.g5.2xlarge``) instance type,
    or ``None`` if its family is not in :data:`GPU_BY_FAMILY`."""
    family = instance_type.removeprefix("ml.").split(".", 1)[0]
    return GPU_BY_FAMILY.get(family)


@dataclass(frozen=True)
class AcceleratorKind:
    """One kind of accelerator node group: what its nodes run, how they are marked, and which
    device plugin advertises the device. The node-group building block
    (``ml_platform.constructs._nodegroup``) and the accelerator stacks read these records.

    Attributes:
        node_role: Value of the ``ml-platform/node-role`` node label.
        ami_type: EKS managed node group AMI type (``amiType`` of ``CreateNodegroup``,
            https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html).
        taint_key: Key of the ``NoSchedule`` taint on the nodes; pods tolerate it to land there.
        resource: The extended resource the device plugin advertises and pods request.
        device_plugin_chart: Where the device plugin's pod comes from, as ``module:name``
            (named, not imported: settings and the CLI load this module without cdk8s): a
            cdk8s chart class (its DaemonSet), or for a plugin installed from its vendor's Helm
            chart the function of that chart's values (``devicePlugin`` placement and
            tolerations).
        instance_types: The instance types a node group of this kind accepts.
    """

    node_role: str
    ami_type: str
    taint_key: str
    resource: str
    device_plugin_chart: str
    instance_types: Set[str]


# The AL2023 Neuron AMI has the Neuron driver and EFA software; the Neuron device plugin
# advertises aws.amazon.com/neuron (one per Trainium chip):
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/kubernetes-getting-started.html
TRAINIUM = AcceleratorKind(
    node_role="trainium",
    ami_type="AL2023_x86_64_NEURON",
    taint_key=NEURON_TAINT_KEY,
    resource=NEURON_RESOURCE,
    device_plugin_chart="ml_platform.k8s_charts.neuron:neuron_helm_values",
    instance_types=frozenset(TRAINIUM_INSTANCES),
)
# The AL2023 NVIDIA AMI has the NVIDIA driver and container toolkit; NVIDIA's device plugin
# advertises nvidia.com/gpu: https://github.com/NVIDIA/k8s-device-plugin
GPU = AcceleratorKind(
    node_role="gpu",
    ami_type="AL2023_x86_64_NVIDIA",
    taint_key=GPU_TAINT_KEY,
    resource=GPU_RESOURCE,
    device_plugin_chart="ml_platform.k8s_charts.nvidia:NvidiaDevicePluginChart",
    instance_types=EKS_GPU_INSTANCES,
)
ACCELERATORS: dict[str, AcceleratorKind] = {kind.node_role: kind for kind in (TRAINIUM, GPU)}
"""Every accelerator kind, by its node-role label value."""
