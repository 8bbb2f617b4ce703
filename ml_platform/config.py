"""Typed, validated settings for the whole platform.

This module is the only place where CDK context becomes values. ``app.py`` calls
:func:`Settings.from_context` once with the ``ml-platform`` context object (from
``cdk.json`` or ``-c``) and passes the frozen result down to the stacks. Every field has a
default, so an empty context synthesizes; every field is checked, and all problems are
reported together in one :class:`SettingsError`.

Each setting is declared once: a dataclass field with its default, its constraints (pydantic's,
in its ``Annotated`` type, from the data in ``limits``) and its docstring. pydantic checks each
section in one pass, then its cross-field ``problems()`` (:mod:`ml_platform._settings_parse`);
the rules that span sections run when the sections they read are valid
(``_CROSS_SECTION_RULES``), so a bad section hides neither the other sections' problems nor
the rules that do not read it;
``schemas/ml-platform.schema.json`` and ``docs/configuration.md`` are generated from the same
fields (``make schema``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import annotated_types

from ml_platform import limits
from ml_platform._settings_parse import (
    INVALID,
    Matches,
    OneOf,
    Problem,
    Satisfies,
    Section,
    json_pattern,
    setting,
    validated,
    validated_members,
)
from ml_platform.image_pins import (
    DIGEST,
    MIRRORABLE_REGISTRIES,
    ImagePolicy,
)
from ml_platform.limits import FSX_THROUGHPUTS, shown
from ml_platform.props.addons import PlatformAddonsPropsBase
from ml_platform.props.alarm_topic import EmailAddress
from ml_platform.props.cluster import TrainingEksClusterPropsBase
from ml_platform.props.endpoint import TritonEndpointPropsBase, TritonServerPropsBase
from ml_platform.props.network import PlatformVpcPropsBase
from ml_platform.props.storage import EcrMaxImages, ModelArtifactBucketPropsBase
from ml_platform.props.trainium import TrainiumPropsBase
from ml_platform.props.triton_eks import TritonOnEksPropsBase
from ml_platform.regions import REGIONS, ecr_registry, partition_of, region_problem
from ml_platform.sagemaker_images import (
    TRITON_VERSIONS,
    compute_capability_problem,
    triton_region_problem,
)
from ml_platform.stack_outputs import endpoint_name_clashes
from ml_platform.triton.archive_names import ArchiveRef, parse_ref
from ml_platform.triton.kinds import (
    BUILT_IN_ARCHIVES,
)

CONTEXT_KEY = "ml-platform"
"""The context key in ``cdk.json`` that holds the platform's settings."""
IMAGE_DIGESTS_KEY = "ml-platform:image-digests"
IMAGE_MIRRORS_KEY = "ml-platform:image-mirrors"
"""Context key of the registry mirrors ``mlp images mirror`` records in ``cdk.context.json``;
``images.mirrors`` of the settings wins for the same registry."""
"""Context key (``cdk.context.json``) where ``mlp images resolve`` records the digests it
asked the registries for: ``registry/repository:tag`` -> ``sha256:...``. A key of its own, so
that ``mlp azs`` (which rewrites the ``ml-platform`` object there) leaves it alone; digests
set in ``images.digests`` win over it."""

REMOVAL_POLICIES = ("retain", "destroy")
#: Settings that no longer exist, with what to do instead.
REMOVED_SETTINGS = {
    "triton_on_eks.max_replicas": "Triton on EKS runs a fixed number of replicas (no "
    'autoscaler, docs/serving-eks.md "Sizing, not autoscaling"); set triton_on_eks.replicas',
    "triton_on_eks.max_gpu_nodes": "the GPU node group is sized by triton_on_eks.gpu_nodes "
    '(nothing scales it, docs/serving-eks.md "Sizing, not autoscaling")',
}


