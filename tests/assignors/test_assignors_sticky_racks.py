"""Rack-aware (KIP-881) Sticky and CooperativeSticky: expectations ported from Kafka's AbstractStickyAssignorTest
(``testRackAware*`` and every ``RackConfig``-parametrised case), StickyAssignorTest and CooperativeStickyAssignorTest.

How Kafka's tests build their input, and how it is mirrored here:

* ``verifyRackAssignment`` (AbstractPartitionAssignorTest): broker ``i`` sits on ``brokerRacks[i]``; partition ``p``
  of a topic has replicas on brokers ``(p + j + next) % n`` for ``j < replicationFactor``, where ``next`` counts
  the partitions of the topics before it.  Consumers are ``consumer0..``; owned partitions go in the
  ``ownedPartitions`` field with generation -1.  Kafka's eager StickyAssignor reads owned partitions only from its
  user data, which these subscriptions do not carry, so for ``sticky`` those cases run with nothing owned (our
  ``Subscription.owned_partitions`` stands for what the sticky user data carries).
* ``initializeRacks(RackConfig)`` (AbstractStickyAssignorTest): replication factor 3; ``NO_BROKER_RACK`` = no
  replica racks, consumer ``i`` on ``"abcdef"[i % 6]``; ``NO_CONSUMER_RACK`` = 3 broker racks, no consumer rack;
  ``BROKER_AND_CONSUMER_RACK`` = 3 broker racks, consumer ``i`` on ``"abc"[i % 3]``.  Each topic's partitions
  start one broker further (``nextPartitionIndex``).  It also sets ``preferRackAwareLogic``, so the rack-aware
  code runs even though every partition is on every rack -- and must give the rack-unaware answers.
* StickyAssignorTest's ``buildSubscriptionV2Above`` sends no rack; CooperativeStickyAssignorTest's keeps it.
* CooperativeStickyAssignorTest's ``verifyValidityAndBalance`` first runs the follow-up rebalances a cooperative
  group would run (no partition may be revoked and assigned in one round, at most 4 rounds), so its exact lists
  are those of the final round.
"""

from __future__ import annotations

import random

import pytest

from assignors import Subscription, TopicPartition, get_assignor
from assignors._sticky_core import sticky_assign
from assignors.cooperative_sticky import CooperativeStickyAssignor
from assignors.range import use_rack_aware_assignment
from assignors.sticky import StickyAssignor
from tests.assignors.test_assignors import ALL_RACKS, parse, tp

GEN = 1
DEFAULT_GENERATION = None  # Kafka's -1


def racks(n: int) -> list[str]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list:
    return [None] * n


# ---------------------------------------------------------------------------------------------------------------
# verifyRackAssignment (AbstractPartitionAssignorTest)
# ---------------------------------------------------------------------------------------------------------------


def rack_cluster(topics: dict[str, int], rf: int, broker_racks: list) -> dict[TopicPartition, set[str]]:
    n = len(broker_racks)
    partition_racks: dict[TopicPartition, set[str]] = {}
    next_index = 0
    for topic, count in topics.items():
        for p in range(count):
            partition_racks[tp(topic, p)] = {
                broker_racks[(p + j + next_index) % n] for j in range(rf) if broker_racks[(p + j + next_index) % n]
            }
        next_index += count
    return partition_racks


def verify_rack_assignment(
    assignor, topics, rf, broker_racks, consumer_racks, consumer_topics, owned, expected, mismatches
):
    partition_racks = rack_cluster(topics, rf, broker_racks)
    subs = {
        f"consumer{i}": Subscription(
            consumer_topics[i],
            parse(owned[i]) if owned and i < len(owned) else (),
            DEFAULT_GENERATION,
            rack=consumer_racks[i],
        )
        for i in range(len(consumer_racks))
    }
    result = assignor.assign(topics, subs, partition_racks)
    assert result == {f"consumer{i}": parse(spec) for i, spec in enumerate(expected)}
    if mismatches >= 0:
        wrong = [
            p
            for i, rack in enumerate(consumer_racks)
            if rack
            for p in result[f"consumer{i}"]
            if rack not in partition_racks[p]
        ]
        assert len(wrong) == mismatches, wrong
    return result


def verify_both_ways(assignor, topics, rf, broker_racks, consumer_racks, consumer_topics, expected, mismatches):
    """Kafka's verifyUniformSubscription / verifyNonEqualSubscription: fresh, then already owning the answer."""
    verify_rack_assignment(
        assignor, topics, rf, broker_racks, consumer_racks, consumer_topics, None, expected, mismatches
    )
    owned = expected if isinstance(assignor, CooperativeStickyAssignor) else None
    verify_rack_assignment(
        assignor, topics, rf, broker_racks, consumer_racks, consumer_topics, owned, expected, mismatches
    )


