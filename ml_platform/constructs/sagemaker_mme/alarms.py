"""The endpoint's alarms, and the log metric filter that counts Triton's failed model loads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns

from ml_platform.constructs.sagemaker_mme.metrics import LOAD_FAILURE_NAMESPACE

if TYPE_CHECKING:
    from ml_platform.constructs.sagemaker_mme.endpoint import TritonMultiModelEndpoint

#: CloudWatch Logs filter pattern of the load-failure metric: the quoted phrase matches log
#: events that contain it, case-sensitively (CloudWatch Logs user guide, "Filter pattern syntax
#: for metric filters": https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html).
#: tests/e2e/triton/test_local_server.py matches it against a real server's failed loads.
LOAD_FAILURE_PATTERN = '"failed to load"'


def add_load_failure_filter(endpoint: TritonMultiModelEndpoint) -> logs.CfnMetricFilter:
    """The metric filter counting Triton's "failed to load" lines in the endpoint's log group.

    Triton logs "failed to load '<model>' version <n>: <reason>" when a model of an
    archive cannot load (triton-inference-server/core, src/model_lifecycle.cc). SageMaker's
    own metrics do not say so (ModelLoadingWaitTime only times loads, LoadedModelCount also
    drops on eviction), so a metric filter on the endpoint's log group counts those lines.
    It references the stack's log group, so CloudFormation creates it after the group."""
    return logs.CfnMetricFilter(
        endpoint,
        "ModelLoadFailures",
        log_group_name=endpoint.log_group.log_group_name,
        filter_pattern=logs.FilterPattern.literal(LOAD_FAILURE_PATTERN).log_pattern_string,
        metric_transformations=[
            logs.CfnMetricFilter.MetricTransformationProperty(
                metric_namespace=LOAD_FAILURE_NAMESPACE,
                metric_name=f"{endpoint.endpoint_name}-ModelLoadFailures",
                metric_value="1",
                default_value=0,
            )
        ],
    )


#: GPU memory (%, 5-minute maximum, 3 periods in a row) past which the model cache is full.
GPU_MEMORY_ALARM_PERCENT = 95


def add_alarms(
    endpoint: TritonMultiModelEndpoint, alarm_topic: sns.ITopic | None
) -> dict[str, cloudwatch.Alarm]:
    """The endpoint's alarms by metric name, each notifying ``alarm_topic`` (alarm and OK)
    when one is given (the inference stack always gives one)."""
    endpoint_name = endpoint.endpoint_name
    alarms = {
        "ModelLoadFailures": endpoint.metric_model_load_failures().create_alarm(
            endpoint,
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
        "ModelLoadingWaitTime": endpoint.metric_model_loading_wait_time().create_alarm(
            endpoint,
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
        "GPUMemoryUtilization": endpoint.metric_gpu_memory_utilization().create_alarm(
            endpoint,
            "GpuMemoryAlarm",
            threshold=GPU_MEMORY_ALARM_PERCENT,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: GPU memory over {GPU_MEMORY_ALARM_PERCENT}% "
            "for 15 min: loads evict models",
        ),
        "Invocation5XXErrors": endpoint.metric_invocation_5xx_errors().create_alarm(
            endpoint,
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
