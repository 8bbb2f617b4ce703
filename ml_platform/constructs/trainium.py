"""Trainium capacity: an EFA launch template and the managed node group that uses it.

The node group is built with ``eks_v2.Nodegroup`` directly. ``Cluster.add_nodegroup_capacity``
would also apply aws-cdk's bundled Neuron device plugin manifest (which crash-loops); the
platform installs the plugin from Neuron's own Helm chart (:mod:`ml_platform.k8s_charts.neuron`).
"""

from __future__ import annotations

__all__ = [
    "CAPACITY_BLOCK_DESIRED_WARNING",
    "EfaLaunchTemplate",
    "EfaLaunchTemplateProps",
    "TrainiumNodeGroup",
    "TrainiumNodeGroupProps",
]

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Annotations, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from ml_platform import limits
from ml_platform._settings_parse import Problem
from ml_platform.constructs._create_order import after_security_group_rules
from ml_platform.constructs._nag import acknowledge_controls
from ml_platform.constructs._nodegroup import (
    accelerator_node_group,
    launch_template_data,
    new_node_role,
    reserved_label_problems,
    size_problems,
)
from ml_platform.constructs._props import check_props
from ml_platform.constructs._security_groups import allow_efa_within, control_plane_rules
from ml_platform.constructs._user_data import efa_node_user_data
from ml_platform.instances import TRAINIUM, TRAINIUM_INSTANCES, TrainiumInstance
from ml_platform.limits import shown
from ml_platform.props.trainium import TrainiumPropsBase
from ml_platform.versions import NEURON_AMI_RELEASE_LATEST

ROOT_VOLUME_IOPS = 16000
ROOT_VOLUME_THROUGHPUT_MIBPS = 1000
"""The Trainium root volume's gp3 IOPS and throughput: a new node pulls and unpacks the
multi-GB training image onto it before the gang can start, at 3000 IOPS and 125 MiB/s with
gp3's baseline. 1000 MiB/s is gp3's classic maximum and needs at least 4000 IOPS (0.25 MiB/s
per IOPS); 16000 IOPS is gp3's classic maximum, offered in every region (EBS User Guide,
"General Purpose SSD volumes",
https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html). Cost: a few tens of
dollars a month per node beside a trn1.32xlarge's hourly rate."""
MAX_NODES = limits.TRAINIUM_MAX_NODES
CAPACITY_BLOCK_DESIRED_WARNING = "ml-platform:capacityBlockDesiredSize"


PRIMARY_PUBLIC_IP = False
"""``AssociatePublicIpAddress`` of the primary interface (card 0, device index 0), set
explicitly (Control Tower CT.EC2.PR.9). EC2 documents the field for eth0 only ("Associates a
public IPv4 address with eth0 for a new network interface": AWS::EC2::LaunchTemplate
NetworkInterface, in cfn-lint's bundled provider schema and the CloudFormation reference,
https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-ec2-launchtemplate-networkinterface.html)."""

NO_PUBLIC_IP_REASON = (
    "AssociatePublicIpAddress is false on the primary interface (card 0, device index 0, eth0), "
    "the only one EC2 documents the field for. It stays unset on the efa-only interfaces: they "
    "take no IP address at all (EC2: efa-only interfaces do not support IP addresses), the node "
    "subnets are private (MapPublicIpOnLaunch false), and whether EC2 accepts the field on the "
    "efa-only interfaces of other network cards could not be verified without launching, so it "
    "is left unset rather than risk a node group that cannot launch."
)
"""Why the EFA launch template still has a CT.EC2.PR.9 finding (Control Tower asks the field
false on every interface): it is unset on the efa-only interfaces."""


