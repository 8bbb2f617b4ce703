"""Pod Security Admission: every namespace the platform creates carries its level's labels,
and every pod the platform emits (cluster charts, Triton, the NVIDIA plugin, the TorchX-rendered
training jobs and the other workload manifests) passes the level of its namespace, checked by
the Pod Security Standards rules in tests/app/pss.py."""

from __future__ import annotations

import copy

import pytest

from ml_platform.k8s_names import (
    NAMESPACE_POD_SECURITY,
    PSA_LABEL_PREFIX,
    PSA_VERSION,
    pod_security_labels,
)
from ml_platform.versions import KUBERNETES_VERSIONS
from tests.app import pss
from tests.app.test_least_privilege import _pods, emitted_objects

# kube-system is not the platform's: Kubernetes creates it without Pod Security labels, which
# leaves it privileged (https://kubernetes.io/docs/concepts/security/pod-security-admission/,
# "no policy" for unlabeled namespaces), as the node-level plugins there need. The Neuron device
# plugin runs there too (hostPath mounts of the kubelet's device-plugin directory and /opt/aws),
# from Neuron's Helm chart, which this repository cannot render (ml_platform/k8s_charts/neuron.py).
KUBE_SYSTEM_NEEDS = {
    "aws-efa-k8s-device-plugin": "privileged container and host network (upstream eks-charts "
    "chart: opens /dev/infiniband, registers with the kubelet)",
    "nvidia-device-plugin": "hostPath mount of the kubelet's device-plugin socket directory",
}


# Namespaces the platform creates before their owners install into them (for their strict-mode
# allow-all NetworkPolicy): their pods come from Volcano's Helm chart and the CloudWatch
# add-on, which this repository cannot render; each enforces the level its owner's pods need
# (SYSTEM_NAMESPACE_POD_SECURITY says why), stated by label rather than left unlabeled.
SYSTEM_LEVELS = {
    "volcano-system": ("baseline", "restricted"),
    "amazon-cloudwatch": ("privileged", "baseline"),
}


@pytest.fixture(scope="module")
def objects(settings) -> list[dict]:
    return emitted_objects(settings)


def _level(namespace: str, settings) -> str:
    if namespace == settings.training.namespace:
        return NAMESPACE_POD_SECURITY["training"]
    if namespace == "triton":
        return NAMESPACE_POD_SECURITY["triton"]
    raise AssertionError(f"a pod in namespace {namespace!r}, which has no level here")


def test_every_namespace_the_platform_creates_enforces_its_level(objects, settings) -> None:
    namespaces = {
        o["metadata"]["name"]: o["metadata"].get("labels", {})
        for o in objects
        if o["kind"] == "Namespace"
    }
    assert set(namespaces) == {settings.training.namespace, "triton", *SYSTEM_LEVELS}
    for name, labels in namespaces.items():
        level, watch = SYSTEM_LEVELS.get(name) or (_level(name, settings), "restricted")
        psa = {k: v for k, v in labels.items() if k.startswith(PSA_LABEL_PREFIX)}
        assert psa == {
            f"{PSA_LABEL_PREFIX}enforce": level,
            f"{PSA_LABEL_PREFIX}enforce-version": PSA_VERSION,
            f"{PSA_LABEL_PREFIX}warn": watch,
            f"{PSA_LABEL_PREFIX}warn-version": PSA_VERSION,
            f"{PSA_LABEL_PREFIX}audit": watch,
            f"{PSA_LABEL_PREFIX}audit-version": PSA_VERSION,
        }, name
    assert NAMESPACE_POD_SECURITY == {"triton": "restricted", "training": "baseline"}


def test_labels_pin_the_oldest_supported_kubernetes_version() -> None:
    oldest = min(KUBERNETES_VERSIONS, key=lambda v: tuple(map(int, v.split("."))))
    assert PSA_VERSION == f"v{oldest}"


def test_every_emitted_pod_passes_its_namespaces_level(objects, settings) -> None:
    checked: dict[str, set[str]] = {}
    for obj in objects:
        for pod in _pods(obj):
            namespace = obj["metadata"].get("namespace")
            name = obj["metadata"]["name"]
            if namespace == "kube-system":
                assert name in KUBE_SYSTEM_NEEDS, name
                continue
            level = _level(namespace, settings)
            template = obj.get("spec", {}).get("template", {})
            annotations = template.get("metadata", {}).get("annotations")
            assert pss.violations(level, pod, annotations) == [], (obj["kind"], name, level)
            checked.setdefault(level, set()).add(f"{obj['kind']}/{name}")
    # The TorchX-rendered Volcano jobs, the dataset Job and TensorBoard in training; Triton.
    kinds = {k.split("/")[0] for k in checked["baseline"]}
    assert {"Job", "Deployment"} <= kinds and len(checked["baseline"]) >= 4, checked
    assert any(k.startswith("Deployment/") for k in checked["restricted"]), checked


