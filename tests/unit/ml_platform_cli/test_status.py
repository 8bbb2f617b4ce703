"""``mlp status`` with moto: the endpoint, its variant counts and metrics read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform_cli import status
from ml_platform_cli.aws import Context

ENDPOINT = "triton-ensembles"
TRITON_IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:25.09-py3"


def _endpoint(name: str = ENDPOINT) -> None:
    sagemaker = boto3.client("sagemaker", region_name="us-west-2")
    sagemaker.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={
            "Image": TRITON_IMAGE,
            "Mode": "MultiModel",
            "ModelDataUrl": "s3://bucket/models/",
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{name}-model",
                "InstanceType": "ml.g4dn.4xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")


def _put(namespace: str, metric: str, values: list[tuple[int, float]], name: str = ENDPOINT):
    """Datapoints ``(minutes ago, value)`` for the endpoint's AllTraffic variant."""
    now = datetime.now(UTC)
    boto3.client("cloudwatch", region_name="us-west-2").put_metric_data(
        Namespace=namespace,
        MetricData=[
            {
                "MetricName": metric,
                "Dimensions": [
                    {"Name": "EndpointName", "Value": name},
                    {"Name": "VariantName", "Value": "AllTraffic"},
                ],
                "Timestamp": now - timedelta(minutes=ago),
                "Value": value,
            }
            for ago, value in values
        ],
    )


@pytest.fixture
def endpoint(aws):
    _endpoint()
    _put("/aws/sagemaker/Endpoints", "LoadedModelCount", [(30, 1), (3, 2)])
    _put("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", [(2, 41.5)])
    _put("AWS/SageMaker", "ModelCacheHit", [(10, 0.0), (2, 1.0)])
    _put("AWS/SageMaker", "ModelLoadingWaitTime", [(5, 2_500_000)])
    # Too old, or another endpoint: must not be reported. (moto 5.2.5 ignores the namespace
    # of a query that has dimensions, so namespaces are pinned by the stubbed test below.)
    _put("/aws/sagemaker/Endpoints", "GPUUtilization", [(90, 77)])
    _put("/aws/sagemaker/Endpoints", "LoadedModelCount", [(1, 9)], name="other-endpoint")


def test_json_reports_counts_and_latest_metrics(endpoint, project, mlp):
    result = mlp("--cdk-json", project, "status", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["region"] == "us-west-2"
    (only,) = report["endpoints"]
    assert only["name"] == ENDPOINT and only["status"] == "InService"
    assert only["variants"] == [
        {
            "name": "AllTraffic",
            "instance_type": "ml.g4dn.4xlarge",
            "current_instances": 1,
            "desired_instances": 1,
        }
    ]
    values = {name: m["value"] for name, m in only["metrics"].items()}
    assert values == {
        "LoadedModelCount": 2,
        "ModelCacheHit": 1.0,
        "ModelLoadingWaitTime": 2_500_000,
        "GPUUtilization": None,
        "GPUMemoryUtilization": 41.5,
    }
    assert only["metrics"]["ModelCacheHit"]["namespace"] == "AWS/SageMaker"
    assert only["metrics"]["LoadedModelCount"]["namespace"] == "/aws/sagemaker/Endpoints"
    assert only["metrics"]["LoadedModelCount"]["timestamp"].endswith("+00:00")


def test_tables(endpoint, project, mlp):
    result = mlp("--cdk-json", project, "status")
    assert result.code == 0, result.err
    assert "SageMaker endpoints (us-west-2)" in result.out
    row = next(line for line in result.out.splitlines() if ENDPOINT in line and "InService" in line)
    assert "AllTraffic" in row and "ml.g4dn.4xlarge" in row and "1/1" in row
    metric_rows = {
        line.split("│")[1].strip(): line for line in result.out.splitlines() if line.startswith("│")
    }
    assert "41.5%" in metric_rows["GPUMemoryUtilization"]
    assert "2,500,000 us" in metric_rows["ModelLoadingWaitTime"]
    assert "no data" in metric_rows["GPUUtilization"]


def test_window_option(endpoint, project, mlp):
    result = mlp("--cdk-json", project, "status", "--json", "--minutes", "120")
    metrics = json.loads(result.out)["endpoints"][0]["metrics"]
    assert metrics["GPUUtilization"]["value"] == 77


def test_unknown_endpoint_lists_the_existing_ones(endpoint, project, mlp):
    result = mlp("--cdk-json", project, "status", "--endpoint", "nope")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: endpoint 'nope' not found in us-west-2 (endpoints there: triton-ensembles)"
    )


def test_no_endpoints_at_all(aws, project, mlp):
    result = mlp("--cdk-json", project, "status")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: endpoint 'triton-ensembles' not found in us-west-2 (no endpoints there)"
    )


