"""etcd for TorchElastic's etcd rendezvous (``--rdzv_endpoint etcd-server:2379``).

One etcd member in its own namespace on the system nodes, with the v2 API the rendezvous
backend needs, and an ExternalName Service in the training namespace so pods there reach it
as ``etcd-server:2379``. Rendezvous state is transient: the data directory is an emptyDir.
"""

from __future__ import annotations

from collections.abc import Mapping

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_charts.names import (
    ETCD_CLIENT_PORT,
    ETCD_NAMESPACE,
    ETCD_PEER_PORT,
    ETCD_SERVICE,
    NODE_ROLE_LABEL,
)
from ml_platform.versions import ETCD_IMAGE

_APP = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/part-of": "ml-platform"}
_VOLUME_DIR = "/var/run/etcd"
_DATA_DIR = f"{_VOLUME_DIR}/default.etcd"  # etcd creates it with the 0700 mode it wants


class EtcdChart(cdk8s.Chart):
    """Namespace ``etcd``, the etcd Deployment and Service ``etcd-server`` (2379 client, 2380
    peer), and an ExternalName Service ``etcd-server`` in the training namespace.

    The training namespace itself is not created here (see
    :class:`~ml_platform.k8s_charts.fsx_storage.TrainingStorageChart`): apply that chart first.

    Args:
        training_namespace: Namespace of the training jobs. Required.
        namespace: Namespace of etcd. Default ``etcd``.
        image: etcd image (3.5.x: the v2 API is gone in 3.6). Default
            :data:`~ml_platform.versions.ETCD_IMAGE`.
        node_selector: Where etcd runs. Default the system node group.
        cluster_domain: The cluster's DNS domain. Default ``cluster.local``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        training_namespace: str,
        namespace: str = ETCD_NAMESPACE,
        image: str = ETCD_IMAGE,
        node_selector: Mapping[str, str] | None = None,
        cluster_domain: str = "cluster.local",
    ) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        if training_namespace == namespace:
            raise ValueError(
                f"{self.node.path}: training_namespace={training_namespace!r}: must differ from "
                f"namespace={namespace!r} (both would hold a Service named {ETCD_SERVICE!r})"
            )
        selector = dict(node_selector) if node_selector is not None else {NODE_ROLE_LABEL: "system"}
        fqdn = f"{ETCD_SERVICE}.{namespace}.svc.{cluster_domain}"
        peer = f"http://localhost:{ETCD_PEER_PORT}"  # a single member: peers stay local
        command = [
            "/usr/local/bin/etcd",
            "--name=etcd-server",
            f"--data-dir={_DATA_DIR}",
            "--enable-v2",  # TorchElastic's etcd rendezvous speaks the v2 API
            f"--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}",
            f"--advertise-client-urls=http://{fqdn}:{ETCD_CLIENT_PORT}",
            f"--listen-peer-urls=http://0.0.0.0:{ETCD_PEER_PORT}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=etcd-server={peer}",
            "--initial-cluster-state=new",
        ]
        self.etcd_namespace = k8s.KubeNamespace(
            self, "Namespace", metadata=k8s.ObjectMeta(name=namespace, labels=_APP)
        )
        self.deployment = k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=k8s.ObjectMeta(name=ETCD_SERVICE, namespace=namespace, labels=_APP),
            spec=k8s.DeploymentSpec(
                replicas=1,
                # A second member must never start against the same (empty) state.
                strategy=k8s.DeploymentStrategy(type="Recreate"),
                selector=k8s.LabelSelector(match_labels=_APP),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=_APP),
                    spec=k8s.PodSpec(
                        node_selector=selector,
                        automount_service_account_token=False,
                        security_context=k8s.PodSecurityContext(
                            run_as_non_root=True,
                            run_as_user=65534,
                            run_as_group=65534,
                            fs_group=65534,
                            seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
                        ),
                        containers=[
                            k8s.Container(
                                name="etcd",
                                image=image,
                                command=command,
                                ports=[
                                    k8s.ContainerPort(
                                        name="client", container_port=ETCD_CLIENT_PORT
                                    ),
                                    k8s.ContainerPort(name="peer", container_port=ETCD_PEER_PORT),
                                ],
                                resources=k8s.ResourceRequirements(
                                    requests={
                                        "cpu": k8s.Quantity.from_string("250m"),
                                        "memory": k8s.Quantity.from_string("256Mi"),
                                    },
                                    limits={"memory": k8s.Quantity.from_string("1Gi")},
                                ),
                                readiness_probe=k8s.Probe(
                                    tcp_socket=k8s.TcpSocketAction(
                                        port=k8s.IntOrString.from_number(ETCD_CLIENT_PORT)
                                    ),
                                    period_seconds=10,
                                ),
                                security_context=k8s.SecurityContext(
                                    allow_privilege_escalation=False,
                                    read_only_root_filesystem=True,
                                    capabilities=k8s.Capabilities(drop=["ALL"]),
                                ),
                                volume_mounts=[
                                    k8s.VolumeMount(name="data", mount_path=_VOLUME_DIR)
                                ],
                            )
                        ],
                        volumes=[k8s.Volume(name="data", empty_dir=k8s.EmptyDirVolumeSource())],
                    ),
                ),
            ),
        )
        self.service = k8s.KubeService(
            self,
            "Service",
            metadata=k8s.ObjectMeta(name=ETCD_SERVICE, namespace=namespace, labels=_APP),
            spec=k8s.ServiceSpec(
                selector=_APP,
                ports=[
                    k8s.ServicePort(
                        name="client",
                        port=ETCD_CLIENT_PORT,
                        target_port=k8s.IntOrString.from_number(ETCD_CLIENT_PORT),
                    ),
                    k8s.ServicePort(
                        name="peer",
                        port=ETCD_PEER_PORT,
                        target_port=k8s.IntOrString.from_number(ETCD_PEER_PORT),
                    ),
                ],
            ),
        )
        # A DNS alias: `etcd-server` in the training namespace resolves to the service above.
        self.alias = k8s.KubeService(
            self,
            "TrainingAlias",
            metadata=k8s.ObjectMeta(name=ETCD_SERVICE, namespace=training_namespace, labels=_APP),
            spec=k8s.ServiceSpec(type="ExternalName", external_name=fqdn),
        )
