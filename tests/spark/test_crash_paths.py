"""Nothing that reaches the job stops it (issue #28): every field of a Kafka record is representable or dead-lettered
with a reason, and a group whose step raises is dead-lettered with the exception while every other group goes on.

A crash of the query is a crash loop: the restart reads the same records and dies again, with every group untracked.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import time

import pandas as pd
import pytest
from kafka import KafkaProducer

from offsets_store.store import compact
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.dead_letters import is_step_failure
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES
from streaming.spark.job import (
    PARTITION_STATE_VERSION,
    STATE_VERSION,
    JobOptions,
    _pack,
    _unpack,
    _unpack_run,
    make_state_function,
    parse_rows,
    trusted_time,
)
from streaming.views.live_view import LiveView
from streaming.views.metrics import Metrics

HOUR = 3_600_000
YEAR_9999 = 253402300799000  # 9999-12-31T23:59:59Z: a valid Kafka timestamp pandas cannot hold
INT64_MAX = 2**63 - 1  # what Kafka allows and Spark's microseconds cannot hold
NOW = int(time.time() * 1000)


# ------------------------------------------------------------------------------------------------ record times
# The ids name the cases without NOW, so every pytest-xdist worker collects the same tests.
@pytest.mark.parametrize(
    "event_ts, record_ms, want",
    [
        (NOW - 5_000, NOW - 4_000, NOW - 5_000),  # the event's own time
        (None, NOW - 4_000, NOW - 4_000),  # a live feed leaves time to its record
        (NOW - 5_000, -1, NOW - 5_000),  # a record from a broker before 0.10: no timestamp
        (NOW - 5_000, YEAR_9999, NOW - 5_000),  # a record stamped in the far future: the event's time still holds
    ],
    ids=["own-time", "record-time", "record-without-time", "record-in-9999"],
)
def test_an_event_keeps_a_time_it_can_be_trusted_with(event_ts, record_ms, want):
    assert trusted_time({"ts": event_ts}, record_ms, NOW, HOUR) == (want, None)


@pytest.mark.parametrize(
    "event_ts, record_ms, words",
    [
        (None, -1, "no time: the event has no ts and its record no timestamp"),
        (None, YEAR_9999, f"no trustworthy time: the event has no ts and its record's timestamp {YEAR_9999} is"),
        (YEAR_9999, NOW - 4_000, "ahead of its record's timestamp"),
        (NOW + 2 * HOUR, -1, f"ahead of the clock ({NOW}; its record's timestamp is -1)"),
        (YEAR_9999, YEAR_9999, f"ahead of the clock ({NOW}; its record's timestamp is {YEAR_9999})"),
    ],
    ids=["no-time", "record-in-9999", "ahead-of-record", "ahead-of-clock", "ahead-of-clock-record-in-9999"],
)
def test_a_time_nobody_can_trust_is_a_reason(event_ts, record_ms, words):
    ts, reason = trusted_time({"ts": event_ts}, record_ms, NOW, HOUR)
    assert ts is None and words in reason


def test_the_parse_stage_reads_every_record_timestamp_as_epoch_ms():
    """Null (a time Spark could not hold) and negative timestamps are "none"; no value reaches pandas' datetimes."""
    event = {"type": "heartbeat", "group_id": "g", "member_id": "m", "generation": 1}
    stamps = [YEAR_9999, -1, -5, None, NOW]
    frame = pd.DataFrame(
        {
            "key": [b"g"] * 5,
            "value": [json.dumps(event).encode()] * 5,
            "topic": "events",
            "partition": 0,
            "offset": range(5),
            "timestamp_ms": stamps,
        }
    )
    (parsed,) = parse_rows([frame])
    runs = [_unpack_run(r) for r in parsed["run"]]
    dead = [r.dead_letter for r in runs if r.dead_letter is not None]
    assert [d["source"]["offset"] for d in dead] == [0, 1, 2, 3]
    assert "ahead of the clock" in dead[0]["reason"] and all("no time" in d["reason"] for d in dead[1:])
    (good,) = [r for r in runs if r.events]
    assert good.offsets == [4] and good.events[0]["ts"] == NOW


# ------------------------------------------------------------------------------------------------ containment
class GroupState:
    """The slice of Spark's GroupState the state function uses, for one key in one call (processing time)."""

    def __init__(self, value=None):
        self.value, self.hasTimedOut, self.timeout_ms = value, False, None

    exists = property(lambda self: self.value is not None)
    get = property(lambda self: self.value)

    def update(self, value):
        self.value = value

    def remove(self):
        self.value = None

    def getCurrentProcessingTimeMs(self):
        return NOW

    def setTimeoutDuration(self, ms):
        self.timeout_ms = ms


UNREADABLE = b"\x09a state from a tracker version this one cannot read"


def kafka_frame(events: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [e["group_id"].encode() for e in events],
            "value": [json.dumps(e).encode() for e in events],
            "topic": "events",
            "partition": 0,
            "offset": range(len(events)),
            "timestamp_ms": [e["ts"] for e in events],
        }
    )


def one_call(on_key, key, rows: pd.DataFrame, state: GroupState) -> list[dict]:
    return [json.loads(p) for frame in on_key((key,), iter([rows[["run"]]]), state) for p in frame["payload"]]


@pytest.mark.parametrize("keying", ["group", "coordinator-partition"])
def test_a_group_whose_step_raises_is_dead_lettered_and_every_other_group_goes_on(keying):
    feed = Simulator(SimulationSettings(groups=2, seed=3), start_ms=NOW - 60_000).run_until(NOW - 30_000)
    poisoned = [dict(e, group_id="poisoned") for e in feed if e["group_id"] == "group-0"][:5]
    options = JobOptions(state_key=keying, coordinator={"offsets.topic.num.partitions": 1})
    on_key = make_state_function(options)
    (parsed,) = parse_rows([kafka_frame(feed + poisoned)], coordinator_partitions=1 if keying != "group" else None)
    if keying == "group":
        states = {g: GroupState((STATE_VERSION, UNREADABLE) if g == "poisoned" else None) for g in parsed["group_id"]}
        outputs = [o for g, rows in parsed.groupby("group_id") for o in one_call(on_key, g, rows, states[g])]
        assert states["poisoned"].value == (STATE_VERSION, UNREADABLE), "the failed group keeps its state"
    else:  # all three groups share one key and one state: the failure must not take the others' steps with it
        state = GroupState((PARTITION_STATE_VERSION, _pack({"poisoned": [UNREADABLE, None]})))
        outputs = one_call(on_key, 0, parsed, state)
        held = _unpack(state.value[1])
        assert held["poisoned"][0] == UNREADABLE and set(held) == {"poisoned", "group-0", "group-1"}
    failures = [o for o in outputs if is_step_failure(o)]
    assert len(failures) == len(poisoned) and {o["group_id"] for o in failures} == {"poisoned"}
    assert failures[0]["exception"]["type"] == "ValueError"
    assert "unsupported coordinator state version" in failures[0]["reason"]
    assert [json.loads(base64.b64decode(o["raw_base64"])) for o in failures] == [parse_event(e)[0] for e in poisoned], (
        "each failed event can be replayed as the job read it"
    )
    assert [o["source"]["offset"] for o in failures] == list(range(len(feed), len(feed) + len(poisoned)))
    # The other groups: exactly what the pure model says, timers up to the job's clock included.
    model = GroupCoordinator(CoordinatorConfig())
    want = [o for e in feed for o in model.handle(e)] + model.advance(NOW - options.timeout_grace_ms)
    for group_id in ("group-0", "group-1"):
        mine = compact([o for o in want if o["group_id"] == group_id and o["type"] in DEFAULT_OUTPUT_TYPES])
        assert [o for o in outputs if o["group_id"] == group_id] == json.loads(json.dumps(mine)) and mine
    # Seen where people look: counted per group and batch, and said in the live table.
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, outputs)
    assert view.step_failures == 1 and any("poisoned: its step failed (ValueError)" in r for r in view.recent)
    assert "GROUP STEP FAILURES 1" in view.render()
    metrics = Metrics()
    metrics.update(0, outputs)
    assert metrics.registry.get_sample_value("rebalance_tracker_group_step_failures_total", {"group": "poisoned"}) == 1


# ------------------------------------------------------------------------------------------------ through the job
def read_to(query, topic: str) -> int:
    """How far the query has read the (one-partition) topic, by its last completed batch."""
    ends = [
        json.loads(p["sources"][0]["endOffset"])
        if isinstance(p["sources"][0]["endOffset"], str)
        else p["sources"][0]["endOffset"]
        for p in query.recentProgress
        if p.get("sources")
    ]
    return max((int(e.get(topic, {}).get("0", 0)) for e in ends if e), default=0)


def hostile_records(feed: list[dict]) -> list[tuple[bytes | None, bytes | None, int, list]]:
    """(key, value, record timestamp, headers): the feed's events with well-formed but hostile record fields mixed
    in. Every value here is one Kafka allows."""
    heartbeat = {"type": "heartbeat", "group_id": "group-0", "member_id": "nobody", "generation": 1}
    records = [(e["group_id"].encode(), json.dumps(e).encode(), e["ts"], []) for e in feed]
    at = len(records) // 2
    records[at:at] = [
        (b"group-0", json.dumps({**heartbeat, "ts": feed[at]["ts"]}).encode(), YEAR_9999, []),  # far-future record
        (b"group-0", json.dumps(heartbeat).encode(), YEAR_9999, []),  # no ts, far-future record: no time
        (b"group-0", json.dumps(heartbeat).encode(), -1, []),  # no ts, no record time
        (b"group-0", json.dumps({**heartbeat, "ts": feed[at]["ts"]}).encode(), INT64_MAX, []),
        (
            b"group-0",
            json.dumps({**heartbeat, "ts": feed[at]["ts"]}).encode(),
            feed[at]["ts"],
            [("x" * 100, b"\xff\xfe not UTF-8"), ("big", b"h" * 300_000)],
        ),  # headers nobody reads
        (b"\xff\xfe", json.dumps({**heartbeat, "ts": feed[at]["ts"]}).encode(), feed[at]["ts"], []),  # bad key
        (None, b"not json", feed[at]["ts"], []),
        (b"group-1", None, feed[at]["ts"], []),
    ]
    return records


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("time_mode, source", [("processing", "python"), ("event", "confluent")])
def test_hostile_record_fields_are_dead_lettered_and_the_job_goes_on(
    spark, kafka_bootstrap, topic_name, tmp_path, time_mode, source
):
    from streaming.kafka_client.topics import ensure_topics
    from streaming.tracker import start_tracker
    from tests.broker_history import wait_until
    from tests.tracker.test_tracker_kafka import read_all, tracker_config

    start = NOW - 120_000
    feed = Simulator(SimulationSettings(groups=2, seed=8, churn_interval_ms=6_000), start_ms=start).run_until(
        start + 60_000
    )
    config = dataclasses.replace(
        tracker_config(kafka_bootstrap, topic_name, tmp_path), time_mode=time_mode, kafka_source=source
    )
    ensure_topics(kafka_bootstrap, {config.events_topic: 1})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_request_size=2_000_000)
    for key, value, ts, headers in hostile_records(feed):
        producer.send(config.events_topic, key=key, value=value, timestamp_ms=ts, headers=headers)
    producer.flush()
    producer.close()
    records = len(hostile_records(feed))
    tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
    try:
        # (processAllAvailable never returns in processing time: the groups' session timers keep batches coming.)
        wait_until(
            lambda: read_to(tracker.query, config.events_topic) >= records or not tracker.query.isActive,
            timeout_s=300,
            what="the job read every record",
        )
        assert tracker.query.isActive, tracker.query.exception()
    finally:
        tracker.stop()
    dead = [json.loads(r.value) for r in read_all(kafka_bootstrap, config.dlq_topic)]
    reasons = sorted(d["reason"] for d in dead)
    assert len(dead) == 4, reasons
    assert sum(r.startswith("no time: the event has no ts") for r in reasons) == 1
    assert sum(r.startswith("no trustworthy time") for r in reasons) == 1
    assert sum("not valid JSON" in r for r in reasons) == 1 and sum("empty record value" in r for r in reasons) == 1
    # Every good event went through: each group's story starts as the pure model's (the hostile-timestamped
    # heartbeats with a ts of their own are answered UNKNOWN_MEMBER_ID, which the outputs topic leaves out; in
    # processing time the sessions then run out on the wall clock, which the model was not asked about).
    got = [json.loads(r.value) for r in read_all(kafka_bootstrap, config.outputs_topic)]
    model = GroupCoordinator(CoordinatorConfig())
    want = [o for e in feed for o in model.handle(e) if o["type"] == "rebalance"]
    for group_id in ("group-0", "group-1"):
        rounds = [(o["generation"], o["assignment"]) for o in want if o["group_id"] == group_id]
        assert (
            rounds
            and [
                (o["generation"], o["assignment"])
                for o in got
                if o["type"] == "rebalance" and o["group_id"] == group_id
            ][: len(rounds)]
            == rounds
        )


@pytest.mark.spark
def test_a_running_job_goes_on_past_a_group_it_cannot_step(spark, tmp_path):
    """A real streaming query: one group's state cannot be read (as a state written by another tracker version would
    be), delivered by the restore source a fresh checkpoint reads. The query stays up, every other group is tracked
    as the pure model says, and the failure is in the dead letters, the metrics and the live table."""
    from streaming.spark.job import build_tracker_stream
    from streaming.spark.restore import RESTORE_TOPIC, restore_stream, write_restore_rows
    from tests.spark.test_job import KAFKA_SCHEMA, Collector, assert_compacted_prefix, by_group, reference, write_events

    start = 1_700_000_000_000
    feed = Simulator(SimulationSettings(groups=2, seed=11, churn_interval_ms=10_000), start_ms=start).run_until(
        start + 60_000
    )
    poisoned = [dict(e, group_id="poisoned") for e in feed if e["group_id"] == "group-0"]
    source, checkpoint, restore = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "restore"
    source.mkdir()
    write_events(source, "a", sorted(feed + poisoned, key=lambda e: e["ts"]), 0)
    write_restore_rows(restore, {"poisoned": UNREADABLE}, start)
    sink = Collector()
    options = JobOptions(time_mode="event", watermark_delay="1 second")
    raw = spark.readStream.schema(KAFKA_SCHEMA).parquet(str(source))
    query = (
        build_tracker_stream(raw, options, restore_stream(spark, restore))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        assert query.isActive, query.exception()
    finally:
        query.stop()
    failures = [o for o in sink.outputs if is_step_failure(o)]
    assert {o["group_id"] for o in failures} == {"poisoned"}
    from_feed = [o for o in failures if o["source"] and o["source"]["topic"] != RESTORE_TOPIC]
    assert len(from_feed) == len(poisoned), "every event of the group is a dead letter, to replay once fixed"
    assert all(o["exception"]["type"] == "ValueError" for o in failures)
    got, want = by_group(sink.outputs), reference(feed, CoordinatorConfig())
    for group_id, outputs in want.items():
        assert len(outputs) - assert_compacted_prefix(got[group_id], outputs) <= 3
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, sink.outputs)
    assert view.step_failures >= 1 and "GROUP STEP FAILURES" in view.render()
    assert set(view.groups) >= {"group-0", "group-1"}
