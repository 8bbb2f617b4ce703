"""Two Trainium node groups sharing one EFA security group, built as an outside app would."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs import TrainiumNodeGroup

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def _rules(template: Template, kind: str) -> list[tuple]:
    """Rules between two different groups (the control-plane rules); the EFA rules of a group
    to itself (network.allow_efa_within) are left out."""
    out = []
    for resource in template.to_json()["Resources"].values():
        if resource["Type"] == kind:
            p = resource["Properties"]
            if p["GroupId"] == p.get("SourceSecurityGroupId"):
                continue
            out.append(
                (
                    json_key(p["GroupId"]),
                    json_key(p.get("SourceSecurityGroupId")),
                    p["IpProtocol"],
                    p.get("FromPort"),
                    p.get("ToPort"),
                )
            )
    return out


def json_key(value: object) -> str:
    return repr(value)


def _base(app: cdk.App) -> tuple[cdk.Stack, ec2.Vpc, ec2.SecurityGroup, eks.ICluster]:
    stack = cdk.Stack(app, "Base", env=ENV)
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a", "us-east-1f"])
    efa = ec2.SecurityGroup(stack, "Efa", vpc=vpc)
    cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name="research",
        vpc=vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
    )
    return stack, vpc, efa, cluster


def test_node_groups_in_two_stacks_share_the_rules_of_the_first() -> None:
    app = new_app()
    _base_stack, vpc, efa, cluster = _base(app)
    stacks = [cdk.Stack(app, name, env=ENV) for name in ("NodesA", "NodesB")]
    for stack in stacks:
        TrainiumNodeGroup(
            stack, "Trn", cluster=cluster, subnet=vpc.private_subnets[1], security_group=efa
        )
    counts = [len(_rules(Template.from_stack(s), "AWS::EC2::SecurityGroupIngress")) for s in stacks]
    assert counts == [6, 0]
    assert stacks[0] in stacks[1].dependencies


def test_a_different_security_group_gets_its_own_rules() -> None:
    app = new_app()
    stack, vpc, efa, cluster = _base(app)
    other = ec2.SecurityGroup(stack, "Efa2", vpc=vpc)
    for name, group in (("TrnA", efa), ("TrnB", other)):
        TrainiumNodeGroup(
            stack, name, cluster=cluster, subnet=vpc.private_subnets[1], security_group=group
        )
    ingress = _rules(Template.from_stack(stack), "AWS::EC2::SecurityGroupIngress")
    assert len(ingress) == 12 and len(set(ingress)) == 12
