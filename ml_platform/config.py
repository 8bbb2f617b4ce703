"""Typed, validated settings for the whole platform.

This module is the only place where CDK context becomes values. ``app.py`` calls
:func:`Settings.from_context` once with the ``ml-platform`` context object (from
``cdk.json`` or ``-c``) and passes the frozen result down to the stacks. Every field has a
default, so an empty context synthesizes; every field is checked, and all problems are
reported together in one :class:`SettingsError`.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ml_platform.image_pins import (
    DIGEST,
    MIRROR,
    MIRRORABLE_REGISTRIES,
    ImagePolicy,
    reference_problem,
)
from ml_platform.instances import (
    EKS_GPU_INSTANCES,
    SAGEMAKER_MME_GPU_INSTANCES,
    TRAINIUM_INSTANCES,
    instance_compute_capability,
)
from ml_platform.regions import REGIONS, partition_of, region_problem
from ml_platform.sagemaker_images import (
    DEFAULT_INFERENCE_AMI_VERSION,
    DEFAULT_TRITON_VERSION,
    INFERENCE_AMI_VERSIONS,
    TRITON_RELEASES,
    TRITON_VERSIONS,
    inference_ami_problem,
    triton_region_problem,
)
from ml_platform.triton.archive_names import ArchiveRef, parse_ref
from ml_platform.triton.ensembles import (
    ARCHIVE_MODELS,
    IMAGE_ARCHIVE,
    TEXT_ARCHIVE,
    TEXT_ONNX_ARCHIVE,
)
from ml_platform.triton.targets import gpu_problem
from ml_platform.versions import EKS_SUPPORT_TYPES, KUBERNETES_VERSIONS

CONTEXT_KEY = "ml-platform"
"""The context key in ``cdk.json`` that holds the platform's settings."""
IMAGE_DIGESTS_KEY = "ml-platform:image-digests"
"""Context key (``cdk.context.json``) where ``mlp images resolve`` records the digests it
asked the registries for: ``registry/repository:tag`` -> ``sha256:...``. A key of its own, so
that ``mlp azs`` (which rewrites the ``ml-platform`` object there) leaves it alone; digests
set in ``images.digests`` win over it."""

REMOVAL_POLICIES = ("retain", "destroy")
ENDPOINT_ACCESS = ("public_and_private", "private")
FSX_THROUGHPUTS = (125, 250, 500, 1000)  # MB/s per TiB, PERSISTENT_2
# The retention periods CloudWatch Logs accepts, in days (ONE_DAY ... TEN_YEARS).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
TRITON_SAGEMAKER_VERSIONS = TRITON_VERSIONS

# Every pattern is matched with ``fullmatch`` (``$`` would accept a trailing newline) and
# spelled in ASCII classes (``\d`` and ``\w`` match other scripts' digits and letters).
_ACCOUNT = re.compile(r"[0-9]{12}")
_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")
_ROLE_ARN = re.compile(r"arn:(aws[a-z-]*):iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
_PRINCIPAL_ARN = re.compile(
    r"arn:(aws[a-z-]*):iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}"
)
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_STACK_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9]{0,40}")
# The pattern aws-cdk-lib's ec2.InstanceType parses (aws-ec2/lib/instance-types.ts); a name
# it cannot parse fails deep in jsii. Group 3 holds the capability letters ('g': Graviton).
_INSTANCE_TYPE = re.compile(r"([a-z]+)([0-9]{1,2})([a-z-]*)\.([a-z0-9-]+)")
_ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_IMAGE_REPOSITORY = re.compile(r"[a-z0-9]+([._/-][a-z0-9]+)*")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_SNS_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}")
_CAPACITY_RESERVATION = re.compile(r"cr-[0-9a-f]{8}([0-9a-f]{9})?")
_ADDON_VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+")

# Namespaces Kubernetes, Volcano or the platform's own charts own. The Storage chart creates
# (and on stack deletion deletes) training.namespace, so it must never be one of these.
RESERVED_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",  # Kubernetes
    "volcano-system",
    "volcano-monitoring",  # Volcano's Helm chart
    "amazon-cloudwatch",  # the CloudWatch observability add-on (its allow-all NetworkPolicy)
    "triton",  # Triton on EKS (k8s_charts/triton.py)
)
# Volcano creates and owns these queues ('root' is the parent of hierarchical queues).
RESERVED_QUEUES = ("default", "root")
# EKS: "You can't add IPv6 CIDR blocks to IPv4 clusters"; at most 40 public access CIDRs.
# https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html
# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html
MAX_PUBLIC_ACCESS_CIDRS = 40


def endpoint_construct_id(endpoint_name: str) -> str:
    """The construct id InferenceStack gives an endpoint: 'triton-ensembles' ->
    'TritonEnsembles' (stacks/inference.py; a test holds the two equal)."""
    return "".join(part[:1].upper() + part[1:] for part in endpoint_name.split("-"))


# Construct ids InferenceStack uses beside the endpoints' ids and their '<id>Name' outputs.
INFERENCE_FIXED_IDS = (
    "ModelBucket",
    "UploadArchives",
    "AlarmTopic",
    "EndpointsDashboard",
    "EndpointsDashboardUrl",
)


# Address blocks a VPC cannot take: AWS rejects or reserves them, or they cannot route.
# https://docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html
_NOT_FOR_VPC = {
    "0.0.0.0/8": "'this network' (unspecified)",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved",
}


def vpc_cidr_problems(cidr: str, key: str = "network.cidr") -> list[str]:
    """Problems of a VPC CIDR: an IPv4 block /16 to /20, not in a special-purpose range."""
    try:
        net = ipaddress.ip_network(cidr)
    except ValueError:
        return [f"{key} = {cidr!r}: not a CIDR block (host bits must be zero)"]
    if net.version != 4 or not 16 <= net.prefixlen <= 20:
        return [f"{key} = {cidr!r}: expected an IPv4 block from /16 to /20"]
    for block, what in _NOT_FOR_VPC.items():
        if net.overlaps(ipaddress.ip_network(block)):
            return [
                f"{key} = {cidr!r}: overlaps {block}, {what}; use a private range such as 10.0.0.0/16"
            ]
    return []


# Caps of `inference.upload_dir`: the deploy-time upload is a Lambda-backed BucketDeployment.
UPLOAD_DIR_MAX_ARCHIVES = 100


