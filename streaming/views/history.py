"""Rebalance history of consumer groups, folded from the coordinator's output records.

Pure and deterministic: the same outputs give the same history. The report draws it, the replay scores it.

A *lane* is one consumer as an operator thinks of it: a static member keeps its lane across restarts (its
``group.instance.id`` outlives member ids), a dynamic member gets a lane per member id. Ownership is tracked per
lane, so a static restart that keeps the assignment is not counted as a move — like the coordinator's
``partitions_moved``.

Consumer-protocol (KIP-848) groups, from :class:`ConsumerGroupCoordinator`'s outputs, have the same history with
group epochs in place of generations -- a :class:`Generation` is then one rebalance, from the first epoch bump to the
group settled again (``generation`` holds the group epoch, ``rebalance_protocol`` is ``consumer``) -- plus what only
that protocol has: every target assignment (:class:`TargetEpoch`: its epoch, what bumped the group epoch, the target
per lane, when every member had reached it), each member's epoch over time, per member and target the
reconciliation time (from the new target assignment to the member being Stable on it), and every revocation and how
long the member took to give the partitions up.

The figures of each rebalance -- its time, partitions moved, every span in which a partition had no owner -- are the
coordinator's, read from its ``rebalance`` records (``streaming/coordinator/figures.py``; docs/figures.md defines
them); the history only names the lanes involved and adds them up. Unknown figures stay ``None``.

A group that changes protocol (``protocol_switch``: Kafka 4.x's online upgrade and downgrade, or an Empty group
replaced by one of the other protocol) keeps one history: each switch is a :class:`ProtocolSwitch`, the members an
online switch keeps stay in their lanes (the classic group's tombstone of an upgrade is no departure), each lane says
which protocol its member speaks (``Lane.protocols``: a consumer group's classic members are ``classic``), and the
generations of the classic phases and the epochs of the consumer ones follow each other in ``generations``.

Lag comes from the same outputs through ``streaming.coordinator.lag.LagBook`` (docs/lag.md): the group's worst
partition at each log-end sample (``GroupHistory.lag``), and each rebalance's lag cost (``Generation.lag_cost``, the
``rebalance_lag`` it was followed by).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from streaming.coordinator.figures import max_known, spans_of, sum_known
from streaming.coordinator.lag import PARTITION_LAG, REBALANCE_LAG, LagBook
from streaming.coordinator.outputs import (
    ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REPLACED,
    PROTOCOL_SWITCH,
    REBALANCE,
    STATE_CHANGE,
    TARGET_ASSIGNMENT,
)

Partition = tuple[str, int]

REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance")


@dataclass(frozen=True)
class OwnershipChange:
    """A partition that changed hands at a generation; ``None`` means nobody owns it (revoked / newly created)."""

    partition: Partition
    from_lane: str | None
    to_lane: str | None


@dataclass
class UnownedSpan:
    """A partition without an owner: released by ``from_lane`` (its owner told to stop consuming it, or gone) at
    ``from_ts`` (None: unknown), taken by ``to_lane`` at ``to_ts`` (None: still awaiting an owner when the history
    ends); ``no_members_ms``: how much of it the group had no member at all."""

    partition: Partition
    from_lane: str | None
    from_ts: int | None
    to_lane: str | None = None
    to_ts: int | None = None
    no_members_ms: int | None = 0

    @property
    def duration_ms(self) -> int | None:
        """Without an owner, the time the group had no member included (None: open, or its start unknown)."""
        return None if self.to_ts is None or self.from_ts is None else self.to_ts - self.from_ts

    @property
    def unavailable_ms(self) -> int | None:
        """Without an owner while the group had members: what the rebalance cost this partition."""
        d = self.duration_ms
        return None if d is None or self.no_members_ms is None else d - self.no_members_ms


@dataclass
class Generation:
    """One completed rebalance (one ``rebalance`` record) and what it changed."""

    generation: int
    trigger: str
    trigger_detail: str
    protocol: str | None
    rebalance_protocol: str
    leader: str | None
    started_ts: int | None  # None: unknown (the feed shows only the round's completion)
    join_completed_ts: int | None
    completed_ts: int
    duration_ms: int | None
    partitions_moved: int | None
    max_partition_unavailable_ms: int | None
    members: list[str]  # lanes, in the coordinator's member order
    owners: dict[str, list[Partition]]  # lane -> partitions after this rebalance
    changes: list[OwnershipChange] = field(default_factory=list)
    unknown_topics: list[str] = field(default_factory=list)
    spans: list[UnownedSpan] = field(default_factory=list)  # partitions it gave an owner after a time without
    awaiting_owner: list[UnownedSpan] = field(default_factory=list)  # partitions it left without one
    lag_cost: dict | None = None  # its ``rebalance_lag``: the lag it cost, once its new owners committed

    @property
    def shown_start_ts(self) -> int:
        """Where a timeline draws the rebalance's start: its completion when the start is unknown."""
        return self.completed_ts if self.started_ts is None else self.started_ts

    @property
    def unavailable_partition_ms(self) -> int | None:
        """Partition·ms without an owner while the group had members, over the partitions this rebalance gave out."""
        return sum_known(s.unavailable_ms for s in self.spans)

    @property
    def max_partition_ownerless_ms(self) -> int | None:
        """The longest a partition it gave out had been without an owner, the time with no member included."""
        return max_known(s.duration_ms for s in self.spans)

    @property
    def partition_count(self) -> int:
        return sum(len(p) for p in self.owners.values())

    @property
    def balance(self) -> int:
        """max − min partitions per member (0 for an empty group): 0 or 1 is as even as it gets."""
        counts = [len(p) for p in self.owners.values()]
        return max(counts) - min(counts) if counts else 0

    @property
    def settled(self) -> bool:
        """An assignment the group settles on: it has members, and no partition awaits its next owner (a cooperative
        first round leaves the revoked ones for the next round)."""
        return bool(self.owners) and not self.awaiting_owner


