"""``mlp capacity`` against EC2 DescribeCapacityReservations answers stubbed with Stubber."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest
from botocore.stub import Stubber

from ml_platform.config import CONTEXT_KEY, deep_merge
from ml_platform_cli.aws import Context

ODCR = "cr-0123456789abcdef0"
BLOCK = "cr-02168da1478b509e0"


@pytest.fixture
def ec2(aws_env, monkeypatch):
    client = boto3.client("ec2", region_name="us-west-2")
    stubber = Stubber(client)
    monkeypatch.setattr(Context, "client", lambda self, service, region=None, **kw: client)
    with stubber:
        yield stubber
    stubber.assert_no_pending_responses()


def _trainium(project, **trainium) -> None:
    data = json.loads(project.read_text())
    data["context"][CONTEXT_KEY] = deep_merge(data["context"][CONTEXT_KEY], {"trainium": trainium})
    project.write_text(json.dumps(data))


def _reservation(rid: str, **overrides) -> dict:
    """A DescribeCapacityReservations entry as EC2 shapes it, matching cdk.json's settings."""
    entry = {
        "CapacityReservationId": rid,
        "InstanceType": "trn1.32xlarge",
        "AvailabilityZone": "us-west-2d",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 4,
        "State": "active",
        "ReservationType": "default",
        "InstanceMatchCriteria": "targeted",
    }
    entry.update(overrides)
    return entry


def _expect(stubber: Stubber, rid: str, entry: dict) -> None:
    stubber.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [entry]},
        {"CapacityReservationIds": [rid]},
    )


def test_a_matching_reservation_passes(ec2, project, mlp):
    _trainium(project, capacity_reservation_id=ODCR)
    _expect(ec2, ODCR, _reservation(ODCR))
    result = mlp("--cdk-json", project, "capacity")
    assert result.code == 0, result.err
    assert (
        f"{ODCR} (capacity reservation): active, trn1.32xlarge x 4 (4 available) in us-west-2d"
        in result.out
    )
    assert "matches the settings" in result.out


def test_every_mismatch_is_reported(ec2, project, mlp):
    _trainium(project, capacity_reservation_id=ODCR, nodes=2, max_nodes=2)
    _expect(
        ec2,
        ODCR,
        _reservation(
            ODCR,
            InstanceType="trn1n.32xlarge",
            AvailabilityZone="us-west-2a",
            TotalInstanceCount=1,
            AvailableInstanceCount=1,
            State="expired",
            PlacementGroupArn="arn:aws:ec2:us-west-2:123456789012:placement-group/odcr-pg",
        ),
    )
    result = mlp("--cdk-json", project, "capacity", "--json")
    assert result.code == 1
    report = json.loads(result.out)
    assert report["problems"] == [
        f"{ODCR}: state 'expired', expected 'active'",
        f"{ODCR}: instance type 'trn1n.32xlarge', but trainium.instance_type is 'trn1.32xlarge'",
        f"{ODCR}: in 'us-west-2a', but network.trainium_az is 'us-west-2d' (the node group's "
        "only subnet)",
        f"{ODCR}: 1 instances in total, but trainium.nodes is 2",
        f"{ODCR}: created in placement group 'odcr-pg'; set trainium.placement_group to "
        "'odcr-pg' (it serves no instance outside that group)",
    ]


def test_a_partly_used_reservation_and_a_placement_group_it_was_not_made_in(ec2, project, mlp):
    _trainium(project, capacity_reservation_id=ODCR, placement_group="mine")
    _expect(ec2, ODCR, _reservation(ODCR, AvailableInstanceCount=1))
    result = mlp("--cdk-json", project, "capacity", "--json")
    assert result.code == 1
    assert json.loads(result.out)["problems"] == [
        f"{ODCR}: 1 of 4 instances still available, but trainium.nodes is 2 (other instances "
        "already use the reservation)",
        f"{ODCR}: created outside any placement group, but trainium.placement_group is 'mine': "
        "it would serve no instance there; unset it",
    ]


