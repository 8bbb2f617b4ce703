"""Stateful storage: the training image registry, the model-archive bucket and Lustre.

Each construct is retained on stack deletion unless ``removal_policy`` says otherwise, and
keeps the id ``Resource`` for its main child so logical IDs never change silently.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
"""Lustre's LNet port and the range its clients connect from (988 alone is a known failure)."""


class TrainingImageRepository(Construct):
    """ECR repository for the training image: scan on push, immutable tags, expiring old images.

    Args:
        repository_name: Repository name. Default: CloudFormation picks one.
        max_images: Images kept before the oldest expire. Default 30.
        removal_policy: Default RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repository_name: str | None = None,
        max_images: int = 30,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= max_images <= 1000:
            raise ValueError(f"{self.node.path}: max_images={max_images}: expected 1 to 1000")
        self.repository = ecr.Repository(
            self,
            "Resource",
            repository_name=repository_name,
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.AES_256,
            removal_policy=removal_policy,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description="Expire untagged images after a week",
                    tag_status=ecr.TagStatus.UNTAGGED,
                    max_image_age=Duration.days(7),
                    rule_priority=1,
                ),
                ecr.LifecycleRule(
                    description=f"Keep the newest {max_images} images",
                    tag_status=ecr.TagStatus.ANY,
                    max_image_count=max_images,
                    rule_priority=2,
                ),
            ],
        )

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` pull images from this repository."""
        return self.repository.grant_pull(grantee)


class ModelArtifactBucket(Construct):
    """S3 bucket of Triton ensemble archives: encrypted, versioned, private, TLS only, with
    server access logs in a second bucket.

    Args:
        model_prefix: Key prefix of the archives (ends in ``/``). Default ``models/``.
        removal_policy: Default RETAIN (both buckets).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model_prefix: str = "models/",
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        if not model_prefix.endswith("/") or model_prefix.startswith("/"):
            raise ValueError(
                f"{self.node.path}: model_prefix={model_prefix!r}: expected a relative prefix "
                "ending in '/'"
            )
        self.model_prefix = model_prefix
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            # Ownership left to CDK: a bucket policy for log delivery where the app sets
            # @aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy (cdk.json does), an ACL otherwise.
            removal_policy=removal_policy,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
        )
        self.bucket = s3.Bucket(
            self,
            "Resource",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="model-bucket/",
            removal_policy=removal_policy,
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=Duration.days(90)),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7)),
            ],
        )

    def archive_arn(self, key_pattern: str = "*") -> str:
        """ARN of objects under the model prefix matching ``key_pattern``."""
        return self.bucket.arn_for_objects(f"{self.model_prefix}{key_pattern}")

    def grant_read_models(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read access to the archives under the model prefix only."""
        return self.bucket.grant_read(grantee, f"{self.model_prefix}*")


class LustreStorage(Construct):
    """FSx for Lustre (PERSISTENT_2, Lustre 2.15 for AL2023 clients) in one subnet, reachable on
    TCP 988 and 1018-1023 from the given client security groups only. Encrypted at rest
    (PERSISTENT_2 always is; pass ``kms_key`` for a customer-managed key).

    Args:
        vpc: The VPC.
        subnet: The one subnet (the Trainium AZ's private subnet).
        clients: Security groups allowed to mount the file system.
        storage_capacity_gib: 1200 or a multiple of 2400. Default 1200.
        throughput_per_tib: 125, 250, 500 or 1000 MB/s per TiB. Default 125.
        removal_policy: Default RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        clients: list[ec2.ISecurityGroup],
        storage_capacity_gib: int = 1200,
        throughput_per_tib: int = 125,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        errors = []
        if not (storage_capacity_gib == 1200 or (storage_capacity_gib > 0 and storage_capacity_gib % 2400 == 0)):
            errors.append(
                f"storage_capacity_gib={storage_capacity_gib}: expected 1200 or a multiple of 2400"
            )
        if throughput_per_tib not in (125, 250, 500, 1000):
            errors.append(f"throughput_per_tib={throughput_per_tib}: expected 125, 250, 500 or 1000")
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: Lustre ports from the training nodes only",
            allow_all_outbound=False,
        )
        self.file_system = fsx.LustreFileSystem(
            self,
            "Resource",
            vpc=vpc,
            vpc_subnet=subnet,
            storage_capacity_gib=storage_capacity_gib,
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_15,
            security_group=self.security_group,
            removal_policy=removal_policy,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
                per_unit_storage_throughput=throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
        )
        # Lustre servers also talk to each other and back to clients on these ports.
        for port in LUSTRE_PORTS:
            self.security_group.add_ingress_rule(self.security_group, port, "Lustre servers")
            self.security_group.add_egress_rule(self.security_group, port, "Lustre servers")
        for client in clients:
            self.allow_client(client)

    def allow_client(self, client: ec2.ISecurityGroup) -> None:
        """Open the Lustre ports to ``client`` (and let the file system answer it)."""
        for port in LUSTRE_PORTS:
            self.security_group.add_ingress_rule(client, port, "Lustre clients")
            self.security_group.add_egress_rule(client, port, "Lustre replies to clients")
