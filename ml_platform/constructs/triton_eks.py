"""Triton on the EKS cluster: a GPU node group, NVIDIA's device plugin and the Triton chart,
with a Pod Identity role that can only read the model archives."""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ml_platform.constructs.eks_cluster import configure_node_role, hardened_launch_template
from ml_platform.constructs.nag import acknowledge, rendered_resource
from ml_platform.instances import EKS_GPU_INSTANCES
from ml_platform.k8s_charts.names import GPU_TAINT_KEY, NODE_ROLE_LABEL
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
    ) -> None:
        super().__init__(scope, construct_id)
        errors = []
        if gpu_instance_type not in EKS_GPU_INSTANCES:
            errors.append(
                f"gpu_instance_type={gpu_instance_type!r}: expected one of {sorted(EKS_GPU_INSTANCES)}"
            )
        if not 1 <= gpu_nodes <= max_gpu_nodes:
            errors.append(f"gpu_nodes={gpu_nodes}, max_gpu_nodes={max_gpu_nodes}: expected 1 <= gpu_nodes <= max")
        if not 1 <= replicas <= max_replicas:
            errors.append(f"replicas={replicas}, max_replicas={max_replicas}: expected 1 <= replicas <= max")
        try:
            models_to_load(archives)
        except ValueError as error:
            errors.append(str(error))
        if errors:
            raise ValueError(f"{self.node.path}: " + "; ".join(errors))

        self.launch_template = hardened_launch_template(self, "LaunchTemplate", root_volume_gib=100)
        self.node_group = eks.Nodegroup(
            self,
            "GpuNodes",
            cluster=cluster,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
            instance_types=[ec2.InstanceType(gpu_instance_type)],
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            min_size=gpu_nodes,
            desired_size=gpu_nodes,
            max_size=max_gpu_nodes,
            labels={NODE_ROLE_LABEL: "gpu"},
            taints=[eks.TaintSpec(key=GPU_TAINT_KEY, value="true", effect=eks.TaintEffect.NO_SCHEDULE)],
        )
        configure_node_role(self.node_group.role)

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
        self.manifest.node.add_dependency(self.pod_identity, self.node_group, self.device_plugin)
