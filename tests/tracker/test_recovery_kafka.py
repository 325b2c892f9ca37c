"""A lost checkpoint in observe mode, against what Apache Kafka really did.

Real kafka-python consumers go through issue #11's history on Apache Kafka 4 and on 0.9.0.1 (two start, one is
added, one closes, one is killed, one is added, the rest close), reporting to the instrumentation feed; the broker
writes its own ``__consumer_offsets``, which the cluster feed reads. Each feed goes through the tracker in observe mode
with the checkpoint lost after every one of its events (the pure model, as the job runs it:
``tests/lost_checkpoint.py``), and once through the Spark job (Kafka 4's feed) with the checkpoint lost in the middle of
a rebalance. The groups are rebuilt from the store, as Kafka's next coordinator loads them; after that the broker's word
wins: the generations the tracker reports are the ones the consumers were given and the committed offsets are the
broker's. What it cannot know (a round begun before the restore, why a member that went quiet before it is gone) it
says: ``restore_gap``, reason ``unknown``.
"""

from __future__ import annotations

import io
import json
import shutil
import time
import uuid
from types import SimpleNamespace

import pytest
from kafka import KafkaConsumer, TopicPartition

from offsets_store import decode_record
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed, events_from, read_offsets_topic
from tests.broker_history import GroupHistory, read_feed, run_issue_history, wait_until
from tests.lost_checkpoint import lose_checkpoint
from tests.kafka4_history import KAFKA4_CONSUMER

pytestmark = [pytest.mark.kafka]

OBSERVE = {"tracker.adopt.unknown.members": "true"}


BROKERS = ("4", "0.9")
_recorded: dict[str, SimpleNamespace] = {}


def record(kafka, workdir) -> SimpleNamespace:
    """The history, run on ``kafka`` (Apache Kafka 4): the instrumentation feed, what each consumer was given, the
    broker's committed offsets and its ``__consumer_offsets`` through the cluster feed."""
    suffix = uuid.uuid4().hex[:8]
    topic, feed_topic, group = f"data-{suffix}", f"feed-{suffix}", f"group-{suffix}"
    kafka.create_topics({topic: 6, feed_topic: 3})
    # Polls that outlast a round's join: with 200 ms ones kafka-python 3.0.12 sometimes loses the answer and the
    # consumer stops in ensure_coordinator_ready (tests/kafka4_history.py); seen here under the suite's load.
    run = GroupHistory(
        kafka.bootstrap,
        topic,
        group,
        workdir,
        feed_topic=feed_topic,
        consumer={"poll_timeout_ms": KAFKA4_CONSUMER["poll_timeout_ms"]},
    )
    truth = run_issue_history(run)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = {(topic, p): consumer.committed(TopicPartition(topic, p)) for p in range(6)}
    finally:
        consumer.close()
    events = read_feed(kafka.bootstrap, feed_topic, {})
    last = max(truth.generations())

    def emptied():  # the group's last record: Empty, after its last generation
        pairs = list(read_offsets_topic(kafka.bootstrap))
        records = [decode_record(k, v) for k, v in pairs]
        mine = [r for r in records if r.get("group_id") == group and r["type"] == "group_metadata"]
        done = any(not r["tombstone"] and not r["members"] and r["generation"] > last for r in mine)
        return pairs if done else None

    pairs = wait_until(emptied, 120, "the group's last record")
    (workdir / "feed.json").write_text(json.dumps(events))  # beside truth.jsonl, for a look after a failure
    return SimpleNamespace(
        group=group,
        topic=topic,
        truth=truth,
        events=events,
        committed=committed,
        cluster_events=[e for e in events_from(pairs, ClusterFeed()) if e["group_id"] == group],
    )


def recorded(request, broker: str) -> SimpleNamespace:
    if broker == "0.9":  # the session's first 0.9 run, which the feeds' tests read too
        run = request.getfixturevalue("kafka09_histories")(0)
        return SimpleNamespace(
            group=run.group,
            topic=run.topic,
            truth=run.truth,
            events=run.events,
            committed=run.committed,
            cluster_events=[e for e in events_from(run.pairs, ClusterFeed()) if e["group_id"] == run.group],
        )
    if broker not in _recorded:
        _recorded[broker] = record(
            request.getfixturevalue("apache_kafka4"),
            request.getfixturevalue("tmp_path_factory").mktemp(f"history-{broker}"),
        )
    return _recorded[broker]