def upload_dir_problems(upload_dir: str, key: str = "inference.upload_dir") -> list[str]:
    """Problems of a local folder of archives to upload at deploy time: it must be a folder
    whose ``*.tar.gz`` archives have versioned names matching their content (as
    ``mlp models upload`` requires), are safe to unpack and servable (the checker runs only
    when the folder holds archives, so protobuf loads only then)."""
    from pathlib import Path

    try:
        folder = Path(upload_dir)
        is_dir = folder.is_dir()
        exists = folder.exists()
    except (OSError, ValueError):  # e.g. an embedded NUL byte or a name too long
        return [f"{key} = {upload_dir!r}: not a usable path"]
    if not is_dir:
        what = "is not a directory" if exists else "does not exist"
        return [f"{key} = {upload_dir!r}: {what}; expected a folder of built archives"]
    archives = sorted(folder.glob("*.tar.gz"))
    if not archives:
        return [f"{key} = {upload_dir!r}: holds no *.tar.gz archive"]
    if len(archives) > UPLOAD_DIR_MAX_ARCHIVES:
        return [
            f"{key} = {upload_dir!r}: {len(archives)} archives, at most {UPLOAD_DIR_MAX_ARCHIVES}"
        ]
    from ml_platform.triton.archive_names import content_version, parse_key
    from ml_platform.triton.archive_safety import ArchiveSafetyError, check_archive

    out = []
    for archive in archives:
        # The name and content-version rule of `mlp models upload`: an archive on S3 is never
        # overwritten, so its key must carry its content's version.
        named = parse_key(archive.name)
        if named is None:
            out.append(
                f"{key} = {upload_dir!r}: {archive.name}: not a versioned archive name: "
                "expected <logical>-v<8 hex digits>.tar.gz, as `mlp models package` "
                "names it"
            )
        elif named.version != (actual := content_version(archive)):
            out.append(
                f"{key} = {upload_dir!r}: {archive.name}: named version "
                f"{named.version}, but its content is version {actual} (repackage it "
                "with mlp models package)"
            )
        try:
            check_archive(archive)
        except ArchiveSafetyError as error:
            out.append(f"{key} = {upload_dir!r}: {error}")
            continue
        from ml_platform.triton.repository import archive_problems

        out += [f"{key} = {upload_dir!r}: {archive.name}: {p}" for p in archive_problems(archive)]
    return out


# The logical names of the archives this repository builds (``model_tf_dali`` ...).
KNOWN_ARCHIVES = tuple(sorted(name.removesuffix(".tar.gz") for name in ARCHIVE_MODELS))
DEFAULT_ARCHIVES = tuple(name.removesuffix(".tar.gz") for name in (IMAGE_ARCHIVE, TEXT_ARCHIVE))
DEFAULT_EKS_ARCHIVES = tuple(
    name.removesuffix(".tar.gz") for name in (IMAGE_ARCHIVE, TEXT_ONNX_ARCHIVE)
)


def archive_ref_problems(where: str, archives: tuple[str, ...]) -> list[str]:
    """Problems of a list of archive references (``NAME`` or ``NAME@vXXXXXXXX``)."""
    out = []
    if not archives:
        out.append(f"{where}: expected at least one archive")
    for i, archive in enumerate(archives):
        try:
            parse_ref(archive)
        except ValueError as error:
            out.append(f"{where}[{i}] = {archive!r}: {error}")
    duplicates = sorted({a for a in archives if archives.count(a) > 1})
    if duplicates:
        out.append(f"{where}: {duplicates} given more than once")
    return out


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
class EnvironmentSettings:
    """Where the stacks deploy.

    Attributes:
        account: AWS account id. Default ``123456789012``, a placeholder that lets ``cdk synth``
            run without credentials; set your own before ``cdk deploy``.
        region: AWS region. Default ``us-west-2`` (offers Trainium).
        stack_prefix: Prefix of every stack name. Default ``MlPlatform``.
    """

    account: str = "123456789012"
    region: str = "us-west-2"
    stack_prefix: str = "MlPlatform"

    def problems(self) -> list[str]:
        out = []
        if not _ACCOUNT.fullmatch(self.account):
            out.append(f"env.account = {self.account!r}: expected a 12-digit AWS account id")
        problem = region_problem("env.region", self.region)
        if problem:
            out.append(problem)
        if not _STACK_PREFIX.fullmatch(self.stack_prefix):
            out.append(
                f"env.stack_prefix = {self.stack_prefix!r}: expected letters and digits, "
                "starting with a letter, at most 41 characters"
            )
        return out


@dataclass(frozen=True)
class NetworkSettings:
    """The VPC.

    Attributes:
        cidr: VPC CIDR block. Default ``10.0.0.0/16``.
        availability_zones: AZ names the VPC spans (two or more). Default us-west-2a, b and d.
        trainium_az: The one AZ (name, in this account) that offers the Trainium instance type;
            node group and FSx live there. Default ``us-west-2d``. ``mlp azs`` finds it.
        nat_gateways: NAT gateways (1 saves cost; one per AZ survives an AZ outage). Default 1.
        flow_log_retention_days: Days VPC flow logs are kept. Default 90.
        restrict_default_security_group: Remove every rule of the VPC's default security group
            (Security Hub EC2.2) with aws-cdk's Lambda-backed custom resource. Default true.
    """

    cidr: str = "10.0.0.0/16"
    availability_zones: tuple[str, ...] = ("us-west-2a", "us-west-2b", "us-west-2d")
    trainium_az: str = "us-west-2d"
    nat_gateways: int = 1
    flow_log_retention_days: int = 90
    restrict_default_security_group: bool = True

    def problems(self) -> list[str]:
        out = []
        out += vpc_cidr_problems(self.cidr)
        if len(self.availability_zones) < 2 or len(set(self.availability_zones)) != len(
            self.availability_zones
        ):
            out.append(
                f"network.availability_zones = {list(self.availability_zones)!r}: "
                "expected at least two distinct AZ names"
            )
        if self.trainium_az not in self.availability_zones:
            out.append(
                f"network.trainium_az = {self.trainium_az!r}: must be one of "
                f"network.availability_zones {list(self.availability_zones)!r}"
            )
        if not 1 <= self.nat_gateways <= len(self.availability_zones):
            out.append(
                f"network.nat_gateways = {self.nat_gateways}: expected 1 to "
                f"{len(self.availability_zones)} (one per AZ at most)"
            )
        if self.flow_log_retention_days not in LOG_RETENTION_DAYS:
            out.append(
                f"network.flow_log_retention_days = {self.flow_log_retention_days}: "
                f"expected one of {list(LOG_RETENTION_DAYS)}"
            )
        return out


