"""A KIP-848 group on Apache Kafka 4.x (fixture ``apache_kafka4``) with the broker's own settings for target
assignments: Kafka 4.3+ computes a group's next target at most once a second (``group.consumer.assignment.interval.ms``
=1000, KIP-1263), by the first heartbeat after the interval, so a join or a new subscription soon after the last
target writes none, and a later heartbeat -- often one writing nothing else -- writes it.

confluent-kafka consumers (``group.protocol=consumer``, the ``History`` of test_kip848_kafka.py): c0 and c1 start
together; c2 is added and c1 closes right after it; c2 subscribes to a second topic; c0 and c2 close. The feed is
the one the ``cluster-feed`` command builds (``consumer_group_feed``: the broker's defaults for its release, from
ApiVersions, and its topics), the tracker's model takes the settings it prints; the feed explains every record, and
the model's epochs, targets and member assignments are the broker's and the consumers'.
"""

from __future__ import annotations

import collections
import json
import time
import uuid

import pytest

from offsets_store import decode_record
from streaming.feeds.cluster_feed import (
    ClusterFeed,
    consumer_group_feed,
    events_from,
    read_offsets_topic,
    tracker_settings,
)
from streaming.feeds.consumer_feed import is_consumer_group_record
from tests.broker_history import wait_until
from tests.brokers.test_kip848_kafka import (
    SIZES,
    History,
    assignments_given,
    assignments_held,
    consumer_model_outputs,
    owned_now,
    produce,
    topic_ids,
)
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]


def epochs(records: list[dict]) -> list[int]:
    return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]


def targets(records: list[dict]) -> list[tuple[int, dict]]:
    """Each target assignment written: (assignment epoch, member -> partitions)."""
    out, members = [], {}
    for r in records:
        if r["type"] == "consumer_group_target_assignment_member":
            members[r["member_id"]] = (
                None
                if r.get("tombstone")
                else {(t["topicId"], p) for t in r["topicPartitions"] for p in t["partitions"]}
            )
        elif r["type"] == "consumer_group_target_assignment_metadata" and not r.get("tombstone"):
            out.append((r["assignmentEpoch"], {m: frozenset(a) for m, a in members.items() if a is not None}))
    return out


def deferred_bumps(records: list[dict]) -> list[int]:
    """The broker's batches (by time) that bumped the group epoch past its target and wrote no target."""
    batches: dict[int, list[dict]] = collections.defaultdict(list)
    for r in records:
        batches[r["ts"]].append(r)
    assignment_epoch, out = None, []
    for ts, batch in sorted(batches.items()):
        for r in batch:
            if r["type"] == "consumer_group_target_assignment_metadata" and not r.get("tombstone"):
                assignment_epoch = r["assignmentEpoch"]
        bumped = epochs(batch)
        if bumped and assignment_epoch is not None and bumped[-1] > assignment_epoch and targets(batch) == []:
            if any(r["type"] == "consumer_group_member_metadata" and not r.get("tombstone") for r in batch):
                out.append(ts)
    return out


@pytest.fixture(scope="module")
def run(apache_kafka4, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    release = tuple(int(n) for n in apache_kafka4.version.split(".")[:2])
    if release < (4, 3):
        pytest.skip(f"Kafka {apache_kafka4.version} computes targets in the heartbeat that needs them")
    started = time.monotonic()
    bootstrap, suffix = apache_kafka4.bootstrap, uuid.uuid4().hex[:8]
    group, topics = f"k848d-{suffix}", {"a": f"k848d-a-{suffix}", "b": f"k848d-b-{suffix}"}
    apache_kafka4.create_topics({topics["a"]: SIZES["a"], topics["b"]: SIZES["b"]})
    for key, name in topics.items():
        produce(bootstrap, name, SIZES[key], 20)
    history = History(bootstrap, group, topics, tmp_path_factory.mktemp("k848d"))
    try:
        history.start("c0")
        history.start("c1")  # within the second after c0's target: its join writes none
        history.settled("c0 and c1 started")
        history.start("c2")
        time.sleep(0.3)
        history.close("c1")  # a leave never computes a target
        history.settled("c2 added, c1 closed")
        history.resubscribe("c2")
        history.settled("c2 subscribed to a second topic")
        history.close("c0")
        history.close("c2")
    finally:
        history.stop_all()
    facts = history.facts()
    c2 = owned_now(facts)["c2"][0]

    def written():  # until the broker has removed c2, the last member
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        return (
            pairs
            if any(
                r.get("group_id") == group
                and r["type"] == "consumer_group_member_metadata"
                and r.get("tombstone")
                and r.get("member_id") == c2
                for r in (decode_record(k, v) for k, v, _ in pairs)
            )
            else None
        )

    pairs = wait_until(written, 30, "c2's removal in __consumer_offsets", every_s=0.5)
    own = [(k, v, ts) for k, v, ts in pairs if decode_record(k, v).get("group_id") == group]
    # Beside the truth file, for a look after a failure: the group's records (hex) as the broker wrote them.
    (history.workdir / "consumer_offsets.json").write_text(
        json.dumps({"group": group, "pairs": [[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in own]})
    )
    consumer, found = consumer_group_feed(bootstrap, {}, {})  # as the cluster-feed command builds it
    feed = ClusterFeed(consumer)
    events = [e for e in events_from(own, feed) if e["group_id"] == group]
    settings = tracker_settings(consumer.config)
    outputs = consumer_model_outputs(events, settings)
    broker = [{**decode_record(k, v), "ts": ts} for k, v, ts in own]
    names = {topic_id: name for name, topic_id in topic_ids(bootstrap, sorted(topics.values())).items()}
    print(
        f"\nKIP-848 deferred targets on Apache Kafka {apache_kafka4.version}: {time.monotonic() - started:.1f} s, "
        f"{found}; {len(events)} events, {dict(consumer.counts)}; deferred at {deferred_bumps(broker)}"
    )
    return collections.namedtuple("Run", "group names facts broker feed found settings outputs")(
        group, names, facts, broker, feed, found, settings, [o for o in outputs if is_consumer_group_record(o)]
    )


def test_the_feed_assumes_the_brokers_default_interval(run):
    assert "targets computed at most every 1000 ms" in run.found
    assert run.settings["group.consumer.assignment.interval.ms"] == "1000"


def test_the_broker_deferred_a_target(run):
    """c1's join came within the second after c0's target: the broker bumped the group epoch and wrote no target
    (Kafka up to 4.2 would have written one)."""
    assert deferred_bumps(run.broker)


def test_the_feed_explains_every_record(run):
    counts = run.feed.consumer.counts
    assert counts["unexplained records"] == 0
    assert counts["consumer group records"] == sum(1 for r in run.broker if is_consumer_group_record(r))


def test_epochs_and_targets_are_the_brokers(run):
    broker = [r for r in run.broker if is_consumer_group_record(r)]
    assert epochs(run.outputs) == epochs(broker)
    assert targets(run.outputs) == targets(broker)


def test_each_members_assignment_is_what_its_consumer_was_given(run):
    seq = assignments_held(run.outputs, run.names)
    given = assignments_given(run.facts)
    assert seq == given and len(given) == 3
