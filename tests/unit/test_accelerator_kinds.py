"""The accelerator kinds of ml_platform.instances are what the node groups, the stacks and the
device plugins actually use, and the control-plane rules are shared per app only."""

from __future__ import annotations

import importlib
from typing import Any

import aws_cdk as cdk
import cdk8s
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from ml_platform.app import new_app
from ml_platform.constructs.trainium import TrainiumNodeGroup
from ml_platform.instances import ACCELERATORS, GPU, TRAINIUM, AcceleratorKind
from ml_platform.k8s_names import NODE_ROLE_LABEL
from ml_platform.stacks.accelerators import GpuNodesStack, TrainiumNodesStack
from tests.support import SynthesizedPlatform


def test_every_kind_is_listed_once_by_its_label() -> None:
    assert ACCELERATORS == {"trainium": TRAINIUM, "gpu": GPU}


@pytest.mark.parametrize("stack_class", [TrainiumNodesStack, GpuNodesStack])
def test_each_node_stack_builds_its_kind(
    synth: SynthesizedPlatform, stack_class: type[TrainiumNodesStack | GpuNodesStack]
) -> None:
    kind = stack_class.kind
    assert synth.stack_name(stack_class.SHORT_NAME) in {s.stack_name for s in synth.platform.stacks}
    (group,) = [
        r["Properties"]
        for r in synth.template_json(stack_class.SHORT_NAME)["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    ]
    assert group["AmiType"] == kind.ami_type
    assert group["Labels"][NODE_ROLE_LABEL] == kind.node_role
    assert group["Taints"] == [{"Key": kind.taint_key, "Value": "true", "Effect": "NO_SCHEDULE"}]


def _plugin_pod_spec(kind: AcceleratorKind) -> dict[str, Any]:
    """The plugin pod's placement: its cdk8s chart's DaemonSet, or the ``devicePlugin`` values
    of the vendor's Helm chart, which its DaemonSet template copies (Neuron's)."""
    module, name = kind.device_plugin_chart.split(":")
    source = getattr(importlib.import_module(module), name)
    if isinstance(source, type) and issubclass(source, cdk8s.Chart):
        chart = source(cdk8s.App(), "plugin")
        (daemon_set,) = [o for o in chart.to_json() if o["kind"] == "DaemonSet"]
        return dict(daemon_set["spec"]["template"]["spec"])
    return dict(source(sorted(kind.instance_types))["devicePlugin"])


@pytest.mark.parametrize("kind", [TRAINIUM, GPU], ids=lambda k: k.node_role)
def test_the_kinds_device_plugin_tolerates_its_taint(kind: AcceleratorKind) -> None:
    """The plugin must run on the tainted nodes, or the device is never advertised."""
    spec = _plugin_pod_spec(kind)
    tolerations = {(t["key"], t.get("effect")) for t in spec["tolerations"]}
    assert (kind.taint_key, "NoSchedule") in tolerations
    others = {k.taint_key for k in ACCELERATORS.values()} - {kind.taint_key}
    assert not {key for key, _ in tolerations} & others


@pytest.mark.parametrize("kind", [TRAINIUM, GPU], ids=lambda k: k.node_role)
def test_the_kinds_ami_type_is_an_eks_ami_type(kind: AcceleratorKind) -> None:
    """The record holds the API's spelling; aws_eks_v2 names the same type in upper case."""
    assert eks.NodegroupAmiType[kind.ami_type.upper()].name == kind.ami_type.upper()


def _two_node_groups_in(app: cdk.App) -> int:
    stack = cdk.Stack(app, "Nodes", env=cdk.Environment(account="111122223333", region="us-east-1"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a", "us-east-1f"])
    efa = ec2.SecurityGroup(stack, "Efa", vpc=vpc)
    cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name="c",
        vpc=vpc,
        cluster_security_group_id="sg-0123456789abcdef0",
    )
    for name in ("TrnA", "TrnB"):
        TrainiumNodeGroup(
            stack, name, cluster=cluster, subnet=vpc.private_subnets[0], security_group=efa
        )
    resources = Template.from_stack(stack).to_json()["Resources"]
    return sum(
        r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and r["Properties"]["GroupId"] != r["Properties"]["SourceSecurityGroupId"]  # not EFA's
        for r in resources.values()
    )


def test_control_plane_rules_are_shared_within_an_app_and_never_across_apps() -> None:
    """Two node groups on the same groups share one set of six rules (EC2 rejects a duplicate
    rule); a second app starts with none of the first app's rules."""
    assert _two_node_groups_in(new_app()) == 6
    assert _two_node_groups_in(new_app()) == 6
