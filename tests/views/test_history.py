"""Rebalance history folded from real coordinator outputs (the coordinator driven by scripted clients)."""

from __future__ import annotations

from streaming.views.history import HistoryBuilder, OwnershipChange, build_histories, build_history, ownership_changes
from tests.coordinator_harness import Harness, one


def _crash_scenario() -> tuple[Harness, str, str, str]:
    """Three members share t0..t5; c dies silently; a and b take over its partitions."""
    h = Harness()
    a, b, c = (h.new_member(client_id=n) for n in "abc")
    h.tick(0)
    first = {a: [["t", 0], ["t", 1]], b: [["t", 2], ["t", 3]], c: [["t", 4], ["t", 5]]}
    h.sync(a, 1, assignments=first)
    h.sync(b, 1)
    h.sync(c, 1)
    for _ in range(4):  # a and b heartbeat, c has crashed
        h.tick(3_000)
        h.heartbeat(a, 1)
        h.heartbeat(b, 1)
    assert h.state() == "PreparingRebalance"
    h.join(member_id=a, client_id="a")
    h.join(member_id=b, client_id="b")
    h.sync(a, 2, assignments={a: [["t", 0], ["t", 1], ["t", 4]], b: [["t", 2], ["t", 3], ["t", 5]]})
    h.sync(b, 2)
    return h, a, b, c


def test_generations_members_and_expiry_of_a_crash():
    h, a, b, c = _crash_scenario()
    history = build_history(h.outputs, "g")
    assert [g.generation for g in history.generations] == [1, 2]
    first, second = history.generations
    assert first.trigger == "join" and second.trigger == "expiry"
    assert first.members == [a, b, c] and second.members == [a, b]
    assert first.owners[c] == [("t", 4), ("t", 5)]
    assert second.owners == {a: [("t", 0), ("t", 1), ("t", 4)], b: [("t", 2), ("t", 3), ("t", 5)]}
    # Only c's partitions changed hands, and the history agrees with the coordinator's own count.
    assert second.changes == [OwnershipChange(("t", 4), c, a), OwnershipChange(("t", 5), c, b)]
    assert second.partitions_moved == len(second.changes) == 2
    assert first.balance == 0 and second.balance == 0
    # The expiry is recorded with the last heartbeat, and c's lane ends there.
    (departure,) = history.departures
    assert departure.member_id == c and departure.kind == "expired" and departure.reason == "session timeout"
    rebalance = one([o for o in h.outputs if o["type"] == "rebalance"][-1:], "rebalance")
    assert departure.ts == rebalance["started_ts"] and departure.last_heartbeat_ts < departure.ts
    assert history.lanes[c].spans == [[first.started_ts, departure.ts]]
    assert history.lanes[a].spans[0][1] is None
    assert history.state == "Stable" and history.rebalance_in_progress_since is None


def test_state_spans_tile_the_history():
    h, *_ = _crash_scenario()
    history = build_history(h.outputs, "g")
    states = [s.state for s in history.states]
    assert states == [
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
    ]
    for before, after in zip(history.states, history.states[1:]):
        assert before.end_ts == after.start_ts
    assert history.states[-1].end_ts is None


def test_leave_is_a_departure_of_its_own_kind_and_an_open_rebalance_is_reported():
    h = Harness()
    a, b = (h.new_member(client_id=n) for n in "ab")
    h.tick(0)
    h.sync(a, 1, assignments={a: [["t", 0]], b: [["t", 1]]})
    h.tick(500)
    h.send(type="leave", member_id=b, group_instance_id=None, reason="closing")
    history = build_history(h.outputs, "g")
    assert [(d.member_id, d.kind) for d in history.departures] == [(b, "left")]
    assert history.state == "PreparingRebalance"
    assert history.rebalance_in_progress_since == h.now


def test_static_member_keeps_its_lane_across_restarts():
    h = Harness()
    first = h.join(instance_id="pod-0", client_id="a")
    a = one(first, "member_joined")["member_id"]
    h.tick(0)
    h.sync(a, 1, assignments={a: [["t", 0], ["t", 1]]}, instance_id="pod-0")
    h.tick(1_000)
    again = h.join(instance_id="pod-0", client_id="a")  # restarted: new member id, same instance
    new_id = one(again, "member_replaced")["member_id"]
    assert new_id != a
    history = build_history(h.outputs, "g")
    assert list(history.lanes) == ["pod-0"]
    assert history.lanes["pod-0"].member_ids == [a, new_id] and history.lanes["pod-0"].static
    assert history.replacements == [(h.now, "pod-0", a, new_id)]
    assert history.generations[0].owners == {"pod-0": [("t", 0), ("t", 1)]}


def test_since_keeps_only_later_generations_and_departures():
    h, a, b, c = _crash_scenario()
    history = build_history(h.outputs, "g")
    cut = history.generations[1].started_ts
    later = history.since(cut)
    assert [g.generation for g in later.generations] == [2]
    assert len(later.departures) == 1
    assert all(s.start_ts >= cut for s in later.states)
    assert c in later.lanes  # still present at the cut (it expires exactly then)
    assert history.since(h.now + 1).generations == []


def test_histories_are_kept_per_group_and_deterministic():
    h1, *_ = _crash_scenario()
    h2 = Harness(group_id="other")
    h2.stable_group(2)
    outputs = h1.outputs + h2.outputs
    histories = build_histories(outputs)
    assert set(histories) == {"g", "other"}
    assert len(histories["other"].generations) == 1
    assert build_histories(outputs) == histories
    incremental = HistoryBuilder()
    for o in outputs:
        incremental.add(o)
    assert incremental.groups == histories


def test_ownership_changes_show_revocations_and_new_partitions():
    before = {"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}
    after = {"a": [("t", 0)], "b": [("t", 2), ("t", 3)]}
    assert ownership_changes(before, after) == [
        OwnershipChange(("t", 1), "a", None),
        OwnershipChange(("t", 3), None, "b"),
    ]
