"""The cluster feed against a real broker: Apache Kafka 0.9.0.1 runs a consumer group through issue #11's history
(two start, one is added, one closes, one is killed, one is added, the rest close) and writes its own
``__consumer_offsets`` (GroupMetadataValue v0, OffsetCommitValue v1). Reading that topic with the client settings a
0.9 broker needs and feeding the events to the tracker must give what the consumers were given. Apache Kafka 4.x does
the same with issue #29's longer histories (``tests/kafka4_history.py``; GroupMetadataValue v3, OffsetCommitValue
v3+), the very runs the instrumentation's tests read.

The history runs twice on the same group, as a redeploy would: 0.9 drops a group its last member left (a tombstone,
no Empty record; the offsets stay), so the second run numbers its generations from 1 again, and the log holds both.
These are the runs the instrumentation's tests read (``kafka09_histories``, ``tests/kafka09_history.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from types import SimpleNamespace

import pytest

from offsets_store import decode_record, encode_record
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.cli import main as cli
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed, events_from
from tests.broker_history import read_feed, wait_until
from tests.broker_history import story as told

pytestmark = pytest.mark.kafka

CLIENT = {"api_version": (0, 9)}


@pytest.fixture(scope="module", params=["first run", "run again"])
def story(request, kafka09_histories):
    """The history (and the run before it, for the second); then the broker's __consumer_offsets as it was once
    the run's tombstone was in it, played through the tracker."""
    started = time.monotonic()
    n = ["first run", "run again"].index(request.param)
    runs = [kafka09_histories(i) for i in range(n + 1)]
    ran = time.monotonic()
    pairs, group = runs[-1].pairs, runs[-1].group
    feed = ClusterFeed()
    events = list(events_from(pairs, feed))
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += tracker.handle(event)
    print(
        f"\n{request.param}: history {ran - started:.1f} s, reading and tracking {time.monotonic() - ran:.1f} s; "
        f"generations given {sorted(runs[-1].truth.generations())}, recorded by the broker (all runs) "
        f"{[g[0] for g in broker_generations(pairs, group)]}"
    )
    return {
        "group": group,
        "committed": runs[-1].committed,
        "pairs": pairs,
        "events": [e for e in events if e["group_id"] == group],
        "outputs": outputs,
        "tracker": tracker,
        "feed": feed,
        "runs": [r.truth for r in runs],
    }


def broker_generations(pairs, group: str) -> list[tuple]:
    """Each GroupMetadata record of ``group``, in log order: (generation, leader, member -> partitions, commits that
    followed it before the next record)."""
    out = []
    for key, value in pairs:
        r = decode_record(key, value)
        if r.get("group_id") != group:
            continue
        if r["type"] == "group_metadata" and not r["tombstone"]:
            out.append(
                [r["generation"], r["leader"], {m["member_id"]: m["assignment"]["partitions"] for m in r["members"]}, 0]
            )
        elif r["type"] == "offset_commit" and out:
            out[-1][3] += 1
    return [tuple(g) for g in out]


def test_generations_are_what_the_consumers_were_given(story):
    recorded = broker_generations(story["pairs"], story["group"])
    # The tracker follows every generation the broker recorded: members, leader, each member's partitions. (Its own
    # rounds that end Empty, after a tombstone, have no members and are left out: the broker wrote no record.)
    seen = [
        (r["generation"], r["leader"], r["assignment"])
        for r in story["outputs"]
        if r["type"] == "rebalance" and r["group_id"] == story["group"] and r["members"]
    ]
    assert seen == [g[:3] for g in recorded]
    # ... which are the generations the consumers were given. A generation reaches Stable only once its record is
    # written, so the broker never records fewer than the consumers saw. It may record more: 0.9 writes the record
    # when the leader's SyncGroup arrives, and a JoinGroup that lands while the write is in flight (the second
    # consumer starting) sends the group back to rebalancing, so nobody is given that generation (and, holding no
    # partitions in it, nobody commits in it). The tracker, reading the log, cannot tell and shows it.
    given = [(g.generation, g.leader, g.members) for truth in story["runs"] for g in truth.generations().values()]
    assert [g for g in given if g not in seen] == []
    assert [g[:3] for g in recorded if g[:3] in given] == given  # same order
    assert all(commits == 0 for *g, commits in recorded if tuple(g) not in given)
    # Each run numbers from the start (1, or 2 when round 1 was cut short as above).
    assert all(min(truth.generations()) <= 2 for truth in story["runs"])


