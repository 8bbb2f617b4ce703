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
from ml_platform_pricing.table import (
    CLOUDWATCH_ALARM,
    CLOUDWATCH_DASHBOARD,
    CLOUDWATCH_METRIC,
    EBS_GP3,
    EC2,
    EKS_CLUSTER,
    FSX_LUSTRE_PERSISTENT2,
    HOURS_PER_MONTH,
    KMS_KEY,
    NAT_GATEWAY,
    PUBLIC_IPV4,
    SAGEMAKER_HOSTING,
    SECRETS_MANAGER,
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
SYSTEM_INSTANCES = (
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "m6i.large",
    "m6i.xlarge",
    "m6i.2xlarge",
    "m7i.large",
    "m7i.xlarge",
    "m7i.2xlarge",
)
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
    # The API's price dimension unit -> factor to the table's unit (1 where they agree).
    convert: Callable[[str], float] = lambda unit: 1.0


def _usage(suffix: str) -> Callable[[dict[str, Any]], bool]:
    return lambda a: a.get("usagetype", "").endswith(suffix)


def _per_month(unit: str) -> float:
    """Hourly-billed monthly fees (dashboards) come per hour: x 730 for the table's month."""
    return HOURS_PER_MONTH if unit.lower().startswith("hr") or "hour" in unit.lower() else 1.0


def _per_mibps(unit: str) -> float:
    """gp3 throughput may come per GiBps-month: the table keeps MiB/s-month."""
    return 1 / 1024 if unit.lower().startswith("gibps") else 1.0


def _ec2(instance_type: str) -> Query:
    return Query(
        EC2,
        instance_type,
        "hour",
        "AmazonEC2",
        {
            "instanceType": instance_type,
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
            "licenseModel": "No License required",
        },
    )


def _sagemaker(instance_type: str) -> Query:
    return Query(
        SAGEMAKER_HOSTING,
        instance_type,
        "hour",
        "AmazonSageMaker",
        {"instanceName": instance_type},
        lambda a: "Host:" in a.get("usagetype", ""),
    )


def queries(instance_types: Iterable[str] = ()) -> list[Query]:
    """Every price the platform's settings allow, plus ``instance_types`` seen in templates."""
    ec2 = set(TRAINIUM_INSTANCES) | set(EKS_GPU_INSTANCES) | set(SYSTEM_INSTANCES)
    ml = set(SAGEMAKER_MME_GPU_INSTANCES)
    for name in instance_types:
        (ml if name.startswith("ml.") else ec2).add(name)
    return [
        *(_ec2(x) for x in sorted(ec2)),
        *(_sagemaker(x) for x in sorted(ml)),
        *_eks_and_ebs_queries(),
        *_monthly_fee_queries(),
        *_network_queries(),
        *_fsx_queries(),
    ]


def _eks_and_ebs_queries() -> list[Query]:
    """The EKS control plane (standard and extended support) and gp3 volumes."""
    out: list[Query] = []
    out.append(
        Query(
            EKS_CLUSTER, "standard", "hour", "AmazonEKS", {}, _usage("AmazonEKS-Hours:perCluster")
        )
    )
    out.append(
        Query(
            EKS_CLUSTER,
            "extended",
            "hour",
            "AmazonEKS",
            {},
            _usage("AmazonEKS-Hours:extendedSupport"),
        )
    )
    # EBS gp3 volumes: storage, and the IOPS and throughput above the free baseline.
    out.append(
        Query(
            EBS_GP3,
            "storage",
            "GB-month",
            "AmazonEC2",
            {"productFamily": "Storage", "volumeApiName": "gp3"},
        )
    )
    out.append(
        Query(
            EBS_GP3,
            "iops",
            "IOPS-month",
            "AmazonEC2",
            {"productFamily": "System Operation", "volumeApiName": "gp3"},
        )
    )
    out.append(
        Query(
            EBS_GP3,
            "throughput",
            "MiBps-month",
            "AmazonEC2",
            {"productFamily": "Provisioned Throughput", "volumeApiName": "gp3"},
            convert=_per_mibps,
        )
    )
    return out


def _monthly_fee_queries() -> list[Query]:
    """KMS keys, alarms, custom metrics, dashboards and secrets: fixed monthly fees."""
    out: list[Query] = []
    # Fixed monthly fees (the per-request parts bill by use).
    out.append(Query(KMS_KEY, "month", "month", "awskms", {}, _usage("KMS-Keys")))
    out.append(
        Query(
            CLOUDWATCH_ALARM,
            "standard",
            "month",
            "AmazonCloudWatch",
            {},
            _usage("CW:AlarmMonitorUsage"),
        )
    )
    out.append(
        Query(
            CLOUDWATCH_ALARM,
            "high-resolution",
            "month",
            "AmazonCloudWatch",
            {},
            _usage("CW:HighResAlarmMonitorUsage"),
        )
    )
    out.append(
        Query(
            CLOUDWATCH_METRIC,
            "custom",
            "month",
            "AmazonCloudWatch",
            {},
            _usage("CW:MetricMonitorUsage"),
        )
    )
    out.append(
        Query(
            CLOUDWATCH_DASHBOARD,
            "month",
            "month",
            "AmazonCloudWatch",
            {},
            _usage("DashboardsUsageHour"),
            convert=_per_month,
        )
    )
    out.append(
        Query(
            SECRETS_MANAGER,
            "month",
            "month",
            "AWSSecretsManager",
            {},
            _usage("AWSSecretsManager-Secrets"),
        )
    )
    return out


def _network_queries() -> list[Query]:
    """NAT gateways, public IPv4 addresses and interface endpoints, by the hour."""
    out: list[Query] = []
    out.append(
        Query(
            NAT_GATEWAY,
            "hour",
            "hour",
            "AmazonEC2",
            {"productFamily": "NAT Gateway"},
            _usage("NatGateway-Hours"),
        )
    )
    out.append(
        Query(PUBLIC_IPV4, "hour", "hour", "AmazonVPC", {}, _usage("PublicIPv4:InUseAddress"))
    )
    out.append(
        Query(
            VPC_INTERFACE_ENDPOINT,
            "az-hour",
            "hour",
            "AmazonVPC",
            {"productFamily": "VpcEndpoint"},
            _usage("VpcEndpoint-Hours"),
        )
    )
    return out


def _fsx_queries() -> list[Query]:
    """FSx for Lustre Persistent-2 SSD storage at each throughput tier."""
    out: list[Query] = []
    for tier in FSX_TIERS:
        out.append(
            Query(
                FSX_LUSTRE_PERSISTENT2,
                str(tier),
                "GB-month",
                "AmazonFSx",
                {"fileSystemType": "Lustre", "throughputCapacity": str(tier)},
                lambda a: (
                    a.get("storageType") == "SSD"
                    and "persistent 2" in a.get("deploymentOption", "").lower().replace("_", " ")
                ),
            )
        )
    return out


def _on_demand_usd(product: dict[str, Any]) -> tuple[float, str] | None:
    """(USD, unit) of the product's on-demand price: the dearest positive dimension, which is
    the first tier of a tiered price (custom metrics) and the only one elsewhere."""
    found: tuple[float, str] | None = None
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
            if usd > 0 and (found is None or usd > found[0]):
                found = (usd, str(dimension.get("unit", "")))
    return found


def fetch(client: Any, query: Query, region: str) -> tuple[float, str] | None:
    """(USD, SKU) of the first accepted product with a positive on-demand price, or None."""
    filters = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v}
        for k, v in {"regionCode": region, **query.filters}.items()
    ]
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "ServiceCode": query.service_code,
            "Filters": filters,
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        if token:
            kwargs["NextToken"] = token
        page = client.get_products(**kwargs)
        for raw in page.get("PriceList", []):
            product = json.loads(raw) if isinstance(raw, str) else raw
            attributes = product.get("product", {}).get("attributes", {})
            if not query.accept(attributes):
                continue
            price = _on_demand_usd(product)
            if price is not None:
                usd, unit = price
                return usd * query.convert(unit), product.get("product", {}).get("sku", "")
        token = page.get("NextToken")
        if not token:
            return None


def rebuild(
    client: Any,
    regions: Iterable[str],
    instance_types: Iterable[str] = (),
    today: str | None = None,
    progress: Callable[[str], None] | None = None,
    only: list[Query] | None = None,
) -> tuple[PriceTable, list[str]]:
    """A new table from the API, and the ``region/service/key`` prices it could not find.

    ``only`` replaces the default queries (every price the settings allow).
    """
    taken = today or datetime.now(UTC).date().isoformat()
    table = PriceTable(about="Rebuilt from the AWS Price List API by `mlp cost --refresh`.")
    missing: list[str] = []
    for region in regions:
        for query in only if only is not None else queries(instance_types):
            found = fetch(client, query, region)
            label = f"{region}/{query.service}/{query.key}"
            if found is None:
                missing.append(label)
                continue
            usd, sku = found
            filters = ", ".join(f"{k}={v}" for k, v in query.filters.items())
            table.add(
                Price(
                    region=region,
                    service=query.service,
                    key=query.key,
                    usd=usd,
                    unit=query.unit,
                    source=API_SOURCE,
                    taken=taken,
                    note=f"{query.service_code} {filters} sku {sku}".strip(),
                )
            )
            if progress:
                progress(f"{label}: ${usd}")
    return table, missing
