"""The Kubernetes objects the training cluster applies: present in the cluster's manifests,
valid for Kubernetes 1.35, and placed as the design says."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.instances import TRAINIUM_INSTANCES
from ml_platform.k8s_charts import neuron
from ml_platform.k8s_charts.fsx_storage import TrainingStorageChart
from ml_platform.k8s_charts.volcano import VolcanoQueueChart
from ml_platform.stacks.training_cluster import ClusterChartValues
from ml_platform.versions import (
    KUBERNETES_VERSIONS,
    NEURON_DEVICE_PLUGIN_IMAGE,
    NEURON_HELM_CHART_VERSION,
    VOLCANO_HELM_CHART_VERSION,
    efa_device_plugin_image,
)
from tests.helpers.manifests import (
    FILE_SYSTEM_DNS,
    FILE_SYSTEM_ID,
    FILE_SYSTEM_MOUNT,
    HELM_CHART,
    all_objects,
    key,
    manifests_by_id,
    token_free_charts,
    without_prune_labels,
)
from tests.support import SynthesizedPlatform

KUBERNETES = "1.35.0"
NEURON_PLUGIN_REPO = "public.ecr.aws/neuron/neuron-device-plugin"
# As the public record shows it pulled (ml_platform.image_pins.PUBLIC_DIGESTS).
NEURON_PLUGIN_DIGEST = "sha256:64d7473b547bec24d3683adeba5d98a17be1929b263e99695607c7e31270faf8"
# What aws-cdk's own bundled Neuron plugin manifest is recognizable by.
AWS_CDK_NEURON_PLUGIN_MARKERS = (
    "neuron-device-plugin-daemonset",
    "neuron-device-plugin-ds",
    "k8s-neuron-device-plugin-ctr",
    "790709498068",
)


@pytest.fixture(scope="module")
def deployed(synth: SynthesizedPlatform) -> dict[str, list[dict[str, Any]]]:
    """Manifest objects per chart name (the manifest resource's construct id)."""
    by_id = manifests_by_id(synth.template_json("TrainingCluster"))
    return {re.sub(r"^Cluster(.*)[0-9A-F]{8}$", r"\1", k): objects for k, objects in by_id.items()}


@pytest.fixture(scope="module")
def copies(synth: SynthesizedPlatform) -> dict[str, list[dict[str, Any]]]:
    return token_free_charts(synth.platform.settings)


def test_every_chart_is_applied_once_and_complete(deployed, copies) -> None:
    # Charts of Triton on EKS (features.triton_on_eks, on by default), applied in the
    # TritonOnEks construct's own scope; test_triton_charts.py and
    # tests/unit/constructs/test_triton_on_eks_stack.py check them.
    triton = {k for k in deployed if k.startswith("Triton")}
    assert len(triton) == 2
    assert (
        set(deployed) - triton
        == set(copies)
        == {
            "Storage",
            "NeuronPluginPolicies",
            "EfaPlugin",
            "VolcanoQueue",
            "TrainingNamespacePolicy",
            "TrainingNetworkPolicies",
            "SystemNetworkPolicies",
        }
    )
    for name, objects in copies.items():
        assert [key(o) for o in deployed[name]] == [key(o) for o in objects], name


def test_deployed_objects_equal_the_token_free_copies_apart_from_tokens(deployed, copies) -> None:
    for name, objects in copies.items():
        for live, copy in zip(deployed[name], objects, strict=True):
            live = json.dumps(without_prune_labels(live), sort_keys=True)
            live = re.sub(r"<import:[^>]*>", "<fs>", live).replace("<token>", "amazonaws.com")
            copy = json.dumps(copy, sort_keys=True)
            copy = copy.replace(FILE_SYSTEM_ID, "<fs>").replace(FILE_SYSTEM_MOUNT, "<fs>")
            assert live == copy, name


def test_file_system_tokens_survive_into_the_manifest(deployed) -> None:
    volume = next(o for o in deployed["Storage"] if o["kind"] == "PersistentVolume")
    csi = volume["spec"]["csi"]
    storage = "<import:MlPlatform-Storage:ExportsOutput"
    assert csi["volumeHandle"].startswith(f"{storage}RefLustreDCDAF745")
    assert re.match(
        rf"^{storage}RefLustreDCDAF745\w*>\.fsx\.us-west-2\.<token>$",
        csi["volumeAttributes"]["dnsname"],
    )
    assert csi["volumeAttributes"]["mountname"].startswith(
        f"{storage}FnGetAttLustreDCDAF745LustreMountName"
    )


def test_every_object_validates_against_kubernetes_1_35(copies) -> None:
    checked = 0
    for objects in copies.values():
        for obj in objects:
            if obj["apiVersion"].startswith("scheduling.volcano.sh/"):
                continue  # a CRD object: checked against Volcano's schema below
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
            checked += 1
    # 4 + the training namespace's 5 NetworkPolicies + the Neuron plugin's 2 admission
    # policies and bindings + the system namespaces' 3 allow-all policies and 2 namespaces
    # + the training-namespace admission policy and its binding (the Neuron plugin's own
    # objects come from its Helm chart)
    assert checked == 20


def test_validation_catches_a_broken_object(copies) -> None:
    (daemon_set,) = [o for o in copies["EfaPlugin"] if o["kind"] == "DaemonSet"]
    broken = json.loads(json.dumps(daemon_set))
    broken["spec"]["replica"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_namespaces_are_set_per_object(deployed, synth: SynthesizedPlatform) -> None:
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "PersistentVolume",
        "Queue",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    training = synth.platform.settings.training.namespace
    for name, objects in deployed.items():
        for obj in objects:
            namespace = obj["metadata"].get("namespace")
            assert (namespace is None) == (obj["kind"] in cluster_scoped), (name, key(obj))
            assert namespace in (
                None,
                "kube-system",
                training,
                "triton",
                "volcano-system",
                "amazon-cloudwatch",
            ), (name, key(obj))
            if namespace in ("volcano-system", "amazon-cloudwatch"):  # strict mode's allow-all
                assert (name, obj["kind"]) == ("SystemNetworkPolicies", "NetworkPolicy")


# --- aws-cdk's own Neuron plugin is not applied -------------------------------------------


def test_only_neurons_chart_installs_a_neuron_plugin(synth: SynthesizedPlatform) -> None:
    """Neither aws-cdk's bundled plugin nor a hand-written one: no manifest of any stack holds a
    Neuron plugin DaemonSet; the only plugin is the Helm release of Neuron's chart."""
    releases = []
    for path in synth.template_paths():
        text = path.read_text()
        for marker in AWS_CDK_NEURON_PLUGIN_MARKERS:
            assert marker not in text, (path.name, marker)
        template = json.loads(text)
        assert [
            o
            for o in all_objects(template)
            if o["kind"] == "DaemonSet"
            and any(
                c["image"].startswith(NEURON_PLUGIN_REPO)
                for c in o["spec"]["template"]["spec"]["containers"]
            )
        ] == []
        releases += [
            r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == HELM_CHART and r["Properties"].get("Chart") == "neuron-helm-chart"
        ]
    (release,) = releases
    assert json.loads(release["Values"])["devicePlugin"]["image"] == {
        "repository": NEURON_PLUGIN_REPO,
        # The digest a public source states rides in the tag (PUBLIC_DIGESTS).
        "tag": NEURON_DEVICE_PLUGIN_IMAGE.rsplit(":", 1)[1] + "@" + NEURON_PLUGIN_DIGEST,
        "pullPolicy": "IfNotPresent",
    }


# --- device plugins -----------------------------------------------------------------------


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return ds["spec"]["template"]["spec"]


def _instance_types(pod: dict[str, Any]) -> list[str]:
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    (types,) = [
        e for e in term["matchExpressions"] if e["key"] == "node.kubernetes.io/instance-type"
    ]
    assert types["operator"] == "In"
    (compute,) = [
        e for e in term["matchExpressions"] if e["key"] == "eks.amazonaws.com/compute-type"
    ]
    assert compute["operator"] == "NotIn" and "auto" in compute["values"]
    return types["values"]


def _helm_release(template: dict[str, Any], chart: str) -> tuple[str, dict[str, Any]]:
    ((logical_id, props),) = [
        (k, r["Properties"])
        for k, r in template["Resources"].items()
        if r["Type"] == HELM_CHART and r["Properties"].get("Chart") == chart
    ]
    return logical_id, props


def test_neuron_helm_release(synth: SynthesizedPlatform) -> None:
    """Neuron's chart by version from its OCI repository (no chart fetched here), in
    kube-system as release ``neuron``, waiting for its DaemonSet."""
    template = synth.template_json("TrainingCluster")
    release_id, props = _helm_release(template, "neuron-helm-chart")
    assert {
        k: v for k, v in props.items() if k not in ("ServiceToken", "ClusterName", "Values")
    } == {
        "Release": "neuron",
        "Chart": "neuron-helm-chart",
        "Repository": "oci://public.ecr.aws/neuron/neuron-helm-chart",
        "Version": NEURON_HELM_CHART_VERSION,
        "Namespace": "kube-system",
        "CreateNamespace": True,
        "Wait": True,
    }
    assert NEURON_HELM_CHART_VERSION == "1.10.0"
    assert json.loads(props["Values"]) == NEURON_VALUES
    # The policies and the system namespaces' NetworkPolicies exist before the plugin runs.
    depends = template["Resources"][release_id]["DependsOn"]
    assert {re.sub(r"[0-9A-F]{8}$", "", d) for d in depends} >= {
        "ClusterNeuronPluginPolicies",
        "ClusterSystemNetworkPolicies",
    }


# The values, exactly: every key is one the chart 1.10.0 reads (templates/_helpers.tpl,
# templates/device-plugin/*.yaml; its values as `helm show values` prints them).
NEURON_VALUES = {
    "neuronInstances": ["trn1.32xlarge"],
    "devicePlugin": {
        "enabled": True,
        "nameOverride": "neuron-device-plugin",
        # Not 0.1.0's "neuron-device-plugin": those objects are deleted only after the release
        # is installed, and Helm does not adopt objects it did not create.
        "fullnameOverride": "ml-platform-neuron-device-plugin",
        "namespaceOverride": "kube-system",
        "serviceAccount": {"create": True, "name": "ml-platform-neuron-device-plugin"},
        "image": {
            "repository": "public.ecr.aws/neuron/neuron-device-plugin",
            "tag": f"2.32.0.0@{NEURON_PLUGIN_DIGEST}",
            "pullPolicy": "IfNotPresent",
        },
        "priorityClassName": "system-node-critical",
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "In",
                                    "values": ["trn1.32xlarge"],
                                },
                                {
                                    "key": "eks.amazonaws.com/compute-type",
                                    "operator": "NotIn",
                                    "values": ["fargate", "hybrid", "auto"],
                                },
                            ]
                        }
                    ]
                }
            }
        },
        "env": [
            {"name": "KUBECONFIG", "value": "/etc/kubernetes/kubelet.conf"},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        # The chart's lists mount all of the host's /run (volume infa-map); these replace them.
        "volumes": [
            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
            {"name": "aws-config", "hostPath": {"path": "/opt/aws"}},
        ],
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "aws-config", "mountPath": "/opt/aws", "readOnly": True},
        ],
    },
    "scheduler": {"enabled": False},
    "npd": {"enabled": False},
    "draDriver": {"enabled": False},
    "ultraserverOperator": {"enabled": False},
}


