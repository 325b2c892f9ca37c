"""A Structured Streaming source for Kafka written in Python over kafka-python: format ``"kafka-python"``.

It stands in for Spark's own ``kafka`` source where the connector jars are not on the classpath: the same columns
(key, value, topic, partition, offset, timestamp, timestampType), the same offset JSON in the checkpoint
(``{"topic": {"0": 23}}``), and the options ``kafka.bootstrap.servers``, ``subscribe`` / ``subscribePattern``,
``startingOffsets`` (earliest | latest | JSON, -2 = earliest, -1 = latest), ``maxOffsetsPerTrigger``, plus
``Trigger.AvailableNow``, ``failOnDataLoss`` (records deleted before they were read: fail, or skip with
``false``), ``kafkaConsumer.pollTimeoutMs`` and ``maxPartitions`` (ours: at most this many read tasks a micro-batch,
each reading whole Kafka partitions one after the other; Spark's source has one task a Kafka partition); other
``kafka.*`` options go to kafka-python (``kafka.a.b`` -> ``a_b``). ``kafkaClient`` picks the library the executors
read records with: ``kafka-python`` (the default) or ``confluent`` (confluent-kafka, librdkafka: ~5-10x
kafka-python's records/s; see benchmarks/streaming.py). The driver plans offsets with kafka-python either way, so the
offsets and columns are the same. Partitions that appear later are read from their earliest offset, as Spark does.
Partitions missing from a ``startingOffsets`` JSON start from earliest (Spark rejects such a JSON).

Where a partition ends is taken as the larger of ListOffsets(latest) and the high-water mark of a fetch response:
some brokers (e.g. the bundled Tansu) answer ListOffsets with the start of the last batch + 1, which would hide the
rest of a multi-record batch until more data arrives.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from streaming.kafka_client.delivery import RETRY_S, broker_reachable, unreachable
from streaming.kafka_client.kafka_conf import for_client, to_kwargs
from streaming.kafka_client.log_end import log_end_offsets
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from streaming.gc_pause import gc_paused
from streaming.spark.memory_probe import probe

FORMAT = "kafka-python"
SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
EARLIEST, LATEST = -2, -1


def _orphaned(parent: int) -> bool:
    """The process that started this worker (Spark's JVM, or its worker daemon) is gone: stop waiting for anything."""
    return os.getppid() != parent


SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
_watchdog: threading.Thread | None = None


def _in_source_runner() -> bool:
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return main is not None and main.name == SOURCE_RUNNER


def _exit_when_orphaned(every_s: float = 0.5) -> None:
    """In the process that plans micro-batches (Spark's streaming-source runner, a child of the JVM): exit as soon
    as the JVM is gone. A planning call in flight when the job is killed would otherwise hold the process for up to
    kafka-python's request timeout (30 s) before it finds out."""
    global _watchdog
    if _watchdog is not None or not _in_source_runner():
        return  # only there: a driver or test process calling the reader is nobody's worker
    parent = os.getppid()

    def watch() -> None:
        while not _orphaned(parent):
            time.sleep(every_s)
        os._exit(1)  # nobody is left to answer; skip clean-up that could block on the dead broker or JVM

    _watchdog = threading.Thread(target=watch, name="exit-when-orphaned", daemon=True)
    _watchdog.start()


CLIENTS = ("kafka-python", "confluent")
DEFAULT_CLIENT = "kafka-python"
# What reads the events (read_kafka_stream's ``source``): this module with its default client or a named one, Spark's
# own connector, or Spark's where it is on the classpath.
SOURCES = ("python", *CLIENTS, "builtin", "auto")


def _arrow_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
        ]
    )


