"""Server-side UniformAssignor (KIP-848): expectations ported from Kafka 4.1+'s
UniformHomogeneousAssignmentBuilderTest (formerly OptimizedUniformAssignmentBuilderTest; three expectations changed
with KAFKA-18688, Kafka 4.0's noted beside them), CommonAssignorTests and UniformHeterogeneousAssignmentBuilderTest,
plus properties.

Kafka's tests put members in a ``TreeMap`` (sorted ids; the heterogeneous test also sorts ``memberIds()``), so
the groups here are built from sorted dicts.  Topic ids are Kafka's test Uuids, so the ``HashSet<Uuid>`` order the
homogeneous builder iterates and the ``Uuid`` order the heterogeneous one breaks ties with are Kafka's.
``mkOrderedAssignment`` (insertion-ordered current assignments) is a dict in that order; ``mkAssignment``
(``HashMap``) only appears where its order cannot matter.
"""

from __future__ import annotations

import itertools
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors import get_assignor
from assignors.server import (
    HETEROGENEOUS,
    HOMOGENEOUS,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    TopicMetadata,
    UniformAssignor,
    available_server_assignors,
    get_server_assignor,
)
from assignors.server.types import parse_uuid, uuid_hash, uuid_sort_key

T1 = "T1-A4s3VTwiI5CTbEp6POw"
T2 = "T2-B4s3VTwiI5YHbPp6YUe"
T3 = "T3-CU8fVTLCz5YMkLoDQsa"
T4 = "T4-Tw9fVTLCz5HbPp6YQsa"
NAMES = {T1: "topic1", T2: "topic2", T3: "topic3", T4: "topic4"}

uniform = UniformAssignor()


def describer(**counts: int) -> SubscribedTopicDescriber:
    """describer(T1=3, T3=2): topic metadata keyed by the test Uuids (T1..T4 map to their ids)."""
    ids = {"T1": T1, "T2": T2, "T3": T3, "T4": T4}
    return SubscribedTopicDescriber([TopicMetadata(ids[k], NAMES[ids[k]], n) for k, n in counts.items()])


def member(*topics: str, assignment=None, rack=None, instance_id=None) -> MemberSubscription:
    return MemberSubscription(tuple(topics), rack=rack, instance_id=instance_id, assignment=assignment or {})


def spec(members: dict[str, MemberSubscription], subscription_type: str) -> GroupSpec:
    return GroupSpec(dict(sorted(members.items())), subscription_type=subscription_type)


def check_validity_and_balance(members: dict[str, MemberSubscription], result) -> None:
    """OptimizedUniformAssignmentBuilderTest.checkValidityAndBalance: subscribed, no partition twice, sizes
    within one of each other."""
    ids = list(result)
    sizes = {m: sum(len(ps) for ps in result[m].values()) for m in ids}
    for i, a in enumerate(ids):
        for topic_id in result[a]:
            assert topic_id in members[a].topic_ids, f"{a} got {topic_id} without subscribing"
        for b in ids[i + 1 :]:
            for topic_id, parts in result[a].items():
                assert not parts & result[b].get(topic_id, frozenset()), (a, b, topic_id)
            assert abs(sizes[a] - sizes[b]) <= 1, (a, sizes[a], b, sizes[b])


# ---------------------------------------------------------------------------------------------------------------
# Kafka's Uuid: parsing, hash and order
# ---------------------------------------------------------------------------------------------------------------


def test_uuid_helpers_follow_kafka():
    assert parse_uuid("AAAAAAAAAAAAAAAAAAAAAA") == (0, 0)
    assert parse_uuid("AAAAAAAAAAAAAAAAAAAAAQ") == (0, 1)
    assert parse_uuid("topic1") is None and parse_uuid("not base64 at all!!!!!") is None
    # Uuid.hashCode: (int)(xor >> 32) ^ (int) xor, with xor = msb ^ lsb
    assert uuid_hash("AAAAAAAAAAAAAAAAAAAAAQ") == 1
    assert uuid_hash("_____________________w") == 0  # all ones: msb ^ lsb == 0
    # Uuid.compareTo compares signed longs: 0x80.. (negative) sorts before 0x00..
    assert uuid_sort_key("gAAAAAAAAAAAAAAAAAAAAA") < uuid_sort_key("AAAAAAAAAAAAAAAAAAAAAA")
    assert sorted([T4, T2, T3, T1], key=uuid_sort_key) == [T1, T2, T3, T4]
    # a plain string id is hashed like a Java String and sorts after every Uuid
    assert uuid_sort_key("orders") > uuid_sort_key(T4)


