"""CloudWatch dashboards: one per multi-model endpoint, one for the training cluster.

Every widget draws metrics from a ``metric_*`` method (the endpoint's own, or the factories
below), so dashboards, alarms and users' own widgets read one definition. Dashboard names
are left to CloudFormation unless given: a dashboard name is unique per account (its ARN has
no region), so two apps, or one app in two regions, never collide.
https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html

Where each metric comes from:
- Endpoints: ``AWS/SageMaker`` (invocations, latencies, model loading) and
  ``/aws/sagemaker/Endpoints`` (instance metrics), dimensions EndpointName and VariantName,
  https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html and
  https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html
- Cluster: Container Insights with enhanced observability (namespace ``ContainerInsights``),
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html
- FSx for Lustre (``AWS/FSx``, FileSystemId),
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html
- NAT gateways (``AWS/NATGateway``, NatGatewayId),
  https://docs.aws.amazon.com/vpc/latest/userguide/metrics-dimensions-nat-gateway.html
"""

from __future__ import annotations

__all__ = [
    "ClusterMetrics",
    "EndpointDashboard",
    "EndpointDashboardProps",
    "TrainingDashboard",
    "TrainingDashboardProps",
    "dashboard_url",
    "nat_gateway_metric",
]

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ml_platform.constructs._periods import ONE_MINUTE, seconds
from ml_platform.constructs._props import raise_problems
from ml_platform.constructs.storage import fsx_metric

if TYPE_CHECKING:
    from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint

CONTAINER_INSIGHTS = "ContainerInsights"
# Container Insights publishes per-node metrics with exactly these dimensions, per-pod metrics
# with these (Container-Insights-metrics-enhanced-EKS page above).
NODE_DIMENSIONS = ("ClusterName", "InstanceId", "NodeName")
POD_DIMENSIONS = ("ClusterName", "Namespace", "PodName")
WIDTH, HEIGHT = 12, 6  # two graphs per row of the 24-unit grid


def dashboard_url(dashboard: cloudwatch.Dashboard) -> str:
    """The CloudWatch console URL of ``dashboard`` (a token until deploy). China regions
    have their console on amazonaws.cn."""
    region = Stack.of(dashboard).region
    china = not Token.is_unresolved(region) and region.startswith("cn-")
    host = "console.amazonaws.cn" if china else "console.aws.amazon.com"
    return (
        f"https://{region}.{host}/cloudwatch/home?region={region}"
        f"#dashboards/dashboard/{dashboard.dashboard_name}"
    )


# `**options: Any` below: keyword arguments passed through to a jsii class (GraphWidget,
# Metric), whose own signature types and checks them.
def _graph(
    title: str, left: Sequence[cloudwatch.IMetric], **options: Any
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title, left=list(left), width=WIDTH, height=HEIGHT, **options
    )


# A dashboard body holds at most 500 widgets
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
MAX_WIDGETS = 500
WIDGETS_PER_ENDPOINT = 11  # a heading and ten graphs

# The dashboards' props are not checked here: aws-cdk's ``Dashboard`` refuses a name with other
# characters than alphanumerics, dash and underscore, and its ``Metric`` a period other than 1,
# 5, 10, 30 seconds or a multiple of 60 (read in aws-cdk-lib 2.275.0,
# ``aws-cloudwatch/lib/dashboard.js`` and ``metric.js``).


@dataclass(frozen=True, kw_only=True)
class EndpointDashboardProps:
    """The value props of :class:`EndpointDashboard` (checked by aws-cdk, see above)."""

    dashboard_name: str | None = None
    """The dashboard's name: alphanumerics, dash and underscore, unique per account. Default:
    CloudFormation names it (unique, composable twice)."""
    period: Duration = ONE_MINUTE
    """Metric period of the graphs. Default one minute (SageMaker's resolution)."""


