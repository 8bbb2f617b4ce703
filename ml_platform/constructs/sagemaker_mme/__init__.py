"""A SageMaker multi-model endpoint running Triton, serving ensemble archives by TargetModel.

aws-cdk's higher-level SageMaker constructs do not support multi-model endpoints, so this
builds on the Cfn resources. The construct and its props are :mod:`.endpoint`; its ``metric_*``
methods come from :mod:`.metrics`. Its scaling, alarms, execution-role statements and log group
are built by the private modules ``_scaling``, ``_alarms``, ``_grants`` and ``_log_group``.

Exported: the construct, its props, its metrics mixin (the type dashboards and alarms read), and
the ids of the warnings it gives, for ``Annotations.acknowledge_warning``.
"""

from ml_platform.constructs.sagemaker_mme.endpoint import (
    MODEL_LOAD_GPU_LIMIT_WARNING,
    NO_ALARM_TOPIC_WARNING,
    SINGLE_INSTANCE_WARNING,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.constructs.sagemaker_mme.metrics import EndpointMetrics

__all__ = [
    "MODEL_LOAD_GPU_LIMIT_WARNING",
    "NO_ALARM_TOPIC_WARNING",
    "SINGLE_INSTANCE_WARNING",
    "EndpointMetrics",
    "TritonMultiModelEndpoint",
    "TritonMultiModelEndpointProps",
]