@pytest.fixture(scope="module", params=BROKERS)
def history(request):
    """The history on Apache Kafka 4 and on 0.9.0.1 (joins answered at once, no Empty record), each run once (on
    0.9: ``kafka09_histories``' first run)."""
    return recorded(request, request.param)


@pytest.fixture(scope="module")
def history4(request):
    return recorded(request, "4")


def told(outputs: list[dict]) -> dict[int, tuple]:
    """The generations the tracker reports: leader, and who got what."""
    return {
        o["generation"]: (o["leader"], {m: sorted(map(list, p)) for m, p in o["assignment"].items()})
        for o in outputs
        if o["type"] == "rebalance" and o["members"]
    }


def given(truth) -> dict[int, tuple]:
    return {g.generation: (g.leader, g.members) for g in truth.generations().values()}


def committed_in(restart, group: str) -> dict[tuple, int]:
    model = restart.models.models[group].model
    return {tp: o["offset"] for tp, o in model.fetch_offsets(group).items()}


def mid_round_cuts(events: list[dict]) -> dict[int, range]:
    """For each round after the group's first record: the cuts that lose it half-way -- after the round's first
    report (a rejoin or a newcomer's join, sent before the broker's answer, or a leave) and before the leader's
    SyncGroup that ends it.

    A join the broker answered with the generation it had already completed (its next SyncGroup is of that
    generation) opened no round: Kafka's classic coordinator answers a follower rejoining a Stable group with its
    protocols unchanged (kafka-python rejoins so, e.g. when its metadata changed during its first join) with the
    current generation, and writes no record -- only the leader's rejoin or new protocols rebalance. A checkpoint
    lost after such a join lost nothing the store lacks, so it opens no mid-round cuts; another report before the
    round's end still does."""
    out, openers, last, recorded = {}, {}, None, False  # openers: member id -> its report that may open a round
    for i, e in enumerate(events):
        if e["type"] == "leave" or e["type"] == "join" and e.get("generation") is None:
            openers.setdefault(e["member_id"], i)
        if e["type"] != "sync":
            continue
        if e.get("assignments") is not None:
            if openers and recorded:
                out[e["generation"]] = range(min(openers.values()) + 1, i + 1)
            openers, last, recorded = {}, e["generation"], True
        elif (
            e["generation"] == last and e["member_id"] in openers and events[openers[e["member_id"]]]["type"] == "join"
        ):
            del openers[e["member_id"]]  # its join was answered from the completed generation
    return out


def test_observe_mode_converges_wherever_the_checkpoint_is_lost(history):
    want = given(history.truth)
    assert len(want) >= 5
    end = history.events[-1]["ts"] + 60_000
    departures = {m: ("member_left", "leave") for c in ("c1", "c2", "c3") for m in history.truth.member_ids(c)}
    departures |= {m: ("member_expired", "session timeout") for m in history.truth.member_ids("c0")}
    mid_round = {cut for r in mid_round_cuts(history.events).values() for cut in r}
    assert mid_round
    reported = set()
    for cut in range(1, len(history.events)):
        restart = lose_checkpoint(history.events, cut, OBSERVE, end_ms=end)
        assert told(restart.first) | told(restart.second) == want, cut
        assert committed_in(restart, history.group) == history.committed, cut
        gaps = [o for o in restart.second if o["type"] == "restore_gap"]
        assert len(gaps) <= 1
        if gaps:
            reported.add(cut)
        for o in restart.second:  # each member went as it did, or the tracker says it cannot know why
            if o["type"] in ("member_left", "member_expired"):
                assert (o["type"], o["reason"]) == departures[o["member_id"]] or (o["reason"] == "unknown" and gaps), (
                    cut,
                    o,
                    gaps,
                )
        assert {o["group_id"] for o in restart.second if o["type"] == "group_restored"} <= {history.group}
    # A checkpoint lost half-way through a round is always reported; many lost between rounds are not (while a
    # killed consumer's session runs out, one is: the store cannot know it went quiet).
    assert mid_round <= reported, sorted(mid_round - reported)
    assert len(history.events) - 1 - len(reported) > 20