@dataclass(frozen=True)
class StorageSettings:
    """Stateful storage: FSx for Lustre, the training image registry and the model bucket.

    Attributes:
        removal_policy: ``retain`` (default) keeps file system, bucket and registry when the
            stack is deleted; ``destroy`` deletes them (data is lost).
        fsx_storage_gib: Lustre capacity: 1200 or a multiple of 2400 GiB (PERSISTENT_2).
            Default 1200, the tutorial's size.
        fsx_throughput_per_tib: MB/s per TiB: 125, 250, 500 or 1000. Default 125.
        ecr_max_images: Images the training repository keeps before expiring the oldest.
            Default 30.
        model_prefix: S3 key prefix (ending in ``/``) of the Triton model archives. Default
            ``models/``.
        archive_publishers: ARNs of the IAM roles or users that may write and delete archives
            under the prefix; the bucket policy refuses every other principal (archives are
            code the endpoints run). Default: ``cluster.admin_role_arn`` (``mlp azs`` records
            it), and the deploy-time upload's role when ``inference.upload_dir`` is set.
    """

    removal_policy: str = "retain"
    fsx_storage_gib: int = 1200
    fsx_throughput_per_tib: int = 125
    ecr_max_images: int = 30
    model_prefix: str = "models/"
    archive_publishers: tuple[str, ...] | None = None

    def problems(self) -> list[str]:
        out = []
        for i, arn in enumerate(self.archive_publishers or ()):
            if not _PRINCIPAL_ARN.fullmatch(arn):
                out.append(
                    f"storage.archive_publishers[{i}] = {arn!r}: expected an IAM role or user ARN "
                    "(arn:aws:iam::<account>:role/<name> or ...:user/<name>)"
                )
        if self.removal_policy not in REMOVAL_POLICIES:
            out.append(
                f"storage.removal_policy = {self.removal_policy!r}: expected one of {list(REMOVAL_POLICIES)}"
            )
        size = self.fsx_storage_gib
        if not (size == 1200 or (size > 0 and size % 2400 == 0)) or size > 2_400_000:
            out.append(
                f"storage.fsx_storage_gib = {size}: PERSISTENT_2 Lustre takes 1200 or a "
                "multiple of 2400 GiB (up to 2400000)"
            )
        if self.fsx_throughput_per_tib not in FSX_THROUGHPUTS:
            out.append(
                f"storage.fsx_throughput_per_tib = {self.fsx_throughput_per_tib}: expected one of "
                f"{list(FSX_THROUGHPUTS)}"
            )
        if not 1 <= self.ecr_max_images <= 1000:
            out.append(f"storage.ecr_max_images = {self.ecr_max_images}: expected 1 to 1000")
        segments = self.model_prefix.split("/")
        if (
            not self.model_prefix.endswith("/")
            or len(self.model_prefix) > 512
            or any(s in ("", ".", "..") or not _PREFIX_SEGMENT.fullmatch(s) for s in segments[:-1])
        ):
            out.append(
                f"storage.model_prefix = {self.model_prefix!r}: expected a relative S3 key prefix "
                "ending in '/' of segments made of letters, digits and '._-' (none empty, '.' or "
                "'..'), at most 512 characters, e.g. 'models/'"
            )
        return out


@dataclass(frozen=True)
class ClusterSettings:
    """The EKS cluster that runs training (and optionally Triton).

    Attributes:
        name: Cluster name. Default ``ml-platform``.
        kubernetes_version: ``1.34`` or ``1.35`` (the versions Volcano 1.15 supports, each
            with its own add-on pins and kubectl layer). Default ``1.35``.
        admin_role_arn: IAM role given cluster-admin through an EKS access entry. Default none
            (only the stack's kubectl provider can use the API); ``mlp azs`` writes the role
            named with ``--admin-role-arn`` or ``--admin-role-mine``.
        endpoint_access: ``private`` (default: the API answers inside the VPC only; reach it
            through Session Manager port forwarding, see the README) or ``public_and_private``.
        public_access_cidrs: CIDRs allowed to the public endpoint. Default none; ``mlp azs
            --public-access-mine`` writes the caller's address as a /32.
        public_access_from_anywhere: Accept ``0.0.0.0/0`` in ``public_access_cidrs`` (with a
            synth-time warning). Default false: a /0 block is a settings error.
        bootstrap_creator_admin: Give the cluster's creator (CloudFormation's execution role)
            a permanent cluster-admin access entry. Default false. A cluster deployed before
            this default changed keeps its entry only with true (changing it replaces the
            cluster).
        node_ssm_access: ``AmazonSSMManagedInstanceCore`` on every node role: Session Manager
            shells and port forwarding to the nodes (break-glass debugging of EFA and Neuron,
            the way to a private API endpoint). Default true.
        network_policy_mode: The VPC CNI's NetworkPolicy enforcing mode: ``strict`` (default:
            a new pod is default-deny until its policies are in place; the system namespaces
            get allow-all policies) or ``standard`` (a new pod talks freely until then).
        system_instance_type: Instance type of the small system node group. Default m6i.large.
        system_nodes: Nodes in the system node group. Default 2.
        fsx_csi_driver_version: Version of the ``aws-fsx-csi-driver`` add-on. Default none:
            EKS's default version (``mlp addons`` lists what exists).
        cloudwatch_observability_version: Version of the ``amazon-cloudwatch-observability``
            add-on. Default none: EKS's default version.
        support_type: The cluster's upgrade policy, ``EXTENDED`` (default, as EKS's own:
            a version past standard support keeps running at the extended-support rate, which
            ``mlp cost`` reports) or ``STANDARD`` (EKS upgrades the control plane then).
    """

    name: str = "ml-platform"
    kubernetes_version: str = "1.35"
    admin_role_arn: str | None = None
    endpoint_access: str = "private"
    public_access_cidrs: tuple[str, ...] = ()
    public_access_from_anywhere: bool = False
    bootstrap_creator_admin: bool = False
    node_ssm_access: bool = True
    network_policy_mode: str = "strict"
    system_instance_type: str = "m6i.large"
    system_nodes: int = 2
    fsx_csi_driver_version: str | None = None
    cloudwatch_observability_version: str | None = None
    support_type: str = "EXTENDED"

    @property
    def addon_versions(self) -> dict[str, str]:
        """Add-on versions set in these settings, by add-on name."""
        chosen = {
            "aws-fsx-csi-driver": self.fsx_csi_driver_version,
            "amazon-cloudwatch-observability": self.cloudwatch_observability_version,
        }
        return {name: version for name, version in chosen.items() if version is not None}

    def problems(self, region: str | None = None) -> list[str]:
        out = []
        if not _NAME.fullmatch(self.name):
            out.append(f"cluster.name = {self.name!r}: expected lower-case letters, digits and '-'")
        if self.kubernetes_version not in KUBERNETES_VERSIONS:
            out.append(
                f"cluster.kubernetes_version = {self.kubernetes_version!r}: expected one of "
                f"{list(KUBERNETES_VERSIONS)}"
            )
        if self.admin_role_arn is not None:
            arn = _ROLE_ARN.fullmatch(self.admin_role_arn)
            if not arn:
                out.append(
                    f"cluster.admin_role_arn = {self.admin_role_arn!r}: expected an IAM role ARN "
                    "(arn:<partition>:iam::<12-digit account>:role/<name>)"
                )
            elif region is not None and arn.group(1) != partition_of(region):
                out.append(
                    f"cluster.admin_role_arn = {self.admin_role_arn!r}: partition {arn.group(1)!r} "
                    f"differs from env.region {region!r}'s {partition_of(region)!r}"
                )
        if self.endpoint_access not in ENDPOINT_ACCESS:
            out.append(
                f"cluster.endpoint_access = {self.endpoint_access!r}: expected one of {list(ENDPOINT_ACCESS)}"
            )
        if self.support_type not in EKS_SUPPORT_TYPES:
            out.append(
                f"cluster.support_type = {self.support_type!r}: expected one of "
                f"{list(EKS_SUPPORT_TYPES)}"
            )
        cidrs = list(self.public_access_cidrs)
        if self.endpoint_access == "public_and_private" and not cidrs:
            out.append(
                "cluster.public_access_cidrs = []: a public endpoint needs at least one CIDR "
                "(or set cluster.endpoint_access to 'private')"
            )
        if self.endpoint_access == "private" and cidrs:
            out.append(
                f"cluster.public_access_cidrs = {cidrs!r}: a private endpoint takes none (set "
                "cluster.endpoint_access to 'public_and_private' to use them)"
            )
        if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
            out.append(
                f"cluster.public_access_cidrs: {len(cidrs)} blocks, EKS takes at most "
                f"{MAX_PUBLIC_ACCESS_CIDRS}"
            )
        if len(set(cidrs)) != len(cidrs):
            out.append(f"cluster.public_access_cidrs = {cidrs!r}: blocks must be distinct")
        for i, cidr in enumerate(cidrs):
            try:
                net = ipaddress.ip_network(cidr)  # strict: host bits set are an error
            except ValueError:
                out.append(f"cluster.public_access_cidrs[{i}] = {cidr!r}: not a CIDR block")
                continue
            if net.version != 4:
                out.append(
                    f"cluster.public_access_cidrs[{i}] = {cidr!r}: IPv4 only (EKS takes no IPv6 "
                    "blocks for an IPv4 cluster)"
                )
            elif net.prefixlen == 0 and not self.public_access_from_anywhere:
                out.append(
                    f"cluster.public_access_cidrs[{i}] = {cidr!r}: opens the Kubernetes API to "
                    "the whole internet; name your networks (`mlp azs --public-access-mine` "
                    "writes your address), keep cluster.endpoint_access 'private', or set "
                    "cluster.public_access_from_anywhere to true to state that choice"
                )
        instance = _INSTANCE_TYPE.fullmatch(self.system_instance_type)
        if not instance:
            out.append(
                f"cluster.system_instance_type = {self.system_instance_type!r}: expected an EC2 "
                "instance type such as 'm6i.large'"
            )
        elif "g" in instance.group(3) or instance.group(1) == "a":
            out.append(
                f"cluster.system_instance_type = {self.system_instance_type!r}: the system nodes "
                "run the x86_64 AL2023 AMI; expected an x86_64 type such as 'm6i.large'"
            )
        if self.network_policy_mode not in ("strict", "standard"):
            out.append(
                f"cluster.network_policy_mode = {self.network_policy_mode!r}: expected one of "
                "['strict', 'standard']"
            )
        if not 1 <= self.system_nodes <= 10:
            out.append(f"cluster.system_nodes = {self.system_nodes}: expected 1 to 10")
        for key in ("fsx_csi_driver_version", "cloudwatch_observability_version"):
            value = getattr(self, key)
            if value is not None and not _ADDON_VERSION.fullmatch(value):
                out.append(
                    f"cluster.{key} = {value!r}: expected an EKS add-on version such as "
                    "'v1.9.0-eksbuild.1'"
                )
        return out