class EndpointDashboard(Construct):
    """A dashboard of :class:`TritonMultiModelEndpoint` s, a section per endpoint, from
    their ``metric_*`` methods (one dashboard per stack keeps the stack's resource count:
    CloudFormation allows 500 resources per stack).

    Rows per endpoint: traffic against the scaling target; latency and errors; the model
    cache (hits, loaded models, load/unload counts) and loading times; GPU and host
    utilization; instances and the endpoint's alarms.

    Instance counts: CloudWatch has no metric of the variant's desired or in-service instance
    count (AWS's SageMaker metric lists above have none, and Application Auto Scaling publishes
    none), so the dashboard counts the instances that report: each instance sends its
    ``CPUUtilization`` once a minute, and the SampleCount of a one-minute period is the number
    of instances reporting. The scaling bounds are drawn as annotations; ``mlp status`` shows
    DescribeEndpoint's current and desired counts.

    Args:
        endpoints: The endpoints, at most 45 (500 widgets per dashboard). Required.
        props: Name and metric period (:class:`EndpointDashboardProps`). Default
            ``EndpointDashboardProps()``.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``.
        url: Its console URL.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoints: Sequence[TritonMultiModelEndpoint],
        props: EndpointDashboardProps | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props.
        self.props = props = props or EndpointDashboardProps()
        most = MAX_WIDGETS // WIDGETS_PER_ENDPOINT
        if not 1 <= len(endpoints) <= most:
            raise_problems(
                self,
                [
                    f"endpoints: {len(endpoints)} given; expected 1 to {most} (a dashboard "
                    f"holds at most {MAX_WIDGETS} widgets, {WIDGETS_PER_ENDPOINT} per "
                    "endpoint): use one dashboard per group of endpoints"
                ],
            )
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Resource",
            dashboard_name=props.dashboard_name,
            default_interval=Duration.hours(3),
        )
        for endpoint in endpoints:
            self._add_endpoint(endpoint, props.period)
        self.url = dashboard_url(self.dashboard)

    def _add_endpoint(self, e: TritonMultiModelEndpoint, period: Duration) -> None:
        p = {"period": period}
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(markdown=f"## Endpoint {e.endpoint_name}", width=24, height=1)
        )
        bounds = [
            cloudwatch.HorizontalAnnotation(value=e.min_instances, label="min instances"),
            cloudwatch.HorizontalAnnotation(value=e.max_instances, label="max instances"),
        ]
        target = cloudwatch.HorizontalAnnotation(
            value=e.invocations_per_instance, label="scaling target (per minute)"
        )
        # The scaling policy tracks invocations per instance per minute: draw them per minute.
        minute = {"period": ONE_MINUTE}
        self.dashboard.add_widgets(
            _graph("Invocations", [e.metric_invocations(**p)]),
            _graph(
                "Invocations per instance vs scaling target",
                [e.metric_invocations_per_instance(**minute)],
                left_annotations=[target],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "Latency (microseconds)",
                [
                    e.metric_model_latency(**p, label="ModelLatency avg"),
                    e.metric_model_latency(**p, statistic="Maximum", label="ModelLatency max"),
                    e.metric_overhead_latency(**p, label="OverheadLatency avg"),
                ],
            ),
            _graph(
                "Errors and model load failures",
                [e.metric_invocation_4xx_errors(**p), e.metric_invocation_5xx_errors(**p)],
                right=[e.metric_model_load_failures(**p, label="Triton 'failed to load' lines")],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "Model cache: hit rate, loaded models, loads and unloads",
                [e.metric_model_cache_hit(**p, label="ModelCacheHit (share of requests)")],
                right=[
                    e.metric_loaded_model_count(**p),
                    e.metric_model_loading_time(**p, statistic="SampleCount", label="loads"),
                    e.metric_model_unloading_time(**p, statistic="SampleCount", label="unloads"),
                ],
            ),
            _graph(
                "Model loading times (microseconds)",
                [
                    e.metric_model_loading_wait_time(**p),
                    e.metric_model_downloading_time(**p),
                    e.metric_model_loading_time(**p),
                    e.metric_model_unloading_time(**p),
                ],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "GPU (percent, busiest instance)",
                [e.metric_gpu_utilization(**p), e.metric_gpu_memory_utilization(**p)],
            ),
            _graph(
                "CPU, memory, disk (percent, busiest instance)",
                [
                    e.metric_cpu_utilization(**p),
                    e.metric_memory_utilization(**p),
                    e.metric_disk_utilization(**p),
                ],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "Instances reporting (SampleCount of CPUUtilization per minute)",
                [
                    e.metric_cpu_utilization(
                        period=ONE_MINUTE,
                        statistic="SampleCount",
                        label="instances reporting",
                    )
                ],
                left_annotations=bounds,
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(e.alarms.values()), width=WIDTH, height=HEIGHT
            ),
        )


class ClusterMetrics:
    """Container Insights metrics of one EKS cluster (namespace ``ContainerInsights``).

    Per-node and per-pod series use CloudWatch SEARCH expressions over the documented
    dimension sets: node names and instance ids are only known at run time.
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html
    """

    def __init__(self, cluster_name: str) -> None:
        self.cluster_name = cluster_name

    def metric(
        self,
        metric_name: str,
        statistic: str,
        period: Duration = ONE_MINUTE,
        **options: Any,
    ) -> cloudwatch.Metric:
        """A cluster-wide metric (dimension ClusterName)."""
        return cloudwatch.Metric(
            namespace=CONTAINER_INSIGHTS,
            metric_name=metric_name,
            statistic=statistic,
            dimensions_map={"ClusterName": self.cluster_name},
            period=period,
            **options,
        )

    def _search(
        self,
        dimensions: Sequence[str],
        metric_name: str,
        statistic: str,
        period: Duration,
        filters: dict[str, str],
        label: str,
    ) -> cloudwatch.MathExpression:
        schema = ",".join((CONTAINER_INSIGHTS, *dimensions))
        terms = " ".join(
            f'{k}="{v}"' for k, v in {"ClusterName": self.cluster_name, **filters}.items()
        )
        expression = (
            f"SEARCH('{{{schema}}} MetricName=\"{metric_name}\" {terms}', "
            f"'{statistic}', {seconds(period)})"
        )
        return cloudwatch.MathExpression(expression=expression, label=label, period=period)

    def per_node(
        self,
        metric_name: str,
        statistic: str,
        period: Duration = ONE_MINUTE,
        label: str = "",
    ) -> cloudwatch.MathExpression:
        """One series per node (dimensions ClusterName, InstanceId, NodeName)."""
        return self._search(NODE_DIMENSIONS, metric_name, statistic, period, {}, label)

    def per_pod(
        self,
        metric_name: str,
        statistic: str,
        namespace: str,
        period: Duration = ONE_MINUTE,
        label: str = "",
    ) -> cloudwatch.MathExpression:
        """One series per pod of ``namespace`` (dimensions ClusterName, Namespace, PodName)."""
        return self._search(
            POD_DIMENSIONS, metric_name, statistic, period, {"Namespace": namespace}, label
        )

    # Named metrics the training dashboard draws (users can take them for alarms).
    def metric_node_count(self, **options: Any) -> cloudwatch.Metric:
        """Worker nodes of the cluster (Maximum)."""
        return self.metric("cluster_node_count", "Maximum", **options)

    def metric_failed_node_count(self, **options: Any) -> cloudwatch.Metric:
        """Nodes with a failing condition (Maximum)."""
        return self.metric("cluster_failed_node_count", "Maximum", **options)


def nat_gateway_metric(
    nat_gateway_id: str,
    metric_name: str,
    statistic: str = "Sum",
    period: Duration = ONE_MINUTE,
    **options: Any,
) -> cloudwatch.Metric:
    """A NAT gateway metric (``AWS/NATGateway``, dimension NatGatewayId)."""
    return cloudwatch.Metric(
        namespace="AWS/NATGateway",
        metric_name=metric_name,
        statistic=statistic,
        period=period,
        dimensions_map={"NatGatewayId": nat_gateway_id},
        **options,
    )


def nat_gateway_ids(vpc: ec2.Vpc) -> list[str]:
    """The ids of the NAT gateways ``ec2.Vpc`` made in its public subnets."""
    gateways = [s.node.try_find_child("NATGateway") for s in vpc.public_subnets]
    return [g.attr_nat_gateway_id for g in gateways if isinstance(g, ec2.CfnNatGateway)]


@dataclass(frozen=True, kw_only=True)
class TrainingDashboardProps:
    """The value props of :class:`TrainingDashboard` (checked by aws-cdk, see
    :class:`EndpointDashboardProps`)."""

    cluster_name: str
    """The EKS cluster. Required."""
    namespace: str
    """The training jobs' namespace (pod restarts). Required."""
    file_system_ids: tuple[str, ...] = ()
    """FSx for Lustre file systems. Default none."""
    nat_gateway_ids: tuple[str, ...] = ()
    """NAT gateways of the VPC. Default none."""
    dashboard_name: str | None = None
    """The dashboard's name: alphanumerics, dash and underscore, unique per account. Default:
    CloudFormation names it."""
    period: Duration = ONE_MINUTE
    """Metric period. Default one minute."""

    def __post_init__(self) -> None:
        # Lists given are kept as tuples: the props stay immutable.
        object.__setattr__(self, "file_system_ids", tuple(self.file_system_ids))
        object.__setattr__(self, "nat_gateway_ids", tuple(self.nat_gateway_ids))


