"""A VPC of the team's own and Trainium nodes (every EFA interface) joining an EKS cluster
that already runs in it."""

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks

from ml_platform.app import new_app
from ml_platform.constructs import (
    PlatformVpc,
    PlatformVpcProps,
    TrainingNodeSecurityGroup,
    TrainiumNodeGroup,
    TrainiumNodeGroupProps,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def build(app: cdk.App) -> None:
    stack = cdk.Stack(app, "TrainiumNodes", env=ENV)
    net = PlatformVpc(
        stack,
        "Vpc",
        props=PlatformVpcProps(
            availability_zones=("us-east-1a", "us-east-1f"), trainium_az="us-east-1f"
        ),
    )
    cluster = eks.Cluster.from_cluster_attributes(
        stack,
        "Cluster",
        cluster_name="research",
        vpc=net.vpc,
        cluster_security_group_id="sg-0a1b2c3d4e5f60718",
    )
    efa = TrainingNodeSecurityGroup(stack, "Efa", vpc=net.vpc)
    TrainiumNodeGroup(
        stack,
        "Trainium",
        cluster=cluster,
        subnet=net.trainium_subnet,
        security_group=efa.security_group,
        props=TrainiumNodeGroupProps(
            instance_type="trn1.32xlarge", min_size=0, desired_size=1, max_size=4
        ),
    )


if __name__ == "__main__":
    app = new_app()
    build(app)
    app.synth()
