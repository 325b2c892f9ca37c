"""Resource bounds (issue #13): a group of 10k members and a member owning 10k partitions go through the pure model
and the job's per-group step with its state encoding (``step_group``: the bytes Spark keeps as the group's state),
without a crash and in bounded time. Memory per group and per member is measured by
``python benchmarks/resource_bounds.py`` (docs/recovery.md)."""

from __future__ import annotations

import time

from streaming.coordinator import CoordinatorConfig, GroupCoordinator
from streaming.spark.group_step import step_group
from tests.core.big_groups import commit_all, new_coordinator, stable_group


def heartbeat(group: str, member_id: str, generation: int, now: int) -> dict:
    return {
        "type": "heartbeat",
        "group_id": group,
        "member_id": member_id,
        "group_instance_id": None,
        "generation": generation,
        "ts": now,
    }


def round_trip(coordinator: GroupCoordinator, group: str, events: list[dict], now: int) -> GroupCoordinator:
    """One micro-batch of the job for ``group``: its state bytes in, the events and the timers, its state out."""
    result = step_group(coordinator.to_bytes(), events, now, CoordinatorConfig())
    assert result.state is not None
    return GroupCoordinator.from_bytes(result.state, CoordinatorConfig())


def test_a_group_of_10k_members():
    coordinator = new_coordinator()
    started = time.monotonic()
    ids, now = stable_group(coordinator, "big", 10_000, 20_000)
    took = time.monotonic() - started
    # ~5-10 s here; it took ~6 min while retention recomputed the subscribed topics over every member per request.
    assert took < 120, f"10k members took {took:.0f} s to reach Stable"
    g = coordinator.groups["big"]
    assert len(g.members) == 10_000 and all(len(m.assignment) == 2 for m in g.members.values())

    # Requests on the Stable group stay cheap: a commit from each of 1000 members.
    started = time.monotonic()
    for member_id in ids[:1000]:
        commit_all(coordinator, "big", member_id, now + 1)
    took = time.monotonic() - started
    assert took < 30, f"1000 commits on a 10k-member group took {took:.1f} s"

    # Through the job's step and state encoding: a heartbeat, the state bytes out and back.
    restored = round_trip(coordinator, "big", [heartbeat("big", ids[0], g.generation, now + 2)], now + 2)
    r = restored.groups["big"]
    assert (r.state, r.generation, r.leader_id) == (g.state, g.generation, g.leader_id)
    assert {m: sorted(x.assignment) for m, x in r.members.items()} == {
        m: sorted(x.assignment) for m, x in g.members.items()
    }
    assert len(r.offsets) == 2_000
    # Every member's session runs: the timer fires for each as the job would fire it.
    session = r.members[ids[-1]].session_deadline
    expired = [o for o in restored.advance(session + 60_000) if o["type"] == "member_expired"]
    assert len(expired) == 10_000


def test_a_member_with_10k_partitions():
    coordinator = new_coordinator()
    (member,), now = stable_group(coordinator, "wide", 1, 10_000)
    assert len(coordinator.groups["wide"].members[member].assignment) == 10_000
    commits = [o for o in commit_all(coordinator, "wide", member, now + 1) if o["type"] == "offset_commit"]
    assert len(commits) == 10_000

    restored = round_trip(coordinator, "wide", [heartbeat("wide", member, 1, now + 2)], now + 2)
    g = restored.groups["wide"]
    assert len(g.members[member].assignment) == 10_000 and len(g.offsets) == 10_000
    # The member goes away: the group empties and keeps its 10k offsets, in the job's encoding again.
    out = restored.advance(g.members[member].session_deadline)
    assert [o["type"] for o in out if o["type"] == "member_expired"] == ["member_expired"]
    again = round_trip(restored, "wide", [], g.state_timestamp + 1)
    assert again.groups["wide"].state.value == "Empty" and len(again.groups["wide"].offsets) == 10_000