@dataclass
class Lane:
    key: str  # group.instance.id, or the member id of a dynamic member
    label: str
    static: bool
    member_ids: list[str] = field(default_factory=list)
    spans: list[list[int | None]] = field(default_factory=list)  # [start_ts, end_ts or None while present]
    protocols: list[str] = field(default_factory=list)  # the protocols its member spoke, in order (classic, consumer)

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
    end_ts: int | None  # None: still in this state at the end of the history
    generation: int | None
    reason: str


@dataclass(frozen=True)
class ProtocolSwitch:
    """The group changed protocol (a ``protocol_switch``): ``kind`` is ``upgrade`` or ``downgrade`` (Kafka 4.x's
    online migration: the members stay) or ``replaced`` (an Empty group replaced by one of the other protocol)."""

    ts: int
    from_protocol: str
    to_protocol: str
    kind: str
    reason: str
    members: list[str]  # the lanes present through it

    @property
    def online(self) -> bool:
        return self.kind in ("upgrade", "downgrade")


@dataclass
class TargetEpoch:
    """One target assignment of a consumer-protocol group (a ``target_assignment`` output)."""

    epoch: int  # the assignment epoch: the group epoch it was computed for
    ts: int  # when the coordinator computed it
    bumped_ts: int  # the first group-epoch bump it answers
    trigger: str  # join, leave, expiry, subscription, metadata, regex, unknown
    assignor: str | None
    target: dict[str, list[Partition]]  # lane -> partitions
    changes: list[OwnershipChange] = field(default_factory=list)  # against the previous target
    reconciled_ts: int | None = None  # the group Stable on this epoch; None: superseded first, or never

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def balance(self) -> int:
        counts = [len(p) for p in self.target.values()]
        return max(counts) - min(counts) if counts else 0

    @property
    def reconciliation_ms(self) -> int | None:
        return None if self.reconciled_ts is None else self.reconciled_ts - self.ts


@dataclass
class Reconciliation:
    """One member on its way to one target assignment: from the target's computation to the member being Stable at
    that epoch or a later one (``completed_ts`` None: the member left first, or the history ended)."""

    lane: str
    member_id: str
    target_epoch: int
    started_ts: int
    completed_ts: int | None = None

    @property
    def duration_ms(self) -> int | None:
        return None if self.completed_ts is None else self.completed_ts - self.started_ts


