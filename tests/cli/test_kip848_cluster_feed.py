"""docs/real-cluster.md for a consumer-protocol (KIP-848) group on Apache Kafka 4.4 (fixture ``apache_kafka4``): the
``cluster-feed --follow`` command, as a person types it, while confluent-kafka consumers with
``group.protocol=consumer`` (``tests/confluent_consumer.py``) go through a short history -- c0 and c1 start; a topic
created after the command started joins c1's subscription; the first topic grows from 3 to 5 partitions; c1 closes,
then c0. The members ask for the ``range`` server assignor (``group.remote.assignor``).

The command finds out from the broker what Kafka 4.3+ does not write down: new groups start at epoch 1 and targets
are computed at most once a second, the broker's default (ApiVersions: 4.3+; the group runs with the broker's own
settings), and the topics (names, ids, sizes) come from the cluster's metadata, asked again as topics appear and grow.
Its events go through the tracker's models (``routing.run_feed``, what ``run`` runs per group) with the settings
the command printed, and the tracker's group epochs, targets and each member's assignments are the broker's and
what the consumers were given.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from offsets_store import decode_record
from streaming.coordinator.routing import Configs, run_feed
from streaming.feeds.cluster_feed import read_offsets_topic
from streaming.feeds.consumer_feed import is_consumer_group_record, normalise
from tests.broker_history import wait_until
from tests.brokers.test_kip848_kafka import History, assignments_given, assignments_held, grow, produce, topic_ids
from tests.job_process import job_env
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

TRACKER = str(Path(sys.executable).parent / "rebalance-tracker")
# The group's other server assignor (test_kip848_kafka's history runs with Kafka's default, uniform): the members ask
# for it, and the broker uses the assignor most of them ask for
RANGE = {"group.remote.assignor": "range"}


def test_cluster_feed_follows_a_consumer_protocol_group_on_kafka_4_4(apache_kafka4, tmp_path):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    bootstrap, suffix = apache_kafka4.bootstrap, uuid.uuid4().hex[:8]
    group, topics = f"feed848-{suffix}", {"a": f"feed848-a-{suffix}", "b": f"feed848-b-{suffix}"}
    apache_kafka4.create_topics({topics["a"]: 3})
    release = tuple(int(n) for n in apache_kafka4.version.split(".")[:2])  # APACHE_KAFKA_VERSION may pick another
    # the broker's own settings: on 4.3+ targets at most once a second (group.consumer.assignment.interval.ms)
    produce(bootstrap, topics["a"], 3, 20)
    log = tmp_path / "cluster-feed.log"
    with open(log, "wb") as out:  # docs/real-cluster.md, step 1 (into a file: the tracker's input here)
        feed = subprocess.Popen(
            [TRACKER, "cluster-feed", "--follow", "--out", "feed.jsonl"],
            cwd=tmp_path,
            env=job_env({"KAFKA_BOOTSTRAP": bootstrap}),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    history = History(bootstrap, group, topics, tmp_path)
    history.sizes = {topics["a"]: 3, topics["b"]: 2}
    try:
        settings_line = wait_until(
            lambda: next(
                (line for line in log.read_text().splitlines() if line.startswith("run the tracker with ")), None
            ),
            30,
            "cluster-feed to say how to run the tracker",
            every_s=0.2,
        )
        history.start("c0", librdkafka=RANGE)
        history.start("c1", librdkafka=RANGE)
        history.settled("c0 and c1 started")
        apache_kafka4.create_topics({topics["b"]: 2})  # a topic the command has not seen yet
        produce(bootstrap, topics["b"], 2, 20)
        history.resubscribe("c1")
        history.settled("c1 subscribed to the new topic too")
        grow(bootstrap, topics["a"], 5)
        history.sizes[topics["a"]] = 5
        history.settled("the first topic grew to 5 partitions")
        history.close("c1")
        history.settled("c1 closed")
        history.close("c0")
    finally:
        history.stop_all()
    facts = history.facts()
    last = next(f["member_id"] for f in reversed(facts) if f["client"] == "c0" and f.get("member_id"))

    def told():  # the feed has explained c0's leave (its last request)
        lines = (tmp_path / "feed.jsonl").read_text().splitlines() if (tmp_path / "feed.jsonl").exists() else []
        events = [json.loads(line) for line in lines]
        return (
            events
            if any(
                e["type"] == "consumer_heartbeat" and e["member_id"] == last and e["member_epoch"] == -1 for e in events
            )
            else None
        )

    try:
        events = wait_until(told, 30, "c0's leave in the cluster feed", every_s=0.5)
    finally:
        feed.send_signal(signal.SIGINT)  # Ctrl-C
        code = feed.wait(30)
    text = log.read_text()
    pairs = list(read_offsets_topic(bootstrap, timestamps=True))
    broker = [
        r
        for r in (decode_record(k, v) for k, v, _ in pairs)
        if r.get("group_id") == group and is_consumer_group_record(r)
    ]
    (tmp_path / "consumer_offsets.json").write_text(
        json.dumps(  # for a look after a failure
            [[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in pairs]
        )
    )
    assert code == 0, text[-3000:]
    initial = 1 if release >= (4, 3) else 0
    found = (
        "consumer-protocol groups: "
        + ("Kafka 4.3+, new groups start at epoch 1" if initial else "new groups start at epoch 0")
        + (
            "; targets computed at most every 1000 ms (the broker's default group.consumer.assignment.interval.ms; "
            "give the broker's or group's own if set)"
            if initial
            else ""
        )
        + ("; Kafka 4.4+, an emptied group's assignment epoch follows its group epoch" if release >= (4, 4) else "")
        + (
            "; topics from the cluster's metadata, and an upgraded group keeps them (Kafka 4.1+)"
            if release >= (4, 1)
            else "; topics from their ConsumerGroupPartitionMetadata records"
        )
    )
    assert found in text, text
    assert settings_line == (
        "run the tracker with --coordinator-conf tracker.adopt.unknown.members=true "
        "--coordinator-conf tracker.expire.members=false"
        + (" --coordinator-conf initial.group.epoch=1" if initial else "")
        + (" --coordinator-conf empty.group.assignment.epoch=true" if release >= (4, 4) else "")
        + (" --coordinator-conf upgrade.with.metadata=true" if release >= (4, 1) else "")
        + (" --coordinator-conf group.consumer.assignment.interval.ms=1000" if initial else "")
    )
    # (its summary counts every group on the session's broker: other tests' groups may be unexplained there)
    assert "KIP-848 consumer-group records became" in text, text[-3000:]

    # No log-end sample ahead of the events of records written before it: a sample is time gone by for the models
    mine = [e for e in events if e["group_id"] == group]
    assert any(e["type"] == "log_end" for e in mine)
    for i, sample in enumerate(mine):
        if sample["type"] == "log_end":
            assert all(e["ts"] >= sample["ts"] for e in mine[i + 1 :] if e["type"] != "log_end"), (sample, mine)

    # The tracker, with the settings the command printed
    settings = dict(pair.split("=", 1) for pair in settings_line.split(" --coordinator-conf ")[1:])
    outputs, rejected = run_feed([e for e in events if e["group_id"] == group], Configs.from_properties(settings))
    assert rejected == 0
    ours = [o for o in outputs if is_consumer_group_record(o) and o["group_id"] == group]

    def epochs(records):
        return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]

    def targets(records):
        out, members = [], {}
        for r in records:
            if r["type"] == "consumer_group_target_assignment_member":
                members[r["member_id"]] = (
                    None
                    if r.get("tombstone")
                    else frozenset((t["topicId"], p) for t in r["topicPartitions"] for p in t["partitions"])
                )
            elif r["type"] == "consumer_group_target_assignment_metadata" and not r.get("tombstone"):
                out.append((r["assignmentEpoch"], {m: a for m, a in members.items() if a is not None}))
        return out

    # every record the broker wrote for the group, the tracker wrote (Kafka 4.0's partition metadata aside, which
    # 4.1+ does not write; Kafka writes a batch's target records in hash order: compared as a multiset)
    def same(records):
        return collections.Counter(
            normalise(r) for r in records if release < (4, 1) or r["type"] != "consumer_group_partition_metadata"
        )

    assert same(ours) == same(broker)
    # every member asked for range (so the broker's targets above are its range assignor's, and the model's ours)
    assert {
        r["serverAssignor"] for r in broker if r["type"] == "consumer_group_member_metadata" and not r.get("tombstone")
    } == {"range"}
    assert epochs(ours) == epochs(broker) and epochs(broker)[0] == initial + 1  # 4.3+: the first member makes 2
    assert targets(ours) == targets(broker)
    # the growth: a target with the first topic's 5 partitions
    ids = topic_ids(bootstrap, list(topics.values()))
    assert any(
        {p for a in target.values() for t, p in a if t == ids[topics["a"]]} == set(range(5))
        for _, target in targets(ours)
    )

    seq = assignments_held(ours, {v: k for k, v in ids.items()})
    assert seq == assignments_given(facts) and len(seq) == 2
    left = {o["member_id"] for o in outputs if o["type"] == "member_left"}
    assert left == set(seq)
    print(
        f"\ncluster-feed on Apache Kafka {apache_kafka4.version}: {time.monotonic() - started:.1f} s, "
        f"{len(events)} events, epochs {epochs(ours)}"
    )
