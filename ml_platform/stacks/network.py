"""NetworkStack: the VPC and the training nodes' security group."""

from __future__ import annotations

__all__ = [
    "NetworkStack",
]

from typing import Any

from aws_cdk import CfnOutput, CfnResource, Stack
from constructs import Construct

from ml_platform.config import NetworkSettings
from ml_platform.constructs._l1 import default_child
from ml_platform.constructs.network import (
    PlatformVpc,
    PlatformVpcProps,
    TrainingNodeSecurityGroup,
)
from ml_platform.constructs.storage import RETAIN
from ml_platform.props import shared_fields
from ml_platform.props.network import PlatformVpcPropsBase


class NetworkStack(Stack):
    """Composes :class:`PlatformVpc` and :class:`TrainingNodeSecurityGroup`.

    Args:
        keep_trainium_subnet: Retain the VPC and the Trainium AZ's private subnet when the
            stack is deleted. Set when the file system there is retained: its network
            interfaces and security groups stay in that subnet and VPC, so deleting them would
            fail and leave the stack DELETE_FAILED. Default False.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: NetworkSettings,
        keep_trainium_subnet: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        props = PlatformVpcProps(**shared_fields(settings, PlatformVpcPropsBase))
        self.platform_vpc = PlatformVpc(self, "Vpc", props=props)
        self.vpc = self.platform_vpc.vpc
        self.trainium_subnet = self.platform_vpc.trainium_subnet
        self.training_nodes = TrainingNodeSecurityGroup(self, "TrainingNodes", vpc=self.vpc)
        if keep_trainium_subnet:
            for resource in (self.vpc, self.trainium_subnet):
                default_child(resource, CfnResource).apply_removal_policy(RETAIN)
        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(self, "TrainiumSubnetId", value=self.trainium_subnet.subnet_id)