class TrainingDashboard(Construct):
    """A dashboard for the training cluster: nodes, Neuron devices, EFA, pods, FSx, NAT.

    Neuron and EFA series appear once the ``amazon-cloudwatch-observability`` add-on runs
    with enhanced observability and accelerated-compute metrics
    (:data:`~ml_platform.constructs.addons.ADDON_CONFIGURATION`). They are searched per node,
    so the dashboard holds for every Trainium type (Trn1 and Trn2 alike) without naming one:
    it carries no instance type, NeuronCore or EFA count.

    Args:
        props: The cluster, namespace, file systems, NAT gateways, name and metric period
            (:class:`TrainingDashboardProps`). Required.

    Attributes:
        dashboard: The ``cloudwatch.Dashboard``. metrics: The :class:`ClusterMetrics`.
        url: The console URL.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: TrainingDashboardProps,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props.
        self.props = props
        namespace, file_system_ids = props.namespace, props.file_system_ids
        m, p = ClusterMetrics(props.cluster_name), props.period
        self.metrics = m
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Resource",
            dashboard_name=props.dashboard_name,
            default_interval=Duration.hours(6),
        )

        def node(name: str, stat: str, label: str = "") -> cloudwatch.MathExpression:
            return m.per_node(name, stat, p, label)

        self.dashboard.add_widgets(
            _graph(
                "Nodes: count and failed",
                [m.metric_node_count(period=p), m.metric_failed_node_count(period=p)],
            ),
            _graph(
                "Node ready (1 = Ready), per node",
                [node("node_status_condition_ready", "Minimum")],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "NeuronCore utilization (percent), per node",
                [node("node_neuroncore_utilization", "Average")],
            ),
            _graph(
                "Neuron device memory used by NeuronCores (bytes), per node",
                [node("node_neuroncore_memory_usage_total", "Maximum")],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "Neuron runtime execution errors, per node",
                [node("node_neuron_execution_errors_total", "Sum")],
            ),
            _graph(
                "Neuron hardware ECC events, per node",
                [node("node_neurondevice_hw_ecc_events_total", "Sum")],
            ),
        )
        self.dashboard.add_widgets(
            _graph(
                "EFA traffic (bytes), per node",
                [
                    node("node_efa_rx_bytes", "Sum"),
                    node("node_efa_tx_bytes", "Sum"),
                    node("node_efa_rdma_read_bytes", "Sum"),
                    node("node_efa_rdma_write_bytes", "Sum"),
                ],
            ),
            _graph("EFA receive drops, per node", [node("node_efa_rx_dropped", "Sum")]),
        )
        restarts = _graph(
            f"Container restarts per pod, namespace {namespace}",
            [m.per_pod("pod_number_of_container_restarts", "Maximum", namespace, p)],
        )

        def fsx(name: str) -> list[cloudwatch.IMetric]:
            return [fsx_metric(i, name, "Sum", p) for i in file_system_ids]

        nat = [
            nat_gateway_metric(i, name, "Sum", p)
            for i in props.nat_gateway_ids
            for name in ("BytesOutToDestination", "BytesInFromDestination")
        ]
        later: list[cloudwatch.IWidget] = [restarts]
        if file_system_ids:
            later += [
                _graph(
                    "FSx for Lustre throughput (bytes per period)",
                    fsx("DataReadBytes") + fsx("DataWriteBytes"),
                ),
                _graph(
                    "FSx for Lustre operations (per period)",
                    fsx("DataReadOperations") + fsx("DataWriteOperations"),
                ),
                # Sum: the free bytes of all storage targets together (the page above).
                _graph("FSx for Lustre free capacity (bytes)", fsx("FreeDataStorageCapacity")),
            ]
        if nat:
            later.append(_graph("NAT gateway bytes (per period)", nat))
        for i in range(0, len(later), 2):
            self.dashboard.add_widgets(*later[i : i + 2])
        self.url = dashboard_url(self.dashboard)
