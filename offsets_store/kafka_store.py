"""Store at scale: a compacted Kafka topic laid out like ``__consumer_offsets`` — same key and value bytes, 50
partitions by default, each group's records in partition ``partition_for(group)``.

Writes are naturally idempotent: replaying a batch rewrites the same keys with the same values, and compaction keeps
the latest. Loading reads every partition to its end and keeps the last value per key, so it is correct whether or not
the broker has compacted yet.
"""
from __future__ import annotations

import time

from offsets_store.codec import decode_record, encode_record
from offsets_store.partitioning import partition_for
from offsets_store.store import STORE_TYPES, Store

TOPIC_CONFIG = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": str(100 * 1024 * 1024)}


class KafkaStore(Store):
    def __init__(self, bootstrap: str, topic: str, partitions: int = 50, replication_factor: int = 1) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self._ensure_topic(replication_factor)
        self._producer = None
        self._cache: dict[bytes, bytes] | None = None

    def _ensure_topic(self, replication_factor: int) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="rebalance-tracker-offsets-store")
        try:
            if self.topic not in set(admin.list_topics()):
                try:
                    admin.create_topics([NewTopic(self.topic, self.partitions, replication_factor,
                                                  topic_configs=TOPIC_CONFIG)])
                except TopicAlreadyExistsError:
                    pass
        finally:
            admin.close()

    @property
    def producer(self):
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                                           client_id="rebalance-tracker-offsets-store")
        return self._producer

    def write(self, records: list[dict], batch_id: int | None = None) -> None:
        sent = False
        for r in records:
            if r.get("type") not in STORE_TYPES:
                continue
            key, value = encode_record(r)
            self.producer.send(self.topic, key=key, value=value,
                               partition=partition_for(r["group_id"], self.partitions))
            if self._cache is not None:
                if value is None:
                    self._cache.pop(key, None)
                else:
                    self._cache[key] = value
            sent = True
        if sent:
            self.producer.flush()

    def _read_all(self) -> dict[bytes, bytes]:
        """Every partition from its start to its end; the last value per key wins, a null value deletes."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                 client_id="rebalance-tracker-offsets-loader")
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
                # The end is the high-water mark of a fetch response (some brokers under-report ListOffsets).
                ends = {tp: max(listed[tp], consumer.highwater(tp) or 0) for tp in tps}
                if all(consumer.highwater(tp) is not None and consumer.position(tp) >= ends[tp] for tp in tps):
                    break
                if time.monotonic() > idle_deadline:
                    raise TimeoutError(f"could not read {self.topic} to its end")
        finally:
            consumer.close()
        return {k: v for k, v in latest.items() if v is not None}

    def load_records(self) -> list[dict]:
        if self._cache is None:
            self._cache = self._read_all()
        return [decode_record(k, v) for k, v in self._cache.items()]

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush()
            self._producer.close()
            self._producer = None
