"""Kafka's CooperativeStickyAssignor (KIP-429).

Same assignment as Sticky, except that a partition moving from one member to another is left out of this
round: its owner revokes it first, rejoins, and the follow-up rebalance hands it to the new member.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._sticky_core import sticky_assign
from .base import COOPERATIVE, EAGER, Assignment, Assignor, PartitionRacks, Subscription, TopicPartition


def partitions_transferring_ownership(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """Partitions newly given to one member while another member gives them up (Kafka's general-path rule)."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned = subscriptions[member].owned_partitions
        owned_set = set(owned)
        assigned_set = set(assigned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = member
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: member for tp, member in added.items() if tp in revoked}


class CooperativeStickyAssignor(Assignor):
    """Rack-aware like StickyAssignor; an owned partition released for rack alignment is a transfer too."""

    name = "cooperative-sticky"
    supported_protocols = (EAGER, COOPERATIVE)

    def __init__(self, prefer_rack_aware: bool = False) -> None:
        self.prefer_rack_aware = prefer_rack_aware

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        result = sticky_assign(partitions_per_topic, subscriptions, partition_racks, self.prefer_rack_aware)
        assignment = result.assignment
        # The constrained path tracks transfers itself; the general path derives them from owned partitions.
        transferring = result.transferring
        if transferring is None:
            transferring = partitions_transferring_ownership(subscriptions, assignment)
        held_back: dict[str, set[TopicPartition]] = {}
        for tp, member in transferring.items():
            held_back.setdefault(member, set()).add(tp)
        return {
            member: sorted(tp for tp in assignment.get(member, ()) if tp not in held_back.get(member, ()))
            for member in subscriptions
        }
