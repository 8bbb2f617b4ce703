"""Lustre scratch space in the Trainium AZ, mountable only from the training nodes' security
group."""

import aws_cdk as cdk

from ml_platform.app import new_app
from ml_platform.constructs import (
    LustreStorage,
    LustreStorageProps,
    PlatformVpc,
    PlatformVpcProps,
    TrainingNodeSecurityGroup,
)

ENV = cdk.Environment(account="111122223333", region="us-east-1")


def build(app: cdk.App) -> None:
    stack = cdk.Stack(app, "Scratch", env=ENV)
    net = PlatformVpc(
        stack,
        "Vpc",
        props=PlatformVpcProps(
            availability_zones=("us-east-1a", "us-east-1f"), trainium_az="us-east-1f"
        ),
    )
    nodes = TrainingNodeSecurityGroup(stack, "Nodes", vpc=net.vpc)
    LustreStorage(
        stack,
        "Scratch",
        vpc=net.vpc,
        subnet=net.trainium_subnet,
        clients=[nodes.security_group],
        props=LustreStorageProps(storage_capacity_gib=2400),
    )


if __name__ == "__main__":
    app = new_app()
    build(app)
    app.synth()