def test_the_neuron_plugins_pod_spec_is_valid_kubernetes() -> None:
    """The pieces of the values that land in the chart's DaemonSet pod as they are
    (tolerations, affinity, env, resources, securityContext, volumes, volumeMounts) make a
    pod spec that validates for every supported version."""
    plugin = neuron.neuron_helm_values(["trn1.32xlarge"])["devicePlugin"]
    image = f"{plugin['image']['repository']}:{plugin['image']['tag']}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "kube-system"},
        "spec": {
            "serviceAccountName": plugin["serviceAccount"]["name"],
            "priorityClassName": plugin["priorityClassName"],
            "tolerations": plugin["tolerations"],
            "affinity": plugin["affinity"],
            "containers": [
                {
                    "name": "neuron-device-plugin",
                    "image": image,
                    "imagePullPolicy": plugin["image"]["pullPolicy"],
                    "env": plugin["env"],
                    "resources": plugin["resources"],
                    "securityContext": plugin["securityContext"],
                    "volumeMounts": plugin["volumeMounts"],
                }
            ],
            "volumes": plugin["volumes"],
        },
    }
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(pod, f"{version}.0", strict=True)


def test_efa_plugin(deployed, synth: SynthesizedPlatform) -> None:
    pod = _pod(deployed["EfaPlugin"])
    (container,) = pod["containers"]
    assert container["image"] == efa_device_plugin_image(synth.platform.settings.env.region)
    assert container["image"] == (
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20"
    )
    assert _instance_types(pod) == ["trn1.32xlarge"]
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert pod["hostNetwork"] is True and pod["automountServiceAccountToken"] is False
    assert {v["hostPath"]["path"] for v in pod["volumes"]} >= {
        "/var/lib/kubelet/device-plugins",
        "/dev/infiniband/",
    }


