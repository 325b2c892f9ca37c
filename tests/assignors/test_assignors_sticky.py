"""Sticky and CooperativeSticky: expectations ported from Kafka's AbstractStickyAssignorTest, StickyAssignorTest
and CooperativeStickyAssignorTest (exact lists where Kafka asserts them), plus the seeds' sticky tables."""

from __future__ import annotations

import pytest

from assignors import Subscription, TopicPartition, get_assignor
from assignors._sticky_core import java_member_order, sticky_assign
from assignors.java import java_hash_order, java_string_hash

sticky = get_assignor("sticky")
coop = get_assignor("cooperative-sticky")
GEN = 1


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def S(topics, owned=(), generation=None, **kw) -> Subscription:
    return Subscription(topics, owned, generation, **kw)


def check_valid_and_balanced(topics, subs, assignment):
    """Kafka's verifyValidityAndBalance: valid, complete for subscribed topics, and no partition could move
    from a member with 2+ more partitions to a member subscribed to its topic."""
    owner = {}
    for member, parts in assignment.items():
        for p in parts:
            assert p.topic in subs[member].topics and 0 <= p.partition < topics[p.topic]
            assert p not in owner, f"{p} assigned twice"
            owner[p] = member
    subscribed = {t for s in subs.values() for t in s.topics if topics.get(t)}
    assert set(owner) == {tp(t, p) for t in subscribed for p in range(topics[t])}
    for a in assignment:
        for b in assignment:
            if len(assignment[a]) > len(assignment[b]) + 1:
                assert not any(p.topic in subs[b].topics for p in assignment[a]), (a, b)


def fully_balanced(assignment) -> bool:
    sizes = [len(v) for v in assignment.values()]
    return max(sizes) - min(sizes) <= 1


# ---- basics (both assignors) -----------------------------------------------------------------------------------


@pytest.mark.parametrize("a", [sticky, coop], ids=["sticky", "coop"])
def test_simple_cases(a):
    assert a.assign({}, {"consumer": S([])}) == {"consumer": []}
    assert a.assign({}, {"consumer": S(["topic"])}) == {"consumer": []}
    assert a.assign({"topic": 3}, {"consumer": S(["topic"])}) == {"consumer": [tp("topic", p) for p in range(3)]}
    assert a.assign({"topic": 3, "other": 3}, {"consumer": S(["topic"])}) == {
        "consumer": [tp("topic", p) for p in range(3)]
    }
    assert a.assign({"topic1": 1, "topic2": 2}, {"consumer": S(["topic1", "topic2"])}) == {
        "consumer": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]
    }
    two = {"consumer1": S(["topic"]), "consumer2": S(["topic"])}
    result = a.assign({"topic": 1}, two)
    assert sorted(map(len, result.values())) == [0, 1]
    assert a.assign({"topic": 2}, two) == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}


@pytest.mark.parametrize("a", [sticky, coop], ids=["sticky", "coop"])
def test_multiple_consumers_mixed_topic_subscriptions(a):
    topics = {"topic1": 3, "topic2": 2}
    subs = {"consumer1": S(["topic1"]), "consumer2": S(["topic1", "topic2"]), "consumer3": S(["topic1"])}
    result = a.assign(topics, subs)
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2)],
        "consumer2": [tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 1)],
    }
    check_valid_and_balanced(topics, subs, result)


def test_two_consumers_two_topics_six_partitions():
    topics = {"topic1": 3, "topic2": 3}
    subs = {c: S(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
    result = sticky.assign(topics, subs)
    assert result == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


# ---- constrained path: exact lists and transferring partitions (AbstractStickyAssignorTest) --------------------


def test_consumer_owning_min_quota_expected_max_quota():
    topics = {"topic1": 2, "topic2": 3}
    subs = {
        "consumer1": S(["topic1", "topic2"], [tp("topic1", 0), tp("topic2", 1)], GEN),
        "consumer2": S(["topic1", "topic2"], [tp("topic1", 1), tp("topic2", 2)], GEN),
    }
    r = sticky_assign(topics, subs)
    assert r.assignment["consumer1"] == [tp("topic1", 0), tp("topic2", 1), tp("topic2", 0)]
    assert r.assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 2)]
    assert r.transferring == {}


