"""Accelerator node groups, each in a stack of its own that depends on the cluster's stack.

A managed node group of scarce instances (trn1.32xlarge in one AZ, GPUs) often fails with
``InsufficientInstanceCapacity``. In the cluster's stack that failure would roll back the
whole stack, cluster included; here it rolls back only the node group's stack, and
``cdk deploy <that stack>`` can simply be run again later (or with a capacity reservation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Annotations, CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from ml_platform.config import Settings
from ml_platform.constructs.gpu_nodes import GpuNodeGroup
from ml_platform.constructs.trainium import TrainiumNodeGroup

BERT_NODES_WARNING = "ml-platform:bertNodeCount"


class TrainiumNodesStack(Stack):
    """The :class:`TrainiumNodeGroup` of the platform.

    Warns (``ml-platform:bertNodeCount``) when the shipped BERT recipe cannot run on
    ``trainium.nodes``: rendering the training manifests (``make synth``) refuses such a node
    count, but ``cdk deploy`` renders none, so without the warning the cluster deploys and the
    manifests fail only afterwards.

    Args:
        settings: Platform settings (``trainium``). Required.
        cluster: The cluster (of the cluster's stack). Required.
        trainium_subnet: Private subnet of the Trainium AZ. Required.
        training_nodes: Security group of the EFA interfaces. Required.
        lustre_clients: The file system's client security group
            (``LustreStorage.client_security_group``), so the nodes can mount it. Default none.
        nodes_ready_after: What the nodes need before they can join (the networking add-ons).
            Default nothing.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        cluster: eks.ICluster,
        trainium_subnet: ec2.ISubnet,
        training_nodes: ec2.ISecurityGroup,
        nodes_ready_after: Sequence[IDependable] = (),
        lustre_clients: ec2.ISecurityGroup | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        trn = settings.trainium
        placement_group = (
            ec2.PlacementGroup.from_placement_group_name(
                self, "ReservationPlacementGroup", trn.placement_group
            )
            if trn.placement_group is not None
            else None
        )
        self.trainium = TrainiumNodeGroup(
            self,
            "Trainium",
            cluster=cluster,
            subnet=trainium_subnet,
            security_group=training_nodes,
            instance_type=trn.instance_type,
            min_size=trn.min_nodes,
            desired_size=trn.nodes,
            max_size=trn.max_nodes,
            root_volume_gib=trn.root_volume_gib,
            capacity_reservation_id=trn.capacity_reservation_id or trn.capacity_block_id,
            capacity_block=trn.capacity_block_id is not None,
            placement_group=placement_group,
            extra_security_groups=[lustre_clients] if lustre_clients is not None else [],
            ssm_access=settings.cluster.node_ssm_access,
        )
        if nodes_ready_after:
            self.trainium.node_group.node.add_dependency(*nodes_ready_after)
        from ml_platform.training.jobs import bert_problems  # torchx: only when needed

        for problem in bert_problems(settings):
            Annotations.of(self).add_warning_v2(
                BERT_NODES_WARNING,
                f"{problem}. The node group deploys, but the BERT training manifests "
                "(make synth, dist/k8s) are refused until it is fixed.",
            )
        CfnOutput(
            self,
            "NodegroupName",
            value=self.trainium.node_group.nodegroup_name,
            description="Trainium managed node group",
        )


class GpuNodesStack(Stack):
    """The GPU node group of Triton on EKS (:class:`GpuNodeGroup`).

    Args:
        settings: Platform settings (``triton_on_eks``). Required.
        cluster: The cluster. Required.
        nodes_ready_after: As for :class:`TrainiumNodesStack`. Default nothing.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        cluster: eks.ICluster,
        nodes_ready_after: Sequence[IDependable] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        triton = settings.triton_on_eks
        self.gpu = GpuNodeGroup(
            self,
            "Gpu",
            cluster=cluster,
            instance_type=triton.gpu_instance_type,
            nodes=triton.gpu_nodes,
            min_nodes=triton.min_gpu_nodes,
            # Nothing grows the group (README "Serve the ensembles on EKS"): max = desired.
            max_nodes=triton.gpu_nodes,
            ssm_access=settings.cluster.node_ssm_access,
        )
        if nodes_ready_after:
            self.gpu.node_group.node.add_dependency(*nodes_ready_after)
        CfnOutput(
            self,
            "NodegroupName",
            value=self.gpu.node_group.nodegroup_name,
            description="GPU managed node group of Triton on EKS",
        )
