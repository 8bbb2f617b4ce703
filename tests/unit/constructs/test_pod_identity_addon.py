"""PodIdentityAddon on its own: the role only one service account of one cluster can take, its
policies, the association, the add-on and the create order between them."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.addons import (
    ADDON_CONFIGURATION,
    PodIdentityAddon,
    PodIdentityAddonProps,
)

ENV = cdk.Environment(account="123456789012", region="us-west-2")
CLUSTER_ARN = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":eks:us-west-2:123456789012:cluster/research"],
    ]
}


class Built:
    """One stack with two add-ons: one with managed policies and a known configuration, one
    with inline statements and no version (EKS's default)."""

    def __init__(self) -> None:
        self.stack = cdk.Stack(new_app(), "S", env=ENV)
        vpc = ec2.Vpc(self.stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
        cluster = eks.Cluster.from_cluster_attributes(
            self.stack, "Cluster", cluster_name="research", vpc=vpc
        )
        self.cluster_arn = self.stack.resolve(cluster.cluster_arn)
        self.cloudwatch = PodIdentityAddon(
            self.stack,
            "CloudWatch",
            cluster=cluster,
            props=PodIdentityAddonProps(
                addon_name="amazon-cloudwatch-observability",
                addon_version="v4.1.0-eksbuild.1",
                namespace="amazon-cloudwatch",
                service_account="cloudwatch-agent",
                managed_policies=("CloudWatchAgentServerPolicy",),
            ),
        )
        self.fsx = PodIdentityAddon(
            self.stack,
            "Fsx",
            cluster=cluster,
            props=PodIdentityAddonProps(
                addon_name="aws-fsx-csi-driver",
                addon_version=None,
                namespace="kube-system",
                service_account="fsx-csi-controller-sa",
            ),
            statements=[iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"])],
        )
        self.resources: dict[str, Any] = Template.from_stack(self.stack).to_json()["Resources"]

    def logical_id(self, construct: Any) -> str:
        child = construct.node.default_child or construct
        return str(self.stack.resolve(child.logical_id))

    def resource(self, construct: Any) -> dict[str, Any]:
        return dict(self.resources[self.logical_id(construct)])


@pytest.fixture(scope="module")
def built() -> Built:
    return Built()


def test_only_the_service_account_of_this_cluster_can_take_the_role(built: Built) -> None:
    """Pod Identity's session tags name the cluster (by ARN), namespace and service account
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""
    for addon, namespace, account, purpose in (
        (
            built.cloudwatch,
            "amazon-cloudwatch",
            "cloudwatch-agent",
            "amazon-cloudwatch-observability",
        ),
        (built.fsx, "kube-system", "fsx-csi-controller-sa", "aws-fsx-csi-driver"),
    ):
        role = built.resource(addon.role)["Properties"]
        assert role["AssumeRolePolicyDocument"]["Statement"] == [
            {
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        "aws:RequestTag/eks-cluster-arn": CLUSTER_ARN,
                        "aws:RequestTag/kubernetes-namespace": namespace,
                        "aws:RequestTag/kubernetes-service-account": account,
                    }
                },
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
            }
        ]
        assert role["Description"] == f"EKS Pod Identity role of {namespace}/{account} ({purpose})"


def test_managed_policies_and_statements_go_on_the_role(built: Built) -> None:
    cloudwatch = built.resource(built.cloudwatch.role)["Properties"]
    assert cloudwatch["ManagedPolicyArns"] == [
        {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/CloudWatchAgentServerPolicy"],
            ]
        }
    ]
    fsx = built.resource(built.fsx.role)["Properties"]
    assert "ManagedPolicyArns" not in fsx
    policies = [
        r["Properties"] for r in built.resources.values() if r["Type"] == "AWS::IAM::Policy"
    ]
    (policy,) = policies  # only the add-on with statements has an inline policy
    assert policy["Roles"] == [{"Ref": built.logical_id(built.fsx.role)}]
    assert policy["PolicyDocument"]["Statement"] == [
        {"Action": "fsx:DescribeFileSystems", "Effect": "Allow", "Resource": "*"}
    ]


def test_association_binds_the_role_to_the_service_account(built: Built) -> None:
    for addon, namespace, account in (
        (built.cloudwatch, "amazon-cloudwatch", "cloudwatch-agent"),
        (built.fsx, "kube-system", "fsx-csi-controller-sa"),
    ):
        association = built.resource(addon.association)
        assert association["Type"] == "AWS::EKS::PodIdentityAssociation"
        assert association["Properties"] == {
            "ClusterName": "research",
            "Namespace": namespace,
            "ServiceAccount": account,
            "RoleArn": {"Fn::GetAtt": [built.logical_id(addon.role), "Arn"]},
        }


def test_addon_version_and_configuration(built: Built) -> None:
    cloudwatch = built.resource(built.cloudwatch.addon)["Properties"]
    assert cloudwatch["AddonName"] == "amazon-cloudwatch-observability"
    assert cloudwatch["AddonVersion"] == "v4.1.0-eksbuild.1"
    assert cloudwatch["ClusterName"] == "research"
    import json

    assert (
        json.loads(cloudwatch["ConfigurationValues"])
        == (ADDON_CONFIGURATION["amazon-cloudwatch-observability"])
    )
    fsx = built.resource(built.fsx.addon)["Properties"]
    # No version: EKS installs its default build; no configuration for this add-on.
    assert "AddonVersion" not in fsx and "ConfigurationValues" not in fsx


def test_addon_waits_for_its_association_role_and_policy(built: Built) -> None:
    """The add-on's pods call AWS as soon as they start: the association, the role and its
    inline policy exist first."""
    cloudwatch = built.resource(built.cloudwatch.addon)
    assert sorted(cloudwatch["DependsOn"]) == sorted(
        [built.logical_id(built.cloudwatch.association), built.logical_id(built.cloudwatch.role)]
    )
    fsx = built.resource(built.fsx.addon)
    (policy_id,) = [k for k, r in built.resources.items() if r["Type"] == "AWS::IAM::Policy"]
    assert sorted(fsx["DependsOn"]) == sorted(
        [built.logical_id(built.fsx.association), built.logical_id(built.fsx.role), policy_id]
    )
