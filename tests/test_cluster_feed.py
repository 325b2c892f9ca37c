"""The __consumer_offsets cluster feed: records in Kafka's exact format, on a topic of that name on the broker,
become the same rebalance timeline the simulator's own events give."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from offsets_store import encode_record, partition_for
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed, events_from, read_offsets_topic
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.run import ensure_topics

START = 1_700_000_000_000


def simulated_history():
    """What a broker would have written to __consumer_offsets for a simulated history, and its timeline."""
    settings = SimulationSettings(groups=3, seed=8, churn_interval_ms=8_000,
                                  assignors=("range", "cooperative-sticky", "sticky"))
    events = Simulator(settings, start_ms=START).run_until(START + 4 * 60_000)
    broker = GroupCoordinator(CoordinatorConfig())
    outputs = [o for e in events for o in broker.handle(e)]
    records = [o for o in outputs if o["type"] in ("offset_commit", "group_metadata")]
    return records, outputs, broker


def timeline(outputs: list[dict]) -> dict[str, list[tuple]]:
    """Per group: each round that reached Stable, its generation and who owned what. (Rounds ending Empty are left
    out: the broker writes no record for rounds that never reached Stable, so an Empty group's generation cannot be
    known from __consumer_offsets.)"""
    out: dict[str, list[tuple]] = {}
    for r in outputs:
        if r["type"] == "rebalance" and r["members"]:
            owners = tuple(sorted((m, tuple(map(tuple, parts))) for m, parts in r["assignment"].items()))
            out.setdefault(r["group_id"], []).append((r["generation"], owners))
    return out


def observe(records_or_pairs, from_bytes: bool) -> tuple[list[dict], GroupCoordinator]:
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    feed = ClusterFeed()
    events = events_from(records_or_pairs) if from_bytes else (e for r in records_or_pairs for e in feed.events_for(r))
    outputs = []
    for raw in events:
        event, error = parse_event(raw)     # what the job does with every record of the events topic
        assert error is None, error
        outputs += tracker.handle(event)
    return outputs, tracker


def test_cluster_feed_gives_the_same_timeline_as_the_simulated_events():
    records, outputs, broker = simulated_history()
    pairs = [encode_record(r) for r in records]
    seen, tracker = observe(pairs, from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    assert len(timeline(outputs)) == 3 and all(len(t) >= 2 for t in timeline(outputs).values())
    for group_id in broker.group_ids():
        assert tracker.fetch_offsets(group_id) == broker.fetch_offsets(group_id)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), static_fraction=st.sampled_from([0.0, 0.5, 1.0]),
       churn=st.integers(4_000, 15_000))
def test_the_timelines_agree_for_generated_histories(seed, static_fraction, churn):
    settings_ = SimulationSettings(groups=3, seed=seed, churn_interval_ms=churn, static_fraction=static_fraction,
                                   assignors=("range", "cooperative-sticky", "sticky"))
    events = Simulator(settings_, start_ms=START).run_until(START + 4 * 60_000)
    broker = GroupCoordinator(CoordinatorConfig())
    outputs = [o for e in events for o in broker.handle(e)]
    records = [o for o in outputs if o["type"] in ("offset_commit", "group_metadata")]
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    assert all(tracker.fetch_offsets(g) == broker.fetch_offsets(g) for g in broker.group_ids())


def test_unknown_and_undecodable_records_are_skipped():
    feed = ClusterFeed()
    assert feed.events_for_bytes(b"\x00\x05\x00\x01g", b"\x00\x00") == []     # a KIP-848 record
    assert feed.events_for_bytes(b"\x00\x01\x00", b"junk") == [] and feed.undecodable == 1


@pytest.mark.kafka
def test_cluster_feed_reads_a_consumer_offsets_topic_on_the_broker(kafka_bootstrap, topic_name):
    # The bundled broker has no __consumer_offsets; a real Kafka would refuse our writes to its own. So: a topic
    # laid out exactly like it (50 partitions, partition_for(group), Kafka's bytes) under a test name.
    records, outputs, broker = simulated_history()
    topic = f"{topic_name}-consumer-offsets"
    ensure_topics(kafka_bootstrap, {topic: 50})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=10)
    for r in records:
        key, value = encode_record(r)
        producer.send(topic, key=key, value=value, partition=partition_for(r["group_id"]))
    producer.flush()
    producer.close()
    seen, tracker = observe(read_offsets_topic(kafka_bootstrap, topic), from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    for group_id in broker.group_ids():
        assert tracker.fetch_offsets(group_id) == broker.fetch_offsets(group_id)
