"""The Neuron device plugin: advertises Trainium chips and NeuronCores to the kubelet.

The platform ships its own plugin (pinned image, RBAC, placement) instead of the one aws-cdk
bundles with ``add_nodegroup_capacity``, which is years old and crash-loops.

RBAC, environment and mounts follow the chart release that ships the pinned image
(aws-neuron/neuron-helm-charts, charts/neuron-helm-chart: ``values.yaml`` ``devicePlugin.env``,
``volumeMounts``, ``volumes`` and ``templates/device-plugin/device-plugin-rbac.yaml``;
https://github.com/aws-neuron/neuron-helm-charts): ``nodes/proxy`` get/list in the
ClusterRole, ``KUBECONFIG=/etc/kubernetes/kubelet.conf``, and the host's ``/opt/aws`` mounted
read-only. Plugin 2.22 (the older raw manifest) had none of the three.

Narrower than the chart (issue review of the upstream defaults):

- Nothing of the host's ``/run`` is mounted (the chart mounts all of it, with no hostPath
  type: volume ``infa-map``). The plugin's only file there, ``/run/infa-map.json``, is written
  by the Neuron *runtime* package, which the AL2023 Neuron AMI does not install: the AMI
  installs the driver and tools only (awslabs/amazon-eks-ami
  ``templates/al2023/provisioners/install-neuron-driver.sh``), and the plugin finds the
  devices through the driver without the file ("driver mode": aws-neuron/aws-neuron-sdk
  issues 180 and 794). A mount of that one file with ``type: File`` (this chart until 2026-12)
  made the kubelet refuse the volume on every such node: the plugin never started, no node
  advertised ``aws.amazon.com/neuron`` and the training gang stayed Pending. All of ``/run``,
  as upstream mounts it, would hand a root container the containerd socket beside the file
  (connecting to a socket needs no write access to the mount), for a file that is not there.
- A ValidatingAdmissionPolicy (:data:`POLICY_NAME`) lets the plugin's service account change
  only the annotations of pods on its own node; its ClusterRole alone allows updating any pod
  of the cluster.

Residual risks (docs/security.md, "Hardening defaults and residual risks"): the plugin runs as root (it creates its socket in
the kubelet's root-owned device-plugin directory); ``nodes/proxy`` get, which the chart
grants, reaches the kubelet API of every node, exec included (GET requests pass no admission
policy, so only RBAC could narrow it, and node names are not known in advance). A second
policy (:data:`NODE_STATUS_POLICY_NAME`) keeps its ``nodes/status`` writes to its own node.
"""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_charts.names import INSTANCE_TYPE_LABEL, NEURON_TAINT_KEY
from ml_platform.versions import NEURON_DEVICE_PLUGIN_IMAGE

NAME = "neuron-device-plugin"
NAMESPACE = "kube-system"
_SELECTOR = {"name": NAME}
KUBELET_KUBECONFIG = "/etc/kubernetes/kubelet.conf"  # chart value devicePlugin.env KUBECONFIG
INFA_MAP = "/run/infa-map.json"
"""The runtime package's device map, which the plugin reads when present; not on the AL2023
Neuron AMI, and not mounted (see the module docstring)."""
SERVICE_ACCOUNT_USER = f"system:serviceaccount:{NAMESPACE}:{NAME}"
POLICY_NAME = "neuron-device-plugin-pod-writes"
NODE_STATUS_POLICY_NAME = "neuron-device-plugin-node-status"
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


