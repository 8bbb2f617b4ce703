"""Chart: the Job that copies the BERT pretraining dataset onto FSx for Lustre.

Two steps in one pod. The AWS CLI image downloads the public tarball without signing
(no credentials needed) into a staging folder on /data; a BusyBox container extracts it
under /data (the AWS CLI image, Amazon Linux 2 minimal, has no ``tar``). A marker file
makes the Job idempotent: applied again, it finds the marker and exits at once. A download
is written to ``*.part`` and renamed when complete, so an interrupted copy is restarted,
never extracted half-way.

The pod runs as root because the Lustre file system's root directory belongs to root; it
drops every capability (tar keeps no owners: ``-o``) and cannot escalate.
"""

from __future__ import annotations

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.k8s_charts.names import FSX_CLAIM, FSX_MOUNT_PATH
from ml_platform.k8s_charts.workloads_common import (
    labels,
    near_fsx_affinity,
    resources,
    restricted_container_security,
    system_node_selector,
)
from ml_platform.training.images import AWS_CLI_IMAGE, BUSYBOX_IMAGE
from ml_platform.training.jobs import BERT_DATASET, BERT_DATASET_URI

JOB_NAME = "bert-dataset"
STAGING_DIR = f"{FSX_MOUNT_PATH}/.staging"
TARBALL = f"{STAGING_DIR}/{BERT_DATASET}.tar"
DONE_MARKER = f"{STAGING_DIR}/{BERT_DATASET}.done"

DOWNLOAD_SCRIPT = """\
set -eu
if [ -e "$DONE_MARKER" ] || [ -e "$TARBALL" ]; then
  echo "already downloaded: $TARBALL"; exit 0
fi
mkdir -p "$(dirname "$TARBALL")"
echo "downloading $DATASET_URI"
aws s3 cp --no-sign-request --only-show-errors "$DATASET_URI" "$TARBALL.part"
mv "$TARBALL.part" "$TARBALL"
"""

EXTRACT_SCRIPT = """\
set -eu
if [ -e "$DONE_MARKER" ]; then
  echo "already extracted: $DATA_DIR"; exit 0
fi
echo "extracting $TARBALL into $TARGET_DIR"
tar -x -o -f "$TARBALL" -C "$TARGET_DIR"
if [ ! -d "$DATA_DIR" ]; then
  echo "expected $DATA_DIR after extraction" >&2; exit 1
fi
touch "$DONE_MARKER"
rm -f "$TARBALL"
echo "dataset ready: $DATA_DIR"
"""


class DatasetCopyChart(cdk8s.Chart):
    """The dataset copy Job in the training namespace, on the system nodes.

    Args:
        namespace: The training namespace (holds the FSx claim). Required.
        trainium_az: The AZ of the file system; the pod runs there. Required.
        region: Region of the dataset bucket client. Required.

    Attributes:
        job: The ``batch/v1`` Job.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, namespace: str, trainium_az: str, region: str
    ) -> None:
        super().__init__(scope, construct_id)
        env = [
            k8s.EnvVar(name="DATASET_URI", value=BERT_DATASET_URI),
            k8s.EnvVar(name="TARBALL", value=TARBALL),
            k8s.EnvVar(name="DONE_MARKER", value=DONE_MARKER),
            k8s.EnvVar(name="TARGET_DIR", value=FSX_MOUNT_PATH),
            k8s.EnvVar(name="DATA_DIR", value=f"{FSX_MOUNT_PATH}/{BERT_DATASET}"),
        ]
        mounts = [
            k8s.VolumeMount(name="data", mount_path=FSX_MOUNT_PATH),
            k8s.VolumeMount(name="tmp", mount_path="/tmp"),
        ]
        pod_labels = labels(JOB_NAME, "dataset")
        self.job = k8s.KubeJob(
            self,
            "Job",
            metadata=k8s.ObjectMeta(
                name=JOB_NAME, namespace=namespace, labels=pod_labels
            ),
            spec=k8s.JobSpec(
                backoff_limit=4,
                active_deadline_seconds=4 * 3600,  # tens of GB; minutes when healthy
                ttl_seconds_after_finished=24 * 3600,  # re-applying later is a no-op anyway
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=pod_labels),
                    spec=k8s.PodSpec(
                        restart_policy="Never",
                        automount_service_account_token=False,  # no Kubernetes API access
                        node_selector=system_node_selector(),
                        affinity=near_fsx_affinity(trainium_az),
                        security_context=k8s.PodSecurityContext(
                            run_as_user=0,
                            run_as_group=0,
                            seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
                        ),
                        init_containers=[
                            k8s.Container(
                                name="download",
                                image=AWS_CLI_IMAGE,
                                command=["/bin/sh", "-c"],
                                args=[DOWNLOAD_SCRIPT],
                                env=[
                                    *env,
                                    k8s.EnvVar(name="AWS_REGION", value=region),
                                    k8s.EnvVar(name="HOME", value="/tmp"),
                                ],
                                resources=resources("250m", "256Mi", "1Gi"),
                                security_context=restricted_container_security(run_as_root=True),
                                volume_mounts=mounts,
                            )
                        ],
                        containers=[
                            k8s.Container(
                                name="extract",
                                image=BUSYBOX_IMAGE,
                                command=["/bin/sh", "-c"],
                                args=[EXTRACT_SCRIPT],
                                env=env,
                                resources=resources("250m", "64Mi", "512Mi"),
                                security_context=restricted_container_security(run_as_root=True),
                                volume_mounts=mounts,
                            )
                        ],
                        volumes=[
                            k8s.Volume(
                                name="data",
                                persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(
                                    claim_name=FSX_CLAIM
                                ),
                            ),
                            k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource()),
                        ],
                    ),
                ),
            ),
        )
