"""Range, RoundRobin, registry and custom assignors: expectations ported from Kafka's RangeAssignorTest,
RoundRobinAssignorTest and AbstractPartitionAssignorTest, plus the seeds' worked tables."""

from __future__ import annotations

import pytest

from assignors import (
    COOPERATIVE,
    EAGER,
    Assignor,
    Subscription,
    TopicPartition,
    available_assignors,
    get_assignor,
    register_assignor,
)
from assignors.base import sorted_members
from assignors.java import java_hash_order, java_string_hash
from assignors.priority_failover import decode_priority, encode_priority
from assignors.range import RangeAssignor
from assignors.registry import _REGISTRY

ALL_RACKS = ["a", "b", "c", "d", "e", "f"]


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def parse(spec: str) -> list[TopicPartition]:
    """'t1-0, t2-3' -> [TopicPartition('t1', 0), TopicPartition('t2', 3)] (Kafka tests' notation)."""
    if not spec:
        return []
    out = []
    for item in spec.split(", "):
        topic, _, p = item.rpartition("-")
        out.append(tp(topic, int(p)))
    return sorted(out)


def as_sets(assignment):
    return {m: set(v) for m, v in assignment.items()}


# ---------------------------------------------------------------------------------------------------------------
# Java orderings
# ---------------------------------------------------------------------------------------------------------------


def test_java_string_hash_matches_known_values():
    # Values of "".hashCode(), "a".hashCode(), "hello".hashCode(), "consumer1".hashCode() in Java
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # the famous Integer.MIN_VALUE string


def test_java_hash_order_follows_buckets_not_insertion():
    # "b"(98) and "a"(97) land in buckets 2 and 1 of a 16-slot table: HashMap iterates a before b.
    assert java_hash_order(["b", "a"], java_string_hash) == ["a", "b"]
    # "Aa" and "BB" collide (both 2112): same bucket, so insertion order decides.
    assert java_hash_order(["BB", "Aa"], java_string_hash) == ["BB", "Aa"]
    assert java_hash_order(["Aa", "BB"], java_string_hash) == ["Aa", "BB"]


def test_member_ordering_static_first_then_dynamic():
    subs = {
        "z-dyn": Subscription(["t"]),
        "a-dyn": Subscription(["t"]),
        "m-static": Subscription(["t"], group_instance_id="i2"),
        "b-static": Subscription(["t"], group_instance_id="i1"),
    }
    assert sorted_members(subs) == ["b-static", "m-static", "a-dyn", "z-dyn"]


def test_member_ordering_uses_utf16_like_java():
    # U+FFFD is above the surrogate range in code points but below it in UTF-16 code units.
    astral, bmp_high = "\U0001f600", "\ufffd"
    subs = {bmp_high: Subscription(["t"]), astral: Subscription(["t"])}
    assert sorted_members(subs) == [astral, bmp_high]


# ---------------------------------------------------------------------------------------------------------------
# Range (RangeAssignorTest)
# ---------------------------------------------------------------------------------------------------------------

range_assignor = get_assignor("range")


def test_range_one_consumer_no_topic():
    assert range_assignor.assign({}, {"c1": Subscription([])}) == {"c1": []}


def test_range_one_consumer_nonexistent_topic():
    assert range_assignor.assign({}, {"c1": Subscription(["topic1"])}) == {"c1": []}