class NeuronDevicePluginChart(cdk8s.Chart):
    """DaemonSet, ServiceAccount, ClusterRole and ClusterRoleBinding of the Neuron device plugin.

    Runs only on the given Neuron instance types, tolerates their ``aws.amazon.com/neuron``
    taint, and is ``system-node-critical``. Every object names its own namespace.

    Args:
        instance_types: Neuron instance types the plugin runs on (node affinity). Required.
        image: Plugin image. Default :data:`~ml_platform.versions.NEURON_DEVICE_PLUGIN_IMAGE`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        instance_types: Sequence[str],
        image: str = NEURON_DEVICE_PLUGIN_IMAGE,
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        if not instance_types:
            raise ValueError(f"{self.node.path}: instance_types=[]: expected at least one type")
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "ml-platform"}
        meta = k8s.ObjectMeta(name=NAME, labels=labels)
        self.service_account = k8s.KubeServiceAccount(
            self,
            "ServiceAccount",
            metadata=k8s.ObjectMeta(name=NAME, namespace=NAMESPACE, labels=labels),
        )
        self.cluster_role = k8s.KubeClusterRole(
            self,
            "ClusterRole",
            metadata=meta,
            rules=_cluster_role_rules(),
        )
        self.cluster_role_binding = k8s.KubeClusterRoleBinding(
            self,
            "ClusterRoleBinding",
            metadata=meta,
            role_ref=k8s.RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=NAME
            ),
            subjects=[k8s.Subject(kind="ServiceAccount", name=NAME, namespace=NAMESPACE)],
        )
        self.daemon_set = k8s.KubeDaemonSet(
            self,
            "DaemonSet",
            metadata=k8s.ObjectMeta(name=NAME, namespace=NAMESPACE, labels=labels),
            spec=k8s.DaemonSetSpec(
                selector=k8s.LabelSelector(match_labels=_SELECTOR),
                update_strategy=k8s.DaemonSetUpdateStrategy(type="RollingUpdate"),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels={**_SELECTOR, **labels}),
                    spec=k8s.PodSpec(
                        service_account_name=NAME,
                        priority_class_name="system-node-critical",
                        tolerations=device_plugin_tolerations(),
                        affinity=instance_type_affinity(instance_types),
                        containers=[_plugin_container(image)],
                        # No hostPath type: a type makes the kubelet check the path and refuse
                        # the pod when it is missing or of another kind.
                        volumes=[
                            k8s.Volume(name=n, host_path=k8s.HostPathVolumeSource(path=p))
                            for n, (p, _) in _HOST_PATHS.items()
                        ],
                    ),
                ),
            ),
        )
        self.pod_write_policy, self.pod_write_binding = pod_write_policy(self, labels)
        self.node_status_policy, self.node_status_binding = node_status_policy(self, labels)


#: The plugin's host folders: volume name -> (host path, read-only).
_HOST_PATHS = {
    # kubelet's device-plugin sockets
    "device-plugin": ("/var/lib/kubelet/device-plugins", False),
    # the host's Neuron runtime and tools, read-only (chart: volume aws-config)
    "aws-config": ("/opt/aws", True),
}


def _cluster_role_rules() -> list[k8s.PolicyRule]:
    """What the device plugin reads and writes of nodes, pods and events."""
    return [
        k8s.PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get", "list", "watch"]),
        k8s.PolicyRule(api_groups=[""], resources=["nodes/status"], verbs=["patch", "update"]),
        k8s.PolicyRule(
            api_groups=[""],
            resources=["pods"],
            verbs=["get", "list", "watch", "update", "patch"],
        ),
        k8s.PolicyRule(api_groups=[""], resources=["events"], verbs=["create", "patch"]),
        # Newer plugins read the kubelet's pod resources through the API server.
        k8s.PolicyRule(api_groups=[""], resources=["nodes/proxy"], verbs=["get", "list"]),
    ]


def _plugin_container(image: str) -> k8s.Container:
    """The device plugin: no capabilities, the kubelet's kubeconfig, the host folders."""
    return k8s.Container(
        name=NAME,
        image=image,
        image_pull_policy="IfNotPresent",
        env=[
            k8s.EnvVar(name="KUBECONFIG", value=KUBELET_KUBECONFIG),
            k8s.EnvVar(
                name="NODE_NAME",
                value_from=k8s.EnvVarSource(
                    field_ref=k8s.ObjectFieldSelector(field_path="spec.nodeName")
                ),
            ),
        ],
        resources=k8s.ResourceRequirements(
            requests={
                "cpu": k8s.Quantity.from_string("10m"),
                "memory": k8s.Quantity.from_string("64Mi"),
            }
        ),
        security_context=k8s.SecurityContext(
            allow_privilege_escalation=False,
            capabilities=k8s.Capabilities(drop=["ALL"]),
        ),
        volume_mounts=[
            k8s.VolumeMount(name=n, mount_path=p, read_only=ro or None)
            for n, (p, ro) in _HOST_PATHS.items()
        ],
    )


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
    CriticalAddonsOnly."""
    return [
        k8s.Toleration(key="CriticalAddonsOnly", operator="Exists"),
        k8s.Toleration(key=NEURON_TAINT_KEY, operator="Exists", effect="NoSchedule"),
    ]


def instance_type_affinity(instance_types: Sequence[str]) -> k8s.Affinity:
    """Required node affinity: one of ``instance_types``, and not a Fargate, hybrid or Auto
    Mode node."""
    return k8s.Affinity(
        node_affinity=k8s.NodeAffinity(
            required_during_scheduling_ignored_during_execution=k8s.NodeSelector(
                node_selector_terms=[
                    k8s.NodeSelectorTerm(
                        match_expressions=[
                            k8s.NodeSelectorRequirement(
                                key=INSTANCE_TYPE_LABEL, operator="In", values=list(instance_types)
                            ),
                            k8s.NodeSelectorRequirement(
                                key=_COMPUTE_TYPE_LABEL, operator="NotIn", values=_UNMANAGED_COMPUTE
                            ),
                        ]
                    )
                ]
            )
        )
    )
