"""The Neuron device plugin's narrowing, kept through the values of Neuron's Helm chart: nothing
of the host's /run, no hostPath the kubelet could refuse, and a ValidatingAdmissionPolicy whose CEL rules are evaluated here (cel-python, a CEL
implementation) against the requests the API server would give them: the plugin may change
annotations of pods on its own node, nothing else."""

from __future__ import annotations

import copy

import cdk8s
import kubernetes_validate
import pytest

from ml_platform.k8s_charts.neuron import (
    INFA_MAP,
    NODE_NAME_EXTRA,
    NODE_STATUS_POLICY_NAME,
    NODE_STATUS_RULE,
    POD_WRITE_RULES,
    POLICY_NAME,
    SERVICE_ACCOUNT_USER,
    NeuronDevicePluginPolicyChart,
    neuron_helm_values,
)
from ml_platform.versions import KUBERNETES_VERSIONS


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return NeuronDevicePluginPolicyChart(cdk8s.App(), "neuron").to_json()


@pytest.fixture(scope="module")
def plugin() -> dict:
    """The chart's devicePlugin values; its DaemonSet template copies volumes and mounts as
    they are (templates/device-plugin/device-plugin-daemonset.yaml: toYaml of each list)."""
    return neuron_helm_values(["trn1.32xlarge"])["devicePlugin"]


def _kind(objects, kind, name=POLICY_NAME) -> dict:
    (obj,) = [
        o
        for o in objects
        if o["kind"] == kind
        and (not kind.startswith("ValidatingAdmission") or o["metadata"]["name"] == name)
    ]
    return obj


# What the AL2023 Neuron AMI has on the host, from its build (taken from the source, not
# observed): the driver and tools under /opt/aws (awslabs/amazon-eks-ami
# templates/al2023/provisioners/install-neuron-driver.sh) and the kubelet's plugin folder; not
# the runtime package that writes /run/infa-map.json.
AMI_HOST_PATHS = {"/var/lib/kubelet/device-plugins", "/opt/aws"}


def test_no_host_path_can_keep_the_plugin_from_starting(plugin) -> None:
    """The kubelet checks a hostPath only when it has a ``type``, and refuses the pod when the
    check fails (Kubernetes docs, "hostPath volume types"): with no type on any volume, and
    every path one the AMI has, nothing missing on the node can block the plugin. The old
    ``/run/infa-map.json`` of ``type: File`` was such a path."""
    volumes = {v["name"]: v["hostPath"] for v in plugin["volumes"]}
    assert [v for v in volumes.values() if "type" in v] == []
    assert {v["path"] for v in volumes.values()} <= AMI_HOST_PATHS
    assert INFA_MAP not in {v["path"] for v in volumes.values()}


def test_nothing_of_the_hosts_run_is_mounted(plugin) -> None:
    """Not /run (the containerd and D-Bus sockets), as the upstream chart mounts it: the values
    give both lists whole, so the chart's volume ``infa-map`` is gone from each (Helm replaces
    a list of the chart's values with the user's)."""
    paths = [v["hostPath"]["path"] for v in plugin["volumes"]]
    assert [p for p in paths if p == "/run" or p.startswith("/run/")] == []
    assert "infa-map" not in {v["name"] for v in plugin["volumes"]}
    assert "infa-map" not in {m["name"] for m in plugin["volumeMounts"]}
    mounts = {m["mountPath"]: m.get("readOnly", False) for m in plugin["volumeMounts"]}
    assert mounts == {"/var/lib/kubelet/device-plugins": False, "/opt/aws": True}


def test_policy_and_binding_validate_for_every_supported_version(objects) -> None:
    policy = _kind(objects, "ValidatingAdmissionPolicy")
    binding = _kind(objects, "ValidatingAdmissionPolicyBinding")
    for version in KUBERNETES_VERSIONS:
        for obj in (policy, binding):
            assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["UPDATE"],
            "resources": ["pods"],
        }
    ]
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == f"request.userInfo.username == '{SERVICE_ACCOUNT_USER}'"
    assert SERVICE_ACCOUNT_USER == (
        "system:serviceaccount:kube-system:ml-platform-neuron-device-plugin"
    )
    assert [v["expression"] for v in spec["validations"]] == [
        e for e, _ in POD_WRITE_RULES.values()
    ]
    assert binding["spec"] == {"policyName": POLICY_NAME, "validationActions": ["Deny", "Audit"]}
    node_policy = _kind(objects, "ValidatingAdmissionPolicy", NODE_STATUS_POLICY_NAME)
    node_binding = _kind(objects, "ValidatingAdmissionPolicyBinding", NODE_STATUS_POLICY_NAME)
    for version in KUBERNETES_VERSIONS:
        for obj in (node_policy, node_binding):
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    assert node_policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == [
        "nodes/status"
    ]
    assert node_policy["spec"]["matchConditions"] == spec["matchConditions"]
    assert node_binding["spec"] == {
        "policyName": NODE_STATUS_POLICY_NAME,
        "validationActions": ["Deny", "Audit"],
    }
    # The user matched is the service account the chart creates and binds
    # (templates/device-plugin/device-plugin-rbac.yaml: serviceAccount.name in the plugin's
    # namespace, namespaceOverride).
    values = neuron_helm_values(["trn1.32xlarge"])["devicePlugin"]
    assert values["serviceAccount"] == {"create": True, "name": SERVICE_ACCOUNT_USER.split(":")[-1]}
    assert values["namespaceOverride"] == SERVICE_ACCOUNT_USER.split(":")[2]


