"""Chart: TensorBoard over the training output on FSx for Lustre.

A Deployment and a ClusterIP Service, reached with ``kubectl port-forward``: no load
balancer, nothing public (the tutorial's public, password-only endpoint is not repeated).
TensorBoard runs as an unprivileged user with a read-only root file system and reads
/data read-only; the training pods write with the default umask, so their event files are
world-readable.
"""

from __future__ import annotations

__all__ = [
    "TensorBoardChart",
]

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_charts._workloads_common import (
    PART_OF,
    labels,
    only_in_fsx_zone,
    resources,
    restricted_container_security,
    system_node_selector,
)
from ml_platform.k8s_names import FSX_CLAIM, FSX_MOUNT_PATH
from ml_platform.training.images import TENSORBOARD_IMAGE
from ml_platform.training.jobs import BERT_OUTPUT_DIR

NAME = "tensorboard"
PORT = 6006
UNPRIVILEGED_UID = 1000


class TensorBoardChart(cdk8s.Chart):
    """TensorBoard Deployment and ClusterIP Service in the training namespace.

    Args:
        namespace: The training namespace (holds the FSx claim). Required.
        trainium_az: The AZ of the file system; the pod runs there. Required.
        logdir: Event files to serve. Default the BERT output folder.
        image: TensorFlow image providing ``tensorboard``. Default ``TENSORBOARD_IMAGE``.

    Attributes:
        deployment: The ``apps/v1`` Deployment.
        service: The ``v1`` Service (port 6006).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        trainium_az: str,
        logdir: str = BERT_OUTPUT_DIR,
        image: str = TENSORBOARD_IMAGE,
    ) -> None:
        super().__init__(scope, construct_id)
        selector = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": PART_OF}
        pod_labels = labels(NAME, "monitoring")
        http = k8s.IntOrString.from_string("http")
        self.deployment = k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=k8s.ObjectMeta(name=NAME, namespace=namespace, labels=pod_labels),
            spec=k8s.DeploymentSpec(
                replicas=1,
                revision_history_limit=3,
                selector=k8s.LabelSelector(match_labels=selector),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=pod_labels),
                    spec=k8s.PodSpec(
                        automount_service_account_token=False,  # no Kubernetes API access
                        node_selector=system_node_selector(),
                        affinity=only_in_fsx_zone(trainium_az),
                        security_context=k8s.PodSecurityContext(
                            run_as_non_root=True,
                            run_as_user=UNPRIVILEGED_UID,
                            run_as_group=UNPRIVILEGED_UID,
                            seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
                        ),
                        containers=[
                            k8s.Container(
                                name=NAME,
                                image=image,
                                # Docker Hub limits anonymous pulls: pull once per node.
                                image_pull_policy="IfNotPresent",
                                command=["tensorboard"],
                                args=["--logdir", logdir, "--bind_all", "--port", str(PORT)],
                                # TensorBoard keeps state under $HOME and /tmp.
                                env=[k8s.EnvVar(name="HOME", value="/tmp")],
                                ports=[k8s.ContainerPort(name="http", container_port=PORT)],
                                readiness_probe=k8s.Probe(
                                    http_get=k8s.HttpGetAction(path="/", port=http),
                                    initial_delay_seconds=10,
                                    period_seconds=10,
                                ),
                                liveness_probe=k8s.Probe(
                                    tcp_socket=k8s.TcpSocketAction(port=http),
                                    initial_delay_seconds=30,
                                    period_seconds=20,
                                    failure_threshold=6,
                                ),
                                resources=resources("250m", "1Gi", "4Gi"),
                                security_context=restricted_container_security(),
                                volume_mounts=[
                                    k8s.VolumeMount(
                                        name="data", mount_path=FSX_MOUNT_PATH, read_only=True
                                    ),
                                    k8s.VolumeMount(name="tmp", mount_path="/tmp"),
                                ],
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="data",
                                persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(
                                    claim_name=FSX_CLAIM, read_only=True
                                ),
                            ),
                            k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource()),
                        ],
                    ),
                ),
            ),
        )
        self.service = k8s.KubeService(
            self,
            "Service",
            metadata=k8s.ObjectMeta(name=NAME, namespace=namespace, labels=pod_labels),
            spec=k8s.ServiceSpec(
                type="ClusterIP",
                selector=selector,
                ports=[k8s.ServicePort(name="http", port=PORT, target_port=http, protocol="TCP")],
            ),
        )
