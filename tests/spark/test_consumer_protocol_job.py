"""Consumer-protocol (KIP-848) groups through the streaming job, end to end on the session broker: a feed of two
consumer groups (one switches to the classic protocol when it empties) mixed with a simulated classic group runs
through ``rebalance-tracker run``'s job, stopped and restarted on its checkpoint, then restarted once more with the
checkpoint lost and the store kept. The outputs topic must hold exactly the pure model's outputs for the same feed
and the same restarts (``streaming.coordinator.routing``, the lost checkpoint rebuilt with ``restore.group_states``
as the job does), and the store exactly the model's records."""

from __future__ import annotations

import io
import json
import shutil

import pytest

from offsets_store import open_store
from offsets_store.codec import encode_record
from offsets_store.sqlite_store import SqliteStore
from offsets_store.store import STORE_TYPES
from streaming.kafka_client.topics import ensure_topics
from streaming.tracker import TrackerConfig, start_tracker
from streaming.coordinator import parse_event
from streaming.coordinator.routing import Configs, GroupModel, GroupModels
from streaming.feeds.publish import encode_event
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES
from streaming.spark.restore import POSITION_GROUP, group_states, load_time
from streaming.views.live_view import LiveView
from tests.consumer_feed import consumer_groups_feed
from tests.tracker.test_tracker_kafka import produce, read_all

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
START = 1_700_000_000_000
SETTINGS = {"group.consumer.heartbeat.interval.ms": "4000"}


def feed() -> list[dict]:
    configs = Configs.from_properties(SETTINGS)
    consumer = consumer_groups_feed(START, duration_ms=110_000, configs=configs)
    classic = Simulator(SimulationSettings(groups=1, seed=5, churn_interval_ms=15_000), start_ms=START).run_until(
        START + 110_000
    )
    return sorted(consumer + classic, key=lambda e: e["ts"])  # stable: each group's own order is kept


def parsed(events):
    return [parse_event(e)[0] for e in events]


def quiet_points(events: list[dict], configs: Configs) -> list[int]:
    """Cuts (event counts) after which no group has a timer due by the last event's time: there the job, whose
    timers follow the watermark, and the model, whose timers fire before each group's next event, agree on what
    has fired -- and so on what the store holds."""
    models, points = GroupModels(configs), []
    for i, e in enumerate(parsed(events)):
        models.handle(e)
        deadlines = [m.next_deadline() for m in models.models.values()]
        if all(d is None or d > e["ts"] for d in deadlines):
            points.append(i + 1)
    return points


def run_model(models: GroupModels, events: list[dict]) -> list[dict]:
    return [o for e in parsed(events) for o in models.handle(e) if o["type"] in DEFAULT_OUTPUT_TYPES]


def topic_view(outputs: list[dict]) -> dict[str, list[dict]]:
    """What the outputs topic carries, per group, as JSON (the store's records go to the store)."""
    grouped: dict[str, list[dict]] = {}
    for o in outputs:
        if o["type"] not in STORE_TYPES:
            grouped.setdefault(o["group_id"], []).append(json.loads(json.dumps(o, sort_keys=True)))
    return grouped


def live(records: list[dict]) -> list[tuple]:
    """The store's live records as the bytes Kafka would hold (the backends fill in versions differently)."""
    return sorted(
        (key.hex(), value.hex())
        for key, value in (encode_record(r) for r in records if r["group_id"] != POSITION_GROUP)
    )


def test_consumer_groups_through_the_job_with_restarts(spark, kafka_bootstrap, topic_name, tmp_path):
    """The job's store is the Kafka-topic one, the model's reference store SQLite: the records must agree byte for
    byte after going through both."""
    configs = Configs.from_properties(SETTINGS)
    events = feed()
    points = quiet_points(events, configs)
    end = points[-1]
    events = events[:end]
    first_cut = len(events) // 3
    # The checkpoint is lost after cgroup-1's crashed member expired and before the group, empty, switches protocol.
    lost_cut = next(p for p in points if events[p - 1]["ts"] >= START + 85_000)
    assert first_cut < lost_cut < end

    # The pure model: the feed up to the lost checkpoint, the store as it then was, the groups rebuilt from it at the
    # feed's time (as the job does), and the rest of the feed.
    before = GroupModels(configs)
    model_outputs = run_model(before, events[:lost_cut])
    reference_store = SqliteStore(str(tmp_path / "reference.db"))
    reference_store.write([o for o in model_outputs if o["type"] in STORE_TYPES])
    stored = reference_store.load_records()
    load_ms = load_time(stored, True, 0, events[lost_cut - 1]["ts"])
    after = GroupModels(configs)
    after.models = {g: GroupModel.from_bytes(s, configs) for g, s in group_states(stored, load_ms, configs).items()}
    later = run_model(after, events[lost_cut:])
    reference_store.write([o for o in later if o["type"] in STORE_TYPES])
    model_outputs += later

    # The job, on the broker: three runs.
    events_topic, outputs_topic = topic_name, f"{topic_name}-out"
    ensure_topics(kafka_bootstrap, {events_topic: 2})
    store_url = f"kafka:{kafka_bootstrap}/{topic_name}-store?partitions=3"
    config = TrackerConfig(
        bootstrap=kafka_bootstrap,
        events_topic=events_topic,
        outputs_topic=outputs_topic,
        store=store_url,
        checkpoint=str(tmp_path / "checkpoint"),
        trigger="200 milliseconds",
        time_mode="event",
        watermark_delay="1 second",
        coordinator=dict(SETTINGS),
    )

    def run(part: list[dict]) -> None:
        produce(kafka_bootstrap, events_topic, [encode_event(e) for e in part])
        tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
        try:
            tracker.query.processAllAvailable()
        finally:
            tracker.stop()

    run(events[:first_cut])
    run(events[first_cut:lost_cut])  # the same checkpoint
    shutil.rmtree(config.checkpoint)  # lost; the store and the topics stay
    run(events[lost_cut:])
    got = [json.loads(r.value) for r in read_all(kafka_bootstrap, outputs_topic)]

    want = topic_view(model_outputs)
    assert topic_view(got) == want
    kinds = {o["type"] for outputs in want.values() for o in outputs}
    assert {"target_assignment", "rebalance", "member_expired", "member_replaced", "protocol_switch"} <= kinds
    assert any(o["type"] == "rebalance" and o["rebalance_protocol"] == "consumer" for o in want["cgroup-0"])
    assert any(o["type"] == "rebalance" and o.get("generation") for o in want["group-0"])  # the classic group

    store = open_store(store_url)
    try:
        records = store.load_records()
        assert live(records) == live(reference_store.load_records())
        group = store.consumer_group("cgroup-0")
        assert group["group_epoch"] == after.models["cgroup-0"].model.groups["cgroup-0"].group_epoch
        assert store.consumer_group("cgroup-1") is None  # switched to classic: all tombstoned
        assert store.group("cgroup-1")["protocol"] == "range" and store.group("group-0") is not None
    finally:
        store.close()
        reference_store.close()
