"""Rebalance history of consumer groups, folded from the coordinator's output records.

Pure and deterministic: the same outputs give the same history. The report draws it, the replay scores it.

A *lane* is one consumer as an operator thinks of it: a static member keeps its lane across restarts (its
``group.instance.id`` outlives member ids), a dynamic member gets a lane per member id. Ownership is tracked per
lane, so a static restart that keeps the assignment is not counted as a move — like the coordinator's
``partitions_moved``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

Partition = tuple[str, int]

REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance")


@dataclass(frozen=True)
class OwnershipChange:
    """A partition that changed hands at a generation; ``None`` means nobody owns it (revoked / newly created)."""
    partition: Partition
    from_lane: str | None
    to_lane: str | None


@dataclass
class Generation:
    """One completed rebalance (one ``rebalance`` record) and what it changed."""
    generation: int
    trigger: str
    trigger_detail: str
    protocol: str | None
    rebalance_protocol: str
    leader: str | None
    started_ts: int
    join_completed_ts: int | None
    completed_ts: int
    duration_ms: int
    partitions_moved: int
    max_partition_unavailable_ms: int
    members: list[str]                            # lanes, in the coordinator's member order
    owners: dict[str, list[Partition]]            # lane -> partitions after this rebalance
    changes: list[OwnershipChange] = field(default_factory=list)
    unknown_topics: list[str] = field(default_factory=list)
    # Sum over the partitions handed out by this rebalance of how long each had no owner: eager revokes everything
    # when the round starts, cooperative only what it moves (and a departed member's partitions since it left).
    unavailable_partition_ms: int = 0

    @property
    def partition_count(self) -> int:
        return sum(len(p) for p in self.owners.values())

    @property
    def balance(self) -> int:
        """max − min partitions per member (0 for an empty group): 0 or 1 is as even as it gets."""
        counts = [len(p) for p in self.owners.values()]
        return max(counts) - min(counts) if counts else 0

    @property
    def revoked_unassigned(self) -> list[Partition]:
        """Partitions taken away and not yet given out (cooperative's first round)."""
        return [c.partition for c in self.changes if c.from_lane is not None and c.to_lane is None]


@dataclass
class Lane:
    key: str                                      # group.instance.id, or the member id of a dynamic member
    label: str
    static: bool
    member_ids: list[str] = field(default_factory=list)
    spans: list[list[int | None]] = field(default_factory=list)   # [start_ts, end_ts or None while present]

    def present_at(self, ts: int) -> bool:
        return any(s <= ts and (e is None or ts < e) for s, e in self.spans)


@dataclass(frozen=True)
class Departure:
    """A member that left the group: ``kind`` is ``expired`` (session / join / sync timeout) or ``left``."""
    lane: str
    member_id: str
    ts: int
    kind: str
    reason: str
    last_heartbeat_ts: int | None
    generation: int | None


@dataclass(frozen=True)
class StateSpan:
    state: str
    start_ts: int
    end_ts: int | None                            # None: still in this state at the end of the history
    generation: int | None
    reason: str


@dataclass
class GroupHistory:
    group_id: str
    generations: list[Generation] = field(default_factory=list)
    lanes: dict[str, Lane] = field(default_factory=dict)
    departures: list[Departure] = field(default_factory=list)
    states: list[StateSpan] = field(default_factory=list)
    replacements: list[tuple[int, str, str, str]] = field(default_factory=list)  # ts, lane, old id, new id
    first_ts: int | None = None
    last_ts: int | None = None

    @property
    def state(self) -> str | None:
        return self.states[-1].state if self.states else None

    @property
    def rebalance_in_progress_since(self) -> int | None:
        """Start of a rebalance that had not completed when the history ends."""
        if not self.states or self.states[-1].state not in REBALANCING_STATES:
            return None
        start = self.states[-1].start_ts
        for s in reversed(self.states):
            if s.state not in REBALANCING_STATES:
                break
            start = s.start_ts
        return start

    def since(self, ts: int) -> "GroupHistory":
        """The part of the history from ``ts`` on (a generation counts if it completed at or after ``ts``)."""
        lanes = {}
        for key, lane in self.lanes.items():
            spans = [[max(s, ts), e] for s, e in lane.spans if e is None or e >= ts]
            if spans:
                lanes[key] = replace(lane, spans=spans, member_ids=list(lane.member_ids))
        states = [replace(s, start_ts=max(s.start_ts, ts)) for s in self.states if s.end_ts is None or s.end_ts > ts]
        return GroupHistory(
            self.group_id,
            generations=[g for g in self.generations if g.completed_ts >= ts],
            lanes=lanes,
            departures=[d for d in self.departures if d.ts >= ts],
            states=states,
            replacements=[r for r in self.replacements if r[0] >= ts],
            first_ts=None if self.first_ts is None else max(self.first_ts, ts),
            last_ts=self.last_ts if self.last_ts is None or self.last_ts >= ts else ts)


class HistoryBuilder:
    """Fold output records one at a time (records of any group; unrelated record types are ignored)."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupHistory] = {}
        self._lane_of: dict[tuple[str, str], str] = {}     # (group, member id) -> lane key
        self._unowned: dict[str, dict[Partition, int]] = {}  # group -> partition -> owner-less since

    def add_all(self, outputs: Iterable[dict]) -> "HistoryBuilder":
        for o in outputs:
            self.add(o)
        return self

    def add(self, o: dict) -> None:
        group_id = o.get("group_id")
        kind = o.get("type")
        if not group_id or kind not in _HANDLERS:
            return
        h = self.groups.get(group_id)
        if h is None:
            h = self.groups[group_id] = GroupHistory(group_id)
        ts = int(o.get("ts") or 0)
        h.first_ts = ts if h.first_ts is None else min(h.first_ts, ts)
        h.last_ts = ts if h.last_ts is None else max(h.last_ts, ts)
        _HANDLERS[kind](self, h, o, ts)

    # ------------------------------------------------------------------ lanes
    def _lane(self, h: GroupHistory, member_id: str, instance_id: str | None, client_id: str | None = None) -> Lane:
        key = self._lane_of.get((h.group_id, member_id)) or instance_id or member_id
        self._lane_of[(h.group_id, member_id)] = key
        lane = h.lanes.get(key)
        if lane is None:
            label = instance_id or _short_member(member_id, client_id)
            lane = h.lanes[key] = Lane(key, label, instance_id is not None)
        if member_id not in lane.member_ids:
            lane.member_ids.append(member_id)
        return lane

    def _open(self, lane: Lane, ts: int) -> None:
        if not lane.spans or lane.spans[-1][1] is not None:
            lane.spans.append([ts, None])

    def _close(self, lane: Lane, ts: int) -> None:
        if lane.spans and lane.spans[-1][1] is None:
            lane.spans[-1][1] = ts

    # ------------------------------------------------------------------ handlers
    def _member_joined(self, h: GroupHistory, o: dict, ts: int) -> None:
        self._open(self._lane(h, o["member_id"], o.get("group_instance_id"), o.get("client_id")), ts)

    def _member_gone(self, h: GroupHistory, o: dict, ts: int) -> None:
        lane = self._lane(h, o["member_id"], o.get("group_instance_id"), o.get("client_id"))
        self._close(lane, ts)
        if h.generations:
            unowned = self._unowned.setdefault(h.group_id, {})
            for tp in h.generations[-1].owners.get(lane.key, []):
                unowned.setdefault(tp, ts)
        h.departures.append(Departure(lane.key, o["member_id"], ts,
                                      "left" if o["type"] == "member_left" else "expired",
                                      o.get("reason") or "", o.get("last_heartbeat_ts"), o.get("generation")))

    def _member_replaced(self, h: GroupHistory, o: dict, ts: int) -> None:
        old_lane = self._lane(h, o["previous_member_id"], o.get("group_instance_id"))
        self._lane_of[(h.group_id, o["member_id"])] = old_lane.key
        lane = self._lane(h, o["member_id"], o.get("group_instance_id"))
        self._open(lane, ts)
        h.replacements.append((ts, lane.key, o["previous_member_id"], o["member_id"]))

    def _state_change(self, h: GroupHistory, o: dict, ts: int) -> None:
        if h.states and h.states[-1].end_ts is None:
            h.states[-1] = replace(h.states[-1], end_ts=ts)
        h.states.append(StateSpan(o["to"], ts, None, o.get("generation"), o.get("reason") or ""))

    def _rebalance(self, h: GroupHistory, o: dict, ts: int) -> None:
        lanes = [self._lane(h, m["member_id"], m.get("group_instance_id"), m.get("client_id")).key
                 for m in o.get("members", [])]
        for key in lanes:
            self._open(h.lanes[key], o.get("started_ts", ts))
        owners: dict[str, list[Partition]] = {key: [] for key in lanes}
        for member_id, parts in (o.get("assignment") or {}).items():
            key = self._lane_of.get((h.group_id, member_id), member_id)
            owners.setdefault(key, []).extend((t, int(p)) for t, p in parts)
        owners = {k: sorted(v) for k, v in owners.items()}
        previous = h.generations[-1].owners if h.generations else {}
        changes = ownership_changes(previous, owners)
        started = o.get("started_ts", ts)
        unowned = self._unowned.setdefault(h.group_id, {})
        if (o.get("rebalance_protocol") or "eager") == "eager":
            for parts in previous.values():
                for tp in parts:
                    unowned.setdefault(tp, started)
        cost = 0
        for parts in owners.values():
            for tp in parts:
                since = unowned.pop(tp, None)
                if since is not None:
                    cost += ts - since
        for c in changes:
            if c.to_lane is None and c.from_lane is not None:
                unowned.setdefault(c.partition, ts)
        h.generations.append(Generation(
            generation=o["generation"], trigger=o.get("trigger", "unknown"),
            trigger_detail=o.get("trigger_detail") or "", protocol=o.get("protocol"),
            rebalance_protocol=o.get("rebalance_protocol") or "eager", leader=o.get("leader"),
            started_ts=o.get("started_ts", ts), join_completed_ts=o.get("join_completed_ts"), completed_ts=ts,
            duration_ms=o.get("duration_ms", 0), partitions_moved=o.get("partitions_moved", 0),
            max_partition_unavailable_ms=o.get("max_partition_unavailable_ms", 0), members=lanes, owners=owners,
            changes=changes, unknown_topics=list(o.get("unknown_topics") or []), unavailable_partition_ms=cost))

    def _group_metadata(self, h: GroupHistory, o: dict, ts: int) -> None:
        if o.get("tombstone"):   # group deleted or expired: nobody is in it any more
            for lane in h.lanes.values():
                self._close(lane, ts)


_HANDLERS = {
    "member_joined": HistoryBuilder._member_joined,
    "member_left": HistoryBuilder._member_gone,
    "member_expired": HistoryBuilder._member_gone,
    "member_replaced": HistoryBuilder._member_replaced,
    "state_change": HistoryBuilder._state_change,
    "rebalance": HistoryBuilder._rebalance,
    "group_metadata": HistoryBuilder._group_metadata,
}


def ownership_changes(before: dict[str, list[Partition]], after: dict[str, list[Partition]]) -> list[OwnershipChange]:
    """Every partition whose owning lane differs between two assignments, sorted by partition."""
    old = {tp: lane for lane, parts in before.items() for tp in parts}
    new = {tp: lane for lane, parts in after.items() for tp in parts}
    return [OwnershipChange(tp, old.get(tp), new.get(tp))
            for tp in sorted(set(old) | set(new)) if old.get(tp) != new.get(tp)]


def build_histories(outputs: Iterable[dict]) -> dict[str, GroupHistory]:
    return HistoryBuilder().add_all(outputs).groups


def build_history(outputs: Iterable[dict], group_id: str) -> GroupHistory:
    """The history of one group (empty when the outputs never mention it)."""
    return build_histories(o for o in outputs if o.get("group_id") == group_id).get(group_id, GroupHistory(group_id))


def coordinator_outputs(events: Iterable[dict], config: object | None = None) -> tuple[list[dict], int]:
    """Run a recorded feed through a fresh coordinator, in feed order: (outputs, events rejected as invalid).

    Timers due at the last event's time fire too, so a session that expired exactly then is not lost."""
    from streaming.coordinator import GroupCoordinator, parse_event

    coordinator = GroupCoordinator(config)  # type: ignore[arg-type]
    outputs: list[dict] = []
    rejected = 0
    last_ts: int | None = None
    for raw in events:
        event, error = parse_event(raw)
        if error is not None:
            rejected += 1
            continue
        outputs.extend(coordinator.handle(event))
        if event.get("ts") is not None:
            last_ts = event["ts"] if last_ts is None else max(last_ts, event["ts"])
    if last_ts is not None:
        outputs.extend(coordinator.advance(last_ts))
    return outputs, rejected


def _short_member(member_id: str, client_id: str | None) -> str:
    # Kafka member ids are "<client.id>-<uuid>"; the first uuid block is enough to tell members apart.
    if client_id and member_id.startswith(client_id + "-"):
        return f"{client_id}-{member_id[len(client_id) + 1:][:8]}"
    return member_id[:40]
