"""The EFA device plugin: advertises a node's EFA interfaces as ``vpc.amazonaws.com/efa``.

It crash-loops on nodes without EFA, so it is pinned to the EFA instance types by node
affinity, and it tolerates the Trainium nodes' Neuron taint.
"""

from __future__ import annotations

__all__ = [
    "EfaDevicePluginChart",
]

from collections.abc import Sequence

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_charts.neuron import device_plugin_tolerations, instance_type_affinity

NAME = "aws-efa-k8s-device-plugin"
NAMESPACE = "kube-system"
_SELECTOR = {"name": NAME}


class EfaDevicePluginChart(cdk8s.Chart):
    """DaemonSet of the EFA device plugin in ``kube-system``.

    Host network and privileged (it opens the host's ``/dev/infiniband`` devices), no API
    credentials, ``system-node-critical``.

    Args:
        instance_types: EFA-capable instance types it runs on (node affinity). Required.
        image: Plugin image, from the regional EKS registry. Required: see
            :func:`ml_platform.versions.efa_device_plugin_image`.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, instance_types: Sequence[str], image: str
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        if not instance_types:
            raise ValueError(f"{self.node.path}: instance_types=[]: expected at least one type")
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "ml-platform"}
        host_paths = {
            "device-plugin": ("/var/lib/kubelet/device-plugins", None),
            "infiniband-volume": ("/dev/infiniband/", None),
            # the host's Neuron tools, mounted as the upstream chart does
            "neuron-tools": ("/opt/aws/neuron/", "DirectoryOrCreate"),
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
                        automount_service_account_token=False,
                        host_network=True,
                        priority_class_name="system-node-critical",
                        tolerations=device_plugin_tolerations(),
                        affinity=instance_type_affinity(instance_types),
                        containers=[
                            k8s.Container(
                                name=NAME,
                                image=image,
                                image_pull_policy="IfNotPresent",
                                security_context=k8s.SecurityContext(
                                    privileged=True,
                                    allow_privilege_escalation=True,
                                    run_as_non_root=False,
                                    run_as_user=0,
                                ),
                                resources=k8s.ResourceRequirements(
                                    requests={
                                        "cpu": k8s.Quantity.from_string("10m"),
                                        "memory": k8s.Quantity.from_string("20Mi"),
                                    }
                                ),
                                volume_mounts=[
                                    k8s.VolumeMount(name=n, mount_path=p)
                                    for n, (p, _) in host_paths.items()
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(name=n, host_path=k8s.HostPathVolumeSource(path=p, type=t))
                            for n, (p, t) in host_paths.items()
                        ],
                    ),
                ),
            ),
        )
