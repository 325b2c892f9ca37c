"""Lag per group and partition, in records and in seconds, and the lag each rebalance cost (docs/lag.md).

Read from the outputs, in their order: ``log_end`` (a sample of where a partition ends, passed on from the events
topic), ``offset_commit`` (where the group is) and ``rebalance`` (the spans its partitions had no owner). The job,
the replays and the report fold the same outputs through :class:`LagBook`, so they give the same numbers.

* **records** = log end − committed offset, at each sample.
* **seconds** = how long ago the oldest unconsumed record (the one at the committed offset) was appended: the time
  the log end passed that offset, interpolated between the two samples around it (the method of
  kafka-lag-exporter). Below the oldest sample kept it is extrapolated at the samples' average rate; with one sample
  or no growth it is a lower bound. Each figure names its method (``METHODS``).
* **a rebalance's lag cost**, per partition it left without an owner: the lag the partition built from its release
  to the new owner's first commit, i.e. the lag just before that commit less the lag at the release, in records and
  seconds, each end against the log end interpolated between the samples around it. The ``rebalance`` output is
  written when the group settles, before any new owner has committed, so the cost follows in a ``rebalance_lag``
  output once every such partition has had its first commit and a sample after it (or was released again first:
  unknown), naming the rebalance by its group, ``ts`` and generation. As partition unavailability does
  (docs/figures.md), the cost leaves out the time the group had no member at all, and shows it apart: the records
  appended while the group had no member, and the time the oldest unconsumed record waited then. Where those
  spans lay is read from the members' outputs (``member_joined``, ``member_left``, ``member_expired``); they must add
  up to the span's ``no_members_ms``, which the coordinator wrote, else the split is unknown.

Memory is bounded: ``samples`` log-end samples and ``commits`` commits per partition, and ``max_partitions``
(group, partition) entries, the least recently touched dropped first. A figure that cannot be known is None.
Pure and deterministic; nothing here knows Spark.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from streaming.coordinator.outputs import (
    LOG_END,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REPLACED,
    OFFSET_COMMIT,
    REBALANCE,
)

PARTITION_LAG = "partition_lag"  # lag of one partition at a log-end sample (derived from the outputs)
REBALANCE_LAG = "rebalance_lag"  # what a rebalance cost in lag, once its new owners committed

INTERPOLATED, EXTRAPOLATED, LOWER_BOUND, CAUGHT_UP = "interpolated", "extrapolated", "lower bound", "caught up"
METHODS = (INTERPOLATED, EXTRAPOLATED, LOWER_BOUND, CAUGHT_UP)

Sample = tuple[int, int]  # (ts, log end)


def offset_time(samples: Sequence[Sample], offset: int) -> tuple[float | None, str]:
    """When the record at ``offset`` was appended (the log end passed it), from log-end samples in time order, and
    how that was found: (None, CAUGHT_UP) when the samples do not reach it yet (nothing unconsumed)."""
    ends = [end for _, end in samples]
    i = bisect_right(ends, offset)  # the first sample whose log end is past the offset
    if i == len(samples):
        return None, CAUGHT_UP
    t1, e1 = samples[i]
    if i > 0:
        t0, e0 = samples[i - 1]
        return t0 + (offset + 1 - e0) / (e1 - e0) * (t1 - t0), INTERPOLATED
    first_t, first_e = samples[0]
    last_t, last_e = samples[-1]
    if last_e > first_e and last_t > first_t:  # older than every sample: back at the samples' average rate
        rate = (last_e - first_e) / (last_t - first_t)
        return first_t - (first_e - (offset + 1)) / rate, EXTRAPOLATED
    return float(first_t), LOWER_BOUND


def log_end_at(samples: Sequence[Sample], ts: int) -> int | None:
    """The log end at ``ts``: interpolated between the samples around it, else the last one before it (no later
    sample yet); None before the first sample."""
    i = bisect_right([t for t, _ in samples], ts)
    if i == 0:
        return None
    t0, e0 = samples[i - 1]
    if i == len(samples) or t0 == ts:
        return e0
    t1, e1 = samples[i]
    return e0 + (e1 - e0) * (ts - t0) // (t1 - t0)


def idle_at(marks: Sequence[tuple[int, float]], ts: int) -> float | None:
    """A running count (``_Partition.idle``) at ``ts``: interpolated between the marks around it, else the last one
    before it; None before the first."""
    i = bisect_right([t for t, _ in marks], ts)
    if i == 0:
        return None
    t0, c0 = marks[i - 1]
    if i == len(marks) or t0 == ts:
        return c0
    t1, c1 = marks[i]
    return c0 + (c1 - c0) * (ts - t0) / (t1 - t0)


def lag(samples: Sequence[Sample], committed: int | None, now: int) -> tuple[int | None, float | None, str | None]:
    """(records, seconds, method) at ``now`` for a partition whose group committed ``committed``, against the log
    end at ``now`` (``log_end_at``); None when that or the committed offset is not known."""
    samples = list(samples)
    end = log_end_at(samples, now)
    if end is None or committed is None:
        return None, None, None
    records = max(end - committed, 0)
    if records == 0:
        return 0, 0.0, CAUGHT_UP
    appended, method = offset_time(samples, committed)
    return records, max(now - appended, 0) / 1000, method


@dataclass
class _Pending:
    """A partition a rebalance left without an owner, until its new owner's first commit."""

    rebalance: tuple  # (ts, generation) of the rebalance that closed the span
    released_ts: int | None
    taken_ts: int
    at_release: tuple  # (records, seconds, method) at the release, as known when the rebalance ended
    no_members_ms: int | None = 0  # of the span, the time the group had no member (the coordinator's figure)
    idle_at_release: float | None = None  # records appended with no member, counted up to the release (_Partition)
    first_commit_ts: int | None = None
    committed_before: int | None = None  # the committed offset just before the new owner's first commit


