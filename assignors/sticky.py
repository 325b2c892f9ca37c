"""Kafka's StickyAssignor (eager): balance first, then keep as many owned partitions as possible."""
from __future__ import annotations

from collections.abc import Mapping

from ._sticky_core import sticky_assign
from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription


class StickyAssignor(Assignor):
    """Owned partitions and generation come from ``Subscription`` (Kafka carries them in the sticky user data)."""

    name = "sticky"
    supported_protocols = (EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        result = sticky_assign(partitions_per_topic, subscriptions).assignment
        return {member: sorted(result.get(member, ())) for member in subscriptions}