def test_leaves_and_expiries_are_what_the_consumers_did(story):
    """c1 and c2 closed cleanly (c2 while c3 stayed, c3 last, dropping the group), c0 was killed: the log records no
    LeaveGroup, yet the members' commits show which were alive when they went."""
    left = [o["member_id"] for o in story["outputs"] if o["type"] == "member_left" and o["group_id"] == story["group"]]
    expired = [
        (o["member_id"], o["reason"])
        for o in story["outputs"]
        if o["type"] == "member_expired" and o["group_id"] == story["group"]
    ]
    want_left, want_expired = [], []
    for truth in story["runs"]:
        ids = {c: truth.member_ids(c) for c in ("c0", "c1", "c2", "c3")}
        assert all(len(v) == 1 for v in ids.values()), ids
        want_left += [next(iter(ids[c])) for c in ("c1", "c2", "c3")]
        want_expired.append((next(iter(ids["c0"])), "session timeout"))
    assert sorted(left) == sorted(want_left) and sorted(expired) == sorted(want_expired)


def test_final_offsets_are_what_the_consumers_committed(story):
    truth: dict = {}
    for run in story["runs"]:  # a later run's commits win; partitions it never committed keep the earlier ones
        truth.update(run.committed())
    tracked = {tp: o["offset"] for tp, o in story["tracker"].fetch_offsets(story["group"]).items()}
    assert tracked == truth == story["committed"]  # what the broker answered an OffsetFetch once the run ended
    # The group is gone on the broker (tombstone) but its offsets stay; the tracker holds them in an Empty group.
    assert story["tracker"].describe_group(story["group"])["state"] == "Empty"


def test_old_records_take_their_time_from_commits_never_the_readers_clock(story):
    commits = [e["ts"] for e in story["events"] if e["type"] == "commit"]
    snapshot_events = [e for e in story["events"] if e["type"] != "commit"]
    assert snapshot_events and all(e.get("ts_inferred") in ("earlier commit", "later commit") for e in snapshot_events)
    assert all(min(commits) <= e["ts"] <= max(commits) for e in snapshot_events)
    assert story["feed"].counts["snapshots"] > story["feed"].counts["time from earlier commit"] > 0


def test_every_record_the_broker_wrote_round_trips_byte_exact(story):
    versions = set()
    for key, value in story["pairs"]:
        record = decode_record(key, value)
        assert encode_record(record) == (key, value)
        versions.add((record["type"], record.get("value_version")))
    assert {("group_metadata", 0), ("offset_commit", 1), ("group_metadata", None)} <= versions


