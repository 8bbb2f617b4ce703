"""InferenceStack: Triton multi-model endpoints over the model bucket's archive prefix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import AssetHashType, CfnOutput, DefaultStackSynthesizer, Fn, Size, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sns as sns
from constructs import Construct

from ml_platform.config import EndpointSettings, InferenceSettings
from ml_platform.config import endpoint_construct_id as _construct_id
from ml_platform.constructs.dashboards import EndpointDashboard
from ml_platform.constructs.nag import acknowledge, rendered_resource
from ml_platform.constructs.sagemaker_mme import TritonMultiModelEndpoint
from ml_platform.stack_outputs import (  # noqa: F401  (re-exported: tests and the app use them)
    ENDPOINTS_DASHBOARD_OUTPUT,
    ENDPOINTS_PER_STACK,
    STACK_RESOURCE_LIMIT,
    endpoint_groups,
)
from ml_platform.stacks.network import _retention

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


def upload_role_name(stack_name: str, region: str) -> str:
    """Name of the deploy-time upload's role. Fixed, so the storage stack's bucket policy
    can name it as a publisher without referencing this stack (which depends on storage).
    IAM role names are account-wide: the region keeps two regions' stacks apart."""
    name = f"{stack_name}-ArchiveUpload-{region}"
    if len(name) > 64:  # IAM's limit on role names
        name = f"{stack_name[: 64 - len(region) - 15]}-ArchiveUpload-{region}"
    return name


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
            if settings.alarm_topic_arn
            else None
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
                log_retention=_retention(settings.log_retention_days),
                log_verbose=settings.triton_log_verbose,
            )
            self.endpoints[endpoint.name] = construct
            CfnOutput(
                self,
                f"{_construct_id(endpoint.name)}Name",
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
            self.upload_role = self._upload_role(bucket, model_prefix)
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
                # aws-cdk would grant read-write on the whole bucket: the role gets exactly
                # the statements of _upload_role instead.
                role=self.upload_role.without_policy_updates(),
            )
            self.upload.node.add_dependency(self.upload_role)
            for construct in self.endpoints.values():
                construct.endpoint.node.add_dependency(self.upload)
            self._acknowledge_upload(bucket)

    def _upload_role(self, bucket: s3.IBucket, model_prefix: str) -> iam.Role:
        """The deploy-time upload's role: read the asset zip, list and put (multipart
        included) under the model prefix, nothing else in the model bucket. Its name is
        :func:`upload_role_name`, which the model bucket's policy names as a publisher."""
        role = iam.Role(
            self,
            "UploadRole",
            role_name=upload_role_name(self.stack_name, self.region),
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Deploy-time upload of inference.upload_dir into the model prefix",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "service-role/AWSLambdaBasicExecutionRole"
                )
            ],
        )
        self._asset_objects = (
            f"arn:{self.partition}:s3:::cdk-{DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-"
            f"{self.account}-{self.region}/*"
        )
        self._prefix_objects = bucket.arn_for_objects(f"{model_prefix}*")
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self._asset_objects])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{model_prefix}*"]}},
            )
        )
        # `aws s3 sync` puts each archive, in parts above 8 MiB (all s3:PutObject), and aborts
        # a failed multipart upload.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self._prefix_objects],
            )
        )
        return role

    def _acknowledge_upload(self, bucket: s3.IBucket) -> None:
        """The cdk-nag findings on the deploy-time upload's role, each with why."""
        role = self.upload_role
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            "aws-cdk's BucketDeployment function: the managed policy only lets it write its "
            "own CloudWatch logs.",
        )
        assets = (
            f"arn:<AWS::Partition>:s3:::cdk-{DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-"
            f"{self.account}-{self.region}/*"
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{assets}]",
            "The zip of upload_dir is a CDK asset whose key is known only at deploy time; "
            "s3:GetObject only, in the bootstrap asset bucket.",
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, self._prefix_objects)}]",
            "The deployment puts the archives under the model prefix (any archive name); "
            "put and abort only, no read or delete.",
        )
        function = next(
            c for c in self.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "aws-cdk pins the runtime of its BucketDeployment handler to the version it ships "
            "the handler for; it moves with aws-cdk-lib upgrades.",
        )