def test_a_scheduled_capacity_block_is_a_note_and_the_kind_is_checked(ec2, project, mlp):
    _trainium(project, capacity_block_id=BLOCK)
    start = dt.datetime(2026, 12, 3, 11, 30, tzinfo=dt.UTC)
    _expect(
        ec2,
        BLOCK,
        _reservation(
            BLOCK,
            State="scheduled",
            ReservationType="capacity-block",
            StartDate=start,
            EndDate=start + dt.timedelta(days=1),
            AvailableInstanceCount=0,
        ),
    )
    result = mlp("--cdk-json", project, "capacity")
    assert result.code == 0, result.out
    assert (
        "the Capacity Block starts 2026-12-03T11:30:00+00:00: nodes launch only once it is "
        "active" in result.out
    )
    assert (
        "ends 2026-12-04T11:30:00+00:00; EKS scales the node group to 0 forty minutes "
        "before" in result.out
    )
    # The same id set as an ODCR is named as what it is.
    _trainium(project, capacity_block_id=None, capacity_reservation_id=BLOCK)
    _expect(ec2, BLOCK, _reservation(BLOCK, ReservationType="capacity-block"))
    result = mlp("--cdk-json", project, "capacity", "--json")
    assert result.code == 1
    assert json.loads(result.out)["problems"] == [
        f"trainium.capacity_reservation_id = {BLOCK!r} is a Capacity Block: set it as "
        "trainium.capacity_block_id"
    ]


def test_without_a_reservation_in_the_settings(aws_env, project, mlp):
    result = mlp("--cdk-json", project, "capacity")
    assert result.code == 1
    assert (
        "no capacity reservation in the settings: set trainium.capacity_reservation_id"
        in result.err
    )


def test_an_unknown_reservation(ec2, project, mlp):
    _trainium(project, capacity_reservation_id=ODCR)
    ec2.add_client_error(
        "describe_capacity_reservations",
        service_error_code="InvalidCapacityReservationId.NotFound",
        service_message=f"The capacity reservation ID '{ODCR}' does not exist",
    )
    result = mlp("--cdk-json", project, "capacity")
    assert result.code == 1
    assert ODCR in result.err


def _in_us_east_2(project, **trainium) -> None:
    """Settings for Trn2 where EC2 offers it (moto: trn2.48xlarge in us-east-2a/b/c)."""
    data = json.loads(project.read_text())
    context = data["context"]
    context["availability-zones:account=123456789012:region=us-east-2"] = [
        "us-east-2a",
        "us-east-2b",
        "us-east-2c",
    ]
    context[CONTEXT_KEY] = deep_merge(
        context[CONTEXT_KEY],
        {
            "env": {"region": "us-east-2"},
            "network": {
                "availability_zones": ["us-east-2a", "us-east-2b"],
                "trainium_az": "us-east-2b",
            },
            "trainium": trainium,
        },
    )
    project.write_text(json.dumps(data))


def test_a_trn2_capacity_block_is_checked_as_trn1s_are(ec2, project, mlp):
    _in_us_east_2(project, instance_type="trn2.48xlarge", capacity_block_id=BLOCK)
    end = dt.datetime(2026, 12, 9, 11, 30, tzinfo=dt.UTC)
    entry = _reservation(
        BLOCK,
        InstanceType="trn2.48xlarge",
        AvailabilityZone="us-east-2b",
        ReservationType="capacity-block",
        EndDate=end,
    )
    _expect(ec2, BLOCK, entry)
    result = mlp("--cdk-json", project, "capacity")
    assert result.code == 0, result.out
    assert f"{BLOCK} (capacity block): active, trn2.48xlarge x 4 (4 available) in us-east-2b" in (
        result.out
    )
    # The same block against a trn2u setting: another instance type, reported as such.
    _in_us_east_2(project, instance_type="trn2u.48xlarge", capacity_block_id=BLOCK)
    _expect(ec2, BLOCK, entry)
    result = mlp("--cdk-json", project, "capacity", "--json")
    assert result.code == 1
    assert json.loads(result.out)["problems"] == [
        f"{BLOCK}: instance type 'trn2.48xlarge', but trainium.instance_type is 'trn2u.48xlarge'"
    ]


def test_a_trn2_odcr_made_in_a_placement_group_needs_that_group(ec2, project, mlp):
    """No new placement group next to a reservation holds for Trn2 too: the ODCR's own group
    must be named, or it serves no instance."""
    _in_us_east_2(project, instance_type="trn2.48xlarge", capacity_reservation_id=ODCR)
    _expect(
        ec2,
        ODCR,
        _reservation(
            ODCR,
            InstanceType="trn2.48xlarge",
            AvailabilityZone="us-east-2b",
            PlacementGroupArn="arn:aws:ec2:us-east-2:123456789012:placement-group/trn2-pg",
        ),
    )
    result = mlp("--cdk-json", project, "capacity", "--json")
    assert result.code == 1
    assert json.loads(result.out)["problems"] == [
        f"{ODCR}: created in placement group 'trn2-pg'; set trainium.placement_group to "
        "'trn2-pg' (it serves no instance outside that group)"
    ]