ARROW_SCHEMA = _arrow_schema()


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """One topic-partition's offsets [start, end) for one micro-batch; read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def client_config(options: dict[str, str]) -> dict:
    """``kafka.*`` options (Spark's spelling) to a kafka-python consumer's keyword arguments
    (``streaming.kafka_client.kafka_conf``). Settings for other clients (``max.request.size`` is a producer's, given
    to every client by ``--kafka-conf``) are left out: the consumer refuses them by name."""
    from kafka import KafkaConsumer

    props = {
        key[len("kafka.") :]: value
        for key, value in options.items()
        if key.startswith("kafka.") and key != "kafka.bootstrap.servers"
    }
    # Reconnect within a second of a broker's return (kafka-python backs off up to 30 s by default).
    return for_client(
        KafkaConsumer,
        to_kwargs(props),
        reconnect_backoff_max_ms=1000,
        bootstrap_servers=options["kafka.bootstrap.servers"],
    )


@dataclass(frozen=True)
class KafkaRanges(InputPartition):
    """Several topic-partitions' ranges, read one after the other by one Spark task (option ``maxPartitions``)."""

    ranges: tuple[KafkaRange, ...]


def group_ranges(ranges: list[KafkaRange], tasks: int) -> list[KafkaRange | KafkaRanges]:
    """At most ``tasks`` read tasks, as even in records as a greedy fill makes them (largest range to the least
    loaded task). With no more ranges than tasks, one task a range, as Spark's own source plans."""
    if len(ranges) <= tasks:
        return list(ranges)
    loads = [(0, i, []) for i in range(tasks)]
    for r in sorted(ranges, key=lambda r: (-(r.end - r.start), r.topic, r.partition)):
        load, i, members = min(loads)
        loads[i] = (load + r.end - r.start, i, members + [r])
    return [
        KafkaRanges(tuple(sorted(members, key=lambda r: (r.topic, r.partition)))) for _, _, members in loads if members
    ]


class KafkaPythonDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "KafkaStreamReader":
        return KafkaStreamReader({k.lower(): v for k, v in self.options.items()})


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    # The longest one confluent-kafka consume() waits for the records still due in a read task's range.
    consume_wait_s = 0.5

    def __init__(self, options: dict[str, str]) -> None:
        if "kafka.bootstrap.servers" not in options:
            raise ValueError("option 'kafka.bootstrap.servers' is required")
        if not (options.get("subscribe") or options.get("subscribepattern")):
            raise ValueError("one of the options 'subscribe' or 'subscribePattern' is required")
        self.options = options
        self.topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
        self.pattern = re.compile(options["subscribepattern"]) if options.get("subscribepattern") else None
        self.kafka_client = options.get("kafkaclient", DEFAULT_CLIENT)
        if self.kafka_client not in CLIENTS:
            raise ValueError(f"kafkaClient must be one of {', '.join(CLIENTS)}, not {self.kafka_client!r}")
        limit = options.get("maxoffsetspertrigger")
        self.max_offsets_per_trigger = int(limit) if limit else None
        tasks = options.get("maxpartitions")
        self.max_partitions = int(tasks) if tasks else None
        if self.max_partitions is not None and self.max_partitions < 1:
            raise ValueError(f"maxPartitions must be at least 1, not {tasks}")
        self.available_now_target: dict | None = None
        self._reported_latest: dict | None = None
        self._consumer = None

    # Workers receive a pickled reader for read(); the driver-side consumer stays behind.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_consumer"] = None
        return state

    # ------------------------------------------------------------------ driver side: planning offsets
    @property
    def consumer(self):
        if self._consumer is None:
            from kafka import KafkaConsumer

            _exit_when_orphaned()
            # Planning only needs high-water marks: fetch as little as possible.
            self._consumer = KafkaConsumer(
                **{"client_id": "spark-kafka-python-source"}
                | client_config(self.options)
                | {"enable_auto_commit": False, "fetch_max_wait_ms": 10, "max_partition_fetch_bytes": 1}
            )
        return self._consumer

    def _waiting(self, call):
        """Run a planning call; while the broker is gone, wait for it (a new consumer each try) instead of failing
        the query: the micro-batch is planned when the broker is back."""
        parent = os.getppid()
        while True:
            try:
                return call()
            except Exception as exc:
                if not unreachable(exc, self.options["kafka.bootstrap.servers"]) or _orphaned(parent):
                    raise
                self.stop()
                time.sleep(RETRY_S)

    def _partitions(self) -> list:
        return self._waiting(self._list_partitions)

    def _list_partitions(self) -> list:
        from kafka import TopicPartition

        consumer = self.consumer
        available = consumer.topics()  # refreshes metadata, so new topics and partitions show up
        names = sorted(t for t in available if self.pattern.fullmatch(t)) if self.pattern else self.topics
        tps = []
        for topic in names:
            for p in sorted(consumer.partitions_for_topic(topic) or []):
                tps.append(TopicPartition(topic, p))
        return tps

    def _earliest(self, tps) -> dict:
        return self._waiting(lambda: self.consumer.beginning_offsets(tps)) if tps else {}

    def _latest(self, tps) -> dict:
        """End of each partition: max(ListOffsets latest, fetch high-water mark)."""
        return self._waiting(lambda: log_end_offsets(self.consumer, tps))

    def initialOffset(self) -> dict:
        tps = self._partitions()
        starting = self.options.get("startingoffsets", "latest").strip()
        if starting == "earliest":
            return _to_json(self._earliest(tps))
        if starting == "latest":
            return _to_json(self._latest(tps))
        import json

        try:
            given = json.loads(starting)
        except ValueError:
            raise ValueError(f"startingOffsets must be earliest, latest or JSON, not {starting!r}") from None
        earliest, latest = self._earliest(tps), self._latest(tps)
        out: dict[str, dict[str, int]] = {}
        for tp in tps:
            offset = given.get(tp.topic, {}).get(str(tp.partition), EARLIEST)
            out.setdefault(tp.topic, {})[str(tp.partition)] = (
                earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else int(offset)
            )
        return out

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        tps = self._partitions()
        target = self.available_now_target
        if target is not None:
            # AvailableNow reads only what existed when the query started: partitions that appear later wait
            # for the next run (which starts them from earliest, as they are not in its checkpoint).
            tps = [tp for tp in tps if str(tp.partition) in target.get(tp.topic, {})]
        latest = _to_json(self._latest(tps))
        self._reported_latest = latest if target is None else None  # AvailableNow left partitions out
        if target is not None:
            latest = _cap(latest, target)
        # Partitions that appeared since the last batch start at their earliest offset.
        new = [tp for tp in tps if str(tp.partition) not in start.get(tp.topic, {})]
        base = _merge(_to_json(self._earliest(new)), start)
        # Never plan an end below the start: a low answer from the broker would otherwise make the next batch
        # re-read records that were already delivered.
        latest = _floor(latest, base)
        if isinstance(limit, ReadMaxRows):
            return _rate_limit(base, latest, limit.max_rows)
        return _merge(base, latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_offsets_per_trigger:
            return ReadMaxRows(self.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_target = _to_json(self._latest(self._partitions()))

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after latestOffset, for its progress report: the log end that call found is the answer
        # (asking the broker again cost a metadata refresh, which kafka-python holds back 100 ms after the last one).
        latest, self._reported_latest = self._reported_latest, None
        return latest if latest is not None else _to_json(self._latest(self._partitions()))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = []
        for topic, parts in sorted(end.items()):
            for p, stop in sorted(parts.items(), key=lambda kv: int(kv[0])):
                begin = start.get(topic, {}).get(p)
                if begin is None:  # a partition new in this batch
                    from kafka import TopicPartition

                    begin = self._earliest([TopicPartition(topic, int(p))])[TopicPartition(topic, int(p))]
                if stop > begin:
                    ranges.append(KafkaRange(topic, int(p), int(begin), int(stop)))
        # Each read task costs Spark ~0.1 s of start and hand-over on top of its records: on a small machine, tasks
        # beyond its cores wait for a second wave that costs as much again.
        return group_ranges(ranges, self.max_partitions) if self.max_partitions else ranges

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint, as with Spark's own Kafka source

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if _in_source_runner() and isinstance(sys.exc_info()[1], EOFError):
            # Spark's runner calls this on its way out when the JVM closed its socket (the query stopped, the JVM
            # exited); it would then try to report the EOF on that closed socket and print two tracebacks over the
            # user's terminal. Nobody is listening: leave quietly.
            os._exit(0)

    # ------------------------------------------------------------------ executor side: reading records
    def read(self, partition: KafkaRange | KafkaRanges) -> Iterator:
        """Yield Arrow record batches (one per poll): far cheaper than a Python tuple per record."""
        probe("read")
        if isinstance(partition, KafkaRanges):
            for one in partition.ranges:
                yield from self.read(one)
            return
        if self.kafka_client == "confluent":
            yield from self._read_confluent(partition)
            return
        import pyarrow as pa
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import OffsetOutOfRangeError

        tp = TopicPartition(partition.topic, partition.partition)
        fail_on_data_loss = self.options.get("failondataloss", "true").lower() != "false"
        poll_timeout_s = int(self.options.get("kafkaconsumer.polltimeoutms", "120000")) / 1000
        config = (
            {"client_id": "spark-kafka-python-reader"}
            | client_config(self.options)
            | {
                "enable_auto_commit": False,
                "max_poll_records": 5_000,
                # Records deleted by retention before we read them: fail (Spark's default) or skip to what is left.
                "auto_offset_reset": "none" if fail_on_data_loss else "earliest",
            }
        )
        bootstrap, parent = self.options["kafka.bootstrap.servers"], os.getppid()
        while True:  # a broker that is gone is waited for: the task goes on when it is back
            try:
                consumer = KafkaConsumer(**config)
                break
            except Exception as exc:
                if not unreachable(exc, bootstrap) or _orphaned(parent):
                    raise
                time.sleep(RETRY_S)
        try:
            consumer.assign([tp])
            consumer.seek(tp, partition.start)
            position, idle_since = partition.start, time.monotonic()
            while position < partition.end:
                with gc_paused():  # a poll builds thousands of small objects: ~25% less CPU
                    try:
                        polled = consumer.poll(timeout_ms=500).get(tp, [])
                    except OffsetOutOfRangeError:
                        raise RuntimeError(
                            f"{tp}: offset {position} is no longer on the broker (deleted by retention?); records "
                            f"up to {partition.end} are lost. Set failOnDataLoss=false to skip them."
                        ) from None
                    # The plan's end is exclusive: later records belong to the next micro-batch.
                    records = [r for r in polled if r.offset < partition.end]
                    batch = _to_arrow(records, pa) if records else None
                if records:
                    yield batch
                    idle_since = time.monotonic()
                    position = records[-1].offset + 1
                # Offsets may have gaps (compaction, transaction markers): trust the consumer's position too.
                position = max(position, consumer.position(tp))
                if (
                    not polled
                    and time.monotonic() - idle_since > poll_timeout_s
                    and not broker_reachable(bootstrap)
                    and not _orphaned(parent)
                ):
                    idle_since = time.monotonic()  # the broker is gone: waiting for it is not waiting for records
                elif not polled and time.monotonic() - idle_since > poll_timeout_s:
                    raise TimeoutError(
                        f"no records from {tp} at offset {position} for {poll_timeout_s:.0f} s "
                        f"(planned to read up to {partition.end})"
                    )
        finally:
            consumer.close()

    def _read_confluent(self, partition: KafkaRange) -> Iterator:
        from confluent_kafka import Consumer, TopicPartition

        fail_on_data_loss = self.options.get("failondataloss", "true").lower() != "false"
        poll_timeout_s = int(self.options.get("kafkaconsumer.polltimeoutms", "120000")) / 1000
        config = confluent_config(client_config(self.options)) | {
            "group.id": "spark-kafka-source-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
            "fetch.wait.max.ms": 100,
            "queued.min.messages": 100_000,
        }
        consumer = Consumer(config)
        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            position, idle_since = partition.start, time.monotonic()
            while position < partition.end:
                with gc_paused():  # 10k messages a consume: ~35% less CPU without the collector
                    batch, position, polled = self._consume(consumer, partition, position, self.consume_wait_s)
                if batch is not None:
                    yield batch
                    idle_since = time.monotonic()
                elif not polled and time.monotonic() - idle_since > poll_timeout_s:
                    raise TimeoutError(
                        f"no records from {partition.topic}-{partition.partition} at offset "
                        f"{position} for {poll_timeout_s:.0f} s (planned to read up to "
                        f"{partition.end})"
                    )
        finally:
            consumer.close()

    @staticmethod
    def _consume(consumer, partition: KafkaRange, position: int, wait_s: float) -> tuple:
        """One ``consume`` of up to ``wait_s``: an Arrow batch (None if it brought no record of the range), the new
        position and how many messages it returned (end-of-partition events included)."""
        import pyarrow as pa
        from confluent_kafka import KafkaError, KafkaException

        # consume() returns once it has num_messages or when the wait is up: asking for no more than the range still
        # holds returns as soon as they are here, where asking for more waited out the wait in every read task.
        messages = consumer.consume(num_messages=max(1, min(10_000, partition.end - position)), timeout=wait_s)
        keys, values, offsets, stamps, types = [], [], [], [], []
        for m in messages:
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    position = max(position, m.offset())  # the end of the log: nothing hides past it
                    continue
                if error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                    raise RuntimeError(
                        f"{partition.topic}-{partition.partition}: offset {position} is no longer on the "
                        f"broker (deleted by retention?); records up to {partition.end} are lost. Set "
                        f"failOnDataLoss=false to skip them."
                    )
                raise KafkaException(error)
            offset = m.offset()
            if offset >= partition.end:  # later records belong to the next micro-batch
                position = partition.end
                break
            kind, ts = m.timestamp()  # librdkafka: 0 none, 1 create time, 2 log append; Kafka: -1, 0, 1
            keys.append(m.key())
            values.append(m.value())
            offsets.append(offset)
            stamps.append(_micros(ts) if kind else -1000)
            types.append(kind - 1)
        if not offsets:
            return None, position, len(messages)
        n = len(offsets)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array([partition.topic] * n, pa.string()),
                pa.array([partition.partition] * n, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(stamps, pa.timestamp("us", tz="UTC")),
                pa.array(types, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )
        return batch, max(position, offsets[-1] + 1), len(messages)


def confluent_config(kwargs: dict) -> dict:
    """kafka-python keyword arguments (``client_config``) as librdkafka settings, for the settings that have one;
    anything else is refused by name rather than dropped."""
    out = {"bootstrap.servers": kwargs.pop("bootstrap_servers")}
    version = kwargs.pop("api_version", None)
    if version is not None and tuple(version) < (0, 10):
        # Brokers before 0.10 do not answer ApiVersions; librdkafka must be told what to speak.
        out |= {"api.version.request": False, "broker.version.fallback": ".".join(map(str, version)) + ".0"}
        if tuple(version)[:2] == (0, 9):
            out["broker.version.fallback"] = "0.9.0.1"
    names = {
        "client_id": "client.id",
        "security_protocol": "security.protocol",
        "sasl_mechanism": "sasl.mechanism",
        "sasl_plain_username": "sasl.username",
        "sasl_plain_password": "sasl.password",
        "ssl_cafile": "ssl.ca.location",
        "ssl_certfile": "ssl.certificate.location",
        "ssl_keyfile": "ssl.key.location",
        "ssl_password": "ssl.key.password",
        "request_timeout_ms": "socket.timeout.ms",
        "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
        "max_request_size": "message.max.bytes",
    }
    for key, value in kwargs.items():
        if key == "ssl_check_hostname":
            out["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
        elif key in names:
            out[names[key]] = value
        else:
            raise ValueError(
                f"kafkaClient=confluent: no librdkafka setting for kafka-python's {key}; use kafkaClient=kafka-python"
            )
    return out


_MAX_MICROS_MS = (2**63 - 1) // 1000


def _micros(ms: int) -> int | None:
    """A record timestamp (epoch ms, any int64 Kafka allows) as Spark's microseconds; null where those overflow
    (the parse stage reads a null as "no timestamp")."""
    return ms * 1000 if -_MAX_MICROS_MS <= ms <= _MAX_MICROS_MS else None


def _to_arrow(records: list, pa):
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            # Kafka: ms since epoch; brokers before 0.10 keep none (-1 and type -1, as Kafka's Java client reports).
            pa.array(
                [-1000 if r.timestamp is None else _micros(r.timestamp) for r in records], pa.timestamp("us", tz="UTC")
            ),
            pa.array([-1 if r.timestamp_type is None else r.timestamp_type for r in records], pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


def _to_json(offsets: dict) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out


def _merge(base: dict, top: dict) -> dict:
    out = {t: dict(p) for t, p in base.items()}
    for topic, parts in top.items():
        out.setdefault(topic, {}).update(parts)
    return out


def _floor(latest: dict, base: dict) -> dict:
    return {t: {p: max(o, base.get(t, {}).get(p, o)) for p, o in parts.items()} for t, parts in latest.items()}


def _cap(latest: dict, target: dict) -> dict:
    return {t: {p: min(o, target.get(t, {}).get(p, o)) for p, o in parts.items()} for t, parts in latest.items()}


def _rate_limit(start: dict, latest: dict, max_rows: int) -> dict:
    """Like Spark's maxOffsetsPerTrigger: share the budget across partitions in proportion to their backlog."""
    backlog = {(t, p): max(o - start.get(t, {}).get(p, o), 0) for t, parts in latest.items() for p, o in parts.items()}
    total = sum(backlog.values())
    out = _merge(start, {})
    if total <= max_rows:
        return _merge(start, latest)
    budget = max_rows
    for (t, p), lag in sorted(backlog.items()):
        take = min(lag, int(max_rows * lag / total)) if total else 0
        out.setdefault(t, {})[p] = start.get(t, {}).get(p, 0) + take
        budget -= take
    for (t, p), lag in sorted(backlog.items(), key=lambda kv: -kv[1]):  # rounding leftovers, biggest backlog first
        if budget <= 0:
            break
        extra = min(budget, lag - (out[t][p] - start.get(t, {}).get(p, 0)))
        out[t][p] += extra
        budget -= extra
    return out


# ---------------------------------------------------------------------------------------------------------------
def builtin_kafka_available(spark) -> bool:
    """Is Spark's own Kafka connector on the JVM classpath? (Asked of Spark's class loader, which holds
    ``spark.jars``; py4j's ``Class.forName`` sees only the JVM's start-up class path.)"""
    try:
        spark.sparkContext._jvm.org.apache.spark.util.Utils.classForName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider", False, False
        )
        return True
    except Exception:  # py4j wraps ClassNotFoundException; any failure means "not usable"
        return False


# Brokers whose ListOffsets(latest) answer Spark's connector cannot read by: Tansu (the bundled broker) answers with the
# start of a partition's last record batch + 1, so the connector would not see the rest of that batch until more
# records arrive. Known by the cluster id in their Metadata answer; this module's source reads them correctly.
MISREPORTING_CLUSTERS = {"tansu_cluster": "Tansu"}


def cluster_id(bootstrap: str, client: dict | None = None) -> str | None:
    """The cluster id the broker gives in its Metadata answer (None from brokers before Kafka 0.10.1)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        **for_client(KafkaConsumer, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-admin")
    )
    try:
        consumer.topics()  # a Metadata request
        return consumer._client.cluster.cluster_id
    finally:
        consumer.close()


def choose_source(
    source: str,
    connector_loaded: bool,
    broker_cluster_id: str | None | Callable[[], str | None],
    broker_version: tuple[int, ...] | None = None,
    secured: bool = False,
) -> tuple[str, str]:
    """What ``source`` reads with, and why, in words: ``auto`` is Spark's connector where it is loaded, the connection
    is plaintext and the broker (speaking ``broker_version``, where known) answers as Kafka 0.10 and later do, else
    this module's source with its default client. ``broker_cluster_id`` may be a function, asked only when the
    answer depends on it (it talks to the broker)."""
    if source not in SOURCES:
        raise ValueError(f"kafka source must be {', '.join(CLIENTS)}, python, builtin or auto, not {source!r}")
    if source != "auto":
        return source, "as asked"
    if not connector_loaded:
        return "python", "Spark's Kafka connector is not loaded (see streaming/spark/connector.py)"
    if secured:
        # The settings were checked against the broker by the Python clients, in kafka-python's terms (PEM files,
        # username and password); the connector's Java client would take only its own names, and say less.
        return "python", (
            "the connection is secured (SASL/SSL): the Python source reads with the settings checked "
            "before Spark started; --kafka-source builtin passes them to Spark's connector as they are"
        )
    if broker_version is not None and broker_version < (0, 10):
        # The connector's kafka-clients opens with ApiVersions, which Kafka 0.9 does not answer.
        return "python", (
            f"the broker speaks Kafka {'.'.join(map(str, broker_version))}, older than 0.10, "
            f"which Spark's connector cannot read"
        )
    if callable(broker_cluster_id):
        broker_cluster_id = broker_cluster_id()
    broker = MISREPORTING_CLUSTERS.get(broker_cluster_id or "")
    if broker is not None:
        return "python", (
            f"the broker is {broker}, whose ListOffsets answer hides the rest of a partition's last "
            f"record batch from Spark's connector"
        )
    return "builtin", "Spark's Kafka connector is loaded"


def read_kafka_stream(
    spark,
    bootstrap: str,
    topics: list[str],
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    source: str = "python",
    extra_options: dict[str, str] | None = None,
):
    """A streaming DataFrame of Kafka records with Spark's kafka-source columns.

    ``source``: ``python`` (this module, reading with its default client), ``kafka-python`` or ``confluent`` (this
    module with that client), ``builtin`` (Spark's connector, which must be on the classpath) or ``auto`` (builtin
    when it is loaded: ``choose_source``, which the tracker also asks about the broker)."""
    if source not in SOURCES:
        raise ValueError(f"kafka source must be {', '.join(CLIENTS)}, python, builtin or auto, not {source!r}")
    if source == "auto":
        source = choose_source(source, builtin_kafka_available(spark), None)[0]
    if source == "builtin":
        reader = spark.readStream.format("kafka")
    else:
        spark.dataSource.register(KafkaPythonDataSource)
        reader = spark.readStream.format(FORMAT)
        if source in CLIENTS:
            reader = reader.option("kafkaClient", source)
        # One wave of read tasks: no more of them than the cores Spark runs tasks on at once.
        reader = reader.option("maxPartitions", str(max(1, spark.sparkContext.defaultParallelism)))
    reader = (
        reader.option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    for key, value in (extra_options or {}).items():
        reader = reader.option(key, value)
    return reader.load().select("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