KINDS = [StickyAssignor, CooperativeStickyAssignor]
KIND_IDS = ["sticky", "coop"]
T3 = {"t1": 6, "t2": 7, "t3": 2}
EVERY3 = ["t1", "t2", "t3"]
MISALIGNED_OWNED = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_rack_aware_assignment_with_uniform_subscription(kind):
    ct = [EVERY3] * 3
    plain = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]
    a, prefer = kind(), kind(prefer_rack_aware=True)
    # racks that cannot matter leave the rack-unaware answer
    verify_both_ways(a, T3, 3, null_racks(3), racks(3), ct, plain, -1)
    verify_both_ways(a, T3, 3, racks(3), null_racks(3), ct, plain, -1)
    verify_both_ways(prefer, T3, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(prefer, T3, 4, racks(4), racks(3), ct, plain, 0)
    verify_both_ways(a, T3, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(a, T3, 3, racks(3), ["d", "e", "f"], ct, plain, -1)
    verify_both_ways(a, T3, 3, racks(3), [None, "e", "f"], ct, plain, -1)
    # rack-aligned for lower replication factors, where each broker has a subset of the partitions
    verify_both_ways(a, T3, 1, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(a, T3, 2, racks(3), racks(3), ct, plain, 0)
    # one consumer on a rack without partitions: it gets misaligned partitions to keep the balance
    verify_both_ways(a, T3, 3, racks(2), racks(3), ct, plain, 5)
    if kind is CooperativeStickyAssignor:
        # misaligned owned partitions are released for rack locality (cooperative: the moved ones wait a round)
        verify_rack_assignment(
            a, T3, 1, racks(3), racks(3), ct, MISALIGNED_OWNED, ["t1-0, t1-3", "t2-1", "t2-5, t3-1"], 0
        )
        verify_rack_assignment(prefer, T3, 3, racks(3), racks(3), ct, plain, plain, 0)  # sticky when racks match
    else:
        verify_rack_assignment(a, T3, 1, racks(3), racks(3), ct, None, plain, 0)
        verify_rack_assignment(prefer, T3, 3, racks(3), racks(3), ct, None, plain, 0)


@pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
def test_rack_aware_assignment_with_non_equal_subscription(kind):
    ct = [EVERY3, EVERY3, ["t1", "t3"]]
    plain = ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-4, t3-1"]
    a, prefer = kind(), kind(prefer_rack_aware=True)
    verify_both_ways(a, T3, 3, null_racks(3), racks(3), ct, plain, -1)
    verify_both_ways(a, T3, 3, racks(3), null_racks(3), ct, plain, -1)
    verify_both_ways(prefer, T3, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(prefer, T3, 4, racks(4), racks(3), ct, plain, 0)
    verify_both_ways(a, T3, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(a, T3, 3, racks(3), ["d", "e", "f"], ct, plain, -1)
    verify_both_ways(a, T3, 3, racks(3), [None, "e", "f"], ct, plain, -1)
    # rack alignment is best effort: with few rack choices some partitions stay misaligned
    rf1 = ["t1-3, t2-0, t2-2, t2-3, t2-6", "t1-4, t2-1, t2-4, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-5, t3-1"]
    verify_both_ways(a, T3, 1, racks(3), racks(3), ct, rf1, 4)
    verify_both_ways(
        a,
        T3,
        2,
        racks(3),
        racks(3),
        ct,
        ["t1-3, t2-0, t2-2, t2-5, t2-6", "t1-0, t2-1, t2-3, t2-4, t3-0", "t1-1, t1-2, t1-4, t1-5, t3-1"],
        0,
    )
    verify_both_ways(a, T3, 3, racks(2), racks(3), ct, plain, 5)
    if kind is StickyAssignor:
        verify_rack_assignment(a, T3, 1, racks(3), racks(3), ct, None, rf1, 4)
        verify_rack_assignment(a, T3, 3, racks(3), racks(3), ct, None, plain, 0)
        verify_rack_assignment(prefer, T3, 3, racks(3), racks(3), ct, None, plain, 0)
    else:
        intermediate = ["t1-3", "t2-1", "t3-1"]
        verify_rack_assignment(a, T3, 1, racks(3), racks(3), ct, MISALIGNED_OWNED, intermediate, 0)
        verify_rack_assignment(a, T3, 1, racks(3), racks(3), ct, intermediate, rf1, 4)
        final = ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6", "t1-0, t1-1, t1-5, t3-0, t3-1"]
        intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
        for assignor in (a, prefer):
            verify_rack_assignment(assignor, T3, 3, racks(3), racks(3), ct, MISALIGNED_OWNED, intermediate, 0)
            verify_rack_assignment(assignor, T3, 3, racks(3), racks(3), ct, intermediate, final, 0)


def test_uniform_subscription_transfer_ownership_list_is_right():
    # CooperativeStickyAssignorTest: replication factor 1 on two racks, so topic1-1 and topic1-2 sit on the other
    # member's rack; both are released by their owners and change hands.
    partition_racks = {tp("topic1", p): {"ab"[p % 2]} for p in range(4)}
    subs = {
        "c0": Subscription(["topic1"], [tp("topic1", 0), tp("topic1", 1)], GEN, rack="a"),
        "c1": Subscription(["topic1"], [tp("topic1", 2), tp("topic1", 3)], GEN, rack="b"),
    }
    r = sticky_assign({"topic1": 4}, subs, partition_racks)
    assert r.transferring == {tp("topic1", 2): "c0", tp("topic1", 1): "c1"}
    assert CooperativeStickyAssignor().assign({"topic1": 4}, subs, partition_racks) == {
        "c0": [tp("topic1", 0)],
        "c1": [tp("topic1", 3)],
    }
    # without replica racks nothing needs to move
    assert sticky_assign({"topic1": 4}, subs).transferring == {}


def test_use_rack_aware_assignment():
    # AbstractPartitionAssignorTest.testUseRackAwareAssignment (the rule Sticky shares with Range)
    all_racks, two = {"a", "b", "c"}, {"a", "b"}
    on_all = {tp("topic", i): frozenset(all_racks) for i in range(10)}
    on_subset = {tp("topic", i): frozenset("abc"[i % 3]) for i in range(10)}
    for prefer in (False, True):
        assert not use_rack_aware_assignment(set(), set(), on_all, prefer)
        assert not use_rack_aware_assignment(set(), all_racks, on_all, prefer)
        assert not use_rack_aware_assignment(all_racks, set(), {}, prefer)
        assert not use_rack_aware_assignment({"d"}, all_racks, on_all, prefer)
        assert use_rack_aware_assignment(all_racks, all_racks, on_subset, prefer)
        assert use_rack_aware_assignment(two, all_racks, on_subset, prefer)
    assert not use_rack_aware_assignment(all_racks, all_racks, on_all, False)
    assert not use_rack_aware_assignment(two, all_racks, on_all, False)
    assert not use_rack_aware_assignment({"a", "d"}, all_racks, on_all, False)
    assert use_rack_aware_assignment({"a", "d"}, all_racks, on_subset, False)
    assert use_rack_aware_assignment(all_racks, all_racks, on_all, True)
    assert use_rack_aware_assignment(two, all_racks, on_all, True)


# ---------------------------------------------------------------------------------------------------------------
# RackConfig-parametrised cases (AbstractStickyAssignorTest, StickyAssignorTest, CooperativeStickyAssignorTest)
# ---------------------------------------------------------------------------------------------------------------

RACK_CONFIGS = ["NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"]


class Group:
    """One test's cluster and assignor, as ``initializeRacks`` and the subscription builders set them up."""

    def __init__(self, config: str, flavour: str) -> None:
        self.num_broker_racks = 0 if config == "NO_BROKER_RACK" else 3
        self.has_consumer_rack = config != "NO_CONSUMER_RACK"
        self.rf = 3
        self.flavour = flavour
        self.topics: dict[str, int] = {}
        self.partition_racks: dict[TopicPartition, set[str]] = {}
        self._next = 0
        self.last: object = None

    def add_topic(self, topic: str, n: int) -> None:
        """AbstractPartitionAssignorTest.partitionInfos(topic, n, rf, numBrokerRacks, nextIndex)."""
        num_brokers = self.rf if self.num_broker_racks <= 0 else self.num_broker_racks * self.rf
        broker_racks = [
            None if self.num_broker_racks <= 0 else ALL_RACKS[i % self.num_broker_racks] for i in range(num_brokers)
        ]
        for p in range(n):
            self.partition_racks[tp(topic, p)] = {
                broker_racks[(p + j + self._next) % num_brokers] for j in range(self.rf)
            } - {None}
        self.topics[topic] = n
        self._next += 1

    def remove_topic(self, topic: str) -> None:
        del self.topics[topic]

    def rack(self, index: int) -> str | None:
        if not self.has_consumer_rack or index < 0:
            return None
        return ALL_RACKS[index % (self.num_broker_racks or len(ALL_RACKS))]

    def sub(self, topics, index: int) -> Subscription:
        """``subscription(topics, consumerIndex)``: nothing owned, generation -1, the consumer's rack."""
        return Subscription(topics, rack=self.rack(index))

    def owning(self, topics, owned, generation, index: int) -> Subscription:
        """``buildSubscriptionV2Above``: Sticky's sends no rack, CooperativeSticky's does."""
        rack = self.rack(index) if self.flavour == "coop" else None
        return Subscription(topics, owned, generation, rack=rack)

    def assign(self, subs):
        """One ``assignPartitions`` call (before the cooperative adjustment), with preferRackAwareLogic set."""
        self.last = sticky_assign(self.topics, subs, self.partition_racks, prefer_rack_aware=True)
        return self.last

    def settle(self, subs, result):
        """The flavour's ``verifyValidityAndBalance``; returns the assignment whose lists the test asserts.

        Eager: the result itself.  Cooperative: rerun the round with the cooperative assignor, then follow-up
        rounds while partitions are being revoked; a partition is never revoked and assigned in the same round.
        """
        assignment = result.assignment
        if self.flavour == "coop":
            coop = CooperativeStickyAssignor(prefer_rack_aware=True)
            assignment = coop.assign(self.topics, subs, self.partition_racks)
            rounds = 0
            while True:
                added = {p for m, parts in assignment.items() for p in parts if p not in set(subs[m].owned_partitions)}
                revoked = {p for m, s in subs.items() for p in s.owned_partitions if p not in set(assignment[m])}
                assert not added & revoked, f"revoked and assigned in one round: {added & revoked}"
                if not revoked:
                    break
                subs = {m: Subscription(s.topics, assignment[m], GEN, rack=s.rack) for m, s in subs.items()}
                assignment = coop.assign(self.topics, subs, self.partition_racks)
                rounds += 1
                assert rounds <= 4
        check_valid_and_balanced(self.topics, subs, assignment)
        return {m: sorted(parts) for m, parts in assignment.items()}


def check_valid_and_balanced(topics, subs, assignment):
    """Kafka's verifyValidityAndBalance (plus completeness for subscribed topics that exist)."""
    assert set(assignment) == set(subs)
    owner = {}
    for member, parts in assignment.items():
        for p in parts:
            assert p.topic in subs[member].topics, f"{p} given to {member}, not subscribed"
            assert p not in owner, f"{p} assigned twice"
            owner[p] = member
    for a in assignment:
        for b in assignment:
            if len(assignment[a]) > len(assignment[b]) + 1:
                assert not {p.topic for p in assignment[a]} & {p.topic for p in assignment[b]}, (a, b)


def fully_balanced(assignment) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def flavoured(config_list=RACK_CONFIGS):
    return pytest.mark.parametrize(
        "g",
        [(c, f) for c in config_list for f in ("sticky", "coop")],
        indirect=True,
        ids=[f"{c}-{f}" for c in config_list for f in ("sticky", "coop")],
    )


@pytest.fixture
def g(request) -> Group:
    config, flavour = request.param
    return Group(config, flavour)


@flavoured(["NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"])
def test_one_consumer_no_topic_and_nonexistent_topic(g):
    subs = {"consumer": g.sub([], 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer": []} and r.transferring == {}
    subs = {"consumer": g.sub(["topic"], 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer": []} and r.transferring == {}


@flavoured()
def test_one_consumer_one_topic(g):
    g.add_topic("topic", 3)
    subs = {"consumer": g.sub(["topic"], 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_only_assigns_partitions_from_subscribed_topics(g):
    g.add_topic("topic", 2)
    subs = {"consumer": g.owning(["topic"], [tp("topic", 0), tp("topic", 1), tp("other", 0), tp("other", 1)], GEN, 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer": [tp("topic", 0), tp("topic", 1)]} and r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_one_consumer_multiple_topics(g):
    g.add_topic("topic1", 1)
    g.add_topic("topic2", 2)
    subs = {"consumer": g.sub(["topic1", "topic2"], 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}
    assert r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_two_consumers_one_topic_one_and_two_partitions(g):
    g.add_topic("topic", 1)
    subs = {"consumer1": g.sub(["topic"], 0), "consumer2": g.sub(["topic"], 1)}
    r = g.assign(subs)
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))
    g.topics["topic"] = 2
    g.partition_racks[tp("topic", 1)] = g.partition_racks[tp("topic", 0)]
    r = g.assign(subs)
    assert r.assignment == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}
    assert r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_multiple_consumers_mixed_topic_subscriptions(g):
    g.add_topic("topic1", 3)
    g.add_topic("topic2", 2)
    subs = {
        "consumer1": g.sub(["topic1"], 0),
        "consumer2": g.sub(["topic1", "topic2"], 1),
        "consumer3": g.sub(["topic1"], 2),
    }
    r = g.assign(subs)
    assert r.assignment == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2)],
        "consumer2": [tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 1)],
    }
    assert r.transferring is None  # general path: Kafka leaves partitionsTransferringOwnership null
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_two_consumers_two_topics_six_partitions(g):
    g.add_topic("topic1", 3)
    g.add_topic("topic2", 3)
    subs = {"consumer1": g.sub(["topic1", "topic2"], 0), "consumer2": g.sub(["topic1", "topic2"], 1)}
    r = g.assign(subs)
    assert r.assignment == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }
    assert r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_consumer_owning_min_quota_expected_max_quota(g):
    g.add_topic("topic1", 2)
    g.add_topic("topic2", 3)
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": g.owning(both, [tp("topic1", 0), tp("topic2", 1)], GEN, 0),
        "consumer2": g.owning(both, [tp("topic1", 1), tp("topic2", 2)], GEN, 1),
    }
    r = g.assign(subs)
    assert r.assignment == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1), tp("topic2", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 2)],
    }
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_max_quota_consumer_more_than_num_expected_max_capacity_members(g):
    g.add_topic("topic1", 2)
    g.add_topic("topic2", 2)
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": g.owning(both, [tp("topic1", 0), tp("topic2", 0)], GEN, 0),
        "consumer2": g.owning(both, [tp("topic1", 1), tp("topic2", 1)], GEN, 1),
        "consumer3": g.owning(both, [], GEN, 2),
    }
    r = g.assign(subs)
    assert r.transferring == {tp("topic2", 0): "consumer3"}
    final = g.settle(subs, r)
    assert final == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 1)],
        "consumer3": [tp("topic2", 0)],
    }


