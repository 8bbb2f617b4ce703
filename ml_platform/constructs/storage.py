"""Stateful storage: the training image registry, the model-archive bucket and Lustre.

Each construct is retained on stack deletion unless ``removal_policy`` says otherwise, and
keeps the id ``Resource`` for its main child so logical IDs never change silently.
"""

from __future__ import annotations

__all__ = [
    "ImportedLustreStorage",
    "ImportedModelArtifactBucket",
    "LustreStorage",
    "LustreStorageBase",
    "LustreStorageProps",
    "ModelArtifactBucket",
    "ModelArtifactBucketBase",
    "ModelArtifactBucketProps",
    "TrainingImageRepository",
    "TrainingImageRepositoryProps",
    "fsx_metric",
]

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import (
    Annotations,
    CfnResource,
    DefaultStackSynthesizer,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
    Token,
)
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ml_platform import limits
from ml_platform.constructs._create_order import after_security_group_rules
from ml_platform.constructs._kms import restrict_grants
from ml_platform.constructs._l1 import default_child, find_child
from ml_platform.constructs._nag import (
    acknowledge_controls,
    acknowledge_each,
    managed_policy_finding,
)
from ml_platform.constructs._periods import FIVE_MINUTES, ONE_DAY, ONE_MINUTE
from ml_platform.constructs._props import check_props, shared_problems
from ml_platform.props.storage import ModelArtifactBucketPropsBase, TrainingImageRepositoryPropsBase

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
"""Lustre's LNet port and the range its clients connect from (988 alone is a known failure).
FSx for Lustre User Guide, "File system access control with Amazon VPC"
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html): the file
system's group and the clients' group each allow these ports from the other, and the file
system's group from itself."""

RETAIN = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
"""The default removal policy of stateful resources: CloudFormation's ``RetainExceptOnCreate``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-deletionpolicy.html).
Kept on stack deletion and replacement like ``Retain``, but deleted when the stack's first
create rolls back, so a failed first deploy leaves no fixed-name registry that blocks the
retry ("already exists") and no orphaned bucket."""

# aws-cdk's stack-level singletons behind auto_delete_objects / empty_on_delete.
_DELETE_PROVIDERS = {
    "Custom::S3AutoDeleteObjectsCustomResourceProvider": "empties the model and access-log buckets",
    "Custom::ECRAutoDeleteImagesCustomResourceProvider": "empties the training image registry",
}
S3_LOG_POLICY_FLAG = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"


def _acknowledge_delete_provider(scope: Construct) -> None:
    """Acknowledge cdk-nag's findings on aws-cdk's empty-on-delete handler, which only exists
    with ``removal_policy=DESTROY``."""
    stack = Stack.of(scope)
    for provider_id, purpose in _DELETE_PROVIDERS.items():
        provider = stack.node.try_find_child(provider_id)
        if provider is None:
            continue
        acknowledge_each(
            provider,
            {
                managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"): (
                    f"aws-cdk's delete handler ({purpose} on stack deletion with "
                    "removal_policy=DESTROY) logs with the AWS-maintained basic execution "
                    "policy."
                ),
                "AwsSolutions-L1": "aws-cdk pins the runtime of its bundled delete handler.",
            },
        )


@dataclass(frozen=True, kw_only=True)
class TrainingImageRepositoryProps(TrainingImageRepositoryPropsBase):
    """The props of :class:`TrainingImageRepository`: the checked ones of
    :class:`TrainingImageRepositoryPropsBase` (``max_images``) and what only the construct
    takes."""

    repository_name: str | None = None
    """Repository name (aws-cdk's ``ecr.Repository`` checks it). Default: CloudFormation picks
    one."""
    removal_policy: RemovalPolicy = RETAIN
    """Default :data:`RETAIN` (RetainExceptOnCreate). With DESTROY the registry is emptied on
    deletion (``empty_on_delete``), so the deletion succeeds."""
    customer_key: bool = False
    """Encrypt with a customer managed KMS key (rotation on) instead of AES256. Default false.
    Create-only: changing it on a deployed repository replaces it."""


