"""Accelerator node groups, each in a stack of its own that depends on the cluster's stack.

A managed node group of scarce instances (trn1.32xlarge in one AZ, GPUs) often fails with
``InsufficientInstanceCapacity``. In the cluster's stack that failure would roll back the
whole stack, cluster included; here it rolls back only the node group's stack, and
``cdk deploy <that stack>`` can simply be run again later (or with a capacity reservation).

Every accelerator stack is an :class:`AcceleratorNodesStack`: one node-group construct, the
cluster's networking add-ons before it, and a ``NodegroupName`` output. A subclass says which
construct and which settings section.
"""

from __future__ import annotations

__all__ = [
    "BERT_NODES_WARNING",
    "NEURON_STACK_WARNING",
    "AcceleratorNodesStack",
    "GpuNodesStack",
    "TrainiumNodesStack",
]

from collections.abc import Sequence
from typing import Any, ClassVar

from aws_cdk import Annotations, CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from ml_platform import limits
from ml_platform.config import Settings, TrainiumSettings, TritonOnEksSettings
from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps
from ml_platform.constructs.trainium import TrainiumNodeGroup, TrainiumNodeGroupProps
from ml_platform.instances import GPU, TRAINIUM, AcceleratorKind
from ml_platform.props import shared_fields
from ml_platform.props.trainium import TrainiumPropsBase
from ml_platform.training.jobs import bert_problems
from ml_platform.versions import (
    NEURON_AMI_RELEASE_LATEST,
    NEURON_STACKS,
    neuron_release_version,
)

BERT_NODES_WARNING = "ml-platform:bertNodeCount"
NEURON_STACK_WARNING = "ml-platform:neuronStackChangedApart"


class AcceleratorNodesStack(Stack):
    """A stack of one accelerator node group of the cluster of another stack.

    Args:
        cluster: The cluster (of the cluster's stack). Required.
        nodes_ready_after: What the nodes need before they can join (the networking add-ons,
            ``PlatformAddons.node_dependents()``). Default nothing.

    Attributes:
        nodes: The node-group construct (``nodes.node_group`` is the ``eks_v2.Nodegroup``).
    """

    kind: ClassVar[AcceleratorKind]
    SHORT_NAME: ClassVar[str]
    """The stack's name after the platform's prefix (``<prefix>-<SHORT_NAME>``)."""
    DESCRIPTION: ClassVar[str]
    """The stack's CloudFormation description in the platform."""
    OUTPUT_DESCRIPTION: ClassVar[str]

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        nodes_ready_after: Sequence[IDependable] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.nodes: TrainiumNodeGroup | GpuNodeGroup = self._node_group(cluster)
        if nodes_ready_after:
            self.nodes.node_group.node.add_dependency(*nodes_ready_after)
        self._warn()
        CfnOutput(
            self,
            "NodegroupName",
            value=self.nodes.node_group.nodegroup_name,
            description=self.OUTPUT_DESCRIPTION,
        )

    def _node_group(self, cluster: eks.ICluster) -> TrainiumNodeGroup | GpuNodeGroup:
        """The node-group construct of this stack."""
        raise NotImplementedError

    def _warn(self) -> None:
        """Warnings about the node group's settings (none by default)."""