def test_topic_metadata_rejects_what_kafka_rejects():
    with pytest.raises(ValueError):
        TopicMetadata("AAAAAAAAAAAAAAAAAAAAAA", "t", 1)  # Uuid.ZERO_UUID
    with pytest.raises(ValueError):
        TopicMetadata(T1, "", 1)
    with pytest.raises(ValueError):
        TopicMetadata(T1, "t", -1)
    d = SubscribedTopicDescriber([TopicMetadata(T1, "t", 2, partition_racks={0: {"a", "b"}})])
    assert d.num_partitions(T1) == 2 and d.num_partitions(T2) == -1
    assert d.racks_for_partition(T1, 0) == {"a", "b"} and d.racks_for_partition(T1, 1) == frozenset()


def test_group_spec_resolves_names_and_derives_subscription_type():
    topics = SubscribedTopicDescriber([TopicMetadata(T1, "orders", 3), TopicMetadata(T2, "payments", 3)])
    same = GroupSpec(
        {
            "a": MemberSubscription(topic_names=("orders", "ghost")),
            "b": MemberSubscription(topic_names=("ghost", "orders")),
        },
        topics,
    )
    assert same.subscription_type == HOMOGENEOUS
    assert same.member_subscription("a").topic_ids == (T1,)  # names without metadata are dropped (TopicIds)
    mixed = GroupSpec(
        {"a": MemberSubscription(topic_names=("orders",)), "b": MemberSubscription((T2,), assignment={T2: {1, 0}})},
        topics,
    )
    assert mixed.subscription_type == HETEROGENEOUS
    assert mixed.is_partition_assigned(T2, 0) and not mixed.is_partition_assigned(T2, 2)
    assert mixed.member_assignment("b") == {T2: (0, 1)}
    with pytest.raises(ValueError):
        GroupSpec({"a": member(T1, assignment={T1: [0]}), "b": member(T1, assignment={T1: [0]})})
    with pytest.raises(ValueError):
        same.member_subscription("nobody")


# ---------------------------------------------------------------------------------------------------------------
# UniformHomogeneousAssignmentBuilderTest
# ---------------------------------------------------------------------------------------------------------------


def test_one_member_no_topic_subscription():
    assert uniform.assign(spec({"A": member()}, HOMOGENEOUS), describer(T1=3)) == {}


def test_one_member_subscribed_to_nonexistent_topic():
    with pytest.raises(PartitionAssignorError):
        uniform.assign(spec({"A": member(T2)}, HOMOGENEOUS), describer(T1=3))


def test_first_assignment_two_members_two_topics_no_member_racks():
    members = {"A": member(T1, T3), "B": member(T1, T3)}
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=3, T3=2))
    assert result == {"A": {T3: {0, 1}}, "B": {T1: {0, 1, 2}}}  # Kafka 4.0: A {T1: {0}, T3: {0, 1}}, B {T1: {1, 2}}
    check_validity_and_balance(members, result)


def test_first_assignment_num_members_greater_than_total_num_partitions():
    members = {"A": member(T3), "B": member(T3), "C": member(T3)}
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T3=2))
    assert result == {"A": {}, "B": {T3: {0}}, "C": {T3: {1}}}  # Kafka 4.0: A {T3: {0}}, B {T3: {1}}, C {}
    check_validity_and_balance(members, result)


