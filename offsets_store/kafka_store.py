"""Store at scale: a compacted Kafka topic laid out like ``__consumer_offsets`` — same key and value bytes, 50
partitions by default, each group's records in partition ``partition_for(group)``.

Every write checks that each record was acknowledged (``streaming/kafka_client/delivery.py``): while the broker is
gone it waits and sends again; a record Kafka refuses for good raises ``DeliveryError`` and no marker is written.

Loading reads every partition to its end and keeps the last value per key, so it is correct whether or not the
broker has compacted yet (the bundled Tansu broker does not). Batch idempotency: after a batch's records are acked, a
marker record (key version 0x7FFF, partition 0) stores its id; a batch id at or below the marker is skipped.
"""

from __future__ import annotations

import time

from offsets_store import schemas as s
from offsets_store.codec import decode_record, encode_record, record_group
from streaming.kafka_client.delivery import close_quietly, send_until_delivered
from streaming.kafka_client.kafka_conf import for_client
from offsets_store.partitioning import partition_for
from offsets_store.store import STORE_TYPES, Store, already_applied, log
from offsets_store.wire import CodecError, decode, encode

TOPIC_CONFIG = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(100 * 1024 * 1024)}
MARKER_KEY = encode(s.BATCH_MARKER_KEY, s.BATCH_MARKER_KEY_VERSION, {"name": "batch_id"})
MARKER_PARTITION = 0


class KafkaStore(Store):
    def __init__(
        self, bootstrap: str, topic: str, partitions: int = 50, replication_factor: int = 1, client: dict | None = None
    ) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        # kafka-python settings (see streaming.kafka_client.kafka_conf), for every client of the store
        self.client = client or {}
        self._ensure_topic(replication_factor)
        self._producer = None
        self._cache: dict[bytes, bytes] | None = None  # the compacted view: key -> latest non-null value
        self._last_batch_id = -1

    def _ensure_topic(self, replication_factor: int) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(
            **for_client(
                KafkaAdminClient,
                self.client,
                bootstrap_servers=self.bootstrap,
                client_id="rebalance-tracker-offsets-store",
            )
        )
        try:
            if self.topic not in set(admin.list_topics()):
                try:
                    admin.create_topics(
                        [NewTopic(self.topic, self.partitions, replication_factor, topic_configs=TOPIC_CONFIG)]
                    )
                    return
                except TopicAlreadyExistsError:
                    pass
            # An existing topic keeps its partition count (like offsets.topic.num.partitions, it must never change
            # under existing data): group -> partition follows the topic, not the requested count.
            (described,) = admin.describe_topics([self.topic])
            existing = len(described["partitions"])
            if existing and existing != self.partitions:
                log.warning(
                    "offsets store: topic %s has %d partitions, not %d; using %d",
                    self.topic,
                    existing,
                    self.partitions,
                    existing,
                )
                self.partitions = existing
        finally:
            admin.close()

    @property
    def producer(self):
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                **for_client(
                    KafkaProducer,
                    self.client,
                    bootstrap_servers=self.bootstrap,
                    linger_ms=5,
                    client_id="rebalance-tracker-offsets-store",
                )
                | {"acks": "all"}
            )  # the batch marker relies on it
        return self._producer

    def last_batch_id(self) -> int:
        self._view()
        return self._last_batch_id

    def start_new_lineage(self) -> None:
        self._view()
        marker = encode(s.BATCH_MARKER_VALUE, 0, {"batchId": -1})
        send_until_delivered(
            lambda: self._send([(MARKER_KEY, marker, MARKER_PARTITION)]),
            self.bootstrap,
            f"offsets store {self.topic}: resetting the batch marker",
            self._drop_producer,
        )
        self._last_batch_id = -1

    def write(self, records: list[dict], batch_id: int | None = None) -> None:
        view = self._view()
        if already_applied(batch_id, self._last_batch_id):
            return  # applied before (this process or an earlier one): a replay after a restart
        encoded = [
            (encode_record(r), partition_for(record_group(r), self.partitions))
            for r in records
            if r.get("type") in STORE_TYPES
        ]
        what = f"offsets store {self.topic}" + (f", batch {batch_id}" if batch_id is not None else "")
        # The marker must never be durable before the records it vouches for: it goes only after all were acked.
        send_until_delivered(
            lambda: self._send([(k, v, p) for (k, v), p in encoded]),
            self.bootstrap,
            f"{what}: writing {len(encoded)} records",
            self._drop_producer,
        )
        if batch_id is not None:
            marker = encode(s.BATCH_MARKER_VALUE, 0, {"batchId": batch_id})
            send_until_delivered(
                lambda: self._send([(MARKER_KEY, marker, MARKER_PARTITION)]),
                self.bootstrap,
                f"{what}: writing the batch marker",
                self._drop_producer,
            )
            self._last_batch_id = batch_id
        for (key, value), _ in encoded:
            if value is None:
                view.pop(key, None)
            else:
                view[key] = value

    def _send(self, messages: list[tuple[bytes, bytes | None, int]]) -> list:
        futures = [self.producer.send(self.topic, key=k, value=v, partition=p) for k, v, p in messages]
        if futures:
            self.producer.flush()
        return futures

    def _drop_producer(self) -> None:
        close_quietly(self._producer)
        self._producer = None

    def _view(self) -> dict[bytes, bytes]:
        if self._cache is None:
            latest = self._read_all()
            marker = latest.pop(MARKER_KEY, None)
            if marker is not None:
                try:
                    self._last_batch_id = decode(s.BATCH_MARKER_VALUE, marker)[1]["batchId"]
                except CodecError:
                    self._last_batch_id = -1
            self._cache = latest
        return self._cache

    def _read_all(self) -> dict[bytes, bytes]:
        """Every partition from its start to its end; the last value per key wins, a null value deletes."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            **for_client(
                KafkaConsumer,
                self.client,
                bootstrap_servers=self.bootstrap,
                client_id="rebalance-tracker-offsets-loader",
            )
            | {"enable_auto_commit": False}
        )
        try:
            tps = [TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or [])]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            listed = consumer.end_offsets(tps)
            latest: dict[bytes, bytes | None] = {}
            idle_deadline = time.monotonic() + 5
            while True:
                batches = consumer.poll(timeout_ms=200)
                for records in batches.values():
                    for record in records:
                        latest[record.key] = record.value
                if batches:
                    idle_deadline = time.monotonic() + 5
                # The end is the high-water mark of a fetch response: Tansu under-reports ListOffsets(latest) when a
                # produce request held several records, so the listed end is only a lower bound.
                if all(
                    consumer.highwater(tp) is not None
                    and consumer.position(tp) >= max(listed[tp], consumer.highwater(tp))
                    for tp in tps
                ):
                    break
                if time.monotonic() > idle_deadline:
                    raise TimeoutError(f"could not read {self.topic} to its end")
        finally:
            consumer.close()
        return {k: v for k, v in latest.items() if v is not None}

    def load_records(self) -> list[dict]:
        out = []
        for key, value in self._view().items():
            record = decode_record(key, value)
            if record["type"] in STORE_TYPES:  # share/streams-group records are not ours to rebuild from
                out.append(record)
        return out

    def raw_records(self) -> list[tuple[bytes, bytes]]:
        """The live key/value bytes (compacted view), as Kafka would hold them after compaction."""
        return sorted(self._view().items())

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush()
            self._producer.close()
            self._producer = None
