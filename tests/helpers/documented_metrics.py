"""AWS's documented metric lists, as test data, and a walker over synthesized dashboards.

Each entry: (namespace, metric) -> (allowed dimension sets, allowed statistics, unit, page).
A statistic set of ``ANY`` means the page lists no restriction (CloudWatch's standard
statistics then apply). Dimension names are compared as sets.

The Container Insights dimension sets are the page's; they are also the ones the CloudWatch
agent declares for its EMF output (aws/amazon-cloudwatch-agent,
translator/translate/otel/exporter/awsemf/kubernetes.go: node, pod, Neuron and EFA metric
declarations), which is what the add-on publishes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

ANY = frozenset({"Average", "Sum", "Minimum", "Maximum", "SampleCount"})
SAGEMAKER = "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html"
MME = "https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html"
INSIGHTS = (
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/"
    "Container-Insights-metrics-enhanced-EKS.html"
)
FSX = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html"
NAT = "https://docs.aws.amazon.com/vpc/latest/userguide/metrics-dimensions-nat-gateway.html"

ENDPOINT_DIMS = (frozenset({"EndpointName", "VariantName"}),)
ALL_STATS = frozenset({"Average", "Sum", "Minimum", "Maximum", "SampleCount"})
_CLUSTER = frozenset({"ClusterName"})
_NODE = frozenset({"ClusterName", "InstanceId", "NodeName"})
_NEURONCORE = _NODE | {"InstanceType", "NeuronDevice", "NeuronCore"}
_EFA_INTERFACE = _NODE | {"InstanceType", "NetworkInterfaceId"}
_POD = frozenset({"ClusterName", "Namespace", "PodName"})


def _sm(name: str, stats: set[str], unit: str, page: str = SAGEMAKER, ns: str = "AWS/SageMaker"):
    return (ns, name), (ENDPOINT_DIMS, frozenset(stats), unit, page)


def _ci(name: str, *dims: frozenset[str]):
    return ("ContainerInsights", name), (dims, ANY, "", INSIGHTS)


_INSTANCE = "/aws/sagemaker/Endpoints"
DOCUMENTED: dict[tuple[str, str], tuple[tuple[frozenset[str], ...], frozenset[str], str, str]] = (
    dict(
        [
            # Endpoint invocation metrics (AWS/SageMaker, EndpointName + VariantName).
            _sm("Invocations", {"Sum", "SampleCount"}, "None"),
            _sm("InvocationsPerInstance", {"Sum"}, "None"),
            _sm("Invocation4XXErrors", {"Average", "Sum"}, "None"),
            _sm("Invocation5XXErrors", {"Average", "Sum"}, "None"),
            _sm("ModelLatency", ALL_STATS, "Microseconds"),
            _sm("OverheadLatency", ALL_STATS, "Microseconds"),
            # Multi-model endpoint model loading metrics (AWS/SageMaker).
            _sm("ModelLoadingWaitTime", ALL_STATS, "Microseconds", MME),
            _sm("ModelUnloadingTime", ALL_STATS, "Microseconds", MME),
            _sm("ModelDownloadingTime", ALL_STATS, "Microseconds", MME),
            _sm("ModelLoadingTime", ALL_STATS, "Microseconds", MME),
            _sm("ModelCacheHit", {"Average", "Sum", "SampleCount"}, "None", MME),
            # Multi-model endpoint instance metrics (/aws/sagemaker/Endpoints). The utilization
            # metrics are documented with their unit only (no statistic restriction).
            _sm("LoadedModelCount", ALL_STATS, "None", MME, _INSTANCE),
            _sm("GPUUtilization", ANY, "Percent", MME, _INSTANCE),
            _sm("GPUMemoryUtilization", ANY, "Percent", MME, _INSTANCE),
            _sm("CPUUtilization", ANY, "Percent", MME, _INSTANCE),
            _sm("MemoryUtilization", ANY, "Percent", MME, _INSTANCE),
            _sm("DiskUtilization", ANY, "Percent", MME, _INSTANCE),
            # Container Insights with enhanced observability (ContainerInsights).
            _ci("cluster_node_count", _CLUSTER),
            _ci("cluster_failed_node_count", _CLUSTER),
            _ci("node_status_condition_ready", _CLUSTER, _NODE),
            _ci("node_neuroncore_utilization", _CLUSTER, _NODE, _NEURONCORE),
            _ci("node_neuroncore_memory_usage_total", _CLUSTER, _NODE, _NEURONCORE),
            _ci("node_neuron_execution_errors_total", _CLUSTER, _NODE),
            _ci("node_neurondevice_hw_ecc_events_total", _CLUSTER, _NODE, _NODE | {"NeuronDevice"}),
            *(
                _ci(f"node_efa_{name}", _CLUSTER, _NODE, _EFA_INTERFACE)
                for name in (
                    "rx_bytes",
                    "tx_bytes",
                    "rx_dropped",
                    "rdma_read_bytes",
                    "rdma_write_bytes",
                    "rdma_write_recv_bytes",
                )
            ),
            _ci("pod_number_of_container_restarts", _CLUSTER, _POD, _POD | {"FullPodName"}),
            # FSx for Lustre (AWS/FSx, FileSystemId).
            *(
                (("AWS/FSx", name), ((frozenset({"FileSystemId"}),), ALL_STATS, unit, FSX))
                for name, unit in (
                    ("DataReadBytes", "Bytes"),
                    ("DataWriteBytes", "Bytes"),
                    ("DataReadOperations", "Count"),
                    ("DataWriteOperations", "Count"),
                    ("FreeDataStorageCapacity", "Bytes"),
                )
            ),
            # NAT gateways (AWS/NATGateway, NatGatewayId): the page names Sum for the byte counts.
            *(
                (
                    ("AWS/NATGateway", name),
                    ((frozenset({"NatGatewayId"}),), frozenset({"Sum"}), "Bytes", NAT),
                )
                for name in ("BytesOutToDestination", "BytesInFromDestination")
            ),
        ]
    )
)

# The endpoint's own metric: its metric filter counts Triton's "failed to load" log lines
# (ml_platform/constructs/sagemaker_mme.py), no dimensions, Sum.
OWN_NAMESPACE = "MlPlatform/Triton"

_SEARCH = re.compile(
    r"""^SEARCH\('\{(?P<schema>[^}]*)\}\s+MetricName="(?P<name>[^"]+)"(?P<terms>[^']*)',\s*"""
    r"""'(?P<stat>\w+)',\s*(?P<period>\d+)\)$"""
)


