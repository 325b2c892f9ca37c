"""The figures of a rebalance, one definition for both protocols (docs/figures.md has them with worked timelines).

Both coordinators keep a :class:`Ledger` per group and end every rebalance with :func:`rebalance_fields`; the
history, report, replay, live table and metrics read what that wrote (and aggregate it with the helpers below), so
each figure is computed in one place.

The ledger follows who may consume each partition. A partition is *released* when the coordinator tells its owner to
stop consuming it (eager: a REBALANCE_IN_PROGRESS answer or the owner's own JoinGroup for the round, all its
partitions; cooperative: the SyncGroup answer of the round that took it away; consumer protocol: the heartbeat answer
whose assignment no longer has it) or removes the owner (leave, expiry, fencing); it is *taken* when the coordinator
tells its next owner to start (classic: the round's completion; consumer protocol: the heartbeat answer that assigns
it). The span in between is the partition's time without an owner; the part of it the group had no member at all is
kept apart (``no_members_ms``), so that a rebalance's unavailability does not include the hours an empty group sat
waiting for its consumers to come back. A release whose time the coordinator cannot know (it follows a cluster from
``__consumer_offsets`` records, written when a round completes) has no time: the figures built on it are unknown.

Pure and deterministic; nothing here knows Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from streaming.coordinator.outputs import RebalanceFigures

Partition = tuple[str, int]


@dataclass(frozen=True)
class Span:
    """One partition without an owner: released at ``released_ts`` (None: unknown), taken at ``taken_ts``;
    ``no_members_ms``: how much of it the group had no member (None when the release time is unknown)."""

    partition: Partition
    released_ts: int | None
    taken_ts: int
    no_members_ms: int | None

    @property
    def ownerless_ms(self) -> int | None:
        """Release to take, the time the group had no member included."""
        return None if self.released_ts is None else self.taken_ts - self.released_ts

    @property
    def unavailable_ms(self) -> int | None:
        """Release to take, less the time the group had no member: what a rebalance cost this partition."""
        ownerless = self.ownerless_ms
        return None if ownerless is None or self.no_members_ms is None else ownerless - self.no_members_ms

    def to_row(self, topic_name: Callable[[str], str] = str) -> list:
        return [topic_name(self.partition[0]), self.partition[1], self.released_ts, self.taken_ts, self.no_members_ms]

    @classmethod
    def from_row(cls, row: list) -> "Span":
        topic, partition, released, taken, no_members = row
        return cls((topic, int(partition)), released, taken, no_members)


@dataclass(frozen=True)
class Settled:
    """What the end of a rebalance reports: partitions moved, the spans it closed (or that closed during it), and
    the partitions it leaves for a later one (cooperative first round, empty group) with their release time."""

    moved: int
    spans: list[Span]
    awaiting: list[tuple[Partition, int | None]]


class Ledger:
    """Per group: who may consume each partition now, who owned it when the group last settled, which partitions
    have no owner since when, and how long the group has had no member."""

    def __init__(self) -> None:
        self.owners: dict[Partition, str] = {}  # owner when the group last settled (partitions moved)
        self.holder: dict[Partition, str] = {}  # who may consume it now
        self.held: dict[str, set[Partition]] = {}  # the same, per owner
        self.released: dict[Partition, tuple[int | None, int | None]] = {}  # since (None: unknown), clock then
        self.empty_since: int | None = None  # the group has had no member since
        self.empty_ms = 0  # time without members before empty_since
        self.spans: list[Span] = []  # closed since the last settle

    # ------------------------------------------------------------------ the group's members
    def no_members_clock(self, now: int) -> int:
        """Total time the group had no member, up to ``now``."""
        return self.empty_ms + (now - self.empty_since if self.empty_since is not None else 0)

    def presence(self, now: int, has_members: bool) -> None:
        if has_members and self.empty_since is not None:
            self.empty_ms += max(now - self.empty_since, 0)
            self.empty_since = None
        elif not has_members and self.empty_since is None:
            self.empty_since = now

    # ------------------------------------------------------------------ owners told to stop / start
    def release(self, owner: str, now: int | None, parts: Iterable[Partition] | None = None) -> None:
        """``owner`` is told to stop consuming ``parts`` (None: everything it holds), or removed; ``now`` None: the
        time is unknown."""
        held = self.held.get(owner)
        if not held:
            return
        for tp in sorted(held if parts is None else set(parts) & held):
            held.discard(tp)
            del self.holder[tp]
            if tp not in self.released:
                self.released[tp] = (now, None if now is None else self.no_members_clock(now))
        if not held:
            del self.held[owner]

    def take(self, owner: str, parts: Iterable[Partition], now: int) -> None:
        """``owner`` is told to start consuming ``parts``: each closes its span without an owner."""
        for tp in sorted(parts):
            previous = self.holder.get(tp)
            if previous == owner:
                continue
            if previous is not None:  # handed over without being given up first: released this moment
                self.release(previous, now, [tp])
            since = self.released.pop(tp, None)
            if since is not None:
                released, clock = since
                self.spans.append(
                    Span(
                        tp,
                        released,
                        now,
                        None if released is None or clock is None else self.no_members_clock(now) - clock,
                    )
                )
            self.holder[tp] = owner
            self.held.setdefault(owner, set()).add(tp)

    def assign(self, assignment: dict[str, set[Partition]], now: int, known: bool = True) -> None:
        """Each owner in ``assignment`` may consume exactly its partitions from ``now`` on (owners not named keep
        theirs): all are told to stop first, then to start, so a partition handed from one to another in the same
        moment has a span of 0."""
        for owner, parts in assignment.items():
            self.release(owner, now if known else None, self.held.get(owner, set()) - parts)
        for owner, parts in assignment.items():
            self.take(owner, parts, now)

    # ------------------------------------------------------------------ the end of a rebalance
    def settle(
        self,
        assignment: dict[str, Iterable[Partition]],
        now: int,
        wanted: Callable[[Partition], bool] | None = None,
        known: bool = True,
    ) -> Settled:
        """The group is settled (Stable, or Empty: ``assignment`` empty) on ``assignment`` (owner -> partitions):
        every member may consume exactly its partitions now. Partitions released and still without an owner stay
        released -- they await a later rebalance -- unless the group has members and ``wanted`` says nobody will
        take them (a topic no member subscribes to any more)."""
        assignment = {owner: set(parts) for owner, parts in assignment.items()}
        self.assign(assignment, now, known)
        new_owners = {tp: owner for owner, parts in assignment.items() for tp in parts}
        moved = sum(1 for tp, owner in self.owners.items() if new_owners.get(tp) != owner)
        self.owners = new_owners
        if assignment and wanted is not None:
            self.released = {tp: since for tp, since in self.released.items() if wanted(tp)}
        spans, self.spans = self.spans, []
        return Settled(moved, spans, [(tp, since[0]) for tp, since in sorted(self.released.items())])

    # ------------------------------------------------------------------ serialisation (msgpack / JSON friendly)
    def to_dict(self) -> dict:
        # Between rebalances every partition is held by its settled owner: only the differences are kept (None: not
        # held), so a big group's state does not carry its assignment twice.
        changed = [
            [t, p, self.holder.get((t, p))]
            for (t, p) in sorted(self.owners.keys() | self.holder.keys())
            if self.holder.get((t, p)) != self.owners.get((t, p))
        ]
        d: dict = {
            "owners": [[t, p, o] for (t, p), o in self.owners.items()],
            "holder_changes": changed,
            "released": [[t, p, ts, clock] for (t, p), (ts, clock) in self.released.items()],
            "empty_ms": self.empty_ms,
        }
        if self.empty_since is not None:
            d["empty_since"] = self.empty_since
        if self.spans:
            d["spans"] = [s.to_row() for s in self.spans]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Ledger":
        ledger = cls()
        ledger.owners = {(t, int(p)): o for t, p, o in d.get("owners", [])}
        holder = dict(ledger.owners)
        for t, p, o in d.get("holder_changes", []):
            if o is None:
                holder.pop((t, int(p)), None)
            else:
                holder[(t, int(p))] = o
        for tp, o in holder.items():
            ledger.holder[tp] = o
            ledger.held.setdefault(o, set()).add(tp)
        ledger.released = {(t, int(p)): (ts, clock) for t, p, ts, clock in d.get("released", [])}
        ledger.empty_ms = d.get("empty_ms", 0)
        ledger.empty_since = d.get("empty_since")
        ledger.spans = [Span.from_row(r) for r in d.get("spans", [])]
        return ledger


def rebalance_fields(
    settled: Settled, started_ts: int | None, now: int, topic_name: Callable[[str], str] = str
) -> RebalanceFigures:
    """The figures of a ``rebalance`` record (both protocols): when it started (None: unknown) and ended, its
    duration, partitions moved, the longest a partition was unavailable, and per partition the spans without an owner
    it closed (``[topic, partition, released_ts, taken_ts, no_members_ms]``) and those it leaves awaiting an owner
    (``[topic, partition, released_ts]``)."""
    return {
        "started_ts": started_ts,
        "completed_ts": now,
        "duration_ms": None if started_ts is None else now - started_ts,
        "partitions_moved": settled.moved,
        "max_partition_unavailable_ms": max_known(s.unavailable_ms for s in settled.spans),
        "partitions_without_owner": [s.to_row(topic_name) for s in settled.spans],
        "awaiting_owner": [[topic_name(tp[0]), tp[1], since] for tp, since in settled.awaiting],
    }


# ---------------------------------------------------------------------- aggregates (unknown stays unknown)
def max_known(values: Iterable[int | None], empty: int | None = 0) -> int | None:
    """The largest value; None when any is unknown; ``empty`` when there are none."""
    values = list(values)
    if any(v is None for v in values):
        return None
    return max(values, default=empty)  # type: ignore[type-var]


def sum_known(values: Iterable[int | None]) -> int | None:
    """The total; None when any is unknown."""
    values = list(values)
    if any(v is None for v in values):
        return None
    return sum(values)  # type: ignore[arg-type]


def spans_of(record: dict) -> list[Span]:
    """The spans a ``rebalance`` record closed (none in records written before they were reported)."""
    return [Span.from_row(r) for r in record.get("partitions_without_owner") or []]


def shown(value: object, unknown: str = "?") -> str:
    """A figure for a table: ``unknown`` for None."""
    return unknown if value is None else str(value)
