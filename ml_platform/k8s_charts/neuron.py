"""The Neuron device plugin, from Neuron's own Helm chart, and the platform's admission policies
around it.

The plugin advertises Trainium chips and NeuronCores to the kubelet. It is installed as a Helm
release of ``oci://public.ecr.aws/neuron/neuron-helm-chart`` at the pinned version
(:data:`~ml_platform.versions.NEURON_HELM_CHART_VERSION`; the training cluster stack adds the
release, verified by ``mlp charts fetch`` when fetched), with the values of
:func:`neuron_helm_values`. What each value does was read from the chart's templates and
values (aws-neuron/neuron-helm-charts, ``charts/neuron-helm-chart``: ``values.yaml``,
``templates/_helpers.tpl``, ``templates/device-plugin/device-plugin-daemonset.yaml`` and
``device-plugin-rbac.yaml``; the 1.10.0 values as ``helm show values`` prints them, cited in
versions.py). No ``helm`` binary runs here, so the rendered DaemonSet is not checked by this
repository's tests; the values are.

Components of the chart, and which are on:

- **Device plugin: on.** ``aws.amazon.com/neuron`` and ``aws.amazon.com/neuroncore`` as
  extended resources, which the training jobs (TorchX-rendered Volcano jobs) request.
- **Scheduler extension: off** (``scheduler.enabled``). It matters for pods that ask for fewer
  than all devices of a node: it picks contiguous devices and keeps the ``neuron`` and
  ``neuroncore`` counts consistent. It works as an extender of a second kube-scheduler that
  the chart deploys (``my-scheduler``, image ``eks-distro/kubernetes/kube-scheduler`` v1.31 at
  1.10.0) and that pods opt into with ``schedulerName``. The training jobs take every device
  of their nodes (nothing to place contiguously) and are scheduled by Volcano, whose own
  ``extender`` plugin speaks Volcano's protocol, not kube-scheduler's extender API
  (volcano-sh/volcano ``pkg/scheduler/plugins/extender``, ``docs/design/extender.md``), so
  they would not pass through it. A v1.31 kube-scheduler is also outside Kubernetes' version
  skew for 1.34/1.35 (at most one minor older than the API server:
  https://kubernetes.io/releases/version-skew-policy/).
- **Node problem detector and recovery: off** (``npd.enabled``). The cluster already runs the
  EKS node monitoring agent, which reports Neuron hardware errors as node conditions, and every
  node group has EKS node auto repair on (``ml_platform.constructs._nodegroup``
  ``NODE_AUTO_REPAIR``; https://docs.aws.amazon.com/eks/latest/userguide/node-health.html).
  Neuron's recovery marks the instance unhealthy in its Auto Scaling group
  (``autoscaling:SetInstanceHealth``:
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/tutorials/k8s-neuron-problem-detector-and-recovery-irsa.html),
  a second repairer acting on the same nodes; its detector runs privileged.
- **Monitor: not in the chart at 1.10.0** (its values have no ``monitor`` key; the
  repository's ``templates/monitor-exporter-daemonset.yaml``, at commit 5c70d9d4, belongs to
  another version). The ``amazon-cloudwatch-observability`` add-on runs neuron-monitor on the
  Neuron nodes (``ml_platform.constructs.addons``).
- **DRA driver and UltraServer operator: off.** EKS recommends the Neuron DRA driver for new
  clusters on Kubernetes 1.34+ (https://docs.aws.amazon.com/eks/latest/userguide/device-management-neuron.html),
  and it cannot run beside the device plugin (the same page; the chart refuses both). The jobs
  request extended resources as TorchX renders them (pytorch/torchx
  ``torchx/schedulers/kubernetes_scheduler.py``, ``role_to_pod``: a role's devices become
  container limits; no ResourceClaims), and Volcano's DRA support (released in v1.12) is incomplete for gang jobs:
  ResourceClaims are not counted in queue usage (volcano-sh/volcano issue 4400) and vcjob pods
  using a ResourceClaimTemplate do not start (issue 5119), both open when last read here. The
  device plugin "remains supported" (the EKS page); revisit when Volcano's DRA support covers
  vcjobs.

The hardening the platform added to the hand-written plugin is kept through the chart's values:

- Nothing of the host's ``/run`` is mounted (``devicePlugin.volumes`` and ``volumeMounts``
  replace the chart's lists, which mount all of ``/run`` as volume ``infa-map`` with no
  hostPath type). The plugin's only file there, ``/run/infa-map.json``, is written by the
  Neuron *runtime* package, which the AL2023 Neuron AMI does not install: the AMI installs the
  driver and tools only (awslabs/amazon-eks-ami
  ``templates/al2023/provisioners/install-neuron-driver.sh``), and the plugin finds the
  devices through the driver without the file ("driver mode": aws-neuron/aws-neuron-sdk
  issues 180 and 794). All of ``/run`` would hand a root container the containerd socket
  beside the file (connecting to a socket needs no write access to the mount).
- ``/opt/aws`` read-only, no hostPath ``type`` (a type makes the kubelet refuse the pod when
  the path is missing or of another kind).
- No capabilities, no privilege escalation (``devicePlugin.securityContext``; the chart's
  default when empty is the same).
- Only the Trainium instance types of the settings (``devicePlugin.affinity``, given
  explicitly instead of the chart's list of every Neuron type), not Fargate, hybrid or Auto
  Mode nodes; it tolerates the Neuron taint and ``CriticalAddonsOnly`` only (the chart's
  toleration of SageMaker's ``sagemaker.amazonaws.com/node-health-status`` taint is dropped).
- Two ValidatingAdmissionPolicies (:class:`NeuronDevicePluginPolicyChart`, a cdk8s chart the
  stack applies before the release) bound to the chart's service account
  (:data:`SERVICE_ACCOUNT_USER`): its pod writes only to annotations of pods on its own node,
  its ``nodes/status`` writes only to its own node. Its ClusterRole alone allows updating any
  pod and any node's status.

What the chart does not allow (docs/security.md, "Hardening defaults and residual risks"): the
plugin runs as root (it creates its sockets in the kubelet's root-owned device-plugin
directory; the chart sets no user and the image needs none other); its ClusterRole is the
chart's and cannot be narrowed by values: ``nodes/proxy`` get reaches the kubelet API of every
node, exec included (GET requests pass no admission policy), ``pods`` update and
``nodes/status`` patch cluster-wide (narrowed by the two policies).

Names: the release's objects are named :data:`FULLNAME`, not release 0.1.0's
``neuron-device-plugin``. CloudFormation deletes 0.1.0's hand-written objects (DaemonSet,
ServiceAccount, ClusterRole and ClusterRoleBinding ``neuron-device-plugin``) only after it has
created the Helm release, and Helm refuses to install over objects it did not create ("exists
and cannot be imported"); with other names nothing collides (CHANGELOG.md, "Upgrading from
0.1.0").
"""

