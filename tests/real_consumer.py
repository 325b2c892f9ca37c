"""One real kafka-python consumer in its own process, instrumented with its own producer, recording the truth.

``python -m tests.real_consumer CONFIG_JSON`` joins the group, consumes and commits after every poll, and writes one
JSON line per fact to ``truth`` (a file): what the broker gave it (``assigned``: generation, member id, partitions,
whether it was the leader), each JoinGroup answer (``join_answered``: error code, member id, generation), each
commit it sends (``committing``, before it is sent: a consumer killed before the answer leaves only this), each the
broker accepted (``committed``) and each it refused (``commit_failed``).
SIGTERM closes it cleanly (a LeaveGroup, unless it is a static member: those never send one); SIGKILL is a crash;
SIGSTOP/SIGCONT freeze it (a long GC pause). SIGUSR1 makes it commit once more what it last committed, but under
the generation before its own -- a zombie's commit, which the broker refuses -- and carry on. SIGUSR2 writes every
thread's stack to its log (a client that stopped moving). The tests compare the tracker's story with these lines.

Optional settings: ``group_instance_id`` (a static member), ``assignors`` (kafka-python's names, e.g.
``["cooperative-sticky"]``), ``max_poll_interval_ms`` (its rebalance timeout), ``metadata_max_age_ms`` (how soon the
leader notices new partitions), ``poll_timeout_ms`` (how long one poll waits: longer than a rebalance's JoinGroup,
see tests/kafka4_history.py), ``debug`` (kafka-python's DEBUG lines in the log).
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.base import Generation

ASSIGNORS = {
    a.name: a
    for a in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor, CooperativeStickyAssignor)
}
OPTIONAL = ("group_instance_id", "max_poll_interval_ms", "metadata_max_age_ms")


class Truth:
    def __init__(self, path: str, name: str) -> None:
        self.out, self.name = open(path, "a", encoding="utf-8"), name
        self.lock = threading.Lock()  # written from the poll loop and from the client's network thread

    def write(self, **fact) -> None:
        with self.lock:
            self.out.write(json.dumps({"client": self.name, "ts": int(time.time() * 1000), **fact}) + "\n")
            self.out.flush()


def main(config: dict) -> int:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)  # joins, syncs, generations: the story
    if config.get("debug"):  # kafka-python's every request and answer
        logging.getLogger("kafka").setLevel(logging.DEBUG)
    faulthandler.register(signal.SIGUSR2, all_threads=True)  # every thread's stack, into the log (a stuck client)
    client = {"bootstrap_servers": config["bootstrap"], **config.get("client", {})}
    if "api_version" in client:
        client["api_version"] = tuple(client["api_version"])
    client.update({k: config[k] for k in OPTIONAL if config.get(k) is not None})
    if config.get("assignors"):
        client["partition_assignment_strategy"] = [ASSIGNORS[name] for name in config["assignors"]]
    truth = Truth(config["truth"], config["name"])
    consumer = KafkaConsumer(
        group_id=config["group"],
        client_id=config["name"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=config["session_timeout_ms"],
        heartbeat_interval_ms=config["heartbeat_interval_ms"],
        max_poll_records=5,
        **client,
    )
    coordinator = consumer._coordinator
    led: set[int] = set()
    assign = coordinator._perform_assignment

    def perform_assignment(leader_id, protocol, members):  # only the elected leader runs this
        led.add(coordinator._generation.generation_id)
        return assign(leader_id, protocol, members)

    coordinator._perform_assignment = perform_assignment
    answer_join = coordinator._process_join_group_response
    joined: dict = {}  # the last JoinGroup answer that let it in: the generation its SyncGroup belongs to

    def join_answered(response, send_time):  # each JoinGroup answer: MEMBER_ID_REQUIRED (79) shows here
        truth.write(
            fact="join_answered",
            error=response.error_code,
            member_id=response.member_id,
            generation=response.generation_id,
        )
        if response.error_code == 0:
            joined.update(
                member_id=response.member_id,
                generation=response.generation_id,
                leader=response.leader == response.member_id,
            )
        return answer_join(response, send_time)

    coordinator._process_join_group_response = join_answered

    def record_assigned(assigned, answered: bool = False) -> None:
        """What the broker gave: from the SyncGroup answer (``answered``), in the generation of the JoinGroup answer
        it followed -- not the consumer's current one, which its heartbeat thread may have reset meanwhile."""
        if answered:
            member_id, generation, leader = joined["member_id"], joined["generation"], joined["leader"]
        else:
            member_id, generation = coordinator._generation.member_id, coordinator._generation.generation_id
            leader = generation in led
        truth.write(
            fact="assigned",
            member_id=member_id,
            generation=generation,
            leader=leader,
            partitions=sorted([tp.topic, tp.partition] for tp in assigned),
        )

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
            record_assigned(ConsumerProtocolAssignment.decode(answer).partitions(), answered=True)
            return answer

        coordinator._do_join_and_sync_async = join_and_sync_recorded

    if config.get("feed_topic"):
        from streaming.feeds.instrument import instrument

        # The feed may live on another cluster than the group (the tracker's own broker).
        feed_bootstrap = config.get("feed_bootstrap") or config["bootstrap"]
        same_cluster = feed_bootstrap == config["bootstrap"]
        producer = KafkaProducer(
            bootstrap_servers=feed_bootstrap,
            acks="all",
            client_id=f"{config['name']}-feed",
            **{k: v for k, v in client.items() if k == "api_version" and same_cluster},
        )
        instrument(consumer, producer, config["feed_topic"], heartbeat_every_ms=config.get("heartbeat_every_ms", 1000))
    consumer.subscribe([config["topic"]], listener=Listener())
    stop, zombie = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: zombie.set())
    last: dict = {}
    while not stop.is_set():
        if zombie.is_set() and last:
            zombie.clear()
            commit_as_zombie(consumer, coordinator, last, truth)
        batches = consumer.poll(timeout_ms=config.get("poll_timeout_ms", 200))
        if not batches:
            continue
        offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batches.items()}
        last = offsets
        generation = coordinator._generation
        truth.write(fact="committing", offsets=_listed(offsets))
        try:
            consumer.commit(offsets)
        except Exception as exc:  # e.g. a rebalance began: the broker refused, which is part of the story
            truth.write(fact="commit_failed", error=type(exc).__name__)
            continue
        truth.write(
            fact="committed",
            member_id=generation.member_id,
            generation=generation.generation_id,
            offsets=_listed(offsets),
        )
    consumer.close()
    truth.write(fact="closed")
    if config.get("feed_topic"):
        producer.flush(10)
        producer.close()
    return 0


def _listed(offsets: dict) -> list[list]:
    return sorted([tp.topic, tp.partition, o.offset] for tp, o in offsets.items())


def commit_as_zombie(consumer, coordinator, offsets: dict, truth: Truth) -> None:
    """Commit ``offsets`` under the generation before the current one, as a consumer that slept through a rebalance
    would; the broker refuses it (ILLEGAL_GENERATION) and kafka-python rejoins with its member id."""
    with coordinator._lock:
        current = coordinator._generation
        stale = coordinator._generation = Generation(current.generation_id - 1, current.member_id, current.protocol)
    try:
        consumer.commit(offsets)
    except Exception as exc:
        truth.write(
            fact="commit_failed",
            member_id=current.member_id,
            generation=current.generation_id - 1,
            error=type(exc).__name__,
            detail=str(exc)[:200],
            zombie=True,
        )
    else:  # the broker took it: the test says so
        truth.write(
            fact="committed",
            member_id=current.member_id,
            generation=current.generation_id - 1,
            offsets=_listed(offsets),
            zombie=True,
        )
    finally:
        with coordinator._lock:
            if coordinator._generation is stale:  # not reset by a refusal: back to its own generation
                coordinator._generation = current


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
