"""The price table shipped with the package (``prices.json``) and its loader.

Every price carries the address it was taken from and the day it was taken. A price that is
not in the table is *missing*: the estimator reports it as such and never as zero.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

HOURS_PER_MONTH = 730  # AWS pricing pages and calculators bill a month as 730 hours
HOURS_PER_YEAR = 8760

# Services (the ``service`` field) and what their ``key`` names.
EC2 = "ec2"  # key: instance type; Linux, shared tenancy, on-demand, per hour
SAGEMAKER_HOSTING = "sagemaker-hosting"  # key: ml.* instance type; real-time inference per hour
EKS_CLUSTER = "eks-cluster"  # key: "standard" (standard-support control plane) per hour
NAT_GATEWAY = "nat-gateway"  # key: "hour"
PUBLIC_IPV4 = "public-ipv4"  # key: "hour" per public IPv4 address
VPC_INTERFACE_ENDPOINT = "vpc-interface-endpoint"  # key: "az-hour" per endpoint per AZ
FSX_LUSTRE_PERSISTENT2 = "fsx-lustre-persistent2"  # key: MB/s/TiB tier; per GB-month
SERVICES = (EC2, SAGEMAKER_HOSTING, EKS_CLUSTER, NAT_GATEWAY, PUBLIC_IPV4,
            VPC_INTERFACE_ENDPOINT, FSX_LUSTRE_PERSISTENT2)


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PriceTable:
        table = cls(about=data.get("about", ""))
        for row in data.get("prices", []):
            price = Price(**row)
            if price.usd <= 0:
                raise ValueError(f"price {price.region}/{price.service}/{price.key} = {price.usd}: "
                                 "a price must be positive (leave a missing price out)")
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

    def regions(self) -> list[str]:
        return sorted({r for r, _, _ in self.prices})

    def to_dict(self) -> dict[str, Any]:
        rows = sorted(self.prices.values(), key=lambda p: (p.service, p.region, p.key))
        return {"currency": "USD", "hours_per_month": HOURS_PER_MONTH, "about": self.about,
                "prices": [p.to_dict() for p in rows]}

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")


def shipped_table_path() -> Path:
    """Where the shipped table lives in this installation (``--refresh`` rewrites it)."""
    return Path(str(resources.files(__package__).joinpath("prices.json")))