@dataclass
class Revocation:
    """A partition a member was asked to give up, and when it said it had (``acked_ts`` None: it never did --
    it left or was fenced holding it, or the history ended)."""

    lane: str
    member_id: str
    partition: Partition
    member_epoch: int
    started_ts: int
    acked_ts: int | None = None

    @property
    def latency_ms(self) -> int | None:
        return None if self.acked_ts is None else self.acked_ts - self.started_ts


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
    # Consumer-protocol groups only (``protocol == "consumer"``: the group is or was a consumer group).
    protocol: str = "classic"
    switches: list[ProtocolSwitch] = field(default_factory=list)
    targets: list[TargetEpoch] = field(default_factory=list)
    member_epochs: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)  # lane -> (ts, epoch, state)
    # At each log-end sample, the group's worst partition: (ts, records, seconds) -- the most of each over the
    # partitions' latest figures (None: not known for any).
    lag: list[tuple[int, int | None, float | None]] = field(default_factory=list)
    reconciliations: list[Reconciliation] = field(default_factory=list)
    revocations: list[Revocation] = field(default_factory=list)
    group_epochs: list[tuple[int, int]] = field(default_factory=list)  # (ts, group epoch) at each bump
    current: dict[str, list[Partition]] = field(default_factory=dict)  # lane -> assigned now (no pending)
    pending_revocation: dict[str, list[Partition]] = field(default_factory=dict)  # lane -> still to give up

    @property
    def is_consumer(self) -> bool:
        return self.protocol == "consumer"

    @property
    def protocols(self) -> list[str]:
        """The group's protocols in order: ``["classic", "consumer", "classic"]`` for an upgrade and a downgrade."""
        if not self.switches:
            return [self.protocol]
        return [self.switches[0].from_protocol] + [s.to_protocol for s in self.switches]

    @property
    def mixed(self) -> bool:
        """Members of both protocols, or generations of one and epochs of the other, in this history."""
        return bool(self.switches) or len({p for lane in self.lanes.values() for p in lane.protocols}) > 1

    @property
    def unowned(self) -> list[UnownedSpan]:
        """Every span without an owner the rebalances closed, then those still awaiting an owner at the end."""
        closed = [u for g in self.generations for u in g.spans]
        return closed + (list(self.generations[-1].awaiting_owner) if self.generations else [])

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
                lanes[key] = replace(
                    lane, spans=spans, member_ids=list(lane.member_ids), protocols=list(lane.protocols)
                )
        states = [replace(s, start_ts=max(s.start_ts, ts)) for s in self.states if s.end_ts is None or s.end_ts > ts]
        return GroupHistory(
            self.group_id,
            generations=[g for g in self.generations if g.completed_ts >= ts],
            lag=[p for p in self.lag if p[0] >= ts],
            lanes=lanes,
            departures=[d for d in self.departures if d.ts >= ts],
            states=states,
            replacements=[r for r in self.replacements if r[0] >= ts],
            first_ts=None if self.first_ts is None else max(self.first_ts, ts),
            last_ts=self.last_ts if self.last_ts is None or self.last_ts >= ts else ts,
            protocol=self.protocol,
            switches=[s for s in self.switches if s.ts >= ts],
            targets=[t for t in self.targets if t.ts >= ts],
            member_epochs={
                k: [p for p in v if p[0] >= ts] for k, v in self.member_epochs.items() if any(p[0] >= ts for p in v)
            },
            reconciliations=[r for r in self.reconciliations if r.completed_ts is None or r.completed_ts >= ts],
            revocations=[r for r in self.revocations if r.acked_ts is None or r.acked_ts >= ts],
            group_epochs=[e for e in self.group_epochs if e[0] >= ts],
            current={k: list(v) for k, v in self.current.items()},
            pending_revocation={k: list(v) for k, v in self.pending_revocation.items()},
        )