class TrainingImageRepository(Construct):
    """ECR repository for the training image: scan on push, immutable tags, expiring old images.

    Args:
        props: The repository's props (:class:`TrainingImageRepositoryProps`). Default: a name
            CloudFormation picks, 30 images, AES256, retained.

    Attributes:
        repository: The ``ecr.Repository``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: TrainingImageRepositoryProps = TrainingImageRepositoryProps(),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The props, as checked.
        self.props = props
        check_props(self, props, TrainingImageRepositoryPropsBase)
        removal_policy, customer_key = props.removal_policy, props.customer_key
        self.repository = ecr.Repository(
            self,
            "Resource",
            repository_name=props.repository_name,
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            # EncryptionConfiguration is create-only: a deployed repository keeps AES256.
            encryption=(
                ecr.RepositoryEncryption.KMS if customer_key else ecr.RepositoryEncryption.AES_256
            ),
            encryption_key=(
                restrict_grants(
                    kms.Key(
                        self,
                        "Key",
                        description=f"Encryption of the images in {self.node.path}",
                        enable_key_rotation=True,
                        removal_policy=removal_policy,
                    )
                )
                if customer_key
                else None
            ),
            removal_policy=removal_policy,
            empty_on_delete=removal_policy == RemovalPolicy.DESTROY,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description="Expire untagged images after a week",
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=Duration.days(7),
                    rule_priority=1,
                ),
                ecr.LifecycleRule(
                    description=f"Keep the newest {props.max_images} images",
                    tag_status=ecr.TagStatus.ANY,
                    max_image_count=props.max_images,
                    rule_priority=2,
                ),
            ],
        )

        _acknowledge_delete_provider(self)

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` pull images from this repository."""
        return self.repository.grant_pull(grantee)

    def grant_push(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` push (and pull) images of this repository."""
        return self.repository.grant_pull_push(grantee)


class ModelArtifactBucketBase(Construct):
    """What every model bucket offers, created (:class:`ModelArtifactBucket`) or imported
    (:class:`ImportedModelArtifactBucket`): the archive prefix and the grants and metrics on
    it. The endpoints and Triton on EKS take any of them and grant through it.

    Attributes:
        bucket: The bucket. model_prefix: Key prefix of the archives (ends in ``/``).
        access_logs: The access-log bucket (``None`` when imported).
    """

    bucket: s3.IBucket
    model_prefix: str
    access_logs: s3.IBucket | None

    def archive_arn(self, key_pattern: str = "*") -> str:
        """ARN of objects under the model prefix matching ``key_pattern``."""
        return self.bucket.arn_for_objects(f"{self.model_prefix}{key_pattern}")

    def grant_read_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read the archives under the model prefix: ``s3:GetObject`` on ``<prefix>*`` and
        ``s3:ListBucket`` limited by an ``s3:prefix`` condition to the same prefix, and
        ``kms:Decrypt`` on the bucket's key when it has one."""
        get = iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:GetObject"], resource_arns=[self.archive_arn()]
        )
        grant = get.combine(self.grant_list_models(grantee))
        key = self.bucket.encryption_key
        if key is not None:  # SSE-KMS: S3 decrypts with the reader's kms:Decrypt
            grant = grant.combine(key.grant_decrypt(grantee))
        return grant

    def grant_list_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """List the archives: ``s3:ListBucket`` on the bucket, limited by an ``s3:prefix``
        condition to the model prefix."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{self.model_prefix}*"]}},
        )

    def grant_write_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """Upload archives under the model prefix (``s3:PutObject`` on ``<prefix>*``). The
        bucket policy refuses the writes of anyone not among ``publishers``, and every put
        without ``If-None-Match``."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:PutObject"], resource_arns=[self.archive_arn()]
        )

    def metric_object_count(self, **options: Any) -> cloudwatch.Metric:
        """Objects in the bucket (S3 daily storage metric, all storage classes). ``options``
        as ``cloudwatch.Metric`` takes them (``period``, ``statistic``, ``label``...);
        default: daily average."""
        return self._storage_metric("NumberOfObjects", "AllStorageTypes", options)

    def metric_bucket_size_bytes(self, **options: Any) -> cloudwatch.Metric:
        """Bytes stored in the Standard class (S3 daily storage metric). ``options`` as for
        :meth:`metric_object_count`."""
        return self._storage_metric("BucketSizeBytes", "StandardStorage", options)

    def _storage_metric(
        self, name: str, storage_type: str, options: dict[str, Any]
    ) -> cloudwatch.Metric:
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/metrics-dimensions.html
        # (storage metrics are reported once a day)
        settings: dict[str, Any] = {
            "period": ONE_DAY,
            "statistic": "Average",
            **options,
        }
        return cloudwatch.Metric(
            namespace="AWS/S3",
            metric_name=name,
            dimensions_map={"BucketName": self.bucket.bucket_name, "StorageType": storage_type},
            **settings,
        )


@dataclass(frozen=True, kw_only=True)
class ModelArtifactBucketProps(ModelArtifactBucketPropsBase):
    """The props of :class:`ModelArtifactBucket`: the ones the ``storage`` settings take too
    (:class:`ModelArtifactBucketPropsBase`: ``model_prefix``, checked) and what only the
    construct takes."""

    removal_policy: RemovalPolicy = RETAIN
    """Default :data:`RETAIN` (RetainExceptOnCreate; both buckets). With DESTROY both buckets
    are emptied on deletion (``auto_delete_objects``), so the deletion succeeds."""
    customer_key: bool = False
    """SSE-KMS with a customer managed key of its own (rotation on, S3 Bucket Key on) instead
    of SSE-S3, for the model bucket (the access-log bucket stays SSE-S3, the only encryption S3
    log delivery supports). :meth:`~ModelArtifactBucketBase.grant_read_models` then adds
    ``kms:Decrypt`` on it. Default false."""
    publishers: Sequence[str] = ()
    """ARNs of the IAM roles (or users) that may write and delete archives under the prefix.
    The bucket policy denies every action but the reads of :data:`ARCHIVE_READ_ACTIONS` there
    to every other principal (``aws:PrincipalArn``), whatever its IAM policies allow: archives
    are code the endpoints and Triton pods run, so replication writes, tagging, ACLs and
    restores are refused too. Default none: nobody writes archives (a synth warning says so)."""
    unconditional_publishers: Sequence[str] = ()
    """Publishers also allowed to put an object without ``If-None-Match`` (the deploy-time
    upload, whose ``aws s3 sync`` re-sends unchanged archives under the same content-versioned
    names). Everyone else's ``PutObject`` and ``CompleteMultipartUpload`` under the prefix must
    carry ``If-None-Match``, so no archive is overwritten. Default none."""
    administrators: Sequence[str] = ()
    """ARNs of the roles (or users) that may change the model bucket's configuration
    (:data:`BUCKET_CONFIGURATION_ACTIONS`: lifecycle, replication, versioning, policy,
    encryption...), besides the CloudFormation execution role of the stack's
    ``DefaultStackSynthesizer``, which deploys those changes. Everyone else is refused by the
    bucket policy: a lifecycle rule or a replication rule written by anyone with IAM rights
    would otherwise delete or replace archives. Default none. With another synthesizer and no
    administrators the statement is left out (a synth warning says so): it would refuse the
    deploys themselves."""


class ModelArtifactBucket(ModelArtifactBucketBase):
    """S3 bucket of Triton ensemble archives: encrypted, versioned, private, TLS only, with
    server access logs in a second bucket.

    Server access logs are delivered through a bucket policy (never an ACL), whatever the
    app's ``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`` feature flag says.

    Args:
        props: The bucket's props (:class:`ModelArtifactBucketProps`). Default: prefix
            ``models/``, SSE-S3, no publishers or administrators, retained.

    Attributes:
        bucket: The model bucket. access_logs: The access-log bucket (``None`` when imported).
        model_prefix: The prefix.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: ModelArtifactBucketProps = ModelArtifactBucketProps(),
    ) -> None:
        super().__init__(scope, construct_id)
        #: The props, as checked.
        self.props = props
        check_props(self, props, ModelArtifactBucketPropsBase)
        removal_policy, customer_key = props.removal_policy, props.customer_key
        publishers, unconditional_publishers = props.publishers, props.unconditional_publishers
        # Log delivery by bucket policy, not the LogDeliveryWrite ACL, independent of the
        # consumer's cdk.json (the flag is read from the log bucket's scope).
        self.node.set_context(S3_LOG_POLICY_FLAG, True)
        destroy = removal_policy == RemovalPolicy.DESTROY
        self.model_prefix = props.model_prefix
        # Both buckets: S3-managed keys, no public access, TLS only, no ACLs (bucket owner
        # enforced), and versioned, so a deleted or overwritten object can be recovered
        # (checkov CKV_AWS_21 asks it of the log bucket too).
        hardened: dict[str, Any] = {
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            "versioned": True,
            "removal_policy": removal_policy,
            "auto_delete_objects": destroy,
        }
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            **hardened,
            lifecycle_rules=[  # logs for a year, their old versions for 30 days
                s3.LifecycleRule(
                    expiration=Duration.days(365),
                    noncurrent_version_expiration=Duration.days(30),
                )
            ],
        )
        self.encryption_key: kms.Key | None = None
        if customer_key:
            self.encryption_key = restrict_grants(
                kms.Key(
                    self,
                    "Key",
                    description=f"Encryption of the model archives in {self.node.path}",
                    enable_key_rotation=True,
                    removal_policy=removal_policy,
                )
            )
            hardened = {
                **hardened,
                "encryption": s3.BucketEncryption.KMS,
                "encryption_key": self.encryption_key,
                "bucket_key_enabled": True,
            }
        self.bucket = s3.Bucket(
            self,
            "Resource",
            **hardened,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=Duration.days(90)),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7)),
            ],
        )

        self.publishers = (*publishers, *unconditional_publishers)
        self._protect_archives(list(publishers), list(unconditional_publishers), destroy)
        self._protect_configuration(list(props.administrators), destroy)
        _acknowledge_delete_provider(self)
        self._acknowledge_controls(self.access_logs, customer_key)

    def _acknowledge_controls(self, access_logs: s3.IBucket, customer_key: bool) -> None:
        """Control Tower findings accepted on the two buckets, each with its reason."""
        lock = (
            "Object Lock cannot be turned off once on, and a retention mode that means anything "
            "(governance or compliance) would keep every object version until it expires; "
        )
        acknowledge_controls(
            access_logs,
            {
                "CT.S3.PR.2": "This is the access-log target bucket itself; logging it into "
                "itself loops and into another bucket only moves the finding.",
                "CT.S3.PR.4": "Only S3's log delivery writes here and nothing consumes events "
                "of the log bucket; readers query the logs when investigating.",
                "CT.S3.PR.9": lock + "the log bucket is versioned (30 days of old versions) and "
                "only S3's logging service may write to it (bucket policy).",
                "CT.S3.PR.10": "S3 server access logging delivers only to a bucket whose default "
                "encryption is SSE-S3; SSE-KMS destinations are not supported "
                "(https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html).",
            },
        )
        reasons = {
            "CT.S3.PR.4": "Archives change only through the publishers the bucket policy "
            "names and are never overwritten; the deploy-time upload and `mlp models "
            "upload` record each archive, so no event consumer exists to notify.",
            "CT.S3.PR.9": lock + "archives are retired by deleting them (`mlp models "
            "retire`), and the bucket policy already refuses overwrites and limits deletes "
            "to the publishers; versioning keeps deleted archives 90 days.",
            "CT.S3.PR.10": "SSE-S3 by default (storage.model_bucket_kms turns SSE-KMS on): "
            "every reader would need kms:Decrypt on a key, and switching a deployed bucket "
            "leaves the archives already stored under SSE-S3.",
        }
        if customer_key:
            del reasons["CT.S3.PR.10"]
        acknowledge_controls(self.bucket, reasons)

    def _protect_archives(
        self, publishers: list[str], unconditional: list[str], destroy: bool
    ) -> None:
        """Bucket-policy statements: archives under the prefix are written only by the
        publishers, and never overwritten (S3 conditional writes, enforced by policy)."""
        archives = self.archive_arn()
        exempt = [*publishers, *unconditional]
        if destroy:  # aws-cdk's empty-on-delete handler deletes every version on deletion
            exempt.append(_delete_provider_role_arn(self))
        if not publishers and not unconditional:
            Annotations.of(self).add_warning_v2(
                "ml-platform:no-archive-publishers",
                "No archive publishers named (storage.archive_publishers, or "
                "cluster.admin_role_arn from `mlp azs`): the bucket policy lets no principal "
                f"write or delete under {self.model_prefix}, so `mlp models upload` is refused.",
            )
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ArchivesOnlyFromPublishers",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                not_actions=list(ARCHIVE_READ_ACTIONS),
                resources=[archives],
                conditions={"ArnNotLike": {"aws:PrincipalArn": exempt}} if exempt else None,
            )
        )
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html:
        # s3:if-none-match is absent without the header; s3:ObjectCreationOperation exempts
        # CreateMultipartUpload and UploadPart (they take no conditional header), so
        # PutObject and CompleteMultipartUpload must send If-None-Match. CopyObject into the
        # prefix is refused too (S3 does not implement it with If-None-Match).
        conditions: dict[str, Any] = {
            "Null": {"s3:if-none-match": "true"},
            "Bool": {"s3:ObjectCreationOperation": "true"},
        }
        if unconditional:
            conditions["ArnNotLike"] = {"aws:PrincipalArn": unconditional}
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ArchivesNeverOverwritten",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[archives],
                conditions=conditions,
            )
        )

    def _protect_configuration(self, administrators: list[str], destroy: bool) -> None:
        """Bucket-policy statement: only the administrators and the deploys change the
        bucket's configuration."""
        stack = Stack.of(self)
        exempt = list(administrators)
        if isinstance(stack.synthesizer, DefaultStackSynthesizer):
            # arn:${AWS::Partition}:iam::<account>:role/cdk-<qualifier>-cfn-exec-role-...
            exempt.append(Fn.sub(stack.synthesizer.cloud_formation_execution_role_arn))
        if destroy:  # aws-cdk's empty-on-delete handler puts a deny-writes policy first
            exempt.append(_delete_provider_role_arn(self))
        if not administrators and not isinstance(stack.synthesizer, DefaultStackSynthesizer):
            Annotations.of(self).add_warning_v2(
                "ml-platform:no-bucket-administrators",
                "No bucket administrators and no DefaultStackSynthesizer (whose CloudFormation "
                "execution role deploys the bucket): the model bucket's configuration is left "
                "open to every principal with IAM rights. Pass administrators.",
            )
            return
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ConfigurationOnlyByAdministrators",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(BUCKET_CONFIGURATION_ACTIONS),
                resources=[self.bucket.bucket_arn],
                conditions={"ArnNotLike": {"aws:PrincipalArn": exempt}},
            )
        )

    @classmethod
    def from_bucket_name(
        cls,
        scope: Construct,
        construct_id: str,
        bucket_name: str,
        *,
        model_prefix: str = limits.DEFAULT_MODEL_PREFIX,
    ) -> ImportedModelArtifactBucket:
        """An existing model bucket (``grant_*`` then add to the grantee's policy only)."""
        return ImportedModelArtifactBucket(
            scope, construct_id, bucket=bucket_name, model_prefix=model_prefix
        )

    @classmethod
    def from_bucket(
        cls,
        scope: Construct,
        construct_id: str,
        bucket: s3.IBucket,
        *,
        model_prefix: str = limits.DEFAULT_MODEL_PREFIX,
    ) -> ImportedModelArtifactBucket:
        """A model bucket over an ``s3.IBucket`` this app already refers to (another stack's
        bucket, an imported one): its archives under ``model_prefix``."""
        return ImportedModelArtifactBucket(
            scope, construct_id, bucket=bucket, model_prefix=model_prefix
        )


