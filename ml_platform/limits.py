"""The domain rules and defaults: ranges, choices, value formats and reserved names that the
settings (:mod:`ml_platform.config`), the constructs and the CLI check, each written once, here.

No CDK imports (the settings, the CLI and the JSON Schema generator load this module without
aws-cdk-lib, and without pydantic). Each rule is data (numbers, tuples, regexes, with the texts
messages use) or a predicate: :mod:`ml_platform.config` hands them to pydantic's constraints,
the constructs check their props with them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

#: Longest value an error message repeats whole (``repr`` characters).
MAX_SHOWN = 200


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` for an error message, shortened in the middle when longer than ``limit``
    and followed by the value's length: every message that echoes a value uses this, so a
    5,000-character value stays one readable line."""
    text = repr(value)
    if len(text) <= limit:
        return text
    keep = max(limit - 5, 10) // 2
    size = len(value) if isinstance(value, (str, bytes, list, tuple, dict)) else len(text)
    unit = "characters" if isinstance(value, str) else "bytes" if isinstance(value, bytes) else ""
    unit = unit or ("items" if isinstance(value, (list, tuple, dict)) else "characters")
    return f"{text[:keep]}[...]{text[-keep:]} ({size} {unit})"


@dataclass(frozen=True)
class IntRange:
    """An inclusive range of integers; ``note`` is what messages add after it."""

    low: int
    high: int
    note: str = ""

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and self.low <= value <= self.high

    @property
    def text(self) -> str:
        """``'1 to 1000'``: how messages state the range."""
        return f"{self.low} to {self.high}"


@dataclass(frozen=True)
class TextFormat:
    """Text that matches ``regex`` in full (``$`` would accept a trailing newline), spelled in
    ASCII classes (``\\d`` and ``\\w`` match other scripts' digits and letters); ``expected``
    is how messages describe it."""

    regex: re.Pattern[str]
    expected: str
    max_length: int | None = None

    def matches(self, value: str) -> bool:
        too_long = self.max_length is not None and len(value) > self.max_length
        return not too_long and self.regex.fullmatch(value) is not None


def node_counts_ok(min_nodes: int, nodes: int, max_nodes: int, most: int) -> bool:
    """A node group's sizes: ``0 <= min <= desired <= max <= most`` and ``max >= 1``."""
    return 0 <= min_nodes <= nodes <= max_nodes <= most and max_nodes >= 1


# -- CloudWatch Logs ------------------------------------------------------------------------
# The retention periods CloudWatch Logs accepts, in days (ONE_DAY ... TEN_YEARS):
# https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html
# fmt: off
LOG_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
    3288, 3653,
)
# fmt: on

# -- FSx for Lustre, PERSISTENT_2 -----------------------------------------------------------
# https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html (StorageCapacity)
# https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html (PerUnitStorageThroughput)
FSX_THROUGHPUTS = (125, 250, 500, 1000)  # MB/s per TiB
FSX_SMALLEST_GIB = 1200
FSX_STEP_GIB = 2400
FSX_MAX_GIB = 2_400_000


def fsx_storage_ok(gib: int) -> bool:
    """PERSISTENT_2 capacity: 1200 GiB or a multiple of 2400 GiB, up to 2400000."""
    return gib == FSX_SMALLEST_GIB or (0 < gib <= FSX_MAX_GIB and gib % FSX_STEP_GIB == 0)


FSX_STORAGE_TEXT = f"PERSISTENT_2 Lustre takes 1200 or a multiple of 2400 GiB (up to {FSX_MAX_GIB})"


# -- ECR ------------------------------------------------------------------------------------
ECR_MAX_IMAGES = IntRange(1, 1000)  # images a lifecycle rule keeps

# -- S3 model prefix --------------------------------------------------------------------------
# S3 object keys are at most 1024 bytes; the prefix keeps room for the archive names:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html
MODEL_PREFIX_MAX = 512
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
MODEL_PREFIX_TEXT = (
    "expected a relative S3 key prefix ending in '/' of segments made of letters, digits and "
    f"'._-' (none empty, '.' or '..'), at most {MODEL_PREFIX_MAX} characters, e.g. 'models/'"
)