@flavoured()
def test_all_consumers_are_under_min_quota(g):
    g.add_topic("topic1", 2)
    g.add_topic("topic2", 3)
    both = ["topic1", "topic2"]
    subs = {
        "consumer1": g.owning(both, [tp("topic1", 0)], GEN, 0),
        "consumer2": g.owning(both, [tp("topic1", 1)], GEN, 1),
        "consumer3": g.owning(both, [], GEN, 2),
    }
    r = g.assign(subs)
    assert r.transferring == {}
    assert g.settle(subs, r) == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 2)],
        "consumer3": [tp("topic2", 0)],
    }


@flavoured()
def test_add_remove_consumer_one_topic(g):
    g.add_topic("topic", 3)
    subs = {"consumer1": g.sub(["topic"], 0)}
    r = g.assign(subs)
    assert r.assignment == {"consumer1": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}
    first = g.settle(subs, r)

    subs = {"consumer1": g.owning(["topic"], first["consumer1"], GEN, 0), "consumer2": g.owning(["topic"], [], GEN, 1)}
    r = g.assign(subs)
    assert r.transferring == {tp("topic", 2): "consumer2"}
    second = g.settle(subs, r)
    assert second == {"consumer1": [tp("topic", 0), tp("topic", 1)], "consumer2": [tp("topic", 2)]}

    subs = {"consumer2": g.owning(["topic"], second["consumer2"], GEN, 1)}
    r = g.assign(subs)
    assert set(r.assignment["consumer2"]) == {tp("topic", 0), tp("topic", 1), tp("topic", 2)}
    assert r.transferring == {}
    g.settle(subs, r)


