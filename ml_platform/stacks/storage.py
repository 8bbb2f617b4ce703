"""StorageStack: everything stateful, apart from compute so the cluster can be replaced."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ml_platform.config import StorageSettings
from ml_platform.constructs.storage import (
    RETAIN,
    LustreStorage,
    ModelArtifactBucket,
    TrainingImageRepository,
)


class StorageStack(Stack):
    """Composes the training image repository, the model bucket and the Lustre file system.

    ``training_nodes`` is no longer a Lustre client: the nodes that mount the file system carry
    its client group (``lustre.client_security_group``) instead. It is still accepted so
    existing callers work.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: StorageSettings,
        image_repository_name: str,
        vpc: ec2.IVpc,
        trainium_subnet: ec2.ISubnet,
        training_nodes: ec2.ISecurityGroup | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # "retain" is RetainExceptOnCreate: kept on deletion, removed by a failed first create.
        removal = RemovalPolicy.DESTROY if settings.removal_policy == "destroy" else RETAIN
        self.image_repository = TrainingImageRepository(
            self,
            "TrainingImages",
            repository_name=image_repository_name,
            max_images=settings.ecr_max_images,
            removal_policy=removal,
        )
        self.models = ModelArtifactBucket(
            self, "Models", model_prefix=settings.model_prefix, removal_policy=removal
        )
        self.lustre = LustreStorage(
            self,
            "Lustre",
            vpc=vpc,
            subnet=trainium_subnet,
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
        CfnOutput(
            self,
            "LustreClientSecurityGroupId",
            value=self.lustre.client_security_group.security_group_id,
            description="Security group of the nodes that may mount the file system",
        )