class HistoryBuilder:
    """Fold output records one at a time (records of any group; unrelated record types are ignored)."""

    def __init__(self) -> None:
        self.groups: dict[str, GroupHistory] = {}
        self._lane_of: dict[tuple[str, str], str] = {}  # (group, member id) -> lane key
        self._last_owner: dict[str, dict[Partition, str]] = {}  # group -> partition -> the lane that last had it
        self._consumer: dict[str, _ConsumerFold] = {}  # consumer-protocol groups: what the fold remembers
        self.lag = LagBook()

    def add_all(self, outputs: Iterable[dict]) -> "HistoryBuilder":
        for o in outputs:
            self.add(o)
        return self

    def add(self, o: dict) -> None:
        group_id = o.get("group_id")
        kind = o.get("type")
        for derived in self.lag.add(o) if group_id else ():
            self._lag(derived)
        if not group_id or kind not in _HANDLERS:
            return
        h = self.groups.get(group_id)
        if h is None:
            h = self.groups[group_id] = GroupHistory(group_id)
        ts = int(o.get("ts") or 0)
        h.first_ts = ts if h.first_ts is None else min(h.first_ts, ts)
        h.last_ts = ts if h.last_ts is None else max(h.last_ts, ts)
        _HANDLERS[kind](self, h, o, ts)

    def _lag(self, d: dict) -> None:
        h = self.groups.get(d["group_id"])
        if h is None:
            h = self.groups[d["group_id"]] = GroupHistory(d["group_id"])
        if d["type"] == PARTITION_LAG:
            latest = self.lag.current(d["group_id"])
            records = [f["lag_records"] for f in latest if f["lag_records"] is not None]
            seconds = [f["lag_seconds"] for f in latest if f["lag_seconds"] is not None]
            point = (d["ts"], max(records, default=None), max(seconds, default=None))
            if h.lag and h.lag[-1][0] == d["ts"]:
                h.lag[-1] = point  # one point per sampling moment, with every partition sampled then
            else:
                h.lag.append(point)
        elif d["type"] == REBALANCE_LAG:
            for g in reversed(h.generations):
                if g.completed_ts == d["rebalance_ts"] and g.generation == d["generation"]:
                    g.lag_cost = d
                    break

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

    @staticmethod
    def _speaks(lane: Lane, protocol: str) -> Lane:
        if not lane.protocols or lane.protocols[-1] != protocol:
            lane.protocols.append(protocol)
        return lane

    # ------------------------------------------------------------------ handlers
    def _member_joined(self, h: GroupHistory, o: dict, ts: int) -> None:
        if "instance_id" in o:
            return self._consumer_member_joined(h, o, ts)
        lane = self._lane(h, o["member_id"], o.get("group_instance_id"), o.get("client_id"))
        self._open(self._speaks(lane, "classic"), ts)

    def _member_gone(self, h: GroupHistory, o: dict, ts: int) -> None:
        if "instance_id" in o:
            return self._consumer_member_gone(h, o, ts)
        lane = self._lane(h, o["member_id"], o.get("group_instance_id"), o.get("client_id"))
        self._close(lane, ts)
        h.departures.append(
            Departure(
                lane.key,
                o["member_id"],
                ts,
                "left" if o["type"] == MEMBER_LEFT else "expired",
                o.get("reason") or "",
                o.get("last_heartbeat_ts"),
                o.get("generation"),
            )
        )

    def _member_replaced(self, h: GroupHistory, o: dict, ts: int) -> None:
        if "instance_id" in o:
            self._consumer_fold(h).cause(ts, "static-replace")
        old_lane = self._lane(h, o["previous_member_id"], o.get("group_instance_id") or o.get("instance_id"))
        self._lane_of[(h.group_id, o["member_id"])] = old_lane.key
        lane = self._lane(h, o["member_id"], o.get("group_instance_id") or o.get("instance_id"))
        self._open(lane, ts)
        h.replacements.append((ts, lane.key, o["previous_member_id"], o["member_id"]))

    def _state_change(self, h: GroupHistory, o: dict, ts: int) -> None:
        if h.states and h.states[-1].end_ts is None:
            h.states[-1] = replace(h.states[-1], end_ts=ts)
        epoch = o.get("generation", o.get("group_epoch"))
        h.states.append(StateSpan(o["to"], ts, None, epoch, o.get("reason") or ""))
        if "group_epoch" in o:
            self._consumer_state(h, o, ts)

    def _rebalance(self, h: GroupHistory, o: dict, ts: int) -> None:
        consumer = o.get("rebalance_protocol") == "consumer"
        if consumer:
            self._consumer_fold(h)
            lanes = [
                self._consumer_lane(h, m["member_id"], m.get("instance_id"), m.get("client_id")).key
                for m in o.get("members", [])
            ]
        else:
            lanes = [
                self._lane(h, m["member_id"], m.get("group_instance_id"), m.get("client_id")).key
                for m in o.get("members", [])
            ]
            for key in lanes:
                self._open(self._speaks(h.lanes[key], "classic"), o.get("started_ts") or ts)
        owners: dict[str, list[Partition]] = {key: [] for key in lanes}
        for member_id, parts in (o.get("assignment") or {}).items():
            key = self._lane_of.get((h.group_id, member_id), member_id)
            owners.setdefault(key, []).extend((t, int(p)) for t, p in parts)
        owners = {k: sorted(v) for k, v in owners.items()}
        previous = h.generations[-1].owners if h.generations else {}
        last_owner = self._last_owner.setdefault(h.group_id, {})
        new_owner = {tp: lane for lane, parts in owners.items() for tp in parts}
        spans = [
            UnownedSpan(
                s.partition,
                last_owner.get(s.partition),
                s.released_ts,
                new_owner.get(s.partition),
                s.taken_ts,
                s.no_members_ms,
            )
            for s in spans_of(o)
        ]
        awaiting = [
            UnownedSpan((t, int(p)), last_owner.get((t, int(p))), since)
            for t, p, since in o.get("awaiting_owner") or []
        ]
        last_owner.update(new_owner)
        h.generations.append(
            Generation(
                generation=int(o["group_epoch"] if consumer else o["generation"]),
                trigger=o.get("trigger", "unknown"),
                trigger_detail=o.get("trigger_detail") or "",
                protocol=o.get("assignor" if consumer else "protocol"),
                rebalance_protocol=o.get("rebalance_protocol") or "eager",
                leader=o.get("leader"),
                started_ts=o.get("started_ts", ts),
                join_completed_ts=o.get("join_completed_ts"),
                completed_ts=ts,
                duration_ms=o.get("duration_ms"),
                partitions_moved=o.get("partitions_moved"),
                max_partition_unavailable_ms=o.get(
                    "max_partition_unavailable_ms", max_known(u.unavailable_ms for u in spans)
                ),
                members=lanes,
                owners=owners,
                changes=ownership_changes(previous, owners),
                unknown_topics=list(o.get("unknown_topics") or []),
                spans=spans,
                awaiting_owner=awaiting,
            )
        )

    def _group_metadata(self, h: GroupHistory, o: dict, ts: int) -> None:
        upgraded = h.switches and h.switches[-1].ts == ts and h.switches[-1].kind == "upgrade"
        if o.get("tombstone") and not upgraded:  # group deleted or expired: nobody is in it any more
            for lane in h.lanes.values():
                self._close(lane, ts)

    def _protocol_switch(self, h: GroupHistory, o: dict, ts: int) -> None:
        """One group through a switch of protocol. Online (Kafka 4.x's migration) its members stay: the classic
        group's tombstone that follows an upgrade removes nobody, and the consumer group starts at the classic
        generation with the members' assignments as its target (no epoch bump of its own); a downgrade ends what
        the consumer protocol follows of each member (its current assignment, reconciliation, revocations)."""
        reason = o.get("reason") or ""
        kind = reason.split(":", 1)[0] if reason.startswith(("upgrade:", "downgrade:")) else "replaced"
        present = [key for key, lane in h.lanes.items() if lane.spans and lane.spans[-1][1] is None]
        h.switches.append(ProtocolSwitch(ts, o["from"], o["to"], kind, reason, present if kind != "replaced" else []))
        if o["to"] == "consumer":
            fold = self._consumer.pop(h.group_id, None)
            new = self._consumer_fold(h)
            if kind == "upgrade":
                new.converting = True
                classic = [g for g in h.generations if g.rebalance_protocol != "consumer"]
                new.target = dict(classic[-1].owners) if classic else {}
            elif fold is not None:
                new.group_epoch = fold.group_epoch
        else:
            self._consumer.pop(h.group_id, None)
            h.current.clear()
            h.pending_revocation.clear()

    # ------------------------------------------------------------------ consumer-protocol groups (KIP-848)
    def _consumer_fold(self, h: GroupHistory) -> "_ConsumerFold":
        fold = self._consumer.get(h.group_id)
        if fold is None:
            fold = self._consumer[h.group_id] = _ConsumerFold()
            h.protocol = "consumer"
        return fold

    def _consumer_lane(
        self, h: GroupHistory, member_id: str, instance_id: str | None, client_id: str | None = None
    ) -> Lane:
        known = (h.group_id, member_id) in self._lane_of
        lane = self._lane(h, member_id, instance_id, client_id)
        if not known and instance_id is None and client_id:
            lane.label = f"{client_id}-{member_id[:8]}"  # the consumer's own member id is a bare Uuid
        return lane

    def _consumer_member_joined(self, h: GroupHistory, o: dict, ts: int) -> None:
        fold = self._consumer_fold(h)
        self._open(self._consumer_lane(h, o["member_id"], o.get("instance_id"), o.get("client_id")), ts)
        fold.cause(ts, "join")

    def _consumer_member_gone(self, h: GroupHistory, o: dict, ts: int) -> None:
        fold = self._consumer_fold(h)
        lane = self._consumer_lane(h, o["member_id"], o.get("instance_id"), o.get("client_id"))
        self._close(lane, ts)
        temporary = bool(o.get("temporary"))
        kind = "left" if o["type"] == MEMBER_LEFT else "expired"
        h.departures.append(
            Departure(
                lane.key, o["member_id"], ts, kind, o.get("reason") or "", o.get("last_heartbeat_ts"), fold.group_epoch
            )
        )
        if temporary:
            return  # a static member away (-2) keeps its partitions until it is back or its session ends
        fold.cause(ts, "leave" if kind == "left" else "expiry")
        fold.gone(h, lane.key)

    def _consumer_record(self, h: GroupHistory, o: dict, ts: int) -> None:
        """A KIP-848 record the consumer model wrote (the store's record dicts): epoch bumps and their causes."""
        fold = self._consumer_fold(h)
        kind, live = o["type"], not o.get("tombstone")
        if kind == "consumer_group_metadata" and live and fold.converting:
            fold.converting = False  # the upgraded group's epoch: the classic generation it continues
            fold.group_epoch = int(o["epoch"])
            h.group_epochs.append((ts, fold.group_epoch))
        elif kind == "consumer_group_metadata" and live and int(o["epoch"]) > fold.group_epoch:
            fold.group_epoch = int(o["epoch"])
            h.group_epochs.append((ts, fold.group_epoch))
            fold.bumped(ts)
        elif kind == "consumer_group_partition_metadata" and live:
            fold.cause(ts, "metadata", weak=True)
        elif kind == "consumer_group_member_metadata" and live:
            key = self._lane_of.get((h.group_id, o["member_id"]))  # its join or replacement came first
            if key in h.lanes:
                self._speaks(h.lanes[key], "classic" if o.get("classicMemberMetadata") else "consumer")
            fold.cause(ts, "subscription", weak=True)
        elif kind == "consumer_group_regular_expression":
            fold.cause(ts, "regex", weak=True)

    def _consumer_state(self, h: GroupHistory, o: dict, ts: int) -> None:
        fold = self._consumer_fold(h)
        epoch = int(o["group_epoch"])
        if epoch > fold.group_epoch:  # without the records in the outputs, bumps show here
            fold.group_epoch = epoch
            h.group_epochs.append((ts, epoch))
            fold.bumped(ts)
        if o["to"] == "Stable":
            for t in reversed(h.targets):
                if t.epoch == o.get("assignment_epoch") and t.reconciled_ts is None:
                    t.reconciled_ts = ts
                    break

    def _target_assignment(self, h: GroupHistory, o: dict, ts: int) -> None:
        fold = self._consumer_fold(h)
        target: dict[str, list[Partition]] = {}
        for member_id, parts in (o.get("assignment") or {}).items():
            key = self._lane_of.get((h.group_id, member_id), member_id)
            target.setdefault(key, []).extend((t, int(p)) for t, p in parts)
        target = {k: sorted(v) for k, v in target.items()}
        previous, fold.target = fold.target, target
        epoch = int(o["assignment_epoch"])
        if epoch > fold.group_epoch:  # outputs without the records: the bump shows first here
            fold.group_epoch = epoch
            h.group_epochs.append((ts, epoch))
            fold.bumped(ts)
        h.targets.append(
            TargetEpoch(
                epoch,
                ts,
                fold.bumped_ts if fold.bumped_ts is not None else ts,
                fold.trigger or "unknown",
                o.get("assignor"),
                target,
                ownership_changes(previous, target),
            )
        )
        fold.bumped_ts, fold.trigger = None, None
        # Every member of the target that is not yet Stable on it starts reconciling towards it.
        for lane_key in target:
            current = fold.member_epoch.get(lane_key)
            member_id = fold.member_of.get(lane_key, lane_key)
            if current is None or current[0] < epoch or current[1] != "STABLE":
                h.reconciliations.append(Reconciliation(lane_key, member_id, epoch, ts))
                fold.reconciling.setdefault(lane_key, []).append(len(h.reconciliations) - 1)

    def _assignment(self, h: GroupHistory, o: dict, ts: int) -> None:
        if "member_epoch" not in o:
            return  # the classic coordinator's per-member assignment
        fold = self._consumer_fold(h)
        lane = self._consumer_lane(h, o["member_id"], o.get("instance_id"))
        if not lane.protocols:  # outputs without the member's metadata record
            self._speaks(lane, "consumer")
        key = lane.key
        fold.member_of[key] = o["member_id"]
        epoch, state = int(o["member_epoch"]), o.get("state") or "STABLE"
        h.member_epochs.setdefault(key, []).append((ts, epoch, state))
        fold.member_epoch[key] = (epoch, state)
        pending = {(t, int(p)) for t, p in o.get("pending_revocation") or []}
        owned = {(t, int(p)) for t, p in o.get("partitions") or []} | pending
        h.current[key] = sorted(owned - pending)
        h.pending_revocation[key] = sorted(pending)
        # Revocations: a partition newly pending starts one; one no longer pending was given up.
        open_revocations = fold.revoking.setdefault(key, {})
        for tp in sorted(pending - set(open_revocations)):
            h.revocations.append(Revocation(key, o["member_id"], tp, epoch, ts))
            open_revocations[tp] = len(h.revocations) - 1
        for tp in [tp for tp in open_revocations if tp not in pending]:
            index = open_revocations.pop(tp)
            if tp not in owned:
                h.revocations[index].acked_ts = ts
        if state == "STABLE" and epoch > 0:
            for index in fold.reconciling.pop(key, []):
                r = h.reconciliations[index]
                if r.target_epoch <= epoch:
                    r.completed_ts = ts
                else:
                    fold.reconciling.setdefault(key, []).append(index)


