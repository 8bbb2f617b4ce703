"""A SageMaker multi-model endpoint running Triton, serving ensemble archives by TargetModel.

aws-cdk's higher-level SageMaker constructs do not support multi-model endpoints, so this
builds on the Cfn resources. One module per concern: :mod:`.endpoint` (the construct: model,
endpoint config, endpoint), :mod:`.scaling`, :mod:`.alarms`, :mod:`.metrics`, :mod:`.grants`
(execution role statements, ``grant_invoke``) and :mod:`.log_group`.
"""

from ml_platform.constructs.sagemaker_mme.alarms import (
    GPU_MEMORY_ALARM_PERCENT,
    LOAD_FAILURE_PATTERN,
)
from ml_platform.constructs.sagemaker_mme.endpoint import (
    ADDITIONAL_ARGS_ENV,
    DALI_RELEASE_AFTER_UNLOAD,
    DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT,
    ENDPOINT_NAME,
    LOG_INFO_ENV,
    LOG_VERBOSE_ENV,
    MODEL_LOAD_GPU_LIMIT_ENV,
    MODEL_LOAD_GPU_LIMIT_WARNING,
    NO_ALARM_TOPIC_WARNING,
    SINGLE_INSTANCE_WARNING,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
    container_environment,
    model_load_environment,
)
from ml_platform.constructs.sagemaker_mme.grants import (
    GRANT_POLICY_BUDGET,
    policy_size,
    sagemaker_trust_conditions,
)
from ml_platform.constructs.sagemaker_mme.log_group import (
    LOG_KEY_ID,
    endpoint_log_group_name,
    shared_log_key,
)
from ml_platform.constructs.sagemaker_mme.metrics import (
    LOAD_FAILURE_NAMESPACE,
    VARIANT_NAME,
    EndpointMetrics,
)
from ml_platform.constructs.sagemaker_mme.scaling import EndpointScaling

__all__ = [
    "ADDITIONAL_ARGS_ENV",
    "DALI_RELEASE_AFTER_UNLOAD",
    "DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT",
    "ENDPOINT_NAME",
    "GPU_MEMORY_ALARM_PERCENT",
    "GRANT_POLICY_BUDGET",
    "LOAD_FAILURE_NAMESPACE",
    "LOAD_FAILURE_PATTERN",
    "LOG_INFO_ENV",
    "LOG_KEY_ID",
    "LOG_VERBOSE_ENV",
    "MODEL_LOAD_GPU_LIMIT_ENV",
    "MODEL_LOAD_GPU_LIMIT_WARNING",
    "NO_ALARM_TOPIC_WARNING",
    "SINGLE_INSTANCE_WARNING",
    "VARIANT_NAME",
    "EndpointMetrics",
    "EndpointScaling",
    "TritonMultiModelEndpoint",
    "TritonMultiModelEndpointProps",
    "container_environment",
    "endpoint_log_group_name",
    "model_load_environment",
    "policy_size",
    "sagemaker_trust_conditions",
    "shared_log_key",
]