def test_metric_queries_use_the_sagemaker_namespaces(aws_env):
    """Request metrics live in AWS/SageMaker, instance metrics in /aws/sagemaker/Endpoints."""
    ctx = Context()
    cloudwatch = ctx.client("cloudwatch", "us-west-2")
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    dims = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    expected = [
        ("LoadedModelCount", "/aws/sagemaker/Endpoints", "Maximum"),
        ("ModelCacheHit", "AWS/SageMaker", "Average"),
        ("ModelLoadingWaitTime", "AWS/SageMaker", "Average"),
        ("GPUUtilization", "/aws/sagemaker/Endpoints", "Maximum"),
        ("GPUMemoryUtilization", "/aws/sagemaker/Endpoints", "Maximum"),
    ]
    queries = [
        {
            "Id": f"m{i}",
            "ReturnData": True,
            "MetricStat": {
                "Metric": {"Namespace": ns, "MetricName": name, "Dimensions": dims},
                "Period": 60,
                "Stat": stat,
            },
        }
        for i, (name, ns, stat) in enumerate(expected)
    ]
    with Stubber(cloudwatch) as stubber:
        stubber.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {
                        "Id": "m1",
                        "Timestamps": [now - timedelta(minutes=2)],
                        "Values": [0.5],
                        "StatusCode": "Complete",
                    }
                ]
            },
            {
                "MetricDataQueries": queries,
                "StartTime": now - timedelta(minutes=60),
                "EndTime": now,
                "ScanBy": "TimestampDescending",
            },
        )
        metrics = status.latest_metrics(ctx, "ep", 60, now=now)
    assert metrics["ModelCacheHit"]["value"] == 0.5
    assert metrics["ModelCacheHit"]["timestamp"] == "2026-11-01T11:58:00+00:00"
    assert metrics["LoadedModelCount"]["value"] is None


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (None, "", "no data"),
        (2.0, "", "2"),
        (0.875, "", "0.88"),
        (41.5, "%", "41.5%"),
        (1234567.8, "us", "1,234,568 us"),
    ],
)
def test_format(value, unit, text):
    assert status._format(value, unit) == text


def _stack(name: str, outputs: dict[str, str]) -> None:
    """A deployed stack in moto's CloudFormation with the given outputs."""
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", region_name="us-west-2").create_stack(
        StackName=name, TemplateBody=json.dumps(template)
    )


ENDPOINT_URL = (
    "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2"
    "#dashboards/dashboard/EndpointsDashboard-AbC123"
)
TRAINING_URL = (
    "https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2"
    "#dashboards/dashboard/DashboardTraining-XyZ789"
)


def test_dashboard_links_come_from_the_stack_outputs(endpoint, project, mlp):
    _stack(
        "MlPlatform-Inference",
        {"TritonEnsemblesName": ENDPOINT, "EndpointsDashboardUrl": ENDPOINT_URL},
    )
    _stack("MlPlatform-TrainingCluster", {"TrainingDashboardUrl": TRAINING_URL})
    report = json.loads(mlp("--cdk-json", project, "status", "--json").out)
    assert report["endpoints"][0]["dashboard_url"] == ENDPOINT_URL
    assert report["training_dashboard_url"] == TRAINING_URL
    lines = mlp("--cdk-json", project, "status").out.splitlines()
    start = lines.index("CloudWatch dashboards:")
    assert lines[start + 1 :] == [
        f"  {ENDPOINT}: {ENDPOINT_URL}",
        f"  training cluster: {TRAINING_URL}",
    ]


def test_missing_stacks_leave_the_links_empty(endpoint, project, mlp):
    report = json.loads(mlp("--cdk-json", project, "status", "--json").out)
    assert report["endpoints"][0]["dashboard_url"] is None
    assert report["training_dashboard_url"] is None
    lines = mlp("--cdk-json", project, "status").out.splitlines()
    start = lines.index("CloudWatch dashboards:")
    # No line is dropped: the training dashboard's says its stack output is missing.
    assert lines[start + 1 :] == [
        f"  {ENDPOINT}: - (stack output not found)",
        "  training cluster: - (stack output not found)",
    ]


def test_endpoints_past_the_first_stack_are_looked_up_in_the_next():
    from ml_platform.stack_outputs import (
        ENDPOINTS_PER_STACK,
        endpoint_groups,
        inference_stack_short,
    )

    names = [f"e{i}" for i in range(ENDPOINTS_PER_STACK + 1)]
    groups = endpoint_groups(names)
    assert [inference_stack_short(i) for i in range(len(groups))] == ["Inference", "Inference2"]
    assert groups[1] == (names[-1],)


def test_no_training_cluster_says_so_instead_of_dropping_the_line(endpoint, project, mlp):
    config = json.loads(project.read_text())
    features = {"training_cluster": False, "triton_on_eks": False}  # the second needs the first
    config["context"]["ml-platform"]["features"] = features
    project.write_text(json.dumps(config))
    lines = mlp("--cdk-json", project, "status").out.splitlines()
    assert lines[-1] == "  training cluster: - (features.training_cluster is off)"