@dataclass
class _ConsumerFold:
    """What the history fold keeps between outputs of one consumer-protocol group."""

    group_epoch: int = 0
    converting: bool = False  # an online upgrade: its group epoch record is the classic generation, no bump
    target: dict[str, list[Partition]] = field(default_factory=dict)  # the last target (lane -> partitions)
    bumped_ts: int | None = None  # first epoch bump since the last target
    trigger: str | None = None  # what caused that bump
    causes: list[tuple[int, str, bool]] = field(default_factory=list)  # (ts, trigger, strong) at the latest ts
    member_epoch: dict[str, tuple[int, str]] = field(default_factory=dict)
    member_of: dict[str, str] = field(default_factory=dict)  # lane -> current member id
    reconciling: dict[str, list[int]] = field(default_factory=dict)
    revoking: dict[str, dict[Partition, int]] = field(default_factory=dict)

    def cause(self, ts: int, trigger: str, weak: bool = False) -> None:
        """Note what happened at ``ts`` that may bump the group epoch. The coordinator reports a member's join,
        leave or expiry before the records of the bump (strong causes); otherwise the records tell: new partition
        metadata, a member's new subscription, a resolved regex (weak causes: a join writes a subscription too)."""
        if self.causes and self.causes[0][0] != ts:
            self.causes = []
        self.causes.append((ts, trigger, not weak))

    def gone(self, h: GroupHistory, lane: str) -> None:
        """A member left for good: nothing it held or owed is followed any more."""
        h.current.pop(lane, None)
        h.pending_revocation.pop(lane, None)
        self.member_epoch.pop(lane, None)
        self.reconciling.pop(lane, None)
        self.revoking.pop(lane, None)  # never acknowledged: the member is gone

    def bumped(self, ts: int) -> None:
        here = [c for c in self.causes if c[0] == ts]
        trigger = next((c[1] for c in here if c[2]), None) or next((c[1] for c in here), None) or "unknown"
        if self.bumped_ts is None:
            self.bumped_ts, self.trigger = ts, trigger