from __future__ import annotations

__all__ = [
    "NeuronDevicePluginPolicyChart",
    "neuron_helm_values",
]

from collections.abc import Sequence
from typing import Any

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy, ImageReference
from ml_platform.k8s_names import INSTANCE_TYPE_LABEL, NEURON_TAINT_KEY
from ml_platform.versions import NEURON_DEVICE_PLUGIN_IMAGE

RELEASE = "neuron"
"""Name of the Helm release."""
RELEASE_NAMESPACE = "kube-system"
"""Namespace of the release (where Helm keeps its record) and of the plugin's objects."""
NAME = "neuron-device-plugin"
"""The chart's ``devicePlugin.nameOverride``: the ``app.kubernetes.io/name`` label."""
FULLNAME = "ml-platform-neuron-device-plugin"
"""Name of the plugin's DaemonSet, ServiceAccount, ClusterRole and ClusterRoleBinding
(``devicePlugin.fullnameOverride`` and ``serviceAccount.name``): not 0.1.0's ``NAME``, which
CloudFormation deletes only after the release exists."""
NAMESPACE = RELEASE_NAMESPACE
LEGACY_NAME = "neuron-device-plugin"
"""Name of release 0.1.0's hand-written plugin objects."""
KUBELET_KUBECONFIG = "/etc/kubernetes/kubelet.conf"  # chart value devicePlugin.env KUBECONFIG
INFA_MAP = "/run/infa-map.json"
"""The runtime package's device map, which the plugin reads when present; not on the AL2023
Neuron AMI, and not mounted (see the module docstring)."""
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
POLICY_NAME = f"{FULLNAME}-pod-writes"
NODE_STATUS_POLICY_NAME = f"{FULLNAME}-node-status"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
"""User-info extra of a pod-bound service-account token naming the pod's node (Kubernetes
1.32+, so in every supported version): NodeNameKey in
https://pkg.go.dev/k8s.io/apiserver/pkg/authentication/serviceaccount and
https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/"""
_SAME_METADATA = ("labels", "finalizers", "ownerReferences")
POD_WRITE_RULES = {
    "own-node": (
        f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && has(object.spec.nodeName) && "
        f"object.spec.nodeName in request.userInfo.extra['{NODE_NAME_EXTRA}']",
        "the Neuron device plugin may change only pods on its own node",
    ),
    "metadata-only": (
        "object.spec == oldObject.spec",
        "the Neuron device plugin may change only pod metadata, not the spec",
    ),
    "annotations-only": (
        " && ".join(
            f"has(object.metadata.{f}) == has(oldObject.metadata.{f}) && "
            f"(!has(object.metadata.{f}) || object.metadata.{f} == oldObject.metadata.{f})"
            for f in _SAME_METADATA
        ),
        "the Neuron device plugin may change only pod annotations (not labels, finalizers or "
        "owner references)",
    ),
}
"""CEL validations of :data:`POLICY_NAME`, by name: (expression, message). Only operators of
standard CEL (``in``, ``has``, ``==``), which every Kubernetes CEL version has.
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/"""
NODE_STATUS_RULE = (
    f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
    f"object.metadata.name in request.userInfo.extra['{NODE_NAME_EXTRA}']",
    "the Neuron device plugin may change the status of its own node only",
)
"""CEL validation of :data:`NODE_STATUS_POLICY_NAME` (the plugin's ``nodes/status`` writes)."""
# Nodes that must not run node-level plugins: Fargate, hybrid and Auto Mode nodes.
_COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
_UNMANAGED_COMPUTE = ["fargate", "hybrid", "auto"]

