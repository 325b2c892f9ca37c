"""Kafka's ``CurrentAssignmentBuilder``: one step of moving a member's current assignment towards its target.

Rules (KIP-848): a member first revokes what it must give up and stays at its epoch (UNREVOKED_PARTITIONS) until
its heartbeat no longer reports those partitions; only then does it move to the target epoch and get new
partitions. A partition of the target that another member still owns (it has an epoch in the group's partition
epochs) is *unreleased*: it is not given yet, and the member waits in UNRELEASED_PARTITIONS.
"""

from __future__ import annotations

from typing import Callable, Mapping

from streaming.coordinator.consumer.errors import HeartbeatError
from streaming.coordinator.consumer.member import Assignment, ConsumerGroupMember, assignment
from streaming.coordinator.consumer.member_state import MemberState

PartitionEpoch = Callable[[str, int], int]
Owned = Mapping[str, frozenset] | None


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned = None,
) -> ConsumerGroupMember:
    """The member's next state (or ``member`` itself when it cannot move yet).

    ``owned`` is what the heartbeat reported (topic id -> partitions); None when the request did not say, which
    counts as still owning everything. Raises ``HeartbeatError(FENCED_MEMBER_EPOCH)`` for a member in an unknown
    state that still reports partitions.
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(
                member, member.member_epoch, member.assigned_partitions, target_epoch, target, partition_epoch, owned
            )
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(
            member, member.member_epoch + 1, member.assigned_partitions, target_epoch, target, partition_epoch, owned
        )
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(
            member, member.member_epoch, member.assigned_partitions, target_epoch, target, partition_epoch, owned
        )
    # UNKNOWN: a newer coordinator's state; the member must drop everything and rejoin, then start afresh.
    if owned is None or any(owned.values()):
        raise HeartbeatError(
            "FENCED_MEMBER_EPOCH",
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _next(member, target_epoch, member.assigned_partitions, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Owned, pending: Assignment) -> bool:
    if owned is None:
        return True
    return any(set(parts) & pending.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    current: Assignment,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned,
) -> ConsumerGroupMember:
    unreleased = False
    keep: dict[str, set] = {}
    revoke: dict[str, set] = {}
    add: dict[str, set] = {}
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        kept = have & wanted
        pending_assignment = set(wanted - kept)
        # Free partitions only; one the member itself still holds pending revocation is not somebody else's.
        own_pending = member.partitions_pending_revocation.get(topic_id, frozenset())
        blocked = {p for p in pending_assignment if partition_epoch(topic_id, p) != -1 and p not in own_pending}
        if blocked:
            unreleased = True
            pending_assignment -= blocked
        keep[topic_id], revoke[topic_id], add[topic_id] = set(kept), set(have - kept), pending_assignment
    keep_a, revoke_a, add_a = assignment(keep), assignment(revoke), assignment(add)
    if revoke_a and _owns_any(owned, revoke_a):
        return member.update_member_epoch(
            epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=keep_a,
            partitions_pending_revocation=revoke_a,
        )
    if add_a:
        merged = assignment(
            {t: keep_a.get(t, frozenset()) | add_a.get(t, frozenset()) for t in set(keep_a) | set(add_a)}
        )
        return member.update_member_epoch(
            target_epoch,
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            assigned_partitions=merged,
            partitions_pending_revocation={},
        )
    return member.update_member_epoch(
        target_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned_partitions=keep_a,
        partitions_pending_revocation={},
    )
