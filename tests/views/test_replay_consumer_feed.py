"""What-if replay of feeds recorded from consumer-protocol (KIP-848) groups: the members' stimuli (joins, heartbeats,
subscription changes, leaves) replayed under every assignor -- the server-side ones through the consumer model, the
client-side ones through the classic coordinator -- and scored in the same columns."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.views import replay
from streaming.views.history import build_histories, build_history, coordinator_outputs
from tests.views.test_replay import _feed as _classic_feed, _write

START = 1_700_000_000_000
ALL = ("range", "roundrobin", "sticky", "cooperative-sticky", "server:uniform", "server:range")
EAGER = ("range", "roundrobin", "sticky")


def _settings(seed: int, protocol: str = "consumer") -> SimulationSettings:
    """Ten minutes of two groups of four (four groups when mixed), disrupted every ~10 s: crashes, leaves, static
    restarts (-2 and back), scale-out, subscription changes, topic growth. The consumer groups ask for uniform."""
    return SimulationSettings(
        groups=2 if protocol == "consumer" else 4,
        members_per_group=4,
        partitions_per_topic=8,
        seed=seed,
        churn_interval_ms=10_000,
        group_protocol=protocol,
        server_assignors=("uniform",),
    )


@lru_cache(maxsize=None)
def _feed(seed: int, protocol: str = "consumer") -> tuple[dict, ...]:
    return tuple(Simulator(_settings(seed, protocol), start_ms=START).run_until(START + 600_000))


@lru_cache(maxsize=None)
def _outputs(seed: int, assignor: str, protocol: str = "consumer") -> tuple[dict, ...]:
    return tuple(replay.replay_outputs(list(_feed(seed, protocol)), assignor))


def _scores(seed: int) -> dict[str, replay.Score]:
    return {a: replay.score(a, list(_outputs(seed, a))) for a in ALL}


def test_every_group_is_replayed_under_every_assignor():
    for a in ALL:
        histories = build_histories(_outputs(1, a))
        assert sorted(histories) == ["group-0", "group-1"], a
        # Server-side assignors replay the groups under their own protocol, client-side ones under the classic one.
        assert {h.is_consumer for h in histories.values()} == {replay.is_server_assignor(a)}, a
        if replay.is_server_assignor(a):
            assert all(h.targets for h in histories.values())
        else:
            assert all(len(h.generations) >= 10 for h in histories.values())
    assert all(s.rebalances > 0 and s.partitions_moved > 0 for s in _scores(1).values())


@pytest.mark.parametrize("seed", [1, 2])
def test_under_the_recorded_assignor_the_replay_is_what_the_broker_did(seed):
    """The feed's groups used uniform: replayed under server:uniform, every group goes through the same target
    assignments, epoch for epoch, and loses the same members. Only the clients' reaction time differs (5 ms here;
    the recorded clients took 1 ms to take new partitions and 10-300 ms to revoke), hence when partitions reach
    their next owner: a few more or fewer transient moves, slightly different owner-less time, and the expiry of a
    member whose last request before closing (-2) acknowledged an assignment moves by that difference."""
    settings = _settings(seed)
    recorded, _ = coordinator_outputs(_feed(seed), None, settings.consumer_config())
    replayed = list(_outputs(seed, "server:uniform"))
    assert {o["error"] for o in replayed if o["type"] == "consumer_heartbeat_response"} == {"NONE"}
    before, after = build_histories(recorded), build_histories(replayed)
    assert sorted(before) == sorted(after) == ["group-0", "group-1"]
    for group_id in before:
        assert [(t.epoch, t.trigger) for t in after[group_id].targets] == [
            (t.epoch, t.trigger) for t in before[group_id].targets
        ], group_id
        # The assignor sees the members in Kafka's member-table order, which follows when each joined: a static
        # member that restarts before a target computation in the replay and after it in the recording (the
        # clients' timing) sits elsewhere in that order, and the target may break a tie otherwise.
        differ = [t.epoch for t, r in zip(after[group_id].targets, before[group_id].targets) if t.target != r.target]
        assert len(differ) <= 0.02 * len(before[group_id].targets), (group_id, differ)

    def departures(outputs):
        return [
            (o["type"], o["member_id"], o["ts"])
            for o in outputs
            if o["type"] in ("member_expired", "member_left", "member_replaced")
        ]

    gone, replayed_gone = departures(recorded), departures(replayed)
    assert [d[:2] for d in replayed_gone] == [d[:2] for d in gone] and len(gone) > 50
    assert max(abs(a[2] - b[2]) for a, b in zip(gone, replayed_gone)) < settings.revocation_delay_ms

    was, now = replay.score("recorded", recorded), replay.score("server:uniform", replayed)
    for attr in ("worst_balance", "final_balance", "max_rebalance_ms", "members_expired"):
        assert getattr(now, attr) == getattr(was, attr), attr
    # Faster clients can let a group touch Stable between two epoch bumps where the recorded ones had not yet: a
    # rebalance more (or two), split in two, whose first end counts the partitions that had changed owner by then.
    assert abs(now.rebalances - was.rebalances) <= 2
    assert abs(now.partitions_moved - was.partitions_moved) <= 0.06 * was.partitions_moved
    assert abs(now.total_rebalance_ms - was.total_rebalance_ms) <= 0.02 * was.total_rebalance_ms
    # A partition is unavailable from the answer that asks its owner to revoke it, so on top of the other timing
    # differences (4%: the rebalances split differently above) come the up to revocation_delay_ms the recorded
    # clients took to give each one up.
    revocations = sum(len(h.revocations) for h in before.values())
    assert (
        abs(now.unavailable_partition_s - was.unavailable_partition_s)
        <= 0.04 * was.unavailable_partition_s + revocations * settings.revocation_delay_ms / 1000
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_eager_stops_the_world_cooperative_and_server_side_do_not(seed):
    """On a consumer feed the classic replay batches many changes into one join round (a crashed member holds a
    round up to its rebalance timeout and is only expired after the 45 s session) -- but every eager round revokes
    every partition, so partitions stay owner-less several times longer than under cooperative-sticky or the
    server-side assignors. (Counted the same way -- a rebalance is a return to a settled group for both protocols,
    docs/figures.md -- eager and server-side columns see rebalances and moves of the same order.)"""
    scores = _scores(seed)
    uniform, coop, eager = scores["server:uniform"], scores["cooperative-sticky"], scores["range"]
    for name in EAGER:
        assert scores[name].unavailable_partition_s > 2 * uniform.unavailable_partition_s
        assert scores[name].unavailable_partition_s > 1.5 * coop.unavailable_partition_s
    assert coop.partitions_moved < eager.partitions_moved
    assert scores["sticky"].partitions_moved < eager.partitions_moved
    assert uniform.final_balance < scores["server:range"].final_balance  # range splits each topic alone
    # The same stimuli drive every eager replay: the same rounds at the same times, other owners.
    assert len({(scores[a].rebalances, scores[a].total_rebalance_ms) for a in EAGER}) == 1


@pytest.mark.parametrize("seed", [4, 6])
def test_a_feed_from_a_brokers_records_replays_to_its_targets(seed):
    """The cluster feed of a broker's KIP-848 records (tests/consumer_history.py: members heartbeating every second
    on two groups, crashing, leaving, restarting, slow to revoke) has only the heartbeats that changed something, and
    reports a session expiry as a leave. Replayed under the broker's own 45 s session, a member silent for a session
    is alive if it is next heard with an epoch > 0 and dead if next heard leaving: the target assignments are the
    broker's, epoch for epoch; a crashed member's expiry comes up to a few seconds early (its unrecorded heartbeats
    after its last record are unknown). Where the recorded member was alive but slower to revoke than its rebalance
    timeout (seed 6), the replayed client revokes in 5 ms and is not fenced: the histories part there."""
    from streaming.feeds.cluster_feed import ClusterFeed, events_from
    from tests.consumer_history import random_history
    from tests.feeds.test_cluster_feed_consumer import broker_records, log, track

    history = random_history(seed)
    events = [parse_event(e)[0] for e in events_from(log(broker_records(history)), ClusterFeed())]
    recorded = track(events, until=max(e["ts"] for e in events))
    replayed = replay.replay_outputs(events, "server:uniform")
    before, after = build_histories(recorded), build_histories(replayed)
    fences = {o["group_id"]: o["ts"] for o in recorded if o["type"] == "member_expired"}
    assert sorted(after) == sorted(before) == ["g0", "g1"]
    for group_id in before:
        slow = fences.get(group_id) if seed == 6 else None  # seed 4's fence is a crashed member's: replayed
        assert [(t.epoch, t.target) for t in after[group_id].targets if slow is None or t.ts < slow] == [
            (t.epoch, t.target) for t in before[group_id].targets if slow is None or t.ts < slow
        ]
        gone = {
            o["member_id"]: (o["type"], o["reason"], o["ts"])
            for o in recorded
            if o["group_id"] == group_id and o["type"] in ("member_left", "member_expired")
        }
        replayed_gone = {
            o["member_id"]: (o["type"], o["reason"], o["ts"])
            for o in replayed
            if o["group_id"] == group_id and o["type"] in ("member_left", "member_expired")
        }
        assert set(replayed_gone) == set(gone)
        for member, (kind, reason, ts) in gone.items():
            if reason == "rebalance timeout" and slow is not None:
                assert replayed_gone[member][1] == "session timeout"  # it revoked at once: its session ends it
            elif replayed_gone[member] != (kind, reason, ts):
                assert (kind, replayed_gone[member][:2]) == ("member_left", ("member_expired", "session timeout"))
                assert 0 < ts - replayed_gone[member][2] < 10_000, member
    if seed == 4:
        assert fences == {"g0": START + 105_000}
        fenced = [o["ts"] for o in replayed if o["type"] == "member_expired" and o["reason"] == "rebalance timeout"]
        assert fenced == [START + 105_000]


def _heartbeat(ts: int, member: str, epoch: int, **fields) -> dict:
    event, error = parse_event(
        {
            "type": "consumer_heartbeat",
            "group_id": "g",
            "ts": START + ts,
            "member_id": member,
            "member_epoch": epoch,
            "client_id": f"client-{member}",
            **fields,
        }
    )
    assert error is None, error
    return event


def _join(ts: int, member: str, **subscription) -> dict:
    return _heartbeat(
        ts,
        member,
        0,
        rebalance_timeout_ms=30_000,
        topic_partitions=[],
        server_assignor="range",
        **(subscription or {"subscribed_topic_names": ["t"]}),
    )


def _topic(ts: int, topic: str, partitions: int) -> dict:
    return parse_event(
        {"type": "topic_metadata", "group_id": "g", "ts": START + ts, "topic": topic, "partitions": partitions}
    )[0]


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky", "server:range"])
def test_a_crashed_member_stops_heartbeating_and_its_session_expires(assignor):
    """a and b join and heartbeat every 5 s; a stops after 20 s. Whatever the protocol, a's session -- the group's
    group.consumer.session.timeout.ms, 45 s by default -- runs out 45 s after its last heartbeat, and b takes its
    partitions."""
    feed = [_topic(0, "t", 4), _join(0, "a"), _join(100, "b")]
    feed += [_heartbeat(ts, "a", 1) for ts in range(5_000, 20_001, 5_000)]
    feed += [_heartbeat(ts, "b", 1) for ts in range(5_100, 90_001, 5_000)]
    for session, expiry in ((None, 65_000), (10_000, 30_000)):
        config = ConsumerGroupConfig(group_consumer_session_timeout_ms=session) if session else None
        outputs = replay.replay_outputs(feed, assignor, consumer_config=config)
        (expired,) = [o for o in outputs if o["type"] == "member_expired"]
        assert (expired["ts"] - START, expired["last_heartbeat_ts"] - START, expired["reason"]) == (
            expiry,
            20_000,
            "session timeout",
        )
        h = build_history(outputs, "g")
        if replay.is_server_assignor(assignor):
            assert expired["member_id"] == "a"
            assert h.targets[-1].target == {"b": [("t", 0), ("t", 1), ("t", 2), ("t", 3)]}
        else:  # the classic coordinator gave the member an id of its own (KIP-394)
            assert expired["client_id"] == "client-a" and expired["member_id"].startswith("client-a-")
            (owner,) = h.generations[-1].owners
            assert owner.startswith("client-b-") and h.generations[-1].completed_ts > expired["ts"]
            assert sorted(h.generations[-1].owners[owner]) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]


def test_a_regex_subscription_follows_the_topics_in_both_protocols():
    """a subscribes to orders-.* and b to audit; orders-2 appears after 22 s. The classic client rejoins with it (at
    once, here), the consumer protocol's coordinator resolves the regex itself at a's next heartbeat."""
    feed = [
        _topic(0, "orders-1", 2),
        _topic(0, "audit", 2),
        _join(0, "a", subscribed_topic_regex="orders-.*"),
        _join(50, "b", subscribed_topic_names=["audit"]),
    ]
    feed += [_heartbeat(ts, m, 1) for ts in range(5_000, 60_001, 5_000) for m in "ab"]
    feed.append(_topic(22_000, "orders-2", 2))
    feed.sort(key=lambda e: e["ts"])
    a_partitions = [("orders-1", 0), ("orders-1", 1), ("orders-2", 0), ("orders-2", 1)]
    classic = build_history(replay.replay_outputs(feed, "range"), "g")
    final = {owner.split("-")[1]: parts for owner, parts in classic.generations[-1].owners.items()}
    assert final == {"a": a_partitions, "b": [("audit", 0), ("audit", 1)]}
    assert classic.generations[-1].started_ts - START == 22_000
    server = build_history(replay.replay_outputs(feed, "server:uniform"), "g")
    assert (server.targets[-1].ts - START, server.targets[-1].trigger) == (25_000, "regex")
    assert server.targets[-1].target == {"a": a_partitions, "b": [("audit", 0), ("audit", 1)]}


def test_static_members_restart_without_leaving_in_the_classic_replay():
    """A static consumer-protocol member closes with epoch -2 and its next process joins with a new member id: the
    classic replay sends no LeaveGroup for it, and the restarted process takes the instance over."""
    outputs = list(_outputs(1, "range"))
    restarted = {e["instance_id"] for e in _feed(1) if e["type"] == "consumer_heartbeat" and e["member_epoch"] == -2}
    replaced = {o["group_instance_id"] for o in outputs if o["type"] == "member_replaced"}
    assert replaced and replaced <= restarted
    assert not [o for o in outputs if o["type"] == "member_left" and o["group_instance_id"] is not None]


def test_a_mixed_feed_replays_both_kinds_of_groups():
    """group-0 and group-2 are classic, group-1 and group-3 consumer-protocol groups: each kind is replayed from its
    own stimuli, and exactly as it is on its own."""
    feed = list(_feed(1, "mixed"))
    classic = [e for e in feed if e["group_id"] in ("group-0", "group-2")]
    kip848 = [e for e in feed if e["group_id"] in ("group-1", "group-3")]
    for a in ("sticky", "server:uniform"):
        outputs = list(_outputs(1, a, "mixed"))
        histories = build_histories(outputs)
        assert sorted(histories) == ["group-0", "group-1", "group-2", "group-3"]
        assert {h.is_consumer for h in histories.values()} == {replay.is_server_assignor(a)}
        for part in (classic, kip848):
            groups = {e["group_id"] for e in part}
            assert [o for o in outputs if o["group_id"] in groups] == replay.replay_outputs(part, a), (a, groups)
        assert [o["ts"] for o in outputs] == sorted(o["ts"] for o in outputs)


def test_cli_prints_every_assignor_for_a_consumer_feed(tmp_path, capsys):
    """Without --assignor, a feed with consumer-protocol groups is compared under the client-side and the
    server-side assignors; a classic feed under the client-side ones, as before."""
    feed = _write(tmp_path, _feed(1))
    assert replay.main(["--feed", feed]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(ALL)
    n = len(ALL)
    rows = {line.rsplit(None, n)[0].strip(): line.rsplit(None, n)[1:] for line in lines[2:]}
    scores = _scores(1)
    for label, attr in replay.Score.ROWS:
        assert rows[label] == [str(getattr(scores[a], attr)) for a in ALL]
    assert replay.default_assignors(_classic_feed(1)) == list(replay.DEFAULT_ASSIGNORS)
    # The consumer groups' settings come from --coordinator-config group.consumer.*.
    assert (
        replay.main(
            [
                "--feed",
                feed,
                "--assignor",
                "range,server:uniform",
                "--json",
                "--coordinator-config",
                "group.consumer.session.timeout.ms=10000",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    config = ConsumerGroupConfig(group_consumer_session_timeout_ms=10_000)
    assert data == [
        json.loads(json.dumps(s.__dict__))
        for s in replay.compare(list(_feed(1)), ["range", "server:uniform"], consumer_config=config)
    ]
    # A 10 s session also expires the static members that take longer than that to restart (up to 22.5 s here).
    assert data[1]["members_expired"] > scores["server:uniform"].members_expired


def test_consumer_feed_replay_is_deterministic():
    feed = list(_feed(2))
    for a in ("cooperative-sticky", "server:range"):
        assert replay.replay_outputs(feed, a) == replay.replay_outputs(feed, a)
