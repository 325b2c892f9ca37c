"""The kafka-python streaming source against the real broker: Spark's kafka columns and offsets, start positions,
rate limits, AvailableNow, new partitions, and exactly-once content across a restart from the checkpoint."""

from __future__ import annotations

import glob
import json
import os
import time

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.errors import IncompatibleBrokerVersion

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streaming.spark.kafka_source import (
    FORMAT,
    KafkaPythonDataSource,
    KafkaRange,
    KafkaRanges,
    KafkaStreamReader,
    _rate_limit,
    group_ranges,
    read_kafka_stream,
)
from streaming.kafka_client.topics import ensure_topics

pytestmark = [pytest.mark.kafka]


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
    writer = (
        read_kafka_stream(spark, bootstrap, [topic], **kw)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
    )
    query = (writer.trigger(availableNow=True) if available_now else writer).start()
    if available_now:
        query.awaitTermination(600)  # a bound: AvailableNow stops by itself when done
    else:
        query.processAllAvailable()
        query.stop()
    return query


@pytest.mark.spark
def test_columns_records_and_checkpoint_offsets(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    values = [f"v{i}" for i in range(40)]
    produce(kafka_bootstrap, topic_name, values)
    df = read_kafka_stream(spark, kafka_bootstrap, [topic_name])
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    rows = Rows()
    run(spark, kafka_bootstrap, topic_name, tmp_path / "cp", rows)
    assert rows.values == sorted(values)  # every record of every multi-record batch, once
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


@pytest.mark.spark
def test_starting_offsets_latest_and_json(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, ["old0", "old1", "old2"])
    rows = Rows()
    run(
        spark, kafka_bootstrap, topic_name, tmp_path / "json", rows, starting_offsets=json.dumps({topic_name: {"0": 1}})
    )
    assert rows.values == ["old1", "old2"]

    latest = Rows()
    query = (
        read_kafka_stream(spark, kafka_bootstrap, [topic_name], starting_offsets="latest")
        .writeStream.foreachBatch(latest)
        .option("checkpointLocation", str(tmp_path / "latest"))
        .start()
    )
    try:
        query.processAllAvailable()
        produce(kafka_bootstrap, topic_name, ["new0"])
        query.processAllAvailable()
    finally:
        query.stop()
    assert latest.values == ["new0"]


@pytest.mark.spark
def test_max_offsets_per_trigger_and_available_now(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    produce(kafka_bootstrap, topic_name, [f"v{i}" for i in range(50)])
    rows = Rows()
    query = run(
        spark, kafka_bootstrap, topic_name, tmp_path / "cp", rows, available_now=True, max_offsets_per_trigger=12
    )
    assert not query.isActive  # AvailableNow stops by itself
    assert rows.values == sorted(f"v{i}" for i in range(50))
    assert max(len(b) for b in rows.batches) <= 12 and len(rows.batches) >= 5


@pytest.mark.spark
def test_partition_added_mid_stream_is_read_from_its_start(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, ["a0", "a1"])
    rows = Rows()
    query = (
        read_kafka_stream(spark, kafka_bootstrap, [topic_name])
        .writeStream.foreachBatch(rows)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
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


@pytest.mark.spark
def test_topic_matching_the_pattern_appears_mid_stream(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {f"{topic_name}-a": 1})
    produce(kafka_bootstrap, f"{topic_name}-a", ["a0"])
    spark.dataSource.register(KafkaPythonDataSource)
    rows = Rows()
    query = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribePattern", f"{topic_name}-.*")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(rows)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        ensure_topics(kafka_bootstrap, {f"{topic_name}-b": 2})
        produce(kafka_bootstrap, f"{topic_name}-b", ["b0", "b1"])
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows.values == ["a0", "b0", "b1"]


def reader_for(bootstrap, **options) -> KafkaStreamReader:
    """The reader as Spark builds it (option keys lower-cased), used directly on the driver side."""
    return KafkaPythonDataSource({"kafka.bootstrap.servers": bootstrap, **options}).streamReader(None)


def read_offsets(reader, topic, partition, start, end) -> list[int]:
    return [
        o for batch in reader.read(KafkaRange(topic, partition, start, end)) for o in batch.column("offset").to_pylist()
    ]


def test_planned_end_covers_every_record_of_a_multi_record_batch(kafka_bootstrap, topic_name):
    """One produce request with many records: the planned end is the true log end (not ListOffsets' answer on
    brokers that report the last batch's start + 1), and a read stops at the planned end."""
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, [f"v{i}" for i in range(25)], partition=0, linger_ms=200)
    reader = reader_for(kafka_bootstrap, subscribe=topic_name, startingOffsets="latest")
    try:
        assert reader.initialOffset() == {topic_name: {"0": 25}}
        assert reader.latestOffset({topic_name: {"0": 0}}, ReadAllAvailable()) == {topic_name: {"0": 25}}
        assert read_offsets(reader, topic_name, 0, 5, 20) == list(range(5, 20))  # [start, end) exactly
        assert read_offsets(reader, topic_name, 0, 20, 25) == list(range(20, 25))
    finally:
        reader.stop()


def test_rate_limit_shares_the_budget_by_backlog_and_never_overshoots():
    start = {"t": {"0": 0, "1": 10, "2": 5}}
    latest = {"t": {"0": 90, "1": 20, "2": 5}}  # backlogs 90, 10, 0
    out = _rate_limit(start, latest, 10)
    taken = {p: out["t"][p] - start["t"][p] for p in start["t"]}
    assert sum(taken.values()) == 10 and taken == {"0": 9, "1": 1, "2": 0}
    assert _rate_limit(start, latest, 1000) == latest  # budget above the backlog: everything
    odd = _rate_limit({"t": {"0": 0, "1": 0, "2": 0}}, {"t": {"0": 1, "1": 1, "2": 1}}, 2)
    assert sum(odd["t"].values()) == 2 and all(0 <= o <= 1 for o in odd["t"].values())


def test_available_now_target_ignores_later_records_and_partitions(kafka_bootstrap, topic_name):
    ensure_topics(kafka_bootstrap, {f"{topic_name}-a": 2})
    produce(kafka_bootstrap, f"{topic_name}-a", ["a0", "a1", "a2"], partition=0)
    reader = reader_for(
        kafka_bootstrap, subscribePattern=f"{topic_name}-.*", startingOffsets="earliest", maxOffsetsPerTrigger="2"
    )
    try:
        start = reader.initialOffset()
        assert start == {f"{topic_name}-a": {"0": 0, "1": 0}}
        reader.prepareForTriggerAvailableNow()
        produce(kafka_bootstrap, f"{topic_name}-a", ["late"], partition=1)  # after the target was taken
        ensure_topics(kafka_bootstrap, {f"{topic_name}-b": 1})
        produce(kafka_bootstrap, f"{topic_name}-b", ["b0"])
        limit = reader.getDefaultReadLimit()
        assert limit == ReadMaxRows(2)
        first = reader.latestOffset(start, limit)
        assert first == {f"{topic_name}-a": {"0": 2, "1": 0}}
        second = reader.latestOffset(first, limit)
        assert second == {f"{topic_name}-a": {"0": 3, "1": 0}}
        assert reader.latestOffset(second, limit) == second  # target reached: AvailableNow can stop
        assert reader.reportLatestOffset() == {f"{topic_name}-a": {"0": 3, "1": 1}, f"{topic_name}-b": {"0": 1}}
    finally:
        reader.stop()


def test_a_subscribed_topic_created_later_is_read_from_its_start(kafka_bootstrap, topic_name):
    ensure_topics(kafka_bootstrap, {f"{topic_name}-a": 1})
    reader = reader_for(kafka_bootstrap, subscribe=f"{topic_name}-a,{topic_name}-b", startingOffsets="latest")
    try:
        start = reader.initialOffset()
        assert start == {f"{topic_name}-a": {"0": 0}}
        ensure_topics(kafka_bootstrap, {f"{topic_name}-b": 2})
        produce(kafka_bootstrap, f"{topic_name}-b", ["b0", "b1"], partition=1)
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {f"{topic_name}-a": {"0": 0}, f"{topic_name}-b": {"0": 0, "1": 2}}
        assert reader.partitions(start, end) == [KafkaRange(f"{topic_name}-b", 1, 0, 2)]
    finally:
        reader.stop()


@pytest.mark.spark
def test_option_checks_and_source_switch(spark, kafka_bootstrap):
    from streaming.spark.kafka_source import builtin_kafka_available

    with pytest.raises(ValueError, match="subscribe"):
        reader_for(kafka_bootstrap)
    with pytest.raises(ValueError, match="python, builtin or auto"):
        read_kafka_stream(spark, kafka_bootstrap, ["t"], source="jars")

    def plan(source: str) -> str:
        return (
            read_kafka_stream(spark, kafka_bootstrap, ["t"], source=source)._jdf.queryExecution().logical().toString()
        )

    assert f", {FORMAT}, " in plan("python")
    if not builtin_kafka_available(spark):
        pytest.skip("Spark's Kafka connector could not be loaded here (no mvn, or Maven Central unreachable)")
    # The session loaded the connector (streaming/spark/connector.py): "auto" reads with it.
    assert "KafkaSourceProvider" in plan("builtin") and "KafkaSourceProvider" in plan("auto")


def test_auto_reads_with_sparks_connector_unless_it_is_missing_or_the_broker_misreports():
    from streaming.spark.kafka_source import choose_source

    assert choose_source("auto", True, "kafka-cluster-id")[0] == "builtin"
    assert choose_source("auto", True, None)[0] == "builtin"  # brokers before 0.10.1 give no cluster id
    asked = []
    assert choose_source("auto", True, lambda: asked.append(1), (4, 1), secured=True)[0] == "python" and not asked
    assert choose_source("auto", True, None, (0, 10, 0))[0] == "builtin"
    source, why = choose_source("auto", True, None, (0, 9))  # Kafka 0.9 answers no ApiVersions
    assert source == "python" and "older than 0.10" in why
    source, why = choose_source("auto", True, "kafka-cluster-id", (4, 1), secured=True)
    assert source == "python" and "SASL/SSL" in why
    assert choose_source("builtin", True, "kafka-cluster-id", (4, 1), secured=True)[0] == "builtin"
    source, why = choose_source("auto", False, "kafka-cluster-id")
    assert source == "python" and "not loaded" in why
    source, why = choose_source("auto", True, "tansu_cluster")  # the bundled broker
    assert source == "python" and "Tansu" in why and "ListOffsets" in why
    assert choose_source("confluent", False, "tansu_cluster") == ("confluent", "as asked")
    with pytest.raises(ValueError, match="python, builtin or auto"):
        choose_source("jars", True, None)


def test_the_bundled_broker_is_known_by_its_cluster_id(kafka_bootstrap):
    """Tansu's Metadata answer names its cluster ``tansu_cluster``: what ``auto`` tells it by. (Its ListOffsets
    answer is test_planned_end_covers_every_record_of_a_multi_record_batch's case.)"""
    import os

    from streaming.spark.kafka_source import MISREPORTING_CLUSTERS, cluster_id

    if os.environ.get("KAFKA_BOOTSTRAP"):
        pytest.skip("a broker of the user's: not the bundled one")
    assert cluster_id(kafka_bootstrap) in MISREPORTING_CLUSTERS


@pytest.mark.spark
def test_restart_from_checkpoint_is_exactly_once(spark, kafka_bootstrap, topic_name, tmp_path):
    """Walking skeleton: events on a topic of the real broker -> streaming query through the source -> a parquet
    sink; stopped mid-way through the backlog, more events produced, restarted from the checkpoint: every event
    exactly once."""
    ensure_topics(kafka_bootstrap, {topic_name: 3})
    produce(kafka_bootstrap, topic_name, [f"e{i}" for i in range(30)])
    sink_dir, checkpoint = tmp_path / "sink", tmp_path / "cp"

    def start(**trigger):
        stream = read_kafka_stream(spark, kafka_bootstrap, [topic_name], max_offsets_per_trigger=5)
        return (
            stream.selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
            .writeStream.format("parquet")
            .option("path", str(sink_dir))
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    def sunk() -> list:
        return spark.read.parquet(str(sink_dir)).collect()  # reads through the sink's log: committed files only

    query = start(processingTime="0 seconds")
    deadline = time.monotonic() + 180
    while not any(p["numInputRows"] for p in query.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()  # 5 rows a batch: well before the 30-event backlog is done
    assert 0 < len(sunk()) < 30

    produce(kafka_bootstrap, topic_name, [f"e{i}" for i in range(30, 45)])
    query = start(availableNow=True)
    assert query.awaitTermination(600)  # a bound: AvailableNow stops by itself when done
    rows = sunk()
    assert sorted(r.v for r in rows) == sorted(f"e{i}" for i in range(45))
    assert len({(r.partition, r.offset) for r in rows}) == 45


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_each_client_reads_the_planned_range_with_the_same_columns(group_broker, topic_name, client):
    """The executors' reader with either client, on the session broker and on Apache Kafka 0.9 (librdkafka is told
    the version, kafka-python gets api_version (0, 9)): [start, end) exactly, the same values, columns and types."""
    from streaming.spark.kafka_source import ARROW_SCHEMA

    group_broker.create_topics({topic_name: 1})
    producer = KafkaProducer(bootstrap_servers=group_broker.bootstrap, linger_ms=50, acks="all", **group_broker.client)
    for i in range(30):
        producer.send(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    options = {"subscribe": topic_name, "kafkaClient": client}
    if group_broker.client:
        options["kafka.api.version"] = "0.9"
    reader = reader_for(group_broker.bootstrap, **options)
    try:
        batches = list(reader.read(KafkaRange(topic_name, 0, 4, 27)))
    finally:
        reader.stop()
    assert all(b.schema == ARROW_SCHEMA for b in batches)
    rows = [row for b in batches for row in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(4, 27))
    assert [(r["key"], r["value"]) for r in rows] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(4, 27)]
    assert {(r["topic"], r["partition"]) for r in rows} == {(topic_name, 0)}
    assert all(r["timestamp"] is not None for r in rows)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_read_returns_once_its_range_is_in_without_waiting_out_the_poll(kafka_bootstrap, topic_name, client):
    """A micro-batch reads a few records from each partition: a read task that waited out its poll's wait for more
    than its range (librdkafka's consume waits for the number of messages asked for) added that wait to every
    micro-batch. With a 30 s wait both a range inside the log and one ending at the log's end come back at once."""
    ensure_topics(kafka_bootstrap, {topic_name: 1})
    produce(kafka_bootstrap, topic_name, [f"v{i}" for i in range(40)], partition=0)
    reader = reader_for(kafka_bootstrap, subscribe=topic_name, kafkaClient=client)
    reader.consume_wait_s = 30
    try:
        for start, end in ((5, 17), (30, 40)):
            started = time.monotonic()
            assert read_offsets(reader, topic_name, 0, start, end) == list(range(start, end))
            assert time.monotonic() - started < 10, f"[{start}, {end}) waited out the poll"
    finally:
        reader.stop()


@pytest.mark.spark
def test_confluent_client_through_a_streaming_query(spark, kafka_bootstrap, topic_name, tmp_path):
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    values = [f"v{i}" for i in range(40)]
    produce(kafka_bootstrap, topic_name, values)
    rows = Rows()
    run(spark, kafka_bootstrap, topic_name, tmp_path / "cp", rows, source="confluent")
    assert rows.values == sorted(values)
    assert {r.timestampType for batch in rows.batches for r in batch} == {0}


def test_max_partitions_groups_whole_kafka_partitions_into_fewer_read_tasks(kafka_bootstrap, topic_name):
    ensure_topics(kafka_bootstrap, {topic_name: 3})
    for partition, count in ((0, 5), (1, 2), (2, 3)):
        produce(kafka_bootstrap, topic_name, [f"p{partition}-{i}" for i in range(count)], partition=partition)
    reader = reader_for(kafka_bootstrap, subscribe=topic_name, startingOffsets="earliest", maxpartitions="2")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        tasks = reader.partitions(start, end)
        # The largest partition alone, the two others together: 5 records a task each.
        assert tasks == [
            KafkaRanges((KafkaRange(topic_name, 0, 0, 5),)),
            KafkaRanges((KafkaRange(topic_name, 1, 0, 2), KafkaRange(topic_name, 2, 0, 3))),
        ]
        read = [
            [
                (p, o)
                for batch in reader.read(task)
                for p, o in zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist())
            ]
            for task in tasks
        ]
        assert read == [[(0, o) for o in range(5)], [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]]
    finally:
        reader.stop()
    # No more ranges than tasks: one task a Kafka partition, as Spark's own source plans.
    assert group_ranges([KafkaRange("t", 0, 0, 1)], 2) == [KafkaRange("t", 0, 0, 1)]
    with pytest.raises(ValueError, match="maxPartitions"):
        reader_for(kafka_bootstrap, subscribe=topic_name, maxpartitions="0")


def test_settings_for_other_clients_do_not_reach_the_readers():
    """``--kafka-conf`` goes to every client: a producer's setting (docs/recovery.md tells users to raise
    ``max.request.size``) must not make the source's consumers refuse to start."""
    from streaming.spark.kafka_source import client_config, confluent_config

    options = {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.max.request.size": "5000000",
        "kafka.client.id": "me",
        "kafka.reconnect.backoff.max.ms": "50",
    }
    config = client_config(options)
    assert "max_request_size" not in config
    assert config["client_id"] == "me" and config["reconnect_backoff_max_ms"] == 50
    assert confluent_config(dict(config))["client.id"] == "me"