def test_max_quota_consumer_more_than_expected_max_capacity_members():
    topics = {"topic1": 2, "topic2": 2}
    every = ["topic1", "topic2"]
    subs = {
        "consumer1": S(every, [tp("topic1", 0), tp("topic2", 0)], GEN),
        "consumer2": S(every, [tp("topic1", 1), tp("topic2", 1)], GEN),
        "consumer3": S(every, [], GEN),
    }
    r = sticky_assign(topics, subs)
    assert r.transferring == {tp("topic2", 0): "consumer3"}
    assert r.assignment == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 1)],
        "consumer3": [tp("topic2", 0)],
    }
    # cooperative: topic2-0 must first be revoked from consumer1, consumer3 gets it next round
    assert coop.assign(topics, subs) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 1)],
        "consumer3": [],
    }


def test_all_consumers_are_under_min_quota():
    topics = {"topic1": 2, "topic2": 3}
    every = ["topic1", "topic2"]
    subs = {
        "consumer1": S(every, [tp("topic1", 0)], GEN),
        "consumer2": S(every, [tp("topic1", 1)], GEN),
        "consumer3": S(every, [], GEN),
    }
    r = sticky_assign(topics, subs)
    assert r.transferring == {}
    assert r.assignment == {
        "consumer1": [tp("topic1", 0), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 2)],
        "consumer3": [tp("topic2", 0)],
    }


def test_add_remove_consumer_one_topic():
    topics = {"topic": 3}
    subs = {"consumer1": S(["topic"])}
    first = sticky_assign(topics, subs).assignment
    assert first == {"consumer1": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}
    subs = {"consumer1": S(["topic"], first["consumer1"], GEN), "consumer2": S(["topic"], [], GEN)}
    r = sticky_assign(topics, subs)
    assert r.transferring == {tp("topic", 2): "consumer2"}
    assert r.assignment == {"consumer1": [tp("topic", 0), tp("topic", 1)], "consumer2": [tp("topic", 2)]}
    # cooperative round 1 keeps topic-2 out; round 2 (after consumer1 revoked it) hands it over
    round1 = coop.assign(topics, subs)
    assert round1 == {"consumer1": [tp("topic", 0), tp("topic", 1)], "consumer2": []}
    subs = {"consumer1": S(["topic"], round1["consumer1"], GEN + 1), "consumer2": S(["topic"], [], GEN + 1)}
    assert coop.assign(topics, subs) == {"consumer1": [tp("topic", 0), tp("topic", 1)], "consumer2": [tp("topic", 2)]}
    subs = {"consumer2": S(["topic"], [tp("topic", 2)], GEN)}
    r = sticky_assign(topics, subs)
    assert set(r.assignment["consumer2"]) == {tp("topic", p) for p in range(3)} and r.transferring == {}


def test_partition_claimed_by_two_members_of_same_generation_is_invalid_for_both():
    topics = {"topic": 3}
    subs = {
        "consumer1": S(["topic"], [tp("topic", 0), tp("topic", 1)], GEN),
        "consumer2": S(["topic"], [tp("topic", 0), tp("topic", 2)], GEN),
        "consumer3": S(["topic"], [], GEN),
    }
    r = sticky_assign(topics, subs)
    assert r.transferring == {tp("topic", 0): "consumer3"}
    assert r.assignment == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": [tp("topic", 0)]}
    assert coop.assign(topics, subs)["consumer3"] == []