def test_efa_image_comes_from_the_regional_eks_registry() -> None:
    assert efa_device_plugin_image("eu-south-1").startswith(
        "590381155156.dkr.ecr.eu-south-1.amazonaws.com/"
    )
    assert efa_device_plugin_image("cn-north-1").startswith(
        "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn/"
    )
    assert efa_device_plugin_image("eu-west-1").startswith("602401143452.dkr.ecr.eu-west-1.")
    # Regions EKS serves from accounts of their own: GovCloud, and the newer Asia Pacific ones.
    for region, account in (
        ("us-gov-west-1", "013241004608"),
        ("us-gov-east-1", "151742754352"),
        ("ap-east-2", "533267051163"),
        ("ap-southeast-6", "333609536671"),
    ):
        assert efa_device_plugin_image(region).startswith(
            f"{account}.dkr.ecr.{region}.amazonaws.com/"
        )


@pytest.mark.parametrize(
    ("platform", "instance_type"), [("trn1n", "trn1n.32xlarge"), ("trn2", "trn2.48xlarge")]
)
def test_the_instance_type_moves_both_device_plugins(
    platform: str, instance_type: str, request: pytest.FixtureRequest
) -> None:
    """The whole app with another Trainium type: both plugins follow it, nothing else."""
    template = request.getfixturevalue(platform).template_json("TrainingCluster")
    deployed = {}
    for objects in manifests_by_id(template).values():
        for obj in objects:
            if obj["kind"] == "DaemonSet":
                deployed[obj["metadata"]["name"]] = obj["spec"]["template"]["spec"]
    _, release = _helm_release(template, "neuron-helm-chart")
    values = json.loads(release["Values"])
    assert _instance_types(values["devicePlugin"]) == [instance_type]
    assert values["neuronInstances"] == [instance_type]
    assert _instance_types(deployed["aws-efa-k8s-device-plugin"]) == [instance_type]
    # Apart from the type, the same release values as the default app's.
    default = json.loads(json.dumps(NEURON_VALUES).replace("trn1.32xlarge", instance_type))
    assert values == default