def efa_network_interfaces(
    efa_devices: int, group_ids: Sequence[str], primary_group_ids: Sequence[str] = ()
) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """The interfaces of a node with ``efa_devices`` EFA devices, one per network card.

    EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with multiple network
    cards" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html):
    the primary interface (card 0, device index 0) is ENA; card 0, which supports EFA, gets an
    ``efa-only`` interface at device index 1; every other card an ``efa-only`` interface at
    device index 0. EFA-only interfaces take no IP address (SRD runs over MAC addresses), so a
    trn1.32xlarge node uses one VPC address instead of 8 and still has 8 EFA devices (trn1n and
    trn2: 16; trn2's cards take 2 interfaces each, so card 0's ENA + efa-only pair is its
    maximum). The EKS user guide ("Run machine learning training on Amazon EKS with Elastic Fabric
    Adapter", https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html) keeps EFA-only
    interfaces off the primary interface and needs VPC CNI 1.18.5 or later (pinned: 1.21).

    ``primary_group_ids`` go on the primary interface only, after ``group_ids``: groups for IP
    traffic such as the Lustre client group (EFA-only interfaces carry no IP traffic). The
    primary interface also says ``AssociatePublicIpAddress: false`` (:data:`PRIMARY_PUBLIC_IP`);
    the efa-only ones leave it unset (:data:`NO_PUBLIC_IP_REASON`).
    """
    groups = list(group_ids)

    def interface(
        card: int, device: int, kind: str, extra: Sequence[str] = (), public_ip: bool | None = None
    ) -> ec2.CfnLaunchTemplate.NetworkInterfaceProperty:
        return ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            network_card_index=card,
            device_index=device,
            interface_type=kind,
            groups=[*groups, *extra],
            delete_on_termination=True,
            associate_public_ip_address=public_ip,
        )

    return [
        # ENA primary (eth0): the node's IP address, never a public one
        interface(0, 0, "interface", primary_group_ids, public_ip=PRIMARY_PUBLIC_IP),
        interface(0, 1, "efa-only"),
        *(interface(card, 0, "efa-only") for card in range(1, efa_devices)),
    ]


@dataclass(frozen=True, kw_only=True)
class EfaLaunchTemplateProps(TrainiumPropsBase):
    """The value props of :class:`EfaLaunchTemplate`: the instance type, root volume, capacity
    and placement group the ``trainium`` settings share (:class:`~ml_platform.props.trainium.
    TrainiumPropsBase`, with their rules), and the EFA device count."""

    efa_interfaces: int | None = None
    """EFA devices. Default: one per network card of the instance type (8 on trn1.32xlarge, 16
    on trn1n.32xlarge and the trn2 types)."""

    def construct_problems(self) -> list[str]:
        """The rules of the construct-only props (the shared ones are the base's)."""
        instance = TRAINIUM_INSTANCES.get(self.instance_type)
        if (
            instance is None  # the base reports it
            or self.efa_interfaces is None
            or Token.is_unresolved(self.efa_interfaces)
            or 1 <= self.efa_interfaces <= instance.efa_interfaces
        ):
            return []
        return [
            Problem(
                {"efa_interfaces": self.efa_interfaces},
                f"{self.instance_type} has {instance.efa_interfaces} network cards; expected 1 to "
                f"{instance.efa_interfaces}",
            ).worded()
        ]


