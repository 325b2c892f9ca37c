"""Tracker mode: the coordinator computes the leader's assignment with Kafka's assignors, eager and cooperative,
and reacts to topic metadata as the leader's client would."""

from __future__ import annotations

from tests.coordinator_harness import Harness, of_type, one


def subscribe(protocol: str, *topics: str, owned=None, generation=-1) -> list[dict]:
    p = {"name": protocol, "topics": list(topics)}
    if owned is not None:
        p["owned_partitions"] = [list(tp) for tp in owned]
        p["generation"] = generation
    return [p]


def tracker(**config) -> Harness:
    h = Harness(assignment_mode="tracker", **config)
    h.send(type="topic_metadata", topic="t", partitions=3)
    return h


def complete_round(h: Harness, members: list[str]) -> list[dict]:
    h.tick(0)
    out = h.sync(h.leader(), h.generation())
    for m in members:
        if m != h.leader():
            out += h.sync(m, h.generation())
    return out


def test_range_assignment_is_computed_for_the_leader():
    h = tracker()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    out = complete_round(h, [a, b])
    first, second = sorted([a, b])
    assert one(out, "sync_response", first)["assignment"] == [["t", 0], ["t", 1]]
    assert one(out, "sync_response", second)["assignment"] == [["t", 2]]
    rebalance = one(out, "rebalance")
    assert rebalance["assignment"] == {
        a: one(out, "assignment", a)["partitions"],
        b: one(out, "assignment", b)["partitions"],
    }
    assert rebalance["rebalance_protocol"] == "eager" and rebalance["unknown_topics"] == []


def test_leader_assignment_wins_over_computation():
    h = tracker()
    a = h.new_member()
    h.tick(0)
    out = h.sync(a, 1, assignments={a: [["t", 2]]})
    assert one(out, "sync_response", a)["assignment"] == [["t", 2]]


def test_unknown_topic_then_metadata_triggers_a_rebalance():
    h = tracker()
    a = h.new_member(protocols=subscribe("range", "t", "u"))
    out = complete_round(h, [a])
    assert one(out, "rebalance")["unknown_topics"] == ["u"]
    assert one(out, "assignment")["partitions"] == [["t", 0], ["t", 1], ["t", 2]]
    h.send(type="topic_metadata", topic="u", partitions=2)
    assert h.state() == "PreparingRebalance"
    h.join(member_id=a, protocols=subscribe("range", "t", "u"))
    out = complete_round(h, [a])
    record = one(out, "rebalance")
    assert record["trigger"] == "metadata" and record["generation"] == 2
    assert ["u", 1] in one(out, "assignment")["partitions"]


def test_partition_growth_of_a_subscribed_topic_rebalances_and_others_do_not():
    h = tracker()
    (a,) = h.stable_group(1)
    h.send(type="topic_metadata", topic="other", partitions=9)
    assert h.state() == "Stable"
    h.send(type="topic_metadata", topic="t", partitions=3)
    assert h.state() == "Stable"  # no change, no rebalance
    h.send(type="topic_metadata", topic="t", partitions=5)
    assert h.state() == "PreparingRebalance"


def test_global_topic_metadata_reaches_every_group():
    h = tracker()
    h.stable_group(1)
    h.send(type="topic_metadata", group_id="", topic="t", partitions=4)
    assert h.state() == "PreparingRebalance" and h.group().topics["t"] == 4


def test_cooperative_sticky_moves_partitions_in_two_rounds():
    h = tracker()
    h.send(type="topic_metadata", topic="t", partitions=4)
    a = h.new_member(client_id="a", protocols=subscribe("cooperative-sticky", "t"))
    complete_round(h, [a])
    owned_a = [("t", p) for p in range(4)]
    assert h.group().members[a].assignment == owned_a
    # b arrives; a rejoins reporting what it owns
    b = h.new_member(client_id="b", protocols=subscribe("cooperative-sticky", "t"))
    h.join(member_id=a, protocols=subscribe("cooperative-sticky", "t", owned=owned_a, generation=1))
    h.tick(100)
    out = complete_round(h, [a, b])
    first = one(out, "rebalance")
    assert first["rebalance_protocol"] == "cooperative"
    revoked = one(out, "assignment", a)["revoked"]
    assert len(revoked) == 2 and one(out, "assignment", b)["partitions"] == []  # nothing handed out yet
    assert first["partitions_moved"] == 2
    # a gives the partitions up and rejoins; the follow-up round hands them to b
    kept = [tuple(tp) for tp in one(out, "assignment", a)["partitions"]]
    h.tick(500)
    h.join(member_id=a, protocols=subscribe("cooperative-sticky", "t", owned=kept, generation=2))
    h.join(member_id=b, protocols=subscribe("cooperative-sticky", "t", owned=[], generation=2))
    out = complete_round(h, [a, b])
    second = one(out, "rebalance")
    assert sorted(map(tuple, one(out, "assignment", b)["partitions"])) == sorted(map(tuple, revoked))
    assert one(out, "assignment", a)["revoked"] == []
    assert second["partitions_moved"] == 0 and second["max_partition_unavailable_ms"] == 500


def test_eager_sticky_keeps_partitions_where_they_were():
    h = tracker()
    h.send(type="topic_metadata", topic="t", partitions=6)
    ids = [h.new_member(client_id=c, protocols=subscribe("sticky", "t")) for c in "ab"]
    complete_round(h, ids)
    before = {m: set(h.group().members[m].assignment) for m in ids}
    c = h.new_member(client_id="c", protocols=subscribe("sticky", "t"))
    for m in ids:
        h.join(member_id=m, protocols=subscribe("sticky", "t"))  # eager clients report nothing they own
    out = complete_round(h, ids + [c])
    after = {m: set(h.group().members[m].assignment) for m in ids}
    assert all(after[m] <= before[m] for m in ids) and len(h.group().members[c].assignment) == 2
    assert one(out, "rebalance")["partitions_moved"] == 2


def test_unknown_assignor_is_reported_not_crashed():
    h = tracker()
    a = h.new_member(protocols=subscribe("my-own-assignor", "t"))
    out = complete_round(h, [a])
    assert one(out, "rebalance")["assignor_missing"] is True
    assert one(out, "sync_response")["assignment"] == []


def test_observed_delivery_overrides_the_computation():
    h = tracker()
    a = h.new_member()
    h.tick(0)
    out = h.send(type="sync", member_id=a, generation=1, assigned=[["t", 1]])
    assert h.group().members[a].assignment == [("t", 1)]
    assert of_type(out, "assignment")[-1]["observed"] is True
