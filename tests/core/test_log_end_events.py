"""Log-end samples as events: parsed and refused like every other event, passed on by the group's model, and
published by the sampler from a real broker."""

from __future__ import annotations

import json

import pytest

from streaming.coordinator.events import parse_event
from streaming.coordinator.routing import GroupModel, run_feed
from streaming.feeds.log_end_sampler import LogEndSampler, log_end_events


def sample(**fields):
    return json.dumps(
        {"type": "log_end", "group_id": "g", "ts": 1_000, "topic": "t", "partition": 2, "offset": 40, **fields}
    ).encode()


def test_a_sample_parses_to_its_four_fields():
    event, error = parse_event(sample())
    assert error is None
    assert event == {"type": "log_end", "group_id": "g", "ts": 1_000, "topic": "t", "partition": 2, "offset": 40}


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"offset": -1}, "log_end.offset = -1 is out of range [0, 9223372036854775807]"),
        ({"partition": -3}, "log_end.partition = -3 is out of range [0, 2147483647]"),
        ({"offset": "40"}, "log_end.offset must be an integer, got str"),
        ({"topic": None}, "log_end: missing field 'topic'"),
        ({"topic": ""}, "log_end: topic must be a non-empty string"),
        ({"group_id": ""}, "log_end: group_id must be a non-empty string"),
        ({"partition": None}, "log_end: missing field 'partition'"),
    ],
)
def test_a_bad_sample_is_refused_with_its_reason(fields, reason):
    assert parse_event(sample(**fields)) == (None, reason)


def test_a_repeated_key_is_refused():
    assert parse_event(b'{"type":"log_end","group_id":"g","topic":"t","partition":0,"offset":1,"offset":2}') == (
        None,
        "duplicate key 'offset'",
    )


def test_the_model_passes_a_sample_on_after_the_timers_due_before_it():
    """A member whose session ran out before the sample is expired first (in the job too, where no one calls
    ``advance`` between a group's events), so the outputs stay in time order."""
    model = GroupModel()
    join = {
        "type": "join",
        "group_id": "g",
        "ts": 0,
        "member_id": "",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "protocols": [{"name": "range", "topics": ["t"]}],
    }
    member = model.handle(parse_event(json.dumps(join))[0])[0]["member_id"]
    model.handle(parse_event(json.dumps(dict(join, member_id=member, ts=1)))[0])
    outputs = model.handle(parse_event(sample(ts=60_000))[0])
    kinds = [o["type"] for o in outputs]
    assert "member_expired" in kinds and kinds.index("rebalance") < kinds.index("log_end") == len(kinds) - 1
    assert outputs[-1] == {"type": "log_end", "group_id": "g", "ts": 60_000, "topic": "t", "partition": 2, "offset": 40}
    assert [o["type"] for o in run_feed([json.loads(sample())])[0]] == ["log_end"]
    blank = GroupModel()
    assert blank.handle(parse_event(sample())[0])[0]["type"] == "log_end"
    assert blank.is_blank()  # a sample alone makes no group


def test_each_group_gets_the_samples_of_its_own_topics():
    events = log_end_events({"b": {"t"}, "a": {"t", "u"}}, {("t", 1): 5, ("t", 0): 3, ("u", 0): 9, ("v", 0): 1}, 7)
    assert [(e["group_id"], e["topic"], e["partition"], e["offset"]) for e in events] == [
        ("a", "t", 0, 3),
        ("a", "t", 1, 5),
        ("a", "u", 0, 9),
        ("b", "t", 0, 3),
        ("b", "t", 1, 5),
    ]
    assert all(parse_event(e)[1] is None and e["ts"] == 7 for e in events)


@pytest.mark.kafka
def test_the_sampler_publishes_the_log_ends_of_the_groups_topics(kafka_bootstrap, topic_name):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from streaming.kafka_client.topics import ensure_topics

    data, events = f"{topic_name}-data", f"{topic_name}-events"
    ensure_topics(kafka_bootstrap, {data: 2, events: 1})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(7):
        producer.send(data, value=b"x", partition=i % 2)  # 4 on partition 0, 3 on partition 1
    producer.flush()
    producer.close()
    sampler = LogEndSampler(kafka_bootstrap, events, max_partitions=1)
    try:
        assert sampler.sample_once() == []  # no group known yet
        sampler.observe(
            [{"type": "offset_commit", "group_id": "g", "ts": 1, "topic": data, "partition": 0, "offset": 1}]
        )
        first = sampler.sample_once()  # one partition a round: the bound
        second = sampler.sample_once()  # then the other one
    finally:
        sampler.stop()
    assert sorted((e["partition"], e["offset"]) for e in first + second) == [(0, 4), (1, 3)]
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=2_000)
    consumer.assign([TopicPartition(events, 0)])
    consumer.seek_to_beginning()
    published = [(r.key, json.loads(r.value)) for r in consumer]
    consumer.close()
    assert [(k, e["partition"], e["offset"]) for k, e in published] == [
        (b"g", e["partition"], e["offset"]) for e in first + second
    ]
    assert all(parse_event(e)[1] is None for _, e in published)
