"""InferenceStack: Triton multi-model endpoints over the model bucket's archive prefix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sns as sns
from constructs import Construct

from ml_platform.config import EndpointSettings, InferenceSettings
from ml_platform.constructs.dashboards import EndpointDashboard
from ml_platform.constructs.model_upload import (  # noqa: F401  (re-exported: the app and tests use them)
    LAMBDA_MAX_EPHEMERAL_MIB,
    UPLOAD_DIR_MAX_BYTES,
    ModelArchiveUpload,
    archives_fingerprint,
    deployment_sizing,
    upload_role_name,
)
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint
from ml_platform.constructs.storage import ModelArtifactBucket, import_model_bucket
from ml_platform.stack_outputs import (  # noqa: F401  (re-exported: tests and the app use them)
    ENDPOINTS_DASHBOARD_OUTPUT,
    ENDPOINTS_PER_STACK,
    STACK_RESOURCE_LIMIT,
    endpoint_construct_id,
    endpoint_groups,
)
from ml_platform.stacks.network import _retention


class InferenceStack(Stack):
    """One :class:`TritonMultiModelEndpoint` per configured endpoint (by default one endpoint
    serving both ensembles: the cost point of the source design), plus an optional deploy-time
    upload of locally built archives into the model prefix.

    Args:
        endpoints: The endpoints of this stack. Default: every endpoint of ``settings`` (the
            app gives each stack at most :data:`ENDPOINTS_PER_STACK`, see
            :func:`endpoint_groups`).
        upload: Add the ``settings.upload_dir`` upload here. Default true (the app puts it in
            the first inference stack only).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: InferenceSettings,
        bucket_arn_export: str,
        model_prefix: str,
        bucket_key_arn_export: str | None = None,
        endpoints: Sequence[EndpointSettings] | None = None,
        upload: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        bucket = import_model_bucket(self, "ModelBucket", bucket_arn_export, bucket_key_arn_export)
        if not isinstance(bucket, Construct):  # aws-cdk's imported buckets are constructs
            raise TypeError(f"{self.node.path}: the imported model bucket is not a Construct")
        # Under the imported bucket, not beside it: the stack's own ids are the ones
        # stack_outputs.INFERENCE_FIXED_IDS keeps endpoint names from clashing with.
        models = ModelArtifactBucket.from_bucket(
            bucket, "Archives", bucket, model_prefix=model_prefix
        )
        self.endpoints: dict[str, TritonMultiModelEndpoint] = {}
        topic = (
            sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn)
            if settings.alarm_topic_arn
            else None
        )
        for endpoint in settings.endpoints if endpoints is None else endpoints:
            construct = TritonMultiModelEndpoint(
                self,
                endpoint_construct_id(endpoint.name),
                bucket=models,
                endpoint_name=endpoint.name,
                archives=endpoint.archives,
                instance_type=endpoint.instance_type,
                initial_instances=endpoint.initial_instances,
                min_instances=endpoint.min_instances,
                max_instances=endpoint.max_instances,
                invocations_per_instance=endpoint.invocations_per_instance,
                triton_version=settings.triton_version,
                inference_ami_version=settings.inference_ami_version,
                network_isolation=settings.network_isolation,
                instance_type_changes=settings.instance_type_changes,
                model_load_gpu_limit_percent=settings.model_load_gpu_limit_percent,
                alarm_topic=topic,
                log_retention=_retention(settings.log_retention_days),
                log_verbose=settings.triton_log_verbose,
            )
            self.endpoints[endpoint.name] = construct
            CfnOutput(
                self,
                f"{endpoint_construct_id(endpoint.name)}Name",
                value=endpoint.name,
                # Constant: archive lists would outgrow CloudFormation's 1,024 characters.
                description="Name of a SageMaker multi-model endpoint serving Triton ensembles",
            )
        # One dashboard for the stack's endpoints, a section each (one resource per stack,
        # not per endpoint: the stack's 500 resources go to endpoints).
        self.dashboard = None
        if self.endpoints:
            self.dashboard = EndpointDashboard(
                self, "EndpointsDashboard", endpoints=list(self.endpoints.values())
            )
            CfnOutput(
                self,
                ENDPOINTS_DASHBOARD_OUTPUT,
                value=self.dashboard.url,
                description="CloudWatch dashboard of this stack's SageMaker multi-model endpoints",
            )
        self.upload: s3deploy.BucketDeployment | None = None
        if settings.upload_dir and upload:
            uploader = ModelArchiveUpload(self, source_dir=settings.upload_dir, models=models)
            self.upload_role = uploader.role
            self.upload = uploader.deployment
            for construct in self.endpoints.values():
                construct.endpoint.node.add_dependency(self.upload)
