"""replay on a cluster feed (issue #34: it printed 0 rebalances for every assignor).

A cluster feed's classic groups carry the broker's answers and no heartbeats; the replay takes them as what happened
to their members (``streaming/views/replay/observed.py``): starts, leaves, a crash where a later record leaves a
member out unannounced, topic sizes from the leaders' assignments. The whole workflow on real brokers is in
``tests/cli/test_track_a_cluster.py``; here, records as Kafka 4 writes them, timed exactly.
"""

from __future__ import annotations

from offsets_store import encode_record
from streaming.coordinator import CoordinatorConfig, parse_event
from streaming.feeds.cluster_feed import ClusterFeed, events_from
from streaming.views.replay import replay_outputs, score
from streaming.views.replay.observed import client_stimuli, observed_groups

T0 = 1_700_000_000_000
A, B, C = "a-1f0c", "b-77e2", "c-09d4"
NO_DELAY = CoordinatorConfig.from_properties({"group.initial.rebalance.delay.ms": "0"})


def snapshot(generation: int, members: dict[str, list], leader: str | None, ts: int, static: bool = False) -> dict:
    """GroupMetadataValue v3, the state timestamp of the round's end (``static``: members with their client id as
    group.instance.id)."""
    return {
        "type": "group_metadata",
        "group_id": "g",
        "tombstone": False,
        "protocol_type": "consumer",
        "generation": generation,
        "protocol": "range",
        "leader": leader,
        "value_version": 3,
        "current_state_timestamp": ts,
        "members": [
            {
                "member_id": m,
                "group_instance_id": m.split("-")[0] if static else None,
                "client_id": m.split("-")[0],
                "client_host": "/127.0.0.1",
                "rebalance_timeout": 10_000,
                "session_timeout": 6_000,
                "subscription": {"topics": ["t"], "user_data": "", "version": 0},
                "assignment": {"partitions": parts, "user_data": "", "version": 0},
            }
            for m, parts in members.items()
        ],
    }


def commit(partition: int, offset: int, ts: int) -> dict:
    return {
        "type": "offset_commit",
        "group_id": "g",
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "metadata": "",
        "commit_timestamp": ts,
        "expire_timestamp": -1,
        "value_version": 1,
    }


def feed() -> list[dict]:
    """a and b start (4 partitions); c joins at 10 s; b is killed at 20 s (its last commit), expired at 26 s by the
    broker; a leaves at 40 s, c at 50 s (the group Empty)."""
    four = [["t", p] for p in range(4)]
    records = [
        snapshot(1, {A: four[:2], B: four[2:]}, A, T0),
        commit(0, 1, T0 + 500),
        commit(2, 1, T0 + 600),
        snapshot(2, {A: four[:2], B: [four[2]], C: [four[3]]}, A, T0 + 10_000),
        commit(2, 5, T0 + 20_000),
        snapshot(3, {A: four[:2], C: four[2:]}, A, T0 + 26_000),
        commit(0, 9, T0 + 39_000),
        snapshot(4, {C: four}, C, T0 + 40_000),
        snapshot(5, {}, None, T0 + 50_000),
    ]
    raw = list(events_from((encode_record(r) for r in records), ClusterFeed()))
    return [parse_event(e)[0] for e in raw]


def test_a_cluster_feed_group_is_taken_for_what_happened_to_its_members():
    events = feed()
    assert observed_groups(events) == {"g"}
    stimuli = client_stimuli(events, {"g"})
    starts = [(e["member_id"], e["ts"] - T0) for e in stimuli if e["type"] == "join"]
    assert starts == [(A, 0), (B, 0), (C, 10_000)]  # the broker's later rounds are its own, not stimuli
    assert [(e["topic"], e["partitions"]) for e in stimuli if e["type"] == "topic_metadata"] == [("t", 4)]
    beats = {
        m: max(e["ts"] - T0 for e in stimuli if e["type"] == "heartbeat" and e["member_id"] == m) for m in (A, B, C)
    }
    # b's last sign of life is its last commit (20 s): it crashed there; a and c heartbeat until they leave.
    assert beats[B] <= 20_000 < beats[B] + 2_000 and 38_000 <= beats[A] <= 40_000 and 48_000 <= beats[C] <= 50_000


def test_replay_of_a_cluster_feed_rebalances_and_expires_the_crashed_member():
    outputs = replay_outputs(feed(), "range", NO_DELAY)
    s = score("range", outputs)
    # the start, c's join, b's expiry, a's leave, c's leave (Empty): as the broker did
    assert (s.rebalances, s.members_expired) == (5, 1)
    expired = [o for o in outputs if o["type"] == "member_expired"]
    assert len(expired) == 1 and T0 + 25_000 <= expired[0]["ts"] <= T0 + 27_000
    final = [o for o in outputs if o["type"] == "rebalance"][-1]
    assert final["members"] == [] and final["trigger"] == "leave"


def test_static_members_of_a_cluster_feed_are_mapped_too():
    """A static member's first join is in at once (no member id round trip): its broker id maps to the replay's all
    the same, so its heartbeats keep it and its group's later rounds include it."""
    four = [["t", p] for p in range(4)]
    records = [
        snapshot(1, {A: four[:2], B: four[2:]}, A, T0, static=True),
        commit(0, 1, T0 + 500),
        snapshot(2, {A: four}, A, T0 + 30_000, static=True),
        commit(0, 2, T0 + 29_000),
        snapshot(3, {}, None, T0 + 60_000, static=True),
    ]
    events = [parse_event(e)[0] for e in events_from((encode_record(r) for r in records), ClusterFeed())]
    outputs = replay_outputs(events, "range", NO_DELAY)
    rebalances = [o for o in outputs if o["type"] == "rebalance"]
    assert len(rebalances) >= 2 and len(rebalances[0]["members"]) == 2
    answers = {o.get("error") for o in outputs if o["type"] in ("heartbeat_response", "leave_response")}
    assert answers <= {"NONE", "REBALANCE_IN_PROGRESS"}  # a's requests are a known member's, under the replay's id
    assert [o["type"] for o in outputs if o["type"] in ("member_left", "member_expired")] == [
        "member_expired",
        "member_left",
    ]  # b, silent since it started; a, at the group's end
