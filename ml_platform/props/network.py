"""The VPC's fields: :class:`~ml_platform.constructs.network.PlatformVpcProps` and the
settings' ``network`` section both inherit them."""

__all__ = ["PlatformVpcPropsBase"]

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import OneOf, Problem, Section, setting


@dataclass(frozen=True, kw_only=True)
class PlatformVpcPropsBase(Section):
    """The VPC's address block, AZs, NAT, flow logs and default security group."""

    cidr: str = setting(limits.DEFAULT_VPC_CIDR)
    """VPC CIDR block: IPv4, /16 to /20, host bits zero, not in 0.0.0.0/8, loopback,
    link-local, multicast or 240.0.0.0/4."""
    availability_zones: tuple[str, ...] = setting(
        ("us-west-2a", "us-west-2b", "us-west-2d"), minItems=2, uniqueItems=True
    )
    """AZ names the VPC spans: two or more, distinct, in `env.region`, and among the AZs the
    context holds for the account (`mlp azs` writes them)."""
    trainium_az: str = setting("us-west-2d")
    """The one AZ (name, in this account) that offers the Trainium instance type; node group
    and FSx live there. `mlp azs` finds it."""
    nat_gateways: int = setting(limits.DEFAULT_NAT_GATEWAYS, minimum=1)
    """NAT gateways, up to one per AZ (1 saves cost; one per AZ survives an AZ outage)."""
    flow_log_retention_days: Annotated[int, OneOf(limits.LOG_RETENTION_DAYS)] = setting(90)
    """Days VPC flow logs are kept."""
    restrict_default_security_group: bool = setting(True)
    """Remove every rule of the VPC's default security group (Security Hub EC2.2) with
    aws-cdk's Lambda-backed custom resource."""

    def problems(self) -> list[str | Problem]:
        azs = list(self.availability_zones)
        cidr_problem = limits.vpc_cidr_problem(self.cidr)
        out: list[str | Problem] = (
            [Problem({"cidr": self.cidr}, cidr_problem)] if cidr_problem else []
        )
        if len(azs) < 2 or len(set(azs)) != len(azs):
            out.append(
                Problem({"availability_zones": azs}, "expected at least two distinct AZ names")
            )
        if self.trainium_az not in azs:
            out.append(
                Problem(
                    {"trainium_az": self.trainium_az},
                    f"must be one of availability_zones {limits.shown(azs)}",
                )
            )
        if not 1 <= self.nat_gateways <= len(azs):
            out.append(
                Problem(
                    {"nat_gateways": self.nat_gateways},
                    f"expected 1 to {len(azs)} (one per AZ at most)",
                )
            )
        return out
