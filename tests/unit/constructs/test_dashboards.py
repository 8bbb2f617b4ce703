"""The dashboards (issue 23): every widget's metric is in AWS's documented lists, the widgets
cover what the issue asks, the URLs are stack outputs, the add-on collects Neuron and EFA."""

from __future__ import annotations

import copy
import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from ml_platform.app import new_app
from ml_platform.constructs import EndpointDashboard, TrainingDashboard, TrainingDashboardProps
from tests.helpers.documented_metrics import (
    DOCUMENTED,
    all_metrics,
    dashboard_bodies,
    problems,
    render,
)
from tests.support import SynthesizedPlatform

ENDPOINT_METRICS = {
    ("AWS/SageMaker", name)
    for name in (
        "Invocations",
        "InvocationsPerInstance",
        "ModelLatency",
        "OverheadLatency",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ModelLoadingWaitTime",
        "ModelLoadingTime",
        "ModelDownloadingTime",
        "ModelUnloadingTime",
        "ModelCacheHit",
    )
} | {
    ("/aws/sagemaker/Endpoints", name)
    for name in (
        "LoadedModelCount",
        "GPUUtilization",
        "GPUMemoryUtilization",
        "CPUUtilization",
        "MemoryUtilization",
        "DiskUtilization",
    )
}
TRAINING_METRICS = (
    {
        ("ContainerInsights", name)
        for name in (
            "cluster_node_count",
            "cluster_failed_node_count",
            "node_status_condition_ready",
            "node_neuroncore_utilization",
            "node_neuroncore_memory_usage_total",
            "node_neuron_execution_errors_total",
            "node_neurondevice_hw_ecc_events_total",
            "node_efa_rx_bytes",
            "node_efa_tx_bytes",
            "node_efa_rx_dropped",
            "pod_number_of_container_restarts",
        )
    }
    | {
        ("AWS/FSx", name)
        for name in (
            "DataReadBytes",
            "DataWriteBytes",
            "DataReadOperations",
            "DataWriteOperations",
            "FreeDataStorageCapacity",
        )
    }
    | {("AWS/NATGateway", "BytesOutToDestination"), ("AWS/NATGateway", "BytesInFromDestination")}
)


def _templates(synth: SynthesizedPlatform) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in synth.template_paths()}


def test_every_dashboard_metric_is_in_awss_documented_lists(synth: SynthesizedPlatform) -> None:
    templates = _templates(synth)
    found = {name: problems(t) for name, t in templates.items()}
    assert all(not p for p in found.values()), found
    with_dashboards = sorted(n for n, t in templates.items() if dashboard_bodies(t))
    assert with_dashboards == [
        "MlPlatform-Inference.template.json",
        "MlPlatform-TrainingCluster.template.json",
    ]