def test_the_cluster_feed_command_reads_a_0_9_broker(kafka09_histories, apache_kafka, capsys):
    """The command publishes what the feed gives, read with the 0.9 client settings: once both runs are in the log
    (nothing is written to their group after that)."""
    last = kafka09_histories(1)
    want = [e for e in events_from(last.pairs, ClusterFeed()) if e["group_id"] == last.group]
    events_topic = f"events-{uuid.uuid4().hex[:8]}"  # created on first use (auto.create.topics.enable)
    assert (
        cli.main(
            [
                "cluster-feed",
                "--bootstrap",
                apache_kafka.bootstrap,
                "--kafka-conf",
                "api.version=0.9",
                "--events-topic",
                events_topic,
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "client settings: api.version=0.9" in err and "time inferred for" in err
    published = [
        e
        for e in read_feed(apache_kafka.bootstrap, events_topic, {"api_version": [0, 9]})
        if e["group_id"] == last.group
    ]
    assert published == want


# ---------------------------------------------------------------- Apache Kafka 4.x (issue #29)
@pytest.fixture(scope="module")
def kafka4_story(kafka4_histories):
    """Issue #29's histories on Apache Kafka 4 (the same runs the instrumentation's tests read), then the broker's
    __consumer_offsets (GroupMetadataValue v3, OffsetCommitValue v3+) through the cluster feed and the tracker."""
    run = kafka4_histories("first")
    feed = ClusterFeed()
    # The run's groups only: the log also holds other tests' groups, such as test_kip848_kafka's consumer-protocol
    # group, whose events are the consumer-group model's, not this classic tracker's (the job routes them there).
    events = [e for e in events_from(run.pairs, feed) if e["group_id"] in (run.eager, run.cooperative)]
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += tracker.handle(event)
    return SimpleNamespace(run=run, events=events, outputs=outputs, tracker=tracker, feed=feed)


def test_kafka4_generations_leaves_and_expiries_are_what_the_broker_did(kafka4_story):
    """Every generation the broker recorded, with its members, leader and partitions per member; within them, what
    the consumers were given; c1-c4 left; c0 (killed) and s0's later incarnations ran out of session; z0, frozen,
    missed the rebalance timeout; s0's restart within its session replaced its first id; the cooperative group's
    members left.

    The broker writes a generation's record on the leader's SyncGroup, and a member whose SyncGroup comes too late
    is never given its part: a JoinGroup arriving while the write is in flight (two consumers starting together)
    sends the group back to rebalancing, and so does a cooperative group's second round, which the others begin as
    soon as they have their answers; a SyncGroup then is answered REBALANCE_IN_PROGRESS (Kafka's
    classicGroupSyncToLeader, and SyncGroup in PreparingRebalance). The log cannot tell, so the tracker shows the
    record; nobody committed a partition the record gave such a member. Seen under load: generation 1, k0 or k1
    alone, before their generation 2; k2 in the cooperative round one that gave it nothing."""
    run = kafka4_story.run
    for group in (run.eager, run.cooperative):
        said, want = told(kafka4_story.outputs, group), run.story(group)
        recorded = kafka4_generations(run.pairs, group)
        first = {}  # a static member's restart within its session is recorded again in its generation
        for g, leader, members, _ in recorded:
            first.setdefault(g, (leader, members))
        assert said["generations"] == first, group
        for g, (leader, members) in want["generations"].items():
            assert g in first and leader in (None, first[g][0]), (group, g)
            assert {m: first[g][1].get(m) for m in members} == members, (group, g)
        given = {
            g: {
                m
                for gens in (run.truths[group].generations(), run.truths[group].generations(current=True))
                if g in gens
                for m in gens[g].members
            }
            for g in first
        }  # a restarted static member: both ids
        not_given = [
            (g, m, parts, commits)
            for g, _, members, commits in recorded
            for m, parts in members.items()
            if m not in given[g]
        ]
        assert all(commits.get(tuple(tp), 0) == 0 for *_, parts, commits in not_given for tp in parts), (
            group,
            not_given,
        )
        assert {**said, "generations": None} == {**want, "generations": None}, group
        # A v3 record carries its own time: nothing is inferred from commits.
        assert all("ts_inferred" not in e for e in kafka4_story.events if e["group_id"] == group)


def kafka4_generations(pairs, group: str) -> list[tuple]:
    """Each GroupMetadata record of ``group`` with members, in log order: (generation, leader, member -> sorted
    partitions, (topic, partition) -> its commits while this was the group's latest record)."""
    out: list = []
    for key, value, _ in pairs:
        r = decode_record(key, value)
        if r.get("group_id") != group:
            continue
        if r["type"] == "group_metadata":
            out.append(
                None
                if r["tombstone"]
                else (
                    r["generation"],
                    r["leader"],
                    {m["member_id"]: sorted(map(list, m["assignment"]["partitions"])) for m in r["members"]},
                    {},
                )
            )
        elif r["type"] == "offset_commit" and out and out[-1] is not None:
            tp = (r["topic"], r["partition"])
            out[-1][3][tp] = out[-1][3].get(tp, 0) + 1
    return [g for g in out if g is not None and g[2]]


def test_kafka4_final_offsets_are_what_the_consumers_committed(kafka4_story):
    run, tracker = kafka4_story.run, kafka4_story.tracker
    for group in (run.eager, run.cooperative):
        tracked = {tp: o["offset"] for tp, o in tracker.fetch_offsets(group).items()}
        assert tracked == run.truths[group].committed() == run.committed[group]
        assert tracker.describe_group(group)["state"] == "Empty"


def test_kafka4_records_round_trip_byte_exact(kafka4_story):
    versions = set()
    for key, value, _ in kafka4_story.run.pairs:
        record = decode_record(key, value)
        assert encode_record(record) == (key, value)
        versions.add((record["type"], record.get("value_version")))
    kinds = {kind for kind, _ in versions}
    assert {"group_metadata", "offset_commit"} <= kinds
    assert all(v >= 3 for kind, v in versions if kind in ("group_metadata", "offset_commit") and v is not None)
    # Kafka 4 writes a record when a classic group is created: generation 0, no protocol type, no members (3.9's
    # coordinator, run with APACHE_KAFKA_VERSION=3.9, writes its first at generation 1 or later).
    first = next(
        decode_record(k, v)
        for k, v, _ in kafka4_story.run.pairs
        if decode_record(k, v).get("group_id") == kafka4_story.run.eager
    )
    created = (first["type"], first["generation"], first["protocol_type"], first["members"])
    if int(kafka4_story.run.version.split(".")[0]) >= 4:
        assert created == ("group_metadata", 0, "", [])
    else:
        assert created[0] == "group_metadata" and created[1] >= 1 and created[3]


def test_the_cluster_feed_samples_the_groups_log_ends_while_the_log_is_quiet(apache_kafka4, tmp_path):
    """The cluster feed publishes log-end samples of the groups' topics, read from the cluster it observes: once
    caught up, a round every --lag-sample-s, while __consumer_offsets has nothing new (the group committed before the
    feed started); once at the end without --follow; none by default when the events go to the observed cluster
    (its run samples it). The samples make lag in the model's outputs."""
    import json
    import signal
    import subprocess
    import sys

    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    from streaming.coordinator.lag import PARTITION_LAG, LagBook
    from streaming.coordinator.routing import Configs, run_feed
    from tests.job_process import job_env
    from tests.tracker.test_tracker_kafka import read_all

    bootstrap = apache_kafka4.bootstrap
    suffix = uuid.uuid4().hex[:8]
    topic, other, group = f"sampled-{suffix}", f"unsampled-{suffix}", f"sampled-group-{suffix}"
    apache_kafka4.create_topics({topic: 2, other: 1})
    producer = KafkaProducer(bootstrap_servers=bootstrap)

    def produce(partition: int, n: int) -> None:
        for _ in range(n):
            producer.send(topic, b"x", partition=partition)
        producer.flush()

    produce(0, 15)
    produce(1, 15)
    producer.send(other, b"y")
    producer.flush()
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    committer.commit(
        {TopicPartition(topic, 0): OffsetAndMetadata(5, "", -1), TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1)}
    )
    committer.close()

    def feed_command(*args: str) -> list[str]:
        return [sys.executable, "-m", "streaming.cli.main", "cluster-feed", "--bootstrap", bootstrap, *args]

    def lines(path) -> list[dict]:
        text = path.read_text() if path.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def samples(path) -> list[dict]:
        return [e for e in lines(path) if e["type"] == "log_end"]

    followed = tmp_path / "followed.jsonl"
    feed = subprocess.Popen(
        feed_command("--follow", "--out", str(followed), "--lag-sample-s", "1"),
        cwd=tmp_path,
        env=job_env(),
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: samples(followed), 60, "the first samples")
        produce(0, 20)  # the log end moves; the feed's log stays quiet
        wait_until(
            lambda: any(e["partition"] == 0 and e["offset"] == 35 for e in samples(followed)),
            30,
            "a sample of the moved log end",
        )
        wait_until(lambda: len({e["ts"] for e in samples(followed)}) >= 4, 30, "four rounds")
    finally:
        feed.send_signal(signal.SIGINT)
        _, stderr = feed.communicate(timeout=30)
    assert feed.returncode == 0, stderr
    assert "every 1 s once caught up" in stderr, stderr
    events = lines(followed)
    mine = [e for e in events if e["group_id"] == group]
    sampled = [e for e in mine if e["type"] == "log_end"]
    # Only the group's topic, both partitions each round, after everything the log held (caught up first).
    assert {(e["topic"], e["partition"]) for e in sampled} == {(topic, 0), (topic, 1)}
    rounds = sorted({e["ts"] for e in sampled})
    assert all(sorted(e["partition"] for e in sampled if e["ts"] == ts) == [0, 1] for ts in rounds)
    first = next(i for i, e in enumerate(mine) if e["type"] == "log_end")
    assert [e["type"] for e in mine[:first]] and all(e["type"] != "log_end" for e in mine[:first])
    assert all(e["type"] == "log_end" for e in mine[first:]), "the log held nothing new meanwhile"
    # Bounded: a round a second at most (its time is taken after its look-up, which may vary a little).
    assert all(b - a >= 900 for a, b in zip(rounds, rounds[1:])), rounds
    ends = {(e["partition"]): e["offset"] for e in sampled if e["ts"] == rounds[-1]}
    assert ends == {0: 35, 1: 15}
    # Replayed, the samples and the commits give lag in records.
    outputs, rejected = run_feed(mine, Configs.from_properties(OBSERVER_SETTINGS))
    assert rejected == 0
    last = {(f["partition"]): f for f in LagBook().add_all(outputs) if f["type"] == PARTITION_LAG}
    assert {p: (f["log_end"], f["committed"], f["lag_records"]) for p, f in last.items()} == {
        0: (35, 5, 30),
        1: (15, 7, 8),
    }

    # Without --follow: one round, at the end.
    once = tmp_path / "once.jsonl"
    done = subprocess.run(
        feed_command("--out", str(once)), cwd=tmp_path, env=job_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "once, at the end" in done.stderr, done.stderr
    mine = [e for e in lines(once) if e["group_id"] == group]
    assert [(e["partition"], e["offset"]) for e in mine if e["type"] == "log_end"] == [(0, 35), (1, 15)]
    assert all(e["type"] == "log_end" for e in mine[-2:])
    # To the observed cluster's events topic: none by default (its run samples the same log ends).
    events_topic = f"events-{suffix}"
    done = subprocess.run(
        feed_command("--events-topic", events_topic),
        cwd=tmp_path,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "no log-end samples" in done.stderr, done.stderr
    published = [json.loads(r.value) for r in read_all(bootstrap, events_topic)]
    assert any(e["group_id"] == group for e in published) and all(e["type"] != "log_end" for e in published)


def test_a_log_end_round_waits_for_the_records_written_before_it(apache_kafka4):
    """Following, a round's samples are held until the reader has read past where ``__consumer_offsets`` ended once
    they were taken: a sample is time gone by for the tracker's models, so the events of the records written before
    it must come first (sent at once, a sample once moved a KIP-848 group's clock past its requests' and the model
    deferred a target the broker had computed)."""
    import io

    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    from streaming.feeds.cluster_feed import FileProducer, LogEndRounds, Publisher
    from streaming.feeds.log_end_sampler import LogEndSampler
    from streaming.kafka_client.log_end import log_end_offsets

    bootstrap, suffix = apache_kafka4.bootstrap, uuid.uuid4().hex[:8]
    topic, group = f"held-{suffix}", f"held-group-{suffix}"
    apache_kafka4.create_topics({topic: 1})
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    sampler = LogEndSampler(bootstrap, "unused", 0.001)
    out = io.StringIO()
    rounds = LogEndRounds(sampler, Publisher(FileProducer(out), "unused"), "__consumer_offsets")
    try:
        committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})
        sampler.learn(group, {topic})
        tps = [TopicPartition("__consumer_offsets", p) for p in reader.partitions_for_topic("__consumer_offsets")]
        before = {tp.partition: end for tp, end in log_end_offsets(reader, tps).items()}
        behind = {**before, **{p: end - 1 for p, end in before.items() if end}}  # the commit's partition not read

        assert not rounds.polled(behind)  # a round taken, held: the reader has not read the commit yet
        held = list(rounds.held)
        assert [(e["group_id"], e["topic"], e["offset"]) for e in held] == [(group, topic, 0)] and not out.getvalue()
        assert not rounds.polled(behind) and rounds.held == held  # no second round while one is held
        committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})  # written after the round
        assert rounds.polled(before)  # read to where the log ended after the round: the samples may go
        rounds.release()
        assert [json.loads(line) for line in out.getvalue().splitlines()] == held and not rounds.held
    finally:
        committer.close()
        reader.close()
        sampler.stop()