_PLACEMENT_GROUP = re.compile(r"[ -~]{1,255}")  # EC2 CreatePlacementGroup: up to 255 ASCII


@dataclass(frozen=True)
class TrainiumSettings:
    """The Trainium node group (stack ``<prefix>-TrainiumNodes``).

    Attributes:
        instance_type: ``trn1.32xlarge`` (default, 8 EFA interfaces) or ``trn1n.32xlarge`` (16).
        nodes: Desired node count. Default 2 (the tutorial's 2 x 32 NeuronCores).
        min_nodes: Default 2, or 0 with ``capacity_block_id`` (EKS updates a node group on a
            Capacity Block only at desired size 0). 0 lets the group scale to nothing.
        max_nodes: Default 2.
        root_volume_gib: Encrypted gp3 root volume size. Default 500.
        capacity_reservation_id: An On-Demand Capacity Reservation (``cr-...``) the nodes launch
            into. Default none. The launch template then names no new placement group: an ODCR
            serves a cluster placement group only if it was created in it.
        capacity_block_id: A Capacity Block for ML (``cr-...``) the nodes launch into. Default
            none. At most one of the two. A Capacity Block places its instances itself: no
            placement group.
        placement_group: Name of the cluster placement group ``capacity_reservation_id`` was
            created in. Default none: a new cluster placement group without a reservation, no
            placement group with one. Not with ``capacity_block_id``.
    """

    instance_type: str = "trn1.32xlarge"
    nodes: int = 2
    min_nodes: int | None = None
    max_nodes: int = 2
    root_volume_gib: int = 500
    capacity_reservation_id: str | None = None
    capacity_block_id: str | None = None
    placement_group: str | None = None

    def __post_init__(self) -> None:
        if self.min_nodes is None:
            default = 0 if self.capacity_block_id is not None else 2
            object.__setattr__(self, "min_nodes", default)

    def problems(self) -> list[str]:
        out = []
        if self.instance_type not in TRAINIUM_INSTANCES:
            out.append(
                f"trainium.instance_type = {self.instance_type!r}: expected one of "
                f"{sorted(TRAINIUM_INSTANCES)}"
            )
        if not 0 <= self.min_nodes <= self.nodes <= self.max_nodes <= 64 or self.max_nodes < 1:
            out.append(
                f"trainium.min_nodes = {self.min_nodes}, trainium.nodes = {self.nodes}, "
                f"trainium.max_nodes = {self.max_nodes}: expected 0 <= min_nodes <= nodes <= "
                "max_nodes <= 64, max_nodes >= 1"
            )
        if not 100 <= self.root_volume_gib <= 16384:
            out.append(f"trainium.root_volume_gib = {self.root_volume_gib}: expected 100 to 16384")
        for key in ("capacity_reservation_id", "capacity_block_id"):
            value = getattr(self, key)
            if value is not None and not _CAPACITY_RESERVATION.fullmatch(value):
                out.append(
                    f"trainium.{key} = {value!r}: expected a capacity reservation id such as "
                    "'cr-0123456789abcdef0'"
                )
        if self.capacity_reservation_id is not None and self.capacity_block_id is not None:
            out.append(
                "trainium.capacity_reservation_id and trainium.capacity_block_id are both set: "
                "expected at most one"
            )
        if self.placement_group is not None:
            if self.capacity_block_id is not None:
                out.append(
                    f"trainium.placement_group = {self.placement_group!r} with "
                    "trainium.capacity_block_id: a Capacity Block places its instances itself; "
                    "expected no placement group"
                )
            elif self.capacity_reservation_id is None:
                out.append(
                    f"trainium.placement_group = {self.placement_group!r}: names the group a "
                    "capacity reservation was created in, so it needs "
                    "trainium.capacity_reservation_id (without one the platform makes its own "
                    "cluster placement group)"
                )
            elif not _PLACEMENT_GROUP.fullmatch(self.placement_group):
                out.append(
                    f"trainium.placement_group = {self.placement_group!r}: expected a placement "
                    "group name (1 to 255 ASCII characters)"
                )
        return out


