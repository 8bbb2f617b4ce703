"""The building block of the platform's managed node groups (system, Trainium, GPU): the node
role with its managed policies and cdk-nag reasons, the hardened launch template, and the node
group itself with the accelerator kind's AMI type, label and taint.

Private: the public surface is the constructs (:class:`~ml_platform.constructs.trainium.
TrainiumNodeGroup`, :class:`~ml_platform.constructs.gpu_nodes.GpuNodeGroup`,
:class:`~ml_platform.constructs.eks_cluster.TrainingEksCluster`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Fn
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ml_platform import limits
from ml_platform._settings_parse import Problem
from ml_platform.constructs._nag import acknowledge_each, aws_managed_policy, managed_policy_finding
from ml_platform.instances import AcceleratorKind
from ml_platform.k8s_names import NODE_ROLE_LABEL

ROOT_DEVICE = "/dev/xvda"  # root device of the AL2023 EKS AMIs

SSM_NODE_POLICY = "AmazonSSMManagedInstanceCore"
"""Session Manager on the nodes, break-glass only (off by default: whoever may start a session
gets root on the node): debug EFA and Neuron on a node without SSH or open ports, or forward a
port to a private API endpoint (docs/security.md, "Cluster access")."""
NODE_ROLE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
"""AWS managed policies every EKS worker node role carries.

- No ``AmazonEKS_CNI_Policy``: the VPC CNI add-on gets it on a Pod Identity role of its own
  (:class:`~ml_platform.constructs.addons.PlatformAddons`), as the EKS user guide recommends
  (assign the policy to a separate role, not the node role):
  https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html and
  https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html
- ``AmazonEC2ContainerRegistryPullOnly`` instead of ``...ReadOnly``: pulling is all a kubelet
  does; ReadOnly also lists and describes every repository of the account.
  https://docs.aws.amazon.com/AmazonECR/latest/userguide/security-iam-awsmanpol.html
