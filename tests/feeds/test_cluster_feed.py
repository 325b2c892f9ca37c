"""The __consumer_offsets cluster feed: records in Kafka's exact format, on a topic of that name on the broker,
become the same rebalance timeline the simulator's own events give."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from offsets_store import encode_record, partition_for
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.feeds.cluster_feed import (
    CAUGHT_UP,
    OBSERVER_SETTINGS,
    ClusterFeed,
    events_from,
    read_offsets_topic,
    summary,
)
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.kafka_client.topics import ensure_topics

START = 1_700_000_000_000


def simulated_history():
    """What a broker would have written to __consumer_offsets for a simulated history, and its timeline."""
    settings = SimulationSettings(
        groups=3, seed=8, churn_interval_ms=8_000, assignors=("range", "cooperative-sticky", "sticky")
    )
    events = Simulator(settings, start_ms=START).run_until(START + 4 * 60_000)
    broker = GroupCoordinator(CoordinatorConfig())
    outputs = [o for e in events for o in broker.handle(e)]
    records = [o for o in outputs if o["type"] in ("offset_commit", "group_metadata")]
    return records, outputs, broker


def timeline(outputs: list[dict]) -> dict[str, list[tuple]]:
    """Per group: each round that reached Stable, its generation and who owned what. (Rounds ending Empty are left
    out: the broker writes no record for rounds that never reached Stable, so an Empty group's generation cannot be
    known from __consumer_offsets.)"""
    out: dict[str, list[tuple]] = {}
    for r in outputs:
        if r["type"] == "rebalance" and r["members"]:
            owners = tuple(sorted((m, tuple(map(tuple, parts))) for m, parts in r["assignment"].items()))
            out.setdefault(r["group_id"], []).append((r["generation"], owners))
    return out


def observe(records_or_pairs, from_bytes: bool) -> tuple[list[dict], GroupCoordinator]:
    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))

    def decoded():
        feed = ClusterFeed()
        for r in records_or_pairs:
            yield from feed.events_for(r)
        yield from feed.flush()

    events = events_from(records_or_pairs) if from_bytes else decoded()
    outputs = []
    for raw in events:
        event, error = parse_event(raw)  # what the job does with every record of the events topic
        assert error is None, error
        outputs += tracker.handle(event)
    return outputs, tracker


def test_cluster_feed_gives_the_same_timeline_as_the_simulated_events():
    records, outputs, broker = simulated_history()
    pairs = [encode_record(r) for r in records]
    seen, tracker = observe(pairs, from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    assert len(timeline(outputs)) == 3 and all(len(t) >= 2 for t in timeline(outputs).values())
    for group_id in broker.group_ids():
        assert tracker.fetch_offsets(group_id) == broker.fetch_offsets(group_id)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), static_fraction=st.sampled_from([0.0, 0.5, 1.0]), churn=st.integers(4_000, 15_000))
# A member joins while the group's only member leaves: the broker's next record holds just the newcomer, and the
# feed must not let the group go Empty in between (it lost that generation).
@example(seed=1022, static_fraction=0.5, churn=8_000)
@example(seed=3549, static_fraction=0.0, churn=5_459)
def test_the_timelines_agree_for_generated_histories(seed, static_fraction, churn):
    settings_ = SimulationSettings(
        groups=3,
        seed=seed,
        churn_interval_ms=churn,
        static_fraction=static_fraction,
        assignors=("range", "cooperative-sticky", "sticky"),
    )
    events = Simulator(settings_, start_ms=START).run_until(START + 4 * 60_000)
    broker = GroupCoordinator(CoordinatorConfig())
    outputs = [o for e in events for o in broker.handle(e)]
    records = [o for o in outputs if o["type"] in ("offset_commit", "group_metadata")]
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    assert all(tracker.fetch_offsets(g) == broker.fetch_offsets(g) for g in broker.group_ids())


def test_unknown_and_undecodable_records_are_skipped():
    feed = ClusterFeed()
    assert feed.events_for_bytes(b"\x00\x03\x00\x01g", b"\x00\x00\x00\x00\x00\x01\x00") == []  # KIP-848: epoch 1
    assert feed.events_for_bytes(b"\x00\x0b\x00\x01g", b"\x00\x00") == []  # a share-group record
    assert feed.undecodable == 0
    assert feed.events_for_bytes(b"\x00\x01\x00", b"junk") == [] and feed.undecodable == 1


@pytest.mark.kafka
def test_cluster_feed_reads_a_consumer_offsets_topic_on_the_broker(kafka_bootstrap, topic_name):
    # The bundled broker has no __consumer_offsets; a real Kafka would refuse our writes to its own. So: a topic
    # laid out exactly like it (50 partitions, partition_for(group), Kafka's bytes) under a test name.
    records, outputs, broker = simulated_history()
    topic = f"{topic_name}-consumer-offsets"
    ensure_topics(kafka_bootstrap, {topic: 50})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=10)
    for r in records:
        key, value = encode_record(r)
        producer.send(topic, key=key, value=value, partition=partition_for(r["group_id"]))
    producer.flush()
    producer.close()
    seen, tracker = observe(read_offsets_topic(kafka_bootstrap, topic), from_bytes=True)
    assert timeline(seen) == timeline(outputs)
    for group_id in broker.group_ids():
        assert tracker.fetch_offsets(group_id) == broker.fetch_offsets(group_id)


# ---------------------------------------------------------------- records as old brokers write them
DAY = 86_400_000


def v0_snapshot(generation: int, members: dict[str, list], leader: str, group: str = "g") -> dict:
    """GroupMetadataValue v0 (Kafka 0.9): no state timestamp, no rebalance timeout."""
    return {
        "type": "group_metadata",
        "group_id": group,
        "tombstone": False,
        "protocol_type": "consumer",
        "generation": generation,
        "protocol": "range",
        "leader": leader,
        "value_version": 0,
        "members": [
            {
                "member_id": m,
                "client_id": m.split("-")[0],
                "client_host": "/127.0.0.1",
                "session_timeout": 6_000,
                "subscription": {"topics": ["t"], "user_data": "", "version": 0},
                "assignment": {"partitions": parts, "user_data": "", "version": 0},
            }
            for m, parts in members.items()
        ],
    }


def v1_commit(partition: int, offset: int, ts: int, group: str = "g") -> dict:
    """OffsetCommitValue v1 (Kafka 0.9): with the expire timestamp the broker computed."""
    return {
        "type": "offset_commit",
        "group_id": group,
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "metadata": "",
        "commit_timestamp": ts,
        "expire_timestamp": ts + DAY,
        "value_version": 1,
    }


def tombstone(group: str = "g") -> dict:
    return {"type": "group_metadata", "group_id": group, "tombstone": True}


def feed_events(records: list[dict]) -> tuple[list[dict], ClusterFeed]:
    feed = ClusterFeed()
    return list(events_from((encode_record(r) for r in records), feed)), feed


def rebalances(outputs: list[dict]) -> list[tuple]:
    return [(r["generation"], r["leader"], r["assignment"]) for r in outputs if r["type"] == "rebalance"]


A, B = "a-0c3f", "b-9e21"


def test_old_snapshots_take_their_time_from_the_groups_nearest_commits():
    records = [
        v0_snapshot(1, {A: [["t", 0], ["t", 1]]}, A),
        v1_commit(0, 5, START + 1_000),
        v1_commit(1, 7, START + 2_000),
        v0_snapshot(2, {A: [["t", 0]], B: [["t", 1]]}, A),
        v1_commit(1, 9, START + 3_000),
        tombstone(),
    ]
    events, feed = feed_events(records)
    by_kind = [(e["type"], e.get("ts"), e.get("ts_inferred")) for e in events if e["type"] != "commit"]
    # The first snapshot has no commit before it: the first after it; later ones: the last before them. The
    # tombstone's leaves: when each member was last seen (a: its generation's record; b: its commit).
    assert by_kind == [
        ("join", START + 1_000, "later commit"),
        ("sync", START + 1_000, "later commit"),
        ("join", START + 2_000, "earlier commit"),
        ("join", START + 2_000, "earlier commit"),
        ("sync", START + 2_000, "earlier commit"),
        ("sync", START + 2_000, "earlier commit"),
        ("leave", START + 2_000, "earlier commit"),
        ("leave", START + 3_000, "earlier commit"),
    ]
    # The tombstone's time is inferred too (its leaves are marked), and counted with the snapshots'.
    assert feed.counts["time from later commit"] == 1 and feed.counts["time from earlier commit"] == 2
    assert any("time inferred for 3 group records" in line for line in summary(feed, len(events), "events"))


def test_a_record_without_a_time_of_its_own_takes_its_log_time_else_its_arrival():
    """Brokers from 0.10 on stamp every record with the time of the write: a tombstone (and a snapshot before v2)
    takes it, not the group's last commit, which may be minutes older (issue #34: a leave dated 3 min 15 s early).
    Kafka 0.9 stamps nothing (-1): a following reader that has caught up knows when it read the record."""
    snapshot, commit = v0_snapshot(1, {A: [["t", 0]]}, A), v1_commit(0, 5, START)
    stamped = [
        (*encode_record(snapshot), START - 10),
        (*encode_record(commit), START),
        (*encode_record(tombstone()), START + 200_000),
    ]
    events = list(events_from(stamped, ClusterFeed()))
    assert [(e["type"], e["ts"], e.get("ts_inferred")) for e in events] == [
        ("join", START - 10, None),
        ("sync", START - 10, None),
        ("commit", START, None),
        ("leave", START + 200_000, None),
    ]
    # 0.9: no log time; the tombstone read live (the reader caught up, then it arrived) is dated by its arrival.
    unstamped = [
        (*encode_record(snapshot), -1),
        (*encode_record(commit), -1),
        CAUGHT_UP,
        (*encode_record(tombstone()), -1, START + 195_000),
    ]
    feed = ClusterFeed()
    events = list(events_from(unstamped, feed))
    assert [(e["type"], e["ts"], e.get("ts_inferred")) for e in events] == [
        ("join", START, "later commit"),
        ("sync", START, "later commit"),
        ("commit", START, None),
        ("leave", START + 195_000, "arrival"),
    ]
    assert any("1 from when the following reader read it" in line for line in summary(feed, len(events), "events"))


def test_a_snapshot_is_the_brokers_answer_for_its_generation():
    events, _ = feed_events([v1_commit(0, 1, START), v0_snapshot(2, {A: [["t", 0]], B: [["t", 1]]}, B)])
    joins = [e for e in events if e["type"] == "join"]
    assert [(e["member_id"], e["generation"], e["leader"]) for e in joins] == [(A, 2, B), (B, 2, B)]
    # v0 has no rebalance timeout: the session timeout, as Kafka's loader says (not -1).
    assert {e["rebalance_timeout_ms"] for e in joins} == {6_000}
    (leader_sync,) = [e for e in events if e["type"] == "sync" and "assignments" in e]
    assert leader_sync["member_id"] == B and leader_sync["assignments"] == {A: [["t", 0]], B: [["t", 1]]}


def test_a_tombstone_after_members_means_they_left_and_the_offsets_stay():
    records = [
        v0_snapshot(1, {A: [["t", 0]], B: [["t", 1]]}, A),
        v1_commit(0, 5, START),
        v1_commit(1, 6, START),
        tombstone(),
    ]
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert sorted(o["member_id"] for o in seen if o["type"] == "member_left") == [A, B]
    assert tracker.describe_group("g")["state"] == "Empty"
    assert tracker.fetch_offsets("g") == {
        ("t", 0): {"offset": 5, "leader_epoch": -1, "metadata": ""},
        ("t", 1): {"offset": 6, "leader_epoch": -1, "metadata": ""},
    }


def test_a_tombstone_after_an_empty_snapshot_deletes_the_group():
    empty = {**v0_snapshot(2, {}, None), "value_version": 3, "current_state_timestamp": START + 10}
    records = [v0_snapshot(1, {A: [["t", 0]]}, A), v1_commit(0, 5, START), empty, tombstone()]
    events, _ = feed_events(records)
    assert [e["type"] for e in events][-2:] == ["leave", "delete_group"]
    _, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert tracker.describe_group("g")["state"] == "Dead" and tracker.fetch_offsets("g") == {}


def test_a_0_9_group_that_comes_back_is_numbered_from_the_start_again():
    # Kafka 0.9 drops a group its last member left; when consumers come back, the new group starts at generation 1.
    records = [
        v0_snapshot(1, {A: [["t", 0], ["t", 1]]}, A),
        v1_commit(0, 5, START),
        tombstone(),
        v1_commit(1, 8, START + 5_000),
        v0_snapshot(1, {B: [["t", 0], ["t", 1]]}, B),
        v1_commit(0, 9, START + 6_000),
    ]
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert rebalances(seen) == [(1, A, {A: [["t", 0], ["t", 1]]}), (2, None, {}), (1, B, {B: [["t", 0], ["t", 1]]})]
    assert {tp: o["offset"] for tp, o in tracker.fetch_offsets("g").items()} == {("t", 0): 9, ("t", 1): 8}


def test_a_group_that_never_committed_has_no_time():
    events, feed = feed_events([v0_snapshot(1, {A: [["t", 0]]}, A)])
    assert events and all("ts" not in e and e["ts_inferred"] == "none" for e in events)
    assert feed.counts["time from none"] == 1


# ---------------------------------------------------------------- records as Kafka 4 writes them (issue #29)
def v3_snapshot(
    generation: int,
    members: dict[str, list],
    leader: str | None,
    at: int,
    session: int = 6_000,
    rebalance: int = 4_000,
    static: dict[str, str] | None = None,
    group: str = "g",
) -> dict:
    """GroupMetadataValue v3: with the state timestamp, rebalance timeouts and group instance ids."""
    return {
        "type": "group_metadata",
        "group_id": group,
        "tombstone": False,
        "protocol_type": "consumer",
        "generation": generation,
        "protocol": "range" if members else None,
        "leader": leader,
        "current_state_timestamp": at,
        "value_version": 3,
        "members": [
            {
                "member_id": m,
                "group_instance_id": (static or {}).get(m),
                "client_id": m.split("-")[0],
                "client_host": "/127.0.0.1",
                "session_timeout": session,
                "rebalance_timeout": rebalance,
                "subscription": {"topics": ["t"], "user_data": "", "version": 0},
                "assignment": {"partitions": parts, "user_data": "", "version": 0},
            }
            for m, parts in members.items()
        ],
    }


def v3_commit(partition: int, offset: int, ts: int, group: str = "g") -> dict:
    return {
        "type": "offset_commit",
        "group_id": group,
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "metadata": "",
        "commit_timestamp": ts,
        "expire_timestamp": -1,
        "value_version": 3,
    }


def departures(seen: list[dict]) -> tuple[list, list]:
    return (
        sorted(o["member_id"] for o in seen if o["type"] == "member_left"),
        sorted((o["member_id"], o["reason"]) for o in seen if o["type"] == "member_expired"),
    )


def test_who_is_gone_from_the_next_generation_left_or_missed_a_timeout():
    """b committed until just before the round and the round was shorter than the rebalance timeout: it left. In
    the next round c (frozen after its last commit) is missing 4.5 s after the previous join, longer than the 4 s
    rebalance timeout, while a committed until it heard of the round: the round's join timeout removed c. Then a was
    silent for its whole session: expired."""
    C = "c-77aa"
    records = [
        v3_snapshot(1, {A: [["t", 0]], B: [["t", 1]]}, A, START),
        v3_commit(1, 3, START + 900),
        v3_snapshot(2, {A: [["t", 0], ["t", 1]]}, A, START + 1_200),
        v3_snapshot(3, {A: [["t", 0]], C: [["t", 1]]}, A, START + 2_000),
        v3_commit(1, 4, START + 2_100),
        v3_commit(0, 4, START + 2_400),
        v3_snapshot(4, {A: [["t", 0], ["t", 1]]}, A, START + 6_500),
    ]
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([B], [(C, "rebalance timeout")])
    records = [
        v3_snapshot(1, {A: [["t", 0]], B: [["t", 1]]}, A, START),
        v3_commit(1, 3, START + 100),
        v3_snapshot(2, {B: [["t", 0], ["t", 1]]}, B, START + 7_000),
    ]
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([], [(A, "session timeout")])


def test_an_idle_member_gone_while_the_others_committed_left():
    """b has had nothing to commit since the last join; the next record comes 5.1 s later, more than the rebalance
    timeout -- but a committed until 0.2 s before it, so the round began at most a heartbeat (a third of a session)
    before that: too short for the join timeout. b left (seen on Apache Kafka 4.4, a member with no partitions)."""
    records = [
        v3_snapshot(1, {A: [["t", 0]], B: []}, A, START),
        v3_commit(0, 3, START + 4_900),
        v3_snapshot(2, {A: [["t", 0]]}, A, START + 5_100),
    ]
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([B], [])


def test_a_member_gone_within_a_session_of_the_last_join_left():
    """b was silent for half its session (no records of its partitions), but the previous generation's join, 3.1 s
    before, restarted every session: no session timeout yet, and the round was too short for its join timeout. It
    left (seen on Apache Kafka 3.9)."""
    records = [
        v3_snapshot(1, {A: [["t", 0]], B: [["t", 1]]}, A, START),
        v3_commit(1, 3, START + 100),
        v3_snapshot(2, {A: [["t", 0]], B: [["t", 1]]}, A, START + 5_000),
        v3_commit(0, 4, START + 7_900),
        v3_snapshot(3, {A: [["t", 0], ["t", 1]]}, A, START + 8_100),
    ]
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([B], [])


def test_a_static_member_restarted_in_its_session_replaces_its_old_id():
    S1, S2 = "s0-01", "s0-02"
    static = {S1: "s0", S2: "s0"}
    records = [
        v3_snapshot(1, {A: [["t", 0]], S1: [["t", 1]]}, A, START, static=static),
        v3_commit(1, 3, START + 50),
        v3_snapshot(1, {A: [["t", 0]], S2: [["t", 1]]}, A, START, static=static),
        v3_commit(1, 4, START + 2_000),
    ]
    events, _ = feed_events(records)
    (join,) = [e for e in events if e["type"] == "join" and e["member_id"] == S2]
    assert join["generation"] == 1 and join["group_instance_id"] == "s0"  # the broker's answer, with its id
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert [(o["previous_member_id"], o["member_id"]) for o in seen if o["type"] == "member_replaced"] == [(S1, S2)]
    assert len(rebalances(seen)) == 1 and set(tracker.groups["g"].members) == {A, S2}


def test_when_the_group_empties_the_static_member_went_last_and_the_others_left():
    """Kafka writes the Empty record only when the last member goes. A static member sends no LeaveGroup and holds
    its place until its session ends: it went last, expired; the dynamic ones, silent as long, had left. Without a
    static member, the one heard from last went last: silent for its session, expired."""
    S1 = "s0-01"
    records = [
        v3_snapshot(3, {A: [["t", 0]], B: [["t", 1]], S1: [["t", 2]]}, A, START, static={S1: "s0"}),
        v3_commit(0, 3, START + 500),
        v3_commit(1, 3, START + 600),
        v3_commit(2, 3, START + 700),
        v3_snapshot(4, {}, None, START + 14_000),
    ]
    seen, tracker = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([A, B], [(S1, "session timeout")]) and tracker.describe_group("g")["state"] == "Empty"
    records = [
        v3_snapshot(3, {A: [["t", 0]], B: [["t", 1]]}, A, START),
        v3_commit(0, 3, START + 500),
        v3_commit(1, 3, START + 2_500),
        v3_snapshot(4, {}, None, START + 9_000),
    ]
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([A], [(B, "session timeout")])
    records[-1] = v3_snapshot(4, {}, None, START + 3_000)  # b's leave emptied the group
    seen, _ = observe([encode_record(r) for r in records], from_bytes=True)
    assert departures(seen) == ([A, B], [])
