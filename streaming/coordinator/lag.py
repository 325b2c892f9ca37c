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
  unknown), naming the rebalance by its group, ``ts`` and generation.

Memory is bounded: ``samples`` log-end samples and ``commits`` commits per partition, and ``max_partitions``
(group, partition) entries, the least recently touched dropped first. A figure that cannot be known is None.
Pure and deterministic; nothing here knows Spark.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from streaming.coordinator.outputs import LOG_END, OFFSET_COMMIT, REBALANCE

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
    first_commit_ts: int | None = None
    committed_before: int | None = None  # the committed offset just before the new owner's first commit


@dataclass
class _Partition:
    samples: deque = field(default_factory=deque)  # (ts, log end)
    commits: deque = field(default_factory=deque)  # (commit ts, offset); a tombstone clears it
    pending: _Pending | None = None

    def committed(self, ts: int) -> int | None:
        """The committed offset at ``ts`` (None: none kept from then)."""
        before = [offset for at, offset in self.commits if at <= ts]
        return before[-1] if before else None


class LagBook:
    """Lag per (group, partition) and per rebalance, folded from the outputs (``add``)."""

    def __init__(self, samples: int = 32, commits: int = 8, max_partitions: int = 10_000) -> None:
        self.samples, self.commits, self.max_partitions = samples, commits, max_partitions
        self.partitions: OrderedDict[tuple[str, str, int], _Partition] = OrderedDict()
        self.open: dict[tuple[str, tuple], dict[tuple[str, int], list | None]] = {}  # cost rows per rebalance
        self.latest: dict[str, dict[tuple[str, int], dict]] = {}  # group -> partition -> its last partition_lag
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
            p = self.partitions[key] = _Partition(deque(maxlen=self.samples), deque(maxlen=self.commits))
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

    def _sample(self, o: dict) -> list[dict]:
        p = self._partition(o["group_id"], o["topic"], o["partition"])
        if p.samples and (o["offset"] < p.samples[-1][1]):
            p.samples.clear()  # the log went back (topic recreated): the old samples mean nothing
        if p.samples and o["ts"] <= p.samples[-1][0]:
            if o["ts"] < p.samples[-1][0]:
                return []  # out of order: kept samples stay in time order
            p.samples.pop()  # the same moment again: the later reading wins
        p.samples.append((o["ts"], o["offset"]))
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
        for topic, partition, released, taken, _ in spans:
            p = self._partition(group, topic, int(partition))
            if p.pending is not None:  # released again: measured with what is known (no first commit: unknown)
                out += self._close(group, (topic, int(partition)), p, o["ts"])
            at_release = lag(p.samples, p.committed(released), released) if released is not None else (None, None, None)
            p.pending = _Pending(rebalance, released, taken, at_release)
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
        ]
        if any(row is None for row in rows.values()):
            return []
        del self.open[(group, pending.rebalance)]
        return [
            rebalance_lag(
                group, now if now is not None else pending.taken_ts, pending.rebalance, [rows[k] for k in sorted(rows)]
            )
        ]


def built(row: list) -> tuple[int | None, float | None]:
    """(records, seconds) a partition's lag grew from its release to its new owner's first commit (a cost row:
    ``[topic, partition, released_ts, first_commit_ts, records at release, records before the first commit,
    seconds at release, seconds before the first commit, method]``)."""
    _, _, _, _, r0, r1, s0, s1, _ = row
    return (
        None if r0 is None or r1 is None else max(r1 - r0, 0),
        None if s0 is None or s1 is None else max(round(s1 - s0, 3), 0.0),
    )


def rebalance_lag(group_id: str, ts: int, rebalance: tuple, rows: list[list]) -> dict:
    """The ``rebalance_lag`` output: per partition the cost row (see ``built``); in total the records built (sum)
    and the seconds (the most any one partition fell behind); None when any partition's is unknown."""
    costs = [built(r) for r in rows]
    records = [c[0] for c in costs]
    seconds = [c[1] for c in costs]
    return {
        "type": REBALANCE_LAG,
        "group_id": group_id,
        "ts": ts,
        "rebalance_ts": rebalance[0],
        "generation": rebalance[1],
        "lag_records": None if any(r is None for r in records) else sum(records),
        "lag_seconds": None if any(s is None for s in seconds) else max(seconds, default=0.0),
        "lag_seconds_method": ", ".join(sorted({r[8] for r in rows if r[8]})) or None,
        "partitions": rows,
    }
