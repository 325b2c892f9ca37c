"""Keep the tracked groups' topic sizes in step with the broker, like a consumer leader's metadata refresh.

The job learns partition counts from ``topic_metadata`` events. This driver-side watcher looks up the topics the
groups use (periodically, and at once for topics a rebalance could not size) and, when a count is new or changed,
appends a global ``topic_metadata`` event to the events topic. The job then hands it to every group, and a group whose
subscribed topic changed size rebalances — as Kafka's leader would after its metadata refresh.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from streaming.kafka_client.kafka_conf import for_client

log = logging.getLogger(__name__)


class TopicMetadataWatcher:
    def __init__(self, bootstrap: str, events_topic: str, interval_s: float = 30.0, client: dict | None = None) -> None:
        self.bootstrap = bootstrap
        self.client = client or {}  # kafka-python settings (see streaming.kafka_client.kafka_conf)
        self.events_topic = events_topic
        self.interval_s = interval_s
        self.watched: set[str] = set()
        self.published: dict[str, int] = {}
        self._urgent = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._consumer = None
        self._producer = None

    # -- fed by the sink ----------------------------------------------------------------------------------------
    def observe(self, outputs: list[dict]) -> None:
        with self._lock:
            for o in outputs:
                if o.get("type") == "group_restored" and o.get("topics"):
                    # Sizes rebuilt from the store are the stored assignment's: look them up now.
                    self.watched.update(o["topics"])
                    self._urgent.set()
                if o.get("type") != "rebalance":
                    continue
                for parts in (o.get("assignment") or {}).values():
                    self.watched.update(tp[0] for tp in parts)
                if o.get("unknown_topics"):
                    self.watched.update(o["unknown_topics"])
                    self._urgent.set()

    # -- the loop -----------------------------------------------------------------------------------------------
    def start(self) -> "TopicMetadataWatcher":
        self._thread = threading.Thread(target=self._run, name="topic-metadata-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._urgent.set()
        if self._thread is not None:
            self._thread.join(5)
        for client in (self._consumer, self._producer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing on shutdown must not mask the real outcome
                    pass

    def _run(self) -> None:
        while not self._stop.is_set():
            self._urgent.wait(self.interval_s)
            self._urgent.clear()
            if self._stop.is_set():
                break
            try:
                self.poll_once()
            except Exception as exc:  # a broker hiccup must not kill the tracker; try again next round
                if not self._stop.is_set():
                    log.warning("topic metadata refresh failed: %s", exc)

    def poll_once(self) -> dict[str, int]:
        """Look the watched topics up; publish the sizes that are new or changed. Returns what was published."""
        from kafka import KafkaConsumer, KafkaProducer

        with self._lock:
            topics = sorted(self.watched)
        if not topics:
            return {}
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **for_client(
                    KafkaConsumer, self.client, bootstrap_servers=self.bootstrap, client_id="rebalance-tracker-metadata"
                )
            )
        self._consumer.topics()  # forces a metadata refresh
        changed = {}
        for topic in topics:
            partitions = self._consumer.partitions_for_topic(topic)
            if partitions and self.published.get(topic) != len(partitions):
                changed[topic] = len(partitions)
        if changed:
            if self._producer is None:
                self._producer = KafkaProducer(
                    **for_client(
                        KafkaProducer,
                        self.client,
                        acks="all",
                        bootstrap_servers=self.bootstrap,
                        client_id="rebalance-tracker-metadata",
                    )
                )
            now = int(time.time() * 1000)
            for topic, count in changed.items():
                event = {"type": "topic_metadata", "topic": topic, "partitions": count, "ts": now}
                self._producer.send(self.events_topic, key=b"", value=json.dumps(event).encode("utf-8"))
            self._producer.flush()
            self.published.update(changed)
        return changed