class EfaLaunchTemplate(Construct):
    """Launch template for Trainium nodes of an EKS managed node group: an ENA primary
    interface and one EFA device per network card, in a cluster placement group.

    Interfaces (:func:`efa_network_interfaces`): ENA on card 0 at device index 0, ``efa-only``
    on card 0 at device index 1 and on every other card at device index 0. The interfaces carry
    the security groups, and each group gets the rules EFA needs (all traffic to and from
    itself, both ways: :func:`~ml_platform.constructs.network.allow_efa_within`). The template
    has no subnet, no instance-level security groups, no instance profile and no image (EKS
    picks the node group's AMI and writes the bootstrap). IMDSv2 is required with a hop limit
    of 1 (``IMDS_HOP_LIMIT``: pods get credentials from Pod Identity, never the node role);
    the root volume is encrypted gp3 at :data:`ROOT_VOLUME_IOPS` IOPS and
    :data:`ROOT_VOLUME_THROUGHPUT_MIBPS` MiB/s.

    User data (MIME multi-part, merged by EKS with its nodeadm bootstrap): containerd's
    locked-memory limit raised to unlimited, which EFA needs in every training container
    (:mod:`~ml_platform.constructs._user_data`). Changing the user data makes a new template
    version, and the node group replaces its nodes to use it.

    Placement: without a reservation, a new ``cluster`` placement group. With
    ``capacity_reservation_id`` or ``capacity_block_id`` no new group: an On-Demand Capacity Reservation serves a
    cluster placement group only if it was created in it (EC2 User Guide, "Capacity
    Reservations in cluster placement groups",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html), so a new group next to
    one gets fewer instances or none (eksctl#7949, https://github.com/eksctl-io/eksctl/issues/7949);
    set ``placement_group`` to the name of the group the reservation was created in. A Capacity
    Block places its instances itself and takes no placement group.

    Capacity (EKS user guide, "Create a managed node group with Capacity Blocks for ML",
    https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html, and EC2 launch
    template ``CapacityReservationSpecification``): with ``capacity_reservation_id`` the
    instances launch into that reservation only (``CapacityReservationTarget``); with
    ``capacity_block_id`` into that Capacity Block for ML, market type ``capacity-block`` (the
    node group then needs capacity type ``CAPACITY_BLOCK``).

    Args:
        props: The value props (:class:`EfaLaunchTemplateProps`, each described on its field).
            Default: all defaults (trn1.32xlarge, no reservation).
        security_groups: Groups on every interface. Required, at least one.
        extra_security_groups: Groups on the primary (IP) interface only, without the EFA
            rules (e.g. the Lustre client group). Default none.

    Attributes:
        resource: The ``ec2.CfnLaunchTemplate``.
        placement_group: The placement group (``None`` when the template names none).
        instance: The :class:`~ml_platform.instances.TrainiumInstance` facts.
        efa_interfaces: The number of EFA interfaces.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: EfaLaunchTemplateProps = EfaLaunchTemplateProps(),
        security_groups: Sequence[ec2.ISecurityGroup],
        extra_security_groups: Sequence[ec2.ISecurityGroup] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props, as checked.
        self.props = props
        errors = props.construct_problems()
        if not security_groups:
            errors.append("security_groups=[]: expected at least one security group")
        check_props(self, props, TrainiumPropsBase, *errors)
        self.efa_egress_rules = [allow_efa_within(sg) for sg in security_groups]

        self.instance: TrainiumInstance = TRAINIUM_INSTANCES[props.instance_type]
        self.efa_interfaces = props.efa_interfaces or self.instance.efa_interfaces
        self.security_groups = [*security_groups, *extra_security_groups]
        self.placement_group: ec2.IPlacementGroup | None = None
        if props.placement_group is not None:
            self.placement_group = ec2.PlacementGroup.from_placement_group_name(
                self, "ReservationPlacementGroup", props.placement_group
            )
        elif props.capacity_reservation_id is None and props.capacity_block_id is None:
            self.placement_group = ec2.PlacementGroup(
                self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
            )
        group_ids = [sg.security_group_id for sg in security_groups]
        extra_ids = [sg.security_group_id for sg in extra_security_groups]
        capacity_block = props.capacity_block_id is not None
        self._capacity_type = eks.CapacityType.CAPACITY_BLOCK if capacity_block else None
        self.resource = ec2.CfnLaunchTemplate(
            self,
            "Resource",
            launch_template_data=launch_template_data(
                instance_type=props.instance_type,
                placement=(
                    ec2.CfnLaunchTemplate.PlacementProperty(
                        group_name=self.placement_group.placement_group_name
                    )
                    if self.placement_group is not None
                    else None
                ),
                network_interfaces=efa_network_interfaces(
                    self.efa_interfaces, group_ids, extra_ids
                ),
                capacity_reservation_specification=_capacity_reservation(
                    props.capacity_reservation_id or props.capacity_block_id
                ),
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(
                        market_type="capacity-block"
                    )
                    if capacity_block
                    else None
                ),
                root_volume_gib=props.root_volume_gib,
                root_volume_iops=ROOT_VOLUME_IOPS,
                root_volume_throughput=ROOT_VOLUME_THROUGHPUT_MIBPS,
                user_data=efa_node_user_data(),
            ),
        )
        acknowledge_controls(self.resource, {"CT.EC2.PR.9": NO_PUBLIC_IP_REASON})

    @property
    def capacity_type(self) -> eks.CapacityType | None:
        """The node group capacity type this template needs (``None``: EKS's default)."""
        return self._capacity_type

    @property
    def spec(self) -> eks.LaunchTemplateSpec:
        """The template's latest version, as a node group takes it."""
        return eks.LaunchTemplateSpec(
            id=self.resource.ref, version=self.resource.attr_latest_version_number
        )


def _capacity_reservation(
    reservation_id: str | None,
) -> ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty | None:
    if reservation_id is None:
        return None
    return ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
        capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
            capacity_reservation_id=reservation_id
        )
    )


