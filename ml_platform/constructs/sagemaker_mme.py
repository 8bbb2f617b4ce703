"""A SageMaker multi-model endpoint running Triton, serving ensemble archives by TargetModel.

aws-cdk's higher-level SageMaker constructs do not support multi-model endpoints, so this
builds on the Cfn resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from aws_cdk import (
    Annotations,
    ArnFormat,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Tags,
    Token,
)
from aws_cdk import (
    aws_applicationautoscaling as appscaling,
)
from aws_cdk import (
    aws_cloudwatch as cloudwatch,
)
from aws_cdk import (
    aws_cloudwatch_actions as cloudwatch_actions,
)
from aws_cdk import (
    aws_iam as iam,
)
from aws_cdk import (
    aws_kms as kms,
)
from aws_cdk import (
    aws_logs as logs,
)
from aws_cdk import (
    aws_s3 as s3,
)
from aws_cdk import (
    aws_sagemaker as sagemaker,
)
from aws_cdk import (
    aws_sns as sns,
)
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs.endpoint_scaling import (
    RESOURCE_TYPE,
    SCALING_TAG_KEY,
    EndpointScalingProvider,
)
from ml_platform.constructs.nag import acknowledge, rendered_resource
from ml_platform.constructs.network import FLOW_LOG_KEY_ACTIONS
from ml_platform.instances import SAGEMAKER_MME_GPU_INSTANCES
from ml_platform.sagemaker_images import (
    DEFAULT_INFERENCE_AMI_VERSION,
    DEFAULT_TRITON_VERSION,
    INFERENCE_AMI_VERSIONS,
    TRITON_REPOSITORY,
    UNPATCHED_TRITON_WARNING,
    inference_ami_problem,
    triton_account,
    triton_image_uri,
    triton_region_problem,
    triton_release_warning,
)
from ml_platform.triton.archive_names import ARCHIVE_SUFFIX, ArchiveRef, parse_ref

VARIANT_NAME = "AllTraffic"
# Triton's TensorFlow backend (releases up to 25.02) does not give GPU memory back when a model
# unloads (the source design's notebook, MME_TF_DALI+TRT), and neither does DALI unless its
# backend is started with release_after_unload (dali_backend docs/config.md), which the
# container's serve script cannot pass. The serve script does pass Triton's
# --model-load-gpu-limit from SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT: past that share of GPU
# memory, Triton refuses new loads ("failed to load", counted by the load-failure alarm)
# instead of letting a running model fail on CUDA memory:
# https://github.com/triton-inference-server/server/blob/main/docker/sagemaker/serve
# https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_management.md
DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT = limits.DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT


def model_load_environment(limit_percent: int) -> dict[str, str]:
    """The container environment that caps model loads at ``limit_percent`` of GPU memory
    (empty for 100: no limit)."""
    if limit_percent >= 100:
        return {}
    return {"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": f"{limit_percent / 100:g}"}


LOAD_FAILURE_NAMESPACE = "MlPlatform/Triton"
#: CloudWatch Logs filter pattern of the load-failure metric: the quoted phrase matches log
#: events that contain it, case-sensitively (CloudWatch Logs user guide, "Filter pattern syntax
#: for metric filters": https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html).
#: tests/triton/test_local_server.py matches it against a real server's failed loads.
LOAD_FAILURE_PATTERN = '"failed to load"'
ENDPOINT_NAME = limits.ENDPOINT_NAME.regex  # CreateEndpoint's EndpointName
# The SageMaker Triton container's start script passes --log-verbose=true (a log line per
# request) unless this variable is set, and then passes its value as --log-verbose:
# https://github.com/triton-inference-server/server/blob/main/docker/sagemaker/serve
LOG_VERBOSE_ENV = "SAGEMAKER_TRITON_LOG_VERBOSE"


LOG_KEY_ID = "EndpointLogsKey"


def shared_log_key(scope: Construct, removal_policy: RemovalPolicy) -> kms.IKey:
    """The stack's key for endpoint log groups, created on first use. One key per stack, not
    per endpoint: a stack holds 30 endpoints within CloudFormation's 500 resources.

    Its policy lets CloudWatch Logs of the stack's region use it under the
    ``kms:EncryptionContext:aws:logs:arn`` condition, for SageMaker endpoint log groups of this
    account only (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
    """
    stack = Stack.of(scope)
    found = stack.node.try_find_child(LOG_KEY_ID)
    if isinstance(found, kms.Key):
        return found
    key = kms.Key(
        stack,
        LOG_KEY_ID,
        description="Encryption of the SageMaker endpoint log groups of this stack",
        enable_key_rotation=True,
        removal_policy=removal_policy,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsOfEndpointLogGroups",
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=list(FLOW_LOG_KEY_ACTIONS),
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=endpoint_log_group_name("*"),
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    return key


def endpoint_log_group_name(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's container logs to.
    https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html"""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


class TritonMultiModelEndpoint(Construct):
    """Triton on a SageMaker multi-model endpoint (GPU), with scaling and alarms.

    The model is created with ``Mode: MultiModel`` over ``s3://<bucket>/<model_prefix>``;
    each request picks an archive under that prefix with ``TargetModel``.

    Args:
        bucket: Bucket holding the archives.
        model_prefix: Key prefix of the archives, ending in ``/``. Default ``models/``.
        archives: Archives this endpoint is meant to serve, as references of
            :mod:`ml_platform.triton.archive_names`: a logical name (``model_trt_python``: any
            version) or an exact version (``model_trt_python@v1a2b3c4d``); :class:`ArchiveRef`
            values too. They are the default of :meth:`grant_invoke` (never written into the
            template otherwise: thousands of archives must not grow it).
        endpoint_name: Endpoint name (1-63 letters, digits, hyphens). Required: clients and
            scaling refer to it.
        instance_type: Single-GPU instance type MME on GPU supports. Default
            ``ml.g4dn.4xlarge``.
        initial_instances: Default 1. min_instances: Default 1. max_instances: Default 2.
        invocations_per_instance: Target of the invocations-per-instance scaling policy
            (per minute). Default 1000.
        triton_version: SageMaker Triton container version. Default ``25.09``, patched against
            NVIDIA's August 2025 bulletin; an older release gets a synth-time warning naming
            CVE-2025-23319/23320/23334 (id ``ml-platform:triton-unpatched-release``,
            acknowledgeable with ``Annotations.of(scope).acknowledge_warning``).
        image_uri: Overrides the container image (default: SageMaker's Triton image for the
            stack's region and ``triton_version``).
        inference_ami_version: The instances' AMI (driver/CUDA pairing), one of
            :data:`INFERENCE_AMI_VERSIONS`. Default ``al2023-ami-sagemaker-inference-gpu-4-1``
            (driver 580: see :data:`DEFAULT_INFERENCE_AMI_VERSION` for why it fits the
            container's CUDA); one that cannot run the release's CUDA is refused.
        alarm_topic: SNS topic every alarm notifies (alarm and OK). Default none.
        network_isolation: ``EnableNetworkIsolation`` on the model: the container (which runs
            the archives' Python) gets no network. Default true.
        model_load_gpu_limit_percent: Share of GPU memory past which Triton refuses to load
            another model (``SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT``; see
            :data:`DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT`). Default 80; 100: no limit.
        instance_type_changes: Make a change of ``instance_type`` deploy although autoscaling
            is registered (SageMaker refuses that update otherwise): two custom resources of
            one handler per stack deregister the target before the endpoint moves and register
            it, with the target-tracking policy, after. Default true. False: a plain
            target-tracking policy, no Lambda; an instance-type change then needs the manual
            steps of https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html.
        role: Execution role SageMaker assumes (trusting ``sagemaker.amazonaws.com``). The
            construct adds the statements it needs to it when the role is mutable. Default: a
            new role.
        log_retention: Retention of the endpoint's log group
            ``/aws/sagemaker/Endpoints/<endpoint_name>``, which the construct creates (encrypted,
            before the endpoint, so SageMaker never makes it without retention). Default one
            year.
        log_key: KMS key encrypting that log group. Default: one key per stack (rotation on,
            :func:`shared_log_key`) whose policy lets CloudWatch Logs use it for the stack's
            region's endpoint log groups only.
        log_removal_policy: Of the log group and the new key. Default RETAIN.
        log_verbose: Triton's ``--log-verbose`` level, passed as
            ``SAGEMAKER_TRITON_LOG_VERBOSE``. Default 0 (off; the container's own default is
            verbose, a log line for every request).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        endpoint_name: str,
        archives: Sequence[str | ArchiveRef],
        model_prefix: str = limits.DEFAULT_MODEL_PREFIX,
        instance_type: str = limits.DEFAULT_ENDPOINT_INSTANCE_TYPE,
        initial_instances: int = limits.DEFAULT_INITIAL_INSTANCES,
        min_instances: int = limits.DEFAULT_MIN_INSTANCES,
        max_instances: int = limits.DEFAULT_MAX_INSTANCES,
        invocations_per_instance: int = limits.DEFAULT_INVOCATIONS_PER_INSTANCE,
        triton_version: str = DEFAULT_TRITON_VERSION,
        image_uri: str | None = None,
        role: iam.IRole | None = None,
        inference_ami_version: str = DEFAULT_INFERENCE_AMI_VERSION,
        alarm_topic: sns.ITopic | None = None,
        network_isolation: bool = True,
        instance_type_changes: bool = True,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        log_key: kms.IKey | None = None,
        log_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        log_verbose: int = 0,
        model_load_gpu_limit_percent: int = DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT,
    ) -> None:
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        errors = []
        if instance_type not in SAGEMAKER_MME_GPU_INSTANCES:
            errors.append(
                f"instance_type={instance_type!r}: multi-model endpoints on GPU support "
                f"{sorted(SAGEMAKER_MME_GPU_INSTANCES)}"
            )
        if not 1 <= min_instances <= initial_instances <= max_instances:
            errors.append(
                f"min_instances={min_instances}, initial_instances={initial_instances}, "
                f"max_instances={max_instances}: expected 1 <= min <= initial <= max"
            )
        if not Token.is_unresolved(endpoint_name) and not limits.ENDPOINT_NAME.matches(
            endpoint_name
        ):
            errors.append(
                f"endpoint_name={endpoint_name!r}: expected 1 to 63 letters, digits and hyphens, "
                "starting and ending with a letter or digit"
            )
        refs = []
        for archive in archives:
            try:
                refs.append(archive if isinstance(archive, ArchiveRef) else parse_ref(archive))
            except ValueError as error:
                errors.append(f"archives: {error}")
        if not archives:
            errors.append("archives=[]: expected at least one archive")
        duplicates = sorted({str(r) for r in refs if refs.count(r) > 1})
        if duplicates:
            errors.append(f"archives: {duplicates} given more than once")
        if not model_prefix.endswith("/") or model_prefix.startswith("/"):
            errors.append(
                f"model_prefix={model_prefix!r}: expected a relative prefix ending in '/'"
            )
        if image_uri is None and Token.is_unresolved(region):
            errors.append("image_uri=None: needs a stack with a concrete region, or an image_uri")
        elif image_uri is None:
            problem = triton_region_problem(region, triton_version)
            if problem:
                errors.append(f"triton_version={triton_version!r}: {problem}")
        if inference_ami_version not in INFERENCE_AMI_VERSIONS:
            errors.append(
                f"inference_ami_version={inference_ami_version!r}: expected one of "
                f"{list(INFERENCE_AMI_VERSIONS)}"
            )
        elif image_uri is None:
            problem = inference_ami_problem(triton_version, inference_ami_version)
            if problem:
                errors.append(f"inference_ami_version={inference_ami_version!r}: {problem}")
        if model_load_gpu_limit_percent not in limits.MODEL_LOAD_GPU_LIMIT_PERCENT:
            errors.append(
                f"model_load_gpu_limit_percent={model_load_gpu_limit_percent}: expected 1 to 100 "
                "(100: no limit)"
            )
        if not Token.is_unresolved(log_verbose) and not (
            isinstance(log_verbose, int) and not isinstance(log_verbose, bool) and log_verbose >= 0
        ):
            errors.append(f"log_verbose={log_verbose!r}: expected a level, an integer >= 0")
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))
        warning = triton_release_warning(triton_version) if image_uri is None else None
        if warning:
            Annotations.of(self).add_warning_v2(UNPATCHED_TRITON_WARNING, warning)

        self.endpoint_name = endpoint_name
        # What dashboards draw the metrics against (ml_platform/constructs/dashboards.py).
        self.invocations_per_instance = invocations_per_instance
        self.min_instances, self.max_instances = min_instances, max_instances
        self.archives: tuple[ArchiveRef, ...] = tuple(refs)
        self.image_uri = image_uri or triton_image_uri(region, triton_version)
        partition = Stack.of(self).partition

        self.role: iam.IRole = role or iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com", conditions=sagemaker_trust_conditions(self)
            ),
            description=f"SageMaker execution role of the {endpoint_name} Triton endpoint",
        )
        # Read only the archives under the prefix (no bucket-wide or wildcard actions).
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{model_prefix}*")]
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{model_prefix}*"]}},
            )
        )
        if image_uri is None:  # SageMaker's Triton image (a given image brings its own access)
            account = triton_account(region, triton_version)
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                        "ecr:BatchCheckLayerAvailability",
                    ],
                    resources=[
                        f"arn:{partition}:ecr:{region}:{account}:repository/{TRITON_REPOSITORY}"
                    ],
                )
            )
        token_statement = iam.PolicyStatement(
            actions=["ecr:GetAuthorizationToken"], resources=["*"]
        )
        self.role.add_to_principal_policy(token_statement)
        # The endpoint's log group and its streams. Typed arguments: a plain dict given to a
        # jsii struct parameter silently loses its snake_case keys (resource_name, arn_format).
        stack = Stack.of(self)
        log_group = endpoint_log_group_name(endpoint_name)
        # The stack owns the endpoint's log group: SageMaker would create it on first start
        # with no retention and no key. Created before the endpoint (dependency below).
        if log_key is None:
            log_key = shared_log_key(self, log_removal_policy)
        self.log_key = log_key
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=log_group,
            retention=log_retention,
            encryption_key=log_key,
            removal_policy=log_removal_policy,
        )
        self.log_group_arns = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"{log_group}{suffix}",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for suffix in (":*", ":log-stream:*")
        ]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=self.log_group_arns,
            )
        )
        for arn in self.log_group_arns:
            acknowledge(
                self.role,
                f"AwsSolutions-IAM5[Resource::{rendered_resource(self, arn)}]",
                "SageMaker names the log streams of an endpoint after its instances; the "
                "wildcard covers only the streams of this endpoint's own log group.",
            )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={
                    "StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}
                },
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level "
            "permissions; PutMetricData is limited to SageMaker's namespaces by condition.",
        )
        archives_arn = rendered_resource(self, bucket.arn_for_objects(f"{model_prefix}*"))
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{archives_arn}]",
            "A multi-model endpoint loads any archive under its prefix on demand: read access "
            "is to that prefix only, with s3:GetObject alone.",
        )

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image_uri,
                mode="MultiModel",
                model_data_url=f"s3://{bucket.bucket_name}/{model_prefix}",
                environment={
                    LOG_VERBOSE_ENV: str(log_verbose),
                    **model_load_environment(model_load_gpu_limit_percent),
                },
            ),
            # SageMaker, not the container, fetches archives from S3 and hands Triton a local
            # path (the multi-model container contract: POST /models {"url": "/opt/ml/models/
            # <name>/model"}, https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html),
            # and the multi-model endpoint feature list excludes only Elastic Inference
            # (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html), so the
            # container runs isolated: the archives' Python cannot reach the network.
            enable_network_isolation=network_isolation,
        )
        # SageMaker checks the role's permissions when it creates the model: policy first.
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.model.node.add_dependency(policy)
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=instance_type,
                    initial_instance_count=initial_instances,
                    initial_variant_weight=1,
                    inference_ami_version=inference_ami_version,
                )
            ],
        )
        acknowledge(
            self.endpoint_config,
            "AwsSolutions-SM2",
            "GPU instances for MME (g4dn, g5, p3) keep models on instance-store NVMe volumes, "
            "which are hardware-encrypted; SageMaker rejects a KmsKeyId for them.",
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Autoscaling owns the instance count: keep it across config updates.
            retain_all_variant_properties=True,
        )
        self.endpoint.node.add_dependency(self.log_group)

        self.scalable_target = appscaling.ScalableTarget(
            self,
            "Scaling",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=min_instances,
            max_capacity=max_instances,
        )
        self.scalable_target.node.add_dependency(self.endpoint)
        scale_in = Duration.minutes(10)  # loading models on a new instance is slow
        scale_out = Duration.minutes(2)
        self.scaling_guard: CustomResource | None = None
        self.scaling_policy: CustomResource | None = None
        if instance_type_changes:
            # SageMaker refuses an update that changes the instance type of an autoscaled
            # variant: the custom resources deregister the target before the endpoint moves
            # and register it, with the policy, after (endpoint_scaling.py).
            provider = EndpointScalingProvider.of(self)
            provider.serve(endpoint_name, VARIANT_NAME)
            properties = {
                "EndpointName": endpoint_name,
                "VariantName": VARIANT_NAME,
                "InstanceType": instance_type,
                "MinCapacity": min_instances,
                "MaxCapacity": max_instances,
                "PolicyName": f"{endpoint_name}-invocations-per-instance",
                "TargetValue": invocations_per_instance,
                "ScaleInCooldown": scale_in.to_seconds(),
                "ScaleOutCooldown": scale_out.to_seconds(),
                "TagKey": SCALING_TAG_KEY,
                "TagValue": provider.tag_value,
            }
            # The handler may act only on targets with its stack's tag: CloudFormation tags the
            # target it creates (an in-place update on existing targets).
            Tags.of(self.scalable_target).add(SCALING_TAG_KEY, provider.tag_value)
            self.scaling_guard = CustomResource(
                self,
                "ScalingGuard",
                service_token=provider.service_token,
                resource_type=RESOURCE_TYPE,
                properties={**properties, "Phase": "before"},
            )
            self.endpoint.node.add_dependency(self.scaling_guard)
            self.scaling_policy = CustomResource(
                self,
                "ScalingPolicy",
                service_token=provider.service_token,
                resource_type=RESOURCE_TYPE,
                properties={**properties, "Phase": "after"},
            )
            self.scaling_policy.node.add_dependency(self.scalable_target)
        else:
            self.scalable_target.scale_to_track_metric(
                "InvocationsPerInstance",
                target_value=invocations_per_instance,
                predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
                scale_in_cooldown=scale_in,
                scale_out_cooldown=scale_out,
            )

        # Triton logs "failed to load '<model>' version <n>: <reason>" when a model of an
        # archive cannot load (triton-inference-server/core, src/model_lifecycle.cc). SageMaker's
        # own metrics do not say so (ModelLoadingWaitTime only times loads, LoadedModelCount also
        # drops on eviction), so a metric filter on the endpoint's log group counts those lines.
        # It references the stack's log group, so CloudFormation creates it after the group.
        self.load_failure_filter = logs.CfnMetricFilter(
            self,
            "ModelLoadFailures",
            log_group_name=self.log_group.log_group_name,
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
        self.alarms = {
            "ModelLoadFailures": self.metric_model_load_failures().create_alarm(
                self,
                "ModelLoadFailureAlarm",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{endpoint_name}: Triton failed to load a model of an archive "
                "(see the endpoint's log group for 'failed to load')",
            ),
            "ModelLoadingWaitTime": self.metric_model_loading_wait_time().create_alarm(
                self,
                "ModelLoadingWaitAlarm",
                # Microseconds: requests waited over 30 s on average for a model to load.
                threshold=30_000_000,
                evaluation_periods=3,
                alarm_description=f"{endpoint_name}: requests wait long for models to load "
                "(too many archives for the instance's memory, or too few instances)",
            ),
            "GPUMemoryUtilization": self.metric_gpu_memory_utilization().create_alarm(
                self,
                "GpuMemoryAlarm",
                threshold=90,
                evaluation_periods=3,
                alarm_description=f"{endpoint_name}: GPU memory above 90% (models get evicted)",
            ),
            "Invocation5XXErrors": self.metric_invocation_5xx_errors().create_alarm(
                self,
                "Invocation5xxAlarm",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{endpoint_name}: server errors (5xx) from the endpoint",
            ),
        }

        if alarm_topic is not None:
            for alarm in self.alarms.values():
                alarm.add_alarm_action(cloudwatch_actions.SnsAction(alarm_topic))
                alarm.add_ok_action(cloudwatch_actions.SnsAction(alarm_topic))

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN (``Ref`` of ``AWS::SageMaker::Endpoint``)."""
        return self.endpoint.ref

    def metric(
        self, metric_name: str, *, namespace: str = "AWS/SageMaker", **options: object
    ) -> cloudwatch.Metric:
        """A metric of this endpoint's variant (dimensions ``EndpointName``, ``VariantName``).
        ``options`` as ``cloudwatch.Metric`` takes them (``period``, ``statistic``,
        ``label``...); default: 5-minute average."""
        settings = {"period": Duration.minutes(5), "statistic": "Average", **options}
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME},
            **settings,
        )

    def _metric(
        self, namespace: str, name: str, statistic: str, options: dict | None = None
    ) -> cloudwatch.Metric:
        return self.metric(name, namespace=namespace, **{"statistic": statistic, **(options or {})})

    def metric_model_loading_wait_time(self, **options: object) -> cloudwatch.Metric:
        """Average time (microseconds) requests waited for their model to load. ``options``
        as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "ModelLoadingWaitTime", "Average", options)

    def metric_model_cache_hit(self, **options: object) -> cloudwatch.Metric:
        """Share of requests whose model was already loaded. ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "ModelCacheHit", "Average", options)

    def metric_invocation_5xx_errors(self, **options: object) -> cloudwatch.Metric:
        """Server errors returned by the endpoint. ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "Invocation5XXErrors", "Sum", options)

    def metric_gpu_memory_utilization(self, **options: object) -> cloudwatch.Metric:
        """GPU memory in use, percent (instance metric). ``options`` as for :meth:`metric`."""
        return self._metric("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Maximum", options)

    def metric_model_load_failures(self, **options: object) -> cloudwatch.Metric:
        """Triton's "failed to load" log lines, counted by the metric filter on the endpoint's
        log group (no dimensions). ``options`` as ``cloudwatch.Metric`` takes them."""
        settings = {"period": Duration.minutes(5), "statistic": "Sum", **options}
        return cloudwatch.Metric(
            namespace=LOAD_FAILURE_NAMESPACE,
            metric_name=f"{self.endpoint_name}-ModelLoadFailures",
            **settings,
        )

    def metric_loaded_model_count(self, **options: object) -> cloudwatch.Metric:
        """Models loaded in the containers. ``options`` as for :meth:`metric`."""
        return self._metric("/aws/sagemaker/Endpoints", "LoadedModelCount", "Maximum", options)

    # The metrics below, like those above, as AWS lists them (namespace, dimensions EndpointName
    # and VariantName, a valid statistic; latencies and loading times in microseconds):
    # https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html and
    # https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoint-cloudwatch-metrics.html
    def metric_invocations(self, **options: object) -> cloudwatch.Metric:
        """InvokeEndpoint requests (Sum). ``options`` as for :meth:`metric`."""
        return self._metric("AWS/SageMaker", "Invocations", "Sum", options)

    def metric_invocations_per_instance(self, **options: object) -> cloudwatch.Metric:
        """Requests per instance (Sum; the scaling policy tracks it per minute)."""
        return self._metric("AWS/SageMaker", "InvocationsPerInstance", "Sum", options)

    def metric_invocation_4xx_errors(self, **options: object) -> cloudwatch.Metric:
        """Client errors (4xx) returned by the endpoint (Sum)."""
        return self._metric("AWS/SageMaker", "Invocation4XXErrors", "Sum", options)

    def metric_model_latency(self, **options: object) -> cloudwatch.Metric:
        """Time the container took to answer, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelLatency", "Average", options)

    def metric_overhead_latency(self, **options: object) -> cloudwatch.Metric:
        """Time SageMaker added around the container, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "OverheadLatency", "Average", options)

    def metric_model_loading_time(self, **options: object) -> cloudwatch.Metric:
        """Time a model took to load in the container, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelLoadingTime", "Average", options)

    def metric_model_downloading_time(self, **options: object) -> cloudwatch.Metric:
        """Time a model took to download from S3, microseconds (Average)."""
        return self._metric("AWS/SageMaker", "ModelDownloadingTime", "Average", options)

    def metric_model_unloading_time(self, **options: object) -> cloudwatch.Metric:
        """Time a model took to unload, microseconds (Average; SampleCount counts unloads)."""
        return self._metric("AWS/SageMaker", "ModelUnloadingTime", "Average", options)

    def metric_gpu_utilization(self, **options: object) -> cloudwatch.Metric:
        """GPU in use, percent (instance metric, Maximum over instances)."""
        return self._metric("/aws/sagemaker/Endpoints", "GPUUtilization", "Maximum", options)

    def metric_cpu_utilization(self, **options: object) -> cloudwatch.Metric:
        """CPU in use, percent of one core times cores (instance metric, Maximum)."""
        return self._metric("/aws/sagemaker/Endpoints", "CPUUtilization", "Maximum", options)

    def metric_memory_utilization(self, **options: object) -> cloudwatch.Metric:
        """Memory in use, percent (instance metric, Maximum)."""
        return self._metric("/aws/sagemaker/Endpoints", "MemoryUtilization", "Maximum", options)

    def metric_disk_utilization(self, **options: object) -> cloudwatch.Metric:
        """Disk in use, percent (instance metric, Maximum): archives cached on disk."""
        return self._metric("/aws/sagemaker/Endpoints", "DiskUtilization", "Maximum", options)

    def grant_invoke(
        self, grantee: iam.IGrantable, target_models: Sequence[str | ArchiveRef] | None = None
    ) -> iam.Grant:
        """Let ``grantee`` invoke this endpoint, only for the given archives.

        The ``sagemaker:TargetModel`` condition lists one ``StringLike`` pattern per entry
        (:attr:`ArchiveRef.key_pattern`: every version of a logical name, or one exact
        version). IAM caps a role's inline policies at 10,240 characters and a managed policy
        at 6,144, so a grant whose statement exceeds :data:`GRANT_POLICY_BUDGET` characters is
        refused: grant a logical-name pattern (``team_a_*``) instead of listing thousands.

        Args:
            target_models: Archive references (``NAME``, ``NAME@vXXXXXXXX``, or
                :class:`ArchiveRef`), or logical-name patterns with ``*`` (``bert_*``: every
                version of every logical name matching it). Default: the archives this
                endpoint serves.
        """
        entries = list(target_models if target_models is not None else self.archives)
        if not entries:
            raise ValueError(f"{self.node.path}: grant_invoke: target_models must not be empty")
        patterns, errors = [], []
        for entry in entries:
            try:
                patterns.append(_target_model_pattern(entry))
            except ValueError as error:
                errors.append(str(error))
        if errors:
            raise ValueError(f"{self.node.path}: grant_invoke: " + "; ".join(errors))
        patterns = sorted(set(patterns))
        statement = iam.PolicyStatement(
            actions=["sagemaker:InvokeEndpoint"],
            resources=[self.endpoint_arn],
            conditions={"StringLike": {"sagemaker:TargetModel": patterns}},
        )
        size = policy_size(Stack.of(self), statement)
        if size > GRANT_POLICY_BUDGET:
            raise ValueError(
                f"{self.node.path}: grant_invoke: {len(patterns)} target models make a "
                f"{size:,}-character statement; IAM allows 6,144 characters per managed policy "
                f"and 10,240 for all inline policies of a role, so one grant may use at most "
                f"{GRANT_POLICY_BUDGET:,}: grant logical-name patterns such as 'team_a_*' "
                "(name archives with a shared prefix) instead of listing each archive"
            )
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:InvokeEndpoint"],
            resource_arns=[self.endpoint_arn],
            conditions={"StringLike": {"sagemaker:TargetModel": patterns}},
        )


