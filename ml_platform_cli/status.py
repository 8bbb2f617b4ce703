"""``mlp status``: endpoint state, instance counts, the latest multi-model metrics and the
CloudWatch dashboard links (the stacks' dashboard-URL outputs).

Metrics are the newest datapoint of the last ``--minutes`` (default 60) at one-minute
resolution. Request metrics (ModelCacheHit, ModelLoadingWaitTime) are in ``AWS/SageMaker``;
instance metrics (LoadedModelCount, GPU) in ``/aws/sagemaker/Endpoints``; both carry the
dimensions EndpointName and VariantName.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from ml_platform.stack_outputs import (
    ENDPOINTS_DASHBOARD_OUTPUT,
    ENDPOINTS_PER_STACK,
    TRAINING_CLUSTER_STACK,
    TRAINING_DASHBOARD_OUTPUT,
    inference_stack_short,
)
from ml_platform_cli.aws import (
    CliError,
    Context,
    EndpointNotFound,
    StackNotFound,
    Subcommands,
    doc_summary,
    error_code,
    error_message,
    stack_outputs,
)

VARIANT = "AllTraffic"
REQUEST_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
# (metric, namespace, statistic, unit shown)
METRICS = (
    ("LoadedModelCount", INSTANCE_NAMESPACE, "Maximum", ""),
    ("ModelCacheHit", REQUEST_NAMESPACE, "Average", ""),
    ("ModelLoadingWaitTime", REQUEST_NAMESPACE, "Average", "us"),
    ("GPUUtilization", INSTANCE_NAMESPACE, "Maximum", "%"),
    ("GPUMemoryUtilization", INSTANCE_NAMESPACE, "Maximum", "%"),
)


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "status",
        parents=parents,
        help="endpoint status, instance counts and multi-model metrics",
        description=doc_summary(__doc__),
    )
    p.add_argument(
        "--endpoint",
        action="append",
        help="endpoint name (repeatable; default: every endpoint in the settings)",
    )
    p.add_argument("--minutes", type=int, default=60, help="metric window (default: 60)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def describe(ctx: Context, name: str) -> dict[str, Any]:
    """Status and variants of endpoint ``name``; :class:`EndpointNotFound` if absent."""
    sagemaker = ctx.client("sagemaker")
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except Exception as error:
        if error_code(error) == "ValidationException" and "not find" in error_message(error):
            raise EndpointNotFound(_not_found(ctx, name)) from None
        raise
    instance_types = _instance_types(sagemaker, endpoint.get("EndpointConfigName"))
    return {
        "name": name,
        "status": endpoint["EndpointStatus"],
        "failure_reason": endpoint.get("FailureReason"),
        "variants": [
            {
                "name": v["VariantName"],
                "instance_type": instance_types.get(v["VariantName"]),
                "current_instances": v.get("CurrentInstanceCount"),
                "desired_instances": v.get("DesiredInstanceCount"),
            }
            for v in endpoint.get("ProductionVariants", [])
        ],
    }


def _instance_types(sagemaker: Any, config_name: str | None) -> dict[str, str]:
    if not config_name:
        return {}
    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    except Exception:  # optional detail: no permission, or the config was replaced
        return {}
    return {v["VariantName"]: v.get("InstanceType") for v in config["ProductionVariants"]}


def _not_found(ctx: Context, name: str) -> str:
    message = f"endpoint {name!r} not found in {ctx.region}"
    try:
        listed = ctx.client("sagemaker").list_endpoints(MaxResults=20)["Endpoints"]
    except Exception:
        return message
    names = sorted(e["EndpointName"] for e in listed)
    if not names:
        return f"{message} (no endpoints there)"
    return f"{message} (endpoints there: {', '.join(names)})"


def latest_metrics(
    ctx: Context, name: str, minutes: int, now: datetime | None = None
) -> dict[str, Any]:
    """Newest datapoint of each metric in :data:`METRICS` (``None`` values when no data)."""
    end = now or datetime.now(UTC)
    dimensions = [
        {"Name": "EndpointName", "Value": name},
        {"Name": "VariantName", "Value": VARIANT},
    ]
    queries = [
        {
            "Id": f"m{i}",
            "MetricStat": {
                "Metric": {"Namespace": namespace, "MetricName": metric, "Dimensions": dimensions},
                "Period": 60,
                "Stat": stat,
            },
            "ReturnData": True,
        }
        for i, (metric, namespace, stat, _) in enumerate(METRICS)
    ]
    found: dict[str, tuple[datetime, float]] = {}
    pages = (
        ctx.client("cloudwatch")
        .get_paginator("get_metric_data")
        .paginate(
            MetricDataQueries=queries,
            StartTime=end - timedelta(minutes=minutes),
            EndTime=end,
            ScanBy="TimestampDescending",
        )
    )
    for page in pages:
        for result in page["MetricDataResults"]:
            for stamp, value in zip(result["Timestamps"], result["Values"], strict=True):
                if result["Id"] not in found or stamp > found[result["Id"]][0]:
                    found[result["Id"]] = (stamp, value)
    out = {}
    for i, (metric, namespace, stat, unit) in enumerate(METRICS):
        stamp, value = found.get(f"m{i}", (None, None))
        out[metric] = {
            "namespace": namespace,
            "statistic": stat,
            "unit": unit,
            "value": value,
            "timestamp": stamp.astimezone(UTC).isoformat() if stamp else None,
        }
    return out


def dashboard_links(ctx: Context, names: list[str]) -> tuple[dict[str, str | None], str | None]:
    """Console URLs of the endpoints' dashboards (by endpoint name: the dashboard of the
    endpoint's inference stack, a section per endpoint) and of the training dashboard,
    read from the stacks' outputs; ``None`` where a stack or output is absent (an endpoint
    not in the settings, a stack not deployed)."""
    cache: dict[str, dict[str, str]] = {}

    def outputs(short: str) -> dict[str, str]:
        if short not in cache:
            try:
                cache[short] = stack_outputs(ctx, short)
            except StackNotFound:
                cache[short] = {}
        return cache[short]

    configured = [e.name for e in ctx.settings.inference.endpoints]
    links: dict[str, str | None] = {}
    for name in names:
        if name in configured:
            short = inference_stack_short(configured.index(name) // ENDPOINTS_PER_STACK)
            links[name] = outputs(short).get(ENDPOINTS_DASHBOARD_OUTPUT)
        else:
            links[name] = None
    training = None
    if ctx.settings.features.training_cluster:
        training = outputs(TRAINING_CLUSTER_STACK).get(TRAINING_DASHBOARD_OUTPUT)
    return links, training


def run(ctx: Context, args: argparse.Namespace) -> int:
    names = args.endpoint or [e.name for e in ctx.settings.inference.endpoints]
    if args.minutes < 1:
        raise CliError("--minutes must be at least 1")
    report = []
    for name in names:
        endpoint = describe(ctx, name)
        endpoint["metrics"] = latest_metrics(ctx, name, args.minutes)
        report.append(endpoint)
    links, training = dashboard_links(ctx, names)
    for endpoint in report:
        endpoint["dashboard_url"] = links[endpoint["name"]]
    if args.json:
        print(
            json.dumps(
                {"region": ctx.region, "endpoints": report, "training_dashboard_url": training},
                indent=2,
            )
        )
    else:
        _print_tables(report, ctx.region, args.minutes)
        _print_dashboards(report, training, ctx.settings.features.training_cluster)
    return 0


MISSING_OUTPUT = "- (stack output not found)"


def _print_dashboards(
    report: list[dict[str, Any]], training: str | None, training_cluster: bool
) -> None:
    # Plain lines, not a table: a terminal keeps a whole URL clickable only unwrapped. Every
    # dashboard the settings make has its line, a missing one saying why.
    print("CloudWatch dashboards:")
    for endpoint in report:
        print(f"  {endpoint['name']}: {endpoint['dashboard_url'] or MISSING_OUTPUT}")
    if training_cluster:
        print(f"  training cluster: {training or MISSING_OUTPUT}")
    else:
        print("  training cluster: - (features.training_cluster is off)")


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "no data"
    text = f"{value:,.0f}" if unit == "us" else f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip() if unit != "%" else f"{text}%"


def _print_tables(report: list[dict[str, Any]], region: str, minutes: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=160)
    endpoints = Table(title=f"SageMaker endpoints ({region})")
    for column in ("Endpoint", "Status", "Variant", "Instance type", "Instances (current/desired)"):
        endpoints.add_column(column)
    for endpoint in report:
        reason = endpoint["failure_reason"]
        status = endpoint["status"] + (f": {reason}" if reason else "")
        for variant in endpoint["variants"] or [{}]:
            endpoints.add_row(
                endpoint["name"],
                status,
                variant.get("name", "-"),
                variant.get("instance_type") or "-",
                f"{_count(variant.get('current_instances'))}/"
                f"{_count(variant.get('desired_instances'))}",
            )
    console.print(endpoints)
    for endpoint in report:
        metrics = Table(title=f"{endpoint['name']} / {VARIANT}: latest of the last {minutes} min")
        for column in ("Metric", "Namespace", "Statistic", "Value", "At (UTC)"):
            metrics.add_column(column)
        for metric, data in endpoint["metrics"].items():
            at = data["timestamp"][:19].replace("T", " ") if data["timestamp"] else "-"
            metrics.add_row(
                metric,
                data["namespace"],
                data["statistic"],
                _format(data["value"], data["unit"]),
                at,
            )
        console.print(metrics)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)
