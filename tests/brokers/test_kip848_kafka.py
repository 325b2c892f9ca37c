"""A KIP-848 consumer group on Apache Kafka 4.x (fixture ``apache_kafka4``) with confluent-kafka consumers speaking
the consumer protocol (``group.protocol=consumer``), each in its own process (``tests/confluent_consumer.py``), and the
cluster feed reading the broker's own ``__consumer_offsets``.

The history: c0 and c1 start; c2 is added; c1 closes (a leave); s0, a static member, is added; c0 is killed (its
session runs out); s0 restarts within its session (a static leave, epoch -2, then its new member id takes its place
and partitions); c2 adds a second topic to its subscription; that topic grows from 3 to 5 partitions; s0 closes and
stays away past its session (the broker fences it, and c2 takes its partitions), then comes back as a new member;
c2 closes, then s0 (a static leave). Each step waits until the running consumers' rebalance callbacks cover every
subscribed partition exactly once. The group's sessions are 5 s (group config ``consumer.session.timeout.ms``).

The group is set to compute target assignments in the heartbeat that needs them (group configs
``consumer.assignment.interval.ms=0``, ``consumer.assignor.offload.enable=false``), as Kafka up to 4.2 always did:
with Kafka 4.3+'s defaults the broker computes them later, at most once a second, on another thread, and writes them
in batches of their own, which the model (Kafka 4.0's GroupMetadataManager) does not write. The model starts new
groups at epoch 1 as 4.3+ does (``initial.group.epoch=1``), and the feed takes the topics from the cluster (4.1+
writes no ConsumerGroupPartitionMetadata). docs/kip848.md says what this checks and what it does not.
"""

from __future__ import annotations

import base64
import collections
import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from offsets_store import decode_record, encode_record
from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.feeds.cluster_feed import ClusterFeed, events_from, read_offsets_topic
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed, is_consumer_group_record
from tests.broker_history import ROOT, wait_until
from tests.kafka4_history import committed_on
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group(OWN_PROCESSES)]

MODEL = {**CONSUMER_OBSERVER_SETTINGS, "initial.group.epoch": 1}
SYNCHRONOUS_TARGETS = {"consumer.assignment.interval.ms": "0", "consumer.assignor.offload.enable": "false"}
SIZES = {"a": 7, "b": 3}  # 7: members with an extra partition (where Kafka 4.0 and 4.1+ assign differently)
GROWN = {"b": 5}  # the second topic, grown during the history
# Sessions of 5 s (the broker's 10 s, for this group only): c0's crash and s0's stay away end sooner
SESSION = {"consumer.session.timeout.ms": "5000"}


class History:
    """The consumers of one group, and what each was given (its truth lines: tests/confluent_consumer.py)."""

    def __init__(self, bootstrap: str, group: str, topics: dict[str, str], workdir: Path) -> None:
        self.bootstrap, self.group, self.topics, self.workdir = bootstrap, group, topics, workdir
        self.truth_path = workdir / "truth.jsonl"
        self.truth_path.touch()
        self.processes: dict[str, subprocess.Popen] = {}
        self.subscriptions: dict[str, list[str]] = {}
        self.sizes = {topics[k]: n for k, n in SIZES.items() if k in topics}  # topic -> partitions, as it grows

    def facts(self) -> list[dict]:
        return [json.loads(line) for line in self.truth_path.read_text().splitlines() if line.strip()]

    def start(self, name: str, **settings) -> None:
        config = {
            "bootstrap": self.bootstrap,
            "group": self.group,
            "topics": [self.topics["a"]],
            "name": name,
            "truth": str(self.truth_path),
            "resubscribe": sorted(self.topics.values()),
            **settings,
        }
        log = open(self.workdir / f"{name}.log", "ab")
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.confluent_consumer", json.dumps(config)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.subscriptions[name] = config["topics"]

    def close(self, name: str) -> None:
        proc = self.processes.pop(name)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    def kill(self, name: str) -> None:
        proc = self.processes.pop(name)
        proc.kill()
        proc.wait(10)

    def resubscribe(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGUSR1)
        self.subscriptions[name] = sorted(self.topics.values())

    def stop_all(self) -> None:
        for name in list(self.processes):
            try:
                self.close(name)
            except subprocess.TimeoutExpired:
                self.kill(name)

    def settled(self, step: str, timeout_s: float = 45) -> None:
        """Until every running consumer's latest member id holds (by its callbacks) a share of the subscribed
        partitions, each partition held exactly once."""

        def done():
            owned = owned_now(self.facts())
            running = {n: owned.get(n, (None, set()))[1] for n in self.processes}
            wanted = {(t, p) for n in self.processes for t in self.subscriptions[n] for p in range(self.sizes[t])}
            held = [tp for parts in running.values() for tp in parts]
            # every consumer has a share (there are always more partitions than consumers here): one that has not
            # joined yet leaves the others holding everything
            return all(running.values()) and len(held) == len(set(held)) and set(held) == wanted

        wait_until(done, timeout_s, f"the group to settle after: {step}", every_s=0.2)


