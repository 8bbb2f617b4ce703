"""Deploy-time upload of a folder of Triton archives under the model bucket's prefix."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import AssetHashType, DefaultStackSynthesizer, Size, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from ml_platform.constructs._nag import (
    acknowledge,
    acknowledge_each,
    aws_managed_policy,
    managed_policy_finding,
    rendered_resource,
)
from ml_platform.constructs.storage import ModelArtifactBucketBase
from ml_platform.triton.archive_names import parse_key

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


class ModelArchiveUpload:
    """Uploads the ``*.tar.gz`` archives of a local folder under the model prefix at deploy
    time (aws-cdk's ``BucketDeployment``), with a role of its own that can only read the asset
    and list and put under the prefix.

    Its resources are made directly in ``scope`` (ids ``UploadRole`` and ``UploadArchives``),
    not under a construct level of their own: the upload keeps the logical IDs and construct
    paths it had when the inference stack built it inline, so an upgrade does not replace it.
    One upload per scope.

    Args:
        scope: Where the role and the deployment are created (a stack, or a construct in it).
        source_dir: The folder. Required; it must exist and hold at most
            :data:`UPLOAD_DIR_MAX_BYTES` of archives.
        models: The model bucket (a :class:`~ml_platform.constructs.storage.ModelArtifactBucket`
            or what its ``from_*`` methods return). Required.
        setting: How error messages name the folder. Default ``inference.upload_dir``.

    Attributes:
        role: The upload's role, named :func:`upload_role_name` (the model bucket's policy
            names it as a publisher). deployment: The ``s3deploy.BucketDeployment``.
    """

    def __init__(
        self,
        scope: Construct,
        *,
        source_dir: str,
        models: ModelArtifactBucketBase,
        setting: str = "inference.upload_dir",
    ) -> None:
        self._scope = scope
        source = Path(source_dir)
        if not source.is_dir():
            raise ValueError(f"{scope.node.path}: {setting}={source_dir!r}: not a directory")
        # The settings already checked every archive (triton.upload_dir.upload_dir_problems); the
        # asset is identified by a fingerprint of the archives (names, sizes and, for names
        # without a content version, SHA-256), so an unchanged folder is neither re-hashed
        # nor copied into cdk.out again.
        archives = sorted(source.glob("*.tar.gz"))
        total = sum(a.stat().st_size for a in archives)
        sizing = deployment_sizing(total)
        if isinstance(sizing, str):
            raise ValueError(f"{scope.node.path}: {setting}={source_dir!r}: {sizing}")
        memory_mib, storage_mib = sizing
        self.role = self._upload_role(models)
        self.deployment = s3deploy.BucketDeployment(
            scope,
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
            destination_bucket=models.bucket,
            destination_key_prefix=models.model_prefix,
            prune=False,  # archives uploaded by `mlp models upload` stay
            exclude=["*"],
            include=["*.tar.gz"],
            # aws-cdk would grant read-write on the whole bucket: the role gets exactly
            # the statements of _upload_role instead.
            role=self.role.without_policy_updates(),
        )
        self.deployment.node.add_dependency(self.role)
        self._acknowledge()

    def _upload_role(self, models: ModelArtifactBucketBase) -> iam.Role:
        """The deploy-time upload's role: read the asset zip, list and put (multipart
        included) under the model prefix, nothing else in the model bucket. Its name is
        :func:`upload_role_name`, which the model bucket's policy names as a publisher."""
        stack = Stack.of(self._scope)
        role = iam.Role(
            self._scope,
            "UploadRole",
            role_name=upload_role_name(stack.stack_name, stack.region),
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Deploy-time upload of inference.upload_dir into the model prefix",
            managed_policies=[aws_managed_policy("service-role/AWSLambdaBasicExecutionRole")],
        )
        self._asset_objects = (
            f"arn:{stack.partition}:s3:::cdk-{DefaultStackSynthesizer.DEFAULT_QUALIFIER}-assets-"
            f"{stack.account}-{stack.region}/*"
        )
        self._prefix_objects = models.archive_arn()
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self._asset_objects])
        )
        models.grant_list_models(role)
        # `aws s3 sync` puts each archive, in parts above 8 MiB (all s3:PutObject), and aborts
        # a failed multipart upload.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self._prefix_objects],
            )
        )
        key = models.bucket.encryption_key
        if key is not None:  # SSE-KMS (storage.model_bucket_kms): a data key per object, and
            # kms:Decrypt to complete multipart uploads (S3 user guide, "Multipart upload and
            # permissions", https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html).
            key.grant(role, "kms:GenerateDataKey", "kms:Decrypt")
        return role

    def _acknowledge(self) -> None:
        """The cdk-nag findings on the deploy-time upload's role, each with why."""
        stack = Stack.of(self._scope)
        role = self.role
        acknowledge_each(
            role,
            {
                managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"): (
                    "aws-cdk's BucketDeployment function: the managed policy only lets it "
                    "write its own CloudWatch logs."
                ),
                f"AwsSolutions-IAM5[Resource::{rendered_resource(stack, self._asset_objects)}]": (
                    "The zip of upload_dir is a CDK asset whose key is known only at deploy "
                    "time; s3:GetObject only, in the bootstrap asset bucket."
                ),
                f"AwsSolutions-IAM5[Resource::{rendered_resource(stack, self._prefix_objects)}]": (
                    "The deployment puts the archives under the model prefix (any archive "
                    "name); put and abort only, no read or delete."
                ),
            },
        )
        function = next(
            c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")
        )
        acknowledge(
            function,
            "AwsSolutions-L1",
            "aws-cdk pins the runtime of its BucketDeployment handler to the version it ships "
            "the handler for; it moves with aws-cdk-lib upgrades.",
        )