# --- the CEL rules, evaluated -----------------------------------------------------------------

POD = {
    "metadata": {
        "name": "bert-pretrain-worker-0",
        "namespace": "training",
        "labels": {"app": "bert"},
        "annotations": {"a": "1"},
        "ownerReferences": [{"kind": "Job", "name": "bert-pretrain", "uid": "u"}],
    },
    "spec": {
        "nodeName": "ip-10-0-1-5.us-west-2.compute.internal",
        "containers": [{"name": "worker", "image": "img"}],
    },
}


def _request(node: str | None, username: str = SERVICE_ACCOUNT_USER) -> dict:
    extra = {NODE_NAME_EXTRA: [node]} if node else {}
    extra["authentication.kubernetes.io/pod-name"] = ["neuron-device-plugin-abcde"]
    return {"userInfo": {"username": username, "extra": extra}}


def _failures(request: dict, new: dict, old: dict, rules=POD_WRITE_RULES) -> list[str]:
    celpy = pytest.importorskip("celpy", reason="cel-python (requirements-dev.txt) evaluates CEL")
    env = celpy.Environment()
    activation = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old),
    }
    failed = []
    for name, (expression, _) in rules.items():
        result = env.program(env.compile(expression)).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (name, result)
        if not result:
            failed.append(name)
    return failed


def _changed(change) -> dict:
    pod = copy.deepcopy(POD)
    change(pod)
    return pod


NODE = POD["spec"]["nodeName"]


def test_an_annotation_on_a_pod_of_its_own_node_is_allowed() -> None:
    new = _changed(lambda p: p["metadata"]["annotations"].update({"aws.amazon.com/neuron": "0-15"}))
    assert _failures(_request(NODE), new, POD) == []


@pytest.mark.parametrize(
    ("request_node", "change", "rule"),
    [
        (
            "ip-10-0-9-9.us-west-2.compute.internal",
            lambda p: p["metadata"]["annotations"].update(x="y"),
            "own-node",
        ),
        (None, lambda p: p["metadata"]["annotations"].update(x="y"), "own-node"),
        (
            NODE,
            lambda p: p["spec"]["containers"][0].update(image="attacker/image"),
            "metadata-only",
        ),
        (
            NODE,
            lambda p: p["metadata"]["labels"].update({"ml-platform/triton-client": "true"}),
            "annotations-only",
        ),
        (NODE, lambda p: p["metadata"].pop("labels"), "annotations-only"),
        (NODE, lambda p: p["metadata"].update(finalizers=["x/block"]), "annotations-only"),
        (NODE, lambda p: p["metadata"].pop("ownerReferences"), "annotations-only"),
    ],
)
def test_writes_beyond_annotations_of_own_node_pods_are_denied(request_node, change, rule) -> None:
    assert _failures(_request(request_node), _changed(change), POD) == [rule]


def test_an_unscheduled_pod_is_no_pod_of_its_node() -> None:
    pending = _changed(lambda p: p["spec"].pop("nodeName"))
    new = copy.deepcopy(pending)
    new["metadata"]["annotations"]["x"] = "y"
    assert _failures(_request(NODE), new, pending) == ["own-node"]


@pytest.mark.parametrize(
    ("request_node", "allowed"),
    [
        (NODE, True),
        ("ip-10-0-9-9.us-west-2.compute.internal", False),
        (None, False),
    ],
)
def test_node_status_writes_only_for_its_own_node(request_node, allowed) -> None:
    node = {"metadata": {"name": NODE}, "status": {"capacity": {"aws.amazon.com/neuron": "16"}}}
    new = copy.deepcopy(node)
    new["status"]["capacity"]["aws.amazon.com/neuron"] = "0"
    failed = _failures(_request(request_node), new, node, {"own-node": NODE_STATUS_RULE})
    assert failed == ([] if allowed else ["own-node"])
