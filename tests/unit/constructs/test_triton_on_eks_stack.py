"""Triton on EKS inside TrainingClusterStack: GPU nodes, Pod Identity, charts, and the switch."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from ml_platform.app import new_app
from ml_platform.constructs.triton_eks import TritonOnEks, TritonOnEksProps
from ml_platform.triton.kinds import ARCHIVE_MODELS
from tests.helpers.manifests import all_objects
from tests.helpers.triton_eks_support import server_argv
from tests.support import SynthesizedPlatform, synthesize


@pytest.fixture(scope="module")
def without_triton(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedPlatform:
    return synthesize(
        tmp_path_factory.mktemp("cdk.out.no-triton"),
        {"features": {"triton_on_eks": False}},
        nag=False,
    )


def triton_objects(template: dict) -> dict[tuple[str, str], dict]:
    return {
        (o["kind"], o["metadata"]["name"]): o
        for o in all_objects(template)
        if o["metadata"].get("namespace") == "triton"
        or o["metadata"]["name"] in ("triton", "nvidia-device-plugin")
    }


def test_gpu_node_group(synth: SynthesizedPlatform) -> None:
    synth.template("GpuNodes").has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "AmiType": "AL2023_x86_64_NVIDIA",
            "InstanceTypes": ["g5.2xlarge"],
            "Labels": {"ml-platform/node-role": "gpu"},
            "Taints": [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}],
            # Nothing grows the group (no node autoscaler): its maximum is its size.
            "ScalingConfig": {"MinSize": 1, "DesiredSize": 1, "MaxSize": 1},
            "LaunchTemplate": Match.object_like({}),
        },
    )


def test_pod_identity_role_reads_only_the_model_prefix(synth: SynthesizedPlatform) -> None:
    t = synth.template("TrainingCluster")
    template = synth.template_json("TrainingCluster")
    (association_id,) = [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["ServiceAccount"] == "triton"
    ]
    association = template["Resources"][association_id]["Properties"]
    assert association["Namespace"] == "triton"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]["Properties"]
    principal = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert principal["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(principal["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    policies = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]
    ]
    (policy,) = policies
    get, listing = policy["PolicyDocument"]["Statement"]
    assert get["Action"] == "s3:GetObject"
    assert get["Resource"]["Fn::Join"][1][-1] == "/models/*"
    # Listing, for logical archive names resolved at pod start: the prefix only.
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    t.has_output("ClusterName", Match.any_value())


def test_charts_are_applied_with_exactly_the_configured_archives(
    synth: SynthesizedPlatform,
) -> None:
    objects = triton_objects(synth.template_json("TrainingCluster"))
    assert {k for k in objects} >= {
        ("Namespace", "triton"),
        ("ServiceAccount", "triton"),
        ("Deployment", "triton"),
        ("Service", "triton"),
        ("PodDisruptionBudget", "triton"),
        ("DaemonSet", "nvidia-device-plugin"),
    }
    pod = objects[("Deployment", "triton")]["spec"]["template"]["spec"]
    fetch = pod["initContainers"][0]["command"][2]
    archives = synth.platform.settings.triton_on_eks.archives
    # Logical names (the default): each listed under its own key prefix, newest copied.
    prefixes = re.findall(r"--prefix (\S+) ", fetch)
    assert prefixes == [f"models/{a}-v" for a in archives]
    assert "--model-control-mode=none" in server_argv(pod["containers"][0])
    assert pod["containers"][0]["image"].endswith(
        f":{synth.platform.settings.inference.triton_version}-py3"
    )


def test_switch_off_removes_gpu_nodes_plugin_and_triton(
    synth: SynthesizedPlatform, without_triton: SynthesizedPlatform
) -> None:
    on, off = (
        synth.template_json("TrainingCluster"),
        without_triton.template_json("TrainingCluster"),
    )
    # The GPU node group has a stack of its own, which the switch removes.
    assert synth.platform.gpu_nodes is not None and without_triton.platform.gpu_nodes is None
    assert not (without_triton.outdir / f"{synth.stack_name('GpuNodes')}.template.json").exists()
    assert triton_objects(on) and not triton_objects(off)

    def service_accounts(t):
        return [
            r["Properties"]["ServiceAccount"]
            for r in t["Resources"].values()
            if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        ]

    assert "triton" in service_accounts(on) and "triton" not in service_accounts(off)
    assert without_triton.platform.training_cluster.triton is None


def _cluster_and_bucket():
    """A stack with an eks_v2 cluster (no Auto Mode, kubectl layer 1.35) and an imported
    model bucket, for TritonOnEks built outside the platform."""
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-west-2a", "us-west-2b"])
    cluster = eks.Cluster(
        stack,
        "Cluster",
        vpc=vpc,
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(
            kubectl_layer=KubectlV35Layer(stack, "Kubectl")
        ),
    )
    return stack, cluster, s3.Bucket.from_bucket_name(stack, "B", "models")


def test_construct_reports_every_bad_prop_at_once() -> None:
    stack, cluster, bucket = _cluster_and_bucket()
    with pytest.raises(ValueError) as info:
        TritonOnEks(
            stack,
            "Triton",
            cluster=cluster,
            bucket=bucket,
            pod_identity_agent=None,
            props=TritonOnEksProps(
                archives=["custom"],
                gpu_instance_type="p5.48xlarge",
                gpu_nodes=0,
                replicas=0,
                namespace="Bad_Namespace",
            ),
        )
    message = str(info.value)
    for expected in (
        "S/Triton: gpu_instance_type = 'p5.48xlarge': expected one of ['g4dn.",
        "; gpu_nodes = 0: expected 1 to 20; ",
        "; namespace = 'Bad_Namespace': expected an RFC 1123 label",
    ):
        assert expected in message
    # A bad field hides the cross-field rules, as in the settings; with valid fields they run.
    assert "replicas" not in message
    with pytest.raises(ValueError) as info:
        TritonOnEks(
            stack,
            "Triton1",
            cluster=cluster,
            bucket=bucket,
            pod_identity_agent=None,
            props=TritonOnEksProps(archives=["custom"], replicas=0),
        )
    assert str(info.value) == (
        "S/Triton1: replicas = 0: expected 1 to gpu_nodes (1): each replica takes a whole "
        "single-GPU node; models = None: archives ['custom'] are not built-in "
        f"({sorted(ARCHIVE_MODELS)}); name the models Triton should load"
    )
    # The archive list follows the settings' rule (archive_names.parse_refs).
    with pytest.raises(ValueError) as info:
        TritonOnEks(
            stack,
            "Triton2",
            cluster=cluster,
            bucket=bucket,
            pod_identity_agent=None,
            props=TritonOnEksProps(
                archives=["model_tf_dali", "model_tf_dali", "No@v1"],
                node_labels={"ml-platform/node-role": "mine"},
            ),
        )
    message = str(info.value)
    assert "archives[2] = 'No@v1': 'No@v1' is not an archive reference" in message
    assert "archives: ['model_tf_dali'] given more than once" in message
    # The node groups' own rule (_nodegroup.reserved_label_problems), named by this prop.
    assert (
        "node_labels = {'ml-platform/node-role': 'mine'}: 'ml-platform/node-role' is set by this "
        "construct" in message
    )


def test_an_unpatched_release_on_eks_warns_with_the_cves() -> None:
    stack, cluster, bucket = _cluster_and_bucket()

    def warnings(triton_version: str) -> list[str]:
        triton = TritonOnEks(
            stack,
            f"Triton{triton_version.replace('.', '')}",
            cluster=cluster,
            bucket=bucket,
            pod_identity_agent=None,
            props=TritonOnEksProps(
                archives=["model_onnx_python"],
                namespace=f"triton-{triton_version.replace('.', '-')}",
                device_plugin=False,
                gpu_node_group=False,
                triton_version=triton_version,
            ),
        )
        # The release's warning (the images' tag-only warning is tests/unit/test_image_pins').
        return [
            str(e.data)
            for e in triton.node.metadata
            if e.type == "aws:cdk:warning"
            and "imagePinnedByTagOnly" not in str(e.data)
            and "tritonRolloutOutage" not in str(e.data)  # one replica: its own test
        ]

    assert warnings("25.09") == []
    (warning,) = warnings("24.09")
    assert "CVE-2025-23319, CVE-2025-23320, CVE-2025-23334" in warning
    assert "[ack: ml-platform:triton-unpatched-release]" in warning


def _pod_policy(stack: cdk.Stack, triton: TritonOnEks) -> list[dict]:
    policy = triton.role.node.find_child("DefaultPolicy").node.default_child
    return stack.resolve(policy.policy_document.to_json())["Statement"]


def test_a_bucket_construct_grants_the_pods_exactly_what_a_plain_bucket_did() -> None:
    """One grant (ModelArtifactBucket.grant_read_models) for a construct or a plain bucket:
    GetObject under the prefix, ListBucket conditioned to it, nothing else."""
    from ml_platform.constructs.storage import ModelArtifactBucket

    stack, cluster, bucket = _cluster_and_bucket()
    models = ModelArtifactBucket.from_bucket_name(stack, "M", "models", model_prefix="ens/")
    common = {"cluster": cluster, "pod_identity_agent": None}

    def props(namespace: str) -> TritonOnEksProps:
        return TritonOnEksProps(
            archives=["model_onnx_python"],
            device_plugin=False,
            gpu_node_group=False,
            namespace=namespace,
        )

    plain = TritonOnEks(
        stack, "Plain", bucket=bucket, model_prefix="ens/", props=props("a"), **common
    )
    built = TritonOnEks(stack, "Built", bucket=models, props=props("b"), **common)
    arn = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::models"]]}
    expected = [
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {
                "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::models/ens/*"]]
            },
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["ens/*"]}},
            "Effect": "Allow",
            "Resource": arn,
        },
    ]
    assert _pod_policy(stack, plain) == expected
    assert _pod_policy(stack, built) == expected
    assert built.model_bucket is models
    # The chart reads the same bucket and prefix.
    fetch = built.triton_chart.to_json()
    assert any("ens/model_onnx_python-v" in json.dumps(o) for o in fetch)
    with pytest.raises(
        ValueError, match=r"model_prefix = 'other/': the bucket construct's prefix is 'ens/'"
    ):
        TritonOnEks(
            stack, "Clash", bucket=models, model_prefix="other/", props=props("c"), **common
        )


def test_the_device_plugin_is_shared_per_cluster_across_stacks_not_across_apps() -> None:
    """One plugin per cluster in an app, whatever stack asks (a lookup, no tree walk); a
    second app gets its own."""
    stack, cluster, bucket = _cluster_and_bucket()
    other = cdk.Stack(
        stack.node.root, "Other", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    archives = ["model_onnx_python"]
    first = TritonOnEks(
        stack,
        "A",
        cluster=cluster,
        bucket=bucket,
        props=TritonOnEksProps(archives=archives, namespace="a"),
        pod_identity_agent=None,
    )
    second = TritonOnEks(
        other,
        "B",
        cluster=cluster,
        bucket=s3.Bucket.from_bucket_name(other, "Models", "models"),
        props=TritonOnEksProps(archives=archives, namespace="b", gpu_node_group=False),
        pod_identity_agent=None,
    )
    assert first.device_plugin is not None
    assert second.device_plugin is first.device_plugin
    assert first.device_plugin.node.path == "S/A/DevicePlugin/Resource"
    assert second.node.try_find_child("DevicePlugin") is None
    stack2, cluster2, bucket2 = _cluster_and_bucket()
    third = TritonOnEks(
        stack2,
        "C",
        cluster=cluster2,
        bucket=bucket2,
        props=TritonOnEksProps(archives=archives, namespace="c"),
        pod_identity_agent=None,
    )
    assert third.device_plugin is not first.device_plugin
    assert third.device_plugin is not None


@pytest.mark.parametrize(
    "prefix", ["/models/", "models", "a/../", "a//", "mo dels/", "x" * 512 + "/"]
)
def test_every_construct_taking_a_prefix_applies_the_settings_rule(prefix: str) -> None:
    """The bucket, the endpoint and TritonOnEks refuse what inference.model_prefix refuses
    (limits.model_prefix_ok): before, they only checked a leading and a trailing '/'."""

    from ml_platform.constructs.sagemaker_mme import (
        TritonMultiModelEndpoint,
        TritonMultiModelEndpointProps,
    )
    from ml_platform.constructs.storage import ModelArtifactBucket, ModelArtifactBucketProps
    from ml_platform.limits import MODEL_PREFIX_TEXT, model_prefix_ok, shown

    assert not model_prefix_ok(prefix)
    stack, cluster, bucket = _cluster_and_bucket()
    # One rule (the bucket's model_prefix field), worded alike by all three as the settings
    # word it (a long value elided).
    expected = re.escape(f"model_prefix = {shown(prefix)}: {MODEL_PREFIX_TEXT}")
    with pytest.raises(ValueError, match=expected):
        ModelArtifactBucket(stack, "Models", props=ModelArtifactBucketProps(model_prefix=prefix))
    with pytest.raises(ValueError, match=expected):
        TritonMultiModelEndpoint(
            stack,
            "Endpoint",
            bucket=s3.Bucket.from_bucket_name(stack, "Team", "team"),
            model_prefix=prefix,
            props=TritonMultiModelEndpointProps(name="e", archives=["model_tf_dali"]),
        )
    with pytest.raises(ValueError, match=expected):
        TritonOnEks(
            stack,
            "Triton",
            cluster=cluster,
            bucket=bucket,
            model_prefix=prefix,
            pod_identity_agent=None,
            props=TritonOnEksProps(
                archives=["model_onnx_python"], device_plugin=False, gpu_node_group=False
            ),
        )


def test_one_replica_without_surge_warns_and_a_surge_needs_a_spare_node() -> None:
    """replicas 1 with max_surge 0 (the default): every rollout is an outage, said at synth
    with an acknowledgeable warning; max_surge 1 with a spare GPU node removes it; a surge
    without a spare node is refused, by the construct and by the settings."""
    from ml_platform.config import Settings, SettingsError
    from ml_platform.constructs.triton_eks import ROLLOUT_OUTAGE_WARNING

    stack, cluster, bucket = _cluster_and_bucket()
    refs = {"cluster": cluster, "bucket": bucket, "pod_identity_agent": None}
    common = {"archives": ["model_onnx_python"], "device_plugin": False, "gpu_node_group": False}

    def triton(name: str, **props: Any) -> TritonOnEks:
        return TritonOnEks(stack, name, props=TritonOnEksProps(**common, **props), **refs)

    def warnings(construct) -> list[str]:
        return [
            str(m.data)
            for m in construct.node.metadata
            if m.type == "aws:cdk:warning" and ROLLOUT_OUTAGE_WARNING in str(m.data)
        ]

    single = triton("Single", namespace="single")
    (warning,) = warnings(single)
    assert warning.startswith("replicas=1 with max_surge=0: every rollout")
    assert f"[ack: {ROLLOUT_OUTAGE_WARNING}]" in warning
    surged = triton("Surged", namespace="surged", gpu_nodes=2, max_surge=1)
    assert warnings(surged) == []
    assert surged.triton_chart.props.max_surge == 1
    two = triton("Two", namespace="two", gpu_nodes=2, replicas=2)
    assert warnings(two) == []
    with pytest.raises(
        ValueError,
        match=r"^S/NoSpare: max_surge = 1: expected replicas \+ max_surge <= gpu_nodes "
        r"\(1 \+ 1 > 1\): a surge pod needs a spare single-GPU node$",
    ):
        triton("NoSpare", namespace="nospare", max_surge=1)
    with pytest.raises(ValueError, match=r"^S/Negative: max_surge = -1: expected 0 to 20$"):
        triton("Negative", namespace="negative", max_surge=-1)
    with pytest.raises(SettingsError) as error:
        Settings.from_context({"triton_on_eks": {"max_surge": 1}})
    assert error.value.problems == [
        "triton_on_eks.max_surge = 1: expected replicas + max_surge <= gpu_nodes (1 + 1 > 1): a "
        "surge pod needs a spare single-GPU node"
    ]
    Settings.from_context({"triton_on_eks": {"max_surge": 1, "gpu_nodes": 2}})


def test_the_props_object_holds_every_rule_and_the_construct_keeps_it() -> None:
    """TritonOnEks's rules live with its props: checked without building anything, all at
    once, and the models to load come from the same object."""
    from ml_platform.constructs._props import shared_problems
    from ml_platform.constructs.triton_eks import TritonOnEksProps
    from ml_platform.props.triton_eks import TritonOnEksPropsBase

    bad = TritonOnEksProps(
        archives=["custom"],
        gpu_instance_type="p5.48xlarge",
        gpu_nodes=0,
        max_surge=-1,
        models=[],
        namespace="Bad_Namespace",
        node_labels={"ml-platform/node-role": "x"},
    )
    shared = shared_problems(bad, TritonOnEksPropsBase)
    assert [p.split(" = ", 1)[0] for p in shared] == ["gpu_instance_type", "gpu_nodes", "max_surge"]
    assert [p.split(" ", 1)[0] for p in bad.construct_problems(model_prefix="m/")] == [
        "models",
        "namespace",
        "node_labels",
    ]
    assert TritonOnEksProps(archives=["x"], models=["a", "a"]).construct_problems(
        model_prefix="m/"
    ) == ["models: ['a'] appear more than once"]
    good = TritonOnEksProps(archives=["model_onnx_python"])
    assert good.construct_problems(model_prefix="models/") == []
    assert shared_problems(good, TritonOnEksPropsBase) == []
    assert good.load_models and good.load_models == list(good.load_models)
    stack, cluster, bucket = _cluster_and_bucket()
    built = TritonOnEks(
        stack,
        "Kept",
        cluster=cluster,
        bucket=bucket,
        pod_identity_agent=None,
        props=TritonOnEksProps(
            archives=["model_onnx_python"], device_plugin=False, gpu_node_group=False
        ),
    )
    assert built.props.archives == ("model_onnx_python",) and not built.props.gpu_node_group
    assert list(built.triton_chart.props.models) == built.props.load_models == good.load_models
