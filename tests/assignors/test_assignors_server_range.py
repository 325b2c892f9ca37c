"""Server-side RangeAssignor (KIP-848): expectations ported from Kafka's group-coordinator RangeAssignorTest, plus
properties (co-partitioning, static members keep their ranges, the client-side ``range`` name is untouched).

Kafka's RangeAssignorTest uses random topic Uuids: range assigns each topic on its own, so ids do not matter.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors import get_assignor
from assignors.range import RangeAssignor as ClientRangeAssignor
from assignors.server import (
    HETEROGENEOUS,
    HOMOGENEOUS,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    RangeAssignor,
    SubscribedTopicDescriber,
    TopicMetadata,
    get_server_assignor,
)

T1, T2, T3 = "topic1-id", "topic2-id", "topic3-id"
range_assignor = RangeAssignor()


def describer(**counts: int) -> SubscribedTopicDescriber:
    ids = {"T1": T1, "T2": T2, "T3": T3}
    return SubscribedTopicDescriber([TopicMetadata(ids[k], k.lower(), n) for k, n in counts.items()])


def member(*topics: str, assignment=None, instance_id=None) -> MemberSubscription:
    return MemberSubscription(tuple(topics), instance_id=instance_id, assignment=assignment or {})


def assign(members: dict[str, MemberSubscription], topics: SubscribedTopicDescriber, kind: str | None = None):
    spec = GroupSpec(dict(sorted(members.items())), subscription_type=kind)
    if kind is not None:
        assert spec.subscription_type == GroupSpec(members).subscription_type  # Kafka's tests pass the real type
    return range_assignor.assign(spec, topics)


def test_one_member_no_topic():
    assert assign({"A": member()}, describer(T1=3), HOMOGENEOUS) == {"A": {}}


def test_one_member_subscribed_to_non_existent_topic():
    with pytest.raises(PartitionAssignorError):
        assign({"A": member(T2)}, describer(T1=3), HOMOGENEOUS)


def test_first_assignment_two_members_two_topics_same_subscriptions():
    members = {"A": member(T1, T3), "B": member(T1, T3)}
    assert assign(members, describer(T1=3, T3=2), HOMOGENEOUS) == {"A": {T1: {0, 1}, T3: {0}}, "B": {T1: {2}, T3: {1}}}


def test_first_assignment_three_members_three_topics_different_subscriptions():
    members = {"A": member(T1, T2), "B": member(T3), "C": member(T2, T3)}
    assert assign(members, describer(T1=3, T2=3, T3=2), HETEROGENEOUS) == {
        "A": {T1: {0, 1, 2}, T2: {0, 1}},
        "B": {T3: {0}},
        "C": {T2: {2}, T3: {1}},
    }


def test_first_assignment_num_members_greater_than_num_partitions():
    members = {"A": member(T1, T3), "B": member(T1, T3), "C": member(T1, T3)}
    assert assign(members, describer(T1=3, T3=2), HOMOGENEOUS) == {
        "A": {T1: {0}, T3: {0}},
        "B": {T1: {1}, T3: {1}},
        "C": {T1: {2}},
    }


def test_static_membership():
    topics = describer(T1=3)
    members = {"A": member(T1, instance_id="instanceA"), "B": member(T1, instance_id="instanceB")}
    initial = assign(members, topics, HOMOGENEOUS)
    # static member A comes back under a new member id: same instance id, same partitions
    del members["A"]
    members["memberA1"] = member(T1, instance_id="instanceA")
    again = assign(members, topics, HOMOGENEOUS)
    assert again["memberA1"] == initial["A"] and again["B"] == initial["B"]


def test_mixed_static_membership():
    topics = describer(T1=5)
    members = {"A": member(T1, instance_id="instanceA"), "C": member(T1, instance_id="instanceC"), "B": member(T1)}
    initial = assign(members, topics, HOMOGENEOUS)
    del members["A"]
    members["memberA1"] = member(T1, instance_id="instanceA")
    again = assign(members, topics, HOMOGENEOUS)
    assert again["memberA1"] == initial["A"] and again["B"] == initial["B"] and again["C"] == initial["C"]
    # static members first (by instance id), then the dynamic one
    assert initial == {"A": {T1: {0, 1}}, "C": {T1: {2, 3}}, "B": {T1: {4}}}


def test_reassignment_num_members_greater_than_num_partitions_when_one_member_added():
    members = {
        "A": member(T1, T2, assignment={T1: {0}, T2: {0}}),
        "B": member(T1, T2, assignment={T1: {1}, T2: {1}}),
        "C": member(T1, T2),
    }
    assert assign(members, describer(T1=2, T2=2), HOMOGENEOUS) == {
        "A": {T1: {0}, T2: {0}},
        "B": {T1: {1}, T2: {1}},
        "C": {},
    }


def test_reassignment_when_one_partition_added_for_two_members_two_topics():
    members = {
        "A": member(T1, T2, assignment={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, assignment={T1: {2}, T2: {2}}),
    }
    assert assign(members, describer(T1=4, T2=4), HOMOGENEOUS) == {
        "A": {T1: {0, 1}, T2: {0, 1}},
        "B": {T1: {2, 3}, T2: {2, 3}},
    }


def test_reassignment_when_one_member_added_after_initial_assignment_with_two_members_two_topics():
    members = {
        "A": member(T1, T2, assignment={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, assignment={T1: {2}, T2: {2}}),
        "C": member(T1, T2),
    }
    assert assign(members, describer(T1=3, T2=3), HOMOGENEOUS) == {
        "A": {T1: {0}, T2: {0}},
        "B": {T1: {1}, T2: {1}},
        "C": {T1: {2}, T2: {2}},
    }


def test_reassignment_when_one_member_added_and_one_partition_after_initial_assignment():
    members = {
        "A": member(T1, T2, assignment={T1: {0, 1}, T2: {0, 1}}),
        "B": member(T1, T2, assignment={T1: {2}, T2: {2}}),
        "C": member(T1),
    }
    assert assign(members, describer(T1=4, T2=3), HETEROGENEOUS) == {
        "A": {T1: {0, 1}, T2: {0, 1}},
        "B": {T1: {2}, T2: {2}},
        "C": {T1: {3}},
    }


def test_reassignment_when_one_member_removed_after_initial_assignment_with_two_members_two_topics():
    members = {"B": member(T1, T2, assignment={T1: {2}, T2: {2}})}
    assert assign(members, describer(T1=3, T2=3), HOMOGENEOUS) == {"B": {T1: {0, 1, 2}, T2: {0, 1, 2}}}


def test_reassignment_when_multiple_subscriptions_removed_after_initial_assignment_with_three_members():
    members = {
        "A": member(T1, assignment={T1: {0, 1, 2}, T2: {0}}),
        "B": member(T1, T2, T3, assignment={T2: {1}}),
        "C": member(T2, assignment={T2: {2}, T3: {0, 1}}),
    }
    assert assign(members, describer(T1=3, T2=3, T3=2), HETEROGENEOUS) == {
        "A": {T1: {0, 1}},
        "B": {T1: {2}, T2: {0, 1}, T3: {0, 1}},
        "C": {T2: {2}},
    }


def test_empty_group_and_registry_names():
    assert range_assignor.assign(GroupSpec({}), describer(T1=1)) == {}
    assert isinstance(get_server_assignor("range"), RangeAssignor)
    assert isinstance(get_server_assignor("org.apache.kafka.coordinator.group.assignor.RangeAssignor"), RangeAssignor)
    # the client-side name keeps meaning the client-side assignor
    assert isinstance(get_assignor("range"), ClientRangeAssignor)


# ---- properties ------------------------------------------------------------------------------------------------

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def range_groups(draw):
    ids = [T1, T2, T3][: draw(st.integers(1, 3))]
    counts = {t: draw(st.integers(0, 9)) for t in ids}
    topics = SubscribedTopicDescriber([TopicMetadata(t, t.split("-")[0], n) for t, n in counts.items()])
    n = draw(st.integers(1, 6))
    names = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    homogeneous = draw(st.booleans())
    members = {}
    for name in names:
        mine = ids if homogeneous else draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
        instance = draw(st.one_of(st.none(), st.sampled_from(["i0", "i1", "i2", "i3", "i4", "i5"])))
        if instance in {m.instance_id for m in members.values()}:
            instance = None
        members[name] = MemberSubscription(tuple(mine), instance_id=instance)
    return counts, topics, members


@FAST
@given(range_groups())
def test_range_is_valid_complete_ranged_and_co_partitioned(group):
    counts, topics, members = group
    spec = GroupSpec(members)
    result = range_assignor.assign(spec, topics)
    assert set(result) == set(members)
    seen = set()
    for m, parts in result.items():
        for t, ps in parts.items():
            assert t in members[m].topic_ids
            assert sorted(ps) == list(range(min(ps), max(ps) + 1)), "a range is contiguous"
            assert not seen & {(t, p) for p in ps}
            seen |= {(t, p) for p in ps}
    subscribed = {t for s in members.values() for t in s.topic_ids}
    assert seen == {(t, p) for t in subscribed for p in range(counts[t])}
    for t in subscribed:
        sizes = [len(result[m].get(t, ())) for m, s in members.items() if t in s.topic_ids]
        assert max(sizes) - min(sizes) <= 1
    if spec.subscription_type == HOMOGENEOUS and len({counts[t] for t in subscribed}) == 1:
        # co-partitioning: partition p of every topic goes to the same member
        for parts in result.values():
            assert len({frozenset(ps) for ps in parts.values()}) <= 1


@FAST
@given(range_groups(), st.data())
def test_range_static_members_keep_their_ranges_under_new_member_ids(group, data):
    counts, topics, members = group
    before = range_assignor.assign(GroupSpec(members), topics)
    renamed = {(f"new-{m}" if s.instance_id else m): s for m, s in members.items()}
    shuffled = dict(data.draw(st.permutations(list(renamed.items()))))
    after = range_assignor.assign(GroupSpec(shuffled), topics)
    for m, s in members.items():
        assert after[f"new-{m}" if s.instance_id else m] == before[m]
    # racks and the current assignment do not change the answer
    racked = {
        m: MemberSubscription(s.topic_ids, rack="r", instance_id=s.instance_id, assignment=before[m])
        for m, s in members.items()
    }
    assert range_assignor.assign(GroupSpec(racked), topics) == before
