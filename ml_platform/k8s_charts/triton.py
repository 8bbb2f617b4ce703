"""Chart: Triton Inference Server on the cluster's GPU nodes, serving the ensemble archives.

Triton reads a model repository of folders, not the ``.tar.gz`` archives SageMaker takes, so
two init containers fetch the configured archives from the model bucket (AWS CLI, with the
service account's Pod Identity role) and unpack them into the repository volume. The models
to load come from the same table the archives are built from (:mod:`ml_platform.triton.kinds`).

Unpacking runs ``ml_platform/triton/archive_safety.py`` itself with the Triton image's
``python3``: it refuses ``..``/absolute names, links, device files, files outside the model
folders and oversized members before writing anything (``tar -x`` would follow them).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import cdk8s
from cdk8s_plus_35 import k8s
from constructs import Construct

from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy
from ml_platform.k8s_charts._workloads_common import resources
from ml_platform.k8s_charts.network_policies import triton_policies
from ml_platform.k8s_names import (
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    NAMESPACE_POD_SECURITY,
    NODE_ROLE_LABEL,
    pod_security_labels,
)
from ml_platform.training.images import AWS_CLI_IMAGE
from ml_platform.triton import archive_safety
from ml_platform.triton.archive_names import (
    ARCHIVE_SUFFIX,
    SHA256_METADATA,
    archive_file,
    parse_ref,
)
from ml_platform.triton.kinds import BUILT_IN_ARCHIVES, archive_models
from ml_platform.triton.releases import triton_image

__all__ = [
    "ARCHIVE_DIR",
    "GRPC_PORT",
    "HTTP_PORT",
    "MAX_ARCHIVE_BYTES",
    "METRICS_PORT",
    "MODEL_DIR",
    "NAME",
    "RESTRICTED_APIS",
    "RESTRICTED_HEADER",
    "TRITON_UID",
    "TritonChart",
    "TritonChartProps",
    "fetch_command",
    "models_to_load",
    "server_command",
    "triton_image",
    "unpack_command",
]

NAME = "triton"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
TRITON_UID = 1000  # the triton-server user of NVIDIA's image
MODEL_DIR = "/models"
ARCHIVE_DIR = "/archives"


def unpack_command(archive_paths: Sequence[str], dest: str = MODEL_DIR) -> list[str]:
    """The unpack init container's command: the archive-safety module run by ``python3``
    (stdlib only) on ``archive_paths``, unpacking into ``dest``. Tests run it locally."""
    source = Path(archive_safety.__file__).read_text(encoding="utf-8")
    return ["python3", "-I", "-c", source, dest, *archive_paths]


def _gib(size: int) -> str:
    """A byte count as a Kubernetes quantity in whole GiB, rounded up."""
    return f"{-(-size // 1024**3)}Gi"


# Triton's "Secure Deployment Considerations" ask to switch off the endpoints and APIs a
# deployment does not need:
# https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/deploy.md
# The pods serve inference, health and metadata only. These API groups ("Limit Endpoint
# Access" in inference_protocols.md; names as `tritonserver --help` lists them) are fenced
# behind a header whose value is drawn at random when the container starts and never leaves
# it, so no client can call them; the probes use the unrestricted health API.
# https://github.com/triton-inference-server/server/blob/main/docs/customization_guide/inference_protocols.md#limit-endpoint-access-beta
RESTRICTED_APIS = ("model-repository", "shared-memory", "logging", "trace", "statistics")
RESTRICTED_HEADER = "triton-admin-key"


def server_command(args: Sequence[str], *, grpc: bool) -> list[str]:
    """The Triton container's command: ``tritonserver`` with ``args``, the restricted HTTP APIs
    (and gRPC protocols, when gRPC is on) keyed to a random per-start value, and gRPC switched
    off unless ``grpc``. Backquotes, not ``$(...)``, so Kubernetes leaves the shell's command
    substitution alone (it expands ``$(NAME)`` in commands)."""
    groups = ",".join(RESTRICTED_APIS)
    restricted = [f'--http-restricted-api={groups}:{RESTRICTED_HEADER}="$key"']
    if grpc:
        restricted.append(f'--grpc-restricted-protocol={groups}:{RESTRICTED_HEADER}="$key"')
    else:
        restricted.append("--allow-grpc=false")
    script = (
        "key=`od -An -tx1 -N32 /dev/urandom | tr -d ' \\n'`; "
        f"exec tritonserver {' '.join(shlex.quote(a) for a in args)} {' '.join(restricted)}"
    )
    return ["sh", "-ec", script]


def models_to_load(archives: Sequence[str]) -> list[str]:
    """Model names Triton loads for ``archives`` (references ``NAME`` or ``NAME@vXXXXXXXX``
    of the archives this repository builds), ensembles first; unknown archives raise."""
    models = [archive_models(a) for a in archives]
    unknown = [a for a, m in zip(archives, models, strict=True) if m is None]
    if unknown:
        raise ValueError(
            f"archives={unknown!r}: expected references to archives among "
            f"{list(BUILT_IN_ARCHIVES)} (NAME or NAME@vXXXXXXXX)"
        )
    names = [name for m in models for name in m or ()]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise ValueError(f"archives={list(archives)!r}: model names {clashes} appear twice")
    return names


#: Largest archive object the fetch downloads (compressed); the archives volume holds this
#: much per archive (its emptyDir sizeLimit), the models volume archive_safety's unpacked cap.
MAX_ARCHIVE_BYTES = 4 * 1024**3


def fetch_command(
    bucket: str,
    prefix: str,
    archive: str,
    max_bytes: int = MAX_ARCHIVE_BYTES,
    archive_dir: str = ARCHIVE_DIR,
) -> str:
    """Shell that copies one archive to ``/archives/<logical>.tar.gz``: an exact version by its
    key, a logical name as its newest version under the prefix (latest LastModified among
    ``<logical>-vXXXXXXXX.tar.gz``; the AWS CLI pages through every object).

    Before anything is written it reads the object's size and the full SHA-256 that
    ``mlp models upload`` recorded in its metadata, and refuses an object above ``max_bytes``,
    one without a well-formed digest, or one whose digest does not start with the version its
    key names. It downloads exactly the object it checked (``--if-match`` its ETag), verifies
    the bytes against that digest and deletes them on a mismatch, so the unpack step only
    sees archives whose full content is what the upload recorded.
    """
    ref = parse_ref(archive)
    target = shlex.quote(f"{archive_dir}/{archive_file(ref.logical)}")
    if ref.version is not None:
        resolve = f"key={shlex.quote(prefix + ref.key)}"
    else:
        # Extended regex of the exact key form; only '.' needs escaping in prefix and name.
        key_re = f"{prefix}{ref.logical}-v[0-9a-f]{{8}}{ARCHIVE_SUFFIX}".replace(".", r"\.")
        listing = (
            'aws s3api list-objects-v2 --bucket "$bucket" '
            f"--prefix {shlex.quote(f'{prefix}{ref.logical}-v')} "
            "--query 'Contents[].[LastModified,Key]' --output text"
        )
        newest = f"$({listing} | grep -E {shlex.quote(chr(9) + key_re + '$')} | sort | tail -n 1 | cut -f 2)"
        missing = (
            shlex.quote(f"no version of {ref.logical} under s3://")
            + '"$bucket"'
            + shlex.quote(f"/{prefix}")
        )
        resolve = f'key="{newest}" && {{ [ -n "$key" ] || {{ echo {missing} >&2; exit 1; }}; }}'

    def fail(message: str) -> str:
        return f'{{ echo "s3://$bucket/$key: {message}" >&2; exit 1; }}'

    steps = [
        # The bucket once (a CDK token in the stack: one copy in the manifest, not one per line).
        f"bucket={shlex.quote(bucket)}",
        resolve,
        # One line: size, ETag, recorded digest ("None" when absent).
        'head=$(aws s3api head-object --bucket "$bucket" --key "$key" '
        f"--query '[ContentLength,ETag,Metadata.{SHA256_METADATA}]' --output text)",
        "set -- $head && size=$1 etag=$2 digest=$3",
        f'{{ [ "$size" -le {max_bytes} ] || {fail(f"$size bytes, above the cap of {max_bytes}")}; }}',
        "{ printf '%s\\n' \"$digest\" | grep -Eq '^[0-9a-f]{64}$' || "
        + fail("no sha256 metadata recorded by mlp models upload (found $digest)")
        + "; }",
        'version="${key##*-v}" && version="${version%.tar.gz}"',
        '{ [ "${digest#"$version"}" != "$digest" ] || '
        + fail("its sha256 $digest does not start with the version v$version its name carries")
        + "; }",
        f'aws s3api get-object --bucket "$bucket" --key "$key" --if-match "$etag" {target} >/dev/null',
        f'{{ echo "$digest  "{target} | sha256sum -c --status - || {{ rm -f {target}; '
        'echo "s3://$bucket/$key: downloaded bytes do not match its sha256 $digest" >&2; exit 1; }; }',
    ]
    return " && ".join(steps)


@dataclass(frozen=True)
class TritonChartProps:
    """Typed inputs of :class:`TritonChart` (plain strings or CDK tokens, no AWS calls).

    Attributes:
        namespace: Namespace created for Triton. service_account: its service account, the
            name the Pod Identity association binds.
        bucket_name / model_prefix: where the archives are.
        archives: the archives to serve (``NAME`` or ``NAME@vXXXXXXXX``). triton_version: e.g. ``25.09``.
        replicas: Triton replicas, fixed (no HorizontalPodAutoscaler: docs/serving-eks.md,
            "Sizing, not autoscaling", says why). region: for the AWS CLI.
        max_surge: Extra pods a rollout may start before it stops an old one. Default 0: each
            pod holds a whole single-GPU node, so a surge pod needs a spare GPU node; with 0
            a rollout stops a pod first (``maxUnavailable`` 1), which with one replica is an
            outage. From 1, ``maxUnavailable`` is 0: old pods serve until new ones are ready.
        models: models Triton loads, ensembles first. Default (empty): those the built-in
            archives hold (``models_to_load(archives)``).
        grpc: serve Triton's gRPC endpoint (port 8001) too. Default ``False``: HTTP only, as
            the secure-deployment guide asks for endpoints a deployment does not use.
        images: digests and registry mirrors applied to the images. Default: the digests
            public sources state, no mirror.
    """

    bucket_name: str
    model_prefix: str
    archives: tuple[str, ...]
    triton_version: str
    region: str
    replicas: int = 1
    max_surge: int = 0
    namespace: str = "triton"
    service_account: str = "triton"
    models: tuple[str, ...] = ()
    grpc: bool = False
    images: ImagePolicy = DEFAULT_POLICY

    @property
    def pinned_images(self) -> tuple[str, ...]:
        """The images the chart runs, as pinned (before :attr:`images` applies)."""
        return (AWS_CLI_IMAGE, triton_image(self.triton_version))


class TritonChart(cdk8s.Chart):
    """Namespace, service account, Deployment, ClusterIP Service, PDB and network policies for
    Triton.

    Args:
        bucket_name / model_prefix: Where the archives are. Required.
        archives: The archives to serve (``NAME`` or ``NAME@vXXXXXXXX``). Required.
        triton_version: e.g. ``25.09``. Required. region: For the AWS CLI. Required.
        replicas, max_surge, namespace, service_account, models, grpc, images: As
            :class:`TritonChartProps` documents them, with its defaults.
        props: Deprecated: the same inputs as one :class:`TritonChartProps` (instead of the
            keywords above, not with them).

    Attributes:
        props: The inputs, as a :class:`TritonChartProps`.
    """

    @overload
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket_name: str,
        model_prefix: str,
        archives: Sequence[str],
        triton_version: str,
        region: str,
        replicas: int = ...,
        max_surge: int = ...,
        namespace: str = ...,
        service_account: str = ...,
        models: Sequence[str] = ...,
        grpc: bool = ...,
        images: ImagePolicy = ...,
    ) -> None: ...

    @overload
    def __init__(self, scope: Construct, construct_id: str, *, props: TritonChartProps) -> None: ...

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: TritonChartProps | None = None,
        **fields: Any,
    ) -> None:
        super().__init__(scope, construct_id)
        if props is not None and fields:
            raise TypeError(f"TritonChart: props= or keywords, not both (got {sorted(fields)})")
        if props is None:
            for name in ("archives", "models"):
                if name in fields:
                    fields[name] = tuple(fields[name])
            props = TritonChartProps(**fields)
        self.props = props
        # Known archives (or the models given for custom ones) whose names do not clash.
        # Triton loads every unpacked model (--model-control-mode=none below).
        list(props.models) or models_to_load(props.archives)
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "ml-platform"}
        self.namespace_object = k8s.KubeNamespace(
            self,
            "Namespace",
            metadata=k8s.ObjectMeta(
                name=props.namespace, labels=pod_security_labels(NAMESPACE_POD_SECURITY["triton"])
            ),
        )
        # No pod of Triton talks to the Kubernetes API: no API token is mounted. The fetch's
        # AWS credentials do not need it: EKS Pod Identity's webhook adds its own projected
        # token (audience pods.eks.amazonaws.com) and the AWS_CONTAINER_CREDENTIALS_FULL_URI /
        # AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE variables the AWS CLI reads
        # (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html,
        # https://docs.aws.amazon.com/sdkref/latest/guide/feature-container-credentials.html).
        self.service_account = k8s.KubeServiceAccount(
            self,
            "ServiceAccount",
            metadata=self._meta(props.service_account, labels),
            automount_service_account_token=False,
        )
        self.deployment = k8s.KubeDeployment(
            self,
            "Deployment",
            metadata=self._meta(NAME, labels),
            spec=_deployment_spec(props, labels),
        )
        self.service = k8s.KubeService(
            self,
            "Service",
            metadata=self._meta(NAME, labels),
            spec=k8s.ServiceSpec(
                type="ClusterIP",
                selector=labels,
                ports=[
                    k8s.ServicePort(name=n, port=p, target_port=k8s.IntOrString.from_string(n))
                    for n, p in _served_ports(props.grpc)
                ],
            ),
        )
        self.disruption_budget = k8s.KubePodDisruptionBudget(
            self,
            "DisruptionBudget",
            metadata=self._meta(NAME, labels),
            spec=k8s.PodDisruptionBudgetSpec(
                max_unavailable=k8s.IntOrString.from_number(1),
                selector=k8s.LabelSelector(match_labels=labels),
            ),
        )
        self.network_policies = triton_policies(
            self,
            namespace=props.namespace,
            pod_labels=labels,
            serving_ports=(HTTP_PORT, GRPC_PORT) if props.grpc else (HTTP_PORT,),
            metrics_port=METRICS_PORT,
        )
        for obj in (
            self.service_account,
            self.deployment,
            self.service,
            self.disruption_budget,
            *self.network_policies,
        ):
            obj.add_dependency(self.namespace_object)

    def _meta(self, name: str, labels: dict[str, str]) -> k8s.ObjectMeta:
        return k8s.ObjectMeta(name=name, namespace=self.props.namespace, labels=labels)


def _served_ports(grpc: bool) -> list[tuple[str, int]]:
    """The container's named ports: HTTP, gRPC when on, metrics."""
    served_ports = [("http", HTTP_PORT), ("metrics", METRICS_PORT)]
    if grpc:
        served_ports.insert(1, ("grpc", GRPC_PORT))
    return served_ports