def test_range_only_assigns_subscribed_topics():
    result = range_assignor.assign({"topic1": 3, "other": 3}, {"c1": Subscription(["topic1"])})
    assert result == {"c1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


def test_range_one_consumer_multiple_topics():
    result = range_assignor.assign({"topic1": 1, "topic2": 2}, {"c1": Subscription(["topic1", "topic2"])})
    assert result == {"c1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}


def test_range_two_consumers_one_partition():
    subs = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1"])}
    assert range_assignor.assign({"topic1": 1}, subs) == {"consumer1": [tp("topic1", 0)], "consumer2": []}


def test_range_multiple_consumers_mixed_topics():
    subs = {
        "consumer1": Subscription(["topic1"]),
        "consumer2": Subscription(["topic1", "topic2"]),
        "consumer3": Subscription(["topic1"]),
    }
    result = range_assignor.assign({"topic1": 3, "topic2": 2}, subs)
    assert result == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_range_two_consumers_two_topics_six_partitions():
    subs = {c: Subscription(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
    result = range_assignor.assign({"topic1": 3, "topic2": 3}, subs)
    assert result == {
        "consumer1": parse("topic1-0, topic1-1, topic2-0, topic2-1"),
        "consumer2": parse("topic1-2, topic2-2"),
    }


def test_range_static_members_compare_by_instance_id():
    # consumer-a sorts first by member id, but consumer-b has the smaller group.instance.id
    subs = {
        "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
        "consumer-a": Subscription(["topic1", "topic2"], group_instance_id="instance2"),
    }
    result = range_assignor.assign({"topic1": 3, "topic2": 3}, subs)
    assert result["consumer-b"] == parse("topic1-0, topic1-1, topic2-0, topic2-1")
    assert result["consumer-a"] == parse("topic1-2, topic2-2")


def test_range_static_member_beats_dynamic_member():
    subs = {
        "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
        "consumer-a": Subscription(["topic1", "topic2"]),
    }
    result = range_assignor.assign({"topic1": 3, "topic2": 3}, subs)
    assert result["consumer-b"] == parse("topic1-0, topic1-1, topic2-0, topic2-1")
    assert result["consumer-a"] == parse("topic1-2, topic2-2")


def test_range_static_assignment_persistent_across_dynamic_member_replacement():
    topics = {"topic1": 5, "topic2": 4}
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = Subscription(["topic1", "topic2"])
    expected = {
        "consumer1": parse("topic1-0, topic1-1, topic2-0"),
        "consumer2": parse("topic1-2, topic2-1"),
        "consumer3": parse("topic1-3, topic2-2"),
        "consumer4": parse("topic1-4, topic2-3"),
    }
    assert range_assignor.assign(topics, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = Subscription(["topic1", "topic2"])
    expected["consumer5"] = expected.pop("consumer4")
    assert range_assignor.assign(topics, subs) == expected


def by_instance(assignment, subs):
    return {subs[m].group_instance_id: parts for m, parts in assignment.items() if subs[m].group_instance_id}


def test_range_static_assignment_persistent_after_member_id_changes():
    topics = {"topic1": 5, "topic2": 5}
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    first = by_instance(range_assignor.assign(topics, subs), subs)
    assert first == {
        "instance1": parse("topic1-0, topic1-1, topic2-0, topic2-1"),
        "instance2": parse("topic1-2, topic1-3, topic2-2, topic2-3"),
        "instance3": parse("topic1-4, topic2-4"),
    }
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(range_assignor.assign(topics, subs), subs) == first


def test_range_seed_table_three_consumers_three_topics():
    # Seed walkthrough: C0..C2 subscribe to t0..t2 with 1, 2, 3 partitions.
    subs = {c: Subscription(["t0", "t1", "t2"]) for c in ("C0", "C1", "C2")}
    assert range_assignor.assign({"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": parse("t0-0, t1-0, t2-0"),
        "C1": parse("t1-1, t2-1"),
        "C2": parse("t2-2"),
    }


def test_range_seed_two_consumers_unbalanced_by_design():
    # Seed: 2 consumers, t0 and t1 with 3 partitions each -> C0 gets 4, C1 gets 2 (Range's known skew).
    subs = {c: Subscription(["t0", "t1"]) for c in ("C0", "C1")}
    result = range_assignor.assign({"t0": 3, "t1": 3}, subs)
    assert result == {"C0": parse("t0-0, t0-1, t1-0, t1-1"), "C1": parse("t0-2, t1-2")}


# ---- KIP-881 rack-aware Range (RangeAssignorTest.testRackAware*) ----------------------------------------------


def rack_input(topics: dict[str, int], rf: int, broker_racks: list, consumer_racks: list, consumer_topics: list):
    """Replicates AbstractPartitionAssignorTest.verifyRackAssignment's cluster: broker i has broker_racks[i];
    partition p of the k-th partition overall sits on brokers (k + j) % n for j < rf."""
    n = len(broker_racks)
    partition_racks: dict[TopicPartition, set[str]] = {}
    next_index = 0
    for topic, count in topics.items():
        for p in range(count):
            partition_racks[tp(topic, p)] = {
                broker_racks[(p + j + next_index) % n] for j in range(rf) if broker_racks[(p + j + next_index) % n]
            }
        next_index += count
    subs = {
        f"consumer{i}": Subscription(consumer_topics[i], rack=consumer_racks[i]) for i in range(len(consumer_racks))
    }
    return partition_racks, subs


def verify_rack_assignment(assignor, topics, rf, broker_racks, consumer_racks, consumer_topics, expected, mismatches):
    partition_racks, subs = rack_input(topics, rf, broker_racks, consumer_racks, consumer_topics)
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


def racks(n: int) -> list[str]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list:
    return [None] * n


def verify_non_rack_aware(topics, consumer_topics, expected):
    plain, prefer = RangeAssignor(), RangeAssignor(prefer_rack_aware=True)
    verify_rack_assignment(plain, topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(plain, topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(plain, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(plain, topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(plain, topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(plain, topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(prefer, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)


def test_range_rack_aware_uniform_subscription():
    a = RangeAssignor()
    topics = {"t1": 6, "t2": 7, "t3": 2}
    every = ["t1", "t2", "t3"]
    ct = [every, every, every]
    verify_non_rack_aware(
        topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"]
    )
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(3),
        racks(3),
        ct,
        ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"],
        0,
    )
    verify_rack_assignment(
        a,
        topics,
        2,
        racks(3),
        racks(3),
        ct,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"],
        1,
    )
    verify_rack_assignment(
        a,
        topics,
        3,
        racks(2),
        racks(3),
        ct,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
        4,
    )


def test_range_rack_aware_non_equal_subscription():
    a = RangeAssignor()
    topics = {"t1": 6, "t2": 7, "t3": 2}
    every = ["t1", "t2", "t3"]
    ct = [every, every, ["t1", "t3"]]
    verify_non_rack_aware(
        topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"]
    )
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(3),
        racks(3),
        ct,
        ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"],
        2,
    )
    verify_rack_assignment(
        a,
        topics,
        2,
        racks(3),
        racks(3),
        ct,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"],
        0,
    )
    verify_rack_assignment(
        a,
        topics,
        3,
        racks(2),
        racks(3),
        ct,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
        2,
    )


def test_range_rack_aware_co_partitioning_preferred_over_racks():
    a = RangeAssignor()
    topics = {"t1": 5, "t2": 5, "t3": 5}
    every = ["t1", "t2", "t3"]
    ct = [every, every, every]
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    verify_non_rack_aware(topics, ct, plain)
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, plain, 10)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, plain, 5)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, plain, 3)


def test_range_rack_aware_uniform_partitions_non_equal_subscription():
    a = RangeAssignor()
    topics = {"t1": 5, "t2": 5, "t3": 5}
    every = ["t1", "t2", "t3"]
    ct = [every, every, ["t1", "t3"]]
    verify_non_rack_aware(
        topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"]
    )
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(3),
        racks(3),
        ct,
        ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"],
        9,
    )
    verify_rack_assignment(
        a,
        topics,
        2,
        racks(3),
        racks(3),
        ct,
        ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"],
        0,
    )
    verify_rack_assignment(
        a,
        topics,
        3,
        racks(2),
        racks(3),
        ct,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
        2,
    )


def test_range_rack_aware_with_co_partitioning():
    a = RangeAssignor()
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    ct = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    cr = ["a", "b", "b", "a"]
    plain = ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"]
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(2),
        cr,
        ct,
        ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"],
        0,
    )
    every = ["t1", "t2", "t3", "t4"]
    ct = [every] * 4
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"]
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(2),
        cr,
        ct,
        ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"],
        0,
    )
    verify_rack_assignment(
        a,
        topics,
        1,
        racks(3),
        cr,
        ct,
        ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"],
        6,
    )


def test_range_co_partitioned_same_subscription():
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    every = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
    ct = [every] * 3
    cr = ["a", "b", "c"]
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
    ]
    verify_rack_assignment(RangeAssignor(), topics, 3, null_racks(3), cr, ct, plain, -1)
    prefer = RangeAssignor(prefer_rack_aware=True)
    verify_rack_assignment(prefer, topics, 3, racks(3), cr, ct, plain, 0)
    verify_rack_assignment(
        prefer,
        topics,
        2,
        racks(3),
        cr,
        ct,
        [
            "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
            "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
            "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
        ],
        0,
    )


def test_range_empty_consumer_rack_is_ignored():
    partition_racks, subs = rack_input({"t1": 4}, 1, racks(2), ["", ""], [["t1"], ["t1"]])
    assert range_assignor.assign({"t1": 4}, subs, partition_racks) == {
        "consumer0": parse("t1-0, t1-1"),
        "consumer1": parse("t1-2, t1-3"),
    }


# ---------------------------------------------------------------------------------------------------------------
# RoundRobin (RoundRobinAssignorTest)
# ---------------------------------------------------------------------------------------------------------------

rr = get_assignor("roundrobin")


def test_roundrobin_one_consumer_cases():
    assert rr.assign({}, {"c": Subscription([])}) == {"c": []}
    assert rr.assign({}, {"c": Subscription(["topic"])}) == {"c": []}
    assert rr.assign({"topic": 3, "other": 3}, {"c": Subscription(["topic"])}) == {
        "c": parse("topic-0, topic-1, topic-2")
    }
    assert rr.assign({"topic1": 1, "topic2": 2}, {"c": Subscription(["topic1", "topic2"])}) == {
        "c": parse("topic1-0, topic2-0, topic2-1")
    }


def test_roundrobin_two_consumers_one_topic():
    subs = {"consumer1": Subscription(["topic"]), "consumer2": Subscription(["topic"])}
    assert rr.assign({"topic": 1}, subs) == {"consumer1": [tp("topic", 0)], "consumer2": []}
    assert rr.assign({"topic": 2}, subs) == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}


def test_roundrobin_multiple_consumers_mixed_topics():
    subs = {
        "consumer1": Subscription(["topic1"]),
        "consumer2": Subscription(["topic1", "topic2"]),
        "consumer3": Subscription(["topic1"]),
    }
    assert rr.assign({"topic1": 3, "topic2": 2}, subs) == {
        "consumer1": parse("topic1-0"),
        "consumer2": parse("topic1-1, topic2-0, topic2-1"),
        "consumer3": parse("topic1-2"),
    }


def test_roundrobin_two_consumers_two_topics_six_partitions():
    subs = {c: Subscription(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
    assert rr.assign({"topic1": 3, "topic2": 3}, subs) == {
        "consumer1": parse("topic1-0, topic1-2, topic2-1"),
        "consumer2": parse("topic1-1, topic2-0, topic2-2"),
    }


def test_roundrobin_static_members_two_topics():
    subs = {
        "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
        "consumer-a": Subscription(["topic1", "topic2"], group_instance_id="instance2"),
    }
    assert rr.assign({"topic1": 3, "topic2": 3}, subs) == {
        "consumer-b": parse("topic1-0, topic1-2, topic2-1"),
        "consumer-a": parse("topic1-1, topic2-0, topic2-2"),
    }


def test_roundrobin_one_static_one_dynamic():
    subs = {
        "consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
        "consumer-a": Subscription(["topic1", "topic2"]),
    }
    assert rr.assign({"topic1": 3, "topic2": 3}, subs) == {
        "consumer-b": parse("topic1-0, topic1-2, topic2-1"),
        "consumer-a": parse("topic1-1, topic2-0, topic2-2"),
    }


def test_roundrobin_static_assignment_persistent_after_member_id_changes():
    topics = {"topic1": 5, "topic2": 5}
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    first = by_instance(rr.assign(topics, subs), subs)
    assert first == {
        "instance1": parse("topic1-0, topic1-3, topic2-1, topic2-4"),
        "instance2": parse("topic1-1, topic1-4, topic2-2"),
        "instance3": parse("topic1-2, topic2-0, topic2-3"),
    }
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(rr.assign(topics, subs), subs) == first


def test_roundrobin_seed_tables():
    every = ["t0", "t1", "t2"]
    subs = {c: Subscription(every) for c in ("C0", "C1", "C2")}
    counts = {"t0": 1, "t1": 2, "t2": 3}
    assert rr.assign(counts, subs) == {"C0": parse("t0-0, t2-0"), "C1": parse("t1-0, t2-1"), "C2": parse("t1-1, t2-2")}
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]), "C2": Subscription(every)}
    assert rr.assign(counts, subs) == {"C0": parse("t0-0"), "C1": parse("t1-0"), "C2": parse("t1-1, t2-0, t2-1, t2-2")}
    # C1 leaves: RoundRobin reshuffles (the seed contrasts this with Sticky)
    del subs["C1"]
    assert rr.assign(counts, subs) == {"C0": parse("t0-0"), "C2": parse("t1-0, t1-1, t2-0, t2-1, t2-2")}


# ---------------------------------------------------------------------------------------------------------------
# kafka-python bugs that must not exist here
# ---------------------------------------------------------------------------------------------------------------


def interleaved_static_dynamic():
    # kafka-python groups static/dynamic members with itertools.groupby on *unsorted* input, so a dict where
    # static and dynamic members alternate loses every group but the last of each kind.
    return {
        "m1": Subscription(["t"], group_instance_id="s1"),
        "m2": Subscription(["t"]),
        "m3": Subscription(["t"], group_instance_id="s0"),
        "m4": Subscription(["t"]),
    }


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_no_members_dropped_when_static_and_dynamic_interleave(name):
    result = get_assignor(name).assign({"t": 8}, interleaved_static_dynamic())
    assert set(result) == {"m1", "m2", "m3", "m4"}
    assert all(len(parts) == 2 for parts in result.values())
    assert sorted(p for parts in result.values() for p in parts) == [tp("t", p) for p in range(8)]


def test_interleaved_order_matches_kafka_member_order():
    result = get_assignor("range").assign({"t": 4}, interleaved_static_dynamic())
    # static by instance id (s0 < s1), then dynamic by member id
    assert result == {"m3": [tp("t", 0)], "m1": [tp("t", 1)], "m2": [tp("t", 2)], "m4": [tp("t", 3)]}


def test_roundrobin_mixed_subscriptions_with_missing_topic_metadata():
    # Members subscribe to topics of which some have no metadata and some are subscribed only by others;
    # no KeyError, unsubscribed members are skipped.
    subs = {
        "a": Subscription(["t1", "ghost"]),
        "b": Subscription(["t2"]),
        "c": Subscription(["t1", "t2", "t3"]),
    }
    assert rr.assign({"t1": 2, "t2": 2, "t3": 1}, subs) == {
        "a": parse("t1-0"),
        "b": parse("t2-0"),
        "c": parse("t1-1, t2-1, t3-0"),
    }


# ---------------------------------------------------------------------------------------------------------------
# Priority failover, template, registry
# ---------------------------------------------------------------------------------------------------------------


def test_priority_encoding_round_trip():
    assert encode_priority(7) == b"\x00\x00\x00\x07"
    assert decode_priority(encode_priority(-3)) == -3
    assert decode_priority(None) < decode_priority(encode_priority(-(2**31)))


def test_priority_failover_gives_everything_to_highest_priority():
    a = get_assignor("priority-failover")
    subs = {
        "low": Subscription(["t0", "t1"], user_data=encode_priority(1)),
        "high": Subscription(["t0", "t1"], user_data=encode_priority(10)),
        "none": Subscription(["t0", "t1"]),
    }
    assert a.assign({"t0": 2, "t1": 1}, subs) == {"low": [], "high": parse("t0-0, t0-1, t1-0"), "none": []}
    del subs["high"]  # fail over
    assert a.assign({"t0": 2, "t1": 1}, subs) == {"low": parse("t0-0, t0-1, t1-0"), "none": []}


def test_priority_failover_ties_and_partial_subscriptions():
    a = get_assignor("priority-failover")
    subs = {
        "b": Subscription(["t0"], user_data=encode_priority(5)),
        "a": Subscription(["t0", "t1"], user_data=encode_priority(5)),
        "c": Subscription(["t1"], user_data=encode_priority(1)),
    }
    # tie on t0 -> member order ("a" < "b"); t1 -> "a" also outranks "c"
    assert a.assign({"t0": 1, "t1": 1}, subs) == {"b": [], "a": parse("t0-0, t1-0"), "c": []}
    subs["a"] = Subscription(["t0"], user_data=encode_priority(5))
    assert a.assign({"t0": 1, "t1": 1}, subs) == {"b": [], "a": parse("t0-0"), "c": parse("t1-0")}


def test_template_assignor_spreads_topics():
    a = get_assignor("template")
    subs = {c: Subscription(["a", "b", "c"]) for c in ("m0", "m1", "m2")}
    result = a.assign({"a": 1, "b": 1, "c": 1}, subs)
    assert result == {"m0": parse("a-0"), "m1": parse("b-0"), "m2": parse("c-0")}


def test_registry_names_and_protocols():
    assert {"range", "roundrobin", "sticky", "cooperative-sticky", "priority-failover", "template"} <= set(
        available_assignors()
    )
    for name in available_assignors():
        a = get_assignor(name)
        assert isinstance(a, Assignor) and a.name == name
    assert get_assignor("range").supported_protocols == (EAGER,)
    assert COOPERATIVE in get_assignor("cooperative-sticky").supported_protocols
    assert get_assignor("sticky") is not get_assignor("sticky")  # fresh instances
    with pytest.raises(KeyError, match="unknown assignor"):
        get_assignor("nope")


def test_register_custom_assignor():
    class Everything(Assignor):
        name = "test-everything"

        def assign(self, partitions_per_topic, subscriptions, partition_racks=None):
            first = sorted_members(subscriptions)[0]
            return {
                m: (
                    [tp(t, p) for t in sorted(partitions_per_topic) for p in range(partitions_per_topic[t])]
                    if m == first
                    else []
                )
                for m in subscriptions
            }

    try:
        register_assignor(Everything)
        assert "test-everything" in available_assignors()
        assert get_assignor("test-everything").assign({"t": 2}, {"x": Subscription(["t"])}) == {"x": parse("t-0, t-1")}
        with pytest.raises(ValueError):
            register_assignor(RangeAssignor, "test-everything")
        register_assignor(RangeAssignor, "test-everything", replace=True)
        assert isinstance(get_assignor("test-everything"), RangeAssignor)
    finally:
        _REGISTRY.pop("test-everything", None)


def test_subscription_normalises_json_like_input():
    s = Subscription(("t",), owned_partitions=[["t", "1"]], generation=-1)
    assert s.owned_partitions == (tp("t", 1),) and s.generation is None