def _per_topic(assignment, topic):
    return {m: sum(1 for p in parts if p.topic == topic) for m, parts in assignment.items()}


@flavoured()
def test_topic_balance_after_reassignment(g):
    every = ["topic1", "topic2"]
    g.add_topic("topic1", 12)
    g.add_topic("topic2", 12)
    subs = {"consumer1": g.sub(every, 0)}
    r = g.assign(subs)
    a = g.settle(subs, r)
    assert r.transferring == {}
    assert set(_per_topic(a, "topic1").values()) == {12} == set(_per_topic(a, "topic2").values())

    subs = {"consumer1": g.owning(every, a["consumer1"], GEN, 0), "consumer2": g.owning(every, [], GEN, 1)}
    a = g.settle(subs, g.assign(subs))
    assert set(_per_topic(a, "topic1").values()) == {6} == set(_per_topic(a, "topic2").values())

    subs = {
        "consumer1": g.owning(every, a["consumer1"], GEN, 0),
        "consumer2": g.owning(every, a["consumer2"], GEN, 1),
        "consumer3": g.owning(every, [], GEN, 2),
        "consumer4": g.owning(every, [], GEN, 3),
    }
    a = g.settle(subs, g.assign(subs))
    assert set(_per_topic(a, "topic1").values()) == {3} == set(_per_topic(a, "topic2").values())

    subs = {"consumer3": g.owning(every, a["consumer3"], GEN, 2), "consumer4": g.owning(every, a["consumer4"], GEN, 3)}
    r = g.assign(subs)
    assert r.transferring == {}
    a = g.settle(subs, r)
    assert set(_per_topic(a, "topic1").values()) == {6} == set(_per_topic(a, "topic2").values())