class SettingsError(ValueError):
    """Raised when the ``ml-platform`` context holds invalid settings; lists every problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"Invalid '{CONTEXT_KEY}' settings ({len(self.problems)} problem"
            f"{'s' if len(self.problems) != 1 else ''}):\n{lines}"
        )


@dataclass(frozen=True)
class EnvironmentSettings(Section):
    """Where the stacks deploy."""

    account: Annotated[str, Matches(limits.ACCOUNT_ID)] = setting("123456789012")
    """AWS account id. The default is a placeholder that lets `cdk synth` run without
    credentials; set your own before `cdk deploy`."""
    region: str = setting("us-west-2", enum=sorted(REGIONS))
    """AWS region (the default offers Trainium): one of the regions of botocore's partition
    data, pinned in `ml_platform/regions.py`."""
    stack_prefix: Annotated[str, Matches(limits.STACK_PREFIX)] = setting("MlPlatform")
    """Prefix of every stack name."""

    def problems(self) -> list[str]:
        problem = region_problem("env.region", self.region)
        return [problem] if problem else []


@dataclass(frozen=True, kw_only=True)
class NetworkSettings(PlatformVpcPropsBase):
    """The VPC."""

    # Every field, and its rules, is PlatformVpcProps's (ml_platform.props.network).


@dataclass(frozen=True, kw_only=True)
class StorageSettings(ModelArtifactBucketPropsBase):
    """Stateful storage: FSx for Lustre, the training image registry and the model bucket."""

    # model_prefix: inherited, the model bucket's own prop (ml_platform/props/storage.py).

    removal_policy: Annotated[str, OneOf(REMOVAL_POLICIES)] = setting("retain")
    """`retain` keeps FSx (with its security groups, the VPC and the Trainium subnet), bucket
    and registry when the stack is deleted (`RetainExceptOnCreate`: a failed first create
    removes them, so the retry does not fail on the registry's fixed name); `destroy` deletes
    them (data is lost)."""
    fsx_storage_gib: Annotated[
        int,
        annotated_types.Interval(ge=limits.FSX_SMALLEST_GIB, le=limits.FSX_MAX_GIB),
        Satisfies(limits.fsx_storage_ok, limits.FSX_STORAGE_TEXT),
    ] = setting(limits.DEFAULT_FSX_STORAGE_GIB)
    """Lustre capacity (PERSISTENT_2): 1200 or a multiple of 2400 GiB, up to 2400000."""
    fsx_throughput_per_tib: Annotated[int, OneOf(FSX_THROUGHPUTS)] = setting(
        limits.DEFAULT_FSX_THROUGHPUT_PER_TIB
    )
    """Lustre throughput, MB/s per TiB."""
    # An int (ruff does not see through the alias): setting() only declares the field.
    ecr_max_images: EcrMaxImages = setting(limits.DEFAULT_ECR_MAX_IMAGES)  # noqa: RUF009
    """Images the training repository keeps before expiring the oldest."""
    lustre_legacy_rules: bool = setting(False)
    """Upgrading from release 0.1.0: keep its Lustre rules, which open the file system to the
    Trainium nodes' group and to the cluster security group besides its client group. The
    upgrade replaces the nodes with ones that carry the client group; without the old rules
    the running nodes lose /data until their replacements exist (CHANGELOG.md, 0.2.0). Set
    true for the upgrade, and false again once every node carries the client group; the next
    release drops the rules. Default false: only the client group reaches the file system."""
    model_bucket_kms: bool = setting(False)
    """Encrypt the model bucket with a customer managed KMS key (SSE-KMS, S3 Bucket Key on,
    rotation on) instead of SSE-S3. Only the endpoint and Triton roles get `kms:Decrypt` on
    it, and the deploy-time upload `kms:GenerateDataKey`; publishers need both in their own IAM
    policies. On a deployed bucket the switch is an in-place update that applies to new
    objects only (existing archives stay SSE-S3 until uploaded again)."""
    image_repository_kms: bool = setting(False)
    """Encrypt the training image repository with a customer managed KMS key instead of
    AES256. ECR's `EncryptionConfiguration` is create-only and the repository has a fixed
    name: on a deployed repository the change fails, so set it only before the first deploy
    (or delete the repository and push the image again)."""
    archive_publishers: tuple[Annotated[str, Matches(limits.PRINCIPAL_ARN)], ...] | None = setting(
        None
    )
    """ARNs of the IAM roles or users that may write and delete archives under the prefix; the
    bucket policy refuses every other principal (archives are code the endpoints run), and
    every put without `If-None-Match`. Default: `cluster.admin_role_arn` (`mlp azs` records
    it); the deploy-time upload's role is added with `inference.upload_dir`."""


@dataclass(frozen=True, kw_only=True)
class ClusterSettings(TrainingEksClusterPropsBase, PlatformAddonsPropsBase):
    """The EKS cluster that runs training (and optionally Triton)."""

    name: Annotated[str, Matches(limits.RESOURCE_NAME)] = setting("ml-platform")
    """EKS cluster name."""
    bootstrap_creator_admin: bool | None = setting(None)
    """`BootstrapClusterCreatorAdminPermissions`: a permanent cluster-admin access entry for
    CloudFormation's execution role (the kubectl provider has its own entry). Create-only:
    changing it replaces the cluster, which CloudFormation refuses for its fixed name. Unset
    means false with a synth-time warning (`ml-platform:bootstrapCreatorAdmin`): a cluster
    deployed by release 0.1.0 was created with true and keeps deploying only with true; a
    new cluster is better off with false. Set it to say which."""
    # network_policy_mode: inherited, PlatformAddons's (ml_platform/props/addons.py).
    fsx_csi_driver_version: Annotated[str, Matches(limits.ADDON_VERSION)] | None = setting(None)
    """Version of the `aws-fsx-csi-driver` add-on. Default none: EKS's default version (`mlp
    addons` lists what exists)."""
    cloudwatch_observability_version: Annotated[str, Matches(limits.ADDON_VERSION)] | None = (
        setting(None)
    )
    """Version of the `amazon-cloudwatch-observability` add-on. Default none: EKS's default
    version."""

    @property
    def addon_versions(self) -> dict[str, str]:
        """Add-on versions set in these settings, by add-on name."""
        chosen = {
            "aws-fsx-csi-driver": self.fsx_csi_driver_version,
            "amazon-cloudwatch-observability": self.cloudwatch_observability_version,
        }
        return {name: version for name, version in chosen.items() if version is not None}

    def partition_problems(self, region: str) -> list[str]:
        """``admin_role_arn`` (well-formed: :meth:`problems`) in another partition than
        ``region``'s."""
        arn = limits.ROLE_ARN.fullmatch(self.admin_role_arn or "")
        if arn and arn.group(1) != partition_of(region):
            return [
                f"cluster.admin_role_arn = {shown(self.admin_role_arn)}: partition {shown(arn.group(1))} "
                f"differs from env.region {shown(region)}'s {shown(partition_of(region))}"
            ]
        return []


@dataclass(frozen=True, kw_only=True)
class TrainiumSettings(TrainiumPropsBase):
    """The Trainium node group (stack ``<prefix>-TrainiumNodes``)."""

    nodes: int = setting(limits.DEFAULT_TRAINIUM_NODES, minimum=0)
    """Desired node count (the tutorial's 2 x 32 NeuronCores): `0 <= min_nodes <= nodes <=
    max_nodes <= 64`, `max_nodes >= 1`."""
    min_nodes: int | None = setting(None, minimum=0)
    """Default 2, or 0 with `capacity_block_id` (EKS updates a node group on a Capacity Block
    only at desired size 0). 0 lets the group scale to nothing."""
    max_nodes: int = setting(
        limits.DEFAULT_TRAINIUM_NODES, minimum=1, maximum=limits.TRAINIUM_MAX_NODES
    )
    """Most nodes."""
    ami_release_version: Annotated[str, Matches(limits.AMI_RELEASE_VERSION)] | None = setting(None)
    """EKS AL2023 Neuron AMI release of the nodes (node group `ReleaseVersion`). Default: the
    release whose Neuron driver is the one of the training image's Neuron SDK, for
    `cluster.kubernetes_version` (`NEURON_STACKS` in `ml_platform/versions.py`). `latest`
    pins nothing (EKS's newest AMI at each node group update). Another value than the default
    warns at synth: the driver then no longer matches the image's SDK."""

    def __post_init__(self) -> None:
        if self.min_nodes is None:
            default = 0 if self.capacity_block_id is not None else limits.DEFAULT_TRAINIUM_NODES
            object.__setattr__(self, "min_nodes", default)

    def problems(self) -> list[str | Problem]:
        out: list[str | Problem] = []
        low, most = self.min_nodes or 0, limits.TRAINIUM_MAX_NODES
        if not limits.node_counts_ok(low, self.nodes, self.max_nodes, most):
            out.append(
                Problem(
                    {"min_nodes": self.min_nodes, "nodes": self.nodes, "max_nodes": self.max_nodes},
                    f"expected 0 <= min_nodes <= nodes <= max_nodes <= {most}, max_nodes >= 1",
                )
            )
        return out + super().problems()


@dataclass(frozen=True)
class TrainingSettings(Section):
    """Where the training workloads run on the cluster."""

    namespace: str = setting("training", pattern=json_pattern(limits.K8S_NAME))
    """Kubernetes namespace of the jobs, the FSx claim and TensorBoard; the stack creates (and
    deletes) it, so not one owned by Kubernetes, Volcano or another part of the platform."""
    queue: str = setting("training", pattern=json_pattern(limits.K8S_NAME))
    """Volcano queue the jobs are submitted to; not Volcano's own `default` or `root`."""
    image_repository: Annotated[str, Matches(limits.IMAGE_REPOSITORY)] = setting(
        "ml-platform/training"
    )
    """Name of the ECR repository of the training image."""
    image_tag: Annotated[str, Matches(limits.IMAGE_TAG)] = setting("bert-pretrain-v1")
    """Tag of the training image in the ECR repository (tags are immutable)."""
    dataset_sha256: Annotated[str, Matches(limits.SHA256)] | None = setting(None)
    """SHA-256 the BERT dataset tarball must have; the dataset Job refuses another. Default
    none: no public source states it, so the Job prints the digest of its first download and
    warns; pin that value."""

    def problems(self) -> list[str]:
        out = []
        for key, reserved in (
            ("namespace", limits.RESERVED_NAMESPACES),
            ("queue", limits.RESERVED_QUEUES),
        ):
            value = getattr(self, key)
            if not limits.K8S_NAME.fullmatch(value):
                out.append(f"training.{key} = {shown(value)}: expected a Kubernetes DNS label")
            elif value in reserved:
                out.append(
                    f"training.{key} = {shown(value)}: owned by Kubernetes, Volcano or another part of "
                    f"the platform; expected a name other than {list(reserved)}"
                )
        return out


@dataclass(frozen=True, kw_only=True)
class EndpointSettings(TritonEndpointPropsBase):
    """One SageMaker multi-model endpoint serving Triton ensembles."""

    # Every field and rule is the construct's (TritonEndpointPropsBase): none is app-level.

    def problems(self) -> list[str | Problem]:
        """None here: :class:`InferenceSettings` states an endpoint's rules with its own, so a
        bad endpoint hides none of the section's rules (a nested section's failed rule would
        stop pydantic before the section's)."""
        return []


@dataclass(frozen=True, kw_only=True)
class InferenceSettings(TritonServerPropsBase):
    """Triton on SageMaker multi-model endpoints."""

    endpoints: tuple[EndpointSettings, ...] = setting((EndpointSettings(),))
    """The endpoints: at least one while `features.inference` is on. Default: one endpoint
    serving both ensembles."""
    upload_dir: str | None = setting(None)
    """Local folder of built archives to upload into the model prefix at deploy time: it must
    exist and hold 1 to 100 `*.tar.gz`, each named `<logical>-v<version>.tar.gz` after its
    content as `mlp models upload` requires, safe to unpack, servable and loadable by
    `triton_version` (backends, a plan's TensorRT, an execution environment's Python). Default
    none (`mlp models upload` does it)."""
    alarm_topic_arn: Annotated[str, Matches(limits.SNS_TOPIC_ARN)] | None = setting(None)
    """An existing SNS topic every endpoint alarm notifies (alarm and OK), in `env.region`
    (CloudWatch refuses a topic in another region) and `env.region`'s partition. Its policy must
    let `cloudwatch.amazonaws.com` publish, and its KMS key (if any) let CloudWatch use it.
    Default none: each inference stack creates its own KMS-encrypted topic, which only
    CloudWatch alarms of the account may publish to, over TLS only."""
    alarm_emails: tuple[EmailAddress, ...] = setting((), uniqueItems=True)
    """Email addresses subscribed to the stack's own alarm topic (each confirms the
    subscription from the mail AWS sends). Default none: subscribe yourself to the topic named
    in the stack's `AlarmTopicArn` output. Not with `alarm_topic_arn` (subscribe to your own
    topic there)."""
    log_retention_days: Annotated[int, OneOf(limits.LOG_RETENTION_DAYS)] = setting(365)
    """Days each endpoint's log group `/aws/sagemaker/Endpoints/<name>` keeps the container
    logs (the stack creates the group, KMS-encrypted)."""

    def problems(self) -> list[str | Problem]:
        out = super().problems()
        # The release's minimum compute capability per endpoint (what the construct's props
        # check for one endpoint: TritonMultiModelEndpointPropsBase).
        for i, endpoint in enumerate(self.endpoints):
            problem = compute_capability_problem(self.triton_version, endpoint.instance_type)
            if problem:
                out.append(
                    Problem({f"endpoints[{i}].instance_type": endpoint.instance_type}, problem)
                )
        # SageMaker endpoint names are unique per region regardless of case.
        names = [e.name.lower() for e in self.endpoints]
        if len(set(names)) != len(names):
            out.append(
                f"inference.endpoints: names must be unique (case-insensitive), got "
                f"{shown([e.name for e in self.endpoints])}"
            )
        out += endpoint_name_clashes(
            [(f"inference.endpoints[{i}].name", e.name) for i, e in enumerate(self.endpoints)]
        )
        for i, endpoint in enumerate(self.endpoints):
            found = TritonEndpointPropsBase.problems(endpoint)
            out += [p.under(f"endpoints[{i}]") if isinstance(p, Problem) else p for p in found]
        if self.alarm_topic_arn is not None and self.alarm_emails:
            out.append(
                f"inference.alarm_emails = {list(self.alarm_emails)!r} with "
                f"inference.alarm_topic_arn = {self.alarm_topic_arn!r}: the emails subscribe to "
                "the stack's own topic; with an existing topic, subscribe to it there (set one "
                "of the two)"
            )
        if self.upload_dir is not None:
            from ml_platform.triton.upload_dir import upload_dir_problems

            out += upload_dir_problems(self.upload_dir, triton_version=self.triton_version)
        return out


@dataclass(frozen=True, kw_only=True)
class TritonOnEksSettings(TritonOnEksPropsBase):
    """Triton served from the EKS cluster on a GPU node group."""

    min_gpu_nodes: int | None = setting(None, minimum=0, maximum=limits.GPU_MAX_NODES)
    """The GPU node group's minimum. Default: `gpu_nodes` (0 lets the group scale to
    nothing)."""

    @property
    def archive_refs(self) -> tuple[ArchiveRef, ...]:
        return tuple(parse_ref(a) for a in self.archives)

    def problems(self) -> list[str | Problem]:
        out: list[str | Problem] = []
        if self.min_gpu_nodes is not None and not 0 <= self.min_gpu_nodes <= self.gpu_nodes:
            out.append(
                Problem(
                    {"min_gpu_nodes": self.min_gpu_nodes},
                    f"expected 0 to gpu_nodes ({self.gpu_nodes})",
                )
            )
        out += super().problems()
        # App-level: the settings name no models, so Triton loads those of built-in archives.
        for i, archive in enumerate(self.archives):
            if archive.split("@")[0] not in BUILT_IN_ARCHIVES:
                out.append(
                    Problem(
                        {f"archives[{i}]": archive},
                        "Triton on EKS loads the models of the archives this repository builds, "
                        f"expected one of {list(BUILT_IN_ARCHIVES)} (optionally @vXXXXXXXX)",
                    )
                )
        return out


@dataclass(frozen=True)
class ImageSettings(Section):
    """Where the cluster's container images come from, and the digests that pin them."""

    mirrors: dict[str, str] = field(
        default_factory=dict,
        metadata={"json_schema_extra": {"propertyNames": {"enum": list(MIRRORABLE_REGISTRIES)}}},
    )
    """Public registry -> a registry you own that serves its repositories under a path prefix,
    e.g. `{"docker.io": "<account>.dkr.ecr.<region>.amazonaws.com/ml-platform-mirror"}`, which
    `mlp images mirror` fills and records in `cdk.context.json` (key
    `ml-platform:image-mirrors`; this setting wins), or an ECR pull-through cache rule's
    prefix; every cluster image of that registry, the dataset Job's included, is pulled from
    it. Default none: the public registries themselves (synthesis warns about Docker Hub's)."""
    digests: dict[str, str] = field(
        default_factory=dict,
        metadata={"json_schema_extra": {"additionalProperties": {"pattern": DIGEST.pattern}}},
    )
    """`registry/repository:tag` -> `sha256:<64 hex>`, written by `mlp images resolve`; wins
    over what it records in `cdk.context.json` (key `ml-platform:image-digests`). Default none:
    only digests a public source states (`ml_platform.image_pins.PUBLIC_DIGESTS`); synthesis
    warns about the rest."""

    def problems(self) -> list[str]:
        return ImagePolicy(digests=self.digests, mirrors=self.mirrors).problems("images.")


@dataclass(frozen=True)
class FeatureSettings(Section):
    """Switches for the optional parts. All default to on, so ``make synth`` shows everything."""

    training_cluster: bool = setting(True)
    """The EKS training cluster and its workloads."""
    inference: bool = setting(True)
    """The SageMaker multi-model endpoints."""
    triton_on_eks: bool = setting(True)
    """The GPU node group and Triton on the cluster (needs `training_cluster`)."""
    training_only: bool = setting(False)
    """A training-only deployment: the training cluster and the Trainium nodes, without the
    SageMaker endpoints and without the GPU node group and Triton on EKS. `true` turns
    `inference` and `triton_on_eks` off, whatever they say."""

    def __post_init__(self) -> None:
        if self.training_only:
            object.__setattr__(self, "inference", False)
            object.__setattr__(self, "triton_on_eks", False)

    def problems(self) -> list[str]:
        out = []
        if self.training_only and not self.training_cluster:
            out.append(
                "features.training_only = true with features.training_cluster = false: a "
                "training-only deployment needs the training cluster"
            )
        return out


@dataclass(frozen=True)
class Settings(Section):
    """All platform settings. Build with :meth:`from_context`; every field has a default."""

    env: EnvironmentSettings = field(default_factory=EnvironmentSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    trainium: TrainiumSettings = field(default_factory=TrainiumSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)
    inference: InferenceSettings = field(default_factory=InferenceSettings)
    triton_on_eks: TritonOnEksSettings = field(default_factory=TritonOnEksSettings)
    features: FeatureSettings = field(default_factory=FeatureSettings)
    images: ImageSettings = field(default_factory=ImageSettings)
    cost_annotations: bool = setting(False)
    """`cdk synth` adds an info annotation with each stack's estimated monthly on-demand cost
    (the project's app.py calls `ml_platform_pricing.annotate.annotate_costs`)."""

    @classmethod
    def from_context(
        cls,
        values: Mapping[str, Any] | str | None,
        *,
        known_azs: Mapping[str, Any] | None = None,
        recorded_digests: Any = None,
        recorded_mirrors: Any = None,
    ) -> Settings:
        """Parse and check the ``ml-platform`` context object.

        Args:
            values: The context object (a mapping, or its JSON text as ``-c`` passes it);
                ``None`` means all defaults, and so does ``null`` for any setting.
            known_azs: All CDK context, used to check that the configured AZs are among the
                pre-seeded ``availability-zones:account=...:region=...`` entry, so synthesis never
                falls back to an AWS lookup. ``None`` skips that check. Its
                :data:`IMAGE_DIGESTS_KEY` entry adds to ``images.digests``.
            recorded_digests: The :data:`IMAGE_DIGESTS_KEY` entry when ``known_azs`` is not
                given (the CLI, which skips the AZ check, still pulls by digest).
            recorded_mirrors: The :data:`IMAGE_MIRRORS_KEY` entry, likewise; it adds to
                ``images.mirrors``.

        Raises:
            SettingsError: listing every problem found (wrong keys, types and values).
        """
        problems: list[str] = []
        if isinstance(values, str):  # `-c ml-platform='{...}'` arrives as a string
            values = _json_object_or_problem(values, CONTEXT_KEY, problems)
            if problems:
                raise SettingsError(problems)
        # Each section on its own, so a bad one hides none of the others' problems.
        members = validated_members(
            cls,
            values if values is not None else {},
            problems,
            label=CONTEXT_KEY,
            removed=REMOVED_SETTINGS,
        )
        if members is INVALID:
            raise SettingsError(problems)
        invalid = {name for name, member in members.items() if member is INVALID}
        # An invalid section keeps its default here, a stand-in that no rule below reads.
        settings = cls(**{name: m for name, m in members.items() if m is not INVALID})
        if not invalid:  # which images are pulled depends on every section
            # Only the entries set here: the digests `mlp images resolve` recorded may name
            # images of an earlier release.
            problems.extend(_unpulled_digest_problems(settings))
        # What `mlp images resolve` and `mlp images mirror` recorded beside the settings;
        # the settings' own entries win.
        for member, key, recorded in (
            ("digests", IMAGE_DIGESTS_KEY, recorded_digests),
            ("mirrors", IMAGE_MIRRORS_KEY, recorded_mirrors),
        ):
            if recorded is None and known_azs is not None:
                recorded = known_azs.get(key)
            if recorded is None:
                continue
            found = validated(dict[str, str], recorded, key, problems, label=key, removed={})
            if found is not INVALID and "images" not in invalid:
                merged = {**found, **getattr(settings.images, member)}
                images = dataclasses.replace(settings.images, **{member: merged})
                settings = dataclasses.replace(settings, images=images)
                # The section's own entries passed as pydantic read them; these join them here.
                problems.extend(p for p in settings.images.problems() if p not in problems)
        for reads, rule in _CROSS_SECTION_RULES:
            if not reads & invalid:
                problems.extend(rule(settings, known_azs))
        if problems:
            raise SettingsError(problems)
        return settings

    @property
    def archive_publishers(self) -> tuple[str, ...]:
        """Principals that may write archives (besides the deploy-time upload):
        ``storage.archive_publishers``, or by default the cluster admin role when one is set."""
        if self.storage.archive_publishers is not None:
            return self.storage.archive_publishers
        return (self.cluster.admin_role_arn,) if self.cluster.admin_role_arn else ()

    @property
    def image_policy(self) -> ImagePolicy:
        """Digests and mirrors applied to every image the cluster pulls (``images``)."""
        return ImagePolicy(digests=self.images.digests, mirrors=self.images.mirrors)

    @property
    def training_image_uri(self) -> str:
        """URI of the training image in this platform's ECR repository."""
        registry = ecr_registry(self.env.account, self.env.region)
        return f"{registry}/{self.training.image_repository}:{self.training.image_tag}"

    @property
    def availability_zones_context_key(self) -> str:
        """The CDK context key holding this account's AZ names for the region."""
        return f"availability-zones:account={self.env.account}:region={self.env.region}"


_Context = Mapping[str, Any] | None
"""All CDK context (``known_azs`` of :meth:`Settings.from_context`), or ``None``."""


def _admin_role_partition(settings: Settings, context: _Context) -> list[str]:
    return settings.cluster.partition_problems(settings.env.region)


def _triton_in_region(settings: Settings, context: _Context) -> list[str]:
    region, version = settings.env.region, settings.inference.triton_version
    if settings.features.inference and region in REGIONS and version in TRITON_VERSIONS:
        problem = triton_region_problem(region, version)
        if problem:
            return [f"env.region = {shown(region)} with inference.triton_version: {problem}"]
    return []


def _alarm_topic_in_region(settings: Settings, context: _Context) -> list[str]:
    topic = settings.inference.alarm_topic_arn
    if settings.features.inference and topic and limits.SNS_TOPIC_ARN.matches(topic):
        problem = alarm_topic_problem(topic, settings.env.region)
        if problem:
            return [f"inference.alarm_topic_arn = {shown(topic)}: {problem}"]
    return []


def _azs_in_region(settings: Settings, context: _Context) -> list[str]:
    region = settings.env.region
    if region not in REGIONS:  # its AZs would only repeat that problem
        return []
    return [
        f"network.availability_zones: {shown(az)} is not in env.region {shown(region)}"
        for az in settings.network.availability_zones
        if not az.startswith(region)
    ]


def _endpoints_with_inference(settings: Settings, context: _Context) -> list[str]:
    if settings.features.inference and not settings.inference.endpoints:
        return [
            "inference.endpoints = []: expected at least one endpoint with "
            "features.inference = true (or set features.inference to false)"
        ]
    return []


def _triton_on_eks_needs_cluster(settings: Settings, context: _Context) -> list[str]:
    if settings.features.triton_on_eks and not settings.features.training_cluster:
        return [
            "features.triton_on_eks = true needs features.training_cluster = true "
            "(Triton on EKS runs on the training cluster)"
        ]
    return []


def _azs_in_context(settings: Settings, context: _Context) -> list[str]:
    env = settings.env
    if context is None or env.region not in REGIONS:  # an unknown region has no context key
        return []
    key = settings.availability_zones_context_key
    seeded = context.get(key)
    if not isinstance(seeded, list):
        return [
            f"env.account = {shown(env.account)}, env.region = {shown(env.region)}: "
            f"context {shown(key)} is missing: add this account's AZ names to cdk.json "
            "(or run `mlp azs`) so synthesis needs no AWS lookup"
        ]
    return [
        f"network.availability_zones: {shown(az)} is not among the AZs in context "
        f"{shown(key)} ({shown(seeded)})"
        for az in settings.network.availability_zones
        if az not in seeded
    ]


#: The rules that span sections (or, for features, run after its own), in the order they
#: report, each with the sections it reads: :meth:`Settings.from_context` runs a rule when
#: those sections are valid, so a bad value elsewhere hides none of its problems.
_CROSS_SECTION_RULES: tuple[
    tuple[frozenset[str], Callable[[Settings, _Context], list[str]]], ...
] = (
    (frozenset({"cluster", "env"}), _admin_role_partition),
    (frozenset({"features", "inference", "env"}), _triton_in_region),
    (frozenset({"features", "inference", "env"}), _alarm_topic_in_region),
    (frozenset({"network", "env"}), _azs_in_region),
    (frozenset({"features", "inference"}), _endpoints_with_inference),
    (frozenset({"features"}), _triton_on_eks_needs_cluster),
    (frozenset({"env", "network"}), _azs_in_context),
)


def alarm_topic_problem(topic_arn: str, region: str) -> str | None:
    """Why CloudWatch alarms in ``region`` cannot notify ``topic_arn`` (a well-formed SNS topic
    ARN), or ``None``. An alarm action must be an SNS topic of the alarm's own region
    (PutMetricAlarm, AlarmActions: ``arn:aws:sns:region:account-id:sns-topic-name``,
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html)."""
    partition, topic_region = topic_arn.split(":")[1], topic_arn.split(":")[3]
    if topic_region != region:
        return (
            f"the topic is in {topic_region!r}, the alarms in env.region {region!r}: CloudWatch "
            "alarms notify only SNS topics of their own region; expected a topic in "
            f"{region!r}"
        )
    if region in REGIONS and partition != partition_of(region):
        return (
            f"partition {partition!r} is not env.region's ({partition_of(region)!r}); expected "
            f"arn:{partition_of(region)}:sns:{region}:<account>:<name>"
        )
    return None


def _unpulled_digest_problems(settings: Settings) -> list[str]:
    """``images.digests`` entries for images the platform never pulls (a typo, or an image of
    another release): the pin would silently apply to nothing."""
    if not settings.images.digests:
        return []
    from ml_platform.image_pins import ImageReference
    from ml_platform.pulled_images import images_digests_may_pin

    allowed = [ImageReference.parse(i).tagged for i in images_digests_may_pin(settings)]
    out = []
    for image in settings.images.digests:
        try:
            tagged = ImageReference.parse(image).tagged
        except ValueError:
            continue  # ImageSettings.problems names the malformed reference
        if tagged not in allowed:
            out.append(
                f"images.digests.{shown(image, 200)}: the platform never pulls this image with "
                f"these settings; expected one of {allowed}"
            )
    return out


class _JsonObject(dict[str, Any]):
    """A JSON object as :func:`loads_json` reads it: remembers each key it saw more than once,
    with every value it had."""

    duplicates: dict[str, list[Any]]


def _object_pairs(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    seen: dict[str, list[Any]] = {}
    for key, value in pairs:
        seen.setdefault(key, []).append(value)
    obj.duplicates = {k: v for k, v in seen.items() if len(v) > 1}
    return obj


def loads_json(text: str) -> Any:
    """``json.loads``, keeping track of duplicate keys (see :func:`duplicate_key_problems`)."""
    import json

    return json.loads(text, object_pairs_hook=_object_pairs)


def duplicate_key_problems(value: Any, where: str, path: str = "") -> list[str]:
    """One problem per key that appears more than once in one object of ``value`` (read with
    :func:`loads_json`): JSON parsers keep only the last, so a repeated key silently replaces
    what was written above it (a second ``removal_policy`` turned ``retain`` into
    ``destroy``). ``where`` names the file or flag; each key is given by its dotted path."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, values in getattr(value, "duplicates", {}).items():
            dotted = f"{path}.{key}" if path else key
            out.append(
                f"{where}: key {shown(dotted)} appears {len(values)} times in one object (values "
                f"{', '.join(shown(v, 60) for v in values)}); JSON keeps only the last: keep one"
            )
        for key, inner in value.items():
            out += duplicate_key_problems(inner, where, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            out += duplicate_key_problems(inner, where, f"{path}[{i}]")
    return out


def context_file_problems(*paths: Any) -> list[str]:
    """Duplicate keys in the context files the CDK CLI read (``cdk.json``,
    ``cdk.context.json``): the CLI keeps the last value of a repeated key before the app
    sees the context, so the app entry point reads the files again to refuse them. Files that
    do not exist or do not parse are skipped (the CLI reports those)."""
    out: list[str] = []
    for path in paths:
        try:
            data = loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        out += duplicate_key_problems(data, str(path))
    return out


def _json_object_or_problem(text: str, where: str, problems: list[str]) -> Any:
    """``text`` parsed as JSON, or ``None`` with a problem naming ``where``."""
    try:
        value = loads_json(text)
    except (ValueError, RecursionError) as error:
        problems.append(f"{where} = {shown(text[:80])}: not valid JSON ({str(error)[:120]})")
        return None
    if value is not None and not isinstance(value, Mapping):
        problems.append(f"{where} = {shown(text[:80])}: expected a JSON object")
        return None
    duplicates = duplicate_key_problems(value, f"{where} (-c {where}=...)", where)
    if duplicates:
        problems += duplicates
        return None
    return value


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``overrides`` merged in: objects merge key by key, any other
    value (lists and null included) replaces. The CDK CLI's ``deepMerge`` (aws-cdk
    ``lib/util``, used by ``Settings.merge``) does the same, so this is also how the context
    files combine (:func:`cdk_context`)."""
    import copy

    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


PROJECT_CONTEXT_FILE = "cdk.context.json"
"""Where the CDK CLI caches lookups, beside cdk.json; it loses to cdk.json's context."""


def user_context_file() -> Any:
    """``~/.cdk.json``: the CDK CLI's user defaults; its ``context`` loses to both project
    files."""
    from pathlib import Path

    return Path.home() / ".cdk.json"


def context_sources(cdk_json: Any) -> list[tuple[Any, Mapping[str, Any]]]:
    """The context files the CDK CLI reads for the project of ``cdk_json``, lowest precedence
    first: ``~/.cdk.json``'s ``context``, ``cdk.context.json``, ``cdk.json``'s ``context``.

    aws-cdk 2.1148 ``Configuration.loadConfigFiles``: the bags are command line, cdk.json's
    context, cdk.context.json, then ~/.cdk.json's context; ``Context.all`` merges them in
    reverse with ``Settings.merge`` (a deep merge), so a key of cdk.json wins over the same
    key of cdk.context.json, nested keys included. A missing file is an empty bag."""
    from pathlib import Path

    cdk_json = Path(cdk_json)
    sources: list[tuple[Path, Mapping[str, Any]]] = []
    user = user_context_file()
    if user.is_file():
        sources.append((user, _context_file(user, "context")))
    local = cdk_json.with_name(PROJECT_CONTEXT_FILE)
    if local.is_file():
        sources.append((local, _context_file(local, None)))
    sources.append((cdk_json, _context_file(cdk_json, "context")))
    return sources


def cdk_context(cdk_json: Any) -> dict[str, Any]:
    """The context ``cdk synth`` gives the app of ``cdk_json``'s project (without ``-c``
    values): the files of :func:`context_sources` deep-merged as the CDK CLI merges them."""
    merged: dict[str, Any] = {}
    for _path, values in context_sources(cdk_json):
        merged = deep_merge(merged, values)
    return merged


def _leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every non-object value in nested objects (an empty object has
    none: merged under another, it changes nothing)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


_MISSING = object()


def shadowed_settings(cdk_json: Any) -> list[str]:
    """Problems for ``ml-platform`` settings of cdk.context.json that cdk.json overrides with
    another value: the CDK CLI drops them silently (cdk.json wins), so a value written there
    on purpose would not take effect. One problem per key, naming both files."""
    import json
    from pathlib import Path

    cdk_json = Path(cdk_json)
    local = cdk_json.with_name(PROJECT_CONTEXT_FILE)
    if not local.is_file():
        return []
    problems: list[str] = []
    objects: list[Mapping[str, Any]] = []
    for path, values in (
        (local, _context_file(local, None)),
        (cdk_json, _context_file(cdk_json, "context")),
    ):
        raw = values.get(CONTEXT_KEY)
        if isinstance(raw, str):  # JSON text, as `-c` gives it: the app parses it too
            raw = _json_object_or_problem(raw, f"{path.name}: {CONTEXT_KEY}", problems)
        objects.append(raw if isinstance(raw, Mapping) else {})
    if problems:
        raise SettingsError(problems)
    merged = deep_merge(objects[0], objects[1])
    for key, value in _leaves(objects[0]):
        effective: Any = merged
        for part in key.split("."):
            effective = (
                effective.get(part, _MISSING) if isinstance(effective, Mapping) else _MISSING
            )
        if effective != value:
            wins = "drops it" if effective is _MISSING else f"= {json.dumps(effective)[:80]}"
            problems.append(
                f"{local.name}: {CONTEXT_KEY} {key} = {json.dumps(value)[:80]} does not take "
                f"effect: {cdk_json.name}'s {key} {wins}, and the CDK CLI lets {cdk_json.name} "
                f"win; set the value in {cdk_json.name} or remove it from {local.name} "
                "(`mlp azs` writes into cdk.json)"
            )
    return problems


def settings_from_cdk_json(path: str = "cdk.json", *, check_az_context: bool = True) -> Settings:
    """Read the settings the way ``cdk synth`` would, from a ``cdk.json`` file's context.

    For tools that run outside the CDK app (manifest writers, the operator CLI). The context
    is :func:`cdk_context`: ``~/.cdk.json`` < ``cdk.context.json`` < ``cdk.json``, deep-merged
    as the CDK CLI merges them; a setting of cdk.context.json that cdk.json overrides with
    another value is an error (:func:`shadowed_settings`), as it is at synthesis (app.py).
    ``check_az_context=False`` skips the check that the AZ names are pre-seeded in context
    (only synthesis needs them: the CLI's commands other than ``mlp azs`` do not).
    """
    context = cdk_context(path)
    problems = shadowed_settings(path)
    try:
        settings = Settings.from_context(
            context.get(CONTEXT_KEY),
            known_azs=context if check_az_context else None,
            recorded_digests=context.get(IMAGE_DIGESTS_KEY),
            recorded_mirrors=context.get(IMAGE_MIRRORS_KEY),
        )
    except SettingsError as error:
        raise SettingsError([*problems, *error.problems]) from None
    if problems:
        raise SettingsError(problems)
    return settings


def _context_file(path: Any, member: str | None) -> Mapping[str, Any]:
    """The JSON object in ``path`` (or its ``member`` object); SettingsError naming the file
    when it is not UTF-8 JSON holding an object there."""
    try:
        data = loads_json(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError([f"{path}: cannot be read ({error.strerror or error})"]) from None
    except UnicodeDecodeError:
        raise SettingsError([f"{path}: not UTF-8 text"]) from None
    except (ValueError, RecursionError) as error:
        raise SettingsError([f"{path}: not valid JSON ({str(error)[:120]})"]) from None
    if not isinstance(data, dict):
        raise SettingsError([f"{path}: expected a JSON object, got {type(data).__name__}"])
    duplicates = duplicate_key_problems(data, str(path))
    if duplicates:
        raise SettingsError(duplicates)
    if member is None:
        return data
    inner = data.get(member) or {}
    if not isinstance(inner, dict):
        raise SettingsError([f"{path}: '{member}' must be a JSON object"])
    return inner
