"""Accelerator node groups, each in a stack of its own that depends on the cluster's stack.

A managed node group of scarce instances (trn1.32xlarge in one AZ, GPUs) often fails with
``InsufficientInstanceCapacity``. In the cluster's stack that failure would roll back the
whole stack, cluster included; here it rolls back only the node group's stack, and
``cdk deploy <that stack>`` can simply be run again later (or with a capacity reservation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IDependable

from ml_platform.config import Settings
from ml_platform.constructs.gpu_nodes import GpuNodeGroup
from ml_platform.constructs.trainium import TrainiumNodeGroup


class TrainiumNodesStack(Stack):
    """The :class:`TrainiumNodeGroup` of the platform.

    Args:
        settings: Platform settings (``trainium``). Required.
        cluster: The cluster (of the cluster's stack). Required.
        trainium_subnet: Private subnet of the Trainium AZ. Required.
        training_nodes: Security group of the EFA interfaces. Required.
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
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        trn = settings.trainium
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
            ssm_access=settings.cluster.node_ssm_access,
        )
        if nodes_ready_after:
            self.trainium.node_group.node.add_dependency(*nodes_ready_after)
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
            max_nodes=triton.max_gpu_nodes,
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
