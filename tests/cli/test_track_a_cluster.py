"""docs/real-cluster.md (and README's short version), as a person types it: every command a subprocess, on Apache Kafka
4.x and 0.9.0.1.

A real kafka-python group goes through issue #11's history (two consumers start, a third is added, one closes, one is
killed, one more is added, the rest close) while ``cluster-feed --follow`` turns the broker's ``__consumer_offsets``
into events and ``run`` tracks them. Then ``offsets``, ``outputs``, ``report`` (HTML and PNG), ``cluster-feed`` once
into a file, ``report --feed`` and ``replay``. Each command's exit code and messages are checked, and the story
against what the consumers were given (tests/broker_history.py): every generation they were given with its members,
leader and partitions, the close and the last leaves as leaves, the kill as the one session-timeout expiry, the
committed offsets. Issue #34 found each step failing on 0.9 in its own way.

One Spark start per broker (the tracker runs beside the group, in processing time); ~1-2 min per broker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from offsets_store import decode_record
from streaming.local.broker import _die_with_parent
from streaming.spark.restore import POSITION_GROUP
from tests.broker_history import GroupHistory, Truth, run_issue_history, wait_until
from tests.kafka4_history import KAFKA4_CONSUMER
from tests.job_process import job_env
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group(OWN_PROCESSES)]

TRACKER = str(Path(sys.executable).parent / "rebalance-tracker")  # the console script, as installed
OBSERVER = [
    "--coordinator-conf",
    "tracker.adopt.unknown.members=true",
    "--coordinator-conf",
    "tracker.expire.members=false",
]


class Command:
    """``rebalance-tracker ARGS`` in its own process group (a run's JVM goes with it), output to a log file."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str], name: str):
        self.args, self.log = args, cwd / f"{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [TRACKER, *args],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def interrupt(self, timeout_s: float = 60) -> int:
        """Ctrl-C, as in a terminal."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def tracker(args: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TRACKER, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
    )


def broker_generations(bootstrap: str, group: str, client: dict) -> list[tuple]:
    """(generation, leader, member -> partitions) of every GroupMetadata record the broker wrote for ``group``."""
    from streaming.feeds.cluster_feed import read_offsets_topic

    out = []
    for key, value in read_offsets_topic(bootstrap, client=client):
        r = decode_record(key, value)
        if r.get("group_id") == group and r["type"] == "group_metadata" and not r.get("tombstone") and r["members"]:
            out.append(
                (r["generation"], r["leader"], {m["member_id"]: m["assignment"]["partitions"] for m in r["members"]})
            )
    return out


@pytest.fixture(params=["apache-kafka-4", "apache-kafka-0.9"])
def cluster(request):
    """The cluster to observe, and what its commands need (docs/real-cluster.md: ``--kafka-conf api.version=0.9``
    for 0.9)."""
    from types import SimpleNamespace

    if request.param == "apache-kafka-4":
        kafka = request.getfixturevalue("apache_kafka4")
        # Polls that outlast a round's join: with 200 ms ones, kafka-python 3.0.12 sometimes loses the answer and the
        # consumer stops (tests/kafka4_history.py); 2 of 12 histories under load never settled.
        return SimpleNamespace(
            kafka=kafka,
            name=f"Apache Kafka {kafka.version}",
            conf=[],
            client={},
            old=False,
            consumer={"poll_timeout_ms": KAFKA4_CONSUMER["poll_timeout_ms"]},
        )
    kafka = request.getfixturevalue("apache_kafka")
    return SimpleNamespace(
        kafka=kafka,
        name="Apache Kafka 0.9.0.1",
        conf=["--kafka-conf", "api.version=0.9"],
        client={"api_version": (0, 9)},
        old=True,
        consumer={},
    )


def test_track_a_real_cluster_as_readme_says(cluster, tmp_path, kafka_bootstrap):
    bootstrap, conf, suffix = cluster.kafka.bootstrap, cluster.conf, uuid.uuid4().hex[:8]
    group, data, events = f"orders-{suffix}", f"orders-data-{suffix}", f"rebalance-events-{suffix}"
    outputs_topic, dlq = f"rebalance-assignments-{suffix}", f"{events}.dlq"
    env = job_env({"KAFKA_BOOTSTRAP": bootstrap})  # the docs: export KAFKA_BOOTSTRAP=...
    topics = ["--events-topic", events, "--assignments-topic", outputs_topic]
    cluster.kafka.create_topics({data: 6})  # the group's own topic
    run_args = [*topics, "--store", "sqlite:data/offsets.db", "--checkpoint", "data/checkpoint", *OBSERVER, *conf]

    if cluster.old:
        # 0.9 cannot create topics over the protocol: run says which are missing, before Spark starts.
        refused = tracker(["run", *run_args], tmp_path, env, timeout_s=60)
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert (
            "cannot create topics" in line
            and f"{events} (4 partitions)" in line
            and f"{outputs_topic} (1 partition)" in line
            and f"{dlq} (1 partition)" in line
            and "kafka-topics" in line
        )
        cluster.kafka.create_topics({events: 4, outputs_topic: 1, dlq: 1})  # the docs: Kafka's TopicCommand

    feed = Command(["cluster-feed", "--follow", "--events-topic", events, *conf], tmp_path, env, "cluster-feed")
    job = Command(["run", *run_args], tmp_path, env, "run")
    history = GroupHistory(
        bootstrap, data, group, tmp_path / "history", client=dict(cluster.client), consumer=dict(cluster.consumer)
    )
    history.workdir.mkdir()
    try:
        truth = run_issue_history(history)
        # The tracker has told the whole story once the last member's leave is on the outputs topic.
        left_last = sorted(truth.member_ids("c3"))

        def told() -> list[dict] | None:
            done = tracker(
                ["outputs", "--topic", outputs_topic, "--group", group, "--out", "outputs.jsonl", *conf], tmp_path, env
            )
            assert done.returncode == 0, done.stderr
            assert job.proc.poll() is None, job.text()[-3000:]
            outs = [json.loads(line) for line in (tmp_path / "outputs.jsonl").read_text().splitlines()]
            return outs if any(o["type"] == "member_left" and o["member_id"] in left_last for o in outs) else None

        outputs = wait_until(told, 180, "the last leave on the outputs topic", every_s=2)
        assert job.interrupt() == 0, job.text()[-3000:]
        assert feed.interrupt() == 0, feed.text()[-3000:]
    finally:
        history.stop_all()
        job.stop()
        feed.stop()
    run_log, feed_log = job.text(), feed.text()
    assert "Traceback" not in run_log and "tracking " in run_log and "stopping" in run_log, run_log[-3000:]
    assert "dead letters 0" in run_log and " 1 members" not in run_log, run_log[-3000:]
    assert ("no record headers" in run_log) == cluster.old
    published = re.search(r"published (\d+) events to " + re.escape(events), feed_log)
    assert published and int(published.group(1)) > 0 and "not delivered" not in feed_log, feed_log[-2000:]

    # --- the story: what the consumers were given, and what the broker recorded
    check_story(outputs, truth, broker_generations(bootstrap, group, cluster.client))

    # --- offsets: like kafka-consumer-groups --describe, from the tracker's store
    described = tracker(["offsets", "--group", group, "--store", "sqlite:data/offsets.db", *conf], tmp_path, env)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines()[1:]]
    committed = {(topic, int(p)): int(o) for _, topic, p, o, *_ in rows}
    assert committed == truth.committed() and len(committed) == 6
    assert all(r[4] != "-" and int(r[5]) >= 0 for r in rows), described.stdout  # log end and lag from the broker

    # --- report from the outputs: HTML and PNG; what the cluster feed cannot know is shown as unknown
    report = tracker(
        ["report", "--outputs", "outputs.jsonl", "--group", group, "--out", "report.html", "--png", "report.png"],
        tmp_path,
        env,
    )
    assert report.returncode == 0, report.stderr
    generations = len(truth.generations())
    drawn = re.search(r"wrote report.html: (\d+) generations, (\d+) departures", report.stdout)
    assert (
        drawn and int(drawn.group(1)) == sum(o["type"] == "rebalance" for o in outputs) and int(drawn.group(2)) == 4
    ), report.stdout  # c1, c2, c3 left, c0 expired
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert "unknown" in (tmp_path / "report.html").read_text()

    # --- the cluster feed once, into a file: report --feed needs the observer settings, and says so without them
    once = tracker(["cluster-feed", "--out", "feed.jsonl", *conf], tmp_path, env)
    assert once.returncode == 0 and "published" in once.stderr and "feed.jsonl" in once.stderr, once.stderr
    bare = tracker(["report", "--feed", "feed.jsonl", "--group", group, "--out", "bare.html"], tmp_path, env)
    assert bare.returncode == 1 and "tracker.adopt.unknown.members=true" in bare.stderr, bare.stderr
    observed = tracker(
        ["report", "--feed", "feed.jsonl", "--group", group, "--out", "feed.html", *OBSERVER], tmp_path, env
    )
    assert observed.returncode == 0, observed.stderr

    # --- replay: what happened to the members, under each assignor (with the broker's group settings: neither
    # broker here delays a first join). The crashed member's silence expires it; the joins and leaves rebalance.
    replay = tracker(
        [
            "replay",
            "--feed",
            "feed.jsonl",
            "--group",
            group,
            "--json",
            "--assignor",
            "range,sticky",
            "--coordinator-conf",
            "group.initial.rebalance.delay.ms=0",
        ],
        tmp_path,
        env,
    )
    assert replay.returncode == 0, replay.stderr
    scores = {s["assignor"]: s for s in json.loads(replay.stdout)}
    assert set(scores) == {"range", "sticky"}
    assert all(
        s["rebalances"] >= 3 and s["partitions_moved"] > 0 and s["members_expired"] == 1 for s in scores.values()
    ), scores
    print(f"\n{cluster.name}: {generations} generations given; replay {scores}")

    # --- the events topic elsewhere: the observed cluster's settings stay with it (issue #34: 0.9's api.version
    # made the feed broker's producer write nothing while the summary said all was published)
    elsewhere = tracker(
        ["cluster-feed", "--feed-bootstrap", kafka_bootstrap, "--events-topic", f"elsewhere-{suffix}", *conf],
        tmp_path,
        env,
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    sent = int(re.search(r"published (\d+) events", elsewhere.stderr).group(1))
    from tests.broker_history import read_feed

    assert sent > 0 and len(read_feed(kafka_bootstrap, f"elsewhere-{suffix}", {})) == sent


def check_story(outputs: list[dict], truth: Truth, recorded: list[tuple]) -> None:
    """Every generation the broker recorded, as the tracker tells it (members, leader, partitions); these include
    every generation the consumers were given; the close and the final leaves as leaves, the kill as the one
    session-timeout expiry; what the feed cannot know (when a round began) unknown, never 0."""
    told = [
        (o["generation"], o["leader"], o["assignment"]) for o in outputs if o["type"] == "rebalance" and o["members"]
    ]
    assert told == recorded
    given = [(g.generation, g.leader, g.members) for g in truth.generations().values()]
    assert [g for g in given if g not in told] == []
    ids = {c: next(iter(truth.member_ids(c))) for c in ("c0", "c1", "c2", "c3")}
    left = sorted(o["member_id"] for o in outputs if o["type"] == "member_left")
    expired = [(o["member_id"], o["reason"]) for o in outputs if o["type"] == "member_expired"]
    assert left == sorted(ids[c] for c in ("c1", "c2", "c3")) and expired == [(ids["c0"], "session timeout")]
    # Each leave dated when the broker saw it, not at the member's last commit (0.9 stamps no record: the follower
    # dates it by its arrival): within a few seconds of the consumer's close.
    closed = {f["client"]: f["ts"] for f in truth.facts if f["fact"] == "closed"}
    when = {o["member_id"]: o["ts"] for o in outputs if o["type"] == "member_left"}
    assert all(abs(when[ids[c]] - closed[c]) < 5_000 for c in ("c1", "c2", "c3")), {
        c: when[ids[c]] - closed[c] for c in ("c1", "c2", "c3")
    }
    rebalances = [o for o in outputs if o["type"] == "rebalance"]
    # When a round began is not in the records: every rebalance's time is unknown, and so is how long a partition
    # that changed owners waited (one that had none before -- the first round's -- waited for nobody: 0).
    assert all(o["duration_ms"] is None for o in rebalances)
    moved = [o for o in rebalances if o["members"] and o["partitions_moved"]]
    assert moved and all(o["max_partition_unavailable_ms"] is None for o in moved)
    assert all(o["group_id"] != POSITION_GROUP for o in outputs)


@pytest.fixture(params=["headers", "apache-kafka-0.9"])
def outputs_broker(request):
    """A broker with record headers (the session's), and 0.9, which has none (issue #34: the first batch died with
    'Headers not supported in v0/v1')."""
    from types import SimpleNamespace

    if request.param == "headers":
        return SimpleNamespace(
            bootstrap=request.getfixturevalue("kafka_bootstrap"), client={}, headers=True, create_topics=None
        )
    kafka = request.getfixturevalue("apache_kafka")
    return SimpleNamespace(
        bootstrap=kafka.bootstrap, client={"api_version": (0, 9)}, headers=False, create_topics=kafka.create_topics
    )


def test_outputs_are_read_once_with_or_without_record_headers(outputs_broker, tmp_path):
    """The sink marks each output with its batch and place -- headers, or fields of the value where the broker has
    no headers -- and ``outputs`` drops a batch sent again after a crash by either."""
    from streaming.kafka_client import broker_features
    from streaming.kafka_client.topics import ensure_topics
    from streaming.spark.sinks import TrackerSink
    from streaming.views.outputs_topic import ExactlyOnce, read_outputs

    topic = f"outputs-{uuid.uuid4().hex[:8]}"
    if outputs_broker.create_topics:
        outputs_broker.create_topics({topic: 1})
    else:
        ensure_topics(outputs_broker.bootstrap, {topic: 1})
    version = broker_features.api_version(outputs_broker.bootstrap, outputs_broker.client)
    assert broker_features.has_headers(version) == outputs_broker.headers
    sink = TrackerSink(
        bootstrap=outputs_broker.bootstrap,
        outputs_topic=topic,
        producer_config=outputs_broker.client,
        record_headers=outputs_broker.headers,
    )

    def batch(n: int) -> list[dict]:
        return [{"type": "member_joined", "group_id": "g", "member_id": f"m-{n}-{i}", "ts": n} for i in range(3)]

    sink.handle(batch(0), 0)
    sink._produce_until_delivered(batch(1)[:2], 1)  # a crash after part of batch 1 was sent ...
    sink.handle(batch(1), 1)  # ... and the restarted job sends it again, whole
    sink.handle(batch(2), 2)
    sink.close()
    rule = ExactlyOnce()
    read = list(read_outputs(outputs_broker.bootstrap, topic, outputs_broker.client, rule=rule))
    assert read == batch(0) + batch(1) + batch(2)  # the bookkeeping fields are not the outputs'
    assert rule.counts == {"kept": 9, "repeated": 2, "unmarked": 0, "not json": 0}
    conf = ["--kafka-conf", "api.version=0.9"] if not outputs_broker.headers else []
    done = tracker(
        ["outputs", "--bootstrap", outputs_broker.bootstrap, "--topic", topic, "--out", "o.jsonl", *conf],
        tmp_path,
        job_env(),
    )
    assert (
        done.returncode == 0
        and "wrote 9 outputs" in done.stderr
        and "2 records of a batch sent again dropped" in done.stderr
    ), done.stderr
    assert [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()] == read


def test_the_log_end_on_0_9_is_the_listed_one_even_when_records_arrive_meanwhile(apache_kafka):
    """The Spark source plans with a consumer that fetches 1 byte a partition, and asks a fetch for the high-water
    mark. Kafka before 0.10.1 (Fetch before v3) cannot return part of a record: a fetch at a listed end that a new
    record has since passed failed the query on 0.9 with RecordTooLargeError (found by the test above)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from streaming.kafka_client.log_end import log_end_offsets

    topic = f"log-end-{uuid.uuid4().hex[:8]}"
    apache_kafka.create_topics({topic: 1})
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap, api_version=(0, 9))
    for _ in range(3):
        producer.send(topic, b"an event larger than one byte")
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=apache_kafka.bootstrap,
        api_version=(0, 9),
        enable_auto_commit=False,
        max_partition_fetch_bytes=1,
        fetch_max_wait_ms=10,
    )
    tp = TopicPartition(topic, 0)
    try:
        listed = consumer.end_offsets([tp])
        assert listed == {tp: 3}
        consumer.end_offsets = lambda tps: {tp: 2}  # listed before the last record was appended
        assert log_end_offsets(consumer, [tp]) == {tp: 2}  # a later planning round sees the rest
    finally:
        consumer.close()