class TopicsAsOf:
    """The cluster's topics (name -> topic id, partitions) as a feed following the log while it was written would
    have found them (``broker_topics.BrokerTopics``: asked again when a batch it cannot explain is newer than its
    last answer): the sizes before ``grown_at_ms`` (wall clock, when the topic was grown: the broker's record times
    are the same machine's clock) until a batch at or after it needs asking again."""

    def __init__(self, ids: dict[str, str], before: dict[str, int], grown_at_ms: int, after: dict[str, int]) -> None:
        self.ids, self.before, self.grown_at_ms, self.after = ids, before, grown_at_ms, after
        self.asked_ms = 0

    def sizes(self) -> dict[str, int]:
        return {**self.before, **self.after} if self.asked_ms >= self.grown_at_ms else dict(self.before)

    def __call__(self, name: str) -> tuple[str, int] | None:
        return (self.ids[name], self.sizes()[name]) if name in self.ids else None

    def refresh(self, since_ms: int | None = None) -> bool:
        if since_ms is None or since_ms <= self.asked_ms:
            return False
        was, self.asked_ms = self.sizes(), since_ms
        return self.sizes() != was


def consumer_model_outputs(events: list[dict], settings: dict[str, str]) -> list[dict]:
    """The consumer model's outputs for a feed's events, with the settings ``cluster-feed`` printed for ``run``."""
    from streaming.coordinator import parse_event
    from streaming.coordinator.consumer import ConsumerGroupCoordinator
    from streaming.coordinator.routing import Configs

    tracker = ConsumerGroupCoordinator(Configs.from_properties(settings).consumer)
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += tracker.handle(event)
    return outputs


def owned_now(facts: list[dict]) -> dict[str, tuple[str, set]]:
    """client -> (its latest member id, the partitions its callbacks have given it and not taken back)."""
    out: dict[str, tuple[str, set]] = {}
    for f in facts:
        if f["fact"] not in ("assign", "revoke", "lost"):
            continue
        member, parts = out.get(f["client"], (f["member_id"], set()))
        if member != f["member_id"]:
            member, parts = f["member_id"], set()
        change = {tuple(tp) for tp in f["partitions"]}
        out[f["client"]] = (member, parts | change if f["fact"] == "assign" else parts - change)
    return out


def assignments_given(facts: list[dict]) -> dict[str, list[frozenset]]:
    """member id -> the assignments its consumer held, in order: after each callback, repeats and the empty start
    dropped, and the empty end of a close (the group's records end with the member's removal instead)."""
    seq: dict[str, list[frozenset]] = collections.defaultdict(list)
    held: dict[str, set] = collections.defaultdict(set)
    for f in facts:
        if f["fact"] not in ("assign", "revoke", "lost"):
            continue
        m, change = f["member_id"], {tuple(tp) for tp in f["partitions"]}
        held[m] = held[m] | change if f["fact"] == "assign" else held[m] - change
        if held[m] and (not seq[m] or seq[m][-1] != held[m]):
            seq[m].append(frozenset(held[m]))
    return dict(seq)


def assignments_held(records: list[dict], names: dict[str, str]) -> dict[str, list[frozenset]]:
    """member id -> the assignments its current-assignment records gave it, in order (``names``: topic id -> name),
    as ``assignments_given`` reads the consumers': repeats and empty ones dropped, and the removal's tombstone."""
    seq: dict[str, list[frozenset]] = collections.defaultdict(list)
    for r in records:
        if r["type"] != "consumer_group_current_member_assignment" or r.get("tombstone") or r["memberEpoch"] < 0:
            continue
        held = frozenset((names[t["topicId"]], p) for t in r["assignedPartitions"] for p in t["partitions"])
        if held and (not seq[r["member_id"]] or seq[r["member_id"]][-1] != held):
            seq[r["member_id"]].append(held)
    return dict(seq)