def test_all_consumers_reach_expected_quota_and_are_filled():
    topics = {"topic": 4}
    subs = {
        "consumer1": S(["topic"], [tp("topic", 0), tp("topic", 1)], GEN),
        "consumer2": S(["topic"], [tp("topic", 2)], GEN),
        "consumer3": S(["topic"], [], GEN),
    }
    r = sticky_assign(topics, subs)
    assert r.assignment == {
        "consumer1": [tp("topic", 0), tp("topic", 1)],
        "consumer2": [tp("topic", 2)],
        "consumer3": [tp("topic", 3)],
    }
    assert r.transferring == {}


def test_owned_partitions_invalidated_for_stale_generation():
    topics = {"topic": 3, "topic2": 3}
    both = ["topic", "topic2"]
    owned = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
    subs = {"consumer1": S(both, owned, 10), "consumer2": S(both, owned, 9)}
    r = sticky_assign(topics, subs)
    assert set(r.assignment["consumer1"]) == set(owned)
    assert set(r.assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 0), tp("topic2", 2)}
    assert r.transferring == {}


def test_owned_partitions_invalidated_for_member_without_generation():
    topics = {"topic": 3, "topic2": 3}
    both = ["topic", "topic2"]
    owned = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
    subs = {"consumer1": S(both, owned, 10), "consumer2": S(both, owned, None)}
    r = sticky_assign(topics, subs)
    assert set(r.assignment["consumer1"]) == set(owned)
    assert set(r.assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 0), tp("topic2", 2)}


def test_partitions_go_to_highest_generation():
    topics = {"topic": 3, "topic2": 3, "topic3": 3}
    every = ["topic", "topic2", "topic3"]
    subs = {
        "consumer1": S(every, [tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], 10),
        "consumer2": S(every, [tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], 9),
        "consumer3": S(every, [tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], 8),
    }
    r = sticky_assign(topics, subs)
    assert set(r.assignment["consumer1"]) == {tp("topic", 0), tp("topic2", 0), tp("topic3", 0)}
    assert set(r.assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 1), tp("topic3", 1)}
    assert set(r.assignment["consumer3"]) == {tp("topic", 2), tp("topic2", 2), tp("topic3", 2)}
    assert r.transferring == {}


def test_no_reassignment_on_current_members():
    topics = {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3}
    every = ["topic", "topic2", "topic3", "topic1"]
    subs = {
        "consumer1": S(every, [], None),
        "consumer2": S(every, [tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], 9),
        "consumer3": S(every, [tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], 8),
        "consumer4": S(every, [tp("topic3", 1), tp("topic", 1), tp("topic", 2)], 7),
    }
    r = sticky_assign(topics, subs)
    assert set(r.assignment["consumer1"]) == {tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)}
    assert r.transferring == {}
    check_valid_and_balanced(topics, subs, r.assignment)


def test_three_generations_claiming_same_partition_general_path():
    topics = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {
            "consumer1": S(["topic"], [tp("topic", 0), tp("topic", 2)], g1),
            "consumer2": S(["topic"], [tp("topic", 1), tp("topic", 2), tp("topic", 3)], g2),
            "consumer3": S(["topic"], [tp("topic", 2), tp("topic", 4), tp("topic", 5)], g3),
            "consumer4": S(["topic1"], [tp("topic1", 0)], 2),
        }
        result = sticky.assign(topics, subs)
        flat = [p for parts in result.values() for p in parts]
        assert len(flat) == len(set(flat)) == 7
        assert all(1 <= len(parts) <= 2 for parts in result.values())