def test_the_endpoint_dashboard_draws_what_the_issue_lists(synth: SynthesizedPlatform) -> None:
    template = synth.template_json("Inference")
    drawn = all_metrics(template)
    assert ENDPOINT_METRICS <= drawn
    assert ("MlPlatform/Triton", "triton-ensembles-ModelLoadFailures") in drawn
    (body,) = dashboard_bodies(template).values()
    titles = [w["properties"].get("title") for w in body["widgets"]]
    # The scaling target and bounds as annotations, the alarms in an alarm widget.
    per_instance = next(
        w
        for w in body["widgets"]
        if w["properties"].get("title", "").startswith("Invocations per instance")
    )
    assert per_instance["properties"]["annotations"]["horizontal"][0]["value"] == 1000
    (alarms,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    alarm_ids = {
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert len(alarm_ids) >= 4  # load failures, loading wait, GPU memory, 5xx (and any newer)
    assert sorted(alarms["properties"]["alarms"]) == sorted(f"<GetAtt:{a}.Arn>" for a in alarm_ids)
    assert "Instances reporting (SampleCount of CPUUtilization per minute)" in titles


def test_the_training_dashboard_draws_what_the_issue_lists(synth: SynthesizedPlatform) -> None:
    template = synth.template_json("TrainingCluster")
    assert TRAINING_METRICS <= all_metrics(template)
    (body,) = dashboard_bodies(template).values()
    text = json.dumps(body)
    cluster = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster")
    # Every Container Insights series is this cluster's; restarts only the training namespace.
    searches = text.count("SEARCH(")
    assert searches == 11
    assert text.count(f'ClusterName=\\"<Ref:{cluster}>\\"') == searches
    namespace = synth.platform.settings.training.namespace
    assert text.count(f'Namespace=\\"{namespace}\\"') == 1
    assert "<ImportValue:" in text  # the file system id and NAT gateway id, imported


def test_dashboards_are_named_by_cloudformation_and_linked_in_outputs(
    synth: SynthesizedPlatform,
) -> None:
    for short, key in (
        ("Inference", "EndpointsDashboardUrl"),
        ("TrainingCluster", "TrainingDashboardUrl"),
    ):
        template = synth.template_json(short)
        (dashboard,) = [
            k for k, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Dashboard"
        ]
        assert "DashboardName" not in template["Resources"][dashboard]["Properties"]
        url = render(template["Outputs"][key]["Value"])
        assert url == (
            "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2"
            f"#dashboards/dashboard/<Ref:{dashboard}>"
        )
        # A dashboard name has at most 255 characters (AWS::CloudWatch::Dashboard): the URL
        # stays far below CloudFormation's 1,024-character output limits.
        assert len(url.replace(f"<Ref:{dashboard}>", "x" * 255)) < 400


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # ModelCacheHit published in the instance namespace: not documented there.
        (lambda m: m.__setitem__(0, "/aws/sagemaker/Endpoints"), "not in AWS's documented list"),
        (lambda m: m.__setitem__(4, "InstanceId"), "dimensions not among"),
        (lambda m: m[-1].__setitem__("stat", "Maximum"), "statistic not among"),
        (lambda m: m.__setitem__(1, "ModelCacheMiss"), "not in AWS's documented list"),
    ],
)
def test_the_check_fails_on_a_wrong_metric(synth: SynthesizedPlatform, change, expected) -> None:
    template = copy.deepcopy(synth.template_json("Inference"))
    (logical,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    body = dashboard_bodies(template)[logical]
    cache = next(
        w for w in body["widgets"] if w["properties"].get("title", "").startswith("Model cache")
    )
    metric = cache["properties"]["metrics"][0]
    assert metric[:2] == ["AWS/SageMaker", "ModelCacheHit"]
    change(metric)
    template["Resources"][logical]["Properties"]["DashboardBody"] = json.dumps(body)
    found = problems(template)
    assert len(found) == 1 and expected in found[0], found


def test_the_check_reads_search_expressions(synth: SynthesizedPlatform) -> None:
    template = copy.deepcopy(synth.template_json("TrainingCluster"))
    (logical,) = dashboard_bodies(template)
    good = json.dumps(dashboard_bodies(template)[logical])
    # EFA per interface needs InstanceType and NetworkInterfaceId too: a schema without them
    # but with NetworkInterfaceId alone is not a documented dimension set.
    bad = good.replace(
        '{ContainerInsights,ClusterName,InstanceId,NodeName} MetricName=\\"node_efa_rx_bytes',
        '{ContainerInsights,ClusterName,NetworkInterfaceId} MetricName=\\"node_efa_rx_bytes',
    )
    assert bad != good
    template["Resources"][logical]["Properties"]["DashboardBody"] = bad
    (found,) = problems(template)
    assert "node_efa_rx_bytes" in found and "dimensions not among" in found


def test_the_documented_table_names_its_pages() -> None:
    pages = {page for _, _, _, page in DOCUMENTED.values()}
    assert pages == {
        "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html",
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html",
        "https://docs.aws.amazon.com/vpc/latest/userguide/metrics-dimensions-nat-gateway.html",
    }
    units = {name: unit for (_, name), (_, _, unit, _) in DOCUMENTED.items()}
    assert all(
        units[n] == "Microseconds"
        for n in (
            "ModelLatency",
            "OverheadLatency",
            "ModelLoadingWaitTime",
            "ModelUnloadingTime",
            "ModelDownloadingTime",
            "ModelLoadingTime",
        )
    )


def test_the_cloudwatch_add_on_collects_enhanced_and_accelerated_metrics(
    synth: SynthesizedPlatform,
) -> None:
    template = synth.template_json("TrainingCluster")
    (addon,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon"
        and r["Properties"]["AddonName"] == "amazon-cloudwatch-observability"
    ]
    config = json.loads(addon["ConfigurationValues"])
    kubernetes = config["agent"]["config"]["logs"]["metrics_collected"]["kubernetes"]
    assert kubernetes == {"enhanced_container_insights": True, "accelerated_compute_metrics": True}
    # No tolerations override: the chart's default (operator Exists) covers the Neuron taint.
    assert "tolerations" not in config


def test_the_training_dashboard_is_the_same_for_trn2(
    synth: SynthesizedPlatform, trn2: SynthesizedPlatform
) -> None:
    """Neuron and EFA series are SEARCHes per node (ClusterName, InstanceId, NodeName), with no
    instance type, NeuronCore or EFA count in them, so a trn2.48xlarge cluster gets every
    widget a trn1.32xlarge cluster gets; every metric stays in AWS's documented lists."""
    trn1_template = synth.template_json("TrainingCluster")
    trn2_template = trn2.template_json("TrainingCluster")
    assert problems(trn2_template) == []
    assert TRAINING_METRICS <= all_metrics(trn2_template)
    (trn1_body,) = dashboard_bodies(trn1_template).values()
    (trn2_body,) = dashboard_bodies(trn2_template).values()
    assert trn2_body == trn1_body
    text = json.dumps(trn2_body)
    assert "trn1" not in text and "trn2" not in text


def test_the_dashboards_take_their_value_props_as_one_object() -> None:
    stack = cdk.Stack(new_app(), "Own")
    props = TrainingDashboardProps(
        cluster_name="research",
        namespace="jobs",
        file_system_ids=["fs-0123456789abcdef0"],  # type: ignore[arg-type]  # made a tuple
        dashboard_name="training-ops",
        period=cdk.Duration.minutes(5),
    )
    dashboard = TrainingDashboard(stack, "Training", props=props)
    assert dashboard.props is props and props.file_system_ids == ("fs-0123456789abcdef0",)
    template = assertions.Template.from_stack(stack).to_json()
    (resource,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Dashboard"
    ]
    assert resource["DashboardName"] == "training-ops"
    text = json.dumps(dashboard_bodies(template))
    assert text.count("SEARCH(") == text.count(", 300)") == 11  # the searches' period, seconds
    with pytest.raises(ValueError) as raised:
        EndpointDashboard(stack, "Endpoints", endpoints=[])
    assert str(raised.value) == (
        "Own/Endpoints: endpoints: 0 given; expected 1 to 45 (a dashboard holds at most 500 "
        "widgets, 11 per endpoint): use one dashboard per group of endpoints"
    )


def test_aws_cdk_checks_the_dashboard_name_and_period() -> None:
    """What the props do not re-check: aws-cdk's ``Dashboard`` and ``Metric`` refuse these."""
    stack = cdk.Stack(new_app(), "Own")
    with pytest.raises(RuntimeError, match="contains invalid characters"):
        TrainingDashboard(
            stack,
            "Name",
            props=TrainingDashboardProps(cluster_name="c", namespace="n", dashboard_name="a b"),
        )
    with pytest.raises(RuntimeError, match="must be 1, 5, 10, 30, or a multiple of 60"):
        TrainingDashboard(
            stack,
            "Period",
            props=TrainingDashboardProps(
                cluster_name="c", namespace="n", period=cdk.Duration.seconds(7)
            ),
        )
