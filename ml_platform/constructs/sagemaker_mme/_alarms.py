"""The endpoint's alarms, and the log metric filter that counts Triton's failed model loads."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from ml_platform.constructs.sagemaker_mme.metrics import LOAD_FAILURE_NAMESPACE, EndpointMetrics

#: CloudWatch Logs filter pattern of the load-failure metric: the quoted phrase matches log
#: events that contain it, case-sensitively (CloudWatch Logs user guide, "Filter pattern syntax
#: for metric filters": https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html).
#: tests/e2e/triton/test_local_server.py matches it against a real server's failed loads.
LOAD_FAILURE_PATTERN = '"failed to load"'


def add_load_failure_filter(
    scope: Construct, *, endpoint_name: str, log_group: logs.ILogGroup
) -> logs.CfnMetricFilter:
    """The metric filter (in ``scope``, the endpoint construct) counting Triton's "failed to
    load" lines in the endpoint's ``log_group``.

    Triton logs "failed to load '<model>' version <n>: <reason>" when a model of an
    archive cannot load (triton-inference-server/core, src/model_lifecycle.cc). SageMaker's
    own metrics do not say so (ModelLoadingWaitTime only times loads, LoadedModelCount also
    drops on eviction), so a metric filter on the endpoint's log group counts those lines.
    It references the stack's log group, so CloudFormation creates it after the group."""
    return logs.CfnMetricFilter(
        scope,
        "ModelLoadFailures",
        log_group_name=log_group.log_group_name,
        filter_pattern=logs.FilterPattern.literal(LOAD_FAILURE_PATTERN).log_pattern_string,
        metric_transformations=[
            logs.CfnMetricFilter.MetricTransformationProperty(
                metric_namespace=LOAD_FAILURE_NAMESPACE,
                metric_name=f"{endpoint_name}-ModelLoadFailures",
                metric_value="1",
                default_value=0,
            )
        ],
    )


#: GPU memory (%, 5-minute maximum, 3 periods in a row) past which the model cache is full.
GPU_MEMORY_ALARM_PERCENT = 95


def add_alarms(
    scope: Construct, metrics: EndpointMetrics, alarm_topic: sns.ITopic | None
) -> dict[str, cloudwatch.Alarm]:
    """The alarms (in ``scope``, the endpoint construct) on the endpoint's ``metrics``, by
    metric name, each notifying ``alarm_topic`` (alarm and OK) when one is given (the inference
    stack always gives one). Taking the metrics, not the endpoint class, keeps this module
    below :mod:`.endpoint`, which imports it."""
    endpoint_name = metrics.endpoint_name
    alarms = {
        "ModelLoadFailures": metrics.metric_model_load_failures().create_alarm(
            scope,
            "ModelLoadFailureAlarm",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: Triton failed to load a model of an archive "
            "(see the endpoint's log group for 'failed to load')",
        ),
        # Both metrics exist only while something happens (a load; an instance): no data is
        # no problem, so neither alarm sits in INSUFFICIENT_DATA on a quiet endpoint.
        "ModelLoadingWaitTime": metrics.metric_model_loading_wait_time().create_alarm(
            scope,
            "ModelLoadingWaitAlarm",
            # Microseconds: requests waited over 30 s on average for a model to load.
            threshold=30_000_000,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: requests wait long for models to load "
            "(too many archives for the GPU, or too few instances)",
        ),
        # With no load cap the model cache fills the GPU by design, and a load that does not fit
        # answers 507 so SageMaker evicts (docs/serving-sagemaker.md, "GPU memory and
        # eviction"): a full GPU alone is normal. Sustained above GPU_MEMORY_ALARM_PERCENT for
        # 15 minutes, every new load evicts; with the load-wait alarm, the instance thrashes.
        "GPUMemoryUtilization": metrics.metric_gpu_memory_utilization().create_alarm(
            scope,
            "GpuMemoryAlarm",
            threshold=GPU_MEMORY_ALARM_PERCENT,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: GPU memory over {GPU_MEMORY_ALARM_PERCENT}% "
            "for 15 min: loads evict models",
        ),
        "Invocation5XXErrors": metrics.metric_invocation_5xx_errors().create_alarm(
            scope,
            "Invocation5xxAlarm",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: server errors (5xx) from the endpoint",
        ),
    }
    if alarm_topic is not None:
        for alarm in alarms.values():
            alarm.add_alarm_action(cloudwatch_actions.SnsAction(alarm_topic))
            alarm.add_ok_action(cloudwatch_actions.SnsAction(alarm_topic))
    return alarms
