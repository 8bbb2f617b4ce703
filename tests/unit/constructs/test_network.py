"""PlatformVpc's props: its rules, checked without building a VPC."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.constructs.network import PlatformVpc, PlatformVpcProps

AZS = ("us-west-2a", "us-west-2b")


def test_the_props_object_holds_every_rule_and_reports_them_at_once() -> None:
    bad = PlatformVpcProps(
        availability_zones=("us-west-2a",),
        trainium_az="us-west-2c",
        nat_gateways=2,
        flow_log_group_name="aws/x",
    )
    assert [p.split("=", 1)[0] for p in bad.problems()] == [
        "availability_zones",
        "trainium_az",
        "nat_gateways",
        "flow_log_group_name",
    ]
    assert PlatformVpcProps(availability_zones=AZS, trainium_az="us-west-2b").problems() == []


def test_the_construct_reports_its_props_problems_and_keeps_the_props() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    with pytest.raises(ValueError, match=r"^S/Bad: nat_gateways=3: expected 1 to 2$"):
        PlatformVpc(stack, "Bad", availability_zones=list(AZS), trainium_az=AZS[0], nat_gateways=3)
    vpc = PlatformVpc(stack, "Vpc", availability_zones=list(AZS), trainium_az=AZS[0])
    assert vpc.props == PlatformVpcProps(availability_zones=AZS, trainium_az=AZS[0])