@flavoured()
def test_add_remove_two_consumers_two_topics(g):
    every = ["topic1", "topic2"]
    g.add_topic("topic1", 3)
    g.add_topic("topic2", 4)
    subs = {"consumer1": g.sub(every, 0), "consumer2": g.sub(every, 1)}
    r = g.assign(subs)
    assert r.assignment == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }
    assert r.transferring == {}
    a = g.settle(subs, r)

    subs = {
        "consumer1": g.owning(every, r.assignment["consumer1"], GEN, 0),
        "consumer2": g.owning(every, r.assignment["consumer2"], GEN, 1),
        "consumer3": g.owning(every, [], GEN, 2),
        "consumer4": g.owning(every, [], GEN, 3),
    }
    r = g.assign(subs)
    assert r.transferring == {tp("topic1", 2): "consumer3", tp("topic2", 3): "consumer3", tp("topic2", 2): "consumer4"}
    if g.flavour == "sticky":
        assert r.assignment == {
            "consumer1": [tp("topic1", 0), tp("topic2", 1)],
            "consumer2": [tp("topic2", 0), tp("topic1", 1)],
            "consumer3": [tp("topic1", 2), tp("topic2", 3)],
            "consumer4": [tp("topic2", 2)],
        }
    a = g.settle(subs, r)
    assert a == {
        "consumer1": parse("topic1-0, topic2-1"),
        "consumer2": parse("topic2-0, topic1-1"),
        "consumer3": parse("topic1-2, topic2-3"),
        "consumer4": parse("topic2-2"),
    }

    subs = {"consumer3": g.owning(every, a["consumer3"], GEN, 2), "consumer4": g.owning(every, a["consumer4"], GEN, 3)}
    r = g.assign(subs)
    assert set(r.assignment["consumer3"]) == set(parse("topic1-2, topic2-3, topic1-0, topic2-1"))
    assert set(r.assignment["consumer4"]) == set(parse("topic2-2, topic1-1, topic2-0"))
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_poor_round_robin_assignment_scenario(g):
    for i in range(1, 6):
        g.add_topic(f"topic{i}", (i % 2) + 1)
    every, odd = [f"topic{i}" for i in range(1, 6)], ["topic1", "topic3", "topic5"]
    subs = {
        "consumer1": g.sub(every, 0),
        "consumer2": g.sub(odd, 1),
        "consumer3": g.sub(odd, 2),
        "consumer4": g.sub(every, 3),
    }
    g.settle(subs, g.assign(subs))


@flavoured()
def test_add_remove_topic_two_consumers(g):
    g.add_topic("topic", 3)
    subs = {"consumer1": g.sub(["topic"], 0), "consumer2": g.sub(["topic"], 1)}
    r = g.assign(subs)
    assert r.transferring == {}
    a1 = g.settle(subs, r)
    assert sorted(len(v) for v in a1.values()) == [1, 2]

    g.add_topic("topic2", 3)
    both = ["topic", "topic2"]
    subs = {"consumer1": g.owning(both, a1["consumer1"], GEN, 0), "consumer2": g.owning(both, a1["consumer2"], GEN, 1)}
    r = g.assign(subs)
    assert r.transferring == {}
    a2 = g.settle(subs, r)
    assert [len(a2["consumer1"]), len(a2["consumer2"])] == [3, 3]
    assert set(a1["consumer1"]) <= set(a2["consumer1"]) and set(a1["consumer2"]) <= set(a2["consumer2"])

    g.remove_topic("topic")
    subs = {
        "consumer1": g.owning(["topic2"], a2["consumer1"], GEN, 0),
        "consumer2": g.owning(["topic2"], a2["consumer2"], GEN, 1),
    }
    r = g.assign(subs)
    assert r.transferring == {}
    a3 = g.settle(subs, r)
    assert sorted(len(v) for v in a3.values()) == [1, 2]
    assert set(a3["consumer1"]) <= set(a2["consumer1"]) and set(a3["consumer2"]) <= set(a2["consumer2"])


def name(prefix: str, i: int, max_num: int) -> str:
    """getTopicName / getConsumerName: zero-padded to the width of max_num."""
    return f"{prefix}{i:0{len(str(max_num))}d}"


@flavoured()
def test_reassignment_after_one_consumer_leaves(g):
    for i in range(1, 20):
        g.add_topic(name("t", i, 20), i)
    subs = {name("c", i, 20): g.sub([name("t", j, 20) for j in range(1, i + 1)], i) for i in range(1, 20)}
    r = g.assign(subs)
    g.settle(subs, r)
    subs = {c: g.owning(s.topics, r.assignment[c], GEN, i) for i, (c, s) in enumerate(subs.items(), start=1)}
    del subs["c10"]
    r = g.assign(subs)
    g.settle(subs, r)
    assert r.sticky


@flavoured()
def test_reassignment_after_one_consumer_added(g):
    g.add_topic("topic", 20)
    subs = {name("c", i, 10): g.sub(["topic"], i) for i in range(1, 10)}
    r = g.assign(subs)
    assert r.transferring == {}
    g.settle(subs, r)
    subs[name("c", 10, 10)] = g.sub(["topic"], 10)
    r = g.assign(subs)
    assert r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_same_subscriptions(g):
    for i in range(1, 15):
        g.add_topic(name("t", i, 15), i)
    every = [name("t", j, 15) for j in range(1, 15)]
    subs = {name("c", i, 9): g.sub(every, i) for i in range(1, 9)}
    r = g.assign(subs)
    assert r.transferring == {}
    g.settle(subs, r)
    subs = {c: g.owning(every, r.assignment[c], GEN, i) for i, c in enumerate(subs, start=1)}
    del subs[name("c", 5, 9)]
    r = g.assign(subs)
    assert r.transferring == {}
    g.settle(subs, r)