def test_validity_and_balance_for_large_sample_set():
    rng = random.Random(7)
    ids = [str(parse_uuid_str(rng)) for _ in range(1, 100)]
    topics = SubscribedTopicDescriber([TopicMetadata(t, f"topic-{i}", 3) for i, t in enumerate(ids, start=1)])
    members = {f"member{i}": member(*ids) for i in range(1, 50)}
    check_validity_and_balance(members, uniform.assign(spec(members, HOMOGENEOUS), topics))


def parse_uuid_str(rng: random.Random) -> str:
    """A random Kafka Uuid string (Uuid.randomUuid().toString())."""
    import base64

    raw = uuid.UUID(int=rng.getrandbits(128)).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_reassignment_for_two_members_two_topics_given_unbalanced_prev_assignment():
    members = {
        "A": member(T1, T2, assignment={T1: [0, 1], T2: [0, 1]}),
        "B": member(T1, T2, assignment={T1: [2], T2: [2]}),
    }
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=3, T2=3))
    assert result == {"A": {T1: {0, 1}, T2: {0}}, "B": {T1: {2}, T2: {1, 2}}}
    check_validity_and_balance(members, result)


def test_reassignment_when_partitions_are_added_for_two_members_two_topics():
    members = {
        "A": member(T1, T2, assignment={T1: [0, 2], T2: [0]}),
        "B": member(T1, T2, assignment={T1: [1], T2: [1, 2]}),
    }
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=6, T2=5))
    # Kafka 4.0: A {T1: {0, 2, 3}, T2: {0, 3, 4}}, B {T1: {1, 4, 5}, T2: {1, 2}}
    assert result == {"A": {T1: {0, 2}, T2: {0, 3, 4}}, "B": {T1: {1, 3, 4, 5}, T2: {1, 2}}}
    check_validity_and_balance(members, result)


def test_reassignment_when_one_member_added_after_initial_assignment_with_two_members_two_topics():
    members = {
        "A": member(T1, T2, assignment={T1: [0, 2], T2: [0]}),
        "B": member(T1, T2, assignment={T1: [1], T2: [1, 2]}),
        "C": member(T1, T2),
    }
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=3, T2=3))
    assert result == {"A": {T1: {0, 2}}, "B": {T1: {1}, T2: {1}}, "C": {T2: {0, 2}}}
    check_validity_and_balance(members, result)


def test_reassignment_when_one_member_removed_after_initial_assignment_with_three_members_two_topics():
    members = {"A": member(T1, T2, assignment={T1: [0], T2: [0]}), "B": member(T1, T2, assignment={T1: [1], T2: [1]})}
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=3, T2=3))
    assert result == {"A": {T1: {0}, T2: {0, 2}}, "B": {T1: {1, 2}, T2: {1}}}
    check_validity_and_balance(members, result)


def test_reassignment_when_one_subscription_removed_after_initial_assignment_with_two_members_two_topics():
    members = {"A": member(T2, assignment={T1: [0], T2: [0]}), "B": member(T2, assignment={T1: [1], T2: [1]})}
    result = uniform.assign(spec(members, HOMOGENEOUS), describer(T1=2, T2=2))
    assert result == {"A": {T2: {0}}, "B": {T2: {1}}}
    check_validity_and_balance(members, result)


def test_kafka_4_0_builder_is_kept_behind_a_setting():
    members = {"A": member(T1, T3), "B": member(T1, T3)}
    result = UniformAssignor(kafka_4_0=True).assign(spec(members, HOMOGENEOUS), describer(T1=3, T3=2))
    assert result == {"A": {T1: {0}, T3: {0, 1}}, "B": {T1: {1, 2}}}