class TrainiumNodesStack(AcceleratorNodesStack):
    """The :class:`TrainiumNodeGroup` of the platform.

    Warns (``ml-platform:bertNodeCount``) when the shipped BERT recipe cannot run on
    ``trainium.nodes``: rendering the training manifests (``make synth``) refuses such a node
    count, but ``cdk deploy`` renders none, so without the warning the cluster deploys and the
    manifests fail only afterwards.

    Args:
        settings: The ``trainium`` settings. Required.
        cluster: The cluster (of the cluster's stack). Required.
        trainium_subnet: Private subnet of the Trainium AZ. Required.
        training_nodes: Security group of the EFA interfaces. Required.
        lustre_clients: The file system's client security group
            (``LustreStorage.client_security_group``), so the nodes can mount it. Default none.
        node_ssm_access: ``AmazonSSMManagedInstanceCore`` on the node role
            (``cluster.node_ssm_access``), break-glass Session Manager access. Default false.
        nodes_ready_after: What the nodes need before they can join (the networking add-ons).
            Default nothing.
        kubernetes_version: The cluster's (``cluster.kubernetes_version``): selects the
            pinned Neuron AMI release. Default ``1.35``.

    Warns (``ml-platform:neuronStackChangedApart``) when ``trainium.ami_release_version``
    moves the node image away from the one pinned with the training image's Neuron SDK.

    Attributes:
        trainium: The :class:`TrainiumNodeGroup` (also ``nodes``).
    """

    kind = TRAINIUM
    SHORT_NAME = "TrainiumNodes"
    DESCRIPTION = "cdk-ml-platform: Trainium node group (EFA), separate from the cluster"
    OUTPUT_DESCRIPTION = "Trainium managed node group"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: TrainiumSettings,
        cluster: eks.ICluster,
        trainium_subnet: ec2.ISubnet,
        training_nodes: ec2.ISecurityGroup,
        nodes_ready_after: Sequence[IDependable] = (),
        lustre_clients: ec2.ISecurityGroup | None = None,
        node_ssm_access: bool = False,
        kubernetes_version: str = limits.DEFAULT_KUBERNETES_VERSION,
        **kwargs: Any,
    ) -> None:
        self._settings = settings
        self._kubernetes_version = kubernetes_version
        self._subnet = trainium_subnet
        self._security_group = training_nodes
        self._lustre_clients = lustre_clients
        self._ssm_access = node_ssm_access
        super().__init__(
            scope, construct_id, cluster=cluster, nodes_ready_after=nodes_ready_after, **kwargs
        )

    def _node_group(self, cluster: eks.ICluster) -> TrainiumNodeGroup:
        trn = self._settings
        assert trn.min_nodes is not None  # TrainiumSettings.__post_init__ resolves the default
        self.trainium = TrainiumNodeGroup(
            self,
            "Trainium",
            props=TrainiumNodeGroupProps(
                **shared_fields(trn, TrainiumPropsBase),
                min_size=trn.min_nodes,
                desired_size=trn.nodes,
                max_size=trn.max_nodes,
                ssm_access=self._ssm_access,
                release_version=self._release_version(),
            ),
            cluster=cluster,
            subnet=self._subnet,
            security_group=self._security_group,
            extra_security_groups=[self._lustre_clients] if self._lustre_clients else [],
        )
        return self.trainium

    def _release_version(self) -> str | None:
        """``trainium.ami_release_version``, or the Neuron stack's release for the cluster's
        Kubernetes version; ``None`` for ``latest``."""
        chosen = self._settings.ami_release_version
        if chosen == NEURON_AMI_RELEASE_LATEST:
            return None
        return chosen or neuron_release_version(
            self._settings.instance_type, self._kubernetes_version
        )

    def _warn(self) -> None:
        chosen = self._settings.ami_release_version
        validated = neuron_release_version(self._settings.instance_type, self._kubernetes_version)
        if chosen is not None and chosen != validated:
            stack = NEURON_STACKS[self._settings.instance_type]
            Annotations.of(self).add_warning_v2(
                NEURON_STACK_WARNING,
                f"trainium.ami_release_version = {chosen!r}: the Neuron node image and the "
                f"training image are pinned together ({validated}, AMI release "
                f"{stack.ami_release} with aws-neuronx-dkms {stack.driver}, the driver of the "
                f"image's Neuron SDK {stack.sdk}); with another AMI the nodes' Neuron driver "
                "no longer matches the image's runtime. Remove the setting to use the pinned "
                "pair, or change both in ml_platform/versions.py (NEURON_STACKS).",
            )
        # bert_problems reads only the trainium section of the settings it is given.
        for problem in bert_problems(Settings(trainium=self._settings)):
            Annotations.of(self).add_warning_v2(
                BERT_NODES_WARNING,
                f"{problem}. The node group deploys, but the BERT training manifests "
                "(make synth, dist/k8s) are refused until it is fixed.",
            )


class GpuNodesStack(AcceleratorNodesStack):
    """The GPU node group of Triton on EKS (:class:`GpuNodeGroup`).

    Args:
        settings: The ``triton_on_eks`` settings. Required.
        cluster: The cluster. Required.
        node_ssm_access: As for :class:`TrainiumNodesStack`. Default false.
        nodes_ready_after: As for :class:`TrainiumNodesStack`. Default nothing.

    Attributes:
        gpu: The :class:`GpuNodeGroup` (also ``nodes``).
    """

    kind = GPU
    SHORT_NAME = "GpuNodes"
    DESCRIPTION = "cdk-ml-platform: GPU node group of Triton on EKS"
    OUTPUT_DESCRIPTION = "GPU managed node group of Triton on EKS"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: TritonOnEksSettings,
        cluster: eks.ICluster,
        nodes_ready_after: Sequence[IDependable] = (),
        node_ssm_access: bool = False,
        **kwargs: Any,
    ) -> None:
        self._settings = settings
        self._ssm_access = node_ssm_access
        super().__init__(
            scope, construct_id, cluster=cluster, nodes_ready_after=nodes_ready_after, **kwargs
        )

    def _node_group(self, cluster: eks.ICluster) -> GpuNodeGroup:
        triton = self._settings
        self.gpu = GpuNodeGroup(
            self,
            "Gpu",
            cluster=cluster,
            props=GpuNodeGroupProps(
                instance_type=triton.gpu_instance_type,
                desired_size=triton.gpu_nodes,
                min_size=triton.min_gpu_nodes,
                # Nothing grows the group (docs/serving-eks.md, "Sizing, not autoscaling"):
                # max = desired.
                max_size=triton.gpu_nodes,
                ssm_access=self._ssm_access,
            ),
        )
        return self.gpu
