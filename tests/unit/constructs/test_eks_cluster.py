"""The EKS cluster: control plane settings, access, add-ons, system nodes, outputs."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template

from ml_platform._settings_parse import Problem
from ml_platform.app import new_app
from ml_platform.constructs._props import shared_problems
from ml_platform.constructs.addons import PlatformAddons, PlatformAddonsProps
from ml_platform.constructs.eks_cluster import (
    EKS_VERSIONS,
    KUBECTL_LAYERS,
    OPEN_TO_WORLD_WARNING,
    TrainingEksCluster,
    TrainingEksClusterProps,
)
from ml_platform.limits import shown
from ml_platform.props.cluster import TrainingEksClusterPropsBase
from ml_platform.versions import EKS_ADDON_VERSIONS, KUBERNETES_VERSIONS
from tests.support import GRANTS_ONLY_FOR_AWS_RESOURCES, SynthesizedPlatform

ADDONS = {
    "vpc-cni",
    "coredns",
    "kube-proxy",
    "eks-pod-identity-agent",
    "aws-fsx-csi-driver",
    "amazon-cloudwatch-observability",
    "eks-node-monitoring-agent",
}


def _resources(synth: SynthesizedPlatform, rtype: str) -> dict[str, dict]:
    tpl = synth.template_json("TrainingCluster")
    return {k: r for k, r in tpl["Resources"].items() if r["Type"] == rtype}


def _only(synth: SynthesizedPlatform, rtype: str) -> tuple[str, dict]:
    (item,) = _resources(synth, rtype).items()
    return item


def test_cluster_is_native_eks_with_managed_node_groups_not_auto_mode(
    synth: SynthesizedPlatform,
) -> None:
    _, cluster = _only(synth, "AWS::EKS::Cluster")
    props = cluster["Properties"]
    assert props["Name"] == "ml-platform"
    assert props["Version"] == "1.35"
    assert props["ComputeConfig"] == {"Enabled": False}
    assert props["AccessConfig"]["AuthenticationMode"] == "API"
    # Pinned managed add-ons install the networking components instead.
    assert props["BootstrapSelfManagedAddons"] is False
    # Only the system and training-helper node groups: the Trainium and GPU node groups have
    # stacks of their own.
    groups = _resources(synth, "AWS::EKS::Nodegroup").values()
    assert [g["Properties"]["AmiType"] for g in groups] == ["AL2023_x86_64_STANDARD"] * 2
    # Nothing Auto Mode or the legacy cluster provider would add.
    assert not _resources(synth, "Custom::AWSCDK-EKS-Cluster")


def test_control_plane_logs_every_type(synth: SynthesizedPlatform) -> None:
    _, cluster = _only(synth, "AWS::EKS::Cluster")
    types = [t["Type"] for t in cluster["Properties"]["Logging"]["ClusterLogging"]["EnabledTypes"]]
    assert sorted(types) == sorted(
        ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    )


def test_secrets_are_encrypted_with_a_rotating_key(synth: SynthesizedPlatform) -> None:
    key_id, key = _only(synth, "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    # Grants only for AWS resources (CT.KMS.PR.3): EKS grants itself the key on the cluster's
    # behalf (kms:GrantIsForAWSResource true), nobody else can hand it out by grant.
    assert GRANTS_ONLY_FOR_AWS_RESOURCES in key["Properties"]["KeyPolicy"]["Statement"]
    _, cluster = _only(synth, "AWS::EKS::Cluster")
    assert cluster["Properties"]["EncryptionConfig"] == [
        {"Provider": {"KeyArn": {"Fn::GetAtt": [key_id, "Arn"]}}, "Resources": ["secrets"]}
    ]


def test_endpoint_is_private_by_default_and_nodes_use_private_subnets(
    synth: SynthesizedPlatform,
) -> None:
    """cdk.json sets no endpoint: the API answers only inside the VPC (Security Hub EKS.1)."""
    _, cluster = _only(synth, "AWS::EKS::Cluster")
    vpc_config = cluster["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc_config
    subnets = [s["Fn::ImportValue"] for s in vpc_config["SubnetIds"]]
    assert len(subnets) == 3 and all("PrivateSubnet" in s for s in subnets)
    for group in _resources(synth, "AWS::EKS::Nodegroup").values():
        assert all("PrivateSubnet" in s["Fn::ImportValue"] for s in group["Properties"]["Subnets"])


def test_the_creator_gets_no_permanent_admin_entry_and_the_kubectl_role_has_its_own(
    synth: SynthesizedPlatform,
) -> None:
    """BootstrapClusterCreatorAdminPermissions off: CloudFormation's execution role keeps no
    cluster-admin. aws-cdk's kubectl provider role has an access entry of its own, and the
    KubectlReadyBarrier (which every manifest and chart waits for) depends on it."""
    _, cluster = _only(synth, "AWS::EKS::Cluster")
    assert cluster["Properties"]["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False
    template = synth.template_json("TrainingCluster")["Resources"]
    (role_id,) = [
        k
        for k, r in template.items()
        if r["Type"] == "AWS::IAM::Role"
        and k.startswith("ClusterKubectlProviderHandlerServiceRole")
    ]
    _, handler = next(
        (k, r)
        for k, r in template.items()
        if r["Type"] == "AWS::Lambda::Function" and k.startswith("ClusterKubectlProviderHandler")
    )
    assert handler["Properties"]["Role"] == {"Fn::GetAtt": [role_id, "Arn"]}
    (entry_id,) = [
        k
        for k, r in _resources(synth, "AWS::EKS::AccessEntry").items()
        if r["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    ]
    entry = template[entry_id]["Properties"]
    assert entry["AccessPolicies"] == [
        {
            "AccessScope": {"Type": "cluster"},
            "PolicyArn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
                    ],
                ]
            },
        }
    ]
    (barrier,) = [k for k in template if k.startswith("ClusterKubectlReadyBarrier")]
    assert entry_id in template[barrier]["DependsOn"]


def test_a_world_open_endpoint_is_an_error_unless_stated_then_a_warning() -> None:
    with pytest.raises(
        ValueError,
        match=r"^S/Cluster: public_access_cidrs\[0\] = '0\.0\.0\.0/0', "
        r"public_access_from_anywhere = False: opens the Kubernetes API to the whole internet; "
        r"name your networks \(`mlp azs --public-access-mine` writes your address\), keep the "
        r"endpoint 'private', or set public_access_from_anywhere to true to state that choice$",
    ):
        _bare_cluster(endpoint_access="public_and_private", public_access_cidrs=["0.0.0.0/0"])
    stated = _bare_cluster(
        endpoint_access="public_and_private",
        public_access_cidrs=["0.0.0.0/0"],
        public_access_from_anywhere=True,
    )
    (warning,) = [m.data for m in stated.node.metadata if m.type == "aws:cdk:warning"]
    assert "0.0.0.0/0" in warning and OPEN_TO_WORLD_WARNING in warning
    with pytest.raises(
        ValueError,
        match=r"^S/Cluster: public_access_cidrs = \['203\.0\.113\.0/24'\], endpoint_access = "
        r"'private': a private endpoint takes none \(make it 'public_and_private' to use them\)$",
    ):
        _bare_cluster(public_access_cidrs=["203.0.113.0/24"])
    # The rule the settings check (limits.public_access_findings): IPv4, at most 40, distinct.
    many = ["2001:db8::/32", *(f"10.0.{i}.0/24" for i in range(40))]
    with pytest.raises(ValueError) as error:
        _bare_cluster(endpoint_access="public_and_private", public_access_cidrs=many)
    assert "public_access_cidrs[0] = '2001:db8::/32': IPv4 only" in str(error.value)
    assert f"public_access_cidrs = {shown(many)}: 41 blocks, EKS takes at most 40" in str(
        error.value
    )


def _bare_cluster(**props) -> TrainingEksCluster:
    """A cluster in a stack of its own, ``props`` its :class:`TrainingEksClusterProps`."""
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    return TrainingEksCluster(stack, "Cluster", vpc=vpc, props=TrainingEksClusterProps(**props))


def test_restricted_or_private_endpoint_has_no_warning_and_admin_role_gets_an_access_entry() -> (
    None
):
    admin = "arn:aws:iam::123456789012:role/PlatformAdmin"
    restricted = _bare_cluster(
        endpoint_access="public_and_private",
        public_access_cidrs=["203.0.113.0/24"],
        admin_role_arn=admin,
    )
    assert [m for m in restricted.node.metadata if m.type == "aws:cdk:warning"] == []
    entry = restricted.admin_access.node.default_child
    assert entry.principal_arn == admin
    (policy,) = cdk.Stack.of(restricted).resolve(entry.access_policies)
    assert policy["accessScope"] == {"type": "cluster"}
    assert "AmazonEKSClusterAdminPolicy" in json.dumps(policy["policyArn"])
    private = _bare_cluster()  # private by default
    assert private.admin_access is None
    assert [m for m in private.node.metadata if m.type == "aws:cdk:warning"] == []


def test_kubectl_provider_has_a_cluster_admin_access_entry(synth: SynthesizedPlatform) -> None:
    entries = _resources(synth, "AWS::EKS::AccessEntry")
    (entry,) = entries.values()  # cdk.json sets no admin role
    assert entry["Properties"]["PrincipalArn"]["Fn::GetAtt"][0].startswith("ClusterKubectlProvider")
    assert "AmazonEKSClusterAdminPolicy" in json.dumps(entry["Properties"]["AccessPolicies"])


HELPER_NODES_TEXT = (
    "expected 1 to 3 (the dataset Job and TensorBoard must run in network.trainium_az, where "
    "FSx is, and the system nodes may have no node there, so 0 would leave them Pending)"
)


def test_cluster_construct_validation_reports_every_problem() -> None:
    with pytest.raises(ValueError) as info:
        _bare_cluster(
            support_type="NONE",
            kubernetes_version="1.29",
            endpoint_access="public",
            system_nodes=0,
            helper_nodes=0,
        )
    assert str(info.value) == (
        "S/Cluster: kubernetes_version = '1.29': expected one of ['1.34', '1.35']; "
        "endpoint_access = 'public': expected one of ['public_and_private', 'private']; "
        "system_nodes = 0: expected 1 to 10; "
        f"helper_nodes = 0: {HELPER_NODES_TEXT}; "
        "support_type = 'NONE': expected one of ['EXTENDED', 'STANDARD']"
    )
    # The cross-field rules run once every field is valid, all at once.
    with pytest.raises(ValueError) as info:
        _bare_cluster(
            endpoint_access="public_and_private",
            public_access_cidrs=("10.0.0.0/33",),
            admin_role_arn="arn:aws:iam::1:user/x",
            system_instance_type="m6g.large",
        )
    assert str(info.value) == (
        "S/Cluster: admin_role_arn = 'arn:aws:iam::1:user/x': expected an IAM role ARN "
        "(arn:<partition>:iam::<12-digit account>:role/<name>); "
        "system_instance_type = 'm6g.large': the system nodes run the x86_64 AL2023 AMI; "
        "expected an x86_64 type such as 'm6i.large'; "
        "public_access_cidrs[0] = '10.0.0.0/33': not a CIDR block"
    )


def test_the_cluster_props_share_the_settings_rules_and_the_construct_keeps_them() -> None:
    """TrainingEksCluster's rules live with the props it shares with the settings: checked
    without building anything, as the construct reports them; tokens are left unchecked."""
    bad = TrainingEksClusterProps(endpoint_access="public", system_nodes=0)
    assert shared_problems(bad, TrainingEksClusterPropsBase) == [
        "endpoint_access = 'public': expected one of ['public_and_private', 'private']",
        "system_nodes = 0: expected 1 to 10",
    ]
    open_to_all = TrainingEksClusterProps(
        endpoint_access="public_and_private", public_access_cidrs=("0.0.0.0/0",)
    )
    (problem,) = open_to_all.problems()
    assert problem == Problem(
        {"public_access_cidrs[0]": "0.0.0.0/0", "public_access_from_anywhere": False},
        "opens the Kubernetes API to the whole internet; name your networks (`mlp azs "
        "--public-access-mine` writes your address), keep the endpoint 'private', or set "
        "public_access_from_anywhere to true to state that choice",
    )
    assert TrainingEksClusterProps().problems() == []
    tokens = TrainingEksClusterProps(
        admin_role_arn=cdk.Aws.ACCOUNT_ID,
        public_access_cidrs=tuple(cdk.Token.as_list(cdk.Aws.NOTIFICATION_ARNS)),
    )
    assert shared_problems(tokens, TrainingEksClusterPropsBase) == []
    cidrs = ("203.0.113.0/24",)
    cluster = _bare_cluster(endpoint_access="public_and_private", public_access_cidrs=cidrs)
    assert cluster.props == TrainingEksClusterProps(
        endpoint_access="public_and_private", public_access_cidrs=cidrs
    )


def test_every_settings_kubernetes_version_has_an_eks_version_and_a_kubectl_layer() -> None:
    """The settings' versions (the props' ``OneOf``) are what the construct can build: it has
    no rule of its own for them."""
    assert set(KUBERNETES_VERSIONS) == set(EKS_VERSIONS) == set(KUBECTL_LAYERS)


def test_addons_are_pinned_for_the_kubernetes_version(synth: SynthesizedPlatform) -> None:
    pins = EKS_ADDON_VERSIONS["1.35"]
    found = {
        r["Properties"]["AddonName"]: r["Properties"].get("AddonVersion")
        for r in _resources(synth, "AWS::EKS::Addon").values()
    }
    assert found == {name: pins[name] for name in ADDONS}
    assert found["kube-proxy"].startswith("v1.35.")
    # No AWS source confirms a build of these two: EKS picks its default version.
    assert found["aws-fsx-csi-driver"] is None
    assert found["amazon-cloudwatch-observability"] is None
    # The node monitoring agent's build of release v1.7.0 (its chart's image tag).
    assert found["eks-node-monitoring-agent"] == "v1.7.0-eksbuild.1"


def test_unconfirmed_addons_can_be_pinned_by_setting() -> None:
    from aws_cdk.assertions import Template

    from ml_platform.config import Settings, SettingsError

    settings = Settings.from_context({"cluster": {"fsx_csi_driver_version": "v1.9.0-eksbuild.1"}})
    assert settings.cluster.addon_versions == {"aws-fsx-csi-driver": "v1.9.0-eksbuild.1"}
    env = cdk.Environment(account="123456789012", region="us-west-2")
    stack = cdk.Stack(new_app(), "S", env=env)
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="c", vpc=vpc)
    PlatformAddons(
        stack,
        "Addons",
        cluster=cluster,
        props=PlatformAddonsProps(
            kubernetes_version="1.35", addon_versions=settings.cluster.addon_versions
        ),
    )
    versions = {
        r["Properties"]["AddonName"]: r["Properties"].get("AddonVersion")
        for r in Template.from_stack(stack).to_json()["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon"
    }
    assert versions["aws-fsx-csi-driver"] == "v1.9.0-eksbuild.1"
    assert versions["amazon-cloudwatch-observability"] is None
    with pytest.raises(
        ValueError,
        match=r"^S/Bad: addon_versions = \{'vpc-cnii': 'v1.0.0-eksbuild.1'\}: unknown add-ons "
        r"\['vpc-cnii'\]; expected among \['amazon-cloudwatch-observability', ",
    ):
        PlatformAddons(
            stack,
            "Bad",
            cluster=cluster,
            props=PlatformAddonsProps(
                kubernetes_version="1.35", addon_versions={"vpc-cnii": "v1.0.0-eksbuild.1"}
            ),
        )
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"cluster": {"cloudwatch_observability_version": "5.3.1"}})
    assert info.value.problems == [
        "cluster.cloudwatch_observability_version = '5.3.1': expected an EKS add-on version "
        "such as 'v1.9.0-eksbuild.1'"
    ]


def test_addon_order_networking_before_nodes_the_rest_after(synth: SynthesizedPlatform) -> None:
    tpl = synth.template_json("TrainingCluster")["Resources"]
    addon_ids = {
        r["Properties"]["AddonName"]: k for k, r in tpl.items() if r["Type"] == "AWS::EKS::Addon"
    }
    networking = {addon_ids[n] for n in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")}
    for logical_id, group in _resources(synth, "AWS::EKS::Nodegroup").items():
        assert networking <= set(group["DependsOn"]), logical_id
    # The accelerator node groups' stacks are deployed after the whole cluster stack, add-ons
    # included.
    cluster_stack = synth.platform.training_cluster
    for stack in (synth.platform.trainium_nodes, synth.platform.gpu_nodes):
        assert cluster_stack in stack.dependencies
    system_nodes = next(
        k
        for k, r in _resources(synth, "AWS::EKS::Nodegroup").items()
        if r["Properties"]["AmiType"] == "AL2023_x86_64_STANDARD"
    )
    for name in ("coredns", "aws-fsx-csi-driver", "amazon-cloudwatch-observability"):
        assert system_nodes in tpl[addon_ids[name]]["DependsOn"], name


@pytest.mark.parametrize(
    ("addon", "namespace", "service_account"),
    [
        ("aws-fsx-csi-driver", "kube-system", "fsx-csi-controller-sa"),
        ("amazon-cloudwatch-observability", "amazon-cloudwatch", "cloudwatch-agent"),
    ],
)
def test_addons_calling_aws_get_roles_through_pod_identity(
    synth: SynthesizedPlatform, addon: str, namespace: str, service_account: str
) -> None:
    tpl = synth.template_json("TrainingCluster")["Resources"]
    (assoc_id, assoc) = next(
        (k, r)
        for k, r in tpl.items()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["ServiceAccount"] == service_account
    )
    assert assoc["Properties"]["Namespace"] == namespace
    role_id = assoc["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    trust = tpl[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert {json.dumps(s["Principal"]) for s in trust} == {
        json.dumps({"Service": "pods.eks.amazonaws.com"})
    }
    assert {
        a for s in trust for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    } == {
        "sts:AssumeRole",
        "sts:TagSession",
    }
    addon_resource = next(
        r
        for r in tpl.values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == addon
    )
    # The association exists before the add-on's pods start.
    assert assoc_id in addon_resource["DependsOn"]


def test_fsx_csi_role_is_read_only_and_cloudwatch_role_has_the_agent_policy(
    synth: SynthesizedPlatform,
) -> None:
    t = synth.template("TrainingCluster")
    t.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyName": Match.string_like_regexp("^AddonsFsxCsiDriverRole"),
            "PolicyDocument": {
                "Statement": [
                    {"Action": "fsx:DescribeFileSystems", "Effect": "Allow", "Resource": "*"}
                ],
                "Version": "2012-10-17",
            },
        },
    )
    cloudwatch_role = synth.template_json("TrainingCluster")["Resources"]
    (role,) = [
        r
        for k, r in cloudwatch_role.items()
        if r["Type"] == "AWS::IAM::Role" and k.startswith("AddonsCloudWatchRole")
    ]
    assert "CloudWatchAgentServerPolicy" in json.dumps(role["Properties"]["ManagedPolicyArns"])


def test_addon_pins_are_checked() -> None:
    stack = cdk.Stack(new_app(), "S")
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="c")
    with pytest.raises(
        ValueError,
        match=r"^S/Addons: kubernetes_version = '1.30': add-on versions are pinned for "
        r"\['1.34', '1.35'\]$",
    ):
        PlatformAddons(
            stack, "Addons", cluster=cluster, props=PlatformAddonsProps(kubernetes_version="1.30")
        )


def test_system_node_group(synth: SynthesizedPlatform) -> None:
    settings = synth.platform.settings.cluster
    t = synth.template("TrainingCluster")
    t.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "AmiType": "AL2023_x86_64_STANDARD",
            "InstanceTypes": [settings.system_instance_type],
            "Labels": {"ml-platform/node-role": "system"},
            "ScalingConfig": {
                "MinSize": settings.system_nodes,
                "DesiredSize": settings.system_nodes,
                "MaxSize": settings.system_nodes,
            },
            "Taints": Match.absent(),
        },
    )
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": {
                "MetadataOptions": {
                    "HttpEndpoint": "enabled",
                    "HttpTokens": "required",
                    "HttpPutResponseHopLimit": 1,
                },
                "BlockDeviceMappings": [
                    Match.object_like(
                        {"Ebs": Match.object_like({"Encrypted": True, "VolumeType": "gp3"})}
                    )
                ],
            }
        },
    )


def test_outputs_let_a_user_reach_the_cluster(synth: SynthesizedPlatform) -> None:
    outputs = synth.template_json("TrainingCluster")["Outputs"]
    assert {"ClusterName", "ClusterArn", "KubectlRoleArn", "UpdateKubeconfigCommand"} <= set(
        outputs
    )
    command = outputs["UpdateKubeconfigCommand"]["Value"]["Fn::Join"][1]
    assert command[0] == "aws eks update-kubeconfig --name "
    assert command[2] == f" --region {synth.platform.settings.env.region}"
    assert outputs["ClusterArn"]["Value"] == {
        "Fn::GetAtt": [_only(synth, "AWS::EKS::Cluster")[0], "Arn"]
    }


def test_stack_name_and_platform_wiring(synth: SynthesizedPlatform) -> None:
    stack = synth.platform.training_cluster
    assert stack is not None and stack in synth.platform.stacks
    assert stack.stack_name == "MlPlatform-TrainingCluster"
    assert {d.stack_name for d in stack.dependencies} >= {
        "MlPlatform-Network",
        "MlPlatform-Storage",
    }


def test_synthesis_warns_when_no_cluster_admin_role_is_set(synth: SynthesizedPlatform) -> None:
    from ml_platform.stacks.training_cluster import NO_CLUSTER_ADMIN_WARNING

    assert synth.platform.settings.cluster.admin_role_arn is None
    metadata = json.loads(
        (synth.outdir / f"{synth.stack_name('TrainingCluster')}.metadata.json").read_text()
    )
    warnings = [
        e["data"]
        for path, entries in metadata.items()
        if path == f"/{synth.stack_name('TrainingCluster')}"
        for e in entries
        if e["type"] == "aws:cdk:warning"
    ]
    # The stack's other warning is the unset cluster.bootstrap_creator_admin (its own test).
    (admin,) = [w for w in warnings if "cluster.admin_role_arn" in w]
    assert NO_CLUSTER_ADMIN_WARNING in admin and "mlp azs" in admin
    assert [w for w in warnings if w != admin] == [
        w for w in warnings if "cluster.bootstrap_creator_admin" in w
    ]


def test_kubeconfig_command_never_assumes_the_admin_role_itself() -> None:
    """`mlp azs` makes the caller's own role the admin role; `--role-arn` with it would make
    the CLI assume the role its credentials already are. The ARN is a separate output."""
    from ml_platform.app import new_app
    from ml_platform.stacks.training_cluster import kubeconfig_outputs

    admin = "arn:aws:iam::123456789012:role/platform-admins"
    outputs = {}
    for role in (None, admin):
        stack = cdk.Stack(
            new_app(), "S", env=cdk.Environment(account="123456789012", region="eu-west-1")
        )
        kubeconfig_outputs(stack, "ml-platform", role)
        outputs[role] = Template.from_stack(stack).to_json()["Outputs"]
    command = "aws eks update-kubeconfig --name ml-platform --region eu-west-1"
    assert outputs[None] == {"UpdateKubeconfigCommand": {"Value": command}}
    assert outputs[admin]["UpdateKubeconfigCommand"] == {"Value": command}
    assert outputs[admin]["AdminRoleArn"]["Value"] == admin
    assert "--role-arn" in outputs[admin]["AdminRoleArn"]["Description"]


def test_the_vpc_cni_has_its_own_pod_identity_role_created_before_the_add_on(
    synth: SynthesizedPlatform,
) -> None:
    """AmazonEKS_CNI_Policy sits on kube-system/aws-node's Pod Identity role (EKS user guide,
    cni-iam-role), which exists with its association before the vpc-cni add-on; the system
    node role loses the policy only after the add-on is updated."""
    template = synth.template_json("TrainingCluster")["Resources"]
    (association_id,) = [
        k
        for k, r in _resources(synth, "AWS::EKS::PodIdentityAssociation").items()
        if r["Properties"]["ServiceAccount"] == "aws-node"
    ]
    association = template[association_id]["Properties"]
    assert association["Namespace"] == "kube-system"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    (arn,) = template[role_id]["Properties"]["ManagedPolicyArns"]
    assert arn["Fn::Join"][1][-1] == ":iam::aws:policy/AmazonEKS_CNI_Policy"
    (addon_id,) = [
        k
        for k, r in _resources(synth, "AWS::EKS::Addon").items()
        if r["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert addon_id.startswith("AddonsVpcCni") and "Role" not in addon_id  # logical ID kept
    assert {association_id, role_id} <= set(template[addon_id]["DependsOn"])
    # The system and training-helper groups share one node role.
    (node_role,) = {
        json.dumps(g["Properties"]["NodeRole"])
        for g in _resources(synth, "AWS::EKS::Nodegroup").values()
    }
    node_role_id = json.loads(node_role)["Fn::GetAtt"][0]
    assert addon_id in template[node_role_id]["DependsOn"]


def test_ssm_on_node_roles_follows_the_setting() -> None:
    from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps

    names = {}
    for ssm in (True, False, None):  # None: the constructs' defaults, which are off
        given = {} if ssm is None else {"node_ssm_access": ssm}
        cluster = _bare_cluster(**given)
        GpuNodeGroup(
            cluster,
            "Gpu",
            cluster=cluster.cluster,
            props=GpuNodeGroupProps(**({} if ssm is None else {"ssm_access": ssm})),
        )
        roles = [
            r
            for r in Template.from_stack(cdk.Stack.of(cluster))
            .find_resources("AWS::IAM::Role")
            .values()
            if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
            == {"Service": "ec2.amazonaws.com"}
        ]
        assert len(roles) == 2  # system and GPU node roles
        names[ssm] = [
            sorted(
                a["Fn::Join"][1][-1].rsplit("/", 1)[-1]
                for a in r["Properties"]["ManagedPolicyArns"]
            )
            for r in roles
        ]
    base = ["AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodePolicy"]
    assert names[False] == [base, base]
    assert names[None] == [base, base]
    assert names[True] == [sorted([*base, "AmazonSSMManagedInstanceCore"])] * 2


def test_network_policy_mode_reaches_the_vpc_cni_and_is_checked() -> None:
    for mode in ("strict", "standard"):
        cluster = _bare_cluster()
        addons = PlatformAddons(
            cluster,
            "Addons",
            cluster=cluster.cluster,
            props=PlatformAddonsProps(kubernetes_version="1.35", network_policy_mode=mode),
        )
        values = cdk.Stack.of(cluster).resolve(
            addons.addons["vpc-cni"].node.default_child.configuration_values
        )
        assert json.loads(values) == {
            "enableNetworkPolicy": "true",
            "env": {"NETWORK_POLICY_ENFORCING_MODE": mode},
        }
    cluster = _bare_cluster()
    with pytest.raises(
        ValueError,
        match=r": network_policy_mode = 'off': expected one of \['strict', 'standard'\]$",
    ):
        PlatformAddons(
            cluster,
            "Addons",
            cluster=cluster.cluster,
            props=PlatformAddonsProps(kubernetes_version="1.35", network_policy_mode="off"),
        )


def test_the_kubectl_handler_runs_in_the_private_subnets_so_a_private_endpoint_deploys(
    synth: SynthesizedPlatform,
) -> None:
    template = synth.template_json("TrainingCluster")["Resources"]
    handler = next(
        r
        for k, r in template.items()
        if r["Type"] == "AWS::Lambda::Function" and k.startswith("ClusterKubectlProviderHandler")
    )
    subnets = [s["Fn::ImportValue"] for s in handler["Properties"]["VpcConfig"]["SubnetIds"]]
    assert len(subnets) == 3 and all("PrivateSubnet" in s for s in subnets)


def _warnings_at(synth: SynthesizedPlatform, stack: str, suffix: str) -> list[str]:
    metadata = json.loads((synth.outdir / f"{synth.stack_name(stack)}.metadata.json").read_text())
    return [
        e["data"]
        for path, entries in metadata.items()
        if path.endswith(suffix)
        for e in entries
        if e["type"] == "aws:cdk:warning"
    ]


def test_synthesis_reports_each_add_on_that_floats(synth: SynthesizedPlatform) -> None:
    """cdk.json pins neither the FSx CSI driver nor CloudWatch observability: synthesis says
    both float, once, on the add-ons construct."""
    from ml_platform.constructs.addons import ADDON_FLOATS_WARNING

    (message,) = _warnings_at(synth, "TrainingCluster", "/Addons")
    assert ADDON_FLOATS_WARNING in message
    assert "['amazon-cloudwatch-observability', 'aws-fsx-csi-driver']" in message
    assert "Kubernetes 1.35" in message and "mlp addons" in message


def test_pinned_add_ons_are_not_reported() -> None:
    from ml_platform.app import new_app
    from ml_platform.constructs.addons import (
        ADDON_FLOATS_WARNING,
        PlatformAddons,
        PlatformAddonsProps,
    )

    env = cdk.Environment(account="123456789012", region="us-west-2")
    stack = cdk.Stack(new_app(), "S", env=env)
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster.from_cluster_attributes(stack, "C", cluster_name="c", vpc=vpc)
    one = PlatformAddons(
        stack,
        "One",
        cluster=cluster,
        props=PlatformAddonsProps(
            kubernetes_version="1.35", addon_versions={"aws-fsx-csi-driver": "v1.9.0-eksbuild.1"}
        ),
    )
    both = PlatformAddons(
        stack,
        "Both",
        cluster=cluster,
        props=PlatformAddonsProps(
            kubernetes_version="1.35",
            addon_versions={
                "aws-fsx-csi-driver": "v1.9.0-eksbuild.1",
                "amazon-cloudwatch-observability": "v5.3.1-eksbuild.1",
            },
        ),
    )

    def warnings(c):
        return [str(m.data) for m in c.node.metadata if m.type == "aws:cdk:warning"]

    (message,) = warnings(one)
    assert ADDON_FLOATS_WARNING in message and "['amazon-cloudwatch-observability']" in message
    assert warnings(both) == []


def _groups_by_role(synth: SynthesizedPlatform) -> dict[str, dict]:
    """The TrainingCluster stack's node groups by ``ml-platform/node-group`` label (``system``
    for the group without one)."""
    return {
        g["Properties"]["Labels"].get("ml-platform/node-group", "system"): g
        for g in _resources(synth, "AWS::EKS::Nodegroup").values()
    }


def test_training_helper_nodes_are_system_nodes_in_the_trainium_az_only(
    synth: SynthesizedPlatform,
) -> None:
    """Issue 32: the helper pods are required to run in the FSx AZ, and the system group (over
    every AZ's private subnet) may have no node there, so a group of the same nodes sits in
    the Trainium AZ's private subnet. Observed: the synthesized templates; the subnet's AZ is
    read from the Network stack's subnet resource."""
    settings = synth.platform.settings
    groups = _groups_by_role(synth)
    assert set(groups) == {"system", "training-helpers"}
    system, helpers = groups["system"]["Properties"], groups["training-helpers"]["Properties"]

    # Exactly the Trainium AZ's private subnet, as the Network stack exports it.
    network = synth.template_json("Network")
    subnet = synth.platform.network.trainium_subnet
    subnet_id = cdk.Stack.of(subnet).get_logical_id(subnet.node.default_child)
    assert network["Resources"][subnet_id]["Properties"]["AvailabilityZone"] == (
        settings.network.trainium_az
    )
    (export,) = [
        o["Export"]["Name"]
        for o in network["Outputs"].values()
        if o["Value"] == {"Ref": subnet_id} and "Export" in o
    ]
    assert helpers["Subnets"] == [{"Fn::ImportValue": export}]
    # The system group keeps every AZ's private subnet, that one included.
    assert len(system["Subnets"]) == len(settings.network.availability_zones) == 3
    assert {"Fn::ImportValue": export} in system["Subnets"]

    assert helpers["Labels"] == {
        "ml-platform/node-role": "system",
        "ml-platform/node-group": "training-helpers",
    }
    assert system["Labels"] == {"ml-platform/node-role": "system"}
    nodes = settings.cluster.helper_nodes
    assert nodes == 1
    assert helpers["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 1, "MaxSize": 1}
    assert helpers["InstanceTypes"] == [settings.cluster.system_instance_type] == ["m6i.large"]
    # Everything else is the system group's: launch template (hardening, security groups),
    # node role, AMI type, auto-repair, update settings, no taints.
    for key in (
        "AmiType",
        "InstanceTypes",
        "LaunchTemplate",
        "NodeRole",
        "NodeRepairConfig",
        "UpdateConfig",
        "ForceUpdateEnabled",
        "CapacityType",
        "Taints",
        "ReleaseVersion",
    ):
        assert helpers.get(key) == system.get(key), key
    assert helpers["NodeRepairConfig"] == {"Enabled": True}
    assert helpers["AmiType"] == "AL2023_x86_64_STANDARD"

    # The shared launch template: IMDSv2 with hop limit 1, encrypted gp3 root, and the Lustre
    # client group beside the cluster group, so the helper pods can mount FSx.
    template_id = helpers["LaunchTemplate"]["Id"]["Ref"]
    data = synth.template_json("TrainingCluster")["Resources"][template_id]["Properties"][
        "LaunchTemplateData"
    ]
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    (root,) = data["BlockDeviceMappings"]
    assert root["Ebs"]["Encrypted"] is True and root["Ebs"]["VolumeType"] == "gp3"
    assert "LustreClientSecurityGroup" in json.dumps(data["SecurityGroupIds"])


def test_training_helper_nodes_wait_like_the_system_nodes(synth: SynthesizedPlatform) -> None:
    """The helper nodes start after the same add-ons as the system nodes (the VPC CNI before
    any node), so a helper pod never lands on a node without pod networking."""
    groups = _groups_by_role(synth)
    assert set(groups["training-helpers"]["DependsOn"]) == set(groups["system"]["DependsOn"])


def test_helper_node_group_only_with_a_subnet_and_its_size_is_checked() -> None:
    assert _bare_cluster().helper_nodes is None
    cluster = _bare_cluster(helper_nodes=2, system_nodes=1)
    assert cluster.system_node_groups == [cluster.system_nodes]

    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    subnet = vpc.select_subnets(
        subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=["us-west-2b"]
    ).subnets[0]
    cluster = TrainingEksCluster(
        stack,
        "Cluster",
        vpc=vpc,
        props=TrainingEksClusterProps(helper_nodes=3),
        helper_subnet=subnet,
    )
    assert cluster.system_node_groups == [cluster.system_nodes, cluster.helper_nodes]
    (helpers,) = [
        g["Properties"]
        for g in Template.from_stack(stack).find_resources("AWS::EKS::Nodegroup").values()
        if "ml-platform/node-group" in g["Properties"]["Labels"]
    ]
    assert helpers["Subnets"] == [stack.resolve(subnet.subnet_id)]
    assert helpers["ScalingConfig"] == {"MinSize": 3, "DesiredSize": 3, "MaxSize": 3}
    for bad in (0, 4):
        with pytest.raises(ValueError, match=rf"helper_nodes = {bad}: expected 1 to 3 \(the "):
            _bare_cluster(helper_nodes=bad)
    with pytest.raises(ValueError) as info:
        _bare_cluster(helper_nodes=4)
    assert str(info.value) == f"S/Cluster: helper_nodes = 4: {HELPER_NODES_TEXT}"
