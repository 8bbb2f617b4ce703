"""Chart: NVIDIA's Kubernetes device plugin on the GPU node group.

The AL2023 NVIDIA AMIs carry the driver and container toolkit but not the device plugin, so
without it no pod can request ``nvidia.com/gpu``.
"""

from __future__ import annotations

__all__ = [
    "NvidiaDevicePluginChart",
]

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_names import GPU_TAINT_KEY, NODE_ROLE_LABEL

# Source: NVIDIA/k8s-device-plugin releases (v0.20.0), image on NGC.
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
NAME = "nvidia-device-plugin"


class NvidiaDevicePluginChart(cdk8s.Chart):
    """DaemonSet in kube-system, only on nodes labelled as GPU nodes, tolerating their taint.

    Args:
        image: The plugin's image. Default :data:`NVIDIA_DEVICE_PLUGIN_IMAGE`.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, image: str = NVIDIA_DEVICE_PLUGIN_IMAGE
    ) -> None:
        super().__init__(scope, construct_id)
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "ml-platform"}
        self.daemon_set = k8s.KubeDaemonSet(
            self,
            "DaemonSet",
            metadata=k8s.ObjectMeta(name=NAME, namespace="kube-system", labels=labels),
            spec=k8s.DaemonSetSpec(
                selector=k8s.LabelSelector(match_labels=labels),
                update_strategy=k8s.DaemonSetUpdateStrategy(type="RollingUpdate"),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        # The plugin talks to the kubelet over its device-plugin socket only and
                        # calls no Kubernetes API, so no service-account token is mounted.
                        # https://github.com/NVIDIA/k8s-device-plugin (deployments/static/
                        # nvidia-device-plugin.yml: no service account, no RBAC)
                        automount_service_account_token=False,
                        priority_class_name="system-node-critical",
                        node_selector={NODE_ROLE_LABEL: "gpu"},
                        tolerations=[
                            k8s.Toleration(key="CriticalAddonsOnly", operator="Exists"),
                            k8s.Toleration(
                                key=GPU_TAINT_KEY, operator="Exists", effect="NoSchedule"
                            ),
                        ],
                        containers=[
                            k8s.Container(
                                name="nvidia-device-plugin",
                                image=image,
                                image_pull_policy="IfNotPresent",
                                env=[k8s.EnvVar(name="FAIL_ON_INIT_ERROR", value="false")],
                                security_context=k8s.SecurityContext(
                                    allow_privilege_escalation=False,
                                    capabilities=k8s.Capabilities(drop=["ALL"]),
                                ),
                                resources=k8s.ResourceRequirements(
                                    requests={
                                        "cpu": k8s.Quantity.from_string("50m"),
                                        "memory": k8s.Quantity.from_string("64Mi"),
                                    },
                                    limits={"memory": k8s.Quantity.from_string("256Mi")},
                                ),
                                volume_mounts=[
                                    k8s.VolumeMount(
                                        name="device-plugins",
                                        mount_path="/var/lib/kubelet/device-plugins",
                                    )
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="device-plugins",
                                host_path=k8s.HostPathVolumeSource(
                                    path="/var/lib/kubelet/device-plugins", type="Directory"
                                ),
                            )
                        ],
                    ),
                ),
            ),
        )