@dataclass(frozen=True, kw_only=True)
class TrainiumNodeGroupProps(EfaLaunchTemplateProps):
    """The value props of :class:`TrainiumNodeGroup`: its launch template's (the instance type,
    root volume, capacity and placement group the ``trainium`` settings share, with their rules,
    and the EFA device count), and the node group's own."""

    min_size: int = limits.DEFAULT_TRAINIUM_NODES
    """Fewest nodes: 0 <= min_size <= desired_size <= max_size <= 64, max_size >= 1."""
    desired_size: int = limits.DEFAULT_TRAINIUM_NODES
    """Desired node count. With ``capacity_block_id`` above 0 it warns (EKS updates a node
    group on a Capacity Block only at desired size 0)."""
    max_size: int = limits.DEFAULT_TRAINIUM_NODES
    """Most nodes (set explicitly; aws-cdk would otherwise default it to the desired size)."""
    labels: Mapping[str, str] | None = None
    """Extra node labels (not ``ml-platform/node-role``, the construct's own). Default none."""
    ssm_access: bool = False
    """``AmazonSSMManagedInstanceCore`` on the default node role (break-glass Session Manager
    access). Default false."""
    nodegroup_name: str | None = None
    """Name of the node group. Default: CloudFormation picks one."""
    release_version: str | None = None
    """EKS AMI release of the nodes (``ReleaseVersion``, e.g. ``1.35.6-20260625``): pin the one
    whose Neuron driver matches the training image
    (:func:`~ml_platform.versions.neuron_release_version`). Default none: EKS's newest Neuron
    AMI at each create or update, so a replaced node may get another driver than its peer."""

    @property
    def launch_template_props(self) -> EfaLaunchTemplateProps:
        """The props of the node group's :class:`EfaLaunchTemplate`."""
        return EfaLaunchTemplateProps(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(EfaLaunchTemplateProps)}
        )

    def construct_problems(self) -> list[str]:
        """The rules of the construct-only props (the shared ones are the base's)."""
        errors = super().construct_problems()
        release = self.release_version
        if (
            release is not None
            and not Token.is_unresolved(release)
            and (
                release == NEURON_AMI_RELEASE_LATEST
                or not limits.AMI_RELEASE_VERSION.matches(release)
            )
        ):
            errors.append(  # worded here: a dict keyed release_version reads as a jsii struct
                f"release_version = {shown(release)}: expected an EKS AMI release version such as "
                "'1.35.6-20260625' (None: EKS's newest)"
            )
        # aws-cdk's eks_v2.Nodegroup (aws-cdk-lib 2.275.0, managed-nodegroup.js) checks only
        # desired <= max and min <= desired, once the launch template and role exist; the one
        # size rule (shared with GpuNodeGroup and the settings, limits.node_counts_ok) also
        # bounds max to 1..64 and reports before anything is built. The launch template is an
        # L1 (CfnLaunchTemplate) and the release version is passed through unchecked.
        sizes = {
            "min_size": self.min_size,
            "desired_size": self.desired_size,
            "max_size": self.max_size,
        }
        errors += size_problems(sizes, MAX_NODES)
        errors += reserved_label_problems(self.labels)
        return errors


