"""Chart: the Job that copies the BERT pretraining dataset onto FSx for Lustre.

Four steps in one pod, only the first as root:

1. ``prepare`` (BusyBox, root with ``CAP_CHOWN`` only): creates ``/data/datasets``, the
   staging folder and the Hugging Face cache and hands them to the dataset user. The Lustre file system's root directory
   belongs to root; nothing else runs as root.
2. ``download`` (AWS CLI, non-root): the public tarball, unsigned (no credentials), into the
   staging folder as ``*.part``, renamed when complete, so an interrupted copy is restarted.
3. ``extract`` (python3, non-root): ``ml_platform/training/dataset_extract.py`` with the
   project's safe extractor (``ml_platform/triton/archive_safety.py``), both from a ConfigMap
   of the same manifest: checks the tarball's SHA-256 against ``training.dataset_sha256``
   (warns with the computed digest when it is not set: no public source states it), unpacks
   into ``/data/datasets/<name>``, apart from the compile and Hugging Face caches, and writes
   a marker. Applied again, the Job finds the marker and exits at once.
4. ``hf-cache`` (a slim Python image, non-root; with ``seed_hf_cache``):
   ``ml_platform/training/hf_seed.py`` from the same ConfigMap pre-seeds the shared Hugging
   Face cache (``/data/hf_home``) with the files the script's
   ``BertForPreTraining.from_pretrained`` reads, so the training pods read them offline
   (``HF_HUB_OFFLINE=1``) instead of every node fetching them through the NAT gateway. It
   installs huggingface-hub from PyPI, hash-pinned (``hf-seed-requirements.lock``), rather
   than pulling the multi-GB training image onto a system node for one download.
"""

from __future__ import annotations

__all__ = [
    "DatasetCopyChart",
]

from pathlib import Path

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy
from ml_platform.k8s_charts._workloads_common import (
    labels,
    only_in_fsx_zone,
    resources,
    restricted_container_security,
    system_node_selector,
)
from ml_platform.k8s_names import FSX_CLAIM, FSX_MOUNT_PATH
from ml_platform.training import dataset_extract, hf_seed
from ml_platform.training.component import HF_CACHE_DIR
from ml_platform.training.images import (
    AWS_CLI_IMAGE,
    BUSYBOX_IMAGE,
    DATASET_TOOLS_IMAGE,
    HF_SEED_IMAGE,
)
from ml_platform.training.jobs import (
    BERT_DATA_DIR,
    BERT_DATASET,
    BERT_DATASET_URI,
    BERT_HF_MODEL,
    DATASETS_DIR,
)
from ml_platform.triton import archive_safety

JOB_NAME = "bert-dataset"
TOOLS_CONFIGMAP = f"{JOB_NAME}-tools"
TOOLS_DIR = "/opt/dataset-tools"
STAGING_DIR = f"{FSX_MOUNT_PATH}/.staging"
TARBALL = f"{STAGING_DIR}/{BERT_DATASET}.tar"
DONE_MARKER = f"{STAGING_DIR}/{BERT_DATASET}.done"
STEP_IMAGES = {
    "prepare": BUSYBOX_IMAGE,
    "download": AWS_CLI_IMAGE,
    "extract": DATASET_TOOLS_IMAGE,
    "hf-cache": HF_SEED_IMAGE,
}
"""The pinned public image of each step (``ml_platform/training/images.py``), before the
image policy."""
DATASET_UID = 65532  # an unprivileged user and group of its own (no name needed in the images)

PREPARE_SCRIPT = """\
set -eu
mkdir -p "$DATASETS_DIR" "$STAGING_DIR" "$HF_HOME"
chown "$DATASET_UID:$DATASET_UID" "$DATASETS_DIR" "$STAGING_DIR" "$HF_HOME"
"""

HF_SEED_PACKAGES = "/tmp/hf-seed-packages"  # the hf-cache step's pip --target (emptyDir)

DOWNLOAD_SCRIPT = """\
set -eu
if [ -e "$DONE_MARKER" ] || [ -e "$TARBALL" ]; then
  echo "already downloaded: $TARBALL"; exit 0
fi
echo "downloading $DATASET_URI"
aws s3 cp --no-sign-request --only-show-errors "$DATASET_URI" "$TARBALL.part"
mv "$TARBALL.part" "$TARBALL"
"""