#: The plugin's host folders: volume name -> (host path, read-only).
_HOST_PATHS = {
    # kubelet's device-plugin sockets
    "device-plugin": ("/var/lib/kubelet/device-plugins", False),
    # the host's Neuron runtime and tools, read-only (chart: volume aws-config)
    "aws-config": ("/opt/aws", True),
}
#: A node-critical plugin on the Trainium nodes: their Neuron taint and CriticalAddonsOnly.
_TOLERATIONS: list[dict[str, str]] = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
]


def _placement(instance_types: Sequence[str]) -> list[dict[str, Any]]:
    """Node selector requirements: one of ``instance_types``, and not a Fargate, hybrid or Auto
    Mode node."""
    return [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(instance_types)},
        {"key": _COMPUTE_TYPE_LABEL, "operator": "NotIn", "values": list(_UNMANAGED_COMPUTE)},
    ]


def neuron_helm_values(
    instance_types: Sequence[str], images: ImagePolicy = DEFAULT_POLICY
) -> dict[str, Any]:
    """Helm values of Neuron's chart: the device plugin only, on ``instance_types``, its image
    through ``images`` (mirror, digest), with the platform's narrowing (module docstring).

    Lists replace the chart's lists whole (Helm merges maps key by key and replaces lists),
    which is how ``/run`` leaves the mounts. Every other component is off explicitly, so a
    chart upgrade that turns one on by default changes nothing here.

    Raises:
        ValueError: naming ``instance_types`` when it is empty.
    """
    if not instance_types:
        raise ValueError("instance_types=[]: expected at least one Trainium instance type")
    image = ImageReference.parse(images.resolve(NEURON_DEVICE_PLUGIN_IMAGE))
    # The chart writes the image as "<repository>:<tag>" (neuron-device-plugin.fullimage), so
    # a digest rides in the tag: "<tag>@sha256:...".
    tag = f"{image.tag}@{image.digest}" if image.digest else image.tag
    return {
        "neuronInstances": list(instance_types),
        "devicePlugin": {
            "enabled": True,
            "nameOverride": NAME,
            "fullnameOverride": FULLNAME,
            "namespaceOverride": NAMESPACE,
            "serviceAccount": {"create": True, "name": FULLNAME},
            "image": {"repository": image.name, "tag": tag, "pullPolicy": "IfNotPresent"},
            "priorityClassName": "system-node-critical",
            "tolerations": [dict(t) for t in _TOLERATIONS],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": _placement(instance_types)}]
                    }
                }
            },
            "env": [
                {"name": "KUBECONFIG", "value": KUBELET_KUBECONFIG},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            ],
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
            # No hostPath type: a type makes the kubelet check the path and refuse the pod
            # when it is missing or of another kind.
            "volumes": [{"name": n, "hostPath": {"path": p}} for n, (p, _) in _HOST_PATHS.items()],
            "volumeMounts": [
                {"name": n, "mountPath": p, **({"readOnly": True} if ro else {})}
                for n, (p, ro) in _HOST_PATHS.items()
            ],
        },
        "scheduler": {"enabled": False},
        "npd": {"enabled": False},
        "draDriver": {"enabled": False},
        "ultraserverOperator": {"enabled": False},
    }


