"""Sample where the tracked groups' partitions end, and publish each sample as a ``log_end`` event.

Lag is measured against the log end (streaming/coordinator/lag.py). Reading it in the job would make lag depend on
when a micro-batch ran; as events on the events topic, the samples are replayed with everything else, so the job,
the replays and the report see the same numbers. This driver-side sampler runs next to the topic-metadata watcher:
it learns which topics each group consumes from the outputs (its rebalances' assignments, its offset commits),
reads the end offsets of those partitions with one batched ListOffsets per round (``log_end_offsets``), and appends
one ``log_end`` event per group and partition, keyed by the group id so it travels in the group's own order.

The rate is bounded twice: one round per ``interval_s``, and at most ``max_partitions`` partitions per round (the
rest wait for the next rounds, oldest-sampled first).
"""

from __future__ import annotations

import json
import logging
import threading
import time

from streaming.coordinator.outputs import OFFSET_COMMIT, REBALANCE
from streaming.kafka_client.kafka_conf import for_client
from streaming.kafka_client.log_end import log_end_offsets

log = logging.getLogger(__name__)

Partition = tuple[str, int]


def log_end_events(group_topics: dict[str, set[str]], ends: dict[Partition, int], ts: int) -> list[dict]:
    """One ``log_end`` event per group and partition of its topics whose end is known, in a fixed order."""
    return [
        {
            "type": "log_end",
            "group_id": group,
            "ts": ts,
            "topic": topic,
            "partition": partition,
            "offset": ends[(topic, partition)],
        }
        for group in sorted(group_topics)
        for (topic, partition) in sorted(ends)
        if topic in group_topics[group]
    ]


class LogEndSampler:
    def __init__(
        self,
        bootstrap: str,
        events_topic: str,
        interval_s: float = 5.0,
        client: dict | None = None,
        max_partitions: int = 1000,
    ) -> None:
        self.bootstrap = bootstrap
        self.client = client or {}  # kafka-python settings (see streaming.kafka_client.kafka_conf)
        self.events_topic = events_topic
        self.interval_s = interval_s
        self.max_partitions = max_partitions
        self.group_topics: dict[str, set[str]] = {}
        self._sampled: dict[Partition, float] = {}  # when each partition was last sampled (round robin)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._consumer = None
        self._producer = None

    # -- fed by the sink ----------------------------------------------------------------------------------------
    def observe(self, outputs: list[dict]) -> None:
        with self._lock:
            for o in outputs:
                kind, group = o.get("type"), o.get("group_id")
                if not group:
                    continue
                if kind == REBALANCE:
                    for parts in (o.get("assignment") or {}).values():
                        self.group_topics.setdefault(group, set()).update(tp[0] for tp in parts)
                elif kind == OFFSET_COMMIT and not o.get("tombstone") and o.get("topic"):
                    self.group_topics.setdefault(group, set()).add(o["topic"])

    # -- the loop -----------------------------------------------------------------------------------------------
    def start(self) -> "LogEndSampler":
        self._thread = threading.Thread(target=self._run, name="log-end-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for client in (self._consumer, self._producer):
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing on shutdown must not mask the real outcome
                    pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception as exc:  # a broker hiccup must not stop the tracker; sample again next round
                if not self._stop.is_set():
                    log.warning("log-end sampling failed: %s", exc)

    def sample_once(self) -> list[dict]:
        """Read the end offsets of (up to ``max_partitions`` of) the groups' partitions; publish them. Returns the
        events published."""
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        with self._lock:
            group_topics = {g: set(ts) for g, ts in self.group_topics.items()}
        topics = set().union(*group_topics.values()) if group_topics else set()
        if not topics:
            return []
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **for_client(
                    KafkaConsumer,
                    self.client,
                    bootstrap_servers=self.bootstrap,
                    enable_auto_commit=False,
                    client_id="rebalance-tracker-log-end",
                )
            )
        known = self._consumer.topics()
        partitions = [
            (t, p) for t in sorted(topics & known) for p in sorted(self._consumer.partitions_for_topic(t) or ())
        ]
        partitions.sort(key=lambda tp: self._sampled.get(tp, 0.0))  # the longest unsampled first
        chosen = partitions[: self.max_partitions]
        if not chosen:
            return []
        ends = log_end_offsets(self._consumer, [TopicPartition(t, p) for t, p in chosen])
        now = time.time()
        for tp in chosen:
            self._sampled[tp] = now
        events = log_end_events(group_topics, {(tp.topic, tp.partition): o for tp, o in ends.items()}, int(now * 1000))
        if events:
            if self._producer is None:
                self._producer = KafkaProducer(
                    **for_client(
                        KafkaProducer,
                        self.client,
                        acks="all",
                        bootstrap_servers=self.bootstrap,
                        client_id="rebalance-tracker-log-end",
                    )
                )
            for event in events:
                self._producer.send(
                    self.events_topic, key=event["group_id"].encode("utf-8"), value=json.dumps(event).encode("utf-8")
                )
            self._producer.flush()
        return events