class TrainiumNodeGroup(Construct):
    """EKS managed node group of Trainium instances in one subnet, with every EFA interface.

    AMI type ``AL2023_x86_64_NEURON`` (Neuron driver and EFA software preinstalled). Nodes are
    labelled ``ml-platform/node-role=trainium`` and tainted ``aws.amazon.com/neuron:NoSchedule``
    so only pods that ask for Trainium land there. The instance type lives in the launch
    template only (the node group rejects it next to the Neuron AMI type).

    Because the launch template sets its own security groups, EKS does not attach the cluster
    security group: this construct opens 443 and 1025-65535 between ``security_group`` and the
    cluster security group in both directions, and DNS from the nodes to the cluster group
    (CoreDNS runs on nodes in that group).

    Args:
        props: The value props (:class:`TrainiumNodeGroupProps`, each described on its field;
            capacity and placement group as in :class:`EfaLaunchTemplate`). A Capacity Block
            sets the node group's capacity type to ``CAPACITY_BLOCK``. Default: all defaults
            (2 trn1.32xlarge nodes).
        cluster: The cluster. Required.
        subnet: The one subnet, in an AZ that offers the instance type. Required.
        security_group: Group of the EFA interfaces; must allow all traffic to and from itself.
            Required.
        extra_security_groups: Groups of the primary interface only, such as
            ``LustreStorage.client_security_group``. Default none.
        node_role: Node IAM role. Default: a new role with the EKS worker and ECR pull-only
            policies (no CNI policy: the VPC CNI has its own Pod Identity role), plus SSM
            managed instance with ``props.ssm_access``.

    Updates: ``ForceUpdateEnabled`` false (an update never terminates a node whose pods a
    disruption budget protects) and node auto repair on
    (:data:`~ml_platform.constructs._nodegroup.FORCE_UPDATE`, ``NODE_AUTO_REPAIR``).

    Create order: the node group waits for every rule of its groups in its stack
    (``DependsOn``), EFA and control-plane rules included, even rules added after it.

    Attributes:
        launch_template: The :class:`EfaLaunchTemplate`.
        node_group: The ``eks_v2.Nodegroup``.
        role: The node role.
        connections: ``ec2.Connections`` of ``security_group`` (``IConnectable``), e.g. to
            open a file system to these nodes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: TrainiumNodeGroupProps = TrainiumNodeGroupProps(),
        cluster: eks.ICluster,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        extra_security_groups: Sequence[ec2.ISecurityGroup] = (),
        node_role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props, as checked.
        self.props = props
        check_props(self, props, TrainiumPropsBase, *props.construct_problems())
        if props.capacity_block_id is not None:
            self._warn_capacity_block(props.desired_size)

        self.connections = ec2.Connections(security_groups=[security_group, *extra_security_groups])
        self.launch_template = EfaLaunchTemplate(
            self,
            "LaunchTemplate",
            props=props.launch_template_props,
            security_groups=[security_group],
            extra_security_groups=extra_security_groups,
        )
        self.role: iam.IRole = node_role or new_node_role(
            self,
            "NodeRole",
            description="Trainium nodes of the EKS training cluster",
            ssm_access=props.ssm_access,
        )
        self.node_group = accelerator_node_group(
            self,
            kind=TRAINIUM,
            cluster=cluster,
            nodegroup_name=props.nodegroup_name,
            launch_template=self.launch_template.spec,
            capacity_type=self.launch_template.capacity_type,
            subnets=ec2.SubnetSelection(subnets=[subnet]),
            min_size=props.min_size,
            desired_size=props.desired_size,
            max_size=props.max_size,
            node_role=self.role,
            labels=props.labels,
            release_version=props.release_version,
        )
        self._wait_for_rules(cluster, security_group)

    def _warn_capacity_block(self, desired_size: int) -> None:
        if not Token.is_unresolved(desired_size) and desired_size > 0:
            # EKS user guide, "Create a managed node group with Capacity Blocks for ML"
            # (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html):
            # a node group on a Capacity Block is updated only at desired size 0, and EKS
            # scales it to 0 itself 40 minutes before the block ends.
            Annotations.of(self).add_warning_v2(
                CAPACITY_BLOCK_DESIRED_WARNING,
                f"{self.node.path}: desired_size={desired_size} on a Capacity Block. EKS "
                "updates a node group on a Capacity Block only at desired size 0 and scales it "
                "to 0 itself 40 minutes before the block ends: deploy at 0, scale up once the "
                "block is active, and scale back to 0 before changing the node group.",
            )

    def _wait_for_rules(self, cluster: eks.ICluster, security_group: ec2.ISecurityGroup) -> None:
        """The control-plane rules (one set per pair of groups, however many node groups share
        them: EC2 rejects a duplicate rule) and the create order on every rule."""
        rules = control_plane_rules(self, cluster.cluster_security_group, security_group)
        # Nodes must reach the API server to join.
        self.node_group.node.add_dependency(rules)
        # ... and need their EFA and Lustre rules from the start (see _create_order).
        after_security_group_rules(
            self.node_group.node.find_child("Resource"), self.launch_template.security_groups
        )
