"""The sink writes the same records with either Kafka client (docs/outputs.md): kafka-python by default,
confluent-kafka when the job reads with it (``--kafka-source confluent``). Same topics, keys, values, headers and --
so that a group's events appended to the events topic stay in the group's partition -- the same partitions as Kafka's
Java client; a record Kafka refuses is a clear error; a broker that goes away is waited for, nothing lost."""

from __future__ import annotations


import pytest

from streaming.kafka_client.delivery import DeliveryError
from streaming.kafka_client.topics import ensure_topics
from streaming.spark.sinks import TrackerSink
from tests.job_process import deduplicate
from tests.persistent_broker import waits_out_an_outage
from tests.tracker.test_tracker_kafka import read_all

pytestmark = pytest.mark.kafka

CLIENTS = ("kafka-python", "confluent")


def outputs(batch: int) -> list[dict]:
    """A micro-batch's outputs as the job hands them over: broadcasts first, then each group's in order."""
    out: list[dict] = [
        {
            "type": "broadcast_event",
            "group_id": None,
            "ts": 5,
            "event": {"type": "topic_metadata", "ts": 5, "topic": "t", "partitions": 4 + batch},
        }
    ]
    for g in range(12):
        group = f"group-{g}"
        out += [
            {"type": "state_change", "group_id": group, "ts": 10 + batch, "from": "Empty", "to": "PreparingRebalance"},
            {"type": "rebalance", "group_id": group, "ts": 11 + batch, "generation": batch + 1},
        ]
    out.append({"type": "dead_letter", "group_id": "group-3", "ts": 12, "reason": "not valid JSON", "raw": "x"})
    return out


def sink_for(bootstrap: str, prefix: str, client: str, **config) -> TrackerSink:
    ensure_topics(bootstrap, {f"{prefix}-events": 3, f"{prefix}-out": 3, f"{prefix}-dlq": 1})
    sink = TrackerSink(
        bootstrap=bootstrap,
        events_topic=f"{prefix}-events",
        outputs_topic=f"{prefix}-out",
        dlq_topic=f"{prefix}-dlq",
        producer_client=client,
        producer_config=config,
    )
    sink.known_groups.update(f"group-{g}" for g in range(12))
    return sink


def written(bootstrap: str, prefix: str) -> dict[str, list[tuple]]:
    return {
        suffix: [(r.partition, r.key, r.value, sorted(r.headers)) for r in read_all(bootstrap, f"{prefix}-{suffix}")]
        for suffix in ("events", "out", "dlq")
    }


def test_both_clients_write_the_same_records_to_the_same_partitions(kafka_bootstrap, topic_name):
    got = {}
    for client in CLIENTS:
        sink = sink_for(kafka_bootstrap, f"{topic_name}-{client}", client)
        sink.handle(outputs(0), batch_id=0)
        sink.handle(outputs(1), batch_id=1)
        sink.close()
        got[client] = written(kafka_bootstrap, f"{topic_name}-{client}")
    sent = got["kafka-python"]
    assert len(sent["events"]) == 2 * 12 and len(sent["out"]) == 2 * 24 and len(sent["dlq"]) == 2
    assert len({p for p, *_ in sent["out"]}) > 1, "twelve groups, three partitions: all in one would prove nothing"
    assert got["confluent"] == sent


def test_a_record_kafka_refuses_is_a_clear_error(kafka_bootstrap, topic_name):
    sink = sink_for(kafka_bootstrap, topic_name, "confluent", max_request_size=2048)
    too_big = outputs(0) + [{"type": "rebalance", "group_id": "group-1", "ts": 20, "note": "m" * 4096}]
    with pytest.raises(DeliveryError, match=r"batch 0.*MSG_SIZE_TOO_LARGE"):
        sink.handle(too_big, batch_id=0)
    sink.close()


def test_the_confluent_sink_waits_out_a_broker_outage(persistent_broker, topic_name):
    bootstrap = persistent_broker.bootstrap
    sink = sink_for(bootstrap, topic_name, "confluent")
    sink.handle(outputs(0), batch_id=0)
    waits_out_an_outage(persistent_broker, lambda: sink.handle(outputs(1), batch_id=1), "the sink")
    sink.close()
    want = sink_for(bootstrap, f"{topic_name}-want", "kafka-python")
    want.handle(outputs(0), batch_id=0)
    want.handle(outputs(1), batch_id=1)
    want.close()
    assert by_partition(deduplicate(read_all(bootstrap, f"{topic_name}-out"))) == by_partition(
        read_all(bootstrap, f"{topic_name}-want-out")
    )


def by_partition(records: list) -> dict[int, list]:
    out: dict[int, list] = {}
    for r in records:
        out.setdefault(r.partition, []).append((dict(r.headers)["batch_id"], r.key))
    return out