@flavoured()
def test_new_subscription(g):
    for i in range(1, 5):
        g.add_topic(name("t", i, 5), 1)
    subs = {name("c", i, 3): g.sub([name("t", j, 5) for j in range(i, 3 * i - 1)], i) for i in range(3)}
    r = g.assign(subs)
    g.settle(subs, r)
    c0 = name("c", 0, 3)
    subs[c0] = Subscription(list(subs[c0].topics) + [name("t", 1, 5)], rack=subs[c0].rack)
    r = g.assign(subs)
    g.settle(subs, r)
    assert r.sticky


@flavoured()
def test_move_existing_assignments(g):
    for i in range(1, 7):
        g.add_topic(f"topic{i}", 1)
    subs = {
        "consumer1": g.owning(["topic1", "topic2"], [tp("topic1", 0)], GEN, 0),
        "consumer2": g.owning(["topic1", "topic2", "topic3", "topic4"], [tp("topic2", 0), tp("topic3", 0)], GEN, 1),
        "consumer3": g.owning(
            ["topic2", "topic3", "topic4", "topic5", "topic6"],
            [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)],
            GEN,
            2,
        ),
    }
    r = g.assign(subs)
    assert r.transferring is None
    g.settle(subs, r)


@flavoured()
def test_stickiness(g):
    g.add_topic("topic1", 3)
    subs = {f"consumer{i + 1}": g.sub(["topic1"], i) for i in range(4)}
    r = g.assign(subs)
    assert r.transferring == {}
    a = g.settle(subs, r)
    assert all(len(v) <= 1 for v in a.values())
    before = {c: v[0] for c, v in a.items() if v}
    subs = {f"consumer{i + 1}": g.owning(["topic1"], a[f"consumer{i + 1}"], GEN, i) for i in range(1, 4)}
    r = g.assign(subs)
    assert r.transferring == {}
    a = g.settle(subs, r)
    for c, parts in a.items():
        assert len(parts) == 1
        assert c not in before or before[c] in parts, f"stickiness not honoured for {c}"


@flavoured()
def test_assignment_updated_for_deleted_topic(g):
    g.add_topic("topic1", 1)
    g.add_topic("topic3", 100)
    subs = {"consumer": g.sub(["topic1", "topic2", "topic3"], 0)}
    r = g.assign(subs)
    assert r.transferring == {}
    assert len(r.assignment["consumer"]) == 101


@flavoured()
def test_no_exception_thrown_when_only_subscribed_topic_deleted(g):
    g.add_topic("topic", 3)
    subs = {"consumer": g.sub(["topic"], 0)}
    r = g.assign(subs)
    assert r.transferring == {}
    subs = {"consumer": g.owning(["topic"], r.assignment["consumer"], GEN, 0)}
    g.remove_topic("topic")
    r = g.assign(subs)
    assert r.transferring == {} and r.assignment == {"consumer": []}


@flavoured()
def test_reassignment_with_random_subscriptions_and_changes(g):
    rng = random.Random(14)  # Kafka draws unseeded; 20 seeded rounds instead of 100 unseeded ones
    for _ in range(20):
        num_topics = 10 + rng.randrange(10)
        topics = [name("t", i, 20) for i in range(num_topics)]
        g.topics, g.partition_racks, g._next = {}, {}, 0
        for i, t in enumerate(topics):
            g.add_topic(t, i + 1)
        num_consumers = 20 + rng.randrange(20)

        def random_sublist(topics=topics):
            chosen = list(topics)
            for _ in range(rng.randrange(len(topics))):
                chosen.pop(rng.randrange(len(chosen)))
            return sorted(chosen)

        subs = {name("c", i, 40): g.sub(random_sublist(), i) for i in range(num_consumers)}
        r = g.assign(subs)
        g.settle(subs, r)
        subs = {
            name("c", i, 40): g.owning(random_sublist(), r.assignment[name("c", i, 40)], GEN, i)
            for i in range(num_consumers)
        }
        r = g.assign(subs)
        g.settle(subs, r)
        assert r.sticky