@dataclass(frozen=True)
class TrainingSettings:
    """Where the training workloads run on the cluster.

    Attributes:
        namespace: Kubernetes namespace of the jobs, the FSx claim and TensorBoard. Default
            ``training``.
        queue: Volcano queue the jobs are submitted to. Default ``training``.
        image_repository: Name of the ECR repository of the training image. Default
            ``ml-platform/training``.
        image_tag: Tag of the training image in the ECR repository (tags are immutable).
            Default ``bert-pretrain-v1``.
        dataset_sha256: SHA-256 (64 lower-case hex digits) the BERT dataset tarball must have;
            the dataset Job refuses another. Default none: no public source states it, so the
            Job prints the digest of its first download and warns; pin that value.
    """

    namespace: str = "training"
    queue: str = "training"
    image_repository: str = "ml-platform/training"
    image_tag: str = "bert-pretrain-v1"
    dataset_sha256: str | None = None

    def problems(self) -> list[str]:
        out = []
        for key, reserved in (("namespace", RESERVED_NAMESPACES), ("queue", RESERVED_QUEUES)):
            value = getattr(self, key)
            if not _K8S_NAME.fullmatch(value):
                out.append(f"training.{key} = {value!r}: expected a Kubernetes DNS label")
            elif value in reserved:
                out.append(
                    f"training.{key} = {value!r}: owned by Kubernetes, Volcano or another part of "
                    f"the platform; expected a name other than {list(reserved)}"
                )
        if (
            not _IMAGE_REPOSITORY.fullmatch(self.image_repository)
            or len(self.image_repository) > 256
        ):
            out.append(
                f"training.image_repository = {self.image_repository!r}: expected an ECR "
                "repository name (lower-case letters, digits, '._/-')"
            )
        if not _IMAGE_TAG.fullmatch(self.image_tag):
            out.append(f"training.image_tag = {self.image_tag!r}: expected a Docker image tag")
        if self.dataset_sha256 is not None and not _SHA256_HEX.fullmatch(self.dataset_sha256):
            out.append(
                f"training.dataset_sha256 = {self.dataset_sha256!r}: expected a SHA-256 of 64 "
                "lower-case hex digits"
            )
        return out


@dataclass(frozen=True)
class EndpointSettings:
    """One SageMaker multi-model endpoint serving Triton ensembles.

    Attributes:
        name: Endpoint name. Default ``triton-ensembles``.
        instance_type: A single-GPU instance type that MME on GPU supports. Default
            ``ml.g4dn.4xlarge`` (T4, as in the source design).
        initial_instances: Default 1. min_instances: Default 1. max_instances: Default 2.
        invocations_per_instance: Scaling target for SageMakerVariantInvocationsPerInstance
            (per minute). Default 1000.
        archives: Archives this endpoint serves, each a logical name (``model_tf_dali``:
            every version, the newest for ``mlp invoke``) or an exact version
            (``model_tf_dali@v1a2b3c4d``), as ``mlp models package`` names them. Default both
            ensembles of the source design, the text one with its T4 plan. An archive with a
            TensorRT plan (``model_trt_python_<gpu>``) must target the instance type's GPU.
            They scope :meth:`grant_invoke` and ``mlp`` commands; they are not written into
            the template.
    """

    name: str = "triton-ensembles"
    instance_type: str = "ml.g4dn.4xlarge"
    initial_instances: int = 1
    min_instances: int = 1
    max_instances: int = 2
    invocations_per_instance: int = 1000
    archives: tuple[str, ...] = DEFAULT_ARCHIVES

    @property
    def archive_refs(self) -> tuple[ArchiveRef, ...]:
        return tuple(parse_ref(a) for a in self.archives)

    def problems(self, where: str) -> list[str]:
        out = []
        if not _ENDPOINT_NAME.fullmatch(self.name):
            out.append(
                f"{where}.name = {self.name!r}: expected letters, digits and '-', at most 63"
            )
        if self.instance_type not in SAGEMAKER_MME_GPU_INSTANCES:
            out.append(
                f"{where}.instance_type = {self.instance_type!r}: multi-model endpoints on GPU "
                f"support {sorted(SAGEMAKER_MME_GPU_INSTANCES)}"
            )
        if not 1 <= self.min_instances <= self.initial_instances <= self.max_instances <= 100:
            out.append(
                f"{where}.min_instances = {self.min_instances}, {where}.initial_instances = "
                f"{self.initial_instances}, {where}.max_instances = {self.max_instances}: "
                "expected 1 <= min <= initial <= max <= 100"
            )
        if not 1 <= self.invocations_per_instance <= 100_000:
            out.append(
                f"{where}.invocations_per_instance = {self.invocations_per_instance}: expected 1 to 100000"
            )
        out.extend(archive_ref_problems(f"{where}.archives", self.archives))
        for i, archive in enumerate(self.archives):
            problem = gpu_problem(f"{where}.archives[{i}]", archive, self.instance_type)
            if problem:
                out.append(problem)
        return out


