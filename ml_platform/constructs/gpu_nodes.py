"""A managed node group of single-GPU instances for Triton on EKS."""

from __future__ import annotations

__all__ = [
    "GpuNodeGroup",
    "GpuNodeGroupProps",
]

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs._nodegroup import (
    accelerator_node_group,
    configure_node_role,
    hardened_launch_template,
    launch_template_spec,
    reserved_label_problems,
    size_problems,
)
from ml_platform.constructs._props import raise_problems
from ml_platform.instances import EKS_GPU_INSTANCES, GPU

MAX_GPU_NODES = limits.GPU_MAX_NODES


@dataclass(frozen=True, kw_only=True)
class GpuNodeGroupProps:
    """The value props of :class:`GpuNodeGroup` (described there) and every rule they follow,
    in :meth:`problems`: the construct checks them once, through this object."""

    instance_type: str = limits.DEFAULT_GPU_INSTANCE_TYPE
    desired_size: int = limits.DEFAULT_GPU_NODES
    min_size: int | None = None
    max_size: int = 2
    labels: Mapping[str, str] | None = None
    ssm_access: bool = False

    @property
    def resolved_min_size(self) -> int:
        """``min_size``, or ``desired_size`` when it is not given."""
        return self.desired_size if self.min_size is None else self.min_size

    def problems(self) -> list[str]:
        """Every problem of these props (empty when there is none), each naming the prop."""
        out = []
        if self.instance_type not in EKS_GPU_INSTANCES:
            out.append(
                f"instance_type={self.instance_type!r}: expected one of {sorted(EKS_GPU_INSTANCES)}"
            )
        sizes = {
            "min_size": self.resolved_min_size,
            "desired_size": self.desired_size,
            "max_size": self.max_size,
        }
        return out + size_problems(sizes, MAX_GPU_NODES) + reserved_label_problems(self.labels)


class GpuNodeGroup(Construct):
    """EKS managed node group of single-GPU instances: AL2023 NVIDIA AMI, private subnets,
    label ``ml-platform/node-role=gpu``, taint ``nvidia.com/gpu:NoSchedule``, IMDSv2 and an
    encrypted gp3 root volume, node role with the worker and ECR pull-only policies (and SSM
    access with ``ssm_access``).

    Args:
        cluster: The cluster. Required.
        instance_type: A type of :data:`~ml_platform.instances.EKS_GPU_INSTANCES`. Default
            ``g5.2xlarge``.
        desired_size: Desired nodes. Default 1. min_size: Default ``desired_size``.
        max_size: Default 2. (aws-cdk's ``Nodegroup`` names, as :class:`TrainiumNodeGroup`.)
        subnets: Subnets of the nodes. Default: the VPC's private subnets with egress.
        labels: Extra node labels. Default none.
        ssm_access: ``AmazonSSMManagedInstanceCore`` on the node role (break-glass Session
            Manager access). Default false.

    Attributes:
        launch_template: The ``CfnLaunchTemplate``.
        node_group: The ``eks_v2.Nodegroup``.
        role: The node role (aws-cdk's, with the policies reset).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        instance_type: str = limits.DEFAULT_GPU_INSTANCE_TYPE,
        desired_size: int = limits.DEFAULT_GPU_NODES,
        min_size: int | None = None,
        max_size: int = 2,
        subnets: ec2.SubnetSelection | None = None,
        labels: Mapping[str, str] | None = None,
        ssm_access: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props, as checked.
        self.props = GpuNodeGroupProps(
            instance_type=instance_type,
            desired_size=desired_size,
            min_size=min_size,
            max_size=max_size,
            labels=labels,
            ssm_access=ssm_access,
        )
        raise_problems(self, self.props.problems())
        self.launch_template = hardened_launch_template(self, "LaunchTemplate", root_volume_gib=100)
        self.node_group = accelerator_node_group(
            self,
            kind=GPU,
            cluster=cluster,
            instance_type=instance_type,
            launch_template=launch_template_spec(self.launch_template),
            subnets=subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            min_size=self.props.resolved_min_size,
            desired_size=desired_size,
            max_size=max_size,
            labels=labels,
        )
        # aws-cdk made the role (``NodeGroupRole``); reset its policies in place.
        self.role: iam.IRole = self.node_group.role
        configure_node_role(self.role, ssm_access)