"""
NODE_ROLE_REASONS = {
    "AmazonEKSWorkerNodePolicy": "EKS managed node groups require this AWS-maintained policy "
    "on the node role for nodes to join the cluster.",
    "AmazonEC2ContainerRegistryPullOnly": "Nodes pull images (EKS add-ons, the training "
    "image) from ECR; pull only, the narrowest AWS-maintained ECR policy.",
    SSM_NODE_POLICY: "Break-glass Session Manager access to the nodes (AWS-maintained policy, "
    "off by default; the setting cluster.node_ssm_access turns it on while needed): debug EFA "
    "and Neuron on a node without SSH keys or inbound ports, or forward a port to the private "
    "API endpoint.",
}


def node_role_policies(ssm_access: bool = False) -> tuple[str, ...]:
    """The AWS managed policies of a node role: :data:`NODE_ROLE_POLICIES`, plus
    :data:`SSM_NODE_POLICY` with ``ssm_access`` (default false: break-glass only)."""
    return NODE_ROLE_POLICIES + ((SSM_NODE_POLICY,) if ssm_access else ())


def acknowledge_node_role(role: iam.IRole, ssm_access: bool = False) -> None:
    """Acknowledge the AWS managed policies every EKS worker node role carries."""
    acknowledge_each(
        role,
        {
            managed_policy_finding(policy): NODE_ROLE_REASONS[policy]
            for policy in node_role_policies(ssm_access)
        },
    )


def configure_node_role(role: iam.IRole, ssm_access: bool = False) -> None:
    """Set the managed policies of a node role aws-cdk created to :func:`node_role_policies`
    (aws-cdk's default node role has the worker, CNI and ECR ReadOnly policies), and
    acknowledge them.

    The role's ``ManagedPolicyArns`` is replaced in place (an IAM update without interruption),
    so the node group, whose ``NodeRole`` cannot change without replacement, stays. cdk-nag
    reads the same L1 property, so it sees what the template holds."""
    resource = role.node.default_child
    if not isinstance(resource, iam.CfnRole):
        raise TypeError(f"{role.node.path}: not a role of this app (no AWS::IAM::Role to set)")
    resource.managed_policy_arns = [
        aws_managed_policy(p).managed_policy_arn for p in node_role_policies(ssm_access)
    ]
    acknowledge_node_role(role, ssm_access)


IMDS_HOP_LIMIT = 1
"""IMDS response hop limit of every node: 1 keeps the node role away from pods, whose packets
cross one more hop. Why 1 is enough for the host-network daemons and what it means for the FSx
CSI driver (with sources): docs/design.md, "IMDS hop limit 1"."""


def launch_template_data(
    *,
    root_volume_gib: int,
    security_group_ids: Sequence[str] | None = None,
    instance_type: str | None = None,
    network_interfaces: Sequence[ec2.CfnLaunchTemplate.NetworkInterfaceProperty] | None = None,
    placement: ec2.CfnLaunchTemplate.PlacementProperty | None = None,
    capacity_reservation_specification: (
        ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty | None
    ) = None,
    instance_market_options: ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty | None = None,
    user_data: str | None = None,
    root_volume_iops: int | None = None,
    root_volume_throughput: int | None = None,
) -> ec2.CfnLaunchTemplate.LaunchTemplateDataProperty:
    """The data of a managed node group's launch template: IMDSv2 only with hop limit 1 (see
    :data:`IMDS_HOP_LIMIT`), detailed monitoring and an encrypted gp3 root volume, plus what the caller adds (the
    instance type, network interfaces, placement, capacity, a MIME multi-part ``user_data``
    that EKS merges with its bootstrap (:mod:`~ml_platform.constructs._user_data`), the root
    volume's IOPS and throughput in MiB/s; ``None``: gp3's baseline, 3000 and 125). No image
    or instance profile: EKS supplies AMI, bootstrap and profile."""
    return ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
        instance_type=instance_type,
        user_data=Fn.base64(user_data) if user_data is not None else None,
        security_group_ids=list(security_group_ids) if security_group_ids else None,
        network_interfaces=list(network_interfaces) if network_interfaces is not None else None,
        placement=placement,
        capacity_reservation_specification=capacity_reservation_specification,
        instance_market_options=instance_market_options,
        # One-minute EC2 metrics (Control Tower CT.EC2.PR.10): billed as 7 custom metrics per
        # instance (https://aws.amazon.com/cloudwatch/pricing/, "Detailed Monitoring"), a few
        # dollars a month beside the node's own price. Changing it makes a new template version,
        # which node groups roll out like any launch-template change.
        monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
        metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=IMDS_HOP_LIMIT,
        ),
        block_device_mappings=[
            ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                device_name=ROOT_DEVICE,
                ebs=ec2.CfnLaunchTemplate.EbsProperty(
                    volume_size=root_volume_gib,
                    volume_type="gp3",
                    iops=root_volume_iops,
                    throughput=root_volume_throughput,
                    encrypted=True,
                    delete_on_termination=True,
                ),
            )
        ],
    )


def hardened_launch_template(
    scope: Construct,
    construct_id: str,
    *,
    root_volume_gib: int,
    security_group_ids: Sequence[str] | None = None,
) -> ec2.CfnLaunchTemplate:
    """Launch template of a managed node group: :func:`launch_template_data` with only the root
    volume size and, optionally, the nodes' security groups.

    ``security_group_ids``: the nodes' groups. Default none: EKS attaches the cluster security
    group. Given, EKS attaches only these, so include the cluster group when the nodes need it
    (EKS user guide, "Customize managed nodes with launch templates",
    https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html)."""
    return ec2.CfnLaunchTemplate(
        scope,
        construct_id,
        launch_template_data=launch_template_data(
            root_volume_gib=root_volume_gib, security_group_ids=security_group_ids
        ),
    )


def launch_template_spec(template: ec2.CfnLaunchTemplate) -> eks.LaunchTemplateSpec:
    """``template``'s latest version, as a node group takes it."""
    return eks.LaunchTemplateSpec(id=template.ref, version=template.attr_latest_version_number)


def new_node_role(
    scope: Construct, construct_id: str, *, description: str, ssm_access: bool = False
) -> iam.Role:
    """A node role of its own (EC2 trust) with :func:`node_role_policies`, acknowledged."""
    role = iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
        description=description,
        managed_policies=[aws_managed_policy(p) for p in node_role_policies(ssm_access)],
    )
    acknowledge_node_role(role, ssm_access)
    return role


