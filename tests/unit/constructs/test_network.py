"""PlatformVpc's props: the rules it shares with the settings' network section, and its own."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
import pytest

from ml_platform.app import new_app
from ml_platform.config import NetworkSettings
from ml_platform.constructs._props import shared_problems, unresolved
from ml_platform.constructs.network import PlatformVpc, PlatformVpcProps
from ml_platform.props.network import PlatformVpcPropsBase

AZS = ("us-west-2a", "us-west-2b")


def test_the_settings_section_and_the_props_share_one_declaration() -> None:
    shared = {f.name for f in dataclasses.fields(PlatformVpcPropsBase)}
    assert {f.name for f in dataclasses.fields(NetworkSettings)} == shared
    assert shared < {f.name for f in dataclasses.fields(PlatformVpcProps)}
    assert issubclass(NetworkSettings, PlatformVpcPropsBase)
    assert issubclass(PlatformVpcProps, PlatformVpcPropsBase)


def test_the_props_report_every_shared_and_own_problem_at_once() -> None:
    bad = PlatformVpcProps(
        availability_zones=("us-west-2a",),
        trainium_az="us-west-2c",
        nat_gateways=2,
        cidr="10.0.0.0/8",
        flow_log_retention_days=8,
        flow_log_group_name="aws/x",
    )
    assert shared_problems(bad, PlatformVpcPropsBase) == [
        "flow_log_retention_days = 8: expected one of [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, "
        "180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653]"
    ]
    fixed = dataclasses.replace(bad, flow_log_retention_days=90)
    assert shared_problems(fixed, PlatformVpcPropsBase) == [
        "cidr = '10.0.0.0/8': expected an IPv4 block from /16 to /20",
        "availability_zones = ['us-west-2a']: expected at least two distinct AZ names",
        "trainium_az = 'us-west-2c': must be one of availability_zones ['us-west-2a']",
        "nat_gateways = 2: expected 1 to 1 (one per AZ at most)",
    ]
    assert bad.construct_problems() == [
        "flow_log_group_name = 'aws/x': expected 1 to 512 of A-Z a-z 0-9 . - _ / #, not "
        "starting with 'aws/'"
    ]
    assert (
        shared_problems(
            PlatformVpcProps(availability_zones=AZS, trainium_az=AZS[1]), PlatformVpcPropsBase
        )
        == []
    )


def test_the_construct_reports_its_props_problems_and_keeps_the_props() -> None:
    stack = cdk.Stack(
        new_app(), "S", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    with pytest.raises(
        ValueError, match=r"^S/Bad: nat_gateways = 3: expected 1 to 2 \(one per AZ at most\)$"
    ):
        PlatformVpc(
            stack,
            "Bad",
            props=PlatformVpcProps(availability_zones=AZS, trainium_az=AZS[0], nat_gateways=3),
        )
    props = PlatformVpcProps(availability_zones=AZS, trainium_az=AZS[0])
    assert PlatformVpc(stack, "Vpc", props=props).props is props


def test_a_token_is_not_checked_until_deploy_time() -> None:
    az = cdk.Token.as_string(cdk.Fn.select(0, cdk.Fn.get_azs()))
    tokens = [az, cdk.Token.as_number(cdk.Fn.ref("N")), cdk.Token.as_list(cdk.Fn.ref("L"))]
    assert [unresolved(t) for t in tokens] == [True, True, True]
    assert [unresolved(v) for v in ("us-west-2a", 2, 2.5, ["a"], {"k": "v"})] == [False] * 5
    assert unresolved({"k": az}) and unresolved(("a", az))
    # With a token among them the cross-field rules cannot run (nat_gateways = 5 passes), and
    # each other field still meets its own constraints.
    props = PlatformVpcProps(availability_zones=AZS, trainium_az=az, nat_gateways=5)
    assert shared_problems(props, PlatformVpcPropsBase) == []
    bad = dataclasses.replace(props, flow_log_retention_days=8)
    assert [p.split(":")[0] for p in shared_problems(bad, PlatformVpcPropsBase)] == [
        "flow_log_retention_days = 8"
    ]
