"""A managed node group of single-GPU instances for Triton on EKS."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs.eks_cluster import configure_node_role, hardened_launch_template
from ml_platform.instances import EKS_GPU_INSTANCES
from ml_platform.k8s_charts.names import GPU_TAINT_KEY, NODE_ROLE_LABEL

MAX_GPU_NODES = limits.GPU_MAX_NODES


def gpu_node_problems(instance_type: str, min_nodes: int, nodes: int, max_nodes: int) -> list[str]:
    """What is wrong with these GPU node group props (empty when nothing is)."""
    out = []
    if instance_type not in EKS_GPU_INSTANCES:
        out.append(f"instance_type={instance_type!r}: expected one of {sorted(EKS_GPU_INSTANCES)}")
    if not limits.node_counts_ok(min_nodes, nodes, max_nodes, MAX_GPU_NODES):
        out.append(
            f"min_nodes/nodes/max_nodes={min_nodes}/{nodes}/{max_nodes}: expected 0 <= min_nodes "
            f"<= nodes <= max_nodes <= {MAX_GPU_NODES} and max_nodes >= 1"
        )
    return out


class GpuNodeGroup(Construct):
    """EKS managed node group of single-GPU instances: AL2023 NVIDIA AMI, private subnets,
    label ``ml-platform/node-role=gpu``, taint ``nvidia.com/gpu:NoSchedule``, IMDSv2 and an
    encrypted gp3 root volume, node role with the worker and ECR pull-only policies (and SSM
    access with ``ssm_access``).

    Args:
        cluster: The cluster. Required.
        instance_type: A type of :data:`~ml_platform.instances.EKS_GPU_INSTANCES`. Default
            ``g5.2xlarge``.
        nodes: Desired nodes. Default 1. min_nodes: Default ``nodes``. max_nodes: Default 2.
        subnets: Subnets of the nodes. Default: the VPC's private subnets with egress.
        labels: Extra node labels. Default none.
        ssm_access: ``AmazonSSMManagedInstanceCore`` on the node role. Default true.

    Attributes:
        launch_template: The ``CfnLaunchTemplate``.
        node_group: The ``eks_v2.Nodegroup``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        instance_type: str = limits.DEFAULT_GPU_INSTANCE_TYPE,
        nodes: int = limits.DEFAULT_GPU_NODES,
        min_nodes: int | None = None,
        max_nodes: int = 2,
        subnets: ec2.SubnetSelection | None = None,
        labels: Mapping[str, str] | None = None,
        ssm_access: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        low = nodes if min_nodes is None else min_nodes
        errors = gpu_node_problems(instance_type, low, nodes, max_nodes)
        if labels and NODE_ROLE_LABEL in labels:
            errors.append(f"labels: {NODE_ROLE_LABEL!r} is set by this construct")
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))
        self.launch_template = hardened_launch_template(self, "LaunchTemplate", root_volume_gib=100)
        self.node_group = eks.Nodegroup(
            self,
            "Resource",
            cluster=cluster,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
            instance_types=[ec2.InstanceType(instance_type)],
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            subnets=subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            min_size=low,
            desired_size=nodes,
            max_size=max_nodes,
            labels={**(labels or {}), NODE_ROLE_LABEL: "gpu"},
            taints=[
                eks.TaintSpec(key=GPU_TAINT_KEY, value="true", effect=eks.TaintEffect.NO_SCHEDULE)
            ],
        )
        configure_node_role(self.node_group.role, ssm_access)
