"""The endpoint's CloudWatch metrics, one ``metric_*`` method each (dashboards and alarms
read these, not their own copies)."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch

from ml_platform.constructs._periods import FIVE_MINUTES

__all__ = ["LOAD_FAILURE_NAMESPACE", "VARIANT_NAME", "EndpointMetrics"]

VARIANT_NAME = "AllTraffic"
LOAD_FAILURE_NAMESPACE = "MlPlatform/Triton"


class EndpointMetrics:
    """The ``metric_*`` methods of :class:`TritonMultiModelEndpoint` (a mixin: they only need
    :attr:`endpoint_name`)."""

    endpoint_name: str

    def metric(
        self, metric_name: str, *, namespace: str = "AWS/SageMaker", **options: Any
    ) -> cloudwatch.Metric:
        """A metric of this endpoint's variant (dimensions ``EndpointName``, ``VariantName``).
        ``options`` as ``cloudwatch.Metric`` takes them (``period``, ``statistic``,
        ``label``...); default: 5-minute average."""
        settings: dict[str, Any] = {
            "period": FIVE_MINUTES,
            "statistic": "Average",
            **options,
        }
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME},
            **settings,
        )

    def _metric(
        self, namespace: str, name: str, statistic: str, options: dict[str, Any] | None = None
    ) -> cloudwatch.Metric:
        return self.metric(name, namespace=namespace, **{"statistic": statistic, **(options or {})})

    def metric_model_loading_wait_time(self, **options: Any) -> cloudwatch.Metric:
        """Average time (microseconds) requests waited for their model to load. ``options``
        as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "ModelLoadingWaitTime", "Average", options)

    def metric_model_cache_hit(self, **options: Any) -> cloudwatch.Metric:
        """Share of requests whose model was already loaded. ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "ModelCacheHit", "Average", options)

    def metric_invocation_5xx_errors(self, **options: Any) -> cloudwatch.Metric:
        """Server errors returned by the endpoint. ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "Invocation5XXErrors", "Sum", options)

    def metric_gpu_memory_utilization(self, **options: Any) -> cloudwatch.Metric:
        """GPU memory in use, percent (instance metric). ``options`` as for :meth:`metric`."""
        return self._metric("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Maximum", options)

    def metric_model_load_failures(self, **options: Any) -> cloudwatch.Metric:
        """Triton's "failed to load" log lines, counted by the metric filter on the endpoint's
        log group (no dimensions). ``options`` as ``cloudwatch.Metric`` takes them."""
        settings: dict[str, Any] = {"period": FIVE_MINUTES, "statistic": "Sum", **options}
        return cloudwatch.Metric(
            namespace=LOAD_FAILURE_NAMESPACE,
            metric_name=f"{self.endpoint_name}-ModelLoadFailures",
            **settings,
        )

    def metric_loaded_model_count(self, **options: Any) -> cloudwatch.Metric:
        """Models loaded in the containers. ``options`` as for :meth:`metric`."""
        return self._metric("/aws/sagemaker/Endpoints", "LoadedModelCount", "Maximum", options)

    # The metrics below, like those above, as AWS lists them (namespace, dimensions EndpointName
    # and VariantName, a valid statistic; latencies and loading times in microseconds):
    # https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html and
    # https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html
    def metric_invocations(self, **options: Any) -> cloudwatch.Metric:
        """InvokeEndpoint requests (Sum). ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "Invocations", "Sum", options)

    def metric_invocations_per_instance(self, **options: Any) -> cloudwatch.Metric:
        """Requests per instance (Sum; the scaling policy tracks it per minute)."""
        return self._metric("AWS/SageMaker", "InvocationsPerInstance", "Sum", options)

    def metric_invocation_4xx_errors(self, **options: Any) -> cloudwatch.Metric:
        """Client errors (4xx) returned by the endpoint (Sum)."""
        return self._metric("AWS/SageMaker", "Invocation4XXErrors", "Sum", options)

    def metric_model_latency(self, **options: Any) -> cloudwatch.Metric:
        """Time the container took to answer, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelLatency", "Average", options)

    def metric_overhead_latency(self, **options: Any) -> cloudwatch.Metric:
        """Time SageMaker added around the container, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "OverheadLatency", "Average", options)

    def metric_model_loading_time(self, **options: Any) -> cloudwatch.Metric:
        """Time a model took to load in the container, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelLoadingTime", "Average", options)

    def metric_model_downloading_time(self, **options: Any) -> cloudwatch.Metric:
        """Time a model took to download from S3, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelDownloadingTime", "Average", options)

    def metric_model_unloading_time(self, **options: Any) -> cloudwatch.Metric:
        """Time a model took to unload, microseconds (Average; SampleCount counts unloads)."""
        return self._metric("AWS/SageMaker", "ModelUnloadingTime", "Average", options)

    def metric_gpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """GPU in use, percent (instance metric, Maximum over instances)."""
        return self._metric("/aws/sagemaker/Endpoints", "GPUUtilization", "Maximum", options)

    def metric_cpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """CPU in use, percent of one core times cores (instance metric, Maximum)."""
        return self._metric("/aws/sagemaker/Endpoints", "CPUUtilization", "Maximum", options)

    def metric_memory_utilization(self, **options: Any) -> cloudwatch.Metric:
        """Memory in use, percent (instance metric, Maximum)."""
        return self._metric("/aws/sagemaker/Endpoints", "MemoryUtilization", "Maximum", options)

    def metric_disk_utilization(self, **options: Any) -> cloudwatch.Metric:
        """Disk in use, percent (instance metric, Maximum): archives cached on disk."""
        return self._metric("/aws/sagemaker/Endpoints", "DiskUtilization", "Maximum", options)