class ImportedModelArtifactBucket(ModelArtifactBucketBase):
    """A model bucket this construct does not create (what the ``from_*`` methods of
    :class:`ModelArtifactBucket` return): its archives under ``model_prefix``; ``grant_*``
    add to the grantee's policy only.

    Args:
        bucket: The bucket: its name (imported here, as child ``Resource``), or an
            ``s3.IBucket``. Required.
        model_prefix: Key prefix of the archives (ends in ``/``). Default ``models/``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket | str,
        model_prefix: str = limits.DEFAULT_MODEL_PREFIX,
    ) -> None:
        super().__init__(scope, construct_id)
        check_props(
            self,
            ModelArtifactBucketPropsBase(model_prefix=model_prefix),
            ModelArtifactBucketPropsBase,
        )
        self.model_prefix = model_prefix
        self.access_logs = None
        self.bucket = (
            s3.Bucket.from_bucket_name(self, "Resource", bucket)
            if isinstance(bucket, str)
            else bucket
        )


def import_model_bucket(
    scope: Construct, construct_id: str, bucket_arn_export: str, key_arn_export: str | None
) -> s3.IBucket:
    """The model bucket of another stack, by the names of its exports: its ARN and, with
    ``storage.model_bucket_kms``, its key's ARN (so :meth:`~ModelArtifactBucketBase.
    grant_read_models` grants ``kms:Decrypt`` on it)."""
    key = (
        kms.Key.from_key_arn(scope, f"{construct_id}Key", Fn.import_value(key_arn_export))
        if key_arn_export
        else None
    )
    return s3.Bucket.from_bucket_attributes(
        scope, construct_id, bucket_arn=Fn.import_value(bucket_arn_export), encryption_key=key
    )


def archive_prefix(
    bucket: s3.IBucket | ModelArtifactBucketBase, model_prefix: str | None
) -> tuple[str, str | None]:
    """The archive prefix of a construct taking ``bucket`` and ``model_prefix`` (a bucket
    construct's own, else ``model_prefix``, default ``models/``), and the problem when
    ``model_prefix`` contradicts the construct's (``None`` if none)."""
    if not isinstance(bucket, ModelArtifactBucketBase):
        return (limits.DEFAULT_MODEL_PREFIX if model_prefix is None else model_prefix), None
    if model_prefix in (None, bucket.model_prefix):
        return bucket.model_prefix, None
    return bucket.model_prefix, (
        f"model_prefix = {limits.shown(model_prefix)}: the bucket construct's prefix is "
        f"{bucket.model_prefix!r}; leave model_prefix unset with a bucket construct"
    )


#: What the archive bucket policy leaves to everyone under the model prefix (their IAM
#: policies decide); every other action there is the publishers' only (``NotAction``).
ARCHIVE_READ_ACTIONS = (
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:GetObjectAttributes",
    "s3:GetObjectVersionAttributes",
    "s3:GetObjectTagging",
    "s3:GetObjectVersionTagging",
)

#: Bucket-level writes only administrators and deploys may make (Service Authorization
#: Reference, Amazon S3 actions on the ``bucket`` resource type). Each can delete, replace or
#: expose archives without touching an object: lifecycle expiry, replication rules into or out
#: of the bucket, suspended versioning, another policy, encryption, public access, logging.
BUCKET_CONFIGURATION_ACTIONS = (
    "s3:PutLifecycleConfiguration",
    "s3:PutReplicationConfiguration",
    "s3:PutBucketVersioning",
    "s3:PutBucketObjectLockConfiguration",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutBucketPublicAccessBlock",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketAcl",
    "s3:PutBucketLogging",
    "s3:PutBucketNotification",
    "s3:PutInventoryConfiguration",
    "s3:PutIntelligentTieringConfiguration",
    "s3:PutBucketWebsite",
    "s3:PutBucketCORS",
    "s3:DeleteBucket",
)


def _delete_provider_role_arn(scope: Construct) -> str:
    """ARN of the role of aws-cdk's empty-on-delete handler for buckets (a stack singleton
    that exists once a bucket sets ``auto_delete_objects``)."""
    provider = Stack.of(scope).node.find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
    role = find_child(provider, "Role", CfnResource)
    return Token.as_string(role.get_att("Arn"))


def model_prefix_problems(model_prefix: str) -> list[str]:
    """The problems of an archive prefix given beside a plain bucket (to the endpoint or Triton
    on EKS): the rule of the model bucket's own ``model_prefix`` field
    (:class:`~ml_platform.props.storage.ModelArtifactBucketPropsBase`), worded alike."""
    prefix = ModelArtifactBucketPropsBase(model_prefix=model_prefix)
    return shared_problems(prefix, ModelArtifactBucketPropsBase)


def fsx_metric(
    file_system_id: str,
    metric_name: str,
    statistic: str = "Sum",
    period: Duration = ONE_MINUTE,
    **options: Any,
) -> cloudwatch.Metric:
    """An FSx for Lustre file-system metric (``AWS/FSx``, dimension ``FileSystemId``), for a
    file system known by id (the training dashboard's); :meth:`LustreStorageBase.metric` is
    the same with 5-minute averages.
    https://docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html"""
    return cloudwatch.Metric(
        namespace="AWS/FSx",
        metric_name=metric_name,
        statistic=statistic,
        period=period,
        dimensions_map={"FileSystemId": file_system_id},
        **options,
    )


class LustreStorageBase(Construct):
    """What a Lustre file system offers, created (:class:`LustreStorage`) or imported
    (:class:`ImportedLustreStorage`): opening it to clients and its metrics.

    Attributes:
        file_system: The ``fsx.ILustreFileSystem``-like file system. security_group: Its
            security group. connections: The ``ec2.Connections`` of that group.
            mount_name: The Lustre mount name. client_security_group: The group of the nodes
            that mount it (``None`` when imported).
    """

    file_system: fsx.LustreFileSystem | fsx.IFileSystem
    security_group: ec2.ISecurityGroup
    client_security_group: ec2.ISecurityGroup | None
    connections: ec2.Connections
    mount_name: str

    def allow_client(self, client: ec2.ISecurityGroup | ec2.IConnectable) -> None:
        """Open the Lustre ports to ``client`` (a security group, or any ``IConnectable``
        such as a node group's connections) and let the file system answer it."""
        # A security group is itself connectable (its connections hold just the group).
        for group in client.connections.security_groups:
            for port in LUSTRE_PORTS:
                self.security_group.add_ingress_rule(group, port, "Lustre clients")
                self.security_group.add_egress_rule(group, port, "Lustre replies to clients")
        self._apply_removal_policy()

    def _apply_removal_policy(self) -> None:
        """Hook after new rules: nothing for a file system this app does not own."""

    def metric(self, metric_name: str, **options: Any) -> cloudwatch.Metric:
        """An ``AWS/FSx`` metric of this file system (e.g. ``FreeDataStorageCapacity``,
        ``DataReadBytes``). ``options`` as ``cloudwatch.Metric`` takes them (``period``,
        ``statistic``, ``label``...); default: 5-minute average."""
        settings: dict[str, Any] = {"period": FIVE_MINUTES, "statistic": "Average", **options}
        return fsx_metric(self.file_system.file_system_id, metric_name, **settings)

    def metric_free_capacity(self, **options: Any) -> cloudwatch.Metric:
        """Free data storage capacity in bytes (minimum over the period by default)."""
        return self.metric("FreeDataStorageCapacity", **{"statistic": "Minimum", **options})


@dataclass(frozen=True, kw_only=True)
class LustreStorageProps:
    """The value props of :class:`LustreStorage`. None is checked here: aws-cdk's
    ``LustreFileSystem`` refuses the capacity and throughput PERSISTENT_2 does not take (read in
    aws-cdk-lib 2.275.0, ``aws-fsx/lib/lustre-file-system.js``); the settings
    (``storage.fsx_storage_gib``, ``storage.fsx_throughput_per_tib``) check the same values
    before synthesis, with their upper bound."""

    storage_capacity_gib: int = limits.DEFAULT_FSX_STORAGE_GIB
    """1200 or a multiple of 2400 up to 2400000. Default 1200."""
    throughput_per_tib: int = limits.DEFAULT_FSX_THROUGHPUT_PER_TIB
    """125, 250, 500 or 1000 MB/s per TiB. Default 250."""
    removal_policy: RemovalPolicy = RETAIN
    """Of the file system, its security groups and their rules. Default :data:`RETAIN`
    (RetainExceptOnCreate)."""


class LustreStorage(LustreStorageBase):
    """FSx for Lustre (PERSISTENT_2, Lustre 2.15 for AL2023 clients) in one subnet, reachable on
    TCP 988 and 1018-1023 from its client security group (and any group given to
    :meth:`allow_client`) only. Encrypted at rest (PERSISTENT_2 always is; pass ``kms_key`` for
    a customer-managed key).

    FSx for Lustre has no client authentication: whoever reaches the ports can mount. So the
    file system is open to :attr:`client_security_group`, a group that only the nodes which
    mount it carry (the platform puts it on the Trainium and system nodes), not to a whole
    cluster security group.

    Create order: the file system waits for every rule of its groups in its stack
    (``DependsOn``), or FSx may check its group before the rules exist and refuse with
    ``InvalidNetworkSettings`` (:mod:`ml_platform.constructs._create_order`).

    Teardown: both security groups and their rules take the file system's removal policy.
    A retained file system keeps its network interfaces, so deleting its group would fail
    (aws/aws-cdk#31521, https://github.com/aws/aws-cdk/issues/31521) and the stack with it;
    retained, the group stays usable with the file system.

    Implements ``ec2.IConnectable``: ``connections`` holds the file system's security group
    (default port 988); use :meth:`allow_client` to open both Lustre port ranges.

    Args:
        vpc: The VPC. Required.
        subnet: The one subnet (the Trainium AZ's private subnet). Required.
        clients: Further security groups (or other ``IConnectable``) allowed to mount the file
            system. Default none (:attr:`client_security_group` only).
        kms_key: Customer-managed key encrypting the data at rest. Default: an AWS-owned key.
        props: Capacity, throughput and removal policy (:class:`LustreStorageProps`). Default
            ``LustreStorageProps()``.

    Attributes:
        file_system: The ``fsx.LustreFileSystem``. security_group: Its security group.
        client_security_group: The group of the nodes that mount it (no other rules: it only
            reaches the file system).
        connections: The ``ec2.Connections`` of that group. mount_name: The Lustre mount name.
    """

    # Narrower than the base: a created file system is an L2 with its own client group.
    file_system: fsx.LustreFileSystem
    client_security_group: ec2.ISecurityGroup

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        clients: Sequence[ec2.ISecurityGroup | ec2.IConnectable] = (),
        kms_key: kms.IKey | None = None,
        props: LustreStorageProps | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        #: The value props.
        self.props = props = props or LustreStorageProps()
        self._removal_policy = props.removal_policy
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: Lustre ports from the training nodes only",
            allow_all_outbound=False,
        )
        self.client_security_group = ec2.SecurityGroup(
            self,
            "ClientSecurityGroup",
            vpc=vpc,
            description="FSx for Lustre clients: only the nodes that mount the file system",
            allow_all_outbound=False,
        )
        self.file_system = fsx.LustreFileSystem(
            self,
            "Resource",
            vpc=vpc,
            vpc_subnet=subnet,
            storage_capacity_gib=props.storage_capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            security_group=self.security_group,
            kms_key=kms_key,
            removal_policy=props.removal_policy,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
                per_unit_storage_throughput=props.throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
        )
        self.connections = self.file_system.connections
        self.mount_name = self.file_system.mount_name
        # Lustre servers also talk to each other and back to clients on these ports.
        for port in LUSTRE_PORTS:
            self.security_group.add_ingress_rule(self.security_group, port, "Lustre servers")
            self.security_group.add_egress_rule(self.security_group, port, "Lustre servers")
        # The client group's side: it reaches the file system and takes its replies.
        for port in LUSTRE_PORTS:
            self.client_security_group.add_egress_rule(
                self.security_group, port, "Lustre client to the file system"
            )
            self.client_security_group.add_ingress_rule(
                self.security_group, port, "Lustre file system to its clients"
            )
        self.allow_client(self.client_security_group)
        for client in clients:
            self.allow_client(client)
        after_security_group_rules(
            default_child(self.file_system, CfnResource), [self.security_group]
        )

    @classmethod
    def from_file_system_attributes(
        cls,
        scope: Construct,
        construct_id: str,
        *,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
    ) -> ImportedLustreStorage:
        """An existing Lustre file system, to open it to clients with :meth:`allow_client`
        (the rules are created in ``scope``'s stack) or read its attributes."""
        return ImportedLustreStorage(
            scope,
            construct_id,
            file_system_id=file_system_id,
            dns_name=dns_name,
            mount_name=mount_name,
            security_group=security_group,
        )

    def _apply_removal_policy(self) -> None:
        """The file system's removal policy on its groups and every rule made in them."""
        # Both groups exist before the first allow_client (the client group is made first).
        for group in (self.security_group, self.client_security_group):
            for child in group.node.find_all():
                if isinstance(child, CfnResource):
                    child.apply_removal_policy(self._removal_policy)


class ImportedLustreStorage(LustreStorageBase):
    """A Lustre file system this app does not create (what
    :meth:`LustreStorage.from_file_system_attributes` returns): :meth:`allow_client` adds the
    rules to its security group in ``scope``'s stack.

    Args:
        file_system_id / dns_name / mount_name: The file system's attributes. Required.
        security_group: Its security group. Required.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = security_group
        self.client_security_group = None
        self.file_system = fsx.LustreFileSystem.from_lustre_file_system_attributes(
            self,
            "Resource",
            file_system_id=file_system_id,
            dns_name=dns_name,
            security_group=security_group,
        )
        self.mount_name = mount_name
        self.connections = self.file_system.connections
