"""One real kafka-python consumer in its own process, instrumented with its own producer, recording the truth.

``python -m tests.real_consumer CONFIG_JSON`` joins the group, consumes and commits after every poll, and writes one
JSON line per fact to ``truth`` (a file): what the broker gave it (``assigned``: generation, member id, partitions,
whether it was the leader) and each commit the broker accepted (``committed``). SIGTERM closes it cleanly (a
LeaveGroup); SIGKILL is a crash. The tests compare the tracker's story with these lines.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka.consumer.subscription_state import ConsumerRebalanceListener


class Truth:
    def __init__(self, path: str, name: str) -> None:
        self.out, self.name = open(path, "a", encoding="utf-8"), name
        self.lock = threading.Lock()   # written from the poll loop and from the client's network thread

    def write(self, **fact) -> None:
        with self.lock:
            self.out.write(json.dumps({"client": self.name, "ts": int(time.time() * 1000), **fact}) + "\n")
            self.out.flush()


def main(config: dict) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)   # joins, syncs, generations: the story
    client = {"bootstrap_servers": config["bootstrap"], **config.get("client", {})}
    if "api_version" in client:
        client["api_version"] = tuple(client["api_version"])
    truth = Truth(config["truth"], config["name"])
    consumer = KafkaConsumer(group_id=config["group"], client_id=config["name"], enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=config["session_timeout_ms"],
                             heartbeat_interval_ms=config["heartbeat_interval_ms"], max_poll_records=5, **client)
    coordinator = consumer._coordinator
    led: set[int] = set()
    assign = coordinator._perform_assignment

    def perform_assignment(leader_id, protocol, members):   # only the elected leader runs this
        led.add(coordinator._generation.generation_id)
        return assign(leader_id, protocol, members)

    coordinator._perform_assignment = perform_assignment

    def record_assigned(assigned) -> None:
        generation = coordinator._generation
        truth.write(fact="assigned", member_id=generation.member_id, generation=generation.generation_id,
                    leader=generation.generation_id in led,
                    partitions=sorted([tp.topic, tp.partition] for tp in assigned))

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            if not answers_recorded:
                record_assigned(assigned)

    # kafka-python 3 runs JoinGroup+SyncGroup as a background task. When a poll gives up waiting for it, the task
    # still completes -- the broker has formed the generation and answered -- but the next poll discards the answer
    # and joins again, and a close() meanwhile never hears of it; the listener is not called either way. What the
    # broker gave is recorded from the SyncGroup answer itself, then.
    answers_recorded = hasattr(coordinator, "_do_join_and_sync_async")
    if answers_recorded:
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

        join_and_sync = coordinator._do_join_and_sync_async

        async def join_and_sync_recorded():
            answer = await join_and_sync()
            record_assigned(ConsumerProtocolAssignment.decode(answer).partitions())
            return answer

        coordinator._do_join_and_sync_async = join_and_sync_recorded

    if config.get("feed_topic"):
        from streaming.feeds.instrument import instrument

        # The feed may live on another cluster than the group (the tracker's own broker).
        feed_bootstrap = config.get("feed_bootstrap") or config["bootstrap"]
        same_cluster = feed_bootstrap == config["bootstrap"]
        producer = KafkaProducer(bootstrap_servers=feed_bootstrap, acks="all", client_id=f"{config['name']}-feed",
                                 **{k: v for k, v in client.items() if k == "api_version" and same_cluster})
        instrument(consumer, producer, config["feed_topic"], heartbeat_every_ms=config.get("heartbeat_every_ms", 1000))
    consumer.subscribe([config["topic"]], listener=Listener())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        batches = consumer.poll(timeout_ms=200)
        if not batches:
            continue
        offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batches.items()}
        generation = coordinator._generation
        try:
            consumer.commit(offsets)
        except Exception as exc:   # e.g. a rebalance began: the broker refused, which is part of the story
            truth.write(fact="commit_failed", error=type(exc).__name__)
            continue
        truth.write(fact="committed", member_id=generation.member_id, generation=generation.generation_id,
                    offsets=sorted([tp.topic, tp.partition, o.offset] for tp, o in offsets.items()))
    consumer.close()
    truth.write(fact="closed")
    if config.get("feed_topic"):
        producer.flush(10)
        producer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
