"""Coordinator settings under Kafka's own names and defaults (broker config, plus two tracker-only switches)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT_MAX
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: how long a brand-new member may wait in a join round.
    new_member_join_timeout_ms: int = 300_000
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4_096
    # Tracker only. "tracker": when the leader's SyncGroup carries no assignment, compute it with the chosen
    # protocol's assignor, acting for the leader. "leader": like the broker, store exactly what the leader sent.
    assignment_mode: str = "tracker"
    # Tracker only. When observing a real cluster the broker has already issued member ids, so a JoinGroup with an
    # id we never saw is adopted instead of answered with UNKNOWN_MEMBER_ID.
    adopt_unknown_members: bool = False
    # Tracker only. Off when the feed cannot see heartbeats (the __consumer_offsets cluster feed): membership then
    # changes only when the broker's own records say so.
    expire_members: bool = True

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def records_only(self) -> bool:
        """Following a cluster from its ``__consumer_offsets`` records (the cluster feed's settings): a round shows
        only when it completes, so when it began and when owners were told to give partitions up are unknown."""
        return self.adopt_unknown_members and not self.expire_members

    def __post_init__(self) -> None:
        if self.assignment_mode not in ("tracker", "leader"):
            raise ValueError(f"assignment mode must be 'tracker' or 'leader', not {self.assignment_mode!r}")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")

    @classmethod
    def from_properties(cls, props: Mapping[str, object] | None) -> "CoordinatorConfig":
        """Build from Kafka-style keys (``group.max.size``) or field names; unknown keys are an error, not ignored."""
        by_property = {_property_name(f.name): f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, raw in (props or {}).items():
            f = by_property.get(key) or next((g for g in fields(cls) if g.name == key), None)
            if f is None:
                known = ", ".join(sorted(by_property))
                raise ValueError(f"unknown coordinator setting {key!r}; known: {known}")
            values[f.name] = _coerce(raw, f.type, key)
        return cls(**values)

    def to_properties(self) -> dict[str, object]:
        return {_property_name(f.name): getattr(self, f.name) for f in fields(self)}


def _property_name(field_name: str) -> str:
    special = {
        "new_member_join_timeout_ms": "group.new.member.join.timeout.ms",
        "assignment_mode": "tracker.assignment.mode",
        "adopt_unknown_members": "tracker.adopt.unknown.members",
        "expire_members": "tracker.expire.members",
    }
    return special.get(field_name, field_name.replace("_", "."))


def _coerce(raw: object, type_name: object, key: str) -> object:
    text = str(raw).strip()
    if type_name in (bool, "bool"):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"{key} must be true or false, not {raw!r}")
    if type_name in (int, "int"):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{key} must be an integer, not {raw!r}") from None
    return text
