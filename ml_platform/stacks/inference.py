"""InferenceStack: Triton multi-model endpoints over the model bucket's archive prefix."""

from __future__ import annotations

__all__ = [
    "ALARM_TOPIC_OUTPUT",
    "InferenceStack",
]

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sns as sns
from constructs import Construct

from ml_platform.config import EndpointSettings, InferenceSettings
from ml_platform.constructs._model_upload import ModelArchiveUpload
from ml_platform.constructs.alarm_topic import AlarmTopic, AlarmTopicProps
from ml_platform.constructs.dashboards import EndpointDashboard
from ml_platform.constructs.network import retention_days
from ml_platform.constructs.sagemaker_mme import (
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
)
from ml_platform.constructs.storage import ModelArtifactBucket, import_model_bucket
from ml_platform.stack_outputs import (
    ENDPOINTS_DASHBOARD_OUTPUT,
    endpoint_construct_id,
)

#: Output naming the topic every alarm of the stack notifies.
ALARM_TOPIC_OUTPUT = "AlarmTopicArn"


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
        removal_policy: Of the endpoints' log groups, their key and the alarm topic's key
            (the app passes ``storage.removal_policy``). Default RETAIN.

    Attributes:
        alarm_topic: The stack's :class:`AlarmTopic` (``None`` with
            ``settings.alarm_topic_arn``, whose topic the alarms notify instead).
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
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
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
        # Alarms notify someone by default (Control Tower CT.CLOUDWATCH.PR.1 wants actions):
        # the given topic, or the stack's own encrypted one.
        self.alarm_topic: AlarmTopic | None = None
        topic: sns.ITopic
        if settings.alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn)
        else:
            self.alarm_topic = AlarmTopic(
                self,
                "AlarmTopic",
                props=AlarmTopicProps(emails=settings.alarm_emails, removal_policy=removal_policy),
            )
            topic = self.alarm_topic.topic
        CfnOutput(
            self,
            ALARM_TOPIC_OUTPUT,
            value=topic.topic_arn,
            description="SNS topic the endpoints' alarms notify (alarm and OK)",
        )
        for endpoint in settings.endpoints if endpoints is None else endpoints:
            props = TritonMultiModelEndpointProps.from_bases(
                endpoint,
                settings,
                log_retention=retention_days(settings.log_retention_days),
                log_removal_policy=removal_policy,
            )
            construct = TritonMultiModelEndpoint(
                self,
                endpoint_construct_id(endpoint.name),
                bucket=models,
                props=props,
                alarm_topic=topic,
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