@pytest.mark.parametrize("equal", [True, False])
def test_assignment_with_multiple_generations(equal):
    topics = {"topic": 6, "topic2": 6}
    every = ["topic", "topic2"]
    c2_topics = every if equal else ["topic"]
    subs = {"consumer1": S(every), "consumer2": S(c2_topics), "consumer3": S(every)}
    r1 = sticky.assign(topics, subs)
    assert [len(r1[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    check_valid_and_balanced(topics, subs, r1)

    subs = {"consumer1": S(every, r1["consumer1"], GEN), "consumer2": S(c2_topics, r1["consumer2"], GEN)}
    r2 = sticky.assign(topics, subs)
    assert len(r2["consumer1"]) == len(r2["consumer2"]) == 6
    if equal:
        assert set(r1["consumer1"]) <= set(r2["consumer1"])
    assert set(r1["consumer2"]) <= set(r2["consumer2"])
    assert set(r2["consumer2"]) & set(r1["consumer3"])

    # consumer1 gone; consumer3 comes back claiming its generation-1 partitions, consumer2 is at generation 2
    subs = {"consumer2": S(c2_topics, r2["consumer2"], 2), "consumer3": S(every, r1["consumer3"], 1)}
    r3 = sticky.assign(topics, subs)
    assert len(r3["consumer2"]) == len(r3["consumer3"]) == 6
    assert not set(r3["consumer2"]) & set(r3["consumer3"])
    check_valid_and_balanced(topics, subs, r3)


@pytest.mark.parametrize("equal", [True, False])
def test_assignment_with_conflicting_previous_generations(equal):
    topics = {"topic": 4, "topic2": 4, "topic3": 4}
    every = ["topic", "topic2", "topic3"]
    t, t2, t3 = (lambda p: tp("topic", p)), (lambda p: tp("topic2", p)), (lambda p: tp("topic3", p))
    c1_owned = [t(0), t(1), t(2), t2(2), t2(3), t3(0)] if equal else [t(0), t(1), t(2), t(3)]
    c2_owned = [t(0), t(1), t2(0), t2(1), t2(2), t2(3)]
    c3_owned = [t(2), t(3), t3(0), t3(1), t3(2), t3(3)]
    subs = {
        "consumer1": S(every if equal else ["topic"], c1_owned, 1),
        "consumer2": S(every if equal else ["topic", "topic2"], c2_owned, 2),
        "consumer3": S(every, c3_owned, 2),
    }
    result = sticky.assign(topics, subs)
    assert [len(result[c]) for c in subs] == [4, 4, 4]
    assert set(result["consumer2"]) <= set(c2_owned)
    assert set(result["consumer3"]) <= set(c3_owned)
    check_valid_and_balanced(topics, subs, result)


def test_poor_round_robin_scenario_is_balanced():
    topics = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    every = list(topics)
    odd = ["topic1", "topic3", "topic5"]
    subs = {"consumer1": S(every), "consumer2": S(odd), "consumer3": S(odd), "consumer4": S(every)}
    check_valid_and_balanced(topics, subs, sticky.assign(topics, subs))


def test_uniform_subscription_transfer_list():
    # Without replica racks, owned partitions already balanced: nothing transfers.  (Kafka's
    # CooperativeStickyAssignorTest version puts the partitions on two racks so that two of them must move:
    # see test_assignors_sticky_racks.py.)
    subs = {
        "c0": S(["topic1"], [tp("topic1", 0), tp("topic1", 1)], GEN),
        "c1": S(["topic1"], [tp("topic1", 2), tp("topic1", 3)], GEN),
    }
    r = sticky_assign({"topic1": 4}, subs)
    assert r.transferring == {}
    assert coop.assign({"topic1": 4}, subs) == {
        "c0": [tp("topic1", 0), tp("topic1", 1)],
        "c1": [tp("topic1", 2), tp("topic1", 3)],
    }


def test_general_path_cooperative_holds_back_moving_partitions():
    # Unequal subscriptions -> general path; the transfer set is derived from owned vs assigned.
    topics = {"a": 4, "b": 2}
    subs = {
        "m1": S(["a", "b"], [tp("a", 0), tp("a", 1), tp("a", 2), tp("a", 3), tp("b", 0), tp("b", 1)], 3),
        "m2": S(["a"], [], 3),
    }
    eager = sticky.assign(topics, subs)
    check_valid_and_balanced(topics, subs, eager)
    moved = set(eager["m2"])
    assert moved and moved <= set(subs["m1"].owned_partitions)
    round1 = coop.assign(topics, subs)
    assert round1["m2"] == []
    assert set(round1["m1"]) == set(eager["m1"])


# ---- seed tables -----------------------------------------------------------------------------------------------


def test_seed_sticky_member_leaves_keeps_survivors():
    # Seed: C0..C2 on t0..t3 (2 partitions each); C1 leaves. Sticky keeps C0 and C2's partitions.
    topics = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    every = list(topics)
    subs = {c: S(every) for c in ("C0", "C1", "C2")}
    r1 = sticky.assign(topics, subs)
    assert r1 == {
        "C0": [tp("t0", 0), tp("t1", 1), tp("t3", 0)],
        "C1": [tp("t0", 1), tp("t2", 0), tp("t3", 1)],
        "C2": [tp("t1", 0), tp("t2", 1)],
    }
    subs = {"C0": S(every, r1["C0"], 1), "C2": S(every, r1["C2"], 1)}
    r2 = sticky.assign(topics, subs)
    assert set(r1["C0"]) <= set(r2["C0"]) and set(r1["C2"]) <= set(r2["C2"])
    assert sorted(map(len, r2.values())) == [4, 4]


def test_seed_sticky_non_uniform_member_leaves():
    # Seed: C0 {t0}, C1 {t0,t1}, C2 {t0,t1,t2}; t0..t2 with 1,2,3 partitions; then C0 leaves.
    topics = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": S(["t0"]), "C1": S(["t0", "t1"]), "C2": S(["t0", "t1", "t2"])}
    r1 = sticky.assign(topics, subs)
    assert r1 == {"C0": [tp("t0", 0)], "C1": [tp("t1", 0), tp("t1", 1)], "C2": [tp("t2", 0), tp("t2", 1), tp("t2", 2)]}
    subs = {"C1": S(["t0", "t1"], r1["C1"], 1), "C2": S(["t0", "t1", "t2"], r1["C2"], 1)}
    r2 = sticky.assign(topics, subs)
    assert r2 == {"C1": [tp("t0", 0), tp("t1", 0), tp("t1", 1)], "C2": [tp("t2", 0), tp("t2", 1), tp("t2", 2)]}


# ---- HashMap order -------------------------------------------------------------------------------------------------


def test_member_iteration_follows_java_hashmap_order():
    members = ["consumer10", "consumer2", "consumer1", "Aa", "BB"]
    subs = {m: S(["t"]) for m in members}
    order = java_member_order(subs)
    assert order == java_hash_order(members, java_string_hash)
    assert order.index("Aa") < order.index("BB")  # colliding hashes keep insertion (join) order
    subs = {m: S(["t"]) for m in reversed(members)}
    assert java_member_order(subs).index("BB") < java_member_order(subs).index("Aa")


def test_tie_for_extra_partition_goes_to_first_member_in_hashmap_order():
    # 4 partitions, 3 members: only one member may keep 2.  Kafka lets the first member its HashMap visits
    # keep both; "Aa" and "BB" have the same String.hashCode, so the JoinGroup order decides.
    owned = {"Aa": [tp("t", 0), tp("t", 1)], "BB": [tp("t", 2), tp("t", 3)], "C": []}

    def run(order):
        subs = {m: S(["t"], owned[m], GEN) for m in order}
        return sticky_assign({"t": 4}, subs)

    first = run(["Aa", "BB", "C"])
    assert first.assignment == {"Aa": [tp("t", 0), tp("t", 1)], "BB": [tp("t", 2)], "C": [tp("t", 3)]}
    assert first.transferring == {tp("t", 3): "C"}
    second = run(["BB", "Aa", "C"])
    assert second.assignment == {"BB": [tp("t", 2), tp("t", 3)], "Aa": [tp("t", 0)], "C": [tp("t", 1)]}
    assert second.transferring == {tp("t", 1): "C"}