def test_kube_system_pods_need_what_baseline_forbids(objects) -> None:
    """Why kube-system stays privileged: each plugin there breaks baseline, so a label would
    stop it."""
    seen = set()
    for obj in objects:
        if obj["metadata"].get("namespace") != "kube-system":
            continue
        for pod in _pods(obj):
            assert pss.violations("baseline", pod) != [], obj["metadata"]["name"]
            seen.add(obj["metadata"]["name"])
    assert seen == set(KUBE_SYSTEM_NEEDS)


def test_the_triton_pods_would_fail_baseline_checks_they_do_not_need(objects) -> None:
    """The checker is strict where the levels differ: Triton's pod without its non-root
    setting fails restricted but still passes baseline."""
    (deployment,) = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"].get("namespace") == "triton"
    ]
    pod = copy.deepcopy(_pods(deployment)[0])
    pod.setdefault("securityContext", {})["runAsNonRoot"] = False
    for container in pod["containers"] + pod.get("initContainers", []):
        (container.get("securityContext") or {}).pop("runAsNonRoot", None)
    assert any("Running as Non-root" in v for v in pss.violations("restricted", pod))
    assert pss.violations("baseline", pod) == []


_OK = {
    "containers": [
        {
            "name": "c",
            "image": "i",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }
    ]
}


def _with(change) -> dict:
    pod = copy.deepcopy(_OK)
    change(pod)
    return pod


def _ctx(pod) -> dict:
    return pod["containers"][0]["securityContext"]


@pytest.mark.parametrize(
    ("level", "change", "control"),
    [
        ("baseline", lambda p: p.update(hostNetwork=True), "Host Namespaces"),
        ("baseline", lambda p: p.update(hostPID=True), "Host Namespaces"),
        ("baseline", lambda p: _ctx(p).update(privileged=True), "Privileged Containers"),
        ("baseline", lambda p: _ctx(p).update(capabilities={"add": ["SYS_ADMIN"]}), "Capabilities"),
        (
            "baseline",
            lambda p: p.update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
            "HostPath Volumes",
        ),
        (
            "baseline",
            lambda p: p["containers"][0].update(ports=[{"containerPort": 1, "hostPort": 1}]),
            "Host Ports",
        ),
        ("baseline", lambda p: _ctx(p).update(seccompProfile={"type": "Unconfined"}), "Seccomp"),
        ("baseline", lambda p: _ctx(p).update(procMount="Unmasked"), "/proc Mount Type"),
        ("baseline", lambda p: _ctx(p).update(seLinuxOptions={"type": "spc_t"}), "SELinux"),
        ("baseline", lambda p: _ctx(p).update(appArmorProfile={"type": "Unconfined"}), "AppArmor"),
        ("baseline", lambda p: _ctx(p).update(windowsOptions={"hostProcess": True}), "HostProcess"),
        (
            "baseline",
            lambda p: p.update(
                securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}
            ),
            "Sysctls",
        ),
        (
            "restricted",
            lambda p: p.update(volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}]),
            "Volume Types",
        ),
        ("restricted", lambda p: _ctx(p).pop("allowPrivilegeEscalation"), "Privilege Escalation"),
        ("restricted", lambda p: _ctx(p).pop("runAsNonRoot"), "Running as Non-root"),
        ("restricted", lambda p: _ctx(p).update(runAsUser=0), "Running as Non-root user"),
        ("restricted", lambda p: _ctx(p).pop("seccompProfile"), "Seccomp"),
        (
            "restricted",
            lambda p: _ctx(p).update(capabilities={"drop": ["NET_RAW"]}),
            "Capabilities",
        ),
        (
            "restricted",
            lambda p: _ctx(p).update(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
            "Capabilities",
        ),
    ],
)
def test_each_control_of_the_checker_fires(level, change, control) -> None:
    assert pss.violations(level, _OK) == []
    found = pss.violations(level, _with(change))
    assert any(v.startswith(control) for v in found), found


def test_baseline_allows_root_and_the_reserved_ports_sysctl() -> None:
    pod = {
        "securityContext": {
            "sysctls": [{"name": "net.ipv4.ip_local_reserved_ports", "value": "62182"}]
        },
        "containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": 0}}],
    }
    assert pss.violations("baseline", pod) == []
    assert pss.violations("restricted", pod) != []


def test_pod_security_labels_shape() -> None:
    assert pod_security_labels("baseline")[f"{PSA_LABEL_PREFIX}enforce"] == "baseline"


def test_the_nvidia_plugin_mounts_no_service_account_token(objects) -> None:
    """The plugin calls no Kubernetes API (it serves the kubelet's device-plugin socket)."""
    (plugin,) = [o for o in objects if o["metadata"]["name"] == "nvidia-device-plugin"]
    (pod,) = _pods(plugin)
    assert pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod
