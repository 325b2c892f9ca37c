"""The Spark shell around the coordinator: same answers as the pure model, dead letters kept, timeouts that fire with
no further input, exact resumption from a checkpoint.

These tests feed the job Kafka-shaped rows from parquet files (a real Spark streaming source) so that they exercise
the stateful stage alone; tests/tracker/test_tracker_kafka.py runs the whole path through the broker.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pandas as pd
import pytest

from offsets_store.codec import record_identity
from offsets_store.store import STORE_TYPES
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES
from streaming.spark.job import JobOptions, build_tracker_stream

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def write_rows(
    directory: Path, name: str, values: list[bytes], keys: list[bytes], first_offset: int, ts: list[int]
) -> None:
    df = pd.DataFrame(
        {
            "key": keys,
            "value": values,
            "topic": "events",
            "partition": 0,
            "offset": range(first_offset, first_offset + len(values)),
            "timestamp": pd.to_datetime(ts, unit="ms"),
        }
    )
    df["partition"] = df["partition"].astype("int32")
    df.to_parquet(directory / f"{name}.parquet", coerce_timestamps="us")


def write_events(directory: Path, name: str, events: list[dict], first_offset: int) -> None:
    write_rows(
        directory,
        name,
        [json.dumps(e).encode() for e in events],
        [e["group_id"].encode() for e in events],
        first_offset,
        [e["ts"] for e in events],
    )


class Collector:
    def __init__(self):
        self.outputs: list[dict] = []

    def __call__(self, df, batch_id):
        self.outputs.extend(json.loads(r.payload) for r in df.orderBy("group_id", "seq").collect())


def start(spark, source: Path, checkpoint: Path, options: JobOptions, sink: Collector):
    raw = spark.readStream.schema(KAFKA_SCHEMA).parquet(str(source))
    return (
        build_tracker_stream(raw, options)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def reference(events: list[dict], config: CoordinatorConfig) -> dict[str, list[dict]]:
    coordinator = GroupCoordinator(config)
    out = []
    for e in events:
        out += coordinator.handle(e)
    by_group: dict[str, list[dict]] = {}
    for o in out:
        if o["type"] in DEFAULT_OUTPUT_TYPES:
            by_group.setdefault(o["group_id"], []).append(o)
    return by_group


def by_group(outputs: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for o in outputs:
        if o["type"] != "dead_letter":
            grouped.setdefault(o["group_id"], []).append(json.loads(json.dumps(o)))
    return grouped


def assert_compacted_prefix(got: list[dict], want: list[dict]) -> int:
    """``got`` is a prefix of ``want`` with store records left out, each of them replaced by a later record of its
    key that ``got`` has. Returns how much of ``want`` it covers."""
    kept, dropped, i = [], [], 0
    for o in got:
        while i < len(want) and want[i] != o:
            assert want[i]["type"] in STORE_TYPES, f"missing from the job's outputs: {want[i]}"
            dropped.append(i)
            i += 1
        assert i < len(want), f"not an output of the pure model: {o}"
        kept.append(i)
        i += 1
    for d in dropped:
        assert any(
            j > d and want[j]["type"] in STORE_TYPES and record_identity(want[j]) == record_identity(want[d])
            for j in kept
        ), f"dropped without a later record of its key: {want[d]}"
    return i


@pytest.fixture(scope="module")
def feed() -> list[dict]:
    start = 1_700_000_000_000  # Spark treats event time 0 as already behind the initial watermark
    return Simulator(SimulationSettings(groups=2, seed=11, churn_interval_ms=10_000), start_ms=start).run_until(
        start + 150_000
    )


# Keyed by __consumer_offsets partition with ONE partition, every group shares one key and one state: the hardest case
# for keeping groups apart (their events, timers, dead letters and outputs).
STATE_KEYS = [
    pytest.param({}, id="group"),
    pytest.param(
        {"state_key": "coordinator-partition", "coordinator": {"offsets.topic.num.partitions": 1}},
        id="coordinator-partition",
    ),
]


@pytest.mark.parametrize("keying", STATE_KEYS)
def test_job_matches_the_pure_model_resumes_exactly_and_keeps_bad_input(spark, tmp_path, feed, keying):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    options = JobOptions(time_mode="event", watermark_delay="1 second", **keying)
    half = len(feed) // 2
    write_events(source, "a", feed[:half], 0)
    bad = [
        b"{not json",
        json.dumps({"type": "explode", "group_id": "group-0"}).encode(),
        json.dumps({"type": "heartbeat", "group_id": "group-0", "member_id": "m"}).encode(),  # no generation
        json.dumps({"type": "join", "group_id": "group-0", "protocols": "range"}).encode(),  # wrong type
        b"{" + b" " * (1 << 20) + b"}",
    ]  # oversized
    write_rows(source, "bad", bad, [b"group-0"] * len(bad), 10_000, [0] * len(bad))

    first = Collector()
    query = start(spark, source, checkpoint, options, first)
    query.processAllAvailable()
    query.stop()

    # Restart from the same checkpoint, then the rest of the feed arrives.
    write_events(source, "b", feed[half:], half)
    second = Collector()
    query = start(spark, source, checkpoint, options, second)
    query.processAllAvailable()
    query.stop()

    dead = [o for o in first.outputs + second.outputs if o["type"] == "dead_letter"]
    assert sorted(d["source"]["offset"] for d in dead) == list(range(10_000, 10_000 + len(bad)))
    reasons = " | ".join(d["reason"] for d in sorted(dead, key=lambda d: d["source"]["offset"]))
    for expected in ("not valid JSON", "unknown event type", "missing field 'generation'", "must be a list", "exceeds"):
        assert expected in reasons

    # Everything the pure model emits for events up to the watermark came out, once, in order -- but for the store's
    # records that a later record of their key in the same micro-batch replaced.
    got = by_group(first.outputs + second.outputs)
    want = reference(feed, CoordinatorConfig())
    for group_id, outputs in want.items():
        matched = assert_compacted_prefix(got[group_id], outputs)
        assert len(outputs) - matched <= 3, "only the last moments may still wait for the watermark"
    assert sum(len(o) for o in got.values()) < sum(len(o) for o in want.values()) - 100, "commits were compacted"
    assert any(o["type"] == "member_expired" for outputs in got.values() for o in outputs)


@pytest.mark.parametrize("keying", STATE_KEYS)
def test_session_timeout_fires_with_no_further_events(spark, tmp_path, keying):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    now = int(time.time() * 1000)
    join = {
        "type": "join",
        "group_id": "quiet",
        "member_id": "",
        "client_id": "c",
        "session_timeout_ms": 2_000,
        "protocols": [{"name": "range", "topics": ["t"]}],
        "ts": now,
    }
    events = [join, {"type": "topic_metadata", "group_id": "quiet", "topic": "t", "partitions": 2, "ts": now}]
    settings = {"group.min.session.timeout.ms": 1_000, "group.initial.rebalance.delay.ms": 0}
    # The coordinator hands out member ids deterministically: the id of the first new member of group "quiet".
    probe = GroupCoordinator(CoordinatorConfig.from_properties(settings))
    member_id = probe.handle(parse_event(join)[0])[0]["member_id"]
    assert member_id
    events.append(dict(join, member_id=member_id))
    write_events(source, "a", events, 0)
    sink = Collector()
    options = JobOptions(time_mode="processing", **{"coordinator": {}, **keying})
    options = dataclasses.replace(options, coordinator={**settings, **options.coordinator})
    query = start(spark, source, checkpoint, options, sink)
    try:
        deadline = time.time() + 180  # the first micro-batch alone can take a minute on a loaded machine
        while time.time() < deadline and not any(o["type"] == "member_expired" for o in sink.outputs):
            time.sleep(0.5)
    finally:
        query.stop()
    expired = [o for o in sink.outputs if o["type"] == "member_expired"]
    assert [e["member_id"] for e in expired] == [member_id]
    # Nothing arrived after the join, yet the group went PreparingRebalance -> CompletingRebalance -> ... -> Empty.
    assert [o["to"] for o in sink.outputs if o["type"] == "state_change"][-1] == "Empty"
