"""Keyed by group id or by __consumer_offsets partition, the stateful stage gives every group the same outputs.

Spark is played here by a small loop with its processing-time semantics (a key is called when it has input, or when
its timeout is due; every call clears the timeout unless the call sets it again), so that a long feed of many groups,
with expiries that fire on timers alone, runs in a second. tests/spark/test_job.py runs both keyings through real Spark.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.job import JobOptions, _keyed_by_partition, _parse_frame, make_state_function

TRIGGER_MS = 1_000


class SparkGroupState:
    """What applyInPandasWithState's GroupState does for one key in one call, processing time."""

    def __init__(self, value, now_ms: int, timed_out: bool):
        self.value, self.now_ms, self.hasTimedOut = value, now_ms, timed_out
        self.timeout_at = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def getCurrentProcessingTimeMs(self) -> int:
        return self.now_ms

    def setTimeoutDuration(self, ms: int) -> None:
        self.timeout_at = self.now_ms + ms


def kafka_rows(events: list[dict], first_offset: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [e["group_id"].encode() for e in events],
            "value": [json.dumps(e).encode() for e in events],
            "topic": "events",
            "partition": 0,
            "offset": range(first_offset, first_offset + len(events)),
            "timestamp_ms": [e["ts"] for e in events],
        }
    )


def run_job(feed: list[dict], options: JobOptions, partitions: int | None, end_ms: int) -> dict[str, list[dict]]:
    """Micro-batches of TRIGGER_MS; returns each group's outputs in order."""
    on_key = make_state_function(options)
    column = "coordinator_partition" if partitions else "group_id"
    states: dict = {}  # key -> (value, timeout at)
    outputs: dict[str, list[dict]] = {}
    offset, start = 0, feed[0]["ts"]
    for batch_end in range(start + TRIGGER_MS, end_ms + 1, TRIGGER_MS):
        events = [e for e in feed if batch_end - TRIGGER_MS <= e["ts"] < batch_end]
        frame = _parse_frame(kafka_rows(events, offset), 10**12) if events else None
        offset += len(events)
        if frame is not None and partitions:
            frame = _keyed_by_partition(frame, partitions)
        by_key = {k: rows for k, rows in frame.groupby(column, sort=True)} if frame is not None else {}
        now = batch_end + options.timeout_grace_ms  # timers then run up to batch_end
        due = sorted(k for k, (_, at) in states.items() if at is not None and at <= now and k not in by_key)
        for key in list(by_key) + due:
            value = states.get(key, (None, None))[0]
            state = SparkGroupState(value, now, timed_out=key not in by_key)
            rows = [by_key[key][["run"]]] if key in by_key else []
            for out in on_key((key,), iter(rows), state):
                for group_id, payload in zip(out["group_id"], out["payload"]):
                    outputs.setdefault(group_id, []).append(json.loads(payload))
            if state.exists:
                states[key] = (state.value, state.timeout_at)
            else:
                states.pop(key, None)
    return outputs


@pytest.mark.parametrize("partitions", [1, 3])
def test_keyed_by_partition_every_group_gets_what_it_gets_keyed_by_group(partitions):
    start = 1_700_000_000_000
    feed = Simulator(SimulationSettings(groups=12, seed=5, churn_interval_ms=8_000), start_ms=start).run_until(
        start + 60_000
    )
    end = start + 80_000  # 20 s of silence at the end: the last members expire on timers alone
    settings = {"group.min.session.timeout.ms": 1_000}
    by_group = run_job(feed, JobOptions(coordinator=settings), None, end)
    by_partition = run_job(
        feed,
        JobOptions(
            coordinator={**settings, "offsets.topic.num.partitions": partitions}, state_key="coordinator-partition"
        ),
        partitions,
        end,
    )
    assert by_partition == by_group
    assert len(by_group) == 12
    expired = [o for outputs in by_group.values() for o in outputs if o["type"] == "member_expired"]
    assert expired and any(o["ts"] > start + 60_000 for o in expired), "expiries after the feed ended, on timers"
