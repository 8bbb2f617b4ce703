"""The value fields :class:`~ml_platform.constructs.trainium.TrainiumNodeGroupProps`,
:class:`~ml_platform.constructs.trainium.EfaLaunchTemplateProps` and the ``trainium`` settings
share: instance type, root volume, capacity and placement group, with their rules."""

from dataclasses import dataclass
from typing import Annotated

from ml_platform import limits
from ml_platform._settings_parse import (
    Between,
    Matches,
    OneOf,
    Problem,
    Section,
    json_pattern,
    setting,
)
from ml_platform.instances import TRAINIUM_INSTANCES


@dataclass(frozen=True, kw_only=True)
class TrainiumPropsBase(Section):
    """The Trainium nodes' instance type, root volume, capacity and placement group."""

    instance_type: Annotated[str, OneOf(tuple(sorted(TRAINIUM_INSTANCES)))] = setting(
        limits.DEFAULT_TRAINIUM_INSTANCE_TYPE
    )
    """`trn1.32xlarge` (8 EFA interfaces, 32 NeuronCores), `trn1n.32xlarge` (16 EFA
    interfaces), `trn2.48xlarge` (Trainium2: 16 EFA interfaces, 64 NeuronCores at the default
    logical-core size 2) or `trn2u.48xlarge` (the same instance as part of a 4-instance
    UltraServer; see docs/training.md). `network.trainium_az` must offer it (`mlp azs
    --instance-type` finds one)."""
    root_volume_gib: Annotated[int, Between(limits.ROOT_VOLUME_GIB)] = setting(
        limits.DEFAULT_ROOT_VOLUME_GIB
    )
    """Encrypted gp3 root volume size."""
    capacity_reservation_id: Annotated[str, Matches(limits.CAPACITY_RESERVATION_ID)] | None = (
        setting(None)
    )
    """An On-Demand Capacity Reservation (`cr-...`) the nodes launch into. The launch template
    then names no new placement group: an ODCR serves a cluster placement group only if it was
    created in it."""
    capacity_block_id: Annotated[str, Matches(limits.CAPACITY_RESERVATION_ID)] | None = setting(
        None
    )
    """A Capacity Block for ML (`cr-...`) the nodes launch into (market type `capacity-block`,
    node group capacity type `CAPACITY_BLOCK`). At most one of the two. A Capacity Block
    places its instances itself: no placement group."""
    placement_group: str | None = setting(None, pattern=json_pattern(limits.PLACEMENT_GROUP))
    """Name of the cluster placement group `capacity_reservation_id` was created in. Default
    none: a new cluster placement group without a reservation, no placement group with one.
    Not with `capacity_block_id`."""

    def problems(self) -> list[str | Problem]:
        """The capacity and placement group rules (empty when there is no problem)."""
        out: list[str | Problem] = []
        if self.capacity_reservation_id is not None and self.capacity_block_id is not None:
            out.append(
                Problem(
                    {
                        "capacity_reservation_id": self.capacity_reservation_id,
                        "capacity_block_id": self.capacity_block_id,
                    },
                    "expected at most one",
                )
            )
        return out + self._placement_group_problems()

    def _placement_group_problems(self) -> list[str | Problem]:
        group = self.placement_group
        if group is None:
            return []
        if self.capacity_block_id is not None:
            # A Capacity Block places its instances itself; aws-parallelcluster rejects
            # placement groups with Capacity Blocks
            # (https://github.com/aws/aws-parallelcluster/issues/6311).
            return [
                Problem(
                    {"placement_group": group, "capacity_block_id": self.capacity_block_id},
                    "a Capacity Block places its instances itself; expected no placement group",
                )
            ]
        if self.capacity_reservation_id is None:
            return [
                Problem(
                    {"placement_group": group},
                    "names the group a capacity reservation was created in, so it needs "
                    "capacity_reservation_id (without one the platform makes its own cluster "
                    "placement group)",
                )
            ]
        if not limits.PLACEMENT_GROUP.fullmatch(group):
            return [
                Problem(
                    {"placement_group": group},
                    "expected a placement group name (1 to 255 ASCII characters)",
                )
            ]
        return []