# IAM quotas (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html):
# managed policy 6,144 characters, a role's inline policies 10,240 in all (whitespace not
# counted). One grant stays below the smaller, leaving room for the policy's envelope.
GRANT_POLICY_BUDGET = 6_000
_ARN_ALLOWANCE = 120  # a resolved endpoint ARN is longer than the {"Ref": ...} it replaces
_LOGICAL_GLOB = re.compile(r"^[a-z0-9*][a-z0-9_*-]{0,99}$")


def policy_size(stack: Stack, statement: iam.PolicyStatement) -> int:
    """Characters ``statement`` takes in a policy document (IAM does not count whitespace),
    with an allowance for the ARNs its tokens resolve to."""
    resolved = stack.resolve(statement.to_statement_json())
    return len(json.dumps(resolved, separators=(",", ":"))) + _ARN_ALLOWANCE


def _target_model_pattern(entry: str | ArchiveRef) -> str:
    """The ``sagemaker:TargetModel`` pattern of a reference or a logical-name pattern."""
    if isinstance(entry, ArchiveRef):
        return entry.key_pattern
    if isinstance(entry, str) and "*" in entry and "@" not in entry:
        if not _LOGICAL_GLOB.match(entry):
            raise ValueError(
                f"target_models: {entry!r} is not a logical-name pattern: expected lower-case "
                "letters, digits, '_', '-' and '*'"
            )
        return f"{entry}-v*{ARCHIVE_SUFFIX}"
    try:
        return parse_ref(entry).key_pattern
    except ValueError as error:
        raise ValueError(f"target_models: {error}") from None


def sagemaker_trust_conditions(scope: Construct) -> dict:
    """Confused-deputy guard on an execution role SageMaker hosting assumes: only SageMaker
    acting for this account and region. For real-time inference AWS documents exactly the
    source ARN ``arn:<partition>:sagemaker:<region>:<account>:*`` and says not to narrow it to
    a model or endpoint ARN (CreateModel and endpoints would fail to assume the role).
    https://docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html
    (section "SageMaker AI Inference")."""
    stack = Stack.of(scope)
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": stack.format_arn(service="sagemaker", resource="*")},
    }