def model_prefix_ok(prefix: str) -> bool:
    """A relative S3 key prefix ending in '/', its segments of letters, digits and '._-' (none
    empty, '.' or '..'), at most :data:`MODEL_PREFIX_MAX` characters."""
    segments = prefix.split("/")
    return (
        prefix.endswith("/")
        and len(prefix) <= MODEL_PREFIX_MAX
        and all(s not in ("", ".", "..") and _PREFIX_SEGMENT.fullmatch(s) for s in segments[:-1])
    )


# -- EKS ------------------------------------------------------------------------------------
ENDPOINT_ACCESS = ("public_and_private", "private")
# The VPC CNI's NetworkPolicy enforcing modes:
# https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
NETWORK_POLICY_MODES = ("strict", "standard")
SYSTEM_NODES = IntRange(1, 10)
# Nodes of the training-helper group (the system-role nodes in the Trainium/FSx AZ). At least 1:
# the helper pods are required to run in that AZ, and the system nodes may have none there.
HELPER_NODES = IntRange(
    1,
    3,
    " (the dataset Job and TensorBoard must run in network.trainium_az, where FSx is, and the "
    "system nodes may have no node there, so 0 would leave them Pending)",
)
# EKS: "You can't add IPv6 CIDR blocks to IPv4 clusters"; at most 40 public access CIDRs.
# https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html
# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html
MAX_PUBLIC_ACCESS_CIDRS = 40
#: IPv4 ranges that never appear as a source address on the internet, so never on the
#: public endpoint: RFC 1918 private, RFC 6598 shared (carrier-grade NAT), RFC 1122 loopback
#: and "this network", RFC 3927 link-local (IANA IPv4 Special-Purpose Address Registry).
NOT_PUBLIC_IPV4 = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
    )
)


