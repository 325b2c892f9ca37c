"""Issue #29's classic-group histories on Apache Kafka 3.x/4.x: what 0.9 cannot show, run on the broker and kept for
both feeds' tests (``tests/brokers/test_real_broker.py``: the instrumentation;
``tests/feeds/test_cluster_feed_kafka.py``: the broker's own ``__consumer_offsets``).

One run drives two groups, each consumer its own process with its own instrumentation producer
(``tests/real_consumer.py``):

- an eager group (kafka-python's range assignor) through issue #11's history and on (``run_kafka4_history``): every
  dynamic member's first JoinGroup is answered MEMBER_ID_REQUIRED; a static member restarts within its session (its
  old place, no rebalance) and after it; the topic grows; a follower commits under a stale generation; a frozen
  member misses the rebalance timeout;
- a cooperative-sticky group (``run_cooperative_history``): adding a member takes two rounds.

The run ends once the broker has written both groups' Empty records (the static member's session has to run out
first), then reads the feed and ``__consumer_offsets``.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.broker_history import GroupHistory, Producing, Truth, issue_steps, read_feed, wait_until

# Every member's rebalance timeout (max.poll.interval.ms) is short, so a frozen member misses a round quickly; the
# frozen one's session is long enough that only the round's timeout can remove it. The leader looks at the topic's
# metadata every second, so it soon sees new partitions. A poll waits up to 3 s: kafka-python 3.0.12 sometimes loses
# a JoinGroup answer that arrives after a poll gave up waiting for it -- the consumer then spins without heartbeats
# or fetches until the broker drops it -- so each poll outlasts a round's join (about a heartbeat interval).
KAFKA4_CONSUMER = {"max_poll_interval_ms": 4_000, "metadata_max_age_ms": 1_000, "poll_timeout_ms": 3_000}
KAFKA4_SESSION_MS = 6_000
FROZEN_SESSION_MS = 30_000
PARTITIONS, GROWN_TO = 6, 8


def run_kafka4_history(history: GroupHistory, grow_topic) -> Truth:
    """Issue #11's history, then:

    - s0, a static member (group.instance.id s0), is added; restarted within its session it takes its old place in
      the same generation (no rebalance); stopped past its session it is expired, and comes back;
    - the topic grows to ``GROWN_TO`` partitions (``grow_topic``): the leader notices and rejoins;
    - a follower commits under the generation before its own (refused: ILLEGAL_GENERATION) and rejoins with its
      member id: answered in the current generation, no rebalance;
    - z0 joins, then freezes (SIGSTOP) while c4 joins: the round ends at the rebalance timeout without it (its
      session is longer); thawed, it finds itself out and joins again as a new member;
    - everyone closes, one by one, the static member last (without a LeaveGroup: its session runs out).
    """
    producing = Producing(history.bootstrap, history.topic, history.client)
    producing.start()
    static = {"group_instance_id": "s0"}
    try:
        issue_steps(history)
        history.start("s0", **static)
        history.settled("s0 added (static)")
        history.close("s0")  # a static member sends no LeaveGroup
        history.start("s0", **static)
        history.wait_for(
            "s0 restarted within its session: its old place under a new member id",
            lambda t: len(t.incarnations("s0")) == 2,
        )
        history.settled("s0 restarted")
        history.close("s0")
        history.settled("s0 stopped past its session")
        history.start("s0", **static)
        history.settled("s0 back after its session")
        grow_topic()
        history.partitions = GROWN_TO
        history.settled(f"the topic grew to {GROWN_TO} partitions")
        now = history.truth().generations(current=True)[history.steps[-1][1]]
        zombie = next(c for m, c in sorted(now.clients.items(), key=lambda mc: mc[1]) if m != now.leader and c != "s0")
        since = int(time.time() * 1000)
        history.zombie_commit(zombie)
        history.wait_for(
            f"{zombie} committed under the previous generation, was refused and synced again",
            lambda t: (
                any(f["fact"] == "commit_failed" and f.get("zombie") for f in t.facts)
                and any(f["fact"] == "assigned" and f["client"] == zombie and f["ts"] > since for f in t.facts)
            ),
        )
        history.start("z0", session_timeout_ms=FROZEN_SESSION_MS)
        history.settled("z0 added")
        history.freeze("z0")
        history.start("c4")
        history.settled("c4 added while z0 is frozen: z0 misses the rebalance timeout", absent=("z0",))
        history.thaw("z0")
        history.settled("z0 thawed: it joins again")
        time.sleep(1.5)  # a few commits in this generation
        close_one_by_one(history, ["c2", "c3", "c4", "z0"])
        history.close("s0")  # the last, without a LeaveGroup: its session runs out and the group goes Empty
    finally:
        history.stop_all()
        producing.halt.set()
        producing.join(15)
    return history.truth()


def run_cooperative_history(history: GroupHistory) -> Truth:
    """k0 and k1 start, k2 is added (round one takes partitions from their owners, round two gives them to k2), k1
    closes, then k0, then k2."""
    producing = Producing(history.bootstrap, history.topic, history.client)
    producing.start()
    try:
        history.start("k0")
        history.start("k1")
        history.settled("k0 and k1 started")
        history.start("k2")
        history.settled("k2 added")
        history.close("k1")
        history.settled("k1 closed")
        time.sleep(1.5)
        close_one_by_one(history, ["k0"])
        history.close("k2")
    finally:
        history.stop_all()
        producing.halt.set()
        producing.join(15)
    return history.truth()


def close_one_by_one(history: GroupHistory, names: list[str]) -> None:
    """Each closes (a LeaveGroup) and the rest settle before the next: every generation is one its members were
    given (a consumer closing while a round runs may never hear of the generation the broker formed with it)."""
    for name in names:
        history.close(name)
        history.settled(f"{name} closed")


@dataclass
class Kafka4Run:
    """What one run left: per group (``eager``, ``cooperative``: their group ids) what the consumers were given and
    the steps taken; the instrumentation feed; ``__consumer_offsets``; what the broker holds as committed."""

    version: str
    eager: str
    cooperative: str
    topics: dict[str, str]  # group -> its data topic
    truths: dict[str, Truth]
    steps: dict[str, list[tuple[str, int]]]
    events: list[dict]  # the feed topic, partition by partition in offset order
    pairs: list[tuple]  # (key, value, log timestamp) of __consumer_offsets
    committed: dict[str, dict[tuple[str, int], int]]
    workdir: Path

    def story(self, group: str) -> dict:
        """What the broker did, in the shape of ``broker_history.story``: generations as formed; c1-c4, z0's second
        incarnation and the cooperative group's members left; c0 (killed), s0's second (stopped) and third (closed
        at the end) incarnations ran out of session; z0's first missed the rebalance timeout; s0's first was
        replaced by its second."""
        truth = self.truths[group]
        generations = {g.generation: (g.leader, g.members) for g in truth.generations().values()}
        if group == self.cooperative:
            left = [m for c in ("k0", "k1", "k2") for m in truth.incarnations(c)]
            return {
                "generations": generations,
                "left": sorted(left),
                "expired": [],
                "replaced": [],
                "refused_commits": [],
            }
        ids = {c: truth.incarnations(c) for c in ("c0", "c1", "c2", "c3", "c4", "s0", "z0")}
        assert [len(ids[c]) for c in ids] == [1, 1, 1, 1, 1, 3, 2], ids
        left = [ids[c][0] for c in ("c1", "c2", "c3", "c4")] + [ids["z0"][1]]
        expired = [
            (ids["c0"][0], "session timeout"),
            (ids["s0"][1], "session timeout"),
            (ids["s0"][2], "session timeout"),
            (ids["z0"][0], "rebalance timeout"),
        ]
        return {
            "generations": generations,
            "left": sorted(left),
            "expired": sorted(expired),
            "replaced": [(ids["s0"][0], ids["s0"][1])],
            "refused_commits": [],
        }


def run_kafka4(kafka, workdir: Path) -> Kafka4Run:
    """Both histories on ``kafka`` (an ``apache_kafka_kraft.KraftKafka``), each group on its own topic; the feed
    topic on the same broker."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions

    from streaming.feeds.cluster_feed import read_offsets_topic

    suffix = uuid.uuid4().hex[:8]
    eager, cooperative, feed_topic = f"group-{suffix}", f"coop-{suffix}", f"feed-{suffix}"
    topics = {eager: f"data-{suffix}", cooperative: f"coop-data-{suffix}"}
    kafka.create_topics({topics[eager]: PARTITIONS, topics[cooperative]: PARTITIONS, feed_topic: 3})

    def grow_topic() -> None:
        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap, client_id="rebalance-tracker-admin")
        try:
            admin.create_partitions({topics[eager]: NewPartitions(total_count=GROWN_TO)})
        finally:
            admin.close()

    histories = {}
    for group, consumer in (
        (eager, KAFKA4_CONSUMER),
        (cooperative, {**KAFKA4_CONSUMER, "assignors": ["cooperative-sticky"]}),
    ):
        (workdir / group).mkdir()
        histories[group] = GroupHistory(
            kafka.bootstrap,
            topics[group],
            group,
            workdir / group,
            feed_topic=feed_topic,
            session_timeout_ms=KAFKA4_SESSION_MS,
            consumer=dict(consumer),
            partitions=PARTITIONS,
        )
    truths = {
        eager: run_kafka4_history(histories[eager], grow_topic),
        cooperative: run_cooperative_history(histories[cooperative]),
    }

    def both_empty():  # each group's last record: no members (the static member's session has run out)
        last = {}
        pairs = list(read_offsets_topic(kafka.bootstrap, timestamps=True))
        from offsets_store import decode_record

        for key, value, _ in pairs:
            r = decode_record(key, value)
            if r["type"] == "group_metadata" and r.get("group_id") in truths and not r["tombstone"]:
                last[r["group_id"]] = r
        return (
            pairs if all(g in last and not last[g]["members"] and last[g]["generation"] > 0 for g in truths) else None
        )

    pairs = wait_until(both_empty, 60, "both groups' Empty records", every_s=1)
    events = read_feed(kafka.bootstrap, feed_topic, {})
    # Beside the truth files, for a look after a failure: the feed, and __consumer_offsets (key, value: base64).
    (workdir / "feed.json").write_text(json.dumps(events))
    (workdir / "consumer_offsets.json").write_text(
        json.dumps(
            [
                [base64.b64encode(k).decode(), None if v is None else base64.b64encode(v).decode(), ts]
                for k, v, ts in pairs
            ]
        )
    )
    return Kafka4Run(
        kafka.version,
        eager,
        cooperative,
        topics,
        truths,
        {g: h.steps for g, h in histories.items()},
        events,
        pairs,
        {g: committed_on(kafka.bootstrap, g, topics[g], GROWN_TO if g == eager else PARTITIONS) for g in truths},
        workdir,
    )


def committed_on(bootstrap: str, group: str, topic: str, partitions: int, client: dict | None = None) -> dict:
    """What the broker answers an OffsetFetch for ``group``: partition -> offset, those committed only."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, **(client or {}))
    try:
        got = {(topic, p): consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
        return {tp: o for tp, o in got.items() if o is not None}
    finally:
        consumer.close()
