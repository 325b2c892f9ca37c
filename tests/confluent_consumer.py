"""One real confluent-kafka consumer (librdkafka) speaking the KIP-848 consumer protocol, in its own process.

``python -m tests.confluent_consumer CONFIG_JSON`` subscribes (``group.protocol=consumer``), consumes, commits what it
consumed about twice a second (synchronously), and writes one JSON line per fact to ``truth`` (a file):
``assign`` / ``revoke`` / ``lost`` (its rebalance callbacks: the partitions, and its member id then),
``committed`` (offsets the broker accepted), ``commit_failed``, ``subscribed`` and ``closed``.
The callbacks are incremental (the consumer protocol), so a member's assignment after each callback is the union
of what it was given minus what it gave up.

SIGTERM closes it cleanly (a leave: epoch -1, or -2 for a static member); SIGKILL is a crash; SIGUSR1 changes its
subscription to ``resubscribe`` (a list of topics). Settings: ``bootstrap``, ``group``, ``topics``, ``name``,
``truth``, optional ``group_instance_id``, ``resubscribe``, ``group_protocol`` (``classic``; default ``consumer``),
``feed_topic`` (instrumented: streaming/feeds/instrument_confluent.py publishes its callbacks and statistics there)
and ``librdkafka`` (more client settings, e.g. ``group.remote.assignor`` or a classic member's
``session.timeout.ms``).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


class Truth:
    def __init__(self, path: str, name: str) -> None:
        self.out, self.name = open(path, "a", encoding="utf-8"), name
        self.lock = threading.Lock()

    def write(self, **fact) -> None:
        with self.lock:
            self.out.write(json.dumps({"client": self.name, "ts": int(time.time() * 1000), **fact}) + "\n")
            self.out.flush()


def _pairs(partitions) -> list[list]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


def main(config: dict) -> int:
    truth = Truth(config["truth"], config["name"])
    settings = {
        "bootstrap.servers": config["bootstrap"],
        "group.id": config["group"],
        "group.protocol": "consumer",
        "client.id": config["name"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if config.get("group_instance_id"):
        settings["group.instance.id"] = config["group_instance_id"]
    if config.get("group_protocol"):
        settings["group.protocol"] = config["group_protocol"]
    settings.update(config.get("librdkafka") or {})
    reporter = None
    if config.get("feed_topic"):  # instrumented: its callbacks and statistics as client_report events
        from confluent_kafka import Producer

        from streaming.feeds.instrument_confluent import ClientReporter

        producer = Producer({"bootstrap.servers": config["bootstrap"]})
        reporter = ClientReporter(producer, config["feed_topic"], statistics_interval_ms=200)
        settings = reporter.settings(settings)
    consumer = Consumer(settings)
    if reporter is not None:
        reporter.attach(consumer)

    def callback(fact: str):
        def record(c, partitions) -> None:
            truth.write(fact=fact, member_id=c.memberid(), partitions=_pairs(partitions))

        return record

    def subscribe(topics: list[str]) -> None:
        mine = {"on_assign": callback("assign"), "on_revoke": callback("revoke"), "on_lost": callback("lost")}
        consumer.subscribe(topics, **(reporter.callbacks(**mine) if reporter is not None else mine))
        truth.write(fact="subscribed", topics=sorted(topics))

    subscribe(config["topics"])
    stop, resubscribe = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: resubscribe.set())
    consumed: dict[tuple[str, int], int] = {}
    committed: dict[tuple[str, int], int] = {}
    last_commit = time.monotonic()
    while not stop.is_set():
        if resubscribe.is_set():
            resubscribe.clear()
            subscribe(config["resubscribe"])
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            consumed[(message.topic(), message.partition())] = message.offset() + 1
        if time.monotonic() - last_commit < 0.5:
            continue
        last_commit = time.monotonic()
        owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        due = {tp: o for tp, o in consumed.items() if tp in owned and committed.get(tp) != o}
        if not due:
            continue
        try:
            commit = reporter.commit if reporter is not None else consumer.commit
            answer = commit(offsets=[TopicPartition(t, p, o) for (t, p), o in due.items()], asynchronous=False)
        except KafkaException as exc:  # e.g. the partition moved meanwhile: part of the story
            truth.write(fact="commit_failed", error=str(exc)[:200])
            continue
        accepted = [tp for tp in answer if tp.error is None]
        for tp in accepted:
            committed[(tp.topic, tp.partition)] = tp.offset
        if accepted:
            truth.write(
                fact="committed",
                member_id=consumer.memberid(),
                offsets=sorted([tp.topic, tp.partition, tp.offset] for tp in accepted),
            )
    consumer.close()
    truth.write(fact="closed")
    if reporter is not None:
        producer.flush(10)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