_HANDLERS = {
    MEMBER_JOINED: HistoryBuilder._member_joined,
    MEMBER_LEFT: HistoryBuilder._member_gone,
    MEMBER_EXPIRED: HistoryBuilder._member_gone,
    MEMBER_REPLACED: HistoryBuilder._member_replaced,
    PROTOCOL_SWITCH: HistoryBuilder._protocol_switch,
    STATE_CHANGE: HistoryBuilder._state_change,
    REBALANCE: HistoryBuilder._rebalance,
    GROUP_METADATA: HistoryBuilder._group_metadata,
    ASSIGNMENT: HistoryBuilder._assignment,
    TARGET_ASSIGNMENT: HistoryBuilder._target_assignment,
    **{
        kind: HistoryBuilder._consumer_record
        for kind in (
            "consumer_group_metadata",
            "consumer_group_partition_metadata",
            "consumer_group_member_metadata",
            "consumer_group_regular_expression",
        )
    },
}


def ownership_changes(before: dict[str, list[Partition]], after: dict[str, list[Partition]]) -> list[OwnershipChange]:
    """Every partition whose owning lane differs between two assignments, sorted by partition."""
    old = {tp: lane for lane, parts in before.items() for tp in parts}
    new = {tp: lane for lane, parts in after.items() for tp in parts}
    return [
        OwnershipChange(tp, old.get(tp), new.get(tp))
        for tp in sorted(set(old) | set(new))
        if old.get(tp) != new.get(tp)
    ]


