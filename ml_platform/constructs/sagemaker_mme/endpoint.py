"""The :class:`TritonMultiModelEndpoint` construct: validation, execution role, model,
endpoint config and endpoint; scaling, alarms and grants come from their own modules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CustomResource, RemovalPolicy, Stack, Token
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from ml_platform import limits
from ml_platform._settings_parse import Problem
from ml_platform.constructs._nag import acknowledge
from ml_platform.constructs._props import check_props
from ml_platform.constructs.sagemaker_mme._alarms import add_alarms, add_load_failure_filter
from ml_platform.constructs.sagemaker_mme._grants import (
    grant_image_pull,
    grant_logs_and_metrics,
    grant_registry_token,
    invoke_grant,
    sagemaker_trust_conditions,
)
from ml_platform.constructs.sagemaker_mme._log_group import (
    endpoint_log_group_arns,
    endpoint_log_group_name,
    shared_log_key,
)
from ml_platform.constructs.sagemaker_mme._scaling import add_scaling
from ml_platform.constructs.sagemaker_mme.metrics import VARIANT_NAME, EndpointMetrics
from ml_platform.constructs.storage import (
    ModelArtifactBucket,
    ModelArtifactBucketBase,
    archive_prefix,
    model_prefix_problems,
)
from ml_platform.props import shared_fields
from ml_platform.props.endpoint import (
    TritonEndpointPropsBase,
    TritonMultiModelEndpointPropsBase,
    TritonServerPropsBase,
)
from ml_platform.sagemaker_images import (
    UNPATCHED_TRITON_WARNING,
    compute_capability_problem,
    triton_image_uri,
    triton_region_problem,
    triton_release_warning,
)
from ml_platform.triton.archive_names import ArchiveRef

__all__ = [
    "DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT",
    "MODEL_LOAD_GPU_LIMIT_WARNING",
    "NO_ALARM_TOPIC_WARNING",
    "SINGLE_INSTANCE_WARNING",
    "TritonMultiModelEndpoint",
    "TritonMultiModelEndpointProps",
]

# The SageMaker Triton container's start script turns these variables into tritonserver flags
# (triton-inference-server/server docker/sagemaker/serve, r23.12 to r25.09):
# https://github.com/triton-inference-server/server/blob/main/docker/sagemaker/serve
#: ``--log-verbose=<value>``; unset, the script passes ``--log-verbose=true`` (a line per request).
LOG_VERBOSE_ENV = "SAGEMAKER_TRITON_LOG_VERBOSE"
#: ``--log-info=<value>``. Off, the front end's INFO line per request ("Invoking SageMaker
#: TargetModel", server src/sagemaker_server.cc) goes; failed loads are logged at ERROR
#: (core src/model_repository_manager/model_lifecycle.cc), which the metric filter counts.
LOG_INFO_ENV = "SAGEMAKER_TRITON_LOG_INFO"
#: ``--model-load-gpu-limit <gpu>:<fraction>`` for every GPU.
MODEL_LOAD_GPU_LIMIT_ENV = "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT"
#: Appended verbatim (unquoted: split at spaces) to the server's command line.
ADDITIONAL_ARGS_ENV = "SAGEMAKER_TRITON_ADDITIONAL_ARGS"
#: DALI keeps its GPU memory pools after its model unloads unless the backend is started with
#: this (dali_backend docs/config.md, "release_after_unload"; read from r24.03 on, src/
#: parameters.h; earlier releases ignore unknown backend parameters). Without it, every
#: evicted image-ensemble version leaves its DALI memory behind on the GPU.
DALI_RELEASE_AFTER_UNLOAD = "--backend-config=dali,release_after_unload=true"

#: No cap by default. SageMaker evicts idle models only when a load answers 507 (Insufficient
#: Storage: https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html), and
#: Triton's SageMaker front end answers 507 only when the load error contains one of its
#: out-of-memory strings (server src/sagemaker_server.cc, SageMakerMMECheckOOMError: "CUDA out
#: of memory", "out of memory", "OOM", "Failed to allocate memory", ...), 400 otherwise. A load
#: refused by ``--model-load-gpu-limit`` fails with "memory limit set for GPU 0 has exceeded,
#: model loading is rejected" (core src/backend_model_instance.cc, VerifyModelLoadGpuFraction),
#: which matches none: it answers 400 and nothing is ever evicted. Without the cap a full GPU
#: fails the load on CUDA memory, the front end answers 507, SageMaker unloads the least
#: recently used models and retries. tests/e2e/triton/test_local_server.py shows both answers
#: on the real front end.
DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT = limits.DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT
#: Synth warning (acknowledgeable) when a cap is set: what it costs.
MODEL_LOAD_GPU_LIMIT_WARNING = "ml-platform:modelLoadGpuLimitBlocksEviction"


def model_load_environment(limit_percent: int) -> dict[str, str]:
    """The container environment that caps model loads at ``limit_percent`` of GPU memory
    (empty for 100: no cap, the default)."""
    if limit_percent >= 100:
        return {}
    return {MODEL_LOAD_GPU_LIMIT_ENV: f"{limit_percent / 100:g}"}


def container_environment(
    *,
    log_verbose: int = 0,
    model_load_gpu_limit_percent: int = DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT,
) -> dict[str, str]:
    """The Triton container's environment on the endpoint's model.

    ``--log-verbose`` at ``log_verbose``; with it off (0) also ``--log-info=false``, so the
    log keeps warnings and errors (failed loads among them) and not a line per request; DALI
    releases its GPU memory on unload; a load cap only when ``model_load_gpu_limit_percent``
    is below 100 (see :data:`DEFAULT_MODEL_LOAD_GPU_LIMIT_PERCENT` for what a cap costs)."""
    env = {LOG_VERBOSE_ENV: str(log_verbose)}
    if log_verbose == 0:
        env[LOG_INFO_ENV] = "false"
    env[ADDITIONAL_ARGS_ENV] = DALI_RELEASE_AFTER_UNLOAD
    return {**env, **model_load_environment(model_load_gpu_limit_percent)}


#: Synth warning (acknowledgeable) for an endpoint whose alarms notify no one.
NO_ALARM_TOPIC_WARNING = "ml-platform:endpointAlarmsNotifyNoOne"
#: Synth warning (acknowledgeable) for an endpoint that may run on one instance: SageMaker
#: spreads a variant's instances over Availability Zones, which takes two or more ("Best
#: practices for deploying models on SageMaker AI Hosting Services":
#: https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-best-practices.html).
SINGLE_INSTANCE_WARNING = "ml-platform:endpointSingleInstance"


# CreateEndpoint API reference, EndpointName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
ENDPOINT_NAME = limits.ENDPOINT_NAME.regex  # CreateEndpoint's EndpointName


@dataclass(frozen=True, kw_only=True)
class TritonMultiModelEndpointProps(TritonMultiModelEndpointPropsBase):
    """The value props of :class:`TritonMultiModelEndpoint`. The fields it shares with the
    ``inference`` settings and their rules come from
    :class:`~ml_platform.props.endpoint.TritonMultiModelEndpointPropsBase` (the endpoint's and
    the Triton server's); the construct checks them, and :meth:`construct_problems`, once."""

    name: str
    """Endpoint name (1 to 63 letters, digits and hyphens). Required: clients and scaling refer
    to it. A token is not checked."""
    archives: tuple[str, ...]
    """Archives this endpoint is meant to serve, as references of
    :mod:`ml_platform.triton.archive_names`: a logical name (``model_trt_python``: any version)
    or an exact version (``model_trt_python@v1a2b3c4d``); :class:`ArchiveRef` values too (kept
    as their text). They are the default of :meth:`TritonMultiModelEndpoint.grant_invoke`
    (never written into the template otherwise: thousands of archives must not grow it)."""
    image_uri: str | None = None
    """Overrides the container image (default: SageMaker's Triton image for the stack's region
    and ``triton_version``). A given image is the caller's: the rules of SageMaker's image (its
    regions, the AMI's CUDA, the GPU's compute capability) are not applied to it."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR
    """Retention of the endpoint's log group ``/aws/sagemaker/Endpoints/<name>``, which the
    construct creates (encrypted, before the endpoint, so SageMaker never makes it without
    retention). Default one year."""
    log_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """Of the log group and of the log key the construct creates. Default RETAIN."""

    @classmethod
    def from_bases(
        cls,
        endpoint: TritonEndpointPropsBase,
        server: TritonServerPropsBase,
        **more: Any,
    ) -> TritonMultiModelEndpointProps:
        """Props with the shared fields of ``endpoint`` and ``server`` (an
        ``inference.endpoints[]`` item and the ``inference`` settings) and the construct-only
        ones in ``more``."""
        shared = {
            **shared_fields(endpoint, TritonEndpointPropsBase),
            **shared_fields(server, TritonServerPropsBase),
        }
        return cls(**shared, **more)

    def __post_init__(self) -> None:
        archives: Sequence[str | ArchiveRef] = self.archives
        if not isinstance(archives, str):  # a list or ArchiveRef values: the same references
            refs = tuple(str(a) if isinstance(a, ArchiveRef) else a for a in archives)
            object.__setattr__(self, "archives", refs)

    def construct_problems(self, *, region: str, model_prefix: str) -> list[str]:
        """The problems of the construct-only props (the shared fields' are the base's, which
        :func:`~ml_platform.constructs._props.check_props` checks); ``region`` is the stack's,
        ``model_prefix`` the one the endpoint reads."""
        errors = model_prefix_problems(model_prefix)
        if self.image_uri is None and Token.is_unresolved(region):
            text = "needs a stack with a concrete region, or an image_uri"
            errors.append(Problem({"image_uri": None}, text).worded())
        elif self.image_uri is None:
            problem = triton_region_problem(region, self.triton_version)
            if problem:
                errors.append(Problem({"triton_version": self.triton_version}, problem).worded())
        if self.image_uri is None:  # rules of SageMaker's image: a given one is the caller's
            server = TritonServerPropsBase.problems(self)
            errors += [p.worded() if isinstance(p, Problem) else p for p in server]
            problem = compute_capability_problem(self.triton_version, self.instance_type)
            if problem:
                errors.append(Problem({"instance_type": self.instance_type}, problem).worded())
        return errors


class TritonMultiModelEndpoint(EndpointMetrics, Construct):
    """Triton on a SageMaker multi-model endpoint (GPU), with scaling and alarms.

    The model is created with ``Mode: MultiModel`` over ``s3://<bucket>/<model_prefix>``;
    each request picks an archive under that prefix with ``TargetModel``.

    Args:
        bucket: The model bucket: a :class:`~ml_platform.constructs.storage.ModelArtifactBucket`
            (or what its ``from_*`` methods return), whose prefix and grant the endpoint
            uses; or a plain ``s3.IBucket`` with ``model_prefix``.
        props: The endpoint's values (:class:`TritonMultiModelEndpointProps`: each field
            documents itself), checked together before anything is created.
        model_prefix: Key prefix of the archives, ending in ``/``, for a plain bucket.
            Default: the bucket construct's prefix, ``models/`` for a plain bucket.
        alarm_topic: SNS topic every alarm notifies (alarm and OK). Default none: the alarms
            notify no one, and synthesis warns (id :data:`NO_ALARM_TOPIC_WARNING`; the
            inference stack always passes one, an :class:`~ml_platform.constructs.alarm_topic.
            AlarmTopic` by default).
        role: Execution role SageMaker assumes (trusting ``sagemaker.amazonaws.com``). The
            construct adds the statements it needs to it when the role is mutable. Default: a
            new role.
        log_key: KMS key encrypting the endpoint's log group. Default: one key per stack
            (rotation on, :func:`shared_log_key`) whose policy lets CloudWatch Logs use it for
            the stack's region's endpoint log groups only.

    Attributes:
        model_bucket: The bucket construct read through (``bucket``, or one over a plain
            bucket). role: The execution role. model / endpoint_config / endpoint: The Cfn
            resources. log_group, log_key: The endpoint's logs. scalable_target,
            scaling_guard, scaling_policy: Its scaling. load_failure_filter, alarms: Its alarms
            by metric name.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket | ModelArtifactBucketBase,
        props: TritonMultiModelEndpointProps,
        model_prefix: str | None = None,
        alarm_topic: sns.ITopic | None = None,
        role: iam.IRole | None = None,
        log_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        model_prefix, prefix_problem = archive_prefix(bucket, model_prefix)
        #: The value props, as checked.
        self.props = props
        errors = props.construct_problems(region=region, model_prefix=model_prefix)
        errors += [prefix_problem] if prefix_problem else []
        check_props(self, props, TritonMultiModelEndpointPropsBase, *errors)
        warning = triton_release_warning(props.triton_version) if props.image_uri is None else None
        if warning:
            Annotations.of(self).add_warning_v2(UNPATCHED_TRITON_WARNING, warning)
        if props.model_load_gpu_limit_percent < 100:
            Annotations.of(self).add_warning_v2(
                MODEL_LOAD_GPU_LIMIT_WARNING,
                f"model_load_gpu_limit_percent={props.model_load_gpu_limit_percent} caps model loads at "
                f"{props.model_load_gpu_limit_percent}% of GPU memory: a load past the cap answers 400, "
                "not 507, so SageMaker evicts no idle model and every new archive fails to load "
                "(load-failure alarm) until models are unloaded otherwise. Without a cap a full "
                "GPU answers 507 and SageMaker evicts (docs/serving-sagemaker.md, 'GPU memory "
                "and eviction').",
            )
        if alarm_topic is None:
            Annotations.of(self).add_warning_v2(
                NO_ALARM_TOPIC_WARNING,
                "alarm_topic=None: the endpoint's alarms have no action and notify no one "
                "(Control Tower CT.CLOUDWATCH.PR.1 requires one); pass an SNS topic, e.g. an "
                "ml_platform.constructs.alarm_topic.AlarmTopic.",
            )
        if props.min_instances < 2:
            Annotations.of(self).add_warning_v2(
                SINGLE_INSTANCE_WARNING,
                f"min_instances={props.min_instances}: one instance is one Availability Zone and no "
                "redundancy; an instance or AZ failure, or an instance replacement, stops the "
                "endpoint until SageMaker replaces it. Set min_instances (and "
                "initial_instances) to 2 or more for instances in separate AZs "
                "(docs/serving-sagemaker.md, 'One instance, one Availability Zone').",
            )

        self.endpoint_name = props.name
        # What dashboards draw the metrics against (ml_platform/constructs/dashboards.py).
        self.invocations_per_instance = props.invocations_per_instance
        self.min_instances, self.max_instances = props.min_instances, props.max_instances
        self.archives: tuple[ArchiveRef, ...] = tuple(self.props.archive_refs)
        self.image_uri = props.image_uri or triton_image_uri(region, props.triton_version)
        #: The model bucket (``bucket`` itself, or a bucket construct over a plain bucket).
        self.model_bucket: ModelArtifactBucketBase = (
            bucket
            if isinstance(bucket, ModelArtifactBucketBase)
            else ModelArtifactBucket.from_bucket(
                self, "ModelBucket", bucket, model_prefix=model_prefix
            )
        )

        self.role: iam.IRole = role or iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal(
                "sagemaker.amazonaws.com", conditions=sagemaker_trust_conditions(self)
            ),
            description=f"SageMaker execution role of the {props.name} Triton endpoint",
        )
        # Read only the archives under the prefix (no bucket-wide or wildcard actions).
        self.model_bucket.grant_read_models(self.role)
        if (
            props.image_uri is None
        ):  # SageMaker's Triton image (a given image brings its own access)
            grant_image_pull(self, self.role, region, props.triton_version)
        grant_registry_token(self.role)
        self._add_log_group(log_key, props.log_retention, props.log_removal_policy)
        grant_logs_and_metrics(
            self, self.role, self.log_group_arns, self.model_bucket.archive_arn()
        )
        self._add_model_and_endpoint(props)
        scaling = add_scaling(
            self,
            endpoint=self.endpoint,
            endpoint_name=props.name,
            min_instances=props.min_instances,
            max_instances=props.max_instances,
            invocations_per_instance=props.invocations_per_instance,
            instance_type=props.instance_type,
            instance_type_changes=props.instance_type_changes,
        )
        self.scalable_target: appscaling.ScalableTarget = scaling.scalable_target
        self.scaling_guard: CustomResource | None = scaling.scaling_guard
        self.scaling_policy: CustomResource | None = scaling.scaling_policy
        self.load_failure_filter: logs.CfnMetricFilter = add_load_failure_filter(
            self, endpoint_name=props.name, log_group=self.log_group
        )
        self.alarms: dict[str, cloudwatch.Alarm] = add_alarms(self, self, alarm_topic)

    def _add_log_group(
        self,
        log_key: kms.IKey | None,
        log_retention: logs.RetentionDays,
        log_removal_policy: RemovalPolicy,
    ) -> None:
        """The endpoint's log group, encrypted, and the ARNs of it and its streams.

        The stack owns the endpoint's log group: SageMaker would create it on first start
        with no retention and no key. Created before the endpoint (dependency there)."""
        if log_key is None:
            log_key = shared_log_key(self, log_removal_policy)
        self.log_key = log_key
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=endpoint_log_group_name(self.endpoint_name),
            retention=log_retention,
            encryption_key=log_key,
            removal_policy=log_removal_policy,
        )
        self.log_group_arns = endpoint_log_group_arns(self, self.endpoint_name)

    def _add_model_and_endpoint(self, props: TritonMultiModelEndpointProps) -> None:
        """The multi-model ``CfnModel`` over the prefix, its endpoint config and the
        endpoint."""
        bucket, model_prefix = self.model_bucket.bucket, self.model_bucket.model_prefix
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image_uri,
                mode="MultiModel",
                model_data_url=f"s3://{bucket.bucket_name}/{model_prefix}",
                environment=container_environment(
                    log_verbose=props.triton_log_verbose,
                    model_load_gpu_limit_percent=props.model_load_gpu_limit_percent,
                ),
            ),
            # SageMaker, not the container, fetches archives from S3 and hands Triton a local
            # path (the multi-model container contract: POST /models {"url": "/opt/ml/models/
            # <name>/model"}, https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html),
            # and the multi-model endpoint feature list excludes only Elastic Inference
            # (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html), so the
            # container runs isolated: the archives' Python cannot reach the network.
            enable_network_isolation=props.network_isolation,
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
                    instance_type=props.instance_type,
                    initial_instance_count=props.initial_instances,
                    initial_variant_weight=1,
                    inference_ami_version=props.inference_ami_version,
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
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # Autoscaling owns the instance count: keep it across config updates.
            retain_all_variant_properties=True,
        )
        self.endpoint.node.add_dependency(self.log_group)

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN (``Ref`` of ``AWS::SageMaker::Endpoint``)."""
        return self.endpoint.ref

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
        return invoke_grant(self, self.endpoint_arn, grantee, target_models, self.archives)
