"""``mlp capacity``: check the Trainium capacity reservation of the settings against EC2.

Asks EC2 (DescribeCapacityReservations) about ``trainium.capacity_reservation_id`` or
``trainium.capacity_block_id`` and reports every mismatch with the settings, before a deploy
would launch fewer nodes than asked or none:

- state: ``active`` (a Capacity Block still ``scheduled`` is reported with its start: nodes
  launch only once it is active);
- kind: a Capacity Block (``ReservationType`` ``capacity-block``) set as
  ``capacity_block_id``, an On-Demand Capacity Reservation as ``capacity_reservation_id``;
- instance type against ``trainium.instance_type``;
- AZ against ``network.trainium_az`` (EKS: a node group on a Capacity Block takes only a
  subnet in the block's AZ; an ODCR serves only its own AZ);
- instance count (total and still available) against ``trainium.nodes``;
- placement group: an ODCR created in a cluster placement group serves only that group
  (``trainium.placement_group`` must name it), one created outside serves no group.

Exit code 1 when anything does not match. Sources: EC2 User Guide, "Capacity Reservations in
cluster placement groups" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html);
EKS User Guide, "Create a managed node group with Capacity Blocks for ML"
(https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ml_platform_cli.aws import CliError, Context, Subcommands, doc_summary


def add_parser(sub: Subcommands, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "capacity",
        parents=parents,
        help="check the Trainium capacity reservation or Capacity Block against the settings",
        description=doc_summary(__doc__),
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


@dataclass
class CapacityReport:
    reservation_id: str
    kind: str  # "capacity block" or "capacity reservation", as the settings name it
    state: str | None = None
    instance_type: str | None = None
    availability_zone: str | None = None
    total_instances: int | None = None
    available_instances: int | None = None
    end_date: str | None = None
    placement_group: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_reservation(
    reservation: dict[str, Any],
    *,
    block: bool,
    instance_type: str,
    trainium_az: str,
    nodes: int,
    placement_group: str | None,
) -> CapacityReport:
    """Compare one DescribeCapacityReservations entry with the settings."""
    rid = reservation.get("CapacityReservationId", "?")
    setting = "trainium.capacity_block_id" if block else "trainium.capacity_reservation_id"
    report = CapacityReport(
        reservation_id=rid,
        kind="capacity block" if block else "capacity reservation",
        state=reservation.get("State"),
        instance_type=reservation.get("InstanceType"),
        availability_zone=reservation.get("AvailabilityZone"),
        total_instances=reservation.get("TotalInstanceCount"),
        available_instances=reservation.get("AvailableInstanceCount"),
        end_date=_date(reservation.get("EndDate")),
        placement_group=_group_name(reservation.get("PlacementGroupArn")),
    )
    out = report.problems
    is_block = reservation.get("ReservationType") == "capacity-block"
    if is_block != block:
        out.append(
            f"{setting} = {rid!r} is "
            + (
                "an On-Demand Capacity Reservation: set it as trainium.capacity_reservation_id"
                if block
                else "a Capacity Block: set it as trainium.capacity_block_id"
            )
        )
    state = report.state
    if state == "scheduled" and is_block:
        report.notes.append(
            f"the Capacity Block starts {_date(reservation.get('StartDate'))}: nodes launch "
            "only once it is active (deploy the node group at 0 nodes until then)"
        )
    elif state != "active":
        out.append(f"{rid}: state {state!r}, expected 'active'")
    if report.instance_type != instance_type:
        out.append(
            f"{rid}: instance type {report.instance_type!r}, but trainium.instance_type is "
            f"{instance_type!r}"
        )
    if report.availability_zone != trainium_az:
        out.append(
            f"{rid}: in {report.availability_zone!r}, but network.trainium_az is "
            f"{trainium_az!r} (the node group's only subnet)"
        )
    total = report.total_instances or 0
    if total < nodes:
        out.append(f"{rid}: {total} instances in total, but trainium.nodes is {nodes}")
    elif (report.available_instances or 0) < nodes and state == "active":
        out.append(
            f"{rid}: {report.available_instances} of {total} instances still available, but "
            f"trainium.nodes is {nodes} (other instances already use the reservation)"
        )
    if not is_block:
        if report.placement_group != placement_group:
            if report.placement_group is None:
                out.append(
                    f"{rid}: created outside any placement group, but trainium.placement_group "
                    f"is {placement_group!r}: it would serve no instance there; unset it"
                )
            else:
                out.append(
                    f"{rid}: created in placement group {report.placement_group!r}; set "
                    f"trainium.placement_group to {report.placement_group!r} (it serves no "
                    "instance outside that group)"
                )
    elif report.end_date:
        report.notes.append(
            f"the Capacity Block ends {report.end_date}; EKS scales the node group to 0 forty "
            "minutes before"
        )
    return report


def _date(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _group_name(arn: str | None) -> str | None:
    # arn:aws:ec2:<region>:<account>:placement-group/<name>
    return arn.rsplit("/", 1)[-1] if arn else None


def run(ctx: Context, args: argparse.Namespace) -> int:
    settings = ctx.settings
    trn = settings.trainium
    reservation_id = trn.capacity_block_id or trn.capacity_reservation_id
    if reservation_id is None:
        raise CliError(
            "no capacity reservation in the settings: set trainium.capacity_reservation_id or "
            "trainium.capacity_block_id first"
        )
    ec2 = ctx.client("ec2")
    answer = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    found = answer.get("CapacityReservations", [])
    if not found:
        raise CliError(f"{reservation_id}: EC2 knows no such reservation in {ctx.region}")
    report = check_reservation(
        found[0],
        block=trn.capacity_block_id is not None,
        instance_type=trn.instance_type,
        trainium_az=settings.network.trainium_az,
        nodes=trn.nodes,
        placement_group=trn.placement_group,
    )
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        print(
            f"{report.reservation_id} ({report.kind}): {report.state}, {report.instance_type} "
            f"x {report.total_instances} ({report.available_instances} available) in "
            f"{report.availability_zone}"
        )
        for note in report.notes:
            print(f"  note: {note}")
        for problem in report.problems:
            print(f"  mismatch: {problem}")
        if not report.problems:
            print("  matches the settings")
    return 1 if report.problems else 0
