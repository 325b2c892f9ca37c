"""KIP-848 reconciliation (``streaming.coordinator.consumer.reconcile``), transition by transition.

Expectations ported from Kafka 4.0's CurrentAssignmentBuilderTest: every test there is a case here, with the same
member, target, partition epochs, owned partitions and expected member (epochs, state, assigned and pending).
"""

from __future__ import annotations

import pytest

from streaming.coordinator.consumer import ConsumerGroupMember, HeartbeatError, MemberState, reconcile
from streaming.coordinator.consumer.member import assignment

T1, T2 = "topic-id-1", "topic-id-2"
S = MemberState


def A(t1=(), t2=()):
    return assignment({T1: t1, T2: t2})


def M(state, epoch, previous, assigned, pending=None):
    return ConsumerGroupMember(
        "member",
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def epochs(value):
    return lambda topic_id, partition: value


def owned(t1=(), t2=()):
    return {T1: frozenset(t1), T2: frozenset(t2)}


def test_stable_to_stable():
    member = M(S.STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    assert reconcile(member, 11, A((1, 2, 3), (4, 5, 6)), epochs(10)) == M(S.STABLE, 11, 10, A((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions():
    member = M(S.STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    assert reconcile(member, 11, A((1, 2, 3, 4), (4, 5, 6, 7)), epochs(-1)) == M(
        S.STABLE, 11, 10, A((1, 2, 3, 4), (4, 5, 6, 7))
    )


def test_stable_to_unrevoked_partitions():
    member = M(S.STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    assert reconcile(member, 11, A((2, 3, 4), (5, 6, 7)), epochs(-1)) == M(
        S.UNREVOKED_PARTITIONS, 10, 10, A((2, 3), (5, 6)), A((1,), (4,))
    )


def test_stable_to_unreleased_partitions():
    member = M(S.STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    assert reconcile(member, 11, A((1, 2, 3, 4), (4, 5, 6, 7)), epochs(10)) == M(
        S.UNRELEASED_PARTITIONS, 11, 10, A((1, 2, 3), (4, 5, 6))
    )


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions():
    member = M(S.STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    result = reconcile(member, 11, A((1, 2, 3), (4, 5, 7)), lambda t, p: 10 if t == T2 else -1, owned={})
    # Partition 6 is to be revoked but the member no longer reports it: no revocation round is needed.
    assert result == M(S.UNRELEASED_PARTITIONS, 11, 10, A((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable():
    member = M(S.UNREVOKED_PARTITIONS, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    assert reconcile(member, 11, A((2, 3), (5, 6)), epochs(-1), owned((2, 3), (5, 6))) == M(
        S.STABLE, 11, 10, A((2, 3), (5, 6))
    )


def test_remains_in_unrevoked_partitions():
    member = M(S.UNREVOKED_PARTITIONS, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    target = A((3,), (6,))
    assert reconcile(member, 12, target, epochs(-1), None) is member
    assert reconcile(member, 12, target, epochs(-1), owned((1, 2, 3), (5, 6))) is member
    assert reconcile(member, 12, target, epochs(-1), owned((2, 3), (4, 5, 6))) is member


def test_unrevoked_partitions_to_unrevoked_partitions():
    member = M(S.UNREVOKED_PARTITIONS, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    assert reconcile(member, 12, A((3,), (6,)), epochs(-1), owned((2, 3), (5, 6))) == M(
        S.UNREVOKED_PARTITIONS, 11, 10, A((3,), (6,)), A((2,), (5,))
    )


def test_unrevoked_partitions_to_unreleased_partitions():
    member = M(S.UNREVOKED_PARTITIONS, 11, 10, A((2, 3), (5, 6)))
    assert reconcile(member, 11, A((2, 3, 4), (5, 6, 7)), epochs(10), owned((2, 3), (5, 6))) == M(
        S.UNRELEASED_PARTITIONS, 11, 11, A((2, 3), (5, 6))
    )


def test_unrevoked_partitions_to_stable_with_returned_partitions_pending_revocation():
    # Partition 4 of topic 1 is pending revocation by the member itself and is back in the target: it is not
    # "unreleased" (its only owner is this member), so the member gets it at once.
    member = M(S.UNREVOKED_PARTITIONS, 10, 10, A((2, 3), (5, 6)), A((4,)))

    def partition_epoch(topic_id, partition):
        if topic_id == T1 and partition in (2, 3, 4):
            return 10
        if topic_id == T2 and partition in (5, 6):
            return 10
        return -1

    assert reconcile(member, 12, A((2, 3, 4), (5, 6, 7)), partition_epoch, owned((2, 3), (5, 6))) == M(
        S.STABLE, 12, 10, A((2, 3, 4), (5, 6, 7))
    )


def test_unreleased_partitions_to_stable():
    member = M(S.UNRELEASED_PARTITIONS, 11, 11, A((2, 3), (5, 6)))
    assert reconcile(member, 12, A((2, 3), (5, 6)), epochs(10)) == M(S.STABLE, 12, 11, A((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions():
    member = M(S.UNRELEASED_PARTITIONS, 11, 11, A((2, 3), (5, 6)))
    assert reconcile(member, 11, A((2, 3, 4), (5, 6, 7)), epochs(-1)) == M(S.STABLE, 11, 11, A((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions():
    member = M(S.UNRELEASED_PARTITIONS, 11, 11, A((2, 3), (5, 6)))
    assert reconcile(member, 11, A((2, 3, 4), (5, 6, 7)), epochs(10)) == member


def test_unreleased_partitions_to_unrevoked_partitions():
    member = M(S.UNRELEASED_PARTITIONS, 11, 11, A((2, 3), (5, 6)))
    assert reconcile(member, 12, A((3,), (6,)), epochs(10)) == M(
        S.UNREVOKED_PARTITIONS, 11, 11, A((3,), (6,)), A((2,), (5,))
    )


def test_unknown_state():
    member = M(S.UNKNOWN, 11, 11, A((3,), (6,)), A((2,), (5,)))
    target = A((3,), (6,))
    # First the member is fenced, so that the client drops its partitions...
    with pytest.raises(HeartbeatError) as fenced:
        reconcile(member, 12, target, epochs(10))
    assert fenced.value.error == "FENCED_MEMBER_EPOCH"
    # ...then it rejoins owning nothing and is reconciled from scratch.
    assert reconcile(member, 12, target, epochs(11), owned={}) == M(S.STABLE, 12, 11, A((3,), (6,)))


def test_member_state_bytes_are_kafkas():
    assert [int(s) for s in S] == [0, 1, 2, 127]
    assert S.from_value(42) is S.UNKNOWN and S.from_value(2) is S.UNRELEASED_PARTITIONS