def test_the_cluster_feed_converges_wherever_the_checkpoint_is_lost(history):
    """The broker's own records, each snapshot its answer for a generation (no heartbeats: members never expire on
    the tracker's clock)."""
    events = history.cluster_events
    want = told(lose_checkpoint(events, len(events), OBSERVER_SETTINGS).first)
    # Every generation the consumers were given (the broker may record one more that nobody was given: see
    # test_cluster_feed_kafka.py).
    assert given(history.truth).items() <= want.items()
    for cut in range(1, len(events)):
        restart = lose_checkpoint(events, cut, OBSERVER_SETTINGS)
        assert told(restart.first) | told(restart.second) == want, cut
        assert committed_in(restart, history.group) == history.committed, cut


@pytest.mark.spark
def test_the_job_that_loses_its_checkpoint_mid_rebalance_ends_as_the_broker(history4, spark, kafka_bootstrap, tmp_path):
    """Through the Spark job: the first part of the feed, the checkpoint deleted half-way through the round that
    added the third consumer, the rest. The restarted job rebuilds the group from the store, says so, reports the
    round it cannot know the start of, and ends with the consumers' generations and the broker's offsets."""
    from kafka import KafkaProducer

    from offsets_store import open_store
    from streaming.kafka_client.topics import ensure_topics
    from streaming.tracker import TrackerConfig, start_tracker
    from streaming.feeds.publish import encode_event
    from streaming.views.live_view import LiveView
    from tests.tracker.test_tracker_kafka import read_all

    history = history4
    events = history.events
    added = min(g.generation for g in history.truth.generations().values() if "c2" in g.clients.values())
    cuts = mid_round_cuts(events)[added]  # the round that added c2
    cut = cuts[len(cuts) // 2]
    recorded_sync = [e for e in events[:cut] if e["type"] == "sync" and e.get("assignments") is not None][-1]
    events_topic, outputs_topic = f"rt-{uuid.uuid4().hex[:8]}", f"rt-out-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_bootstrap, {events_topic: 2})
    config = TrackerConfig(
        bootstrap=kafka_bootstrap,
        events_topic=events_topic,
        outputs_topic=outputs_topic,
        store=f"sqlite:{tmp_path / 'offsets.db'}",
        checkpoint=str(tmp_path / "checkpoint"),
        trigger="200 milliseconds",
        time_mode="event",
        watermark_delay="5 seconds",
        coordinator=dict(OBSERVE),
        metrics_port=None,
    )

    def produce(part: list[dict]) -> None:
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=20)
        for event in part:
            key, value = encode_event(event)
            producer.send(events_topic, key=key, value=value)
        producer.flush()
        producer.close()

    def run_all() -> None:
        tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
        try:
            tracker.query.processAllAvailable()
        finally:
            tracker.stop()

    produce(events[:cut])
    run_all()
    first = [json.loads(r.value) for r in read_all(kafka_bootstrap, outputs_topic)]
    shutil.rmtree(config.checkpoint)  # the checkpoint is lost; the store and the topics stay
    produce(events[cut:])
    started = time.monotonic()
    run_all()
    second = [json.loads(r.value) for r in read_all(kafka_bootstrap, outputs_topic)][len(first) :]
    print(f"\ncut after event {cut} of {len(events)}; the restarted job took {time.monotonic() - started:.1f} s")

    (restored,) = [o for o in second if o["type"] == "group_restored"]
    assert (restored["group_id"], restored["generation"], sorted(restored["members"])) == (
        history.group,
        recorded_sync["generation"],
        sorted(recorded_sync["assignments"]),
    )
    (gap,) = [o for o in second if o["type"] == "restore_gap"]
    assert gap["restored_generation"] == recorded_sync["generation"] and gap["follows"]
    assert told(first) | told(second) == given(history.truth)
    store = open_store(config.store)
    try:
        records = store.load_records()
    finally:
        store.close()
    stored = {
        (r["topic"], r["partition"]): r["offset"]
        for r in records
        if r["type"] == "offset_commit" and not r.get("tombstone") and r["group_id"] == history.group
    }
    assert stored == history.committed