def _deployment_spec(props: TritonChartProps, labels: dict[str, str]) -> k8s.DeploymentSpec:
    """Triton's pods: on GPU nodes, fetch and unpack init containers, then the server."""
    return k8s.DeploymentSpec(
        replicas=props.replicas,
        # Every replica holds a whole single-GPU node and the node group does not grow: a
        # surge pod needs a spare GPU node (max_surge, checked against the node count where the
        # chart is used). Without one a rollout stops a pod before starting its successor.
        strategy=k8s.DeploymentStrategy(
            type="RollingUpdate",
            rolling_update=k8s.RollingUpdateDeployment(
                max_surge=k8s.IntOrString.from_number(props.max_surge),
                max_unavailable=k8s.IntOrString.from_number(0 if props.max_surge else 1),
            ),
        ),
        selector=k8s.LabelSelector(match_labels=labels),
        template=k8s.PodTemplateSpec(
            metadata=k8s.ObjectMeta(labels=labels),
            spec=k8s.PodSpec(
                service_account_name=props.service_account,
                automount_service_account_token=False,
                node_selector={NODE_ROLE_LABEL: "gpu"},
                tolerations=[
                    k8s.Toleration(key=GPU_TAINT_KEY, operator="Exists", effect="NoSchedule")
                ],
                security_context=k8s.PodSecurityContext(
                    run_as_user=TRITON_UID,
                    run_as_group=TRITON_UID,
                    fs_group=TRITON_UID,
                    seccomp_profile=k8s.SeccompProfile(type="RuntimeDefault"),
                ),
                init_containers=_init_containers(props),
                containers=[_server_container(props)],
                volumes=_volumes(props),
            ),
        ),
    )