@dataclass(frozen=True)
class InferenceSettings:
    """Triton on SageMaker multi-model endpoints.

    Attributes:
        triton_version: Tag of SageMaker's Triton container (``<ver>-py3``); Triton on EKS runs
            the same release from NGC. Default ``25.09``, the first patched release SageMaker
            publishes (NVIDIA's August 2025 bulletin, CVE-2025-23319/23320/23334, fixed in
            25.07). Older releases stay selectable for their TensorFlow backend, with a
            synth-time warning naming the CVEs.
        endpoints: The endpoints. Default: one endpoint serving both ensembles.
        upload_dir: Local folder of built archives to upload into the model prefix at deploy
            time. Default none (``mlp models upload`` does it).
        inference_ami_version: The endpoint instances' AMI (NVIDIA driver and CUDA). Default
            ``al2023-ami-sagemaker-inference-gpu-4-1`` (driver 580, CUDA 13.0), which runs the
            CUDA 13 of releases from 25.08 natively and every older release too. A 535/550
            AMI without the CUDA-compat mount cannot run a CUDA 13 release and is refused.
        alarm_topic_arn: SNS topic ARN every endpoint alarm notifies. Default none.
        network_isolation: ``EnableNetworkIsolation`` on each endpoint's model. Default true.
        instance_type_changes: Let an endpoint's ``instance_type`` change deploy although
            autoscaling is registered on it (SageMaker refuses that update otherwise): a small
            Lambda-backed custom resource per endpoint deregisters the target before the
            endpoint moves and registers it again after. Default true. False: no Lambda; an
            instance-type change then needs SageMaker's manual steps (README).
        log_retention_days: Days each endpoint's log group ``/aws/sagemaker/Endpoints/<name>``
            keeps the container logs (the stack creates the group, KMS-encrypted). Default 365.
        triton_log_verbose: Triton's ``--log-verbose`` level on the endpoints (the SageMaker
            container's ``SAGEMAKER_TRITON_LOG_VERBOSE``). Default 0: off (the container's own
            default logs every request).
        model_load_gpu_limit_percent: Triton refuses to load another model once the GPU's
            memory use passes this share (``--model-load-gpu-limit``, set through the
            container's ``SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT``). The TensorFlow backend of
            releases up to 25.02 and DALI keep GPU memory after a model unloads, so without a
            limit versions pile up until a running model fails on CUDA memory; with it the
            new load fails cleanly and raises the endpoint's load-failure alarm. Default 80;
            100 sets no limit.
    """

    triton_version: str = DEFAULT_TRITON_VERSION
    endpoints: tuple[EndpointSettings, ...] = (EndpointSettings(),)
    upload_dir: str | None = None
    inference_ami_version: str = DEFAULT_INFERENCE_AMI_VERSION
    alarm_topic_arn: str | None = None
    network_isolation: bool = True
    instance_type_changes: bool = True
    log_retention_days: int = 365
    triton_log_verbose: int = 0

    model_load_gpu_limit_percent: int = 80

    def problems(self) -> list[str]:
        out = []
        if not 1 <= self.model_load_gpu_limit_percent <= 100:
            out.append(
                f"inference.model_load_gpu_limit_percent = {self.model_load_gpu_limit_percent}: "
                "expected 1 to 100 (100: no limit)"
            )
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            out.append(
                f"inference.log_retention_days = {self.log_retention_days}: expected one of "
                f"{list(LOG_RETENTION_DAYS)}"
            )
        if self.triton_log_verbose < 0:
            out.append(
                f"inference.triton_log_verbose = {self.triton_log_verbose}: expected a level "
                ">= 0 (0 is off)"
            )
        if self.triton_version not in TRITON_SAGEMAKER_VERSIONS:
            out.append(
                f"inference.triton_version = {self.triton_version!r}: expected one of "
                f"{list(TRITON_SAGEMAKER_VERSIONS)}"
            )
        if self.inference_ami_version not in INFERENCE_AMI_VERSIONS:
            out.append(
                f"inference.inference_ami_version = {self.inference_ami_version!r}: expected one "
                f"of {list(INFERENCE_AMI_VERSIONS)}"
            )
        ami_problem = inference_ami_problem(self.triton_version, self.inference_ami_version)
        if ami_problem:
            out.append(
                f"inference.triton_version = {self.triton_version!r} with "
                f"inference.inference_ami_version = {self.inference_ami_version!r}: {ami_problem}"
            )
        release = TRITON_RELEASES.get(self.triton_version)
        for i, endpoint in enumerate(self.endpoints):
            capability = instance_compute_capability(endpoint.instance_type)
            if release and capability and capability < release.min_compute_capability:
                out.append(
                    f"inference.endpoints[{i}].instance_type = {endpoint.instance_type!r}: its GPU "
                    f"has compute capability {capability}, below the {release.min_compute_capability}"
                    f" that Triton {self.triton_version} supports (release notes, GPU "
                    "Requirements); use a g4dn or g5 instance, or a release before 25.03"
                )
        if self.alarm_topic_arn is not None and not _SNS_TOPIC_ARN.fullmatch(self.alarm_topic_arn):
            out.append(
                f"inference.alarm_topic_arn = {self.alarm_topic_arn!r}: expected an SNS topic ARN "
                "(arn:aws:sns:<region>:<account>:<name>)"
            )
        # SageMaker endpoint names are unique per region regardless of case.
        names = [e.name.lower() for e in self.endpoints]
        if len(set(names)) != len(names):
            out.append(
                f"inference.endpoints: names must be unique (case-insensitive), got "
                f"{[e.name for e in self.endpoints]!r}"
            )
        out += self._construct_id_problems()
        for i, endpoint in enumerate(self.endpoints):
            out.extend(endpoint.problems(f"inference.endpoints[{i}]"))
        if self.upload_dir is not None:
            out += upload_dir_problems(self.upload_dir)
        return out

    def _construct_id_problems(self) -> list[str]:
        """Endpoint names that InferenceStack would turn into one construct id. The message
        speaks of names, never of the ids themselves (they are internal)."""
        # Each endpoint gives an id and '<id>Name' (its name output); the stack's own
        # resources have fixed ids, which read as these endpoint names.
        reserved = {
            cid: re.sub(r"(?<!^)([A-Z])", r"-\1", cid).lower() for cid in INFERENCE_FIXED_IDS
        }
        owners: dict[str, list[str]] = {}
        for i, endpoint in enumerate(self.endpoints):
            cid = endpoint_construct_id(endpoint.name)
            owners.setdefault(cid, []).append(f"inference.endpoints[{i}].name")
            owners.setdefault(f"{cid}Name", []).append(f"inference.endpoints[{i}].name")
        out = []
        for cid, keys in owners.items():
            named = sorted(set(keys))
            names = ", ".join(f"{k} = {self._endpoint_name(k)!r}" for k in named)
            if cid in reserved:
                out.append(
                    f"{names}: too close to the name the inference stack keeps for its own "
                    f"{reserved[cid]!r}; reserved: {sorted(reserved.values())} (letter case and "
                    "repeated '-' aside)"
                )
            elif len(named) > 1:
                out.append(
                    f"{names}: too alike, the stack derives one identifier from them (names "
                    "must differ in more than letter case, repeated '-' and a trailing '-name'); "
                    "choose distinct names"
                )
        return list(dict.fromkeys(out))  # a pair that clashes on both ids is one problem

    def _endpoint_name(self, key: str) -> str:
        return self.endpoints[int(key.split("[")[1].split("]")[0])].name