def assignments_told(outputs: list[dict]) -> dict[str, list[frozenset]]:
    """member id -> the assignments the tracker's ``assignment`` outputs gave it, in order, read as
    ``assignments_given`` reads the consumers': repeats and empty ones dropped."""
    seq: dict[str, list[frozenset]] = collections.defaultdict(list)
    for o in outputs:
        if o["type"] != "assignment":
            continue
        held = frozenset((t, p) for t, p in o["partitions"])
        if held and (not seq[o["member_id"]] or seq[o["member_id"]][-1] != held):
            seq[o["member_id"]].append(held)
    return dict(seq)


def committed_by_truth(facts: list[dict]) -> dict[tuple[str, int], int]:
    out = {}
    for f in sorted((f for f in facts if f["fact"] == "committed"), key=lambda f: f["ts"]):
        for topic, partition, offset in f["offsets"]:
            out[(topic, partition)] = offset
    return out


def topic_ids(bootstrap: str, names: list[str]) -> dict[str, str]:
    """The cluster's topic ids (a Metadata request), as Kafka prints them."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    def kafkas(uuid_) -> str:  # str() of confluent-kafka's Uuid is standard base64; Kafka's is URL-safe
        raw = b"".join(
            (bits % 2**64).to_bytes(8, "big")
            for bits in (uuid_.get_most_significant_bits(), uuid_.get_least_significant_bits())
        )
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_topics(TopicCollection(names))
    return {name: kafkas(future.result(20).topic_id) for name, future in described.items()}


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values():
        future.result(20)


def grow(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until answered: its futures die with it
    for future in admin.create_partitions([NewPartitions(topic, partitions)]).values():
        future.result(20)


def one_topic_history(kafka, name: str, workdirs, partitions: int, per_partition: int) -> History:
    """A History of a new group ``<name>-<suffix>`` on a new topic ``<name>-a-<suffix>`` (``history.topics["a"]``) of
    ``partitions``, each given ``per_partition`` messages; its workdir from pytest's ``tmp_path_factory``."""
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"{name}-{suffix}", f"{name}-a-{suffix}"
    kafka.create_topics({topic: partitions})
    produce(kafka.bootstrap, topic, partitions, per_partition)
    history = History(kafka.bootstrap, group, {"a": topic}, workdirs.mktemp(name))
    history.sizes = {topic: partitions}
    return history


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, str(i).encode(), partition=p)
    producer.flush(20)