def tools_files() -> dict[str, str]:
    """The ConfigMap's files: the extract step and the safe extractor it imports; the
    hf-cache step and its hash-pinned requirements (package files, read, no network)."""
    seed = Path(hf_seed.__file__)
    return {
        "dataset_extract.py": Path(dataset_extract.__file__).read_text(encoding="utf-8"),
        "archive_safety.py": Path(archive_safety.__file__).read_text(encoding="utf-8"),
        "hf_seed.py": seed.read_text(encoding="utf-8"),
        hf_seed.REQUIREMENTS_FILE: seed.with_name(hf_seed.REQUIREMENTS_FILE).read_text(
            encoding="utf-8"
        ),
    }


class DatasetCopyChart(cdk8s.Chart):
    """The dataset copy Job in the training namespace, on the system nodes.

    Args:
        namespace: The training namespace (holds the FSx claim). Required.
        trainium_az: The AZ of the file system; the pod runs there. Required.
        region: Region of the dataset bucket client. Required.
        dataset_sha256: SHA-256 the tarball must have. Default none: the Job prints the digest
            it computed and warns (no public source states it).
        seed_hf_cache: Whether the ``hf-cache`` step pre-seeds the Hugging Face cache the
            training pods read offline. Default true.
        images: The image policy (mirrors, digests) the pinned public images of the steps
            (:data:`STEP_IMAGES`) are pulled through, as every other image of the cluster.
            Default: the public registries, digests only from public records.

    Attributes:
        job: The ``batch/v1`` Job. tools: The ConfigMap with the extract step and the safe
            extractor, the hf-cache step and its requirements.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        namespace: str,
        trainium_az: str,
        region: str,
        dataset_sha256: str | None = None,
        seed_hf_cache: bool = True,
        images: ImagePolicy = DEFAULT_POLICY,
    ) -> None:
        super().__init__(scope, construct_id)
        pulled = {step: images.resolve(image) for step, image in STEP_IMAGES.items()}
        env = [
            k8s.EnvVar(name="DATASET_URI", value=BERT_DATASET_URI),
            k8s.EnvVar(name="TARBALL", value=TARBALL),
            k8s.EnvVar(name="DONE_MARKER", value=DONE_MARKER),
            k8s.EnvVar(name="DATASETS_DIR", value=DATASETS_DIR),
            k8s.EnvVar(name="DATASET_NAME", value=BERT_DATASET),
            k8s.EnvVar(name="DATA_DIR", value=BERT_DATA_DIR),
        ]
        mounts = [
            k8s.VolumeMount(name="data", mount_path=FSX_MOUNT_PATH),
            k8s.VolumeMount(name="tmp", mount_path="/tmp"),
        ]
        pod_labels = labels(JOB_NAME, "dataset")
        self.tools = k8s.KubeConfigMap(
            self,
            "Tools",
            metadata=k8s.ObjectMeta(name=TOOLS_CONFIGMAP, namespace=namespace, labels=pod_labels),
            data=tools_files(),
        )
        non_root = restricted_container_security()
        self.job = k8s.KubeJob(
            self,
            "Job",
            metadata=k8s.ObjectMeta(name=JOB_NAME, namespace=namespace, labels=pod_labels),
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
                        affinity=only_in_fsx_zone(trainium_az),
                        security_context=k8s.PodSecurityContext(
                            run_as_user=DATASET_UID,
                            run_as_group=DATASET_UID,
                            seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
                        ),
                        init_containers=[
                            _prepare_container(pulled["prepare"], mounts[0]),
                            _download_container(pulled["download"], env, mounts, region, non_root),
                        ],
                        containers=[
                            *(
                                [_hf_seed_container(pulled["hf-cache"], mounts, non_root)]
                                if seed_hf_cache
                                else []
                            ),
                            _extract_container(
                                pulled["extract"], env, mounts, dataset_sha256, non_root
                            ),
                        ],
                        volumes=_volumes(),
                    ),
                ),
            ),
        )


def _hf_seed_container(
    image: str, mounts: list[k8s.VolumeMount], security: k8s.SecurityContext
) -> k8s.Container:
    """Seeds the Hugging Face cache with ``hf_seed.py`` from the tools ConfigMap."""
    return k8s.Container(
        name="hf-cache",
        image=image,
        command=["python3", "-I", f"{TOOLS_DIR}/hf_seed.py"],
        env=[
            k8s.EnvVar(name="HF_HOME", value=HF_CACHE_DIR),
            k8s.EnvVar(name="HF_MODEL", value=BERT_HF_MODEL),
            k8s.EnvVar(name="HF_SEED_PACKAGES", value=HF_SEED_PACKAGES),
            # pip and huggingface-hub write only under /tmp (emptyDir) and HF_HOME (FSx).
            k8s.EnvVar(name="HOME", value="/tmp"),
        ],
        # 12 wheels (2.1 MB) and a streamed download of the weights (1.3 GB, to FSx).
        resources=resources("250m", "256Mi", "1Gi"),
        security_context=security,
        volume_mounts=[
            *mounts,
            k8s.VolumeMount(name="tools", mount_path=TOOLS_DIR, read_only=True),
        ],
    )


def _prepare_container(image: str, data: k8s.VolumeMount) -> k8s.Container:
    """Creates the dataset, staging and Hugging Face folders on FSx, owned by the Job's user."""
    return k8s.Container(
        name="prepare",
        image=image,
        command=["/bin/sh", "-c"],
        args=[PREPARE_SCRIPT],
        env=[
            k8s.EnvVar(name="DATASETS_DIR", value=DATASETS_DIR),
            k8s.EnvVar(name="STAGING_DIR", value=STAGING_DIR),
            k8s.EnvVar(name="HF_HOME", value=HF_CACHE_DIR),
            k8s.EnvVar(name="DATASET_UID", value=str(DATASET_UID)),
        ],
        resources=resources("50m", "16Mi", "64Mi"),
        # Root, for the root-owned file system root only: mkdir as its owner, chown with
        # CAP_CHOWN, nothing else.
        security_context=k8s.SecurityContext(
            allow_privilege_escalation=False,
            capabilities=k8s.Capabilities(drop=["ALL"], add=["CHOWN"]),
            read_only_root_filesystem=True,
            run_as_non_root=False,
            run_as_user=0,
            run_as_group=0,
        ),
        volume_mounts=[data],
    )