def _init_containers(props: TritonChartProps) -> list[k8s.Container]:
    """Fetch the archives (AWS CLI) and unpack them safely (the server image's python3)."""
    fetch = " && ".join(
        fetch_command(props.bucket_name, props.model_prefix, a) for a in props.archives
    )
    drop_all = k8s.SecurityContext(
        allow_privilege_escalation=False,
        capabilities=k8s.Capabilities(drop=["ALL"]),
        run_as_non_root=True,
        run_as_user=TRITON_UID,
    )
    volume_mounts_init = [
        k8s.VolumeMount(name="archives", mount_path=ARCHIVE_DIR),
        k8s.VolumeMount(name="models", mount_path=MODEL_DIR),
    ]
    return [
        k8s.Container(
            name="fetch-archives",
            image=props.images.resolve(AWS_CLI_IMAGE),
            command=["sh", "-ec", fetch],
            env=[
                k8s.EnvVar(name="AWS_REGION", value=props.region),
                k8s.EnvVar(name="HOME", value="/tmp"),
            ],
            volume_mounts=[
                *volume_mounts_init,
                k8s.VolumeMount(name="tmp", mount_path="/tmp"),
            ],
            security_context=drop_all,
            resources=resources("100m", "256Mi", "512Mi"),
        ),
        k8s.Container(
            name="unpack-archives",
            # The server's own image: its python3 (3.10 or later in every
            # release listed; https://docs.nvidia.com/deeplearning/triton-
            # inference-server/release-notes/) runs the safety module.
            image=props.images.resolve(triton_image(props.triton_version)),
            command=unpack_command(
                [f"{ARCHIVE_DIR}/{archive_file(parse_ref(a).logical)}" for a in props.archives]
            ),
            env=[k8s.EnvVar(name="PYTHONDONTWRITEBYTECODE", value="1")],
            volume_mounts=volume_mounts_init,
            security_context=drop_all,
            resources=resources("100m", "128Mi", "512Mi"),
        ),
    ]