@pytest.mark.parametrize("instance_type", sorted(TRAINIUM_INSTANCES))
def test_the_neuron_plugin_runs_on_every_trainium_type(instance_type: str, settings) -> None:
    """Trn2 and Trn2u as well as Trn1: the plugin's placement is the settings' type."""
    values = dataclasses.replace(
        ClusterChartValues.from_settings(settings), trainium_instance_type=instance_type
    ).neuron_helm_values()
    assert _instance_types(values["devicePlugin"]) == [instance_type]
    assert values["neuronInstances"] == [instance_type]


# --- Volcano, storage ---------------------------------------------------------------


def test_volcano_helm_chart(synth: SynthesizedPlatform) -> None:
    template = synth.template_json("TrainingCluster")
    resources = template["Resources"]
    chart_id, props = _helm_release(template, "volcano")
    assert {
        k: props[k] for k in ("Repository", "Chart", "Version", "Namespace", "CreateNamespace")
    } == {
        "Repository": "https://volcano-sh.github.io/helm-charts",
        "Chart": "volcano",
        "Version": VOLCANO_HELM_CHART_VERSION,
        "Namespace": "volcano-system",
        "CreateNamespace": True,
    }
    assert VOLCANO_HELM_CHART_VERSION == "1.15.1"
    values = json.loads(props["Values"])
    assert values["custom"] == {"default_ns": {"ml-platform/node-role": "system"}}
    # The chart's default is Always: a Docker Hub request at every pod start.
    assert values["basic"]["image_pull_policy"] == "IfNotPresent"
    assert values["basic"]["image_registry"] == "docker.io"
    # Each image as chart 1.15.1's templates build it (`{{ image_registry }}/{{ <c>_image_name
    # }}:{{ <c>_image_tag_version | default image_tag_version }}`), with its values.yaml names.
    names = {
        "scheduler": "volcanosh/vc-scheduler",
        "controller": "volcanosh/vc-controller-manager",
        "admission": "volcanosh/vc-webhook-manager",
    }
    rendered = {
        c: f"{values['basic']['image_registry']}/{name}:{values['basic'][f'{c}_image_tag_version']}"
        for c, name in names.items()
    }
    assert rendered == {
        "scheduler": "docker.io/volcanosh/vc-scheduler:v1.15.1@sha256:"
        "e79dc85279b5fd2c5e431571b4683f819ff0dfeacdf230fca49e6ce1f4509ae1",
        "controller": "docker.io/volcanosh/vc-controller-manager:v1.15.1@sha256:"
        "555245dd5c73524dee627ad0c2e308c9dd95af234df791d11e6bcdfa2f33a4ef",
        "admission": "docker.io/volcanosh/vc-webhook-manager:v1.15.1@sha256:"
        "569e3671b6d9619c175062e6d3e82bfe3bb4bc3628b36347406ccc07f10fe12c",
    }
    queue = next(k for k in resources if k.startswith("ClusterVolcanoQueue"))
    assert chart_id in resources[queue]["DependsOn"]


