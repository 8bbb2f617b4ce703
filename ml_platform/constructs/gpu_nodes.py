"""A managed node group of single-GPU instances for Triton on EKS."""

from __future__ import annotations

__all__ = [
    "GpuNodeGroup",
    "GpuNodeGroupProps",
    "GpuNodeGroupPropsBase",
]

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ml_platform import limits
from ml_platform._settings_parse import Section, setting
from ml_platform.constructs._nodegroup import (
    accelerator_node_group,
    configure_node_role,
    hardened_launch_template,
    launch_template_spec,
    reserved_label_problems,
    size_problems,
)
from ml_platform.constructs._props import check_props
from ml_platform.instances import GPU
from ml_platform.props.triton_eks import GPU_INSTANCE_TYPES

MAX_GPU_NODES = limits.GPU_MAX_NODES


@dataclass(frozen=True, kw_only=True)
class GpuNodeGroupPropsBase(Section):
    """The props of :class:`GpuNodeGroup` checked as the settings check theirs."""

    instance_type: Annotated[str, GPU_INSTANCE_TYPES] = setting(limits.DEFAULT_GPU_INSTANCE_TYPE)
    """A type of :data:`~ml_platform.instances.EKS_GPU_INSTANCES`."""


@dataclass(frozen=True, kw_only=True)
class GpuNodeGroupProps(GpuNodeGroupPropsBase):
    """The value props of :class:`GpuNodeGroup` (aws-cdk's ``Nodegroup`` names for the sizes,
    as :class:`TrainiumNodeGroup`) and the rules among them."""

    desired_size: int = limits.DEFAULT_GPU_NODES
    """Desired nodes."""
    min_size: int | None = None
    """Minimum nodes. Default ``desired_size``."""
    max_size: int = 2
    """Maximum nodes."""
    labels: Mapping[str, str] | None = None
    """Extra node labels. Default none."""
    ssm_access: bool = False
    """``AmazonSSMManagedInstanceCore`` on the node role (break-glass Session Manager
    access)."""

    @property
    def resolved_min_size(self) -> int:
        """``min_size``, or ``desired_size`` when it is not given."""
        return self.desired_size if self.min_size is None else self.min_size

    def construct_problems(self) -> list[str]:
        """The problems of the props the base does not check (empty when there is none),
        each naming the prop."""
        # aws-cdk's Nodegroup (aws-cdk-lib 2.275.0, aws-eks-v2/lib/managed-nodegroup.js) refuses
        # only min > desired and desired > max, one at a time and after children exist; the
        # bounds (min >= 0, 1 <= max <= 20) are ours, so the rule stays here, reported with the rest.
        sizes = {
            "min_size": self.resolved_min_size,
            "desired_size": self.desired_size,
            "max_size": self.max_size,
        }
        return size_problems(sizes, MAX_GPU_NODES) + reserved_label_problems(self.labels)


class GpuNodeGroup(Construct):
    """EKS managed node group of single-GPU instances: AL2023 NVIDIA AMI, private subnets,
    label ``ml-platform/node-role=gpu``, taint ``nvidia.com/gpu:NoSchedule``, IMDSv2 and an
    encrypted gp3 root volume, node role with the worker and ECR pull-only policies (and SSM
    access with ``ssm_access``).

    Args:
        cluster: The cluster. Required.
        props: The value props (:class:`GpuNodeGroupProps`, each field described there).
            Default: every field's default.
        subnets: Subnets of the nodes. Default: the VPC's private subnets with egress.

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
        props: GpuNodeGroupProps = GpuNodeGroupProps(),
        subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props, as checked.
        self.props = props
        check_props(self, props, GpuNodeGroupPropsBase, *props.construct_problems())
        self.launch_template = hardened_launch_template(self, "LaunchTemplate", root_volume_gib=100)
        self.node_group = accelerator_node_group(
            self,
            kind=GPU,
            cluster=cluster,
            instance_type=props.instance_type,
            launch_template=launch_template_spec(self.launch_template),
            subnets=subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            min_size=self.props.resolved_min_size,
            desired_size=props.desired_size,
            max_size=props.max_size,
            labels=props.labels,
        )
        # aws-cdk made the role (``NodeGroupRole``); reset its policies in place.
        self.role: iam.IRole = self.node_group.role
        configure_node_role(self.role, props.ssm_access)