def size_problems(sizes: Mapping[str, int], most: int) -> list[str]:
    """The sizes of a node group (prop name -> value: minimum, desired, maximum, in this
    order): ``0 <= min <= desired <= max <= most`` and ``max >= 1``
    (:func:`ml_platform.limits.node_counts_ok`)."""
    (low_name, low), (name, nodes), (high_name, high) = sizes.items()
    if limits.node_counts_ok(low, nodes, high, most):
        return []
    text = f"expected 0 <= {low_name} <= {name} <= {high_name} <= {most} and {high_name} >= 1"
    return [Problem(dict(sizes), text).worded()]


def reserved_label_problems(labels: Mapping[str, str] | None, prop: str = "labels") -> list[str]:
    """The node-role label is the construct's own (empty when ``labels``, the prop named
    ``prop``, leave it alone)."""
    if labels and NODE_ROLE_LABEL in labels:
        return [
            Problem({prop: dict(labels)}, f"{NODE_ROLE_LABEL!r} is set by this construct").worded()
        ]
    return []


FORCE_UPDATE = False
"""``ForceUpdateEnabled`` of the accelerator node groups. aws-cdk's default (true) makes an
update (new launch template version, AMI release) terminate nodes whose pods a disruption
budget protects: both Trainium nodes of a running gang at once. False: such an update fails
instead, and the nodes are rolled between runs (docs/training.md, "Rolling the nodes between
runs"). EKS user guide, "Update a managed node group"
(https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html)."""

NODE_AUTO_REPAIR = True
"""``NodeRepairConfig.Enabled`` of every managed node group: EKS replaces or reboots a node
that the node monitoring agent (add-on ``eks-node-monitoring-agent``, which watches
accelerated hardware, Neuron included) or the kubelet reports unhealthy. EKS user guide,
"Enable node auto repair and investigate node health issues"
(https://docs.aws.amazon.com/eks/latest/userguide/node-health.html). What a repair does to a
running job: docs/training.md, "Node health and repairs"."""


def accelerator_node_group(
    scope: Construct,
    *,
    kind: AcceleratorKind,
    cluster: eks.ICluster,
    launch_template: eks.LaunchTemplateSpec,
    subnets: ec2.SubnetSelection,
    min_size: int,
    desired_size: int,
    max_size: int,
    labels: Mapping[str, str] | None = None,
    node_role: iam.IRole | None = None,
    instance_type: str | None = None,
    capacity_type: eks.CapacityType | None = None,
    nodegroup_name: str | None = None,
    release_version: str | None = None,
) -> eks.Nodegroup:
    """The managed node group ``Resource`` of one accelerator ``kind``: its AMI type, the label
    ``ml-platform/node-role=<kind.node_role>`` after ``labels``, and the ``NoSchedule`` taint
    ``kind.taint_key=true``, so only pods that tolerate it (and ask for the device) land there.

    Updates never force a node out from under a job (:data:`FORCE_UPDATE`), and EKS repairs
    unhealthy nodes (:data:`NODE_AUTO_REPAIR`).

    ``instance_type``: on the node group; ``None`` when the launch template names it (a node
    group rejects an instance type next to one in its template). ``node_role``: ``None`` lets
    aws-cdk create one; reset it with :func:`configure_node_role`. ``release_version``: the
    EKS AMI release of the nodes; ``None``: EKS's newest at each create or update."""
    return eks.Nodegroup(
        scope,
        "Resource",
        cluster=cluster,
        nodegroup_name=nodegroup_name,
        ami_type=eks.NodegroupAmiType[kind.ami_type.upper()],
        instance_types=[ec2.InstanceType(instance_type)] if instance_type else None,
        launch_template_spec=launch_template,
        capacity_type=capacity_type,
        subnets=subnets,
        min_size=min_size,
        desired_size=desired_size,
        max_size=max_size,
        node_role=node_role,
        labels={**(labels or {}), NODE_ROLE_LABEL: kind.node_role},
        taints=[
            eks.TaintSpec(key=kind.taint_key, value="true", effect=eks.TaintEffect.NO_SCHEDULE)
        ],
        release_version=release_version,
        force_update=FORCE_UPDATE,
        enable_node_auto_repair=NODE_AUTO_REPAIR,
    )
