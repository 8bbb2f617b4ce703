"""InferenceStack: Triton multi-model endpoints over the model bucket's archive prefix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import AssetHashType, CfnOutput, DefaultStackSynthesizer, Fn, Size, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from ml_platform.config import EndpointSettings, InferenceSettings
from ml_platform.constructs.nag import acknowledge, rendered_resource
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


# The upload runs in aws-cdk's BucketDeployment Lambda, which downloads the asset zip to its
# /tmp and unpacks it there: the zip and its files need about twice the folder's size. Lambda
# allows 10,240 MiB of ephemeral storage and 10,240 MiB of memory
# (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
LAMBDA_MAX_EPHEMERAL_MIB = 10_240
UPLOAD_DIR_MAX_BYTES = 4_800 * 1024 * 1024  # 2 x 4,800 MiB + headroom fits in 10,240 MiB


def deployment_sizing(total_bytes: int) -> tuple[int, int] | str:
    """``(memory MiB, ephemeral storage MiB)`` for uploading ``total_bytes`` of archives, or
    why it cannot be done at deploy time."""
    if total_bytes > UPLOAD_DIR_MAX_BYTES:
        return (
            f"{total_bytes / 2**20:,.0f} MiB of archives; the deploy-time upload holds at most "
            f"{UPLOAD_DIR_MAX_BYTES / 2**20:,.0f} MiB (it needs twice that in Lambda's "
            f"{LAMBDA_MAX_EPHEMERAL_MIB:,} MiB of /tmp): upload with `mlp models upload` instead"
        )
    mib = -(-total_bytes // 2**20)
    storage = min(LAMBDA_MAX_EPHEMERAL_MIB, max(512, 2 * mib + 512))
    memory = 512 if mib <= 256 else 1024 if mib <= 1024 else 2048  # unzip and the AWS CLI
    return memory, storage


def archives_fingerprint(archives: Sequence[Path]) -> str:
    """A content fingerprint of the archives, cheap for versioned names: a name
    ``<logical>-vXXXXXXXX.tar.gz`` already carries its content's hash, so only its name and size
    enter; other files are hashed whole."""
    import hashlib

    from ml_platform.triton.archive_names import parse_key

    def file_hash(path: Path) -> str:
        whole = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                whole.update(block)
        return whole.hexdigest()

    digest = hashlib.sha256()
    for archive in sorted(archives):
        parsed = parse_key(archive.name)
        size = archive.stat().st_size
        content = parsed.version if parsed else file_hash(archive)
        digest.update(f"{archive.name}\0{size}\0{content}\n".encode())
    return digest.hexdigest()


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
        topic = (
            sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn)
            if settings.alarm_topic_arn else None
        )
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
                inference_ami_version=settings.inference_ami_version,
                network_isolation=settings.network_isolation,
                instance_type_changes=settings.instance_type_changes,
                model_load_gpu_limit_percent=settings.model_load_gpu_limit_percent,
                alarm_topic=topic,
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
            # The settings already checked every archive (config.upload_dir_problems); the
            # asset is identified by a fingerprint of the archives (names, sizes and, for names
            # without a content version, SHA-256), so an unchanged folder is neither re-hashed
            # nor copied into cdk.out again.
            archives = sorted(source.glob("*.tar.gz"))
            total = sum(a.stat().st_size for a in archives)
            sizing = deployment_sizing(total)
            if isinstance(sizing, str):
                raise ValueError(
                    f"{self.node.path}: inference.upload_dir={settings.upload_dir!r}: {sizing}"
                )
            memory_mib, storage_mib = sizing
            self.upload = s3deploy.BucketDeployment(
                self,
                "UploadArchives",
                sources=[
                    s3deploy.Source.asset(
                        str(source),
                        asset_hash_type=AssetHashType.CUSTOM,
                        asset_hash=archives_fingerprint(archives),
                        exclude=["*", "!*.tar.gz"],
                    )
                ],
                memory_limit=memory_mib,
                ephemeral_storage_size=Size.mebibytes(storage_mib),
                destination_bucket=bucket,
                destination_key_prefix=model_prefix,
                prune=False,  # archives uploaded by `mlp models upload` stay
                exclude=["*"],
                include=["*.tar.gz"],
            )
            for construct in self.endpoints.values():
                construct.endpoint.node.add_dependency(self.upload)
            self._acknowledge_upload(bucket)

    def _acknowledge_upload(self, bucket: s3.IBucket) -> None:
        """The cdk-nag findings on aws-cdk's own BucketDeployment function, each with why."""
        role = self.upload.handler_role
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            "aws-cdk's BucketDeployment function: the managed policy only lets it write its "
            "own CloudWatch logs.",
        )
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Action::{action}]",
                "aws-cdk's BucketDeployment grants read on the CDK asset bucket and read-write "
                "on the model bucket (the sync reads, writes and aborts multipart uploads); "
                "the actions are limited to those two buckets' objects.",
            )
        assets = (
            f"arn:<AWS::Partition>:s3:::cdk-{DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-"
            f"{self.account}-{self.region}/*"
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{assets}]",
            "The zip of upload_dir is a CDK asset whose key is known only at deploy time; read "
            "is limited to the bootstrap asset bucket.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, bucket.arn_for_objects('*'))}]",
            "The deployment writes the archives under the model prefix of the model bucket; "
            "aws-cdk grants that bucket's objects.",
        )
        function = next(
            c for c in self.node.children
            if c.node.id.startswith("Custom::CDKBucketDeployment")
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "aws-cdk pins the runtime of its BucketDeployment handler to the version it ships "
            "the handler for; it moves with aws-cdk-lib upgrades.",
        )


def _construct_id(endpoint_name: str) -> str:
    """Stable construct id from an endpoint name: 'triton-ensembles' -> 'TritonEnsembles'."""
    return "".join(part[:1].upper() + part[1:] for part in endpoint_name.split("-"))