class NeuronDevicePluginPolicyChart(cdk8s.Chart):
    """The admission policies around the Neuron device plugin of Neuron's chart: two
    ValidatingAdmissionPolicies and their bindings, matching the plugin's service account
    (:data:`SERVICE_ACCOUNT_USER`) only. Applied before the Helm release, so the plugin never
    runs without them.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "ml-platform"}
        self.pod_write_policy, self.pod_write_binding = pod_write_policy(self, labels)
        self.node_status_policy, self.node_status_binding = node_status_policy(self, labels)


def pod_write_policy(
    scope: Construct, labels: dict[str, str]
) -> tuple[k8s.KubeValidatingAdmissionPolicy, k8s.KubeValidatingAdmissionPolicyBinding]:
    """A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30)
    and its binding: pod updates by the plugin's service account must keep to
    :data:`POD_WRITE_RULES`; requests of anyone else are not matched."""
    return _plugin_policy(
        scope, "PodWritePolicy", POLICY_NAME, "pods", list(POD_WRITE_RULES.values()), labels
    )


def node_status_policy(
    scope: Construct, labels: dict[str, str]
) -> tuple[k8s.KubeValidatingAdmissionPolicy, k8s.KubeValidatingAdmissionPolicyBinding]:
    """The same for the plugin's ``nodes/status`` writes (its ClusterRole grants patch and
    update on every node's status): only its own node's (:data:`NODE_STATUS_RULE`)."""
    return _plugin_policy(
        scope,
        "NodeStatusPolicy",
        NODE_STATUS_POLICY_NAME,
        "nodes/status",
        [NODE_STATUS_RULE],
        labels,
    )


def _plugin_policy(
    scope: Construct,
    construct_id: str,
    name: str,
    resource: str,
    rules: Sequence[tuple[str, str]],
    labels: dict[str, str],
) -> tuple[k8s.KubeValidatingAdmissionPolicy, k8s.KubeValidatingAdmissionPolicyBinding]:
    """A policy on UPDATE of ``resource`` that matches the plugin's service account only
    (``matchConditions``), fails closed, and is bound cluster-wide with Deny and Audit."""
    policy = k8s.KubeValidatingAdmissionPolicy(
        scope,
        construct_id,
        metadata=k8s.ObjectMeta(name=name, labels=labels),
        spec=k8s.ValidatingAdmissionPolicySpec(
            failure_policy="Fail",
            match_constraints=k8s.MatchResources(
                resource_rules=[
                    k8s.NamedRuleWithOperations(
                        api_groups=[""],
                        api_versions=["v1"],
                        operations=["UPDATE"],
                        resources=[resource],
                    )
                ]
            ),
            match_conditions=[
                k8s.MatchCondition(
                    name="neuron-device-plugin",
                    expression=f"request.userInfo.username == '{SERVICE_ACCOUNT_USER}'",
                )
            ],
            validations=[k8s.Validation(expression=e, message=m) for e, m in rules],
        ),
    )
    binding = k8s.KubeValidatingAdmissionPolicyBinding(
        scope,
        f"{construct_id}Binding",
        metadata=k8s.ObjectMeta(name=name, labels=labels),
        spec=k8s.ValidatingAdmissionPolicyBindingSpec(
            policy_name=name, validation_actions=["Deny", "Audit"]
        ),
    )
    return policy, binding


def device_plugin_tolerations() -> list[k8s.Toleration]:
    """A node-critical plugin on the Trainium nodes: tolerate their Neuron taint and
    CriticalAddonsOnly (the Neuron plugin's tolerations, for the EFA plugin's DaemonSet)."""
    return [
        k8s.Toleration(key=t["key"], operator=t["operator"], effect=t.get("effect"))
        for t in _TOLERATIONS
    ]


def instance_type_affinity(instance_types: Sequence[str]) -> k8s.Affinity:
    """Required node affinity: one of ``instance_types``, and not a Fargate, hybrid or Auto
    Mode node (the Neuron plugin's placement, for the EFA plugin's DaemonSet)."""
    return k8s.Affinity(
        node_affinity=k8s.NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.NodeSelector(
                node_selector_terms=[
                    k8s.NodeSelectorTerm(
                        match_expressions=[
                            k8s.NodeSelectorRequirement(**e) for e in _placement(instance_types)
                        ]
                    )
                ]
            )
        )
    )
