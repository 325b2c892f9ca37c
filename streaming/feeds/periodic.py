"""A driver-side thread that looks something up on the cluster every so often and appends what it finds to the
events topic: the scaffolding the topic-metadata watcher and the log-end sampler share (their thread, the lazy
kafka-python clients, publishing, closing).

A subclass says what one round does (``round``); ``wake()`` runs a round now instead of at the next interval. A round
that fails is logged and tried again at the next one: a broker hiccup must not stop the tracker.
"""

from __future__ import annotations

import json
import logging
import threading

from streaming.kafka_client.kafka_conf import for_client

log = logging.getLogger(__name__)


class PeriodicPublisher:
    name = "periodic-publisher"  # the thread's name
    client_id = "rebalance-tracker"  # its clients' client.id, as the broker's logs and quotas see them
    what = "a periodic round"  # for the log line of a failed round

    def __init__(self, bootstrap: str, events_topic: str, interval_s: float, client: dict | None = None) -> None:
        self.bootstrap = bootstrap
        self.client = client or {}  # kafka-python settings (see streaming.kafka_client.kafka_conf)
        self.events_topic = events_topic
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # guards what the sink feeds in (observe) against the round reading it
        self._thread: threading.Thread | None = None
        self._consumer = None
        self._producer = None

    def round(self):
        raise NotImplementedError

    def wake(self) -> None:
        self._wake.set()

    def start(self):
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
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
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.round()
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning("%s failed: %s", self.what, exc)

    def consumer(self):
        """kafka-python's KafkaConsumer (no group), made on first use."""
        if self._consumer is None:
            from kafka import KafkaConsumer

            self._consumer = KafkaConsumer(
                **for_client(
                    KafkaConsumer,
                    self.client,
                    bootstrap_servers=self.bootstrap,
                    enable_auto_commit=False,
                    client_id=self.client_id,
                )
            )
        return self._consumer

    def publish(self, events: list[dict], key_of) -> None:
        """Append ``events`` to the events topic, each keyed by ``key_of(event)`` (bytes), and wait for the acks."""
        if not events:
            return
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                **for_client(
                    KafkaProducer,
                    self.client,
                    acks="all",
                    bootstrap_servers=self.bootstrap,
                    client_id=self.client_id,
                )
            )
        for event in events:
            self._producer.send(self.events_topic, key=key_of(event), value=json.dumps(event).encode("utf-8"))
        self._producer.flush()