def render(value: Any, region: str = "us-west-2") -> Any:
    """A CloudFormation value with its intrinsics replaced by strings (``Fn::Join`` joined,
    the region resolved, other references as ``<Ref:...>`` placeholders)."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Fn::Join":
            sep, parts = arg
            return sep.join(str(render(p, region)) for p in parts)
        if key == "Ref":
            return region if arg == "AWS::Region" else f"<Ref:{arg}>"
        if key == "Fn::GetAtt":
            return f"<GetAtt:{'.'.join(arg)}>"
        if key in ("Fn::ImportValue", "Fn::Select", "Fn::Sub"):
            # No quotes in placeholders: they sit inside JSON strings of dashboard bodies.
            text = json.dumps(render(arg, region), sort_keys=True).replace('"', "")
            return f"<{key.removeprefix('Fn::')}:{text}>"
    if isinstance(value, dict):
        return {k: render(v, region) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, region) for v in value]
    return value


def dashboard_bodies(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``AWS::CloudWatch::Dashboard`` body of ``template``, parsed, by logical id."""
    return {
        logical: json.loads(render(r["Properties"]["DashboardBody"]))
        for logical, r in template.get("Resources", {}).items()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    }


def widget_metrics(body: dict[str, Any]) -> Iterator[tuple[str, str, str, frozenset[str], str]]:
    """``(widget title, namespace, metric, dimension names, statistic)`` of every metric of
    every widget, SEARCH expressions included (their schema gives namespace and dimensions)."""
    for widget in body["widgets"]:
        props = widget.get("properties", {})
        for entry in props.get("metrics", []):
            title = props.get("title", "")
            if isinstance(entry[0], dict):
                expression = entry[0]["expression"]
                match = _SEARCH.match(expression)
                if not match:
                    raise AssertionError(f"{title}: expression not understood: {expression}")
                namespace, *dims = match["schema"].split(",")
                terms = dict(re.findall(r'(\w+)="([^"]*)"', match["terms"]))
                if not set(terms) <= set(dims):
                    raise AssertionError(f"{title}: filters {terms} outside the schema {dims}")
                yield title, namespace, match["name"], frozenset(dims), match["stat"]
                continue
            if entry[0] in (".", "..."):
                raise AssertionError(f"{title}: shorthand metric entries are not checked")
            options = entry[-1] if isinstance(entry[-1], dict) else {}
            fields = entry[:-1] if options else entry
            namespace, name, *pairs = fields
            dims = frozenset(pairs[0::2])
            # CloudWatch dashboards default to Average (aws-cdk omits it).
            statistic = options.get("stat", props.get("stat", "Average"))
            yield title, namespace, name, dims, statistic


def problems(template: dict[str, Any]) -> list[str]:
    """Every dashboard metric not in :data:`DOCUMENTED` or with a wrong namespace, dimension
    set or statistic; empty when all match."""
    found = []
    for logical, body in dashboard_bodies(template).items():
        for title, namespace, name, dims, statistic in widget_metrics(body):
            where = f"{logical} {title!r}: {namespace} {name} {sorted(dims)} {statistic}"
            if namespace == OWN_NAMESPACE:
                if not (name.endswith("-ModelLoadFailures") and not dims and statistic == "Sum"):
                    found.append(f"{where}: not the endpoint's load-failure metric")
                continue
            documented = DOCUMENTED.get((namespace, name))
            if documented is None:
                others = sorted(ns for ns, n in DOCUMENTED if n == name)
                hint = f" (documented in {others})" if others else ""
                found.append(f"{where}: not in AWS's documented list{hint}")
                continue
            dimension_sets, statistics, _, page = documented
            if dims not in dimension_sets:
                found.append(
                    f"{where}: dimensions not among {[sorted(d) for d in dimension_sets]} ({page})"
                )
            if statistic not in statistics:
                found.append(f"{where}: statistic not among {sorted(statistics)} ({page})")
    return found


def all_metrics(template: dict[str, Any]) -> set[tuple[str, str]]:
    """``(namespace, metric)`` of every dashboard metric in ``template``."""
    return {
        (namespace, name)
        for body in dashboard_bodies(template).values()
        for _, namespace, name, _, _ in widget_metrics(body)
    }
