"""StorageStack: everything stateful, apart from compute so the cluster can be replaced."""

from __future__ import annotations

__all__ = [
    "LUSTRE_MBPS_PER_NODE",
    "LUSTRE_THROUGHPUT_WARNING",
    "StorageStack",
]

from collections.abc import Sequence
from typing import Any

from aws_cdk import Annotations, CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from ml_platform.config import StorageSettings
from ml_platform.constructs.storage import (
    RETAIN,
    LustreStorage,
    LustreStorageProps,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
)

LUSTRE_MBPS_PER_NODE = 117
"""File-system throughput per Trainium node the BERT sample is provisioned with: the Neuron
EKS sample's StorageClass asks for 1200 GiB at 200 MB/s per TiB (PERSISTENT_1, about 234 MB/s)
for its two trn1.32xlarge nodes
(https://github.com/aws-neuron/aws-neuron-eks-samples/blob/main/dp_bert_hf_pretrain/scripts/create_storageclass_manifest.sh).
Every worker reads its dataset shards from the file system, rank 0 writes multi-GB
checkpoints, and a file system's throughput is its capacity in TiB times the per-unit
throughput (FSx for Lustre User Guide, "Performance",
https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html)."""
LUSTRE_THROUGHPUT_WARNING = "ml-platform:lustreThroughput"


def lustre_throughput_mbps(storage_gib: int, per_tib: int) -> float:
    """Baseline throughput of a file system of ``storage_gib`` at ``per_tib`` MB/s/TiB."""
    return storage_gib / 1024 * per_tib


class StorageStack(Stack):
    """Composes the training image repository, the model bucket and the Lustre file system.

    ``lustre_readers``: Trainium nodes that read the file system at once; the stack warns
    (``ml-platform:lustreThroughput``) when the file system's throughput is below
    :data:`LUSTRE_MBPS_PER_NODE` per node. Default 0 (no check).

    The nodes that mount the file system carry its client group
    (``lustre.client_security_group``).
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
        archive_publishers: Sequence[str] = (),
        bucket_administrators: Sequence[str] = (),
        upload_role_name: str | None = None,
        lustre_readers: int = 0,
        legacy_lustre_clients: Sequence[ec2.ISecurityGroup] = (),
        **kwargs: Any,
    ) -> None:
        """``archive_publishers``: principal ARNs that may write archives;
        ``bucket_administrators``: those that may change the model bucket's configuration
        (besides the deploys); ``upload_role_name``:
        the deploy-time upload's role (:func:`ml_platform.constructs._model_upload.upload_role_name`),
        named so its ARN is known here without a reference to the inference stack.
        ``legacy_lustre_clients``: groups the file system stays open to besides its client
        group: release 0.1.0's Trainium node group, kept with ``storage.lustre_legacy_rules``
        until the upgraded nodes carry the client group (same rules, same logical IDs)."""
        super().__init__(scope, construct_id, **kwargs)
        # "retain" is RetainExceptOnCreate: kept on deletion, removed by a failed first create.
        removal = RemovalPolicy.DESTROY if settings.removal_policy == "destroy" else RETAIN
        self.image_repository = TrainingImageRepository(
            self,
            "TrainingImages",
            props=TrainingImageRepositoryProps(
                repository_name=image_repository_name,
                max_images=settings.ecr_max_images,
                removal_policy=removal,
                customer_key=settings.image_repository_kms,
            ),
        )
        unconditional = (
            [
                self.format_arn(
                    service="iam", region="", resource="role", resource_name=upload_role_name
                )
            ]
            if upload_role_name
            else []
        )
        self.models = ModelArtifactBucket(
            self,
            "Models",
            props=ModelArtifactBucketProps(
                model_prefix=settings.model_prefix,
                removal_policy=removal,
                publishers=tuple(archive_publishers),
                unconditional_publishers=tuple(unconditional),
                administrators=tuple(bucket_administrators),
                customer_key=settings.model_bucket_kms,
            ),
        )
        self.lustre = LustreStorage(
            self,
            "Lustre",
            vpc=vpc,
            subnet=trainium_subnet,
            clients=list(legacy_lustre_clients),
            props=LustreStorageProps(
                storage_capacity_gib=settings.fsx_storage_gib,
                throughput_per_tib=settings.fsx_throughput_per_tib,
                removal_policy=removal,
            ),
        )
        throughput = lustre_throughput_mbps(
            settings.fsx_storage_gib, settings.fsx_throughput_per_tib
        )
        needed = LUSTRE_MBPS_PER_NODE * lustre_readers
        if throughput < needed:
            Annotations.of(self).add_warning_v2(
                LUSTRE_THROUGHPUT_WARNING,
                f"FSx for Lustre gives {throughput:.0f} MB/s (storage.fsx_storage_gib = "
                f"{settings.fsx_storage_gib} at storage.fsx_throughput_per_tib = "
                f"{settings.fsx_throughput_per_tib} MB/s/TiB) for {lustre_readers} Trainium "
                f"nodes; the Neuron sample provisions {LUSTRE_MBPS_PER_NODE} MB/s per node "
                f"({needed} MB/s here). Dataset reads and checkpoints will wait on the file "
                "system: raise the throughput tier or the capacity (docs/training.md, 'Sizing FSx for more nodes').",
            )
        CfnOutput(
            self,
            "TrainingImageRepositoryUri",
            value=self.image_repository.repository.repository_uri,
        )
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
        # Only with storage.model_bucket_kms: the readers in other stacks import the key.
        self.model_bucket_key_arn_export: str | None = None
        if self.models.encryption_key is not None:
            self.model_bucket_key_arn_export = f"{self.stack_name}-ModelBucketKeyArn"
            CfnOutput(
                self,
                "ModelBucketKeyArn",
                value=self.models.encryption_key.key_arn,
                export_name=self.model_bucket_key_arn_export,
            )
        CfnOutput(self, "ModelPrefix", value=settings.model_prefix)
        CfnOutput(self, "FileSystemId", value=self.lustre.file_system.file_system_id)
        # Release 0.1.0's TrainingCluster stack imports this export (four Lustre rules of the
        # cluster security group). CloudFormation refuses to delete an export in use, so it
        # stays, under the name automatic references give it, until a release whose
        # upgrade guide says the importers are gone (CHANGELOG.md, 0.2.0).
        self.export_value(self.lustre.security_group.security_group_id)
        CfnOutput(
            self,
            "LustreClientSecurityGroupId",
            value=self.lustre.client_security_group.security_group_id,
            description="Security group of the nodes that may mount the file system",
        )