@dataclass
class _Partition:
    samples: deque = field(default_factory=deque)  # (ts, log end)
    # (ts, records appended while the group had no member, counted from the first sample) at each sample: the log
    # end's growth between two samples, in the share of that time the group had no member
    idle: deque = field(default_factory=deque)
    commits: deque = field(default_factory=deque)  # (commit ts, offset); a tombstone clears it
    pending: _Pending | None = None

    def committed(self, ts: int) -> int | None:
        """The committed offset at ``ts`` (None: none kept from then)."""
        before = [offset for at, offset in self.commits if at <= ts]
        return before[-1] if before else None


@dataclass
class _Presence:
    """When a group had no member, from its members' outputs: the spans without one, the latest kept."""

    members: set = field(default_factory=set)
    empty_since: int | None = None
    spans: deque = field(default_factory=lambda: deque(maxlen=16))  # (from, to) without a member

    def update(self, o: dict) -> None:
        kind, ts = o["type"], o["ts"]
        if kind == MEMBER_JOINED or kind == MEMBER_REPLACED:
            self.members.discard(o.get("previous_member_id"))
            self.members.add(o["member_id"])
            if self.empty_since is not None:
                self.spans.append((self.empty_since, ts))
                self.empty_since = None
        elif (kind == MEMBER_EXPIRED or kind == MEMBER_LEFT and not o.get("temporary")) and o[
            "member_id"
        ] in self.members:
            self.members.discard(o["member_id"])
            if not self.members:
                self.empty_since = ts

    def without_members(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end] the group had no member in."""
        spans = list(self.spans) + ([(self.empty_since, end)] if self.empty_since is not None else [])
        return [(max(a, start), min(b, end)) for a, b in spans if min(b, end) > max(a, start)]


class LagBook:
    """Lag per (group, partition) and per rebalance, folded from the outputs (``add``)."""

    def __init__(self, samples: int = 32, commits: int = 8, max_partitions: int = 10_000) -> None:
        self.samples, self.commits, self.max_partitions = samples, commits, max_partitions
        self.partitions: OrderedDict[tuple[str, str, int], _Partition] = OrderedDict()
        self.open: dict[tuple[str, tuple], dict[tuple[str, int], list | None]] = {}  # cost rows per rebalance
        self.latest: dict[str, dict[tuple[str, int], dict]] = {}  # group -> partition -> its last partition_lag
        self.presence: OrderedDict[str, _Presence] = OrderedDict()  # at most max_partitions groups
        self._dropped: list[dict] = []  # rebalance_lag completed by dropping a partition, out with the next add

    def add_all(self, outputs: Iterable[dict]) -> list[dict]:
        return [derived for o in outputs for derived in self.add(o)]

    def add(self, o: dict) -> list[dict]:
        """Fold one output; returns what it derives (``partition_lag`` for a sample, ``rebalance_lag`` when a
        rebalance's cost is complete)."""
        kind = o.get("type")
        try:
            out = (
                self._sample(o)
                if kind == LOG_END
                else self._commit(o)
                if kind == OFFSET_COMMIT
                else self._rebalance(o)
                if kind == REBALANCE
                else []
            )
            if kind in (MEMBER_JOINED, MEMBER_REPLACED, MEMBER_LEFT, MEMBER_EXPIRED):
                self._presence(o["group_id"]).update(o)
        except (KeyError, TypeError, ValueError):  # an output without the fields lag needs: not a figure
            out = []
        if self._dropped:
            out, self._dropped = self._dropped + out, []
        return out

    def current(self, group_id: str) -> list[dict]:
        """The group's latest ``partition_lag`` per partition, in partition order."""
        return [figure for _, figure in sorted(self.latest.get(group_id, {}).items())]

    # ---------------------------------------------------------------------------------------------------------
    def _partition(self, group: str, topic: str, partition: int) -> _Partition:
        key = (group, topic, partition)
        p = self.partitions.get(key)
        if p is None:
            p = self.partitions[key] = _Partition(
                samples=deque(maxlen=self.samples), idle=deque(maxlen=self.samples), commits=deque(maxlen=self.commits)
            )
            while len(self.partitions) > self.max_partitions:
                (g, t, n), dropped = self.partitions.popitem(last=False)
                figures = self.latest.get(g, {})
                figures.pop((t, n), None)
                if not figures:
                    self.latest.pop(g, None)
                if dropped.pending is not None:  # measured with what is known; the rebalance's others go on
                    self._dropped += self._close(g, (t, n), dropped, None)
        else:
            self.partitions.move_to_end(key)
        return p

    def _presence(self, group: str) -> _Presence:
        presence = self.presence.get(group)
        if presence is None:
            presence = self.presence[group] = _Presence()
            while len(self.presence) > self.max_partitions:
                self.presence.popitem(last=False)
        else:
            self.presence.move_to_end(group)
        return presence

    def _sample(self, o: dict) -> list[dict]:
        p = self._partition(o["group_id"], o["topic"], o["partition"])
        if p.samples and (o["offset"] < p.samples[-1][1]):
            p.samples.clear()  # the log went back (topic recreated): the old samples mean nothing
            p.idle.clear()
        if p.samples and o["ts"] <= p.samples[-1][0]:
            if o["ts"] < p.samples[-1][0]:
                return []  # out of order: kept samples stay in time order
            p.samples.pop()  # the same moment again: the later reading wins
            p.idle.pop()
        idle = p.idle[-1][1] if p.idle else 0.0
        presence = self.presence.get(o["group_id"])
        if p.samples and presence is not None:
            (t0, e0), t1 = p.samples[-1], o["ts"]
            without = sum(b - a for a, b in presence.without_members(t0, t1))
            idle += (o["offset"] - e0) * without / (t1 - t0)
        p.samples.append((o["ts"], o["offset"]))
        p.idle.append((o["ts"], idle))
        committed = p.committed(o["ts"])
        records, seconds, method = lag(p.samples, committed, o["ts"])
        figure = {
            "type": PARTITION_LAG,
            "group_id": o["group_id"],
            "ts": o["ts"],
            "topic": o["topic"],
            "partition": o["partition"],
            "log_end": o["offset"],
            "committed": committed,
            "lag_records": records,
            "lag_seconds": seconds,
            "lag_seconds_method": method,
        }
        self.latest.setdefault(o["group_id"], {})[(o["topic"], o["partition"])] = figure
        out = [figure]
        if p.pending is not None and p.pending.first_commit_ts is not None and o["ts"] >= p.pending.first_commit_ts:
            out += self._close(o["group_id"], (o["topic"], o["partition"]), p, o["ts"])
        return out

    def _commit(self, o: dict) -> list[dict]:
        p = self._partition(o["group_id"], o["topic"], o["partition"])
        if o.get("tombstone"):
            p.commits.clear()
            return []
        ts = o.get("commit_timestamp", o.get("ts"))
        if ts is None:
            return []
        pending = p.pending
        if pending is not None and ts >= pending.taken_ts and pending.first_commit_ts is None:
            # The new owner's first commit; the cost is measured once a sample after it brackets the log end then.
            pending.first_commit_ts, pending.committed_before = ts, p.committed(ts)
        p.commits.append((ts, o["offset"]))
        return []

    def _rebalance(self, o: dict) -> list[dict]:
        group = o["group_id"]
        rebalance = (o["ts"], o.get("generation", o.get("group_epoch")))
        out: list[dict] = []
        spans = o.get("partitions_without_owner") or []
        for topic, partition, released, taken, no_members_ms in spans:
            p = self._partition(group, topic, int(partition))
            if p.pending is not None:  # released again: measured with what is known (no first commit: unknown)
                out += self._close(group, (topic, int(partition)), p, o["ts"])
            at_release = lag(p.samples, p.committed(released), released) if released is not None else (None, None, None)
            p.pending = _Pending(
                rebalance,
                released,
                taken,
                at_release,
                no_members_ms,
                idle_at(p.idle, released) if released is not None else None,
            )
            self.open.setdefault((group, rebalance), {})[(topic, int(partition))] = None
        return out

    def _close(self, group: str, tp: tuple[str, int], p: _Partition, now: int | None) -> list[dict]:
        """The partition's cost row, from the samples now kept (those around the release and the first commit
        where they still are); ``now``: when (None: the partition is dropped)."""
        pending, p.pending = p.pending, None
        at_release = pending.at_release
        if pending.released_ts is not None and p.committed(pending.released_ts) is not None:
            again = lag(p.samples, p.committed(pending.released_ts), pending.released_ts)
            at_release = again if again[0] is not None else at_release
        first = pending.first_commit_ts
        before = lag(p.samples, pending.committed_before, first) if first is not None else (None, None, None)
        rows = self.open.get((group, pending.rebalance))
        if rows is None:
            return []
        idle = self._without_members(group, p, pending) if first is not None else (None, None)
        rows[tp] = [
            tp[0],
            tp[1],
            pending.released_ts,
            first,
            at_release[0],
            before[0],
            at_release[1],
            before[1],
            before[2],
            *idle,
        ]
        if any(row is None for row in rows.values()):
            return []
        del self.open[(group, pending.rebalance)]
        return [
            rebalance_lag(
                group, now if now is not None else pending.taken_ts, pending.rebalance, [rows[k] for k in sorted(rows)]
            )
        ]

    def _without_members(self, group: str, p: _Partition, pending: _Pending) -> tuple[int | None, float | None]:
        """(records appended, seconds the oldest unconsumed record waited) while the group had no member, between
        the release and the new owner's first commit; None when unknown (the members' outputs do not account for
        the coordinator's ``no_members_ms``, or the samples do not reach)."""
        if pending.no_members_ms == 0:
            return 0, 0.0
        first, released = pending.first_commit_ts, pending.released_ts
        presence = self.presence.get(group)
        if pending.no_members_ms is None or released is None or presence is None:
            return None, None
        spans = presence.without_members(released, first)
        idle_then = idle_at(p.idle, first)
        if (
            sum(b - a for a, b in spans) != pending.no_members_ms
            or idle_then is None
            or pending.idle_at_release is None
        ):
            return None, None
        records = round(idle_then - pending.idle_at_release)
        if pending.committed_before is None:
            return records, None
        appended, method = offset_time(p.samples, pending.committed_before)
        if method == CAUGHT_UP:
            return records, 0.0
        # The oldest unconsumed record at the first commit waited from its arrival, or from the release if it came
        # before: the part of that wait while the group had no member.
        start = max(released, appended)
        return records, round(sum(max(b - max(a, start), 0) for a, b in spans) / 1000, 3)


def built(row: list) -> tuple[int | None, float | None]:
    """(records, seconds) a partition's lag grew from its release to its new owner's first commit, less what it grew
    while the group had no member (a cost row: ``[topic, partition, released_ts, first_commit_ts, records at release,
    records before the first commit, seconds at release, seconds before the first commit, method, records appended
    with no member, seconds waited with no member]``)."""
    _, _, _, _, r0, r1, s0, s1, _, idle_records, idle_seconds = row
    return (
        None if r0 is None or r1 is None or idle_records is None else max(r1 - r0 - idle_records, 0),
        None if s0 is None or s1 is None or idle_seconds is None else max(round(s1 - s0 - idle_seconds, 3), 0.0),
    )


def rebalance_lag(group_id: str, ts: int, rebalance: tuple, rows: list[list]) -> dict:
    """The ``rebalance_lag`` output: per partition the cost row (see ``built``); in total the records built (sum)
    and the seconds (the most any one partition fell behind), without the time the group had no member, and that
    time's apart; None when any partition's is unknown."""
    costs = [built(r) for r in rows]

    def total(values: list, add) -> int | float | None:
        return None if any(v is None for v in values) else add(values)

    return {
        "type": REBALANCE_LAG,
        "group_id": group_id,
        "ts": ts,
        "rebalance_ts": rebalance[0],
        "generation": rebalance[1],
        "lag_records": total([c[0] for c in costs], sum),
        "lag_seconds": total([c[1] for c in costs], lambda v: max(v, default=0.0)),
        "lag_seconds_method": ", ".join(sorted({r[8] for r in rows if r[8]})) or None,
        "no_members_lag_records": total([r[9] for r in rows], sum),
        "no_members_lag_seconds": total([r[10] for r in rows], lambda v: max(v, default=0.0)),
        "partitions": rows,
    }
