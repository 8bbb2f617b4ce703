"""StorageStack: everything stateful, apart from compute so the cluster can be replaced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ml_platform.config import StorageSettings
from ml_platform.constructs.storage import (
    LustreStorage,
    ModelArtifactBucket,
    TrainingImageRepository,
)


class StorageStack(Stack):
    """Composes the training image repository, the model bucket and the Lustre file system."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: StorageSettings,
        image_repository_name: str,
        vpc: ec2.IVpc,
        trainium_subnet: ec2.ISubnet,
        training_nodes: ec2.ISecurityGroup,
        archive_publishers: Sequence[str] = (),
        upload_role_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``archive_publishers``: principal ARNs that may write archives; ``upload_role_name``:
        the deploy-time upload's role (:func:`ml_platform.stacks.inference.upload_role_name`),
        named so its ARN is known here without a reference to the inference stack."""
        super().__init__(scope, construct_id, **kwargs)
        removal = (
            RemovalPolicy.DESTROY if settings.removal_policy == "destroy" else RemovalPolicy.RETAIN
        )
        self.image_repository = TrainingImageRepository(
            self,
            "TrainingImages",
            repository_name=image_repository_name,
            max_images=settings.ecr_max_images,
            removal_policy=removal,
        )
        unconditional = (
            [self.format_arn(service="iam", region="", resource="role", resource_name=upload_role_name)]
            if upload_role_name else []
        )
        self.models = ModelArtifactBucket(
            self,
            "Models",
            model_prefix=settings.model_prefix,
            removal_policy=removal,
            publishers=list(archive_publishers),
            unconditional_publishers=unconditional,
        )
        self.lustre = LustreStorage(
            self,
            "Lustre",
            vpc=vpc,
            subnet=trainium_subnet,
            clients=[training_nodes],
            storage_capacity_gib=settings.fsx_storage_gib,
            throughput_per_tib=settings.fsx_throughput_per_tib,
            removal_policy=removal,
        )
        CfnOutput(self, "TrainingImageRepositoryUri", value=self.image_repository.repository.repository_uri)
        CfnOutput(self, "ModelBucketName", value=self.models.bucket.bucket_name)
        # A named export: consumers import it by a name that cannot drift, and cdk-nag
        # acknowledgements can quote it.
        self.model_bucket_arn_export = f"{self.stack_name}-ModelBucketArn"
        CfnOutput(
            self,
            "ModelBucketArn",
            value=self.models.bucket.bucket_arn,
            export_name=self.model_bucket_arn_export,
        )
        CfnOutput(self, "ModelPrefix", value=settings.model_prefix)
        CfnOutput(self, "FileSystemId", value=self.lustre.file_system.file_system_id)
