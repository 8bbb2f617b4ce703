"""Rebuild the price table from the AWS Price List API (boto3 ``pricing``, ``get_products``).

Each price comes from one product's on-demand term; a product the API does not return for a
region leaves that price out of the rebuilt table, so it reports as missing (never zero).

Attribute names and usage types follow the Price List API's product attributes
(https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ml_platform.instances import EKS_GPU_INSTANCES, SAGEMAKER_MME_GPU_INSTANCES, TRAINIUM_INSTANCES
from ml_platform.pricing.table import (
    EC2,
    EKS_CLUSTER,
    FSX_LUSTRE_PERSISTENT2,
    NAT_GATEWAY,
    PUBLIC_IPV4,
    SAGEMAKER_HOSTING,
    VPC_INTERFACE_ENDPOINT,
    Price,
    PriceTable,
)

# The Price List API answers in these regions only; us-east-1 serves every region's prices.
PRICING_API_REGION = "us-east-1"
# Regions that offer Trainium and the platform supports (issue #14); more may be asked for.
DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
# System node group types a user is likely to pick (the setting takes any EC2 type; the
# types in the synthesized templates are added to this list by ``mlp cost --refresh``).
SYSTEM_INSTANCES = ("m5.large", "m5.xlarge", "m5.2xlarge", "m6i.large", "m6i.xlarge",
                    "m6i.2xlarge", "m7i.large", "m7i.xlarge", "m7i.2xlarge")
FSX_TIERS = (125, 250, 500, 1000)  # PERSISTENT_2 MB/s/TiB
API_SOURCE = "https://api.pricing.us-east-1.amazonaws.com (AWS Price List API, GetProducts)"


@dataclass(frozen=True)
class Query:
    """One price to fetch: the table row it fills, the API filters and a product test."""

    service: str
    key: str
    unit: str
    service_code: str
    filters: dict[str, str]
    accept: Callable[[dict[str, Any]], bool] = lambda attributes: True


def _ec2(instance_type: str) -> Query:
    return Query(EC2, instance_type, "hour", "AmazonEC2", {
        "instanceType": instance_type, "operatingSystem": "Linux", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
    })


def _sagemaker(instance_type: str) -> Query:
    return Query(SAGEMAKER_HOSTING, instance_type, "hour", "AmazonSageMaker",
                 {"instanceName": instance_type},
                 lambda a: "Host:" in a.get("usagetype", ""))


def queries(instance_types: Iterable[str] = ()) -> list[Query]:
    """Every price the platform's settings allow, plus ``instance_types`` seen in templates."""
    ec2 = set(TRAINIUM_INSTANCES) | set(EKS_GPU_INSTANCES) | set(SYSTEM_INSTANCES)
    ml = set(SAGEMAKER_MME_GPU_INSTANCES)
    for name in instance_types:
        (ml if name.startswith("ml.") else ec2).add(name)
    out = [_ec2(x) for x in sorted(ec2)] + [_sagemaker(x) for x in sorted(ml)]
    out.append(Query(EKS_CLUSTER, "standard", "hour", "AmazonEKS", {},
                     lambda a: a.get("usagetype", "").endswith("AmazonEKS-Hours:perCluster")))
    out.append(Query(NAT_GATEWAY, "hour", "hour", "AmazonEC2", {"productFamily": "NAT Gateway"},
                     lambda a: a.get("usagetype", "").endswith("NatGateway-Hours")))
    out.append(Query(PUBLIC_IPV4, "hour", "hour", "AmazonVPC", {},
                     lambda a: a.get("usagetype", "").endswith("PublicIPv4:InUseAddress")))
    out.append(Query(VPC_INTERFACE_ENDPOINT, "az-hour", "hour", "AmazonVPC",
                     {"productFamily": "VpcEndpoint"},
                     lambda a: a.get("usagetype", "").endswith("VpcEndpoint-Hours")))
    for tier in FSX_TIERS:
        out.append(Query(
            FSX_LUSTRE_PERSISTENT2, str(tier), "GB-month", "AmazonFSx",
            {"fileSystemType": "Lustre", "throughputCapacity": str(tier)},
            lambda a: (a.get("storageType") == "SSD" and "persistent 2"
                       in a.get("deploymentOption", "").lower().replace("_", " ")),
        ))
    return out


def _on_demand_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
            if usd > 0:
                return usd
    return None


def fetch(client: Any, query: Query, region: str) -> tuple[float, str] | None:
    """(USD, SKU) of the first accepted product with a positive on-demand price, or None."""
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v}
               for k, v in {"regionCode": region, **query.filters}.items()]
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"ServiceCode": query.service_code, "Filters": filters,
                                  "FormatVersion": "aws_v1", "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = client.get_products(**kwargs)
        for raw in page.get("PriceList", []):
            product = json.loads(raw) if isinstance(raw, str) else raw
            attributes = product.get("product", {}).get("attributes", {})
            if not query.accept(attributes):
                continue
            usd = _on_demand_usd(product)
            if usd is not None:
                return usd, product.get("product", {}).get("sku", "")
        token = page.get("NextToken")
        if not token:
            return None


def rebuild(client: Any, regions: Iterable[str], instance_types: Iterable[str] = (),
            today: str | None = None, progress: Callable[[str], None] | None = None,
            only: list[Query] | None = None) -> tuple[PriceTable, list[str]]:
    """A new table from the API, and the ``region/service/key`` prices it could not find.

    ``only`` replaces the default queries (every price the settings allow).
    """
    taken = today or datetime.now(UTC).date().isoformat()
    table = PriceTable(about="Rebuilt from the AWS Price List API by `mlp cost --refresh`.")
    missing: list[str] = []
    for region in regions:
        for query in (only if only is not None else queries(instance_types)):
            found = fetch(client, query, region)
            label = f"{region}/{query.service}/{query.key}"
            if found is None:
                missing.append(label)
                continue
            usd, sku = found
            filters = ", ".join(f"{k}={v}" for k, v in query.filters.items())
            table.add(Price(region=region, service=query.service, key=query.key, usd=usd,
                            unit=query.unit, source=API_SOURCE, taken=taken,
                            note=f"{query.service_code} {filters} sku {sku}".strip()))
            if progress:
                progress(f"{label}: ${usd}")
    return table, missing
