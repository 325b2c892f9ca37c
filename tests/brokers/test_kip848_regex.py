"""A regular-expression subscription in a KIP-848 group on Apache Kafka 4.x (fixture ``apache_kafka4``), with
confluent-kafka consumers (``group.protocol=consumer``, the ``History`` of test_kip848_kafka.py): c0 subscribes to
``^rx<suffix>-.*`` (topic a matches) and c1 to topic a by name, started together; topic b is created, and the
broker's next regex refresh (at most every 10 s, on a heartbeat) gives c0 part of it; c1 closes, then c0.

Kafka resolves a new regex, and refreshes the resolved ones, after the request that asked (asynchronously) and writes
the result as a write of its own: the regex's ConsumerGroupRegularExpression record and a new group epoch -- c1's
join may come between c0's and c0's resolution, handled before the regex is resolved. The cluster feed sends a
``regex_resolved`` event for each such write (after the heartbeat of a member that changed nothing, for a refresh),
and the model, told to wait for them (``regex.resolution.events``, on for an observer's feed), resolves then, read
whole or followed batch by batch. The group computes targets at once (its config, and the feed told so), as
test_kip848_kafka.py's does.
"""

from __future__ import annotations

import collections
import json
import time
import uuid

import pytest

from offsets_store import decode_record, encode_record
from streaming.feeds.cluster_feed import (
    ClusterFeed,
    consumer_group_feed,
    events_from,
    read_offsets_topic,
    tracker_settings,
)
from streaming.feeds.consumer_feed import is_consumer_group_record, normalise
from tests.broker_history import followed, wait_until
from tests.brokers.test_kip848_kafka import (
    SYNCHRONOUS_TARGETS,
    History,
    assignments_given,
    assignments_held,
    consumer_model_outputs,
    owned_now,
    produce,
    set_group_configs,
    topic_ids,
)
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

SIZES = {"a": 3, "b": 2}
REGEX_RECORD = "consumer_group_regular_expression"


@pytest.fixture(scope="module")
def run(apache_kafka4, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    bootstrap, suffix = apache_kafka4.bootstrap, uuid.uuid4().hex[:8]
    group, topics = f"rx-{suffix}", {"a": f"rx{suffix}-a", "b": f"rx{suffix}-b"}
    regex = f"^rx{suffix}-.*"
    apache_kafka4.create_topics({topics["a"]: SIZES["a"]})
    set_group_configs(bootstrap, group, SYNCHRONOUS_TARGETS)
    produce(bootstrap, topics["a"], SIZES["a"], 10)
    history = History(bootstrap, group, topics, tmp_path_factory.mktemp("k848rx"))
    history.sizes = {topics[k]: n for k, n in SIZES.items()}
    try:
        history.start("c0", topics=[regex])
        history.subscriptions["c0"] = [topics["a"]]  # what the regex matches now, for settled()
        history.start("c1")  # together, as a deployment starts them: c1's join may come before c0's resolution
        history.settled("c0 (regex) and c1 (topic a) started")
        apache_kafka4.create_topics({topics["b"]: SIZES["b"]})
        produce(bootstrap, topics["b"], SIZES["b"], 10)
        history.subscriptions["c0"] = [topics["a"], topics["b"]]
        history.settled("topic b created: the regex refresh gives it to c0", timeout_s=60)
        history.close("c1")
        history.close("c0")
    finally:
        history.stop_all()
    facts = history.facts()
    c0 = owned_now(facts)["c0"][0]

    def written():  # until the broker has removed c0, the last member (its regex's tombstone with it)
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        own = [(k, v, ts) for k, v, ts in pairs if decode_record(k, v).get("group_id") == group]
        return (
            own
            if any(
                r["type"] == "consumer_group_member_metadata" and r.get("tombstone") and r.get("member_id") == c0
                for r in (decode_record(k, v) for k, v, _ in own)
            )
            else None
        )

    own = wait_until(written, 30, "c0's removal in __consumer_offsets", every_s=0.5)
    (history.workdir / "consumer_offsets.json").write_text(  # for a look after a failure
        json.dumps({"group": group, "pairs": [[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in own]})
    )
    conf = {"group.consumer.assignment.interval.ms": "0"}  # the group's config, told to the command

    def feed_events(source):
        consumer, found = consumer_group_feed(bootstrap, {}, conf)
        feed = ClusterFeed(consumer)
        events = [e for e in events_from(source, feed) if e["group_id"] == group]
        consumer.topics.close()
        return consumer, events

    consumer, events = feed_events(own)
    followed_consumer, followed_events = feed_events(followed(own))
    outputs = consumer_model_outputs(events, tracker_settings(consumer.config))
    broker = [{**decode_record(k, v), "ts": ts} for k, v, ts in own]
    names = {topic_id: name for name, topic_id in topic_ids(bootstrap, sorted(topics.values())).items()}
    print(
        f"\nKIP-848 regex subscription on Apache Kafka {apache_kafka4.version}: {time.monotonic() - started:.1f} s, "
        f"{len(events)} events, {dict(consumer.counts)}"
    )
    return collections.namedtuple(
        "Run", "group regex topics names facts own broker counts followed_counts events followed_events outputs"
    )(
        group,
        regex,
        topics,
        names,
        facts,
        own,
        broker,
        consumer.counts,
        followed_consumer.counts,
        events,
        followed_events,
        [o for o in outputs if is_consumer_group_record(o)],
    )


def test_every_record_round_trips_byte_exact(run):
    for key, value, _ in run.own:
        assert encode_record(decode_record(key, value)) == (key, value)
    regexes = [r for r in run.broker if r["type"] == REGEX_RECORD and not r.get("tombstone")]
    # resolved when c0 joined, then refreshed once topic b was there
    assert [sorted(r["topics"]) for r in regexes][:1] == [[run.topics["a"]]]
    assert sorted(regexes[-1]["topics"]) == sorted(run.topics.values())


def test_the_feed_explains_every_record_read_whole_or_followed(run):
    records = sum(1 for r in run.broker if is_consumer_group_record(r))
    for counts in (run.counts, run.followed_counts):
        assert counts["unexplained records"] == 0
        assert counts["consumer group records"] == records
    assert run.followed_events == run.events


def test_the_tracker_writes_the_brokers_records(run):
    """Every record the broker wrote for the group, the model wrote (Kafka 4.1+ writes no subscription metadata;
    the regex's image version and time are left out), its resolutions and the regex's tombstone included."""
    broker = collections.Counter(normalise(r) for r in run.broker if is_consumer_group_record(r))
    ours = collections.Counter(
        normalise(o) for o in run.outputs if o["type"] != "consumer_group_partition_metadata" or o.get("tombstone")
    )
    assert ours == broker
    assert any(r[0] == REGEX_RECORD and r[-1] is None for r in broker)  # c0's leave deleted the regex


def test_each_members_assignment_is_what_its_consumer_was_given(run):
    seq = assignments_held(run.outputs, run.names)
    given = assignments_given(run.facts)
    assert seq == given and len(given) == 2
    c0 = owned_now(run.facts)["c0"][0]
    assert {t for t, _ in seq[c0][-1]} == set(run.topics.values())  # the regex's new topic reached c0