def public_access_findings(
    endpoint_access: str, cidrs: list[str], from_anywhere: bool
) -> list[tuple[dict[str, Any], str]]:
    """Problems of the CIDRs allowed to an EKS cluster's public endpoint: 1 to 40 distinct IPv4
    blocks with ``public_and_private``, none with ``private``, no ``/0`` unless
    ``from_anywhere``. Each is (the fields it names, by their bare names, with their values;
    what is allowed): :class:`~ml_platform.props.cluster.TrainingEksClusterPropsBase` words
    them as ``Problem`` objects, ``mlp azs`` names its flag instead.
    https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html"""
    key = "public_access_cidrs"
    out: list[tuple[dict[str, Any], str]] = []
    if endpoint_access == "public_and_private" and not cidrs:
        out.append(
            (
                {key: [], "endpoint_access": endpoint_access},
                "a public endpoint needs at least one CIDR (or make the endpoint 'private')",
            )
        )
    if endpoint_access == "private" and cidrs:
        out.append(
            (
                {key: cidrs, "endpoint_access": endpoint_access},
                "a private endpoint takes none (make it 'public_and_private' to use them)",
            )
        )
    if len(cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        out.append(
            ({key: cidrs}, f"{len(cidrs)} blocks, EKS takes at most {MAX_PUBLIC_ACCESS_CIDRS}")
        )
    if len(set(cidrs)) != len(cidrs):
        out.append(({key: cidrs}, "blocks must be distinct"))
    for i, cidr in enumerate(cidrs):
        item = {f"{key}[{i}]": cidr}
        try:
            net = ipaddress.ip_network(cidr)  # strict: host bits set are an error
        except ValueError:
            out.append((item, "not a CIDR block"))
            continue
        if "/" not in cidr:
            out.append(
                (
                    item,
                    "no prefix length; write the block in full, e.g. "
                    f"'{net.network_address}/32' for one address",
                )
            )
            continue
        if net.version == 4 and any(net.subnet_of(r) for r in NOT_PUBLIC_IPV4):
            out.append(
                (
                    item,
                    "a private or reserved range; the public endpoint sees only public source "
                    "addresses, so it would let no one in. Name your network's public address "
                    "(`mlp azs --public-access-mine`); reach the API from the VPC through the "
                    "private endpoint",
                )
            )
            continue
        if net.version != 4:
            out.append((item, "IPv4 only (EKS takes no IPv6 blocks for an IPv4 cluster)"))
        elif net.prefixlen == 0 and not from_anywhere:
            out.append(
                (
                    {**item, "public_access_from_anywhere": from_anywhere},
                    "opens the Kubernetes API to the whole internet; name your networks (`mlp "
                    "azs --public-access-mine` writes your address), keep the endpoint "
                    "'private', or set public_access_from_anywhere to true to state that choice",
                )
            )
    return out


# -- Node groups ----------------------------------------------------------------------------
TRAINIUM_MAX_NODES = 64
GPU_MAX_NODES = 20
ROOT_VOLUME_GIB = IntRange(100, 16384)  # gp3: up to 16 TiB
# EC2 capacity reservation ids (On-Demand Capacity Reservations and Capacity Blocks), fullmatch:
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
# EKS node group ReleaseVersion of an AL2023 AMI: `<kubernetes>-<YYYYMMDD>`, e.g.
# 1.35.6-20260625 (amazon-eks-ami CHANGELOG.md "Release version"), or `latest` (no pin).
AMI_RELEASE_VERSION = TextFormat(
    re.compile(r"latest|1\.[0-9]{1,2}\.[0-9]{1,3}-20[0-9]{6}"),
    "an EKS AMI release version such as '1.35.6-20260625', or 'latest'",
)

CAPACITY_RESERVATION_ID = TextFormat(
    re.compile(r"cr-[0-9a-f]{8}([0-9a-f]{9})?"),
    "a capacity reservation id such as 'cr-0123456789abcdef0'",
)

# -- SageMaker ------------------------------------------------------------------------------
# CreateEndpoint API reference, EndpointName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpoint.html
ENDPOINT_NAME = TextFormat(
    re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"),
    "letters, digits and '-', at most 63",
    max_length=63,  # the pattern alone lets repeated '-' run past 63 characters
)
MODEL_LOAD_GPU_LIMIT_PERCENT = IntRange(1, 100, " (100, the default: no cap)")
ENDPOINT_INSTANCES = IntRange(1, 100)  # an endpoint variant's instance counts


def endpoint_counts_ok(min_instances: int, initial: int, max_instances: int) -> bool:
    """An endpoint's instance counts: ``1 <= min <= initial <= max <= 100``."""
    most = ENDPOINT_INSTANCES.high
    return 1 <= min_instances <= initial <= max_instances <= most


# -- Defaults the settings and the constructs share -----------------------------------------
DEFAULT_VPC_CIDR = "10.0.0.0/16"
DEFAULT_NAT_GATEWAYS = 1
DEFAULT_FSX_STORAGE_GIB = FSX_SMALLEST_GIB  # the tutorial's size
# 250, not PERSISTENT_2's lowest tier 125: 1200 GiB at 250 MB/s/TiB gives 293 MB/s, the
# project's own figure for the default 2 Trainium nodes (2 x 117 MB/s,
# ml_platform.stacks.storage.LUSTRE_MBPS_PER_NODE); 125 gave 146 MB/s. PerUnitStorageThroughput
# is not create-only in AWS::FSx::FileSystem's provider schema (cfn-lint's copy:
# createOnlyProperties are KmsKeyId, SecurityGroupIds, FileSystemType, SubnetIds, BackupId),
# so a deployed file system is updated in place (FSx UpdateFileSystem), not replaced:
# tests/unit/stacks/test_network_storage.py reads the schema.
DEFAULT_FSX_THROUGHPUT_PER_TIB = 250
DEFAULT_ECR_MAX_IMAGES = 30
DEFAULT_MODEL_PREFIX = "models/"
DEFAULT_KUBERNETES_VERSION = "1.35"
DEFAULT_ENDPOINT_ACCESS = "private"
DEFAULT_NETWORK_POLICY_MODE = "strict"
DEFAULT_SYSTEM_INSTANCE_TYPE = "m6i.large"
DEFAULT_SYSTEM_NODES = 2
DEFAULT_HELPER_NODES = 1
DEFAULT_SUPPORT_TYPE = "EXTENDED"  # EKS's own default upgrade policy
DEFAULT_TRAINIUM_INSTANCE_TYPE = "trn1.32xlarge"
DEFAULT_TRAINIUM_NODES = 2  # the tutorial's 2 x 32 NeuronCores
DEFAULT_ROOT_VOLUME_GIB = 500
DEFAULT_GPU_INSTANCE_TYPE = "g5.2xlarge"
DEFAULT_GPU_NODES = 1
DEFAULT_REPLICAS = 1
DEFAULT_ENDPOINT_INSTANCE_TYPE = "ml.g4dn.4xlarge"  # T4, as in the source design
DEFAULT_INITIAL_INSTANCES = 1
DEFAULT_MIN_INSTANCES = 1
DEFAULT_MAX_INSTANCES = 2
DEFAULT_INVOCATIONS_PER_INSTANCE = 1000
DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT = 100  # no cap: a full GPU answers 507 and SageMaker evicts


# -- Value formats and reserved names -------------------------------------------------------
ACCOUNT_ID = TextFormat(re.compile(r"[0-9]{12}"), "a 12-digit AWS account id")
STACK_PREFIX = TextFormat(
    re.compile(r"[A-Za-z][A-Za-z0-9]{0,40}"),
    "letters and digits, starting with a letter, at most 41 characters",
)
RESOURCE_NAME = TextFormat(
    re.compile(r"[a-z][a-z0-9-]{0,39}"), "lower-case letters, digits and '-'"
)
ROLE_ARN = re.compile(r"arn:(aws[a-z-]*):iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
PRINCIPAL_ARN = TextFormat(
    re.compile(r"arn:(aws[a-z-]*):iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}"),
    "an IAM role or user ARN (arn:aws:iam::<account>:role/<name> or ...:user/<name>)",
)
K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # RFC 1123 label, at most 63
# The pattern aws-cdk-lib's ec2.InstanceType parses (aws-ec2/lib/instance-types.ts); a name
# it cannot parse fails deep in jsii. Group 3 holds the capability letters ('g': Graviton).
INSTANCE_TYPE = re.compile(r"([a-z]+)([0-9]{1,2})([a-z-]*)\.([a-z0-9-]+)")
IMAGE_REPOSITORY = TextFormat(
    re.compile(r"[a-z0-9]+([._/-][a-z0-9]+)*"),
    "an ECR repository name (lower-case letters, digits, '._/-')",
    max_length=256,
)
IMAGE_TAG = TextFormat(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"), "a Docker image tag")
SHA256 = TextFormat(re.compile(r"[0-9a-f]{64}"), "a SHA-256 of 64 lower-case hex digits")
SNS_TOPIC_ARN = TextFormat(
    re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}"),
    "an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)",
)
# An SNS email subscription's endpoint: one address, no display name (Subscribe API, Endpoint
# for the email protocol). Deliberately plain: SNS itself sends the confirmation mail.
EMAIL_ADDRESS = TextFormat(
    re.compile(r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
    "an email address such as 'ops@example.com'",
    max_length=254,
)
ADDON_VERSION = TextFormat(
    re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+"),
    "an EKS add-on version such as 'v1.9.0-eksbuild.1'",
)
PLACEMENT_GROUP = re.compile(r"[ -~]{1,255}")  # EC2 CreatePlacementGroup: up to 255 ASCII
INVOCATIONS_PER_INSTANCE = IntRange(
    1, 100_000
)  # an endpoint's scaling target, per instance a minute
TRITON_LOG_VERBOSE_TEXT = "expected a level >= 0 (0 is off)"  # Triton's --log-verbose

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


# Address blocks a VPC cannot take: AWS rejects or reserves them, or they cannot route.
# https://docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html
_NOT_FOR_VPC = {
    "0.0.0.0/8": "'this network' (unspecified)",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved",
}


def vpc_cidr_problem(cidr: str) -> str | None:
    """What is wrong with a VPC CIDR (None: nothing): an IPv4 block /16 to /20, not in a
    special-purpose range."""
    try:
        net = ipaddress.ip_network(cidr)
    except ValueError:
        return "not a CIDR block (host bits must be zero)"
    if net.version != 4 or not 16 <= net.prefixlen <= 20:
        return "expected an IPv4 block from /16 to /20"
    for block, what in _NOT_FOR_VPC.items():
        if net.overlaps(ipaddress.ip_network(block)):
            return f"overlaps {block}, {what}; use a private range such as 10.0.0.0/16"
    return None
