"""InferenceStack: Triton multi-model endpoints over the model bucket's archive prefix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from ml_platform.config import EndpointSettings, InferenceSettings
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint


# A CloudFormation stack holds at most 500 resources
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html).
# An endpoint takes RESOURCES_PER_ENDPOINT of them (tests count them), the archive upload about
# a dozen: 30 endpoints per stack keep well below the limit; more go to further stacks.
STACK_RESOURCE_LIMIT = 500
ENDPOINTS_PER_STACK = 30


def endpoint_groups(endpoints: Sequence[EndpointSettings]) -> list[tuple[EndpointSettings, ...]]:
    """The endpoints of each inference stack, in settings order (appending endpoints to the
    settings never moves an existing one to another stack)."""
    return [
        tuple(endpoints[i : i + ENDPOINTS_PER_STACK])
        for i in range(0, len(endpoints), ENDPOINTS_PER_STACK)
    ] or [()]


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
        endpoints: Sequence[EndpointSettings] | None = None,
        upload: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        bucket = s3.Bucket.from_bucket_arn(self, "ModelBucket", Fn.import_value(bucket_arn_export))
        self.endpoints: dict[str, TritonMultiModelEndpoint] = {}
        for endpoint in settings.endpoints if endpoints is None else endpoints:
            construct = TritonMultiModelEndpoint(
                self,
                _construct_id(endpoint.name),
                bucket=bucket,
                model_prefix=model_prefix,
                endpoint_name=endpoint.name,
                archives=endpoint.archives,
                instance_type=endpoint.instance_type,
                initial_instances=endpoint.initial_instances,
                min_instances=endpoint.min_instances,
                max_instances=endpoint.max_instances,
                invocations_per_instance=endpoint.invocations_per_instance,
                triton_version=settings.triton_version,
            )
            self.endpoints[endpoint.name] = construct
            CfnOutput(
                self,
                f"{_construct_id(endpoint.name)}Name",
                value=endpoint.name,
                # Constant: archive lists would outgrow CloudFormation's 1,024 characters.
                description="Name of a SageMaker multi-model endpoint serving Triton ensembles",
            )
        self.upload = None
        if settings.upload_dir and upload:
            source = Path(settings.upload_dir)
            if not source.is_dir():
                raise ValueError(
                    f"{self.node.path}: inference.upload_dir={settings.upload_dir!r}: not a directory"
                )
            # Check every archive now: a broken ensemble fails synthesis, not the endpoint.
            # (Imported here: the checker loads protobuf, needed only with upload_dir.)
            from ml_platform.triton.repository import archive_problems

            problems = [
                f"{archive.name}: {problem}"
                for archive in sorted(source.glob("*.tar.gz"))
                for problem in archive_problems(archive)
            ]
            if problems:
                raise ValueError(
                    f"{self.node.path}: inference.upload_dir={settings.upload_dir!r} holds archives "
                    "that cannot be served:\n  - " + "\n  - ".join(problems)
                )
            self.upload = s3deploy.BucketDeployment(
                self,
                "UploadArchives",
                sources=[s3deploy.Source.asset(str(source))],
                destination_bucket=bucket,
                destination_key_prefix=model_prefix,
                prune=False,  # archives uploaded by `mlp models upload` stay
                exclude=["*"],
                include=["*.tar.gz"],
            )
            for construct in self.endpoints.values():
                construct.endpoint.node.add_dependency(self.upload)


def _construct_id(endpoint_name: str) -> str:
    """Stable construct id from an endpoint name: 'triton-ensembles' -> 'TritonEnsembles'."""
    return "".join(part[:1].upper() + part[1:] for part in endpoint_name.split("-"))