def build_histories(outputs: Iterable[dict]) -> dict[str, GroupHistory]:
    return HistoryBuilder().add_all(outputs).groups


def build_history(outputs: Iterable[dict], group_id: str) -> GroupHistory:
    """The history of one group (empty when the outputs never mention it)."""
    return build_histories(o for o in outputs if o.get("group_id") == group_id).get(group_id, GroupHistory(group_id))


def coordinator_outputs(
    events: Iterable[dict], config: object | None = None, consumer_config: object | None = None
) -> tuple[list[dict], int]:
    """Run a recorded feed through fresh coordinators, in feed order: (outputs, events rejected as invalid).

    The feed goes through the job's own routing (``streaming.coordinator.routing.run_feed``: one model per group, the
    classic or the consumer protocol's, with Kafka's switches between them), so the views show what the job computes.
    ``config`` is the classic coordinator's settings, ``consumer_config`` the group.consumer.* ones; each keeps its
    own offsets settings, and without ``consumer_config`` the consumer protocol's defaults take ``config``'s offsets
    settings (the broker's, as the job's ``step_group`` does). Timers fire before each event and, at the end, up to
    the last event's time."""
    from streaming.coordinator import CoordinatorConfig
    from streaming.coordinator.routing import Configs, run_feed

    classic = config or CoordinatorConfig()
    configs = Configs.of(classic) if consumer_config is None else Configs(classic, consumer_config)  # type: ignore
    return run_feed(events, configs)


def _short_member(member_id: str, client_id: str | None) -> str:
    # Kafka member ids are "<client.id>-<uuid>"; the first uuid block is enough to tell members apart.
    if client_id and member_id.startswith(client_id + "-"):
        return f"{client_id}-{member_id[len(client_id) + 1 :][:8]}"
    return member_id[:40]
