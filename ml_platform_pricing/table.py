"""The price table shipped with the package (``prices.json``) and its loader.

Every price carries the address it was taken from and the day it was taken. A price that is
not in the table is *missing*: the estimator reports it as such and never as zero.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

HOURS_PER_MONTH = 730  # AWS pricing pages and calculators bill a month as 730 hours
HOURS_PER_YEAR = 8760

# Services (the ``service`` field) and what their ``key`` names.
EC2 = "ec2"  # key: instance type; Linux, shared tenancy, on-demand, per hour
SAGEMAKER_HOSTING = "sagemaker-hosting"  # key: ml.* instance type; real-time inference per hour
EKS_CLUSTER = "eks-cluster"  # key: "standard" or "extended" (support of the version) per hour
NAT_GATEWAY = "nat-gateway"  # key: "hour"
PUBLIC_IPV4 = "public-ipv4"  # key: "hour" per public IPv4 address
VPC_INTERFACE_ENDPOINT = "vpc-interface-endpoint"  # key: "az-hour" per endpoint per AZ
FSX_LUSTRE_PERSISTENT2 = "fsx-lustre-persistent2"  # key: MB/s/TiB tier; per GB-month
# gp3 volumes: key "storage" per GB-month, "iops" per IOPS-month and "throughput" per
# MiB/s-month, the last two above gp3's free baseline (GP3_BASELINE_*).
EBS_GP3 = "ebs-gp3"
KMS_KEY = "kms-key"  # key: "month" per customer managed key
CLOUDWATCH_ALARM = "cloudwatch-alarm"  # key: "standard" / "high-resolution" per alarm metric-month
CLOUDWATCH_METRIC = "cloudwatch-metric"  # key: "custom" per metric-month (first tier)
CLOUDWATCH_DASHBOARD = "cloudwatch-dashboard"  # key: "month" per dashboard
SECRETS_MANAGER = "secretsmanager-secret"  # key: "month" per secret
SERVICES = (
    EC2,
    SAGEMAKER_HOSTING,
    EKS_CLUSTER,
    NAT_GATEWAY,
    PUBLIC_IPV4,
    VPC_INTERFACE_ENDPOINT,
    FSX_LUSTRE_PERSISTENT2,
    EBS_GP3,
    KMS_KEY,
    CLOUDWATCH_ALARM,
    CLOUDWATCH_METRIC,
    CLOUDWATCH_DASHBOARD,
    SECRETS_MANAGER,
)
# gp3 includes 3,000 IOPS and 125 MiB/s in its storage price; more bills on top
# (https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html#gp3-ebs-volume-type).
GP3_BASELINE_IOPS = 3000
GP3_BASELINE_THROUGHPUT = 125


@dataclass(frozen=True)
class Price:
    """One on-demand price in USD per ``unit`` ("hour" or "GB-month")."""

    region: str
    service: str
    key: str
    usd: float
    unit: str
    source: str
    taken: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PriceTable:
    """Prices by (region, service, key)."""

    prices: dict[tuple[str, str, str], Price] = field(default_factory=dict)
    about: str = ""
    # Why a (region, service) has no price here: the search that found no source.
    gaps: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PriceTable:
        if not isinstance(data, dict) or not isinstance(data.get("prices", []), list):
            raise ValueError("expected an object with a list 'prices' (the shipped format)")
        table = cls(about=data.get("about", ""))
        for gap in data.get("gaps", []):
            table.gaps[(gap["region"], gap["service"])] = gap["why"]
        for i, row in enumerate(data.get("prices", [])):
            try:
                price = Price(**row)
            except TypeError as error:
                fields = sorted(Price.__dataclass_fields__)
                raise ValueError(
                    f"prices[{i}]: {error.args[0].split('() ', 1)[-1]} (a row has "
                    f"the fields {fields})"
                ) from None
            if not isinstance(price.usd, int | float) or isinstance(price.usd, bool):
                raise ValueError(f"prices[{i}].usd = {price.usd!r}: expected a number")
            if price.usd <= 0:
                raise ValueError(
                    f"price {price.region}/{price.service}/{price.key} = {price.usd}: "
                    "a price must be positive (leave a missing price out)"
                )
            table.add(price)
        return table

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The shipped table, or the one at ``path``."""
        if path is None:
            text = resources.files(__package__).joinpath("prices.json").read_text()
        else:
            text = Path(path).read_text()
        return cls.from_dict(json.loads(text))

    def add(self, price: Price) -> None:
        self.prices[(price.region, price.service, price.key)] = price

    def get(self, region: str, service: str, key: str) -> Price | None:
        return self.prices.get((region, service, key))

    def missing_reason(self, region: str, service: str, key: str) -> str:
        """Why ``get`` finds nothing: the recorded gap, or a plain 'no price'."""
        why = self.gaps.get((region, service))
        text = f"no {service} price for {key} in {region} in the price table"
        return f"{text}: {why}" if why else text

    def overlay(self, other: PriceTable) -> PriceTable:
        """This table with every price of ``other`` replacing or adding to it."""
        merged = PriceTable(
            prices=dict(self.prices), about=other.about or self.about, gaps=dict(self.gaps)
        )
        for price in other.prices.values():
            merged.add(price)
            merged.gaps.pop((price.region, price.service), None)
        return merged

    def regions(self) -> list[str]:
        return sorted({r for r, _, _ in self.prices})

    def to_dict(self) -> dict[str, Any]:
        rows = sorted(self.prices.values(), key=lambda p: (p.service, p.region, p.key))
        out: dict[str, Any] = {
            "currency": "USD",
            "hours_per_month": HOURS_PER_MONTH,
            "about": self.about,
        }
        if self.gaps:
            out["gaps"] = [
                {"region": r, "service": s, "why": why} for (r, s), why in sorted(self.gaps.items())
            ]
        out["prices"] = [p.to_dict() for p in rows]
        return out

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")


def shipped_table_path() -> Path:
    """Where the shipped table lives in this installation (read-only: ``--refresh`` writes
    :func:`user_table_path`)."""
    return Path(str(resources.files(__package__).joinpath("prices.json")))


def user_table_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``mlp cost --refresh`` writes its table: ``$XDG_DATA_HOME/ml-platform/prices.json``
    (``~/.local/share`` when unset), outside the installed package."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(
        Path(env.get("HOME", "~")).expanduser() / ".local" / "share"
    )
    return Path(base) / "ml-platform" / "prices.json"


_AWS_OWNED_HOSTS = ("aws.amazon.com", "docs.aws.amazon.com", "repost.aws")
_AWS_GITHUB_ORGS = ("aws", "awslabs", "aws-samples", "awsdocs")


def aws_owned(url: str) -> bool:
    """An AWS web page, a file in one of AWS's own GitHub organisations, or the Price List API.

    A price from any other source is third-party: the report marks it so.
    """
    parsed = urlparse(url)
    host = (parsed.hostname or "").split(" ")[0]  # the API source carries a label after it
    if host == "github.com":
        parts = parsed.path.split("/")
        return len(parts) > 1 and parts[1] in _AWS_GITHUB_ORGS
    if host.startswith("api.pricing.") and host.endswith(".amazonaws.com"):
        return True
    return any(host == h or host.endswith("." + h) for h in _AWS_OWNED_HOSTS)
