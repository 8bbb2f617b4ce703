"""Triton on an EKS cluster: a GPU node group, NVIDIA's device plugin and the Triton chart,
with a Pod Identity role that can only read the model archives.

Every Kubernetes object is applied by a manifest in this construct's own scope (not the
cluster's), so several instances can share a cluster and an instance can live in a stack of
its own: the manifests there depend on the cluster stack, never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import cdk8s
from aws_cdk import Annotations, CfnOutput, Fn, Names, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IDependable

from ml_platform import limits
from ml_platform.constructs._nag import acknowledge, rendered_resource
from ml_platform.constructs._nodegroup import reserved_label_problems
from ml_platform.constructs._per_app import key_of, registry
from ml_platform.constructs._props import check_props
from ml_platform.constructs.addons import pod_identity_principal
from ml_platform.constructs.gpu_nodes import GpuNodeGroup, GpuNodeGroupProps
from ml_platform.constructs.storage import (
    ModelArtifactBucket,
    ModelArtifactBucketBase,
    archive_prefix,
    model_prefix_problems,
)
from ml_platform.image_pins import DEFAULT_POLICY, ImagePolicy, warn_tag_only
from ml_platform.k8s_charts.nvidia import NVIDIA_DEVICE_PLUGIN_IMAGE, NvidiaDevicePluginChart
from ml_platform.k8s_charts.triton import TritonChart
from ml_platform.limits import shown
from ml_platform.props.triton_eks import TritonOnEksPropsBase
from ml_platform.sagemaker_images import (
    DEFAULT_TRITON_VERSION,
    UNPATCHED_TRITON_WARNING,
    triton_release_warning,
)
from ml_platform.triton.archive_names import parse_refs
from ml_platform.triton.kinds import ARCHIVE_MODELS, archive_models

__all__ = [
    "ROLLOUT_OUTAGE_WARNING",
    "TritonOnEks",
    "TritonOnEksProps",
]


def _dns_label_problem(value: str) -> str | None:
    """What Kubernetes accepts as a namespace or service account name: an RFC 1123 label, the
    rule the settings' namespaces follow too (limits.K8S_NAME)."""
    if limits.K8S_NAME.fullmatch(value):
        return None
    return "expected an RFC 1123 label (lower-case letters, digits, '-', at most 63)"


class _SharedDevicePlugin(Construct):
    """NVIDIA's device plugin, applied once per cluster however many instances ask for it."""


_DEVICE_PLUGINS = "nvidia-device-plugin"  # the shared manifest, per cluster
#: Synth warning (acknowledgeable): one replica and no surge make every rollout an outage.
ROLLOUT_OUTAGE_WARNING = "ml-platform:tritonRolloutOutage"