# The part of Volcano v1.15.1's Queue CRD (scheduling.volcano.sh, v1beta1, cluster-scoped)
# that the queue object uses, written down by hand.
QUEUE_SPEC = {
    "weight": {"type": int, "minimum": 1, "maximum": 65535},
    "reclaimable": {"type": bool},
    "capability": {"type": dict},
    "deserved": {"type": dict},
    "guarantee": {"type": dict},
    "affinity": {"type": dict},
    "extendClusters": {"type": list},
    "parent": {"type": str},
    "priority": {"type": int, "minimum": 0},
    "type": {"type": str},
    "dequeueStrategy": {"type": str, "enum": ("fifo", "traverse")},
}


def queue_problems(obj: dict[str, Any]) -> list[str]:
    out = []
    if obj.get("apiVersion") != "scheduling.volcano.sh/v1beta1" or obj.get("kind") != "Queue":
        out.append(f"not a v1beta1 Queue: {obj.get('apiVersion')} {obj.get('kind')}")
    unknown = set(obj) - {"apiVersion", "kind", "metadata", "spec", "status"}
    if unknown:
        out.append(f"unknown top-level fields {sorted(unknown)}")
    meta = obj.get("metadata", {})
    if "namespace" in meta:
        out.append("Queue is cluster-scoped: no namespace")
    if not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", meta.get("name", "")):
        out.append(f"bad name {meta.get('name')!r}")
    for field, value in obj.get("spec", {}).items():
        rule = QUEUE_SPEC.get(field)
        if rule is None:
            out.append(f"spec.{field}: not in the CRD")
            continue
        if not isinstance(value, rule["type"]) or (rule["type"] is int and isinstance(value, bool)):
            out.append(f"spec.{field}: expected {rule['type'].__name__}")
            continue
        if ("minimum" in rule and value < rule["minimum"]) or (
            "maximum" in rule and value > rule["maximum"]
        ):
            out.append(f"spec.{field} = {value}: out of range")
        if "enum" in rule and value not in rule["enum"]:
            out.append(f"spec.{field} = {value!r}: not one of {rule['enum']}")
    return out


def test_queue_matches_volcanos_crd(deployed, copies, synth: SynthesizedPlatform) -> None:
    (queue,) = copies["VolcanoQueue"]
    assert queue_problems(queue) == []
    assert queue["metadata"]["name"] == synth.platform.settings.training.queue
    assert queue["spec"] == {"weight": 1, "reclaimable": True}  # no cpu capability
    assert queue_problems(without_prune_labels(deployed["VolcanoQueue"][0])) == []


def test_queue_checker_rejects_what_volcano_would() -> None:
    bad = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q", "namespace": "x"},
        "spec": {"weight": 0, "reclaimable": "yes", "cpu": 1},
    }
    assert len(queue_problems(bad)) == 4


def test_fsx_volume_and_claim(copies, synth: SynthesizedPlatform) -> None:
    settings = synth.platform.settings
    objects = {o["kind"]: o for o in copies["Storage"]}
    assert objects["Namespace"]["metadata"]["name"] == settings.training.namespace
    volume, claim = objects["PersistentVolume"], objects["PersistentVolumeClaim"]
    assert volume["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": FILE_SYSTEM_ID,
        "volumeAttributes": {"dnsname": FILE_SYSTEM_DNS, "mountname": FILE_SYSTEM_MOUNT},
    }
    capacity = f"{settings.storage.fsx_storage_gib}Gi"
    assert volume["spec"]["capacity"] == {"storage": capacity}
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["storageClassName"] == ""
    assert claim["metadata"] == {
        "name": "fsx-claim",
        "namespace": settings.training.namespace,
        "labels": {"app.kubernetes.io/part-of": "ml-platform"},
    }
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["resources"] == {"requests": {"storage": capacity}}


def test_chart_validation() -> None:
    app = cdk8s.App()
    with pytest.raises(ValueError, match=r"instance_types=\[\]: expected at least one"):
        neuron.neuron_helm_values([])
    with pytest.raises(ValueError, match=r"weight=0: expected 1 to 65535"):
        VolcanoQueueChart(app, "q", queue="q", weight=0)
    with pytest.raises(ValueError, match=r"storage_gib=0"):
        TrainingStorageChart(
            app,
            "s",
            namespace="t",
            file_system_id="fs-1",
            dns_name="d",
            mount_name="m",
            storage_gib=0,
        )
