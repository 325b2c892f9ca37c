"""Large groups for the resource-bound test and benchmark: a group of N members and a member owning N partitions, built
through the pure coordinator with the events a real feed would carry (KIP-394 joins, the leader's sync, commits)."""

from __future__ import annotations

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event

START = 1_000_000


def event(fields: dict) -> dict:
    e, error = parse_event(fields)
    assert e is not None, error
    return e


def join(coordinator: GroupCoordinator, group: str, member_id: str, client: str, now: int) -> list[dict]:
    return coordinator.handle(
        event(
            {
                "type": "join",
                "group_id": group,
                "member_id": member_id,
                "client_id": client,
                "ts": now,
                "protocols": [{"name": "range", "topics": ["t"]}],
            }
        )
    )


def stable_group(coordinator: GroupCoordinator, group: str, members: int, partitions: int) -> tuple[list[str], int]:
    """``members`` consumers join ``group`` (topic ``t`` with ``partitions`` partitions) at once and sync; returns the
    member ids and the time the group became Stable."""
    now = START
    coordinator.handle(
        event({"type": "topic_metadata", "group_id": group, "topic": "t", "partitions": partitions, "ts": now})
    )
    ids = []
    for i in range(members):
        answer = [o for o in join(coordinator, group, "", f"c{i}", now) if o["type"] == "join_response"][-1]
        ids.append(answer["member_id"])
    for i, member_id in enumerate(ids):
        join(coordinator, group, member_id, f"c{i}", now)
    g = coordinator.groups[group]
    while g.state.value == "PreparingRebalance":  # the initial delayed join, extended once per new member
        now = coordinator.next_deadline(group)
        coordinator.advance(now)
    for member_id in ids:
        coordinator.handle(
            event({"type": "sync", "group_id": group, "member_id": member_id, "generation": g.generation, "ts": now})
        )
    assert g.state.value == "Stable", g.state
    return ids, now


def commit_all(coordinator: GroupCoordinator, group: str, member_id: str, now: int) -> list[dict]:
    """The member commits every partition it owns."""
    g = coordinator.groups[group]
    owned = sorted(g.members[member_id].assignment)
    return coordinator.handle(
        event(
            {
                "type": "commit",
                "group_id": group,
                "member_id": member_id,
                "generation": g.generation,
                "ts": now,
                "offsets": [{"topic": t, "partition": p, "offset": 100} for t, p in owned],
            }
        )
    )


def new_coordinator() -> GroupCoordinator:
    return GroupCoordinator(CoordinatorConfig())