# CommonAssignorTests: an assignment fed back is kept, whatever order the members come in (the order-dependence
# KAFKA-18688 removed from the homogeneous builder; the heterogeneous one never had it).


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_iteration_order_stickiness(subscription_type):
    every = (T1, T2, T3)
    topics = describer(T1=2, T2=5, T3=7)
    first = uniform.assign(GroupSpec({m: member(*every) for m in "ABC"}, subscription_type=subscription_type), topics)
    for order in itertools.permutations("ABC"):
        again = GroupSpec({m: member(*every, assignment=first[m]) for m in order}, subscription_type=subscription_type)
        assert uniform.assign(again, topics) == first, order


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
@pytest.mark.parametrize("replaced", "ABC")
def test_member_replacement_stickiness(subscription_type, replaced):
    """A member leaves and a new one joins (Kafka's test: in the leaver's place in the member order, or a static
    member's new member id given the old target): the newcomer takes exactly the leaver's partitions."""
    every = (T1, T2, T3)
    topics = describer(T1=2, T2=5, T3=7)
    first = uniform.assign(GroupSpec({m: member(*every) for m in "ABC"}, subscription_type=subscription_type), topics)
    for static in (False, True):
        members = {
            ("D" if m == replaced else m): member(*every, assignment=first[m] if m != replaced or static else None)
            for m in "ABC"
        }
        result = uniform.assign(GroupSpec(members, subscription_type=subscription_type), topics)
        assert result == {("D" if m == replaced else m): first[m] for m in "ABC"}, static


# ---------------------------------------------------------------------------------------------------------------
# UniformHeterogeneousAssignmentBuilderTest
# ---------------------------------------------------------------------------------------------------------------


def test_two_members_no_topic_subscription():
    assert uniform.assign(spec({"A": member(), "B": member()}, HETEROGENEOUS), describer(T1=3)) == {}


def test_two_members_subscribed_to_nonexistent_topics():
    with pytest.raises(PartitionAssignorError):
        uniform.assign(spec({"A": member(T3), "B": member(T2)}, HETEROGENEOUS), describer(T1=3))


def test_first_assignment_two_members_two_topics():
    members = {"A": member(T1, T3), "B": member(T3)}
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=3, T3=6)) == {
        "A": {T1: {0, 1, 2}, T3: {4}},
        "B": {T3: {0, 1, 2, 3, 5}},
    }


def test_heterogeneous_first_assignment_num_members_greater_than_total_num_partitions():
    members = {"A": member(T3), "B": member(T3), "C": member(T1)}
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T3=1, T1=2)) == {
        "A": {T3: {0}},
        "B": {},
        "C": {T1: {0, 1}},
    }


def test_reassignment_for_two_members_three_topics_given_unbalanced_prev_assignment():
    members = {
        "A": member(T1, assignment={T1: [0, 1, 2]}),
        "B": member(T1, T2, assignment={T1: [3], T2: [0]}),
        "C": member(T1, T2, T3, assignment={T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]}),
    }
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=6, T2=4, T3=4)) == {
        "A": {T1: {0, 1, 2, 5}},
        "B": {T1: {3}, T2: {0, 1, 2, 3}},
        "C": {T1: {4}, T3: {0, 1, 2, 3}},
    }


def test_reassignment_when_partitions_are_added_for_two_members():
    members = {
        "A": member(T1, T3, assignment={T1: [0, 1, 2, 3], T3: [0, 1]}),
        "B": member(T1, T2, T3, T4, assignment={T2: [0, 1, 2], T4: [0, 1, 2]}),
    }
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=6, T2=5, T3=3, T4=3)) == {
        "A": {T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}},
        "B": {T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}},
    }


def test_reassignment_when_one_member_added_and_partitions_added_two_members_two_topics():
    members = {
        "A": member(T1, assignment={T1: [0, 2], T2: [0]}),
        "B": member(T1, T2, assignment={T1: [1], T2: [1, 2]}),
        "C": member(T1, T2),
    }
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=6, T2=7)) == {
        "A": {T1: {0, 2, 3, 4, 5}},
        "B": {T1: {1}, T2: {1, 2, 6}},
        "C": {T2: {0, 3, 4, 5}},
    }


def test_reassignment_when_one_member_removed_after_initial_assignment_with_three_members_three_topics():
    members = {
        "A": member(T1, T3, assignment={T1: [0, 1, 2], T3: [0, 1]}),
        "B": member(T2, assignment={T2: [3, 4, 5, 6]}),
    }
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=3, T2=8, T3=3)) == {
        "A": {T1: {0, 1, 2}, T3: {0, 1, 2}},
        "B": {T2: set(range(8))},
    }