def _probe(path: str, failures: int) -> k8s.Probe:
    return k8s.Probe(
        http_get=k8s.HttpGetAction(path=path, port=k8s.IntOrString.from_string("http")),
        period_seconds=10,
        failure_threshold=failures,
    )


def _server_container(props: TritonChartProps) -> k8s.Container:
    """``tritonserver`` over the unpacked repository, one GPU, restricted APIs fenced."""
    quantity = k8s.Quantity.from_string
    triton_args = [
        f"--model-repository={MODEL_DIR}",
        # Mode none: Triton loads every model in the repository (exactly the unpacked
        # archives' models) at start, and refuses every load/unload request of the
        # model-repository API, so no caller can swap models.
        # https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_management.md
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--exit-on-error=true",
    ]
    return k8s.Container(
        name="tritonserver",
        image=props.images.resolve(triton_image(props.triton_version)),
        command=server_command(triton_args, grpc=props.grpc),
        ports=[k8s.ContainerPort(name=n, container_port=p) for n, p in _served_ports(props.grpc)],
        readiness_probe=_probe("/v2/health/ready", 3),
        liveness_probe=_probe("/v2/health/live", 3),
        # Loading the ensembles (TensorRT/ONNX, DALI) takes minutes.
        startup_probe=_probe("/v2/health/live", 60),
        resources=k8s.ResourceRequirements(
            requests={
                "cpu": quantity("2"),
                "memory": quantity("8Gi"),
                GPU_RESOURCE: quantity("1"),
            },
            limits={
                "memory": quantity("16Gi"),
                GPU_RESOURCE: quantity("1"),
            },
        ),
        volume_mounts=[
            k8s.VolumeMount(name="models", mount_path=MODEL_DIR, read_only=True),
            k8s.VolumeMount(name="dshm", mount_path="/dev/shm"),
        ],
        security_context=k8s.SecurityContext(
            allow_privilege_escalation=False,
            capabilities=k8s.Capabilities(drop=["ALL"]),
            run_as_non_root=True,
        ),
    )


def _volumes(props: TritonChartProps) -> list[k8s.Volume]:
    """The pod's emptyDirs, each bounded (the kubelet evicts a pod past a sizeLimit)."""
    quantity = k8s.Quantity.from_string
    return [
        # Each archive is at most MAX_ARCHIVE_BYTES (the fetch checks the object's size
        # first) and unpacks to at most archive_safety's cap.
        k8s.Volume(
            name="archives",
            empty_dir=k8s.EmptyDirVolumeSource(
                size_limit=quantity(_gib(len(props.archives) * MAX_ARCHIVE_BYTES))
            ),
        ),
        k8s.Volume(
            name="models",
            empty_dir=k8s.EmptyDirVolumeSource(
                size_limit=quantity(_gib(len(props.archives) * archive_safety.MAX_TOTAL_BYTES))
            ),
        ),
        k8s.Volume(
            name="tmp",
            empty_dir=k8s.EmptyDirVolumeSource(size_limit=quantity("256Mi")),
        ),
        # The Python backend passes tensors through shared memory; the
        # container runtime's 64 MiB default is far too small.
        k8s.Volume(
            name="dshm",
            empty_dir=k8s.EmptyDirVolumeSource(medium="Memory", size_limit=quantity("2Gi")),
        ),
    ]