@pytest.fixture(scope="module")
def run(apache_kafka4, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    bootstrap, suffix = apache_kafka4.bootstrap, uuid.uuid4().hex[:8]
    group, topics = f"k848-{suffix}", {"a": f"k848-a-{suffix}", "b": f"k848-b-{suffix}"}
    apache_kafka4.create_topics({topics["a"]: SIZES["a"], topics["b"]: SIZES["b"]})
    set_group_configs(bootstrap, group, {**SYNCHRONOUS_TARGETS, **SESSION})
    for key, name in topics.items():
        produce(bootstrap, name, SIZES[key], 50)
    history = History(bootstrap, group, topics, tmp_path_factory.mktemp("k848"))
    try:
        history.start("c0")
        history.start("c1")
        history.settled("c0 and c1 started")
        history.start("c2")
        history.settled("c2 added")
        history.close("c1")
        history.settled("c1 closed")
        history.start("s0", group_instance_id="s0")
        history.settled("s0 added (static)")
        history.kill("c0")
        history.settled("c0 killed: its session ran out")
        history.close("s0")  # a static member's close: epoch -2, it keeps its place for its session
        history.start("s0", group_instance_id="s0")
        history.settled("s0 restarted within its session")
        history.resubscribe("c2")
        history.settled("c2 subscribed to a second topic")
        grown_at = int(time.time() * 1000)
        grow(bootstrap, topics["b"], GROWN["b"])
        produce(bootstrap, topics["b"], GROWN["b"], 20)  # records in the new partitions too: commits there
        history.sizes[topics["b"]] = GROWN["b"]
        history.settled(f"the second topic grew to {GROWN['b']} partitions")
        time.sleep(1)  # a commit or two at the new assignment
        history.close("s0")  # its partitions stay its own until its session runs out ...
        history.settled("s0's session ran out: c2 holds everything")
        history.start("s0", group_instance_id="s0")  # ... then it is a new member
        history.settled("s0 restarted after its session")
        history.close("c2")
        history.settled("c2 closed")
        history.close("s0")
    finally:
        history.stop_all()
    facts = history.facts()
    last_s0 = owned_now(facts)["s0"][0]

    def written():  # until the broker has written s0's static leave (its last record here)
        pairs = list(read_offsets_topic(bootstrap, timestamps=True))
        return (
            pairs
            if any(
                r.get("group_id") == group
                and r["type"] == "consumer_group_current_member_assignment"
                and r.get("member_id") == last_s0
                and r.get("memberEpoch") == -2
                for r in (decode_record(k, v) for k, v, _ in pairs)
            )
            else None
        )

    pairs = wait_until(written, 30, "s0's static leave in __consumer_offsets", every_s=0.5)
    ids = topic_ids(bootstrap, list(topics.values()))
    # Beside the truth file, for a look after a failure: the group, its topics and __consumer_offsets (hex).
    (history.workdir / "consumer_offsets.json").write_text(
        json.dumps(
            {
                "group": group,
                "topics": ids,
                "sizes": {topics[k]: n for k, n in SIZES.items()},
                "grown": [grown_at, {topics[k]: n for k, n in GROWN.items()}],
                "pairs": [[k.hex(), None if v is None else v.hex(), ts] for k, v, ts in pairs],
            }
        )
    )
    config = ConsumerGroupConfig.from_properties(MODEL)
    cluster = TopicsAsOf(
        ids, {topics[k]: n for k, n in SIZES.items()}, grown_at, {topics[k]: n for k, n in GROWN.items()}
    )
    feed = ClusterFeed(ConsumerGroupFeed(config, topics=cluster))
    # this group's records only: other tests' groups on the session's broker are not this feed's to explain
    own = [(k, v, ts) for k, v, ts in pairs if decode_record(k, v).get("group_id") == group]
    events = [e for e in events_from(own, feed) if e["group_id"] == group]
    tracker = ConsumerGroupCoordinator(config)
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        outputs += tracker.handle(event)
    broker = [{**decode_record(k, v), "ts": ts} for k, v, ts in pairs]
    print(
        f"\nKIP-848 history on Apache Kafka {apache_kafka4.version}: {time.monotonic() - started:.1f} s, "
        f"{len(events)} feed events, {dict(feed.consumer.counts)}"
    )
    return SimpleNamespace(
        group=group,
        topics=topics,
        ids=ids,
        facts=facts,
        pairs=pairs,
        feed=feed,
        events=events,
        outputs=outputs,
        tracker=tracker,
        broker=[r for r in broker if r.get("group_id") == group],
        committed=committed_on(bootstrap, group, topics["a"], SIZES["a"])
        | committed_on(bootstrap, group, topics["b"], GROWN["b"]),
    )


def _ours(run) -> list[dict]:
    """The consumer-group records the tracker wrote, fed the cluster feed's events."""
    return [o for o in run.outputs if is_consumer_group_record(o)]


def test_every_record_the_broker_wrote_round_trips_byte_exact(run):
    kinds = collections.Counter()
    for key, value, _ in run.pairs:
        record = decode_record(key, value)
        assert encode_record(record) == (key, value), record
        if record.get("group_id") == run.group:
            kinds[record["type"]] += 1
    assert {
        "consumer_group_metadata",
        "consumer_group_member_metadata",
        "consumer_group_target_assignment_member",
        "consumer_group_target_assignment_metadata",
        "consumer_group_current_member_assignment",
        "offset_commit",
    } <= set(kinds)
    commits = [r for r in run.broker if r["type"] == "offset_commit"]
    # Kafka 4.1+: OffsetCommitValue v4, with the topic id librdkafka named the topic by
    assert {(r["value_version"], r.get("topic_id")) for r in commits} <= {
        (4, run.ids[run.topics["a"]]),
        (4, run.ids[run.topics["b"]]),
    }


def test_the_feed_explains_every_record_and_commit(run):
    counts = run.feed.consumer.counts
    assert counts["unexplained records"] == 0
    assert counts["consumer group records"] == sum(1 for r in run.broker if is_consumer_group_record(r))
    assert counts["commits the model refuses"] == 0 and counts["commits by the partition's owner"] > 0


def test_group_epochs_and_targets_are_the_brokers(run):
    def epochs(records):
        return [r["epoch"] for r in records if r["type"] == "consumer_group_metadata" and not r.get("tombstone")]

    def targets(records):
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

    assert epochs(_ours(run)) == epochs(run.broker)
    assert epochs(run.broker)[0] == 2  # Kafka 4.3+: a new group is at epoch 1, its first member makes it 2
    assert targets(_ours(run)) == targets(run.broker)


def test_each_members_assignment_is_what_its_consumer_was_given(run):
    given = assignments_given(run.facts)
    assert assignments_held(_ours(run), {v: k for k, v in run.ids.items()}) == given
    assert len(given) == 6  # c0, c1, c2, and s0's three member ids


def test_leaves_expiries_and_static_restarts(run):
    """c1 and c2 left; c0's removal (killed: its session ran out) writes the records a leave writes, so the feed
    reports it as a leave at the broker's time; s0's first member id left temporarily and was replaced by its
    second, which left temporarily too and stayed away past its session: the broker fenced it (Kafka's session
    timer), which the feed tells as a session expiry -- a member at epoch -2 has gone and sends nothing more, so its
    removal is the broker's doing -- and s0's third id joined as a new member, which left temporarily at the end."""
    ids = {c: [] for c in ("c0", "c1", "c2", "s0")}
    for f in run.facts:
        if f["fact"] in ("assign", "revoke") and f["member_id"] not in ids[f["client"]]:
            ids[f["client"]].append(f["member_id"])
    assert len(ids["s0"]) == 3
    left = {(o["member_id"], o["temporary"]) for o in run.outputs if o["type"] == "member_left"}
    assert left == {
        (ids["c0"][0], False),
        (ids["c1"][0], False),
        (ids["c2"][0], False),
        (ids["s0"][0], True),
        (ids["s0"][1], True),
        (ids["s0"][2], True),
    }
    replaced = [(o["previous_member_id"], o["member_id"]) for o in run.outputs if o["type"] == "member_replaced"]
    assert replaced == [(ids["s0"][0], ids["s0"][1])]

    def removed(member_id: str) -> int:
        return next(
            r["ts"]
            for r in run.broker
            if r["type"] == "consumer_group_member_metadata" and r.get("tombstone") and r["member_id"] == member_id
        )

    assert next(o["ts"] for o in run.outputs if o["type"] == "member_left" and o["member_id"] == ids["c0"][0]) == (
        removed(ids["c0"][0])
    )
    expired = [(o["member_id"], o["reason"], o["ts"]) for o in run.outputs if o["type"] == "member_expired"]
    assert expired == [(ids["s0"][1], "session timeout", removed(ids["s0"][1]))]
    # the broker's timer: a session after its last heartbeat (the -2 does not renew it), which came about a
    # heartbeat interval (1 s) or less before the -2 (twice that allowed for a loaded machine)
    went = next(
        r["ts"]
        for r in run.broker
        if r["type"] == "consumer_group_current_member_assignment"
        and r.get("member_id") == ids["s0"][1]
        and r.get("memberEpoch") == -2
    )
    session = int(SESSION["consumer.session.timeout.ms"])
    assert session - 2000 <= removed(ids["s0"][1]) - went <= session + 1000
    # ... after which s0 came back as a new member (epoch 0: no static member to replace)
    assert not any(o["type"] == "member_replaced" and o["member_id"] == ids["s0"][2] for o in run.outputs)


def test_final_offsets_are_the_brokers(run):
    tracked = {tp: o["offset"] for tp, o in run.tracker.fetch_offsets(run.group).items()}
    assert tracked == committed_by_truth(run.facts) == run.committed
    assert {t for t, _ in tracked} == set(run.topics.values())
    assert {(run.topics["b"], p) for p in range(SIZES["b"], GROWN["b"])} <= set(tracked)  # the grown partitions