@flavoured()
def test_all_consumers_reach_expected_quota_and_are_considered_filled(g):
    g.add_topic("topic", 4)
    subs = {
        "consumer1": g.owning(["topic"], [tp("topic", 0), tp("topic", 1)], GEN, 0),
        "consumer2": g.owning(["topic"], [tp("topic", 2)], GEN, 1),
        "consumer3": g.owning(["topic"], [], GEN, 2),
    }
    r = g.assign(subs)
    assert r.assignment == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [tp("topic", 3)],
    }
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@pytest.mark.parametrize("second_generation", [9, DEFAULT_GENERATION], ids=["stale", "none"])
@flavoured()
def test_owned_partitions_are_invalidated_for_consumer_with_stale_or_no_generation(g, second_generation):
    g.add_topic("topic", 3)
    g.add_topic("topic2", 3)
    both = ["topic", "topic2"]
    owned = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
    subs = {"consumer1": g.owning(both, owned, 10, 0), "consumer2": g.owning(both, owned, second_generation, 1)}
    r = g.assign(subs)
    assert set(r.assignment["consumer1"]) == set(owned)
    assert set(r.assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 0), tp("topic2", 2)}
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_partitions_transferring_ownership_include_the_partition_claimed_by_multiple_consumers(g):
    g.add_topic("topic", 3)
    subs = {
        "consumer1": g.owning(["topic"], [tp("topic", 0), tp("topic", 1)], GEN, 0),
        "consumer2": g.owning(["topic"], [tp("topic", 0), tp("topic", 2)], GEN, 1),
        "consumer3": g.owning(["topic"], [], GEN, 2),
    }
    r = g.assign(subs)
    assert r.transferring == {tp("topic", 0): "consumer3"}
    assert g.settle(subs, r) == {
        "consumer1": [tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [tp("topic", 0)],
    }


@flavoured()
def test_ensure_partitions_assigned_to_highest_generation(g):
    every = ["topic", "topic2", "topic3"]
    for t in every:
        g.add_topic(t, 3)
    subs = {
        "consumer1": g.owning(every, [tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], 10, 0),
        "consumer2": g.owning(every, [tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], 9, 1),
        "consumer3": g.owning(every, [tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], 8, 1),
    }
    r = g.assign(subs)
    assert set(r.assignment["consumer1"]) == {tp("topic", 0), tp("topic2", 0), tp("topic3", 0)}
    assert set(r.assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 1), tp("topic3", 1)}
    assert set(r.assignment["consumer3"]) == {tp("topic", 2), tp("topic2", 2), tp("topic3", 2)}
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_no_reassignment_on_current_members(g):
    for t in ("topic", "topic1", "topic2", "topic3"):
        g.add_topic(t, 3)
    every = ["topic", "topic2", "topic3", "topic1"]
    subs = {
        "consumer1": g.owning(every, [], DEFAULT_GENERATION, 0),
        "consumer2": g.owning(every, [tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], 9, 1),
        "consumer3": g.owning(every, [tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], 8, 2),
        "consumer4": g.owning(every, [tp("topic3", 1), tp("topic", 1), tp("topic", 2)], 7, 3),
    }
    r = g.assign(subs)
    assert set(r.assignment["consumer1"]) == {tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)}
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@flavoured()
def test_owned_partitions_are_invalidated_for_consumer_with_multiple_generation(g):
    g.add_topic("topic", 3)
    g.add_topic("topic2", 3)
    both = ["topic", "topic2"]
    subs = {
        "consumer1": g.owning(both, [tp("topic", 0), tp("topic2", 1), tp("topic", 1)], 10, 0),
        "consumer2": g.owning(both, [tp("topic", 0), tp("topic2", 1), tp("topic2", 2)], 8, 1),
    }
    r = g.assign(subs)
    assert set(r.assignment["consumer1"]) == {tp("topic", 0), tp("topic2", 1), tp("topic", 1)}
    assert set(r.assignment["consumer2"]) == {tp("topic", 2), tp("topic2", 2), tp("topic2", 0)}
    assert r.transferring == {}
    assert fully_balanced(g.settle(subs, r))


@pytest.mark.parametrize("partitions", [3, 4])
@flavoured()
def test_all_consumers_have_owned_partition_invalidated_when_claimed_by_multiple_consumers(g, partitions):
    # StickyAssignorTest / CooperativeStickyAssignorTest ...InSameGenerationWith(Un)EqualPartitionsPerConsumer
    g.add_topic("topic", partitions)
    subs = {
        "consumer1": g.owning(["topic"], [tp("topic", 0), tp("topic", 1)], GEN, 0),
        "consumer2": g.owning(["topic"], [tp("topic", 0), tp("topic", 2)], GEN, 1),
        "consumer3": g.owning(["topic"], [], GEN, 2),
    }
    r = g.assign(subs)
    c1 = [tp("topic", 1), tp("topic", 3)] if partitions == 4 else [tp("topic", 1)]
    if g.flavour == "sticky":
        assert {m: sorted(v) for m, v in r.assignment.items()} == {
            "consumer1": c1,
            "consumer2": [tp("topic", 2)],
            "consumer3": [tp("topic", 0)],
        }
    else:
        # topic-0 is still claimed, so the cooperative assignor holds it back this round
        coop = CooperativeStickyAssignor(prefer_rack_aware=True).assign(g.topics, subs, g.partition_racks)
        assert coop == {"consumer1": c1, "consumer2": [tp("topic", 2)], "consumer3": []}
    assert fully_balanced(g.settle(subs, r))


