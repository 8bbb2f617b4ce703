"""Accelerator node groups in stacks of their own: a capacity failure rolls back only them."""

from __future__ import annotations

import json

import pytest

from ml_platform.config import Settings, SettingsError
from tests.support import SynthesizedPlatform
from tests.unit.conftest import CAPACITY_BLOCK

NODE_STACKS = {"TrainiumNodes": "AL2023_x86_64_NEURON", "GpuNodes": "AL2023_x86_64_NVIDIA"}


def _node_groups(synth: SynthesizedPlatform, short: str) -> list[dict]:
    return [
        r["Properties"]
        for r in synth.template_json(short)["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    ]


def test_each_accelerator_node_group_has_its_own_stack(synth: SynthesizedPlatform) -> None:
    for short, ami in NODE_STACKS.items():
        assert [g["AmiType"] for g in _node_groups(synth, short)] == [ami]
    # The system and training-helper groups (docs/training.md, "Where the pods run").
    assert [g["AmiType"] for g in _node_groups(synth, "TrainingCluster")] == [
        "AL2023_x86_64_STANDARD"
    ] * 2


def test_node_stacks_depend_on_the_cluster_stack_never_the_reverse(
    synth: SynthesizedPlatform,
) -> None:
    manifest = json.loads((synth.outdir / "manifest.json").read_text())["artifacts"]
    cluster = synth.stack_name("TrainingCluster")
    for short in NODE_STACKS:
        assert cluster in manifest[synth.stack_name(short)]["dependencies"]
        assert synth.stack_name(short) not in manifest[cluster].get("dependencies", [])
    # The cluster's template imports nothing from the node stacks, so either can be deleted,
    # rolled back or redeployed on its own.
    text = json.dumps(synth.template_json("TrainingCluster"))
    for short in NODE_STACKS:
        assert synth.stack_name(short) + ":" not in text
    # Each node stack is small; far from the 500-resource limit.
    for short in NODE_STACKS:
        assert len(synth.template_json(short)["Resources"]) <= 20


def test_node_stacks_take_the_cluster_by_import(synth: SynthesizedPlatform) -> None:
    for short in NODE_STACKS:
        (group,) = _node_groups(synth, short)
        assert group["ClusterName"]["Fn::ImportValue"].startswith(
            synth.stack_name("TrainingCluster") + ":"
        )


def test_capacity_block_and_scale_to_zero_from_settings(trn1n: SynthesizedPlatform) -> None:
    (lt,) = [
        r["Properties"]["LaunchTemplateData"]
        for r in trn1n.template_json("TrainiumNodes")["Resources"].values()
        if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    assert lt["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert lt["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": CAPACITY_BLOCK}
    }
    (group,) = _node_groups(trn1n, "TrainiumNodes")
    assert group["CapacityType"] == "CAPACITY_BLOCK"
    assert group["ScalingConfig"]["MinSize"] == 0


def test_default_trainium_group_has_no_capacity_reservation(synth: SynthesizedPlatform) -> None:
    (group,) = _node_groups(synth, "TrainiumNodes")
    assert "CapacityType" not in group
    text = json.dumps(synth.template_json("TrainiumNodes"))
    assert "CapacityReservationSpecification" not in text and "InstanceMarketOptions" not in text


@pytest.mark.parametrize(
    ("trainium", "expected"),
    [
        (
            {"capacity_reservation_id": "cr-123"},
            "trainium.capacity_reservation_id = 'cr-123': expected a capacity reservation id",
        ),
        (
            {"capacity_block_id": "cb-0123456789abcdef0"},
            "trainium.capacity_block_id = 'cb-0123456789abcdef0': expected a capacity reservation",
        ),
        (
            {
                "capacity_reservation_id": "cr-0123456789abcdef0",
                "capacity_block_id": "cr-02168da1478b509e0",
            },
            "trainium.capacity_reservation_id = 'cr-0123456789abcdef0', "
            "trainium.capacity_block_id = 'cr-02168da1478b509e0': expected at most one",
        ),
        (
            {"capacity_block_id": "cr-02168da1478b509e0", "placement_group": "pg"},
            "trainium.placement_group = 'pg', trainium.capacity_block_id = "
            "'cr-02168da1478b509e0': a Capacity Block places its instances itself; expected no "
            "placement group",
        ),
        (
            {"placement_group": "pg"},
            "trainium.placement_group = 'pg': names the group a capacity reservation was created "
            "in, so it needs capacity_reservation_id (without one the platform makes its own "
            "cluster placement group)",
        ),
        (
            {"capacity_reservation_id": "cr-0123456789abcdef0", "placement_group": "x" * 256},
            "trainium.placement_group = 'xxx",
        ),
    ],
)
def test_capacity_settings_are_validated(trainium: dict, expected: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_context({"trainium": trainium})
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_scale_to_zero_settings_are_accepted() -> None:
    settings = Settings.from_context(
        {
            "trainium": {"min_nodes": 0, "capacity_reservation_id": "cr-0123456789abcdef0"},
            "triton_on_eks": {"min_gpu_nodes": 0},
        }
    )
    assert settings.trainium.min_nodes == 0
    assert settings.triton_on_eks.min_gpu_nodes == 0
    with pytest.raises(SettingsError, match=r"triton_on_eks.min_gpu_nodes = 2: expected 0 to"):
        Settings.from_context({"triton_on_eks": {"min_gpu_nodes": 2, "gpu_nodes": 1}})


def test_capacity_block_defaults_min_nodes_to_zero() -> None:
    """EKS updates a node group on a Capacity Block only at desired size 0, so the group must
    be able to get there (capacity-blocks-mng)."""
    block = Settings.from_context({"trainium": {"capacity_block_id": "cr-02168da1478b509e0"}})
    assert (block.trainium.min_nodes, block.trainium.nodes) == (0, 2)
    odcr = Settings.from_context(
        {
            "trainium": {
                "capacity_reservation_id": "cr-0123456789abcdef0",
                "placement_group": "odcr-pg",
            }
        }
    )
    assert (odcr.trainium.min_nodes, odcr.trainium.placement_group) == (2, "odcr-pg")
    explicit = Settings.from_context(
        {"trainium": {"capacity_block_id": "cr-02168da1478b509e0", "min_nodes": 1}}
    )
    assert explicit.trainium.min_nodes == 1


def _trainium_stack(trainium: dict):
    from aws_cdk.assertions import Annotations, Match

    stack = _built_trainium_stack(trainium)
    return Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("BERT recipe"))


def _built_trainium_stack(trainium: dict, kubernetes_version: str = "1.35"):
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks

    from ml_platform.app import new_app
    from ml_platform.stacks.accelerators import TrainiumNodesStack

    app = new_app()
    env = cdk.Environment(account="123456789012", region="us-west-2")
    base = cdk.Stack(app, "Base", env=env)
    vpc = ec2.Vpc(base, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster.from_cluster_attributes(
        base, "Cluster", cluster_name="c", vpc=vpc, cluster_security_group_id="sg-0123456789abcdef0"
    )
    stack = TrainiumNodesStack(
        app,
        "Trn",
        settings=Settings.from_context({"trainium": trainium}).trainium,
        cluster=cluster,
        trainium_subnet=vpc.private_subnets[0],
        training_nodes=ec2.SecurityGroup(base, "Efa", vpc=vpc),
        kubernetes_version=kubernetes_version,
        env=env,
    )
    return stack


def test_a_node_count_the_bert_recipe_refuses_warns_at_synth() -> None:
    """`make synth` refuses 3 nodes when it renders the manifests; `cdk deploy` renders none,
    so the stack warns instead of deploying silently."""
    (warning,) = _trainium_stack({"nodes": 3, "max_nodes": 3, "min_nodes": 3})
    text = warning.entry.data
    assert text.startswith("trainium.nodes = 3: the BERT recipe keeps its global batch")
    assert "expected one of [1, 2, 4, 8, 16, 32]" in text
    assert "the BERT training manifests (make synth, dist/k8s) are refused" in text
    assert _trainium_stack({"nodes": 4, "max_nodes": 4, "min_nodes": 4}) == []


# --- the Neuron node image, pinned with the training image -----------------------------------


def _neuron_warnings(stack) -> list[str]:
    from aws_cdk.assertions import Annotations, Match

    found = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("neuronStackChangedApart")
    )
    return [w.entry.data for w in found]


def _release_version(stack) -> str | None:
    from aws_cdk.assertions import Template

    (group,) = Template.from_stack(stack).find_resources("AWS::EKS::Nodegroup").values()
    return group["Properties"].get("ReleaseVersion")


@pytest.mark.parametrize(
    ("kubernetes_version", "release"), [("1.35", "1.35.4-20260505"), ("1.34", "1.34.7-20260505")]
)
def test_trainium_nodes_get_the_ami_release_of_the_images_neuron_sdk(
    kubernetes_version: str, release: str
) -> None:
    stack = _built_trainium_stack({}, kubernetes_version)
    assert _release_version(stack) == release
    assert _neuron_warnings(stack) == []


def test_an_ami_release_changed_apart_from_the_image_warns_at_synth() -> None:
    stack = _built_trainium_stack({"ami_release_version": "1.35.6-20260714"})
    assert _release_version(stack) == "1.35.6-20260714"
    (warning,) = _neuron_warnings(stack)
    assert warning.startswith("trainium.ami_release_version = '1.35.6-20260714': the Neuron")
    assert "(1.35.4-20260505, AMI release v20260505 with aws-neuronx-dkms 2.27.4.0" in warning
    assert "Neuron SDK 2.29.1" in warning


def test_latest_pins_no_ami_release_and_warns() -> None:
    stack = _built_trainium_stack({"ami_release_version": "latest"})
    assert _release_version(stack) is None
    assert len(_neuron_warnings(stack)) == 1


@pytest.mark.parametrize("value", ["1.35", "v20260625", "1.35.6-2026062", "newest"])
def test_ami_release_version_setting_is_validated(value: str) -> None:
    with pytest.raises(SettingsError, match=r"trainium\.ami_release_version"):
        Settings.from_context({"trainium": {"ami_release_version": value}})


def test_training_only_is_one_setting_away(tmp_path) -> None:
    """features.training_only: the training cluster and the Trainium nodes, no SageMaker
    endpoint, no GPU node group (docs/training.md, "Training only")."""
    from tests.support import synthesize

    only = synthesize(tmp_path / "cdk.out", {"features": {"training_only": True}}, nag=False)
    names = sorted(s.stack_name.removeprefix("MlPlatform-") for s in only.platform.stacks)
    assert names == ["Network", "Storage", "TrainingCluster", "TrainiumNodes"]
    resources = only.template_json("TrainingCluster")["Resources"].values()
    assert not [r for r in resources if r["Type"] == "AWS::SageMaker::Endpoint"]
    groups = [r for r in resources if r["Type"] == "AWS::EKS::Nodegroup"]
    # The system and training-helper groups: the helpers' group exists with training.
    assert [g["Properties"]["AmiType"] for g in groups] == ["AL2023_x86_64_STANDARD"] * 2


def test_node_stacks_built_alone_have_no_session_manager_policy() -> None:
    """TrainiumNodesStack's node_ssm_access defaults to false (secure by default, as the
    setting): its node role carries exactly the worker and ECR pull-only policies."""
    from aws_cdk.assertions import Template

    stack = _built_trainium_stack({})
    roles = [
        r["Properties"]["ManagedPolicyArns"]
        for r in Template.from_stack(stack).find_resources("AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "ec2.amazonaws.com"}
    ]
    assert roles == [
        [
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{name}"]]}
            for name in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
        ]
    ]
