"""Triton on the EKS cluster: a GPU node group, NVIDIA's device plugin and the Triton chart,
with a Pod Identity role that can only read the model archives."""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ml_platform.constructs.gpu_nodes import GpuNodeGroup
from ml_platform.constructs.nag import acknowledge, rendered_resource
from ml_platform.instances import EKS_GPU_INSTANCES
from ml_platform.k8s_charts.nvidia import NvidiaDevicePluginChart
from ml_platform.k8s_charts.triton import TritonChart, TritonChartProps, models_to_load


class TritonOnEks(Construct):
    """Serves the ensemble archives from the cluster, alongside the SageMaker endpoints.

    Args:
        cluster: The EKS cluster.
        bucket: The model bucket. model_prefix: prefix of the archives (ends in ``/``).
        archives: Archives to serve (each must be a known ensemble archive).
        triton_version: Triton release, the same as the SageMaker container's. Default 24.09.
        gpu_instance_type: Single-GPU instance type. Default ``g5.2xlarge``.
        gpu_nodes / max_gpu_nodes: GPU node group size. Default 1 / 2.
        replicas / max_replicas: Triton HPA range. Default 1 / 2.
        namespace / service_account: Where Triton runs. Default ``triton`` / ``triton``.
        gpu_node_group: Create the GPU node group here (a
            :class:`~ml_platform.constructs.gpu_nodes.GpuNodeGroup`). Default True. False when
            the GPU nodes live elsewhere, e.g. in a stack of their own so a capacity failure
            rolls back only them; the Triton pods then wait (Pending) until GPU nodes join.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        bucket: s3.IBucket,
        archives: Sequence[str],
        model_prefix: str = "models/",
        triton_version: str = "24.09",
        gpu_instance_type: str = "g5.2xlarge",
        gpu_nodes: int = 1,
        max_gpu_nodes: int = 2,
        replicas: int = 1,
        max_replicas: int = 2,
        namespace: str = "triton",
        service_account: str = "triton",
        gpu_node_group: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        errors = []
        if gpu_node_group and gpu_instance_type not in EKS_GPU_INSTANCES:
            errors.append(
                f"gpu_instance_type={gpu_instance_type!r}: expected one of {sorted(EKS_GPU_INSTANCES)}"
            )
        if gpu_node_group and not 1 <= gpu_nodes <= max_gpu_nodes:
            errors.append(f"gpu_nodes={gpu_nodes}, max_gpu_nodes={max_gpu_nodes}: expected 1 <= gpu_nodes <= max")
        if not 1 <= replicas <= max_replicas:
            errors.append(f"replicas={replicas}, max_replicas={max_replicas}: expected 1 <= replicas <= max")
        try:
            models_to_load(archives)
        except ValueError as error:
            errors.append(str(error))
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))

        self.gpu_nodes: GpuNodeGroup | None = None
        self.node_group: eks.Nodegroup | None = None
        if gpu_node_group:
            self.gpu_nodes = GpuNodeGroup(
                self,
                "GpuNodes",
                cluster=cluster,
                instance_type=gpu_instance_type,
                nodes=gpu_nodes,
                max_nodes=max_gpu_nodes,
            )
            self.node_group = self.gpu_nodes.node_group

        # Pods of the service account get this role through EKS Pod Identity.
        self.role = iam.Role(
            self,
            "PodRole",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="Triton pods on EKS: read the ensemble archives",
        )
        archives_arn = bucket.arn_for_objects(f"{model_prefix}*")
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[archives_arn]))
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{rendered_resource(self, archives_arn)}]",
            "Triton's init container downloads archives under the model prefix only, with "
            "s3:GetObject alone.",
        )
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=self.role.role_arn,
        )

        charts = cdk8s.App()
        self.device_plugin = cluster.add_cdk8s_chart(
            "NvidiaPlugin", NvidiaDevicePluginChart(charts, "nvidia-device-plugin")
        )
        self.triton_chart = TritonChart(
            charts,
            "triton",
            props=TritonChartProps(
                bucket_name=bucket.bucket_name,
                model_prefix=model_prefix,
                archives=tuple(archives),
                triton_version=triton_version,
                region=cluster.stack.region,
                replicas=replicas,
                max_replicas=max_replicas,
                namespace=namespace,
                service_account=service_account,
            ),
        )
        self.manifest = cluster.add_cdk8s_chart("Triton", self.triton_chart)
        # Pods must find their Pod Identity role, a GPU node and the GPU resource at creation.
        self.manifest.node.add_dependency(self.pod_identity, self.device_plugin)
        if self.node_group is not None:
            self.manifest.node.add_dependency(self.node_group)
