"""Trainium capacity: EFA launch template, placement group, node group, security groups."""

from __future__ import annotations

import email
import email.message
import json
import shutil
import subprocess
from collections import Counter

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks

from ml_platform.app import new_app
from ml_platform.constructs._user_data import MEMLOCK_DROP_IN, MEMLOCK_SCRIPT, MIME_BOUNDARY
from ml_platform.constructs.trainium import (
    EfaLaunchTemplate,
    EfaLaunchTemplateProps,
    TrainiumNodeGroup,
    TrainiumNodeGroupProps,
    efa_network_interfaces,
)
from ml_platform.instances import TRAINIUM_INSTANCES
from tests.helpers.ec2_types import describe_instance_types
from tests.support import SynthesizedPlatform

TRAINING_SG_EXPORT = "TrainingNodes"  # part of the Network stack's export name of the node SG
TRAINIUM_STACK = "TrainiumNodes"  # stack of the Trainium node group
GPU_STACK = "GpuNodes"  # stack of the GPU node group
CLUSTER_SG = {"Fn::GetAtt": ["Cluster9EE0221C", "ClusterSecurityGroupId"]}


def _trainium_template(synth: SynthesizedPlatform) -> dict:
    (lt,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in synth.template_json(TRAINIUM_STACK)["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
        and "NetworkInterfaces" in r["Properties"]["LaunchTemplateData"]
    ]
    return lt


def _trainium_node_group(synth: SynthesizedPlatform) -> dict:
    (group,) = [
        r["Properties"]
        for r in synth.template_json(TRAINIUM_STACK)["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
        and r["Properties"]["AmiType"] == "AL2023_x86_64_NEURON"
    ]
    return group


def _is_training_sg(value: dict) -> bool:
    return TRAINING_SG_EXPORT in value.get("Fn::ImportValue", "")


LUSTRE_CLIENTS_EXPORT = "LustreClientSecurityGroup"  # part of the Storage stack's export name


def _is_lustre_clients(value: dict) -> bool:
    return LUSTRE_CLIENTS_EXPORT in value.get("Fn::ImportValue", "")


def _is_cluster_sg(value: dict) -> bool:
    """The cluster security group, in the cluster's stack or imported from it."""
    imported = value.get("Fn::ImportValue", "")
    return value == CLUSTER_SG or (
        imported.startswith("MlPlatform-TrainingCluster:")
        and "Cluster9EE0221CClusterSecurityGroupId" in imported
    )


@pytest.mark.parametrize(
    ("fixture", "instance_type", "cards"),
    [
        ("synth", "trn1.32xlarge", 8),
        ("trn1n", "trn1n.32xlarge", 16),
        ("trn2", "trn2.48xlarge", 16),
    ],
)
def test_one_efa_interface_per_network_card(
    request: pytest.FixtureRequest, fixture: str, instance_type: str, cards: int
) -> None:
    lt = _trainium_template(request.getfixturevalue(fixture))
    assert lt["InstanceType"] == instance_type
    interfaces = lt["NetworkInterfaces"]
    # ENA primary on card 0, then one EFA-only device per card: card 0 at device index 1,
    # the others at device index 0 (EC2 user guide, efa-acc-inst-types).
    layout = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces]
    assert layout == [(0, 0, "interface"), (0, 1, "efa-only")] + [
        (card, 0, "efa-only") for card in range(1, cards)
    ]
    # One VPC address per node (the ENA primary), every EFA device kept.
    assert sum(i["InterfaceType"] != "efa-only" for i in interfaces) == 1
    assert sum(i["InterfaceType"] == "efa-only" for i in interfaces) == cards
    assert all(i["DeleteOnTermination"] is True for i in interfaces)
    assert all("SubnetId" not in i for i in interfaces)
    # No public address on eth0, said explicitly (Control Tower CT.EC2.PR.9); left unset on the
    # efa-only interfaces, which take no IP address (the acknowledgment says why).
    assert [i.get("AssociatePublicIpAddress") for i in interfaces] == [False] + [None] * cards
    # The EFA group on every interface; the Lustre client group on the primary (IP) one only.
    primary, *efa_only = interfaces
    efa_group, clients = primary["Groups"]
    assert _is_training_sg(efa_group) and _is_lustre_clients(clients)
    assert all(i["Groups"] == [efa_group] for i in efa_only)
    # Groups sit on the interfaces only; EKS must be free to pick AMI, profile and subnet (and
    # writes the bootstrap: the template's user data is only a MIME part it merges, below).
    for absent in ("SecurityGroupIds", "SecurityGroups", "IamInstanceProfile", "ImageId"):
        assert absent not in lt


@pytest.mark.parametrize("fixture", ["synth", "trn1n", "trn2"])
def test_pods_request_exactly_the_efa_devices_a_node_has(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    """The training pods' vpc.amazonaws.com/efa limit (from the instance facts) equals the
    EFA devices the launch template gives a node: the efa-only interfaces; the ENA primary
    has no EFA device."""
    from ml_platform.instances import TRAINIUM_INSTANCES
    from ml_platform.k8s_names import EFA_RESOURCE
    from ml_platform.training.component import trainium_ddp

    synth = request.getfixturevalue(fixture)
    lt = _trainium_template(synth)
    efa_devices = sum(i["InterfaceType"] in ("efa", "efa-only") for i in lt["NetworkInterfaces"])
    instance = TRAINIUM_INSTANCES[lt["InstanceType"]]
    assert (
        efa_devices
        == instance.efa_interfaces
        == {"trn1.32xlarge": 8, "trn1n.32xlarge": 16, "trn2.48xlarge": 16}[lt["InstanceType"]]
    )
    (role,) = trainium_ddp(
        script="train.py", image="example.com/train:1", instance_type=lt["InstanceType"]
    ).roles
    assert role.resource.devices[EFA_RESOURCE] == efa_devices


@pytest.mark.parametrize("instance_type", sorted(TRAINIUM_INSTANCES))
def test_the_interfaces_fit_the_network_cards_ec2_describes(instance_type: str) -> None:
    """Every row's launch template interfaces against EC2's DescribeInstanceTypes (moto): each
    card takes the interfaces put on it and their type, the instance its total, and every EFA
    interface EC2 allows is used. trn2: card 0 takes 2 interfaces (ENA + efa-only), so the
    layout is the most that card allows; 17 of 32 interfaces in all."""
    network = describe_instance_types([instance_type])[instance_type]["NetworkInfo"]
    cards = {c["NetworkCardIndex"]: c for c in network["NetworkCards"]}
    interfaces = efa_network_interfaces(TRAINIUM_INSTANCES[instance_type].efa_interfaces, ["sg"])
    for i in interfaces:
        card = cards[i.network_card_index]
        assert i.interface_type in card["InterfaceTypes"], (instance_type, i.network_card_index)
    per_card = Counter(i.network_card_index for i in interfaces)
    assert sorted(per_card) == sorted(cards)  # every card used
    for index, used in per_card.items():
        assert used <= cards[index]["MaximumNetworkInterfaces"], (instance_type, index)
    assert len(interfaces) <= network["MaximumNetworkInterfaces"]
    efa = [i for i in interfaces if i.interface_type in ("efa", "efa-only")]
    assert len(efa) == network["EfaInfo"]["MaximumEfaInterfaces"]
    # The primary (ENA) interface is card 0's default one (EC2: DefaultNetworkCardIndex).
    assert (interfaces[0].network_card_index, interfaces[0].device_index) == (
        network["DefaultNetworkCardIndex"],
        0,
    )


@pytest.mark.parametrize("fixture", ["synth", "trn2"])
def test_launch_template_imdsv2_encrypted_gp3_and_cluster_placement(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    synth = request.getfixturevalue(fixture)
    lt = _trainium_template(synth)
    assert lt["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    (root,) = lt["BlockDeviceMappings"]
    assert root["Ebs"] == {
        "VolumeSize": synth.platform.settings.trainium.root_volume_gib,
        "VolumeType": "gp3",
        # a new node unpacks the multi-GB training image here: not gp3's 3000 / 125 MiB/s
        "Iops": 16000,
        "Throughput": 1000,
        "Encrypted": True,
        "DeleteOnTermination": True,
    }
    # gp3 (EBS User Guide, "General Purpose SSD volumes"): at most 16000 IOPS and 1000 MiB/s
    # in every region, and at most 0.25 MiB/s per provisioned IOPS.
    assert root["Ebs"]["Throughput"] <= root["Ebs"]["Iops"] / 4
    resources = synth.template_json(TRAINIUM_STACK)["Resources"]
    (pg_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::PlacementGroup"]
    assert resources[pg_id]["Properties"]["Strategy"] == "cluster"
    assert lt["Placement"] == {"GroupName": {"Fn::GetAtt": [pg_id, "GroupName"]}}


@pytest.mark.parametrize("fixture", ["synth", "trn2"])
def test_node_group_is_neuron_ami_in_the_trainium_subnet_tainted_and_sized(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    synth = request.getfixturevalue(fixture)
    group = _trainium_node_group(synth)
    settings = synth.platform.settings
    assert "InstanceTypes" not in group  # the launch template carries it
    assert group["LaunchTemplate"]["Version"]["Fn::GetAtt"][1] == "LatestVersionNumber"
    (subnet,) = group["Subnets"]
    expected = synth.platform.network.trainium_subnet
    assert expected.availability_zone == settings.network.trainium_az
    assert subnet == cdk.Stack.of(synth.platform.training_cluster).resolve(expected.subnet_id)
    assert group["Labels"] == {"ml-platform/node-role": "trainium"}
    assert group["Taints"] == [
        {"Key": "aws.amazon.com/neuron", "Value": "true", "Effect": "NO_SCHEDULE"}
    ]
    assert group["ScalingConfig"] == {
        "MinSize": settings.trainium.min_nodes,
        "DesiredSize": settings.trainium.nodes,
        "MaxSize": settings.trainium.max_nodes,
    }


def _policy_arn(name: str) -> dict:
    """An AWS managed policy's ARN as aws-cdk writes it (partition from the stack)."""
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{name}"]]}


NODE_POLICY_ARNS = [
    _policy_arn("AmazonEKSWorkerNodePolicy"),
    _policy_arn("AmazonEC2ContainerRegistryPullOnly"),
]
SSM_POLICY_ARN = _policy_arn("AmazonSSMManagedInstanceCore")


def _node_role_arns(synth: SynthesizedPlatform) -> dict[str, list]:
    """Each node group's role's managed policy ARNs, by stack, for the three node groups
    (Trainium, system, GPU)."""
    out = {}
    for short in (TRAINIUM_STACK, GPU_STACK, "TrainingCluster"):
        resources = synth.template_json(short)["Resources"]
        groups = [g for g in resources.values() if g["Type"] == "AWS::EKS::Nodegroup"]
        # The training cluster's system and training-helper groups share the system role.
        (role_id,) = {g["Properties"]["NodeRole"]["Fn::GetAtt"][0] for g in groups}
        out[short] = resources[role_id]["Properties"]["ManagedPolicyArns"]
    return out


def test_node_roles_have_worker_and_ecr_pull_only_no_ssm_no_cni(
    synth: SynthesizedPlatform,
) -> None:
    """By default every node group's role (Trainium, system, GPU) has exactly the worker and
    ECR pull-only policies: no AmazonEKS_CNI_Policy (the VPC CNI has a Pod Identity role of its
    own) and no AmazonSSMManagedInstanceCore (Session Manager is break-glass, off until
    cluster.node_ssm_access turns it on)."""
    assert _node_role_arns(synth) == {
        TRAINIUM_STACK: NODE_POLICY_ARNS,
        GPU_STACK: NODE_POLICY_ARNS,
        "TrainingCluster": NODE_POLICY_ARNS,
    }


def _rules(synth: SynthesizedPlatform, stack: str, rtype: str) -> list[dict]:
    return [
        r["Properties"]
        for r in synth.template_json(stack)["Resources"].values()
        if r["Type"] == rtype
    ]


def test_node_security_group_allows_itself_and_the_control_plane_both_ways(
    synth: SynthesizedPlatform,
) -> None:
    self_rules = [
        r
        for r in _rules(synth, "Network", "AWS::EC2::SecurityGroupIngress")
        if r["IpProtocol"] == "-1"
        and r["GroupId"] == r["SourceSecurityGroupId"]
        and r["GroupId"]["Fn::GetAtt"][0].startswith(TRAINING_SG_EXPORT)
    ]
    assert len(self_rules) == 1
    ingress = _rules(synth, TRAINIUM_STACK, "AWS::EC2::SecurityGroupIngress")

    def ports(rules):
        return {(r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in rules}

    from_cluster = [
        r
        for r in ingress
        if _is_training_sg(r["GroupId"]) and _is_cluster_sg(r["SourceSecurityGroupId"])
    ]
    to_cluster = [
        r
        for r in ingress
        if _is_cluster_sg(r["GroupId"]) and _is_training_sg(r["SourceSecurityGroupId"])
    ]
    assert ports(from_cluster) == {("tcp", 443, 443), ("tcp", 1025, 65535)}
    assert ports(to_cluster) == {
        ("tcp", 443, 443),
        ("tcp", 1025, 65535),
        ("tcp", 53, 53),
        ("udp", 53, 53),
    }
    # Both groups allow all outbound traffic, so the return direction needs no egress rules
    # towards the control plane.
    network = synth.template_json("Network")["Resources"]
    (node_sg,) = [
        r
        for k, r in network.items()
        if r["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("TrainingNodes")
    ]
    assert node_sg["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "Allow all outbound traffic by default",
            "IpProtocol": "-1",
        }
    ]


def test_node_security_group_has_an_explicit_all_traffic_egress_rule_to_itself(
    synth: SynthesizedPlatform,
) -> None:
    """EFA needs egress to the group itself; the 0.0.0.0/0 rule does not carry EFA."""
    network = synth.template_json("Network")["Resources"]
    (sg_id,) = [
        k
        for k, r in network.items()
        if r["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("TrainingNodes")
    ]
    egress = [
        r["Properties"] for r in network.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"
    ]
    itself = {"Fn::GetAtt": [sg_id, "GroupId"]}
    assert egress == [
        {
            "GroupId": itself,
            "IpProtocol": "-1",
            "DestinationSecurityGroupId": itself,
            "Description": "EFA and node-to-node traffic",
        }
    ]
    # No other stack adds a second copy of the rule.
    for short in ("TrainingCluster", TRAINIUM_STACK):
        for rule in _rules(synth, short, "AWS::EC2::SecurityGroupEgress"):
            assert not (
                _is_training_sg(rule["GroupId"])
                and _is_training_sg(rule.get("DestinationSecurityGroupId", {}))
            )


def test_node_group_waits_for_its_security_group_rules(synth: SynthesizedPlatform) -> None:
    resources = synth.template_json(TRAINIUM_STACK)["Resources"]
    (group_id,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::EKS::Nodegroup"
        and r["Properties"]["AmiType"] == "AL2023_x86_64_NEURON"
    ]
    rules = {k for k in resources if k.startswith("TrainiumControlPlaneRules")}
    assert len(rules) == 6 and rules <= set(resources[group_id]["DependsOn"])


def test_trainium_nodes_and_system_nodes_reach_lustre(synth: SynthesizedPlatform) -> None:
    """Only the Lustre client group reaches the file system (issue 22: FSx has no client
    authentication), and only the nodes that mount it carry that group."""
    lustre_ports = {(988, 988), (1018, 1023)}
    resources = synth.template_json("Storage")["Resources"]
    lustre = {"Fn::GetAtt": ["LustreSecurityGroupA46A9855", "GroupId"]}
    clients = {"Fn::GetAtt": ["LustreClientSecurityGroup574AE97A", "GroupId"]}
    rules = {
        (
            r["Type"].rsplit("::", 1)[1],
            json.dumps(r["Properties"]["GroupId"]),
            json.dumps(
                r["Properties"].get("SourceSecurityGroupId")
                or r["Properties"].get("DestinationSecurityGroupId")
            ),
            r["Properties"]["FromPort"],
            r["Properties"]["ToPort"],
        )
        for r in resources.values()
        if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
    }
    expected = set()
    for low, high in lustre_ports:
        for kind in ("SecurityGroupIngress", "SecurityGroupEgress"):
            for group, peer in ((lustre, lustre), (lustre, clients), (clients, lustre)):
                expected.add((kind, json.dumps(group), json.dumps(peer), low, high))
    # aws-cdk's L2 file system adds its own self ingress on 988-1023.
    expected.add(("SecurityGroupIngress", json.dumps(lustre), json.dumps(lustre), 988, 1023))
    assert rules == expected
    for r in resources.values():
        if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            assert r["Properties"]["IpProtocol"] == "tcp"
            assert "CidrIp" not in r["Properties"]
    # The client group has no inline rule either (allow_all_outbound=False: its explicit
    # egress rules to the file system replace EC2's implicit allow-all, as for the file
    # system's own group).
    group = resources[clients["Fn::GetAtt"][0]]["Properties"]
    assert "SecurityGroupEgress" not in group and "SecurityGroupIngress" not in group
    # Trainium nodes carry it on the primary interface (test above); the system nodes (the
    # dataset job, TensorBoard) next to the cluster group; nothing in the cluster's stack
    # opens the file system to the cluster group any more.
    (system,) = [
        r["Properties"]["LaunchTemplateData"]
        for k, r in synth.template_json("TrainingCluster")["Resources"].items()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and k.startswith("ClusterSystemLaunchTemplate")
    ]
    cluster_group, system_clients = system["SecurityGroupIds"]
    assert cluster_group == CLUSTER_SG and _is_lustre_clients(system_clients)
    for stack in ("TrainingCluster", TRAINIUM_STACK, GPU_STACK):
        for rtype in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            assert not [r for r in _rules(synth, stack, rtype) if "Lustre" in json.dumps(r)]
    (gpu,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in synth.template_json(GPU_STACK)["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    assert "SecurityGroupIds" not in gpu  # GPU nodes: the cluster group only, no Lustre


def test_no_cluster_rule_is_open_to_the_world(synth: SynthesizedPlatform) -> None:
    for short in ("TrainingCluster", TRAINIUM_STACK, GPU_STACK):
        for rtype in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            for rule in _rules(synth, short, rtype):
                assert "CidrIp" not in rule and "CidrIpv6" not in rule


def test_no_neuron_plugin_from_aws_cdk_in_the_construct_tree(synth: SynthesizedPlatform) -> None:
    # aws-cdk adds its bundled plugin as the cluster child "NeuronDevicePlugin".
    cluster = synth.platform.training_cluster.eks.cluster
    assert cluster.node.try_find_child("NeuronDevicePlugin") is None
    # The platform's: Neuron's Helm chart (add_helm_chart's child "chart-<id>").
    assert cluster.node.try_find_child("chart-Neuron") is not None


# --- construct-level validation ------------------------------------------------------------


def _stack() -> tuple[cdk.Stack, ec2.Vpc, ec2.SecurityGroup]:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    return stack, vpc, ec2.SecurityGroup(stack, "Nodes", vpc=vpc)


def _imported_cluster(stack: cdk.Stack, vpc: ec2.Vpc) -> eks.ICluster:
    """An existing cluster, as a user's app imports one."""
    return eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name="c",
        vpc=vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
    )


def test_launch_template_validation_reports_every_problem() -> None:
    stack, _, sg = _stack()
    with pytest.raises(ValueError) as info:
        EfaLaunchTemplate(
            stack,
            "Lt",
            security_groups=[],
            props=EfaLaunchTemplateProps(instance_type="p4d.24xlarge", root_volume_gib=50),
        )
    assert str(info.value) == (
        "S/Lt: instance_type = 'p4d.24xlarge': expected one of ['trn1.32xlarge', "
        "'trn1n.32xlarge', 'trn2.48xlarge', 'trn2u.48xlarge']; root_volume_gib = 50: expected "
        "100 to 16384; security_groups=[]: expected at least one security group"
    )
    with pytest.raises(
        ValueError, match=r"efa_interfaces = 9: trn1.32xlarge has 8 network cards; expected 1 to 8"
    ):
        EfaLaunchTemplate(
            stack, "Lt2", security_groups=[sg], props=EfaLaunchTemplateProps(efa_interfaces=9)
        )
    EfaLaunchTemplate(
        stack,
        "Lt3",
        security_groups=[sg],
        props=EfaLaunchTemplateProps(instance_type="trn1n.32xlarge", efa_interfaces=16),
    )


def test_node_group_validation_reports_every_problem_before_creating_anything() -> None:
    stack, vpc, sg = _stack()
    cluster = _imported_cluster(stack, vpc)
    with pytest.raises(ValueError) as info:
        TrainiumNodeGroup(
            stack,
            "Trn",
            cluster=cluster,
            subnet=vpc.private_subnets[0],
            security_group=sg,
            props=TrainiumNodeGroupProps(
                instance_type="trn1.32xlarge",
                efa_interfaces=12,
                min_size=3,
                desired_size=2,
                max_size=70,
            ),
        )
    message = str(info.value)
    assert "efa_interfaces = 12" in message
    assert "min_size = 3, desired_size = 2, max_size = 70: expected" in message
    assert "<= 64" in message
    assert stack.node.try_find_child("Trn").node.children == []
    with pytest.raises(ValueError, match=r"max_size >= 1"):
        TrainiumNodeGroup(
            stack,
            "Zero",
            cluster=cluster,
            subnet=vpc.private_subnets[0],
            security_group=sg,
            props=TrainiumNodeGroupProps(min_size=0, desired_size=0, max_size=0),
        )


def test_a_users_security_group_gets_the_efa_self_rules_once() -> None:
    """A group the user passes (allow_all_outbound=True, where CDK drops add_egress_rule(self))
    gets an explicit all-traffic egress rule to itself, and one ingress rule from itself, even
    when two launch templates and the platform's helper all touch it."""
    from aws_cdk.assertions import Template

    from ml_platform.constructs.network import allow_efa_within

    stack, vpc, sg = _stack()
    other = ec2.SecurityGroup(stack, "Other", vpc=vpc, allow_all_outbound=False)
    EfaLaunchTemplate(stack, "Lt", security_groups=[sg, other])
    EfaLaunchTemplate(
        stack,
        "Lt2",
        security_groups=[sg],
        props=EfaLaunchTemplateProps(instance_type="trn1n.32xlarge"),
    )
    allow_efa_within(sg)
    resources = Template.from_stack(stack).to_json()["Resources"]
    ids = {
        name: stack.resolve(group.node.default_child.logical_id)
        for name, group in (("sg", sg), ("other", other))
    }
    egress = sorted(
        (
            r["Properties"]
            for r in resources.values()
            if r["Type"] == "AWS::EC2::SecurityGroupEgress"
        ),
        key=lambda p: p["GroupId"]["Fn::GetAtt"][0],
    )
    assert egress == sorted(
        (
            {
                "GroupId": {"Fn::GetAtt": [logical, "GroupId"]},
                "IpProtocol": "-1",
                "DestinationSecurityGroupId": {"Fn::GetAtt": [logical, "GroupId"]},
                "Description": "EFA and node-to-node traffic",
            }
            for logical in ids.values()
        ),
        key=lambda p: p["GroupId"]["Fn::GetAtt"][0],
    )
    ingress = [
        r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
    ]
    assert sorted(
        (p["GroupId"]["Fn::GetAtt"][0], p["SourceSecurityGroupId"]["Fn::GetAtt"][0])
        for p in ingress
    ) == sorted((logical, logical) for logical in ids.values())
    assert all(p["IpProtocol"] == "-1" for p in ingress)


def test_capacity_reservation_and_capacity_block_in_the_launch_template() -> None:
    from aws_cdk.assertions import Template

    stack, vpc, sg = _stack()
    cluster = _imported_cluster(stack, vpc)
    odcr = EfaLaunchTemplate(
        stack,
        "Odcr",
        security_groups=[sg],
        props=EfaLaunchTemplateProps(capacity_reservation_id="cr-0123456789abcdef0"),
    )
    assert odcr.capacity_type is None
    TrainiumNodeGroup(
        stack,
        "Block",
        cluster=cluster,
        subnet=vpc.private_subnets[0],
        security_group=sg,
        props=TrainiumNodeGroupProps(
            capacity_block_id="cr-02168da1478b509e0", min_size=0, desired_size=0, max_size=2
        ),
    )
    resources = Template.from_stack(stack).to_json()["Resources"]
    templates = {
        k: r["Properties"]["LaunchTemplateData"]
        for k, r in resources.items()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    }
    (odcr_data,) = [d for k, d in templates.items() if k.startswith("Odcr")]
    (block_data,) = [d for k, d in templates.items() if k.startswith("Block")]
    assert odcr_data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "InstanceMarketOptions" not in odcr_data
    assert block_data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-02168da1478b509e0"}
    }
    assert block_data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    (group,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EKS::Nodegroup"]
    assert group["CapacityType"] == "CAPACITY_BLOCK"
    assert group["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 0, "MaxSize": 2}


def test_capacity_validation_names_the_prop() -> None:
    stack, _, sg = _stack()
    with pytest.raises(ValueError) as info:
        EfaLaunchTemplate(
            stack,
            "Lt",
            security_groups=[sg],
            props=EfaLaunchTemplateProps(
                capacity_reservation_id="cb-123", capacity_block_id="cb-4"
            ),
        )
    assert str(info.value) == (
        "S/Lt: capacity_reservation_id = 'cb-123': expected a capacity reservation id such as "
        "'cr-0123456789abcdef0'; capacity_block_id = 'cb-4': expected a capacity reservation id "
        "such as 'cr-0123456789abcdef0'"
    )
    with pytest.raises(ValueError) as info:
        EfaLaunchTemplate(
            stack,
            "Lt2",
            security_groups=[sg],
            props=EfaLaunchTemplateProps(
                capacity_reservation_id="cr-0123456789abcdef0",
                capacity_block_id="cr-02168da1478b509e0",
            ),
        )
    assert str(info.value) == (
        "S/Lt2: capacity_reservation_id = 'cr-0123456789abcdef0', capacity_block_id = "
        "'cr-02168da1478b509e0': expected at most one"
    )


@pytest.mark.parametrize("instance_type", ["trn1.32xlarge", "trn2.48xlarge", "trn2u.48xlarge"])
def test_placement_group_only_without_a_reservation_or_the_reservations_own(
    instance_type: str,
) -> None:
    """An ODCR serves a cluster placement group only if it was created in it, and a Capacity
    Block places its instances itself (EC2 user guide cr-cpg; eksctl#7949;
    aws-parallelcluster#6311): no new placement group next to a reservation, whatever the
    Trainium type (Trn2 is sold largely through Capacity Blocks and reservations)."""
    from aws_cdk.assertions import Template

    stack, _, sg = _stack()
    for name, capacity in (
        ("OnDemand", {}),
        ("Odcr", {"capacity_reservation_id": "cr-0123456789abcdef0"}),
        ("Block", {"capacity_block_id": "cr-02168da1478b509e0"}),
        (
            "OdcrInItsGroup",
            {"capacity_reservation_id": "cr-0123456789abcdef0", "placement_group": "odcr-pg"},
        ),
    ):
        EfaLaunchTemplate(
            stack,
            name,
            security_groups=[sg],
            props=EfaLaunchTemplateProps(instance_type=instance_type, **capacity),
        )
    resources = Template.from_stack(stack).to_json()["Resources"]
    placement = {
        k.removesuffix("8A0B4F5E"): r["Properties"]["LaunchTemplateData"].get("Placement")
        for k, r in resources.items()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    }
    assert {
        r["Properties"]["LaunchTemplateData"]["InstanceType"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    } == {instance_type}
    (new_group,) = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::PlacementGroup"]
    assert new_group.startswith("OnDemandPlacementGroup")
    by_name = {
        next(n for n in ("OnDemand", "OdcrInItsGroup", "Odcr", "Block") if k.startswith(n)): v
        for k, v in placement.items()
    }
    assert by_name == {
        "OnDemand": {"GroupName": {"Fn::GetAtt": [new_group, "GroupName"]}},
        "Odcr": None,
        "Block": None,
        "OdcrInItsGroup": {"GroupName": "odcr-pg"},
    }
    with pytest.raises(ValueError) as info:
        EfaLaunchTemplate(
            stack,
            "BlockInGroup",
            security_groups=[sg],
            props=EfaLaunchTemplateProps(
                instance_type=instance_type,
                capacity_block_id="cr-02168da1478b509e0",
                placement_group="pg",
            ),
        )
    assert str(info.value) == (
        "S/BlockInGroup: placement_group = 'pg', capacity_block_id = 'cr-02168da1478b509e0': a "
        "Capacity Block places its instances itself; expected no placement group"
    )
    with pytest.raises(ValueError) as info:
        EfaLaunchTemplate(
            stack,
            "OwnGroup",
            security_groups=[sg],
            props=EfaLaunchTemplateProps(instance_type=instance_type, placement_group="pg"),
        )
    assert str(info.value) == (
        "S/OwnGroup: placement_group = 'pg': names the group a capacity reservation was created "
        "in, so it needs capacity_reservation_id (without one the platform makes its own cluster "
        "placement group)"
    )


def test_platform_on_a_capacity_block_has_no_placement_group(trn1n: SynthesizedPlatform) -> None:
    resources = trn1n.template_json(TRAINIUM_STACK)["Resources"]
    assert not [r for r in resources.values() if r["Type"] == "AWS::EC2::PlacementGroup"]
    assert "Placement" not in _trainium_template(trn1n)


def test_capacity_block_with_nodes_warns_why() -> None:
    from aws_cdk.assertions import Annotations as AssertAnnotations
    from aws_cdk.assertions import Match

    stack, vpc, sg = _stack()
    cluster = _imported_cluster(stack, vpc)
    for name, desired in (("AtZero", 0), ("Running", 2)):
        TrainiumNodeGroup(
            stack,
            name,
            cluster=cluster,
            subnet=vpc.private_subnets[0],
            security_group=sg,
            props=TrainiumNodeGroupProps(
                capacity_block_id="cr-02168da1478b509e0",
                min_size=0,
                desired_size=desired,
                max_size=2,
            ),
        )
    warnings = AssertAnnotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("Capacity Block")
    )
    assert [w.id for w in warnings] == ["/S/Running"]
    (text,) = [w.entry.data for w in warnings]
    assert "desired_size=2 on a Capacity Block" in text
    assert "only at desired size 0" in text and "40 minutes before the block ends" in text


def test_node_ssm_access_on_gives_every_node_role_exactly_the_ssm_policy(
    trn1n: SynthesizedPlatform,
) -> None:
    """Break-glass: cluster.node_ssm_access: true adds AmazonSSMManagedInstanceCore, and only
    it, to the Trainium, system and GPU node roles (an in-place update of each role)."""
    with_ssm = [*NODE_POLICY_ARNS, SSM_POLICY_ARN]
    assert _node_role_arns(trn1n) == {
        TRAINIUM_STACK: with_ssm,
        GPU_STACK: with_ssm,
        "TrainingCluster": with_ssm,
    }


def test_a_trainium_node_group_built_alone_has_no_ssm_policy() -> None:
    """The construct is secure by default too: its own node role gets no Session Manager
    policy unless ssm_access=True."""
    from aws_cdk.assertions import Template

    stack, vpc, sg = _stack()
    cluster = _imported_cluster(stack, vpc)
    groups = {
        ssm: TrainiumNodeGroup(
            stack,
            f"Trn{ssm}",
            cluster=cluster,
            subnet=vpc.private_subnets[0],
            security_group=sg,
            props=TrainiumNodeGroupProps(**({} if ssm is None else {"ssm_access": ssm})),
        )
        for ssm in (None, True)
    }
    resources = Template.from_stack(stack).to_json()["Resources"]
    arns = {
        ssm: resources[stack.resolve(g.role.node.default_child.logical_id)]["Properties"][
            "ManagedPolicyArns"
        ]
        for ssm, g in groups.items()
    }
    assert arns == {None: NODE_POLICY_ARNS, True: [*NODE_POLICY_ARNS, SSM_POLICY_ARN]}


def test_the_public_ip_field_is_documented_for_eth0_as_the_template_sets_it() -> None:
    """Taken from cfn-lint's bundled provider schema of AWS::EC2::LaunchTemplate (AWS's own):
    AssociatePublicIpAddress is a boolean documented for eth0 (device index 0), and efa-only
    interfaces support no IP address, which is why only the primary interface carries it."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    from ml_platform.constructs.trainium import NO_PUBLIC_IP_REASON, PRIMARY_PUBLIC_IP

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(
        "us-west-2", "AWS::EC2::LaunchTemplate"
    ).schema
    interface = schema["definitions"]["NetworkInterface"]["properties"]
    public_ip = interface["AssociatePublicIpAddress"]
    assert public_ip["type"] == "boolean"
    assert public_ip["description"].startswith("Associates a public IPv4 address with eth0 ")
    device, kind = interface["DeviceIndex"], interface["InterfaceType"]
    assert "primary network interface has a device index of 0" in device["description"]
    assert "EFA-only network interfaces do not support IP addresses" in kind["description"]
    assert PRIMARY_PUBLIC_IP is False
    assert "false on the primary interface" in NO_PUBLIC_IP_REASON


# --- locked memory: the launch template's user data -----------------------------------------


def _user_data_parts(synth: SynthesizedPlatform) -> list[email.message.Message]:
    """The MIME parts of the Trainium launch template's user data, parsed by the standard
    library's MIME parser (as cloud-init parses it)."""
    lt = _trainium_template(synth)
    document = email.message_from_string(lt["UserData"]["Fn::Base64"])
    assert document.get_content_type() == "multipart/mixed"
    assert document.get_boundary() == MIME_BOUNDARY
    return [part for part in document.walk() if not part.is_multipart()]


def test_user_data_is_one_shell_script_part_that_eks_can_merge(synth: SynthesizedPlatform) -> None:
    """EKS merges a launch template's user data with its nodeadm NodeConfig only when it is
    MIME multi-part (EKS user guide, launch templates); a shell-script part runs in
    cloud-final, before nodeadm-run starts containerd (amazon-eks-ami systemd units)."""
    (part,) = _user_data_parts(synth)
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_payload() == MEMLOCK_SCRIPT


def test_user_data_script_raises_containerds_memlock_then_reloads_and_restarts(
    synth: SynthesizedPlatform, tmp_path
) -> None:
    """Observed: the script, run with bash, writes a drop-in that systemd's own parser
    (``systemd-analyze verify``) reads without complaint, then reloads systemd and restarts a
    running containerd, in that order. Changed from the node only: /etc/systemd/system is a
    folder of the test, and ``systemctl`` a stand-in that records its arguments."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze (systemd) checks the drop-in")
    (part,) = _user_data_parts(synth)
    units = tmp_path / "system"
    script = part.get_payload().replace("/etc/systemd/system", str(units))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "systemctl").chmod(0o755)
    run = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert calls.read_text().splitlines() == ["daemon-reload", "try-restart containerd.service"]
    drop_in = units / "containerd.service.d" / MEMLOCK_DROP_IN.rsplit("/", 1)[1]
    assert drop_in.read_text() == "[Service]\nLimitMEMLOCK=infinity\n"
    # systemd's parser on containerd.service with the drop-in (a stand-in unit file: the
    # AMI's own has no LimitMEMLOCK, and AL2023's 00-runtime-slice.conf only a Slice).
    (units / "containerd.service").write_text("[Service]\nExecStart=/usr/bin/containerd\n")

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [analyze, "verify", str(units / "containerd.service")],
            env={"SYSTEMD_UNIT_PATH": f"{units}:", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = verify()
    assert "LimitMEMLOCK" not in ok.stderr and "drop-in" not in ok.stderr, ok.stderr
    # ... which does flag a limit it cannot parse, so the check above means something.
    drop_in.write_text("[Service]\nLimitMEMLOCK=infinty\n")
    bad = verify()
    assert "Failed to parse resource value" in bad.stderr


# --- updates and repairs ---------------------------------------------------------------------


def test_node_groups_never_force_an_update_and_repair_themselves(
    synth: SynthesizedPlatform,
) -> None:
    """aws-cdk's default ForceUpdateEnabled (true) terminates nodes a disruption budget
    protects on any template or AMI change: both Trainium nodes of a running job. Every group
    has EKS node auto repair on; the accelerator groups never force an update."""
    groups = {
        stack: r["Properties"]
        for stack in (TRAINIUM_STACK, GPU_STACK, "TrainingCluster")
        for r in synth.template_json(stack)["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    }
    assert set(groups) == {TRAINIUM_STACK, GPU_STACK, "TrainingCluster"}
    for stack, group in groups.items():
        assert group["NodeRepairConfig"] == {"Enabled": True}, stack
    for stack in (TRAINIUM_STACK, GPU_STACK):
        assert groups[stack]["ForceUpdateEnabled"] is False, stack


@pytest.mark.parametrize("fixture", ["synth", "trn2"])
def test_trainium_node_group_pins_the_neuron_ami_release(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    group = _trainium_node_group(request.getfixturevalue(fixture))
    assert group["ReleaseVersion"] == "1.35.4-20260505"  # NEURON_STACKS, Kubernetes 1.35


def test_release_version_prop_is_validated() -> None:
    app = new_app()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="c", vpc=vpc)
    with pytest.raises(ValueError, match=r"release_version = 'latest': expected an EKS AMI"):
        TrainiumNodeGroup(
            stack,
            "Trn",
            cluster=cluster,
            subnet=vpc.private_subnets[0],
            security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
            props=TrainiumNodeGroupProps(release_version="latest"),
        )


def test_trn2_nodes_differ_from_trn1_only_by_instance_type_and_interfaces(
    synth: SynthesizedPlatform, trn2: SynthesizedPlatform
) -> None:
    """The Trainium nodes stack of a trn2.48xlarge app is the trn1.32xlarge one with the
    launch template's instance type and its 16 EFA interfaces instead of 8: same placement
    group, node group, AMI release, role, rules, volume and user data (the row is the only
    difference; no Trn2 special case elsewhere)."""
    from tests.support import normalized

    trn1_stack = normalized(synth.template_json(TRAINIUM_STACK))
    trn2_stack = normalized(trn2.template_json(TRAINIUM_STACK))
    (lt_id,) = [
        k for k, r in trn1_stack["Resources"].items() if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    expected = json.loads(json.dumps(trn1_stack))
    data = expected["Resources"][lt_id]["Properties"]["LaunchTemplateData"]
    primary, card0_efa, other = data["NetworkInterfaces"][:3]
    assert data["InstanceType"] == "trn1.32xlarge" and len(data["NetworkInterfaces"]) == 9
    data["InstanceType"] = "trn2.48xlarge"
    data["NetworkInterfaces"] = [primary, card0_efa] + [
        {**other, "NetworkCardIndex": card} for card in range(1, 16)
    ]
    assert trn2_stack == expected


def test_the_props_object_holds_every_rule_and_reports_them_at_once() -> None:
    """TrainiumNodeGroup's rules live with its props: the shared ones in the base the settings
    inherit, the node group's own in construct_problems(); checked without building anything."""
    from ml_platform.constructs._props import shared_problems
    from ml_platform.props.trainium import TrainiumPropsBase

    bad = TrainiumNodeGroupProps(
        instance_type="trn1.2xlarge",
        min_size=3,
        desired_size=2,
        placement_group="pg",
        release_version="latest",
        labels={"ml-platform/node-role": "x"},
    )
    assert [p.split(" =", 1)[0] for p in shared_problems(bad, TrainiumPropsBase)] == [
        "instance_type"
    ]
    assert [p.split(" = ", 1)[0] for p in bad.construct_problems()] == [
        "release_version",
        "min_size",
        "labels",
    ]
    ok = TrainiumNodeGroupProps()
    assert ok.construct_problems() == [] and shared_problems(ok, TrainiumPropsBase) == []


def test_the_launch_template_props_hold_its_rules_and_the_node_group_reuses_them() -> None:
    """EfaLaunchTemplate's rules live with its props, checked without building anything; the
    node group's props check their launch template part through the same object."""
    bad = EfaLaunchTemplateProps(instance_type="trn1.32xlarge", efa_interfaces=9)
    assert bad.construct_problems() == [
        "efa_interfaces = 9: trn1.32xlarge has 8 network cards; expected 1 to 8"
    ]
    assert EfaLaunchTemplateProps().construct_problems() == []
    group = TrainiumNodeGroupProps(efa_interfaces=9, capacity_block_id="cr-02168da1478b509e0")
    assert group.launch_template_props == EfaLaunchTemplateProps(
        efa_interfaces=9, capacity_block_id="cr-02168da1478b509e0"
    )
    assert group.construct_problems() == group.launch_template_props.construct_problems()
    stack, _, sg = _stack()
    built = EfaLaunchTemplate(
        stack, "Lt", security_groups=[sg], props=EfaLaunchTemplateProps(efa_interfaces=4)
    )
    assert built.props == EfaLaunchTemplateProps(efa_interfaces=4) and built.efa_interfaces == 4
