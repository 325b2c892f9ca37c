"""Hypothesis properties of every assignor: valid, complete, balanced where possible, sticky, and cooperative
rounds that never revoke and assign the same partition at once.  With racks (KIP-881) for Sticky and
CooperativeSticky: the same, racks that cannot matter change nothing, and on the constrained path a partition leaves
its replicas' racks only when every member on those racks is full with partitions of its own rack."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors import Subscription, TopicPartition, get_assignor

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw, uniform: bool | None = None):
    topics = {t: draw(st.integers(0, 7)) for t in TOPICS[: draw(st.integers(1, 4))]}
    n = draw(st.integers(1, 6))
    names = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    all_topics = list(topics)
    if uniform is None:
        uniform = draw(st.booleans())
    subs = {}
    for name in names:
        mine = all_topics if uniform else draw(st.lists(st.sampled_from(all_topics), min_size=1, unique=True))
        static = draw(st.one_of(st.none(), st.sampled_from(["i0", "i1", "i2", "i3", "i4", "i5"])))
        # group.instance.ids are unique within a group
        if static in {s.group_instance_id for s in subs.values()}:
            static = None
        subs[name] = Subscription(mine, group_instance_id=static)
    return topics, subs


def all_partitions(topics, subs):
    subscribed = {t for s in subs.values() for t in s.topics}
    return {TopicPartition(t, p) for t in subscribed if t in topics for p in range(topics[t])}


def assert_valid(topics, subs, result, complete=True):
    assert set(result) == set(subs)
    seen = set()
    for member, parts in result.items():
        assert parts == sorted(parts)
        for p in parts:
            assert p.topic in subs[member].topics, "unsubscribed partition"
            assert 0 <= p.partition < topics.get(p.topic, 0), "partition does not exist"
            assert p not in seen, "partition assigned twice"
            seen.add(p)
    if complete:
        assert seen == all_partitions(topics, subs)


def assert_balanced(subs, result):
    """No partition could move from a member with 2+ more partitions to another member subscribed to it."""
    for a, pa in result.items():
        for b, pb in result.items():
            if len(pa) > len(pb) + 1:
                assert not any(p.topic in subs[b].topics for p in pa), (a, b, result)


def next_round(subs, result, generation, drop=(), add=()):
    """Members report what they got; some leave, new ones join with nothing owned."""
    nxt = {
        m: Subscription(s.topics, result[m], generation, s.group_instance_id) for m, s in subs.items() if m not in drop
    }
    for name, topics in add:
        nxt[name] = Subscription(topics)
    return nxt


NAMES = ["range", "roundrobin", "sticky", "cooperative-sticky", "priority-failover", "template"]


@FAST
@given(groups(), st.sampled_from(NAMES))
def test_every_assignor_is_valid_and_complete(group, name):
    topics, subs = group
    assert_valid(topics, subs, get_assignor(name).assign(topics, subs))


@FAST
@given(groups())
def test_range_and_roundrobin_ignore_dict_order(group):
    topics, subs = group
    reordered = dict(reversed(list(subs.items())))
    for name in ("range", "roundrobin"):
        a = get_assignor(name)
        assert a.assign(topics, subs) == a.assign(topics, reordered)


@FAST
@given(groups(uniform=True))
def test_uniform_subscriptions_are_fully_balanced(group):
    topics, subs = group
    for name in ("roundrobin", "sticky", "cooperative-sticky"):
        sizes = [len(v) for v in get_assignor(name).assign(topics, subs).values()]
        assert max(sizes) - min(sizes) <= 1


@FAST
@given(groups(uniform=False))
def test_sticky_is_balanced_where_subscriptions_allow(group):
    topics, subs = group
    result = get_assignor("sticky").assign(topics, subs)
    assert_valid(topics, subs, result)
    assert_balanced(subs, result)


@FAST
@given(groups(), st.data())
def test_sticky_second_round_is_valid_balanced_and_sticky(group, data):
    topics, subs = group
    a = get_assignor("sticky")
    r1 = a.assign(topics, subs)
    drop = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    add = [("new-member", list(topics))] if data.draw(st.booleans()) else []
    subs2 = next_round(subs, r1, 5, drop=drop, add=add)
    r2 = a.assign(topics, subs2)
    assert_valid(topics, subs2, r2)
    assert_balanced(subs2, r2)
    uniform = len({frozenset(s.topics) for s in subs2.values()}) == 1
    if uniform:
        # constrained path: a survivor keeps its partitions up to the minimum quota
        total = len(all_partitions(topics, subs2))
        quota = total // len(subs2)
        for m in subs2:
            kept = set(r2[m]) & set(subs2[m].owned_partitions)
            assert len(kept) >= min(quota, len(subs2[m].owned_partitions))
    # partitions of departed members need a home; nobody else's partitions should move if balance allows
    if not add and uniform:
        orphaned = {p for m in drop for p in r1[m]}
        moved = {p for m in subs2 for p in r2[m] if p not in subs2[m].owned_partitions}
        sizes_before = [len(r1[m]) for m in subs2]
        if max(sizes_before, default=0) <= len(all_partitions(topics, subs2)) // len(subs2):
            assert moved <= orphaned


@FAST
@given(groups(), st.data())
def test_cooperative_rounds_never_revoke_and_assign_at_once(group, data):
    topics, subs = group
    a = get_assignor("cooperative-sticky")
    r1 = a.assign(topics, subs)
    assert_valid(topics, subs, r1)  # nobody owns anything yet, so round one is complete
    drop = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    add = [(f"new{i}", list(topics)) for i in range(data.draw(st.integers(0, 2)))]
    subs2 = next_round(subs, r1, 2, drop=drop, add=add)
    r2 = a.assign(topics, subs2)
    assert_valid(topics, subs2, r2, complete=False)
    owner = {p: m for m, s in subs2.items() for p in s.owned_partitions}
    for member, parts in r2.items():
        for p in parts:
            assert owner.get(p, member) == member, f"{p} given to {member} while {owner.get(p)} still owns it"
    # members revoke what they lost and rejoin: the follow-up round completes the assignment
    subs3 = next_round(subs2, r2, 3)
    r3 = a.assign(topics, subs3)
    assert_valid(topics, subs3, r3)
    owner = {p: m for m, s in subs3.items() for p in s.owned_partitions}
    for member, parts in r3.items():
        assert all(owner.get(p, member) == member for p in parts)


@FAST
@given(groups(uniform=True), st.data())
def test_cooperative_equals_sticky_minus_transfers(group, data):
    topics, subs = group
    r1 = get_assignor("sticky").assign(topics, subs)
    drop = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    subs2 = next_round(subs, r1, 1, drop=drop, add=[("joiner", list(topics))])
    eager = get_assignor("sticky").assign(topics, subs2)
    coop = get_assignor("cooperative-sticky").assign(topics, subs2)
    for m in subs2:
        assert set(coop[m]) <= set(eager[m])
        held_back = set(eager[m]) - set(coop[m])
        owned_elsewhere = {p for o, s in subs2.items() if o != m for p in s.owned_partitions}
        assert held_back <= owned_elsewhere


# ---- racks (KIP-881): Sticky and CooperativeSticky -------------------------------------------------------------

RACKS = ["a", "b", "c", "d"]


@st.composite
def rack_groups(draw, uniform: bool | None = None):
    """A group as ``groups`` draws it, plus a rack (or none) per member and replica racks per partition."""
    topics, subs = draw(groups(uniform))
    member_racks = st.one_of(st.none(), st.sampled_from(RACKS[:3]))
    subs = {
        m: Subscription(s.topics, group_instance_id=s.group_instance_id, rack=draw(member_racks))
        for m, s in subs.items()
    }
    replicas = st.frozensets(st.sampled_from(RACKS), max_size=3)
    partition_racks = {TopicPartition(t, p): draw(replicas) for t, n in topics.items() for p in range(n)}
    return topics, subs, partition_racks


def off_rack(subs, partition_racks, result):
    """Partitions given to a member with a rack where none of their replicas live (Kafka's mismatch count)."""
    return {
        p
        for m, parts in result.items()
        if subs[m].rack
        for p in parts
        if subs[m].rack not in partition_racks.get(p, ())
    }


def assert_rack_rule(subs, partition_racks, result):
    """The constrained path's rack rule: a partition lands away from its replicas' racks (or on a member without
    a rack that did not own it) only when every member on one of those racks is already full with partitions of
    its own rack.

    Kafka deals unassigned partitions to members on a matching rack first and only then fills up without racks;
    a member that was full when the partition came up never gets another one.
    """
    owner = {p: m for m, parts in result.items() for p in parts}
    for p, m in owner.items():
        replicas = partition_racks.get(p, frozenset())
        if subs[m].rack in replicas or p in subs[m].owned_partitions:
            continue  # on its rack, or kept by its owner (a member without a rack keeps what it owns)
        for other, parts in result.items():
            rack = subs[other].rack
            if rack in replicas:
                stray = [q for q in parts if rack not in partition_racks.get(q, ())]
                assert not stray, f"{p} left its racks while {other} on {rack} holds off-rack {stray}"


def _racks_enabled(topics, subs, partition_racks):
    from assignors._sticky_core import RackInfo

    subscribed = {t for s in subs.values() for t in s.topics}
    live = {t: n for t, n in topics.items() if t in subscribed and n > 0}
    return RackInfo(live, subs, partition_racks).enabled


@FAST
@given(rack_groups(), st.sampled_from(["sticky", "cooperative-sticky"]))
def test_rack_aware_sticky_is_valid_complete_and_balanced(group, name):
    topics, subs, partition_racks = group
    result = get_assignor(name).assign(topics, subs, partition_racks)
    assert_valid(topics, subs, result)
    assert_balanced(subs, result)
    if len({frozenset(s.topics) for s in subs.values()}) == 1:
        sizes = [len(v) for v in result.values()]
        assert max(sizes) - min(sizes) <= 1


@FAST
@given(rack_groups())
def test_racks_that_cannot_matter_change_nothing(group):
    topics, subs, partition_racks = group
    # every partition on every rack: Kafka skips the rack-aware path, so the answer is the rack-unaware one
    everywhere = {p: frozenset(RACKS) for p in partition_racks}
    plain = {m: Subscription(s.topics, group_instance_id=s.group_instance_id) for m, s in subs.items()}
    for name in ("sticky", "cooperative-sticky"):
        a = get_assignor(name)
        expected = a.assign(topics, plain)
        assert a.assign(topics, subs, everywhere) == expected
        assert a.assign(topics, subs) == expected
        if not _racks_enabled(topics, subs, partition_racks):
            assert a.assign(topics, subs, partition_racks) == expected


@FAST
@given(rack_groups(uniform=True), st.data())
def test_constrained_path_never_leaves_a_rack_it_could_stay_on(group, data):
    topics, subs, partition_racks = group
    sticky = get_assignor("sticky")
    r1 = sticky.assign(topics, subs, partition_racks)
    if _racks_enabled(topics, subs, partition_racks):
        assert_rack_rule(subs, partition_racks, r1)
    else:
        assert r1 == sticky.assign(topics, subs)
    # second round: survivors own what they got; the rule still holds and in-rack partitions stay put
    drop = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    subs2 = {
        m: Subscription(s.topics, r1[m], 4, s.group_instance_id, rack=s.rack) for m, s in subs.items() if m not in drop
    }
    if data.draw(st.booleans()):
        subs2["joiner"] = Subscription(list(topics), rack=data.draw(st.sampled_from(RACKS[:3])))
    r2 = sticky.assign(topics, subs2, partition_racks)
    assert_valid(topics, subs2, r2)
    sizes = [len(v) for v in r2.values()]
    assert max(sizes) - min(sizes) <= 1
    if _racks_enabled(topics, subs2, partition_racks):
        assert_rack_rule(subs2, partition_racks, r2)
        quota = len(all_partitions(topics, subs2)) // len(subs2)
        for m, s in subs2.items():
            keepable = {p for p in s.owned_partitions if s.rack is None or s.rack in partition_racks.get(p, ())}
            assert len(set(r2[m]) & keepable) >= min(quota, len(keepable))


@FAST
@given(rack_groups(), st.data())
def test_rack_aware_cooperative_rounds_never_revoke_and_assign_at_once(group, data):
    topics, subs, partition_racks = group
    a = get_assignor("cooperative-sticky")
    r1 = a.assign(topics, subs, partition_racks)
    assert_valid(topics, subs, r1)
    drop = data.draw(st.sets(st.sampled_from(sorted(subs)), max_size=len(subs) - 1))
    subs2 = {
        m: Subscription(s.topics, r1[m], 2, s.group_instance_id, rack=s.rack) for m, s in subs.items() if m not in drop
    }
    subs2["joiner"] = Subscription(list(topics), rack=data.draw(st.sampled_from(RACKS)))
    # Follow-up rounds, as a cooperative group runs them.  With racks a round that revokes nothing can be followed
    # by one that does: a member that was handed a partition off its rack releases it in the next round.  A round
    # that revokes nothing holds nothing back, so it is complete.  Kafka's rounds need not settle with racks (see
    # the next test), so only what every round must keep is asserted.
    for generation in range(3, 8):
        r2 = a.assign(topics, subs2, partition_racks)
        assert_valid(topics, subs2, r2, complete=False)
        owner = {p: m for m, s in subs2.items() for p in s.owned_partitions}
        for member, parts in r2.items():
            assert all(owner.get(p, member) == member for p in parts)
        revoked = any(p not in set(r2[m]) for m, s in subs2.items() for p in s.owned_partitions)
        if not revoked:
            assert_valid(topics, subs2, r2)
            break
        subs2 = {
            m: Subscription(s.topics, r2[m], generation, s.group_instance_id, rack=s.rack) for m, s in subs2.items()
        }


def test_rack_rule_helper_catches_a_wasted_rack_slot():
    # m1 sits on rack a but holds an off-rack partition while t-0 (only on rack a) went to m2 on rack b
    subs = {"m1": Subscription(["t"], rack="a"), "m2": Subscription(["t"], rack="b")}
    pr = {TopicPartition("t", 0): frozenset("a"), TopicPartition("t", 1): frozenset("b")}
    bad = {"m1": [TopicPartition("t", 1)], "m2": [TopicPartition("t", 0)]}
    try:
        assert_rack_rule(subs, pr, bad)
    except AssertionError:
        pass
    else:
        raise AssertionError("assert_rack_rule accepted a wasted rack slot")
    assert_rack_rule(subs, pr, get_assignor("sticky").assign({"t": 2}, subs, pr))
    assert not off_rack(subs, pr, get_assignor("sticky").assign({"t": 2}, subs, pr))


def test_rack_aware_cooperative_rounds_can_oscillate_as_kafkas_do():
    # A counterexample hypothesis found (2026-11-25): b (no rack) is preferred for t1-1 and t2-0, whose replicas sit
    # on no rack, so each round hands it one and takes back the other while a (rack a, only t1) keeps one partition.
    # Kafka's CooperativeStickyAssignor (trunk, compiled from apache/kafka and run on this input) gives the same
    # rounds, so cooperative rounds with racks are not guaranteed to settle; these are Kafka's answers.
    tp = TopicPartition
    topics = {"t0": 6, "t1": 2, "t2": 2}
    subs = {
        "aa": Subscription(["t0"]),
        "c": Subscription(["t0", "t1", "t2"], rack="a"),
        "x": Subscription(["t0", "t1"], rack="c"),
        "a": Subscription(["t1"], rack="a"),
        "b": Subscription(["t0", "t1", "t2"]),
    }
    racks = {
        tp("t0", 0): frozenset(),
        tp("t0", 1): frozenset(),
        tp("t0", 2): frozenset("a"),
        tp("t0", 3): frozenset("a"),
        tp("t0", 4): frozenset("abc"),
        tp("t0", 5): frozenset("abc"),
        tp("t1", 0): frozenset("c"),
        tp("t1", 1): frozenset(),
        tp("t2", 0): frozenset(),
        tp("t2", 1): frozenset(),
    }
    a = get_assignor("cooperative-sticky")
    first = a.assign(topics, subs, racks)
    assert first == {
        "aa": [tp("t0", 0), tp("t0", 1)],
        "c": [tp("t0", 2), tp("t0", 3), tp("t2", 0)],
        "x": [tp("t0", 4), tp("t0", 5)],
        "a": [tp("t1", 0)],
        "b": [tp("t1", 1), tp("t2", 1)],
    }
    subs2 = {m: Subscription(s.topics, first[m], 2, rack=s.rack) for m, s in subs.items() if m != "c"}
    subs2["joiner"] = Subscription(list(topics), rack="a")
    settled = {
        "aa": [tp("t0", 0), tp("t0", 1)],
        "x": [tp("t0", 4), tp("t0", 5)],
        "a": [tp("t1", 0)],
        "joiner": [tp("t0", 2), tp("t0", 3)],
    }
    for generation in range(3, 9):
        result = a.assign(topics, subs2, racks)
        b = [tp("t2", 0), tp("t2", 1)] if generation % 2 else [tp("t1", 1), tp("t2", 1)]
        assert result == {**settled, "b": b}
        subs2 = {m: Subscription(s.topics, result[m], generation, rack=s.rack) for m, s in subs2.items()}