@pytest.mark.parametrize("equal", [True, False], ids=["equal", "unequal"])
@flavoured()
def test_assignment_with_multiple_generations(g, equal):
    # StickyAssignorTest.testAssignmentWithMultipleGenerations1
    every = ["topic", "topic2"]
    g.add_topic("topic", 6)
    g.add_topic("topic2", 6)
    c2_topics = every if equal else ["topic"]
    subs = {"consumer1": g.sub(every, 0), "consumer2": g.sub(c2_topics, 1), "consumer3": g.sub(every, 2)}
    r1 = g.assign(subs).assignment
    assert [len(r1[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    check_valid_and_balanced(g.topics, subs, r1)

    subs = {
        "consumer1": g.owning(every, r1["consumer1"], GEN, 0),
        "consumer2": g.owning(c2_topics, r1["consumer2"], GEN, 1),
    }
    r2 = g.assign(subs).assignment
    assert len(r2["consumer1"]) == len(r2["consumer2"]) == 6
    if equal:
        assert set(r1["consumer1"]) <= set(r2["consumer1"])
    assert set(r1["consumer2"]) <= set(r2["consumer2"])
    assert set(r2["consumer2"]) & set(r1["consumer3"])
    check_valid_and_balanced(g.topics, subs, r2)

    subs = {
        "consumer2": g.owning(c2_topics, r2["consumer2"], 2, 1),
        "consumer3": g.owning(every, r1["consumer3"], 1, 2),
    }
    r3 = g.assign(subs).assignment
    assert len(r3["consumer2"]) == len(r3["consumer3"]) == 6
    assert not set(r3["consumer2"]) & set(r3["consumer3"])
    check_valid_and_balanced(g.topics, subs, r3)


@pytest.mark.parametrize("equal", [True, False], ids=["equal", "unequal"])
@flavoured()
def test_assignment_with_multiple_generations_2(g, equal):
    # StickyAssignorTest.testAssignmentWithMultipleGenerations2
    every = ["topic", "topic2", "topic3"]
    for t in every:
        g.add_topic(t, 4)
    c1_topics = every if equal else ["topic"]
    c3_topics = every if equal else ["topic", "topic2"]
    subs = {"consumer1": g.sub(c1_topics, 0), "consumer2": g.sub(every, 1), "consumer3": g.sub(c3_topics, 2)}
    r1 = g.assign(subs).assignment
    assert [len(r1[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    check_valid_and_balanced(g.topics, subs, r1)

    subs = {"consumer2": g.owning(every, r1["consumer2"], 1, 1)}
    r2 = g.assign(subs).assignment
    assert len(r2["consumer2"]) == 12 and set(r1["consumer2"]) <= set(r2["consumer2"])

    subs = {
        "consumer1": g.owning(c1_topics, r1["consumer1"], 1, 0),
        "consumer2": g.owning(every, r2["consumer2"], 2, 1),
        "consumer3": g.owning(c3_topics, r1["consumer3"], 1, 2),
    }
    r3 = g.assign(subs).assignment
    assert [len(r3[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    check_valid_and_balanced(g.topics, subs, r3)


@pytest.mark.parametrize("equal", [True, False], ids=["equal", "unequal"])
@flavoured()
def test_assignment_with_conflicting_previous_generations(g, equal):
    every = ["topic", "topic2", "topic3"]
    for t in every:
        g.add_topic(t, 4)
    t1, t2, t3 = (lambda p: tp("topic", p)), (lambda p: tp("topic2", p)), (lambda p: tp("topic3", p))
    c1 = [t1(0), t1(1), t1(2), t2(2), t2(3), t3(0)] if equal else [t1(0), t1(1), t1(2), t1(3)]
    c2 = [t1(0), t1(1), t2(0), t2(1), t2(2), t2(3)]
    c3 = [t1(2), t1(3), t3(0), t3(1), t3(2), t3(3)]
    subs = {
        "consumer1": g.owning(every if equal else ["topic"], c1, 1, 0),
        "consumer2": g.owning(every if equal else ["topic", "topic2"], c2, 2, 1),
        "consumer3": g.owning(every, c3, 2, 2),
    }
    r = g.assign(subs).assignment
    assert [len(r[c]) for c in subs] == [4, 4, 4]
    assert set(r["consumer2"]) <= set(c2) and set(r["consumer3"]) <= set(c3)
    check_valid_and_balanced(g.topics, subs, r)


# ---- Kafka's large cases with racks (rack-aware ones use 50 topics instead of 500) -----------------------------


def _large_group(g, topic_count, partition_count, consumer_count, topics_for):
    topics = [name("t", i, topic_count) for i in range(topic_count)]
    for t in topics:
        g.add_topic(t, partition_count)
    subs = {name("c", i, consumer_count): g.sub(topics_for(i, topics), i) for i in range(consumer_count)}
    r = g.assign(subs)
    subs = {c: g.owning(subs[c].topics, r.assignment[c], GEN, i) for i, c in enumerate(subs) if i > 0}
    return subs, g.assign(subs)


@flavoured(["BROKER_AND_CONSUMER_RACK"])
def test_large_assignment_and_group_with_uniform_subscription_with_racks(g):
    # Kafka: @Timeout(30), 50 topics x 2000 partitions, 2000 consumers
    import time

    start = time.perf_counter()
    subs, r = _large_group(g, 50, 2000, 2000, lambda i, topics: topics)
    assert time.perf_counter() - start < 30
    sizes = [len(v) for v in r.assignment.values()]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 100_000


@flavoured(["BROKER_AND_CONSUMER_RACK"])
def test_large_assignment_and_group_with_non_equal_subscription_with_racks(g):
    # Kafka: @Timeout(90), 50 topics x 2000 partitions, 2000 consumers, the last one on the first topic only
    import time

    start = time.perf_counter()
    subs, r = _large_group(g, 50, 2000, 2000, lambda i, topics: topics[:1] if i == 1999 else topics)
    assert time.perf_counter() - start < 90
    check_valid_and_balanced(g.topics, subs, r.assignment)


@flavoured(["BROKER_AND_CONSUMER_RACK"])
def test_assignment_and_group_with_non_equal_subscription_not_timeout_with_racks(g):
    # Kafka: @Timeout(90), 50 topics x 200 partitions, 500 consumers on two disjoint halves of the topics
    import time

    start = time.perf_counter()
    subs, r = _large_group(g, 50, 200, 500, lambda i, t: t[: len(t) // 2] if i % 4 == 0 else t[len(t) // 2 :])
    assert time.perf_counter() - start < 90
    check_valid_and_balanced(g.topics, subs, r.assignment)


@flavoured(["NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"])
def test_large_assignment_with_multiple_consumers_leaving_and_random_subscription(g):
    rng = random.Random(881)
    topic_count, consumer_count = 40, 200
    for i in range(topic_count):
        g.add_topic(name("t", i, topic_count), rng.randrange(10) + 1)
    subs = {}
    for i in range(consumer_count):
        topics = [name("t", rng.randrange(topic_count), topic_count) for _ in range(rng.randrange(20))]
        subs[name("c", i, consumer_count)] = g.sub(list(dict.fromkeys(topics)), i)
    r = g.assign(subs)
    check_valid_and_balanced(g.topics, subs, r.assignment)
    subs = {c: g.owning(subs[c].topics, r.assignment[c], GEN, i) for i, c in enumerate(subs) if i > 0}
    for _ in range(50):
        subs.pop(name("c", rng.randrange(consumer_count), consumer_count), None)
    r = g.assign(subs)
    check_valid_and_balanced(g.topics, subs, r.assignment)
    assert r.sticky


# ---- registry: the rack-aware assignors keep their names ------------------------------------------------------


def test_registry_gives_rack_aware_sticky_assignors():
    pr = {tp("t", p): {"ab"[p % 2]} for p in range(4)}
    subs = {"m1": Subscription(["t"], rack="a"), "m2": Subscription(["t"], rack="b")}
    for n in ("sticky", "cooperative-sticky"):
        result = get_assignor(n).assign({"t": 4}, subs, pr)
        assert all(r == ("a" if m == "m1" else "b") for m, parts in result.items() for p in parts for r in pr[p])
