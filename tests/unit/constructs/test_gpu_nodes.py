"""GpuNodeGroup on its own: launch template, node role, node group, security groups, bad input.

As thorough as the TrainiumNodeGroup tests (test_trainium.py): exact IAM, launch template,
labels and taints, sizes, and one error naming every bad prop. One small app serves the tests
that only read templates.
"""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps
from tests.support import synth_collecting_nag

ENV = cdk.Environment(account="123456789012", region="us-west-2")
WORKER_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"]
SSM_POLICY = "AmazonSSMManagedInstanceCore"


def _policy_arn(name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{name}"]]}


def _base(app: cdk.App, name: str = "S") -> tuple[cdk.Stack, ec2.Vpc, eks.ICluster]:
    stack = cdk.Stack(app, name, env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name="research",
        vpc=vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
    )
    return stack, vpc, cluster


class Built:
    """One stack with three GPU node groups: defaults (no SSM), everything set (SSM on, the
    break-glass setting), SSM off explicitly."""

    def __init__(self, app: cdk.App | None = None, *, synth: bool = True) -> None:
        self.app = app or new_app()
        self.stack, vpc, cluster = _base(self.app)
        self.vpc = vpc
        self.default = GpuNodeGroup(self.stack, "Default", cluster=cluster)
        self.custom = GpuNodeGroup(
            self.stack,
            "Custom",
            cluster=cluster,
            subnets=ec2.SubnetSelection(subnets=[vpc.private_subnets[1]]),
            props=GpuNodeGroupProps(
                instance_type="g6.xlarge",
                desired_size=3,
                min_size=0,
                max_size=5,
                labels={"team": "search"},
                ssm_access=True,
            ),
        )
        self.no_ssm = GpuNodeGroup(
            self.stack, "NoSsm", cluster=cluster, props=GpuNodeGroupProps(ssm_access=False)
        )
        self.resources: dict[str, Any] = (
            Template.from_stack(self.stack).to_json()["Resources"] if synth else {}
        )

    def logical_id(self, construct: Any) -> str:
        return str(self.stack.resolve(construct.node.default_child.logical_id))

    def props(self, construct: Any) -> dict[str, Any]:
        return dict(self.resources[self.logical_id(construct)]["Properties"])


@pytest.fixture(scope="module")
def built() -> Built:
    return Built()


def test_launch_template_imdsv2_encrypted_gp3_and_nothing_else(built: Built) -> None:
    for group in (built.default, built.custom, built.no_ssm):
        data = built.resources[built.stack.resolve(group.launch_template.logical_id)]
        assert data["Properties"]["LaunchTemplateData"] == {
            "Monitoring": {"Enabled": True},
            "MetadataOptions": {
                "HttpEndpoint": "enabled",
                "HttpTokens": "required",
                "HttpPutResponseHopLimit": 1,
            },
            "BlockDeviceMappings": [
                {
                    "DeviceName": "/dev/xvda",
                    "Ebs": {
                        "VolumeSize": 100,
                        "VolumeType": "gp3",
                        "Encrypted": True,
                        "DeleteOnTermination": True,
                    },
                }
            ],
        }
    # No security groups in the template: EKS attaches the cluster security group, so the
    # nodes reach the control plane and CoreDNS with the rules EKS made; the construct adds
    # no rule of its own.
    rule_types = {"AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"}
    assert not [r for r in built.resources.values() if r["Type"] in rule_types]
    assert not [r for r in built.resources.values() if r["Type"] == "AWS::EC2::SecurityGroup"]


def test_node_group_ami_label_taint_sizes_and_subnets(built: Built) -> None:
    default = built.props(built.default.node_group)
    assert default["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert default["InstanceTypes"] == ["g5.2xlarge"]
    assert default["Labels"] == {"ml-platform/node-role": "gpu"}
    assert default["Taints"] == [
        {"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}
    ]
    # min_size defaults to desired_size.
    assert default["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 1, "MaxSize": 2}
    private = [built.stack.resolve(s.subnet_id) for s in built.vpc.private_subnets]
    assert default["Subnets"] == private
    template_id = built.stack.resolve(built.default.launch_template.logical_id)
    assert default["LaunchTemplate"] == {
        "Id": {"Ref": template_id},
        "Version": {"Fn::GetAtt": [template_id, "LatestVersionNumber"]},
    }

    custom = built.props(built.custom.node_group)
    assert custom["InstanceTypes"] == ["g6.xlarge"]
    assert custom["Labels"] == {"team": "search", "ml-platform/node-role": "gpu"}
    assert custom["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 3, "MaxSize": 5}
    assert custom["Subnets"] == [private[1]]


def test_node_roles_trust_ec2_and_carry_exactly_the_node_policies(built: Built) -> None:
    expected = {
        built.default: WORKER_POLICIES,  # Session Manager is break-glass: off by default
        built.custom: [*WORKER_POLICIES, SSM_POLICY],
        built.no_ssm: WORKER_POLICIES,
    }
    for group, policies in expected.items():
        role_id = built.props(group.node_group)["NodeRole"]["Fn::GetAtt"][0]
        assert role_id == built.logical_id(group.role)
        role = built.resources[role_id]["Properties"]
        # aws-cdk's defaults (AmazonEKS_CNI_Policy, ECR ReadOnly) are replaced in place.
        assert role["ManagedPolicyArns"] == [_policy_arn(p) for p in policies]
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {
                "Action": "sts:AssumeRole",
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
            }
        ]
        assert "Policies" not in role
    assert not [r for r in built.resources.values() if r["Type"] == "AWS::IAM::Policy"]


def test_cdk_nag_finds_nothing_unacknowledged_on_the_node_groups(tmp_path: Any) -> None:
    """The managed policies on the node roles are AwsSolutions-IAM4 findings; each carries its
    reason (the node-group building block acknowledges them), the SSM policy's included
    (``custom`` has it). Without the reasons the same synthesis fails, so the check is live."""
    from cdk_nag import AwsSolutionsChecks

    from ml_platform.constructs import _nodegroup
    from ml_platform.constructs._nag import acknowledge

    def nagged(name: str) -> cdk.App:
        app = new_app(outdir=str(tmp_path / name))
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        return app

    def build(app: cdk.App) -> None:
        vpc = Built(app, synth=False).vpc
        acknowledge(vpc, "AwsSolutions-VPC7", "The test's VPC, not under test here.")

    app = nagged("acknowledged")
    build(app)
    assert synth_collecting_nag(app) is None

    app = nagged("bare")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_nodegroup, "acknowledge_node_role", lambda role, ssm_access=False: None)
        build(app)
    failure = synth_collecting_nag(app)
    assert failure is not None and "AwsSolutions-IAM4" in failure


def test_bad_props_are_reported_together_before_anything_is_created() -> None:
    stack, _, cluster = _base(new_app())
    with pytest.raises(ValueError) as raised:
        GpuNodeGroup(
            stack,
            "Gpu",
            cluster=cluster,
            props=GpuNodeGroupProps(
                instance_type="p9.large",
                desired_size=3,
                max_size=2,
                labels={"ml-platform/node-role": "x"},
            ),
        )
    message = str(raised.value)
    assert message.startswith("S/Gpu: instance_type = 'p9.large': expected one of ['g4dn.")
    assert (
        "min_size = 3, desired_size = 3, max_size = 2: expected 0 <= min_size <= desired_size "
        "<= max_size <= 20 and max_size >= 1" in message
    )
    assert message.endswith(
        "labels = {'ml-platform/node-role': 'x'}: 'ml-platform/node-role' is set by this construct"
    )
    assert stack.node.find_child("Gpu").node.children == []


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"desired_size": 21, "max_size": 21}, "min_size = 21, desired_size = 21, max_size = 21"),
        ({"desired_size": 0, "max_size": 0}, "min_size = 0, desired_size = 0, max_size = 0"),
        ({"desired_size": 1, "min_size": 2}, "min_size = 2, desired_size = 1, max_size = 2"),
        ({"desired_size": 1, "min_size": -1}, "min_size = -1, desired_size = 1, max_size = 2"),
        ({"instance_type": "g5.48xlarge"}, "instance_type = 'g5.48xlarge': expected one of ["),
        ({"instance_type": "ml.g5.2xlarge"}, "instance_type = 'ml.g5.2xlarge': expected one of ["),
    ],
)
def test_each_bad_prop_is_refused(props: dict[str, Any], expected: str) -> None:
    stack, _, cluster = _base(new_app())
    with pytest.raises(ValueError, match="^S/Gpu: " + re.escape(expected)):
        GpuNodeGroup(stack, "Gpu", cluster=cluster, props=GpuNodeGroupProps(**props))


def test_scale_to_zero_and_the_largest_group_are_accepted() -> None:
    stack, _, cluster = _base(new_app())
    low = GpuNodeGroup(
        stack,
        "Low",
        cluster=cluster,
        props=GpuNodeGroupProps(desired_size=0, min_size=0, max_size=1),
    )
    high = GpuNodeGroup(
        stack, "High", cluster=cluster, props=GpuNodeGroupProps(desired_size=20, max_size=20)
    )
    resources = Template.from_stack(stack).to_json()["Resources"]
    sizes = {
        name: resources[stack.resolve(g.node_group.node.default_child.logical_id)]["Properties"][
            "ScalingConfig"
        ]
        for name, g in (("low", low), ("high", high))
    }
    assert sizes == {
        "low": {"MinSize": 0, "DesiredSize": 0, "MaxSize": 1},
        "high": {"MinSize": 20, "DesiredSize": 20, "MaxSize": 20},
    }
