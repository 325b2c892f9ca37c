"""Kafka's StickyAssignor (eager): balance first, then keep as many owned partitions as possible (rack-aware,
KIP-881)."""

from __future__ import annotations

from collections.abc import Mapping

from ._sticky_core import sticky_assign
from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription


class StickyAssignor(Assignor):
    """Owned partitions and generation come from ``Subscription`` (Kafka carries them in the sticky user data).

    Rack-aware (KIP-881) when members send ``Subscription.rack`` and ``partition_racks`` gives replica racks:
    see ``_sticky_core``.  ``prefer_rack_aware`` is Kafka's test-only ``preferRackAwareLogic`` (use rack
    matching even when every partition is on every rack).
    """

    name = "sticky"
    supported_protocols = (EAGER,)

    def __init__(self, prefer_rack_aware: bool = False) -> None:
        self.prefer_rack_aware = prefer_rack_aware

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        result = sticky_assign(partitions_per_topic, subscriptions, partition_racks, self.prefer_rack_aware).assignment
        return {member: sorted(result.get(member, ())) for member in subscriptions}
