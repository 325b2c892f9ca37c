"""A job that loses its checkpoint rebuilds its groups from the store, as Kafka's next coordinator rebuilds them
from __consumer_offsets (issue #13): generations, assignments and offsets carry on, with no spurious rebalance."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil

import pytest

from offsets_store import open_store
from streaming.coordinator import CoordinatorConfig, GroupCoordinator
from streaming.feeds.publish import encode_event
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.views.live_view import LiveView
from streaming.kafka_client.topics import ensure_topics
from streaming.tracker import TrackerConfig, start_tracker
from tests.tracker.test_tracker_kafka import produce, read_all

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
START = 1_700_000_000_000


def feed_and_cut() -> tuple[list[dict], int, list[dict], dict[str, int]]:
    """A simulated feed, a cut where every group is Stable with its latest round on record, the pure model's
    outputs over the whole feed, and each group's generation at the cut."""
    events = Simulator(
        SimulationSettings(groups=2, seed=33, churn_interval_ms=12_000, assignors=("range", "cooperative-sticky")),
        start_ms=START,
    ).run_until(START + 150_000)
    model = GroupCoordinator(CoordinatorConfig())
    outputs, cut, at_cut = [], None, {}
    for i, e in enumerate(events):
        outputs += model.handle(e)
        groups = model.groups.values()
        if i > len(events) // 2 and cut is None and groups and all(g.state.value == "Stable" for g in groups):
            cut, at_cut = i + 1, {g.group_id: g.generation for g in groups}
    assert cut is not None
    return events, cut, outputs, at_cut


def rounds(outputs: list[dict], after_ts: int | None = None) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for o in outputs:
        if o["type"] == "rebalance" and (after_ts is None or o["ts"] > after_ts):
            out.setdefault(o["group_id"], []).append(
                (o["generation"], o["trigger"], {m: sorted(map(tuple, p)) for m, p in o["assignment"].items()})
            )
    return out


@pytest.mark.parametrize(
    "store_kind, second_key",
    [
        ("sqlite", "group"),
        ("kafka", "group"),
        # The way docs/design.md gives to change the keying: a new checkpoint, the groups rebuilt from the store.
        ("sqlite", "coordinator-partition"),
    ],
)
def test_a_lost_checkpoint_is_rebuilt_from_the_store(
    spark, kafka_bootstrap, topic_name, tmp_path, store_kind, second_key
):
    events, cut, model_outputs, at_cut = feed_and_cut()
    events_topic, outputs_topic = topic_name, f"{topic_name}-out"
    ensure_topics(kafka_bootstrap, {events_topic: 2})
    store_url = (
        f"sqlite:{tmp_path / 'offsets.db'}"
        if store_kind == "sqlite"
        else f"kafka:{kafka_bootstrap}/{topic_name}-store?partitions=3"
    )
    config = TrackerConfig(
        bootstrap=kafka_bootstrap,
        events_topic=events_topic,
        outputs_topic=outputs_topic,
        store=store_url,
        checkpoint=str(tmp_path / "checkpoint"),
        trigger="200 milliseconds",
        time_mode="event",
        watermark_delay="1 second",
    )

    def run_all() -> None:
        tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
        try:
            tracker.query.processAllAvailable()
        finally:
            tracker.stop()

    produce(kafka_bootstrap, events_topic, [encode_event(e) for e in events[:cut]])
    run_all()
    first = [json.loads(r.value) for r in read_all(kafka_bootstrap, outputs_topic)]
    shutil.rmtree(config.checkpoint)  # the checkpoint is lost; the store and the topics stay
    produce(kafka_bootstrap, events_topic, [encode_event(e) for e in events[cut:]])
    config = dataclasses.replace(config, state_key=second_key)
    run_all()
    second = [json.loads(r.value) for r in read_all(kafka_bootstrap, outputs_topic)][len(first) :]

    # Each group says it was rebuilt from the store, at its generation there; none was mid-round.
    assert {o["group_id"]: o["generation"] for o in second if o["type"] == "group_restored"} == at_cut
    assert not [o for o in second if o["type"] == "restore_gap"]
    # The second job read the feed from where the first stopped (nothing applied twice) and carried on: the rounds
    # after the cut, their generations, triggers and assignments, are the uninterrupted model's.
    cut_ts = events[cut - 1]["ts"]
    assert second and min(o["ts"] for o in second) >= cut_ts - 1_000
    assert rounds(second) == rounds(model_outputs, after_ts=cut_ts)
    assert not [o for o in second if o["type"] == "member_expired" and o["ts"] <= cut_ts + 1_000]
    # No offset lost: the store holds the model's committed offsets (plus the tracker's own position on its feed).
    model_offsets: dict = {}
    for o in model_outputs:
        if o["type"] == "offset_commit":
            key = (o["group_id"], o["topic"], o["partition"])
            if o.get("tombstone"):
                model_offsets.pop(key, None)
            else:
                model_offsets[key] = o["offset"]
    store = open_store(store_url)
    try:
        records = store.load_records()
    finally:
        store.close()
    stored = {
        (r["group_id"], r["topic"], r["partition"]): r["offset"]
        for r in records
        if r["type"] == "offset_commit" and not r.get("tombstone")
    }
    position = {k: v for k, v in stored.items() if k[0] == "rebalance-tracker"}
    assert {k: v for k, v in stored.items() if k[0] != "rebalance-tracker"} == model_offsets
    assert sum(position.values()) == len(events)  # it read every event, once
