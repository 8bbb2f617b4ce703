"""The AWS regions this platform knows, and the partition of each.

One pinned list, so synthesis (which must not import botocore: the core install has only
requirements-core.txt) can refuse a region name that does not exist instead of failing at
deploy time. The list is botocore's partition data (``botocore/data/endpoints.json``, the
``partitions[].regions`` objects) at the botocore version pinned in requirements.txt:
https://github.com/boto/botocore/blob/1.44.8/botocore/data/endpoints.json
``tests/unit/test_regions.py`` holds it equal to the installed botocore's data, so a
botocore upgrade that adds a region fails the suite until the region is added here.
"""

from __future__ import annotations

__all__ = [
    "DNS_SUFFIXES",
    "REGIONS",
    "SOURCE_BOTOCORE_VERSION",
    "ecr_registry",
    "parse_ecr_registry",
    "partition_of",
    "region_problem",
]

import re

from ml_platform.limits import shown

#: botocore release the list was taken from (the pin in requirements.txt).
SOURCE_BOTOCORE_VERSION = "1.44.8"

#: Region name -> partition, every region of every partition in botocore's endpoints.json.
REGIONS: dict[str, str] = {
    # AWS Standard
    "af-south-1": "aws",
    "ap-east-1": "aws",
    "ap-east-2": "aws",
    "ap-northeast-1": "aws",
    "ap-northeast-2": "aws",
    "ap-northeast-3": "aws",
    "ap-south-1": "aws",
    "ap-south-2": "aws",
    "ap-southeast-1": "aws",
    "ap-southeast-2": "aws",
    "ap-southeast-3": "aws",
    "ap-southeast-4": "aws",
    "ap-southeast-5": "aws",
    "ap-southeast-6": "aws",
    "ap-southeast-7": "aws",
    "ca-central-1": "aws",
    "ca-west-1": "aws",
    "eu-central-1": "aws",
    "eu-central-2": "aws",
    "eu-north-1": "aws",
    "eu-south-1": "aws",
    "eu-south-2": "aws",
    "eu-west-1": "aws",
    "eu-west-2": "aws",
    "eu-west-3": "aws",
    "il-central-1": "aws",
    "me-central-1": "aws",
    "me-south-1": "aws",
    "mx-central-1": "aws",
    "sa-east-1": "aws",
    "us-east-1": "aws",
    "us-east-2": "aws",
    "us-west-1": "aws",
    "us-west-2": "aws",
    # AWS China
    "cn-north-1": "aws-cn",
    "cn-northwest-1": "aws-cn",
    # AWS GovCloud (US)
    "us-gov-east-1": "aws-us-gov",
    "us-gov-west-1": "aws-us-gov",
    # AWS ISO (US)
    "us-iso-east-1": "aws-iso",
    "us-iso-west-1": "aws-iso",
    # AWS ISOB (US)
    "us-isob-east-1": "aws-iso-b",
    "us-isob-west-1": "aws-iso-b",
    # AWS ISOE (Europe)
    "eu-isoe-west-1": "aws-iso-e",
    # AWS ISOF
    "us-isof-east-1": "aws-iso-f",
    "us-isof-south-1": "aws-iso-f",
    # AWS EUSC
    "eusc-de-east-1": "aws-eusc",
}


#: Partition -> its domain (CloudFormation's ``AWS::URLSuffix``), botocore's ``dnsSuffix``.
DNS_SUFFIXES: dict[str, str] = {
    "aws": "amazonaws.com",
    "aws-cn": "amazonaws.com.cn",
    "aws-us-gov": "amazonaws.com",
    "aws-iso": "c2s.ic.gov",
    "aws-iso-b": "sc2s.sgov.gov",
    "aws-iso-e": "cloud.adc-e.uk",
    "aws-iso-f": "csp.hci.ic.gov",
    "aws-eusc": "amazonaws.eu",
}


def partition_of(region: str) -> str:
    """The partition of a known region; for a name not (yet) listed, the partition its prefix
    belongs to (``aws`` when none matches)."""
    if region in REGIONS:
        return REGIONS[region]
    for prefix, partition in (
        ("cn-", "aws-cn"),
        ("us-gov-", "aws-us-gov"),
        ("us-isob-", "aws-iso-b"),
        ("us-isof-", "aws-iso-f"),
        ("us-iso-", "aws-iso"),
        ("eu-isoe-", "aws-iso-e"),
        ("eusc-", "aws-eusc"),
    ):
        if region.startswith(prefix):
            return partition
    return "aws"


def ecr_registry(account: str, region: str) -> str:
    """Host of the ECR registry of ``account`` in ``region``: ``dkr.ecr.<region>.`` and the
    partition's domain, e.g. ``123456789012.dkr.ecr.us-west-2.amazonaws.com`` or
    ``...dkr.ecr.cn-north-1.amazonaws.com.cn``
    (https://docs.aws.amazon.com/general/latest/gr/ecr.html,
    https://docs.amazonaws.cn/en_us/aws/latest/userguide/endpoints-Beijing.html)."""
    return f"{account}.dkr.ecr.{region}.{DNS_SUFFIXES[partition_of(region)]}"


_ECR_HOST = re.compile(
    r"([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.("
    + "|".join(re.escape(domain) for domain in sorted(set(DNS_SUFFIXES.values()), key=len)[::-1])
    + ")"
)


def parse_ecr_registry(host: str) -> tuple[str, str] | None:
    """``(account, region)`` of an ECR registry host that :func:`ecr_registry` could have
    written, or ``None`` for any other registry."""
    match = _ECR_HOST.fullmatch(host)
    return (match[1], match[2]) if match else None


def region_problem(key: str, region: str) -> str | None:
    """Why ``region`` (setting or flag ``key``) is not a known AWS region, or ``None``."""
    if region in REGIONS:
        return None
    close = sorted(r for r in REGIONS if r.split("-")[0] == region.split("-")[0])
    hint = f" (in that family: {', '.join(close)})" if close else ""
    return (
        f"{key} = {shown(region)}: not an AWS region{hint}; expected one of the "
        f"{len(REGIONS)} regions of botocore {SOURCE_BOTOCORE_VERSION}'s partitions, such as "
        "'us-west-2'"
    )