@dataclass(frozen=True)
class TritonOnEksSettings:
    """Triton served from the EKS cluster on a GPU node group.

    Attributes:
        gpu_instance_type: Single-GPU EC2 instance type. Default ``g5.2xlarge``.
        gpu_nodes: GPU nodes (the node group's desired and maximum size: nothing in the
            platform scales it, see the README's "Serve the ensembles on EKS"). Default 1.
        min_gpu_nodes: Default: ``gpu_nodes`` (0 lets the group scale to nothing).
        replicas: Triton replicas (fixed; no autoscaler). Default 1.
        archives: Archives the Triton pods load: logical names of the archives this
            repository builds (the newest version under the prefix at pod start) or exact
            versions (``NAME@vXXXXXXXX``). Default both ensembles, the text one with its ONNX
            encoder (runs on any GPU; a ``model_trt_python_<gpu>`` archive must target
            ``gpu_instance_type``'s GPU).
    """

    gpu_instance_type: str = "g5.2xlarge"
    gpu_nodes: int = 1
    min_gpu_nodes: int | None = None
    replicas: int = 1
    archives: tuple[str, ...] = DEFAULT_EKS_ARCHIVES

    @property
    def archive_refs(self) -> tuple[ArchiveRef, ...]:
        return tuple(parse_ref(a) for a in self.archives)

    def problems(self) -> list[str]:
        out = []
        if self.gpu_instance_type not in EKS_GPU_INSTANCES:
            out.append(
                f"triton_on_eks.gpu_instance_type = {self.gpu_instance_type!r}: expected one of "
                f"{sorted(EKS_GPU_INSTANCES)}"
            )
        if not 1 <= self.gpu_nodes <= 20:
            out.append(f"triton_on_eks.gpu_nodes = {self.gpu_nodes}: expected 1 to 20")
        if self.min_gpu_nodes is not None and not 0 <= self.min_gpu_nodes <= self.gpu_nodes:
            out.append(
                f"triton_on_eks.min_gpu_nodes = {self.min_gpu_nodes}: expected 0 to gpu_nodes "
                f"({self.gpu_nodes})"
            )
        if not 1 <= self.replicas <= self.gpu_nodes:
            out.append(
                f"triton_on_eks.replicas = {self.replicas}: expected 1 to gpu_nodes "
                f"({self.gpu_nodes}): each replica takes a whole single-GPU node"
            )
        out.extend(archive_ref_problems("triton_on_eks.archives", self.archives))
        for i, archive in enumerate(self.archives):
            logical = archive.split("@")[0]
            if logical not in KNOWN_ARCHIVES:
                out.append(
                    f"triton_on_eks.archives[{i}] = {archive!r}: Triton on EKS loads the models of "
                    f"the archives this repository builds, expected one of {list(KNOWN_ARCHIVES)} "
                    "(optionally @vXXXXXXXX)"
                )
            problem = gpu_problem(f"triton_on_eks.archives[{i}]", archive, self.gpu_instance_type)
            if problem:
                out.append(problem)
        logicals = [a.split("@")[0] for a in self.archives]
        twice = sorted({name for name in logicals if logicals.count(name) > 1})
        if twice:
            out.append(
                f"triton_on_eks.archives: {twice} named more than once (one version of an "
                "ensemble per Triton server: their model names would clash)"
            )
        return out


@dataclass(frozen=True)
class ImageSettings:
    """Where the cluster's container images come from, and the digests that pin them.

    Attributes:
        mirrors: Public registry -> a registry you own that serves its repositories under a
            path prefix, e.g. ``{"docker.io": "<account>.dkr.ecr.<region>.amazonaws.com/docker-hub"}``
            for an ECR pull-through cache rule with prefix ``docker-hub``. Keys: one of
            ``docker.io``, ``public.ecr.aws``, ``nvcr.io``, ``quay.io``. Default none: the
            public registries themselves.
        digests: ``registry/repository:tag`` -> ``sha256:<64 hex>``, written by
            ``mlp images resolve``. Default none: only digests a public source states
            (``ml_platform.image_pins.PUBLIC_DIGESTS``); synthesis warns about the rest.
    """

    mirrors: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        out = []
        for registry, mirror in self.mirrors.items():
            if registry not in MIRRORABLE_REGISTRIES:
                out.append(
                    f"images.mirrors.{registry}: unknown registry; expected one of "
                    f"{list(MIRRORABLE_REGISTRIES)}"
                )
            if len(mirror) > 255 or not MIRROR.fullmatch(mirror):
                out.append(
                    f"images.mirrors.{registry} = {mirror!r}: expected a registry host and optional "
                    "path prefix without scheme or trailing '/', e.g. "
                    "'123456789012.dkr.ecr.us-west-2.amazonaws.com/docker-hub'"
                )
            elif mirror.split("/")[0] == registry:
                out.append(
                    f"images.mirrors.{registry} = {mirror!r}: a mirror must be another registry"
                )
        for image, digest in self.digests.items():
            problem = reference_problem(f"images.digests.{image}", image)
            if problem:
                out.append(problem)
            if not DIGEST.fullmatch(digest):
                out.append(
                    f"images.digests.{image} = {digest!r}: expected 'sha256:' and 64 "
                    "lower-case hex digits (run `mlp images resolve`)"
                )
        return out


@dataclass(frozen=True)
class FeatureSettings:
    """Switches for the optional parts. All default to on, so ``make synth`` shows everything.

    Attributes:
        training_cluster: The EKS training cluster and its workloads.
        inference: The SageMaker multi-model endpoints.
        triton_on_eks: The GPU node group and Triton on the cluster (needs training_cluster).
    """

    training_cluster: bool = True
    inference: bool = True
    triton_on_eks: bool = True


@dataclass(frozen=True)
class Settings:
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
    # `cdk synth` adds an info annotation with each stack's estimated monthly on-demand cost
    # (ml_platform.pricing). Default false.
    cost_annotations: bool = False

    @classmethod
    def from_context(
        cls,
        values: Mapping[str, Any] | None,
        *,
        known_azs: Mapping[str, Any] | None = None,
        recorded_digests: Any = None,
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

        Raises:
            SettingsError: listing every problem found (wrong keys, types and values).
        """
        problems: list[str] = []
        if isinstance(values, str):  # `-c ml-platform='{...}'` arrives as a string
            values = _json_object_or_problem(values, CONTEXT_KEY, problems)
            if problems:
                raise SettingsError(problems)
        settings = _parse(cls, values if values is not None else {}, "", problems)
        if settings is _INVALID:
            raise SettingsError(problems)
        resolved = recorded_digests
        if resolved is None and known_azs is not None:
            resolved = known_azs.get(IMAGE_DIGESTS_KEY)
        if resolved is not None:
            found = _parse(dict[str, str], resolved, IMAGE_DIGESTS_KEY, problems)
            if found is not _INVALID:
                images = dataclasses.replace(
                    settings.images, digests={**found, **settings.images.digests}
                )
                settings = dataclasses.replace(settings, images=images)
        # Values of the wrong type were replaced by their defaults, so the value checks
        # below still run over everything else and report in the same error.
        problems.extend(settings._problems(known_azs))
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
        suffix = ".cn" if self.env.region.startswith("cn-") else ""
        return (
            f"{self.env.account}.dkr.ecr.{self.env.region}.amazonaws.com{suffix}/"
            f"{self.training.image_repository}:{self.training.image_tag}"
        )

    @property
    def availability_zones_context_key(self) -> str:
        """The CDK context key holding this account's AZ names for the region."""
        return f"availability-zones:account={self.env.account}:region={self.env.region}"

    def _problems(self, context: Mapping[str, Any] | None) -> list[str]:
        out: list[str] = []
        out += self.env.problems()
        out += self.network.problems()
        out += self.storage.problems()
        out += self.cluster.problems(self.env.region)
        out += self.trainium.problems()
        out += self.training.problems()
        out += self.inference.problems()
        out += self.triton_on_eks.problems()
        out += self.images.problems()
        if (
            self.features.inference
            and self.env.region in REGIONS
            and self.inference.triton_version in TRITON_SAGEMAKER_VERSIONS
        ):
            problem = triton_region_problem(self.env.region, self.inference.triton_version)
            if problem:
                out.append(
                    f"env.region = {self.env.region!r} with inference.triton_version: {problem}"
                )
        # With an unknown region, its AZs and context key would only repeat that problem.
        known_region = self.env.region in REGIONS
        for az in self.network.availability_zones if known_region else ():
            if not az.startswith(self.env.region):
                out.append(
                    f"network.availability_zones: {az!r} is not in env.region {self.env.region!r}"
                )
        if self.features.inference and not self.inference.endpoints:
            out.append(
                "inference.endpoints = []: expected at least one endpoint with "
                "features.inference = true (or set features.inference to false)"
            )
        if self.features.triton_on_eks and not self.features.training_cluster:
            out.append(
                "features.triton_on_eks = true needs features.training_cluster = true "
                "(Triton on EKS runs on the training cluster)"
            )
        if context is not None and known_region:
            key = self.availability_zones_context_key
            seeded = context.get(key)
            if not isinstance(seeded, list):
                out.append(
                    f"env.account = {self.env.account!r}, env.region = {self.env.region!r}: "
                    f"context {key!r} is missing: add this account's AZ names to cdk.json "
                    "(or run `mlp azs`) so synthesis needs no AWS lookup"
                )
            else:
                for az in self.network.availability_zones:
                    if az not in seeded:
                        out.append(
                            f"network.availability_zones: {az!r} is not among the AZs in context "
                            f"{key!r} ({seeded!r})"
                        )
        return out


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", bool: "true or false", type(None): "null"}.get(
        tp, str(tp)
    )


