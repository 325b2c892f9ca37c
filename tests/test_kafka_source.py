"""The kafka-python streaming source against the real broker: Spark's kafka columns and offsets, start positions,
rate limits, AvailableNow, new partitions, and exactly-once content across a restart from the checkpoint."""
from __future__ import annotations

import glob
import json
import os

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.errors import IncompatibleBrokerVersion

from streaming.kafka_source import FORMAT, KafkaPythonDataSource, read_kafka_stream
from streaming.run import ensure_topics

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def produce(bootstrap, topic, values, partition=None, linger_ms=50):
    """Send with linger so records share produce requests (the case the broker's ListOffsets gets wrong)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=linger_ms, acks="all")
    for i, value in enumerate(values):
        producer.send(topic, key=f"k{i % 7}".encode(), value=value.encode(), partition=partition)
    producer.flush()
    producer.close()


class Rows:
    def __init__(self):
        self.batches: list[list] = []

    def __call__(self, df, batch_id):
        self.batches.append(df.orderBy("partition", "offset").collect())

    @property
    def values(self) -> list[str]:
        return sorted(r.value.decode() for batch in self.batches for r in batch)


def run(spark, bootstrap, topic, checkpoint, sink, available_now=False, **kw):
    writer = read_kafka_stream(spark, bootstrap, [topic], **kw).writeStream.foreachBatch(sink) \
        .option("checkpointLocation", str(checkpoint))
    query = (writer.trigger(availableNow=True) if available_now else writer).start()
    if available_now:
        query.awaitTermination(120)
    else:
        query.processAllAvailable()
        query.stop()
    return query


def test_columns_records_and_checkpoint_offsets(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    values = [f"v{i}" for i in range(40)]
    produce(kafka_bootstrap, topic_name, values)
    df = read_kafka_stream(spark, kafka_bootstrap, [topic_name])
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int")]
    rows = Rows()
    run(spark, kafka_bootstrap, topic_name, tmp_path / "cp", rows)
    assert rows.values == sorted(values)          # every record of every multi-record batch, once
    all_rows = [r for batch in rows.batches for r in batch]
    assert {r.topic for r in all_rows} == {topic_name} and {r.timestampType for r in all_rows} == {0}
    per_partition = {}
    for r in all_rows:
        per_partition.setdefault(r.partition, []).append(r.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())
    # The checkpoint's offset log holds Spark's kafka offset JSON: {"topic": {"partition": next offset}}.
    last_log = max(glob.glob(str(tmp_path / "cp" / "offsets" / "[0-9]*")), key=lambda p: int(os.path.basename(p)))
    offsets = json.loads(open(last_log).read().strip().splitlines()[-1])
    assert offsets == {topic_name: {str(p): len(per_partition.get(p, [])) for p in (0, 1)}}


def test_starting_offsets_latest_and_json(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, ["old0", "old1", "old2"])
    rows = Rows()
    run(spark, kafka_bootstrap, topic_name, tmp_path / "json", rows,
        starting_offsets=json.dumps({topic_name: {"0": 1}}))
    assert rows.values == ["old1", "old2"]

    latest = Rows()
    query = read_kafka_stream(spark, kafka_bootstrap, [topic_name], starting_offsets="latest") \
        .writeStream.foreachBatch(latest).option("checkpointLocation", str(tmp_path / "latest")).start()
    try:
        query.processAllAvailable()
        produce(kafka_bootstrap, topic_name, ["new0"])
        query.processAllAvailable()
    finally:
        query.stop()
    assert latest.values == ["new0"]


def test_max_offsets_per_trigger_and_available_now(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    produce(kafka_bootstrap, topic_name, [f"v{i}" for i in range(50)])
    rows = Rows()
    query = run(spark, kafka_bootstrap, topic_name, tmp_path / "cp", rows, available_now=True,
                max_offsets_per_trigger=12)
    assert not query.isActive                   # AvailableNow stops by itself
    assert rows.values == sorted(f"v{i}" for i in range(50))
    assert max(len(b) for b in rows.batches) <= 12 and len(rows.batches) >= 5


def test_partition_added_mid_stream_is_read_from_its_start(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, ["a0", "a1"])
    rows = Rows()
    query = read_kafka_stream(spark, kafka_bootstrap, [topic_name]).writeStream.foreachBatch(rows) \
        .option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        query.processAllAvailable()
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        try:
            admin.create_partitions({topic_name: NewPartitions(total_count=2)})
        except IncompatibleBrokerVersion:
            pytest.skip("this broker cannot add partitions (CreatePartitions); see the subscribePattern test")
        finally:
            admin.close()
        produce(kafka_bootstrap, topic_name, ["b0", "b1", "b2"], partition=1)
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows.values == ["a0", "a1", "b0", "b1", "b2"]
    assert {r.partition for batch in rows.batches for r in batch if r.value.startswith(b"b")} == {1}


def test_topic_matching_the_pattern_appears_mid_stream(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {f"{topic_name}-a": 1})
    produce(kafka_bootstrap, f"{topic_name}-a", ["a0"])
    spark.dataSource.register(KafkaPythonDataSource)
    rows = Rows()
    query = (spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", kafka_bootstrap)
             .option("subscribePattern", f"{topic_name}-.*").option("startingOffsets", "earliest").load()
             .writeStream.foreachBatch(rows).option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        query.processAllAvailable()
        ensure_topics(kafka_bootstrap, {f"{topic_name}-b": 2})
        produce(kafka_bootstrap, f"{topic_name}-b", ["b0", "b1"])
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows.values == ["a0", "b0", "b1"]


def test_restart_from_checkpoint_is_exactly_once(spark, kafka_bootstrap, topic_name, tmp_path):
    """Walking skeleton: topic on the real broker -> streaming query through the source -> a file sink; stop,
    produce more, restart from the checkpoint: every event once."""
    ensure_topics(kafka_bootstrap, {topic_name: 3})
    produce(kafka_bootstrap, topic_name, [f"e{i}" for i in range(30)])
    sink_dir, checkpoint = tmp_path / "sink", tmp_path / "cp"

    def start():
        return (read_kafka_stream(spark, kafka_bootstrap, [topic_name]).selectExpr("CAST(value AS STRING) AS v")
                .writeStream.format("parquet").option("path", str(sink_dir))
                .option("checkpointLocation", str(checkpoint)).start())

    query = start()
    query.processAllAvailable()
    query.stop()
    produce(kafka_bootstrap, topic_name, [f"e{i}" for i in range(30, 45)])
    query = start()
    query.processAllAvailable()
    query.stop()
    values = sorted(r.v for r in spark.read.parquet(str(sink_dir)).collect())
    assert values == sorted(f"e{i}" for i in range(45))