@dataclass(frozen=True, kw_only=True)
class TritonOnEksProps(TritonOnEksPropsBase):
    """The value props of :class:`TritonOnEks`: the GPU nodes, replicas and archives it shares
    with the ``triton_on_eks`` settings (:class:`~ml_platform.props.triton_eks.TritonOnEksPropsBase`,
    with their rules), and its own, whose rules are :meth:`construct_problems`."""

    archives: tuple[str, ...]  # required here: no default archive
    """Archives under the model prefix to serve, as references of
    :mod:`ml_platform.triton.archive_names`: ``NAME`` (its newest version there at pod start)
    or ``NAME@vXXXXXXXX``. Required, at least one."""
    models: Sequence[str] | None = None
    """Models Triton loads (explicit model control), ensembles first. Default: the models the
    built-in archives hold (by their kind, :mod:`ml_platform.triton.kinds`); required when an
    archive is not one of them."""
    triton_version: str = DEFAULT_TRITON_VERSION
    """NGC Triton release, the same as the SageMaker container's. Default ``25.09`` (patched;
    an older release gets a synth-time warning naming the CVEs, id
    ``ml-platform:triton-unpatched-release``, acknowledgeable)."""
    grpc: bool = False
    """Serve Triton's gRPC endpoint beside HTTP. Default ``False`` (HTTP only; the restricted
    APIs are fenced on both)."""
    node_labels: Mapping[str, str] | None = None
    """Extra labels of the GPU nodes. Default none."""
    device_plugin: bool = True
    """Apply NVIDIA's device plugin (once per cluster, shared by every instance on it).
    Default ``True``; ``False`` when the cluster already runs one."""
    namespace: str = "triton"
    """Where Triton runs; the namespace is created, so each instance on a cluster needs its
    own. Default ``triton``."""
    service_account: str = "triton"
    """The Triton pods' service account. Default ``triton``."""
    gpu_node_group: bool = True
    """Create the GPU node group here (a :class:`~ml_platform.constructs.gpu_nodes.GpuNodeGroup`
    of ``gpu_nodes`` nodes). Default True. False when the GPU nodes live elsewhere, e.g. in a
    stack of their own so a capacity failure rolls back only them; the Triton pods then wait
    (Pending) until GPU nodes join."""
    images: ImagePolicy = DEFAULT_POLICY
    """Digests and registry mirrors applied to every image (Triton, the AWS CLI, NVIDIA's
    device plugin). Default: the digests public sources state, no mirror; synthesis warns
    about each image pinned by tag only."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "archives", tuple(self.archives))

    def _built_in(self) -> dict[str, tuple[str, ...] | None]:
        """Each well-formed archive reference -> the models of its kind (None: not built in)."""
        refs, _ = parse_refs("archives", self.archives)
        return {a: archive_models(r.logical) for a, r in zip(self.archives, refs, strict=True) if r}

    @property
    def load_models(self) -> list[str]:
        """The models Triton loads: ``models``, or those of the built-in archives."""
        if self.models is not None:
            return list(self.models)
        built_in = self._built_in()
        return [m for a in self.archives for m in built_in.get(a) or ()]

    def construct_problems(self, *, model_prefix: str) -> list[str]:
        """The problems of the construct's own props (empty when there is none), each naming
        the prop, the value and what is allowed; ``model_prefix`` is the one the pods read.
        The shared fields' rules are the base's (:func:`~ml_platform.constructs._props.check_props`)."""
        errors: list[str] = []
        built_in = self._built_in()
        unknown = [a for a in self.archives if built_in.get(a) is None]
        if self.models is None and unknown:
            errors.append(
                f"models = None: archives {unknown!r} are not built-in "
                f"({sorted(ARCHIVE_MODELS)}); name the models Triton should load"
            )
        elif self.models is not None and not self.models:
            errors.append("models = []: expected at least one model name")
        # With an unknown archive and no models there is nothing to load, hence no clash.
        load = self.load_models if self.models is not None or not unknown else []
        clashes = sorted({m for m in load if load.count(m) > 1})
        if clashes:
            errors.append(f"models: {clashes} appear more than once")
        errors += model_prefix_problems(model_prefix)
        for prop, value in (
            ("namespace", self.namespace),
            ("service_account", self.service_account),
        ):
            problem = _dns_label_problem(value)
            if problem:
                errors.append(f"{prop} = {shown(value)}: {problem}")
        errors += reserved_label_problems(self.node_labels, "node_labels")
        return errors


class TritonOnEks(Construct):
    """Serves Triton ensemble archives from an EKS cluster, next to (or instead of) the
    SageMaker endpoints.

    Creates a GPU managed node group (AL2023 NVIDIA AMI, labelled
    ``ml-platform/node-role=gpu`` and tainted ``nvidia.com/gpu:NoSchedule``), a Pod Identity
    role that reads only ``<model_prefix>*`` of ``bucket``, its association with the service
    account, and applies the Triton chart (namespace, service account, Deployment whose init
    containers fetch and unpack the archives, Service, HPA, PDB).

    Args:
        cluster: The EKS cluster; it needs a kubectl provider. Required.
        bucket: The model bucket: a :class:`~ml_platform.constructs.storage.ModelArtifactBucket`
            (or what its ``from_*`` methods return), whose prefix and ``grant_read_models``
            the pods use; or a plain ``s3.IBucket`` with ``model_prefix``. Required.
        props: The value props (:class:`TritonOnEksProps`, each field described there: the
            archives, models, GPU nodes, replicas, ...). Required (``archives`` has no default).
        pod_identity_agent: The cluster's ``eks-pod-identity-agent`` add-on (e.g.
            ``PlatformAddons.addons["eks-pod-identity-agent"]`` or your ``eks.Addon``): the
            Triton pods get their credentials through it, so they are created after it. Pass
            ``None`` only when the agent is installed outside this app. Required.
        model_prefix: Key prefix of the archives, ending in ``/``, for a plain bucket.
            Default: the bucket construct's prefix, ``models/`` for a plain bucket.
        subnets: Subnets of the GPU nodes. Default: the VPC's private subnets with egress.

    Attributes:
        gpu_nodes: The :class:`GpuNodeGroup` (``None`` with ``gpu_node_group=False``).
        node_group: Its ``eks_v2.Nodegroup`` (or ``None``). role: The pods' IAM role.
        pod_identity: The ``CfnPodIdentityAssociation``. triton_chart: The cdk8s chart.
        model_bucket: The model bucket as this stack refers to it (a bucket construct).
        manifest: The ``KubernetesManifest`` applying it. device_plugin: The manifest of the
            device plugin (shared), or ``None`` with ``device_plugin=False``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        bucket: s3.IBucket | ModelArtifactBucketBase,
        props: TritonOnEksProps,
        pod_identity_agent: IDependable | None,
        model_prefix: str | None = None,
        subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        model_prefix, prefix_problem = archive_prefix(bucket, model_prefix)
        #: The value props, as checked.
        self.props = props
        more = props.construct_problems(model_prefix=model_prefix)
        check_props(self, props, TritonOnEksPropsBase, *more, *filter(None, [prefix_problem]))
        archives = list(props.archives)
        triton_version, replicas, max_surge = props.triton_version, props.replicas, props.max_surge
        warning = triton_release_warning(triton_version)
        if warning:
            Annotations.of(self).add_warning_v2(UNPATCHED_TRITON_WARNING, warning)
        if replicas == 1 and max_surge == 0:
            Annotations.of(self).add_warning_v2(
                ROLLOUT_OUTAGE_WARNING,
                "replicas=1 with max_surge=0: every rollout (a new Triton release, archive or "
                "setting) stops the only Triton pod before its successor starts and fetches the "
                "archives: an outage of minutes. With a spare GPU node, set max_surge=1 "
                "(replicas + max_surge <= gpu_nodes), or run 2 replicas (docs/serving-eks.md, "
                "'Sizing, not autoscaling').",
            )

        self.gpu_nodes: GpuNodeGroup | None = None
        self.node_group: eks.Nodegroup | None = None
        if props.gpu_node_group:
            self.gpu_nodes = GpuNodeGroup(
                self,
                "GpuNodes",
                cluster=cluster,
                props=GpuNodeGroupProps(
                    instance_type=props.gpu_instance_type,
                    desired_size=props.gpu_nodes,
                    max_size=props.gpu_nodes,
                    labels=props.node_labels,
                ),
                subnets=subnets,
            )
            self.node_group = self.gpu_nodes.node_group
        namespace, service_account = props.namespace, props.service_account
        self._add_pod_role(cluster, bucket, model_prefix, namespace, service_account)
        if pod_identity_agent is not None:
            self.pod_identity.node.add_dependency(pod_identity_agent)

        charts = cdk8s.App()
        self.device_plugin: eks.KubernetesManifest | None = None
        images = props.images
        if props.device_plugin:
            self.device_plugin = self._shared_device_plugin(cluster, charts, images)
        self._add_triton_chart(
            cluster,
            charts,
            archives=archives,
            models=self.props.load_models,
            triton_version=triton_version,
            grpc=props.grpc,
            replicas=replicas,
            max_surge=max_surge,
            namespace=namespace,
            service_account=service_account,
            images=images,
        )

    def _add_pod_role(
        self,
        cluster: eks.ICluster,
        bucket: s3.IBucket | ModelArtifactBucketBase,
        model_prefix: str,
        namespace: str,
        service_account: str,
    ) -> None:
        """The pods' role (read the archives only) and its Pod Identity association."""
        # Pods of the service account get this role through EKS Pod Identity.
        self.role = iam.Role(
            self,
            "PodRole",
            assumed_by=pod_identity_principal(cluster.cluster_arn, namespace, service_account),
            description="Triton pods on EKS: read the ensemble archives",
        )
        plain = bucket.bucket if isinstance(bucket, ModelArtifactBucketBase) else bucket
        local = self._local_bucket(plain)
        #: The model bucket as this stack refers to it.
        self.model_bucket: ModelArtifactBucketBase = (
            bucket
            if isinstance(bucket, ModelArtifactBucketBase) and local is plain
            else ModelArtifactBucket.from_bucket(
                self, "ModelArchives", local, model_prefix=model_prefix
            )
        )
        # GetObject under the prefix; logical archive names resolve to their newest version
        # at pod start, so the pods also list the prefix.
        self.model_bucket.grant_read_models(self.role)
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, self.model_bucket.archive_arn())}]",
            "Triton's init container downloads archives under the model prefix only, with "
            "s3:GetObject alone.",
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )

    def _add_triton_chart(
        self,
        cluster: eks.ICluster,
        charts: cdk8s.App,
        *,
        archives: list[str],
        models: list[str],
        triton_version: str,
        grpc: bool,
        replicas: int,
        max_surge: int,
        namespace: str,
        service_account: str,
        images: ImagePolicy,
    ) -> None:
        """The Triton chart and the manifest applying it, after what its pods need."""
        self.triton_chart = TritonChart(
            charts,
            "triton",
            bucket_name=self.model_bucket.bucket.bucket_name,
            model_prefix=self.model_bucket.model_prefix,
            archives=tuple(archives),
            models=tuple(models),
            triton_version=triton_version,
            grpc=grpc,
            region=Stack.of(self).region,
            replicas=replicas,
            max_surge=max_surge,
            namespace=namespace,
            service_account=service_account,
            images=images,
        )
        pulled = list(self.triton_chart.props.pinned_images)
        if self.device_plugin is not None:
            pulled.append(NVIDIA_DEVICE_PLUGIN_IMAGE)
        warn_tag_only(self, pulled, images)
        self.manifest = eks.KubernetesManifest(
            self, "Manifest", cluster=cluster, manifest=self.triton_chart.to_json()
        )
        # Pods must find their Pod Identity role, a GPU node and the GPU resource at creation.
        self.manifest.node.add_dependency(self.pod_identity)
        if self.node_group is not None:
            self.manifest.node.add_dependency(self.node_group)
        if self.device_plugin is not None:
            self.manifest.node.add_dependency(self.device_plugin)

    def _local_bucket(self, bucket: s3.IBucket) -> s3.IBucket:
        """``bucket`` as this stack refers to it. A bucket of another stack is exported under
        an explicit name (as aws-cdk would under a generated one), so that the cdk-nag
        finding on the archive ARN can be acknowledged by name."""
        producer, consumer = Stack.of(bucket), Stack.of(self)
        if producer is consumer or not Token.is_unresolved(bucket.bucket_arn):
            return bucket
        output_id = f"MlPlatformExport{Names.unique_id(bucket)}Arn"
        export_name = f"{producer.stack_name}-{output_id}"
        if producer.node.try_find_child(output_id) is None:
            CfnOutput(producer, output_id, value=bucket.bucket_arn, export_name=export_name)
        consumer.add_dependency(producer, "TritonOnEks reads the model bucket's exported ARN")
        return s3.Bucket.from_bucket_arn(self, "ModelBucket", Fn.import_value(export_name))

    def _shared_device_plugin(
        self, cluster: eks.ICluster, charts: cdk8s.App, images: ImagePolicy
    ) -> eks.KubernetesManifest:
        key = key_of(cluster, cluster.cluster_name)
        shared: dict[str, eks.KubernetesManifest] = registry(self, _DEVICE_PLUGINS)
        if key in shared:
            return shared[key]
        holder = _SharedDevicePlugin(self, "DevicePlugin")
        chart = NvidiaDevicePluginChart(
            charts, "nvidia-device-plugin", image=images.resolve(NVIDIA_DEVICE_PLUGIN_IMAGE)
        )
        shared[key] = eks.KubernetesManifest(
            holder, "Resource", cluster=cluster, manifest=chart.to_json()
        )
        return shared[key]