def test_heterogeneous_reassignment_when_one_subscription_removed_after_initial_assignment():
    members = {
        "A": member(T1, assignment={T1: [0, 2], T2: [1, 3]}),
        "B": member(T1, T2, assignment={T1: [1], T2: [0, 2, 4]}),
    }
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=3, T2=5)) == {
        "A": {T1: {0, 1, 2}},
        "B": {T2: {0, 1, 2, 3, 4}},
    }


def test_reassignment_when_topic_partitions_run_out_and_members_have_no_partitions():
    # the per-topic loop must stop when the least loaded subscribers own nothing of the topic to give back
    members = {"A": member(T1, T2, T3, assignment={T1: [0, 1], T2: [0, 1], T3: [0, 1]}), "B": member(T1, T2, T3)}
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=2, T2=2, T3=2)) == {
        "A": {T2: {0}, T3: {0, 1}},
        "B": {T1: {0, 1}, T2: {1}},
    }


def test_first_assignment_with_two_members_including_one_without_subscriptions():
    members = {"A": member(T1), "B": member()}
    assert uniform.assign(spec(members, HETEROGENEOUS), describer(T1=3)) == {"A": {T1: {0, 1, 2}}, "B": {}}


# ---------------------------------------------------------------------------------------------------------------
# Racks, registry, names
# ---------------------------------------------------------------------------------------------------------------


def test_racks_do_not_change_the_uniform_assignment():
    # Kafka's server-side assignors are not rack-aware (KAFKA-16694); racks in the inputs change nothing
    plain = {"A": member(T1, T2), "B": member(T1, T2), "C": member(T1)}
    racked = {m: MemberSubscription(s.topic_ids, rack="abc"[i]) for i, (m, s) in enumerate(plain.items())}
    topics = SubscribedTopicDescriber(
        [
            TopicMetadata(T1, "topic1", 6, {p: {"abc"[p % 3]} for p in range(6)}),
            TopicMetadata(T2, "topic2", 4, {p: {"a"} for p in range(4)}),
        ]
    )
    for kind in (HOMOGENEOUS, HETEROGENEOUS):
        if kind == HOMOGENEOUS:
            plain_k = {m: member(T1, T2) for m in plain}
            racked_k = {m: MemberSubscription((T1, T2), rack=s.rack) for m, s in racked.items()}
        else:
            plain_k, racked_k = plain, racked
        assert uniform.assign(spec(racked_k, kind), topics) == uniform.assign(spec(plain_k, kind), topics)


def test_server_registry_names_do_not_touch_client_names():
    assert "uniform" in available_server_assignors()
    assert isinstance(get_server_assignor("uniform"), UniformAssignor)
    assert isinstance(
        get_server_assignor("org.apache.kafka.coordinator.group.assignor.UniformAssignor"), UniformAssignor
    )
    with pytest.raises(KeyError):
        get_assignor("uniform")  # not a client-side protocol name
    with pytest.raises(KeyError):
        get_server_assignor("cooperative-sticky")


def test_subscription_by_topic_name():
    topics = SubscribedTopicDescriber([TopicMetadata(T1, "orders", 4)])
    members = {"A": MemberSubscription(topic_names=("orders",)), "B": MemberSubscription(topic_names=("orders",))}
    result = uniform.assign(GroupSpec(members, topics), topics)
    assert {p for m in result.values() for p in m[T1]} == {0, 1, 2, 3}
    assert [len(m[T1]) for m in result.values()] == [2, 2]


# ---------------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------------

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IDS = [T1, T2, T3, T4]


