"""The Neuron device plugin: advertises Trainium chips and NeuronCores to the kubelet.

The platform ships its own plugin (pinned image, RBAC, placement) instead of the one aws-cdk
bundles with ``add_nodegroup_capacity``, which is years old and crash-loops.

RBAC, environment and mounts follow the chart release that ships the pinned image
(aws-neuron/neuron-helm-charts, charts/neuron-helm-chart: ``values.yaml`` ``devicePlugin.env``,
``volumeMounts``, ``volumes`` and ``templates/device-plugin/device-plugin-rbac.yaml``;
https://github.com/aws-neuron/neuron-helm-charts): ``nodes/proxy`` get/list in the
ClusterRole, ``KUBECONFIG=/etc/kubernetes/kubelet.conf``, and the host's ``/opt/aws`` mounted
read-only. Plugin 2.22 (the older raw manifest) had none of the three.
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
            rules=[
                k8s.PolicyRule(
                    api_groups=[""], resources=["nodes"], verbs=["get", "list", "watch"]
                ),
                k8s.PolicyRule(
                    api_groups=[""], resources=["nodes/status"], verbs=["patch", "update"]
                ),
                k8s.PolicyRule(
                    api_groups=[""],
                    resources=["pods"],
                    verbs=["get", "list", "watch", "update", "patch"],
                ),
                k8s.PolicyRule(api_groups=[""], resources=["events"], verbs=["create", "patch"]),
                # Newer plugins read the kubelet's pod resources through the API server.
                k8s.PolicyRule(api_groups=[""], resources=["nodes/proxy"], verbs=["get", "list"]),
            ],
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
        host_paths = {
            # kubelet's device-plugin sockets
            "device-plugin": ("/var/lib/kubelet/device-plugins", False),
            # host runtime state, mounted as the upstream manifest does
            "infa-map": ("/run", False),
            # the host's Neuron runtime and tools, read-only (chart: volume aws-config)
            "aws-config": ("/opt/aws", True),
        }
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
                        containers=[
                            k8s.Container(
                                name=NAME,
                                image=image,
                                image_pull_policy="IfNotPresent",
                                env=[
                                    k8s.EnvVar(name="KUBECONFIG", value=KUBELET_KUBECONFIG),
                                    k8s.EnvVar(
                                        name="NODE_NAME",
                                        value_from=k8s.EnvVarSource(
                                            field_ref=k8s.ObjectFieldSelector(
                                                field_path="spec.nodeName"
                                            )
                                        ),
                                    )
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
                                    for n, (p, ro) in host_paths.items()
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(name=n, host_path=k8s.HostPathVolumeSource(path=p))
                            for n, (p, _) in host_paths.items()
                        ],
                    ),
                ),
            ),
        )


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
