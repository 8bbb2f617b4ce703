"""NetworkStack: the VPC and the training nodes' security group."""

from __future__ import annotations

__all__ = [
    "NetworkStack",
]

from typing import Any

from aws_cdk import CfnOutput, CfnResource, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from ml_platform.config import NetworkSettings
from ml_platform.constructs._l1 import default_child
from ml_platform.constructs.network import PlatformVpc, TrainingNodeSecurityGroup
from ml_platform.constructs.storage import RETAIN
from ml_platform.limits import LOG_RETENTION_DAYS


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
        self.platform_vpc = PlatformVpc(
            self,
            "Vpc",
            cidr=settings.cidr,
            availability_zones=settings.availability_zones,
            trainium_az=settings.trainium_az,
            nat_gateways=settings.nat_gateways,
            flow_log_retention=_retention(settings.flow_log_retention_days),
            restrict_default_security_group=settings.restrict_default_security_group,
        )
        self.vpc = self.platform_vpc.vpc
        self.trainium_subnet = self.platform_vpc.trainium_subnet
        self.training_nodes = TrainingNodeSecurityGroup(self, "TrainingNodes", vpc=self.vpc)
        if keep_trainium_subnet:
            for resource in (self.vpc, self.trainium_subnet):
                default_child(resource, CfnResource).apply_removal_policy(RETAIN)
        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(self, "TrainiumSubnetId", value=self.trainium_subnet.subnet_id)


def _retention(days: int) -> logs.RetentionDays:
    # RetentionDays members are listed in the same order as the day counts config accepts.
    return dict(
        zip(LOG_RETENTION_DAYS, list(logs.RetentionDays)[: len(LOG_RETENTION_DAYS)], strict=False)
    )[days]
