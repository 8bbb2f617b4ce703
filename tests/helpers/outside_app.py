"""An app as another team writes it: its own VPC, eks_v2 cluster and bucket, two of each of the
platform's constructs, and Triton on EKS in a stack of its own. No Settings, no cdk.json of
this repository (so none of its feature flags either)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from ml_platform.constructs import (
    EndpointDashboard,
    LustreStorage,
    LustreStorageProps,
    ModelArtifactBucket,
    ModelArtifactBucketProps,
    PlatformVpc,
    PlatformVpcProps,
    TrainingDashboard,
    TrainingDashboardProps,
    TrainingEksCluster,
    TrainingEksClusterProps,
    TrainingImageRepository,
    TrainingImageRepositoryProps,
    TrainingNodeSecurityGroup,
    TrainiumNodeGroup,
    TrainiumNodeGroupProps,
    TritonMultiModelEndpoint,
    TritonMultiModelEndpointProps,
    TritonOnEks,
)
from ml_platform.constructs.triton_eks import TritonOnEksProps

ENV = cdk.Environment(account="111122223333", region="us-east-1")
AZS = ["us-east-1a", "us-east-1f"]
CUSTOM_ARCHIVE = "team-reranker@v0a1b2c3d"  # a reference: NAME@vXXXXXXXX


def build(app: cdk.App) -> dict[str, object]:
    """Add the outside stacks to ``app``; returns the constructs the tests look at."""
    shared = cdk.Stack(app, "Shared", env=ENV)
    vpc = ec2.Vpc(shared, "Vpc", availability_zones=AZS, nat_gateways=1)
    cluster = eks.Cluster(
        shared,
        "Cluster",
        vpc=vpc,
        version=eks.KubernetesVersion.V1_35,
        default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
        default_capacity=0,
        kubectl_provider_options=eks.KubectlProviderOptions(
            kubectl_layer=KubectlV35Layer(shared, "Kubectl")
        ),
    )
    agent = eks.Addon(
        shared, "PodIdentityAgent", cluster=cluster, addon_name="eks-pod-identity-agent"
    )
    bucket = s3.Bucket(shared, "TeamModels", enforce_ssl=True)

    efa = TrainingNodeSecurityGroup(shared, "Efa", vpc=vpc)
    trainium_subnet = vpc.select_subnets(
        subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=["us-east-1f"]
    ).subnets[0]
    node_groups = [
        TrainiumNodeGroup(
            shared,
            name,
            cluster=cluster,
            subnet=trainium_subnet,
            security_group=efa.security_group,
            props=TrainiumNodeGroupProps(min_size=0, desired_size=0, max_size=2),
        )
        for name in ("TrnA", "TrnB")
    ]
    key = kms.Key(shared, "ScratchKey", enable_key_rotation=True)
    lustre = [
        LustreStorage(
            shared,
            "ScratchA",
            vpc=vpc,
            subnet=trainium_subnet,
            clients=[efa.security_group],
            kms_key=key,
        ),
        LustreStorage(
            shared,
            "ScratchB",
            vpc=vpc,
            subnet=trainium_subnet,
            clients=[node_groups[0]],
            props=LustreStorageProps(
                storage_capacity_gib=2400, removal_policy=cdk.RemovalPolicy.DESTROY
            ),
        ),
    ]
    model_buckets = [
        ModelArtifactBucket(shared, "ModelsA"),
        ModelArtifactBucket(
            shared,
            "ModelsB",
            props=ModelArtifactBucketProps(
                model_prefix="triton/", removal_policy=cdk.RemovalPolicy.DESTROY
            ),
        ),
    ]
    registries = [
        TrainingImageRepository(shared, "ImagesA"),
        TrainingImageRepository(
            shared,
            "ImagesB",
            props=TrainingImageRepositoryProps(removal_policy=cdk.RemovalPolicy.DESTROY),
        ),
    ]
    reader = iam.Role(shared, "Reader", assumed_by=iam.AccountRootPrincipal())
    model_buckets[1].grant_read_models(reader)
    registries[0].grant_pull(reader)
    endpoints = [
        TritonMultiModelEndpoint(
            shared,
            name,
            bucket=bucket,
            props=TritonMultiModelEndpointProps(
                name=name.lower(), archives=["model_trt_python_t4"]
            ),
        )
        for name in ("EndpointA", "EndpointB")
    ]
    endpoints[0].grant_invoke(reader)
    # Two endpoint dashboards and two cluster dashboards in one account: names left to
    # CloudFormation, so they never clash.
    dashboards = [
        EndpointDashboard(shared, "EndpointADashboard", endpoints=[endpoints[0]]),
        EndpointDashboard(shared, "EndpointBDashboard", endpoints=[endpoints[1]]),
    ] + [
        TrainingDashboard(
            shared,
            "ClusterDashboard",
            props=TrainingDashboardProps(
                cluster_name=cluster.cluster_name,
                namespace="research",
                file_system_ids=(lustre[0].file_system.file_system_id,),
            ),
        ),
        TrainingDashboard(
            shared,
            "ClusterDashboard2",
            props=TrainingDashboardProps(cluster_name=cluster.cluster_name, namespace="staging"),
        ),
    ]
    cdk.CfnOutput(shared, "EndpointADashboardUrl", value=dashboards[0].url)
    tritons = [
        TritonOnEks(
            shared,
            name,
            cluster=cluster,
            bucket=bucket,
            pod_identity_agent=agent,
            props=TritonOnEksProps(namespace=namespace, archives=["model_tf_dali"]),
        )
        for name, namespace in (("TritonA", "triton-a"), ("TritonB", "triton-b"))
    ]

    clusters_stack = cdk.Stack(app, "Clusters", env=ENV)
    net = PlatformVpc(
        clusters_stack,
        "Net",
        props=PlatformVpcProps(availability_zones=tuple(AZS), trainium_az="us-east-1f"),
    )
    PlatformVpc(
        clusters_stack,
        "Net2",
        props=PlatformVpcProps(
            availability_zones=tuple(AZS), trainium_az="us-east-1a", cidr="10.1.0.0/16"
        ),
    )
    clusters = [
        TrainingEksCluster(
            clusters_stack,
            "Research",
            vpc=net.vpc,
            props=TrainingEksClusterProps(endpoint_access="private"),
        ),
        TrainingEksCluster(  # public to the world, stated: warns
            clusters_stack,
            "Staging",
            vpc=net.vpc,
            props=TrainingEksClusterProps(
                endpoint_access="public_and_private",
                public_access_cidrs=("0.0.0.0/0",),
                public_access_from_anywhere=True,
            ),
        ),
    ]

    serving = cdk.Stack(app, "Serving", env=ENV)
    serving_triton = TritonOnEks(
        serving,
        "Triton",
        cluster=cluster,
        bucket=bucket,
        pod_identity_agent=agent,
        subnets=ec2.SubnetSelection(subnets=[trainium_subnet]),
        props=TritonOnEksProps(
            archives=[CUSTOM_ARCHIVE],
            models=["reranker_ensemble", "reranker_onnx"],
            device_plugin=False,
            node_labels={"team": "search"},
            namespace="search",
        ),
    )
    return {
        "shared": shared,
        "clusters_stack": clusters_stack,
        "serving": serving,
        "node_groups": node_groups,
        "lustre": lustre,
        "model_buckets": model_buckets,
        "registries": registries,
        "endpoints": endpoints,
        "tritons": tritons,
        "clusters": clusters,
        "serving_triton": serving_triton,
        "reader": reader,
        "cluster": cluster,
        "dashboards": dashboards,
    }