@st.composite
def server_groups(draw, homogeneous: bool | None = None):
    counts = {t: draw(st.integers(0, 9)) for t in IDS[: draw(st.integers(1, 4))]}
    topics = SubscribedTopicDescriber([TopicMetadata(t, NAMES[t], n) for t, n in counts.items()])
    n = draw(st.integers(1, 6))
    names = sorted(draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True)))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    every = list(counts)
    subs = {}
    for name in names:
        mine = every if homogeneous else draw(st.lists(st.sampled_from(every), min_size=1, unique=True))
        subs[name] = mine
    # a current target assignment: some valid ownership of existing partitions, possibly stale topics
    owners = {}
    for t, c in counts.items():
        for p in range(c):
            owner = draw(st.one_of(st.none(), st.sampled_from(names)))
            if owner is not None:
                owners[(t, p)] = owner
    members = {}
    for name in names:
        assignment: dict[str, list[int]] = {}
        for (t, p), o in owners.items():
            if o == name:
                assignment.setdefault(t, []).append(p)
        members[name] = MemberSubscription(tuple(subs[name]), assignment=assignment)
    return counts, topics, members


def assert_valid_complete(counts, members, result):
    seen = set()
    for m, parts in result.items():
        for t, ps in parts.items():
            assert t in members[m].topic_ids
            for p in ps:
                assert 0 <= p < counts[t] and (t, p) not in seen
                seen.add((t, p))
    subscribed = {t for s in members.values() for t in s.topic_ids}
    assert seen == {(t, p) for t in subscribed for p in range(counts[t])}


@FAST
@given(server_groups(homogeneous=True))
def test_homogeneous_is_valid_complete_balanced_sticky_and_settled(group):
    counts, topics, members = group
    gs = GroupSpec(members)
    assert gs.subscription_type == HOMOGENEOUS
    result = uniform.assign(gs, topics)
    if not any(s.topic_ids for s in members.values()):
        assert result == {}
        return
    assert_valid_complete(counts, members, result)
    check_validity_and_balance(members, result)
    total = sum(counts[t] for t in members[next(iter(members))].topic_ids)
    min_quota = total // len(members)
    for m, s in members.items():
        owned = {(t, p) for t, ps in s.assignment.items() for p in ps}
        kept = {(t, p) for t, ps in result[m].items() for p in ps} & owned
        assert len(kept) >= min(min_quota, len(owned))
    # the answer, fed back as the current assignment, is kept as it is
    again = {m: MemberSubscription(s.topic_ids, assignment=result[m]) for m, s in members.items()}
    assert uniform.assign(GroupSpec(again), topics) == result


@st.composite
def bucketed_groups(draw):
    """Kafka's benchmark shape for heterogeneous groups: members in buckets, each bucket on its own topics."""
    counts, topics, members = draw(server_groups(homogeneous=False))
    ids = list(counts)
    buckets = draw(st.integers(1, min(len(ids), len(members))))
    names = list(members)
    out = {}
    for i, name in enumerate(names):
        bucket = i % buckets
        mine = tuple(t for j, t in enumerate(ids) if j % buckets == bucket)
        out[name] = MemberSubscription(mine, assignment=members[name].assignment)
    return counts, topics, out


@FAST
@given(server_groups(homogeneous=False))
def test_heterogeneous_is_valid_and_complete(group):
    counts, topics, members = group
    result = uniform.assign(GroupSpec(members, subscription_type=HETEROGENEOUS), topics)
    assert_valid_complete(counts, members, result)
    assert set(result) == set(members) or not any(s.topic_ids for s in members.values())


@FAST
@given(bucketed_groups())
def test_heterogeneous_buckets_are_balanced_within_each_bucket(group):
    counts, topics, members = group
    result = uniform.assign(GroupSpec(members, subscription_type=HETEROGENEOUS), topics)
    assert_valid_complete(counts, members, result)
    by_bucket: dict[tuple, list[int]] = {}
    for m, s in members.items():
        by_bucket.setdefault(s.topic_ids, []).append(sum(len(ps) for ps in result[m].values()))
    for sizes in by_bucket.values():
        assert max(sizes) - min(sizes) <= 1
    # balanced buckets: the answer, fed back as the current assignment, is kept as it is
    again = {m: MemberSubscription(s.topic_ids, assignment=result[m]) for m, s in members.items()}
    assert uniform.assign(GroupSpec(again, subscription_type=HETEROGENEOUS), topics) == result