def _download_container(
    image: str,
    env: list[k8s.EnvVar],
    mounts: list[k8s.VolumeMount],
    region: str,
    security: k8s.SecurityContext,
) -> k8s.Container:
    """Downloads the dataset tarball to the staging folder with the AWS CLI."""
    return k8s.Container(
        name="download",
        image=image,
        command=["/bin/sh", "-c"],
        args=[DOWNLOAD_SCRIPT],
        env=[
            *env,
            k8s.EnvVar(name="AWS_REGION", value=region),
            k8s.EnvVar(name="HOME", value="/tmp"),
        ],
        resources=resources("250m", "256Mi", "1Gi"),
        security_context=security,
        volume_mounts=mounts,
    )


def _extract_container(
    image: str,
    env: list[k8s.EnvVar],
    mounts: list[k8s.VolumeMount],
    dataset_sha256: str | None,
    security: k8s.SecurityContext,
) -> k8s.Container:
    """Checks and unpacks the tarball with ``dataset_extract.py`` from the tools ConfigMap."""
    return k8s.Container(
        name="extract",
        image=image,
        command=["python3", "-I", f"{TOOLS_DIR}/dataset_extract.py"],
        env=[
            *env,
            k8s.EnvVar(name="DATASET_SHA256", value=dataset_sha256 or ""),
        ],
        resources=resources("500m", "256Mi", "1Gi"),
        security_context=security,
        volume_mounts=[
            *mounts,
            k8s.VolumeMount(name="tools", mount_path=TOOLS_DIR, read_only=True),
        ],
    )


def _volumes() -> list[k8s.Volume]:
    """The FSx claim (``data``), scratch space (``tmp``) and the tools ConfigMap."""
    return [
        k8s.Volume(
            name="data",
            persistent_volume_claim=k8s.PersistentVolumeClaimVolumeSource(claim_name=FSX_CLAIM),
        ),
        k8s.Volume(name="tmp", empty_dir=k8s.EmptyDirVolumeSource()),
        k8s.Volume(
            name="tools",
            config_map=k8s.ConfigMapVolumeSource(name=TOOLS_CONFIGMAP),
        ),
    ]
