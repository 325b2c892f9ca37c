"""Replay under the server-side (KIP-848) assignors: one recorded classic feed, replayed under the consumer protocol
with server:uniform and server:range, scored in the same columns as the client-side assignors."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from streaming.views import replay
from streaming.views.history import build_histories, build_history, coordinator_outputs
from tests.views.test_replay import _feed, _write

SIDE_BY_SIDE = ("range", "sticky", "cooperative-sticky", "server:uniform", "server:range")


@lru_cache(maxsize=None)
def _scores(seed: int) -> dict[str, replay.Score]:
    return {s.assignor: s for s in replay.compare(list(_feed(seed)), SIDE_BY_SIDE)}


def test_cli_compares_server_and_client_side_assignors_side_by_side(tmp_path, capsys):
    feed = _write(tmp_path, _feed(1))
    assert replay.main(["--feed", feed, "--assignor", ",".join(SIDE_BY_SIDE)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(SIDE_BY_SIDE)
    n = len(SIDE_BY_SIDE)
    rows = {line.rsplit(None, n)[0].strip(): line.rsplit(None, n)[1:] for line in lines[2:]}
    scores = _scores(1)
    for label, attr in replay.Score.ROWS:
        assert rows[label] == [str(getattr(scores[a], attr)) for a in SIDE_BY_SIDE]


def test_server_side_names_need_their_prefix(tmp_path, capsys):
    feed = _write(tmp_path, _feed(1))
    assert replay.main(["--feed", feed, "--assignor", "range,uniform"]) == 2
    assert "name it server:uniform" in capsys.readouterr().err
    assert replay.main(["--feed", feed, "--assignor", "server:nope"]) == 2
    assert "unknown server-side assignor" in capsys.readouterr().err
    # Kafka's class names are accepted after the prefix too.
    assert (
        replay.main(
            [
                "--feed",
                feed,
                "--assignor",
                "server:org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                "--json",
            ]
        )
        == 0
    )
    (data,) = json.loads(capsys.readouterr().out)
    assert data["partitions_moved"] == _scores(1)["server:uniform"].partitions_moved


@pytest.mark.parametrize("seed", [1, 2])
def test_uniform_is_balanced_and_moves_less_than_eager_range(seed):
    scores = _scores(seed)
    uniform, server_range, eager = scores["server:uniform"], scores["server:range"], scores["range"]
    assert uniform.worst_balance <= 1 and uniform.final_balance <= 1
    assert uniform.partitions_moved < eager.partitions_moved
    assert uniform.partitions_moved < server_range.partitions_moved
    # Nothing stops the world: a partition waits only between its release and its next owner's heartbeat.
    assert uniform.unavailable_partition_s < eager.unavailable_partition_s
    assert server_range.unavailable_partition_s < eager.unavailable_partition_s
    # The same crashes kill members under both protocols (each group's session timeout is its members' join session
    # timeout). Not exactly the same count: a classic session runs from the end of a join round, not from the
    # member's SyncGroup (Kafka's rule), and a replayed member is silent wherever its recorded self was busy in a
    # rebalance the replay does not have -- a round's worth of silence can outlast the session.
    assert uniform.members_expired == server_range.members_expired
    assert abs(uniform.members_expired - eager.members_expired) <= 0.1 * eager.members_expired
    # A rebalance counts the same for both protocols (docs/figures.md): from its start to the group settled again.
    # Epoch bumps while the group reconciles extend the rebalance in progress, as a join round takes in the changes
    # that arrive while it runs, so both replays see about as many.
    assert abs(uniform.rebalances - eager.rebalances) <= 0.1 * eager.rebalances


def test_the_replayed_consumer_groups_are_healthy():
    feed = list(_feed(1))
    recorded, _ = coordinator_outputs(feed)
    outputs = replay.replay_outputs(feed, "server:uniform")
    answers = [o for o in outputs if o["type"] == "consumer_heartbeat_response"]
    assert answers and {o["error"] for o in answers} == {"NONE"}
    assert sorted(o["member_id"] for o in outputs if o["type"] == "member_expired") == sorted(
        o["member_id"] for o in recorded if o["type"] == "member_expired"
    )
    assert {o["assignor"] for o in outputs if o["type"] == "target_assignment"} == {"uniform"}
    growth = [(e["ts"], e["topic"], e["partitions"]) for e in feed if e["type"] == "topic_metadata"]

    def sizes_at(ts: int) -> dict[str, int]:
        return {topic: n for t, topic, n in growth if t <= ts}

    for group_id, h in build_histories(outputs).items():
        assert h.is_consumer
        # Every target hands out every partition of the subscribed topics exactly once.
        for t in h.targets:
            if not t.target:
                continue
            parts = [tp for ps in t.target.values() for tp in ps]
            topics, sizes = {tp[0] for tp in parts}, sizes_at(t.ts)
            assert len(parts) == len(set(parts)) == sum(sizes[x] for x in topics), (group_id, t.epoch)
        # Clients acknowledge a revocation REACTION_MS after being asked.
        latencies = {r.latency_ms for r in h.revocations if r.latency_ms is not None}
        assert latencies == {replay.REACTION_MS}
        assert h.targets[-1].reconciled_ts is not None or h.state != "Stable"


def test_a_crash_expires_after_the_joins_session_timeout():
    """A recorded classic feed: a and b join (6 s sessions) and heartbeat every 2 s; a stops after 4 s."""
    t0 = 1_700_000_000_000

    def join(ts, m):
        return {
            "type": "join",
            "group_id": "g",
            "ts": t0 + ts,
            "member_id": m,
            "client_id": m,
            "session_timeout_ms": 6_000,
            "rebalance_timeout_ms": 20_000,
            "protocols": [{"name": "range", "topics": ["t"]}],
        }

    def heartbeat(ts, m):
        return {"type": "heartbeat", "group_id": "g", "ts": t0 + ts, "member_id": m, "generation": 1}

    feed = [{"type": "topic_metadata", "topic": "t", "partitions": 4, "ts": t0}, join(0, "a"), join(100, "b")]
    feed += [heartbeat(ts, "a") for ts in (2_000, 4_000)] + [heartbeat(ts, "b") for ts in range(2_000, 20_001, 2_000)]
    from streaming.coordinator import parse_event

    outputs = replay.replay_outputs([parse_event(e)[0] for e in feed], "server:range")
    (expired,) = [o for o in outputs if o["type"] == "member_expired"]
    assert (expired["member_id"], expired["ts"] - t0, expired["last_heartbeat_ts"] - t0) == ("a", 10_000, 4_000)
    h = build_history(outputs, "g")
    assert [(t.epoch, t.trigger) for t in h.targets] == [(1, "join"), (2, "join"), (3, "expiry")]
    assert h.targets[-1].target == {"b": [("t", 0), ("t", 1), ("t", 2), ("t", 3)]}
    # b learns of a's partitions at its next heartbeat (12 s) after a was fenced (10 s).
    assert [(u.partition, u.from_ts - t0, u.to_ts - t0) for u in h.unowned if u.from_ts - t0 >= 10_000] == [
        (("t", 0), 10_000, 12_000),
        (("t", 1), 10_000, 12_000),
    ]
    assert h.state == "Stable"


def test_server_replay_is_deterministic():
    feed = list(_feed(2))
    assert replay.replay_outputs(feed, "server:uniform") == replay.replay_outputs(feed, "server:uniform")
