"""cluster.kubectl_provider_guard: the managed policy that keeps principals from acting as
aws-cdk's kubectl provider (cluster-admin), evaluated per request with the Deny evaluation of
tests/s3_policy.py (issue 34, finding 4)."""

from __future__ import annotations

import copy

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.eks_cluster import (
    KUBECTL_PROVIDER_GUARDED_ACTIONS,
    TrainingEksCluster,
    TrainingEksClusterProps,
)
from tests.s3_policy import denied

ACCOUNT = "123456789012"
DEPLOY = f"arn:aws:iam::{ACCOUNT}:role/cdk-hnb659fds-cfn-exec-role-{ACCOUNT}-us-west-2"
OTHER = f"arn:aws:iam::{ACCOUNT}:role/DataScientist"


def _resolve(value, resources):
    """Template JSON -> strings: a function's or role's Arn becomes a fake ARN named by its
    logical id; Fn::Sub and Fn::Join as CloudFormation resolves them."""
    if isinstance(value, list):
        return [_resolve(v, resources) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("Ref") == "AWS::Partition":
        return "aws"
    if "Fn::Sub" in value:
        return value["Fn::Sub"].replace("${AWS::Partition}", "aws")
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolve(p, resources) for p in parts)
    if "Fn::GetAtt" in value:
        target, _ = value["Fn::GetAtt"]
        kind = resources[target]["Type"]
        if kind == "AWS::Lambda::Function":
            return f"arn:aws:lambda:us-west-2:{ACCOUNT}:function:{target}"
        return f"arn:aws:iam::{ACCOUNT}:role/{target}"
    return {k: _resolve(v, resources) for k, v in value.items()}


@pytest.fixture(scope="module")
def guard() -> tuple[dict, dict]:
    stack = cdk.Stack(new_app(), "S", env=cdk.Environment(account=ACCOUNT, region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
    cluster = TrainingEksCluster(
        stack, "Cluster", vpc=vpc, props=TrainingEksClusterProps(kubectl_provider_guard=True)
    )
    assert cluster.kubectl_provider_guard is not None
    resources = Template.from_stack(stack).to_json()["Resources"]
    (policy,) = [r for r in resources.values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    return _resolve(policy["Properties"]["PolicyDocument"], resources), resources


def _ids(resources: dict, kind: str, word: str) -> list[str]:
    return [k for k, r in resources.items() if r["Type"] == kind and word in k]


def test_nobody_but_the_deploys_runs_or_changes_the_provider(guard) -> None:
    policy, resources = guard
    (handler,) = _ids(resources, "AWS::Lambda::Function", "KubectlProviderHandler")
    (framework,) = _ids(resources, "AWS::Lambda::Function", "frameworkonEvent")
    (framework_role,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::IAM::Role" and "frameworkonEventServiceRole" in k
    ]
    framework_role_arn = f"arn:aws:iam::{ACCOUNT}:role/{framework_role}"
    for function in (handler, framework):
        arn = f"arn:aws:lambda:us-west-2:{ACCOUNT}:function:{function}"
        for action in KUBECTL_PROVIDER_GUARDED_ACTIONS:
            for target in (arn, f"{arn}:live"):
                refused = denied(policy, action, target, {"aws:PrincipalArn": OTHER})
                assert refused == ["NoKubectlProviderInvokeOrChange"], (action, target)
                assert denied(policy, action, target, {"aws:PrincipalArn": DEPLOY}) == []
        # The framework invokes the handler.
        context = {"aws:PrincipalArn": framework_role_arn}
        assert denied(policy, "lambda:InvokeFunction", arn, context) == []
    # Reading the functions stays with IAM.
    arn = f"arn:aws:lambda:us-west-2:{ACCOUNT}:function:{handler}"
    assert denied(policy, "lambda:GetFunction", arn, {"aws:PrincipalArn": OTHER}) == []


def test_the_handler_role_cannot_be_passed_to_another_function(guard) -> None:
    policy, resources = guard
    (role,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::IAM::Role" and "KubectlProviderHandlerServiceRole" in k
    ]
    role_arn = f"arn:aws:iam::{ACCOUNT}:role/{role}"
    assert denied(policy, "iam:PassRole", role_arn, {"aws:PrincipalArn": OTHER}) == [
        "NoKubectlProviderRoleForOtherFunctions"
    ]
    assert denied(policy, "iam:PassRole", role_arn, {"aws:PrincipalArn": DEPLOY}) == []


def test_no_sessions_on_the_clusters_nodes(guard) -> None:
    """Session Manager on the nodes is break-glass: the guard refuses StartSession on instances
    tagged with this cluster's name (EKS tags managed node-group instances), not on others."""
    policy, resources = copy.deepcopy(guard)
    (cluster,) = [k for k, r in resources.items() if r["Type"] == "AWS::EKS::Cluster"]
    (statement,) = [s for s in policy["Statement"] if s["Sid"] == "NoSessionsOnClusterNodes"]
    assert statement["Condition"] == {
        "StringEquals": {"ssm:resourceTag/eks:cluster-name": {"Ref": cluster}}
    }
    node = f"arn:aws:ec2:us-west-2:{ACCOUNT}:instance/i-0123456789abcdef0"
    context = {"aws:PrincipalArn": OTHER, "ssm:resourceTag/eks:cluster-name": "c"}
    # The cluster's name, as CloudFormation resolves the Ref.
    statement["Condition"]["StringEquals"]["ssm:resourceTag/eks:cluster-name"] = "c"
    assert denied(policy, "ssm:StartSession", node, context) == ["NoSessionsOnClusterNodes"]
    context["ssm:resourceTag/eks:cluster-name"] = "another-cluster"
    assert denied(policy, "ssm:StartSession", node, context) == []