_INVALID: Any = object()  # marks a value of the wrong type; the field keeps its default


@functools.cache
def _fields(tp: type) -> tuple[dict[str, Any], list[str]]:
    """Type hints and field names of a settings dataclass (resolving hints is slow)."""
    return typing.get_type_hints(tp), [f.name for f in dataclasses.fields(tp)]


#: Settings that no longer exist, with what to do instead.
REMOVED_SETTINGS = {
    "triton_on_eks.max_replicas": "Triton on EKS runs a fixed number of replicas (no "
    'autoscaler, README "Serve the ensembles on EKS"); set triton_on_eks.replicas',
    "triton_on_eks.max_gpu_nodes": "the GPU node group is sized by triton_on_eks.gpu_nodes "
    '(nothing scales it, README "Serve the ensembles on EKS")',
}


def _parse(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    """Convert JSON-like ``value`` into ``tp``, recording type problems under ``path``."""
    label = path or CONTEXT_KEY
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            problems.append(f"{label} = {value!r}: expected an object")
            return _INVALID
        hints, names = _fields(tp)
        for key in value:
            where = f"{path + '.' if path else ''}{key}"
            if isinstance(key, str) and where in REMOVED_SETTINGS:
                problems.append(f"{where}: removed: {REMOVED_SETTINGS[where]}")
            elif not isinstance(key, str) or key not in names:
                problems.append(f"{where}: unknown setting; known: {names}")
        # null means "not set": the field keeps its default. One rule for every source:
        # jsii drops null members of cdk.json's context before the app sees them, so `-c` and
        # the CLI's own reading of cdk.json must treat them the same way.
        kwargs = {
            name: _parse(hints[name], value[name], f"{path + '.' if path else ''}{name}", problems)
            for name in names
            if value.get(name) is not None
        }
        return tp(**{k: v for k, v in kwargs.items() if v is not _INVALID})
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        if not isinstance(value, (list, tuple)):
            problems.append(f"{label} = {value!r}: expected {_describe(tp)}")
            return _INVALID
        items = tuple(_parse(item, v, f"{label}[{i}]", problems) for i, v in enumerate(value))
        return _INVALID if any(i is _INVALID for i in items) else items
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _parse(inner, value, path, problems)
    if origin is dict:
        if not isinstance(value, Mapping):
            problems.append(f"{label} = {value!r}: expected an object of strings")
            return _INVALID
        bad = [k for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)]
        for key in bad:
            problems.append(f"{label}.{key} = {value[key]!r}: expected a string")
        # The well-typed entries are kept, so their value checks still report.
        return {k: v for k, v in value.items() if k not in bad}
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{label} = {value!r}: expected true or false")
            return _INVALID
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{label} = {value!r}: expected an integer")
            return _INVALID
        return value
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{label} = {value!r}: expected a string")
            return _INVALID
        return value
    raise TypeError(f"unsupported settings type {tp!r} at {label}")  # programming error


def _json_object_or_problem(text: str, where: str, problems: list[str]) -> Any:
    """``text`` parsed as JSON, or ``None`` with a problem naming ``where``."""
    import json

    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        problems.append(f"{where} = {text[:80]!r}: not valid JSON ({str(error)[:120]})")
        return None
    if value is not None and not isinstance(value, Mapping):
        problems.append(f"{where} = {text[:80]!r}: expected a JSON object")
        return None
    return value


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``overrides`` merged in: objects merge key by key, any other
    value replaces. How partial ``ml-platform`` objects combine with cdk.json's."""
    import copy

    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def settings_from_cdk_json(path: str = "cdk.json", *, check_az_context: bool = True) -> Settings:
    """Read the settings the way ``cdk synth`` would, from a ``cdk.json`` file's context.

    For tools that run outside the CDK app (manifest writers, the operator CLI). The
    ``cdk.context.json`` beside it, where ``mlp azs`` records lookups, overrides the same keys.
    ``check_az_context=False`` skips the check that the AZ names are pre-seeded in context
    (only synthesis needs them: the CLI's commands other than ``mlp azs`` do not).
    """
    from pathlib import Path

    cdk_json = Path(path)
    context = dict(_context_file(cdk_json, "context"))
    local = cdk_json.with_name("cdk.context.json")
    if local.exists():
        context.update(_context_file(local, None))
    return Settings.from_context(
        context.get(CONTEXT_KEY),
        known_azs=context if check_az_context else None,
        recorded_digests=context.get(IMAGE_DIGESTS_KEY),
    )


def _context_file(path: Any, member: str | None) -> Mapping[str, Any]:
    """The JSON object in ``path`` (or its ``member`` object); SettingsError naming the file
    when it is not UTF-8 JSON holding an object there."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError([f"{path}: cannot be read ({error.strerror or error})"]) from None
    except UnicodeDecodeError:
        raise SettingsError([f"{path}: not UTF-8 text"]) from None
    except (ValueError, RecursionError) as error:
        raise SettingsError([f"{path}: not valid JSON ({str(error)[:120]})"]) from None
    if not isinstance(data, dict):
        raise SettingsError([f"{path}: expected a JSON object, got {type(data).__name__}"])
    if member is None:
        return data
    inner = data.get(member) or {}
    if not isinstance(inner, dict):
        raise SettingsError([f"{path}: '{member}' must be a JSON object"])
    return inner
