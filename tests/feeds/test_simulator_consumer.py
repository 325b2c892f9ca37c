"""The simulator playing consumer-protocol (KIP-848) groups: members that heartbeat and auto-commit like Kafka's Java
consumer against a local ConsumerGroupCoordinator, through crashes, leaves, static restarts, subscription changes
and topic growth -- and a tracker that replays the feed sees what the simulated broker did."""

from __future__ import annotations

import collections
import json
from functools import lru_cache

import pytest

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupCoordinator
from streaming.feeds.publish import main as simulate_main
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.views.history import build_histories

START = 1_700_000_000_000
MINUTES = 60_000


def settings(seed=3, **kw) -> SimulationSettings:
    kw.setdefault("group_protocol", "consumer")
    kw.setdefault("groups", 4)
    kw.setdefault("churn_interval_ms", 8_000)
    return SimulationSettings(seed=seed, **kw)


@lru_cache(maxsize=None)
def _run(seed=3, span=10 * MINUTES, calm_after=None, **kw):
    sim = Simulator(settings(seed, **kw), start_ms=START)
    if calm_after is None:
        return sim, tuple(sim.run_until(START + span))
    events = sim.run_until(START + calm_after)
    sim.stop_disruptions()
    return sim, tuple(events + sim.run_until(START + span))


def _model_outputs(events, s: SimulationSettings, until: int) -> tuple[ConsumerGroupCoordinator, list[dict]]:
    c = ConsumerGroupCoordinator(s.consumer_config())
    out = []
    for e in events:
        if e["type"] in ("consumer_heartbeat", "topic_metadata", "commit"):
            out += c.handle(e)
    return c, out + c.advance(until)


def test_same_seed_same_feed_every_event_valid_and_in_time_order():
    _, events = _run()
    assert list(_run()[1]) == list(Simulator(settings(), start_ms=START).run_until(START + 10 * MINUTES))
    assert list(events) != list(Simulator(settings(seed=4), start_ms=START).run_until(START + 10 * MINUTES))
    assert all(parse_event(json.dumps(e))[1] is None for e in events)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert {e["type"] for e in events} == {"consumer_heartbeat", "topic_metadata", "commit"}


def test_members_speak_kip848_like_the_java_consumer():
    _, events = _run()
    heartbeats = [e for e in events if e["type"] == "consumer_heartbeat"]
    by_member = collections.defaultdict(list)
    for e in heartbeats:
        by_member[e["member_id"]].append(e)
    for member_id, hbs in by_member.items():
        first = hbs[0]
        # The first heartbeat: epoch 0, the subscription, the rebalance timeout, nothing owned; the member id is the
        # client's own (KIP-1082: a Uuid, 22 characters of URL-safe base64).
        assert first["member_epoch"] == 0 and first["subscribed_topic_names"] and first["topic_partitions"] == []
        assert first["rebalance_timeout_ms"] == 30_000 and len(member_id) == 22
        # Then every heartbeat carries an epoch the coordinator gave and the partitions owned.
        for e in hbs[1:]:
            if e["member_epoch"] > 0:
                assert e["topic_partitions"] is not None
    epochs = collections.Counter(e["member_epoch"] for e in heartbeats if e["member_epoch"] <= 0)
    assert epochs[0] > 0 and epochs[-1] > 0 and epochs[-2] > 0
    # Only static members leave with -2.
    assert all(e["instance_id"] is not None for e in heartbeats if e["member_epoch"] == -2)
    assert all(e["instance_id"] is None for e in heartbeats if e["member_epoch"] == -1)
    # Subscription changes ride on a regular heartbeat.
    assert any(e["member_epoch"] > 0 and e["subscribed_topic_names"] is not None for e in heartbeats)
    # Regular heartbeats come every heartbeat interval (the coordinator's 5 s) and acknowledgements in between.
    gaps = [b["ts"] - a["ts"] for hbs in by_member.values() for a, b in zip(hbs, hbs[1:])]
    assert max(gaps) <= 5_000 and collections.Counter(gaps).most_common(1)[0][0] == 5_000


def test_the_model_never_answers_errors_to_well_behaved_clients():
    sim, events = _run()
    assert sim.consumer_errors == []
    c, outputs = _model_outputs(events, sim.settings, START + 10 * MINUTES)
    answers = [o for o in outputs if o["type"] == "consumer_heartbeat_response"]
    assert len(answers) == sum(e["type"] == "consumer_heartbeat" for e in events)
    assert {o["error"] for o in answers} == {"NONE"}
    commits = [o for o in outputs if o["type"] == "commit_response"]
    assert len(commits) == sum(e["type"] == "commit" for e in events) > 0
    assert {p[2] for o in commits for p in o["partitions"]} == {"NONE"}


def test_members_auto_commit_at_their_member_epoch():
    """Every commit_interval_ms, before giving partitions up and before leaving: the partitions owned, at the epoch
    the coordinator last gave (OffsetCommit's generationIdOrMemberEpoch)."""
    sim, events = _run()
    c = ConsumerGroupCoordinator(sim.settings.consumer_config())
    by_member = collections.defaultdict(list)
    before_revocation = before_leave = 0
    previous = {}
    for e in events:
        if e["type"] == "commit":
            member = c.groups[e["group_id"]].members[e["member_id"]]
            assert e["generation"] == member.member_epoch > 0
            # What the client owns: its assignment, and what it is still to give up (it commits those first).
            held = {
                (c.image.name_for(t), p)
                for a in (member.assigned_partitions, member.partitions_pending_revocation)
                for t, ps in a.items()
                for p in ps
            }
            assert {(o["topic"], o["partition"]) for o in e["offsets"]} <= held
            by_member[e["member_id"]].append(e["ts"])
        elif (
            e["type"] == "consumer_heartbeat"
            and previous.get(e["member_id"], {}).get("type") == "commit"
            and previous[e["member_id"]]["ts"] == e["ts"]
        ):
            if e["member_epoch"] < 0:
                before_leave += 1
            else:
                before_revocation += 1
        out = c.handle(e)
        assert all(o["error"] == "NONE" for o in out if o["type"] == "commit_response")
        if e.get("member_id"):
            previous[e["member_id"]] = e
    assert before_revocation > 10 and before_leave > 0
    gaps = collections.Counter(b - a for ts in by_member.values() for a, b in zip(ts, ts[1:]))
    assert gaps.most_common(1)[0][0] == sim.settings.commit_interval_ms
    # The tracker's view of the offsets is the simulated broker's.
    for group_id in c.group_ids():
        assert c.fetch_offsets(group_id) == sim.consumer_coordinator.fetch_offsets(group_id)
    assert any(sim.consumer_coordinator.fetch_offsets(g) for g in sim.consumer_coordinator.group_ids())


def test_a_refused_commit_is_retried_with_the_latest_epoch_or_dropped():
    sim = Simulator(settings(groups=1, churn_interval_ms=10 * MINUTES), start_ms=START)
    sim.run_until(START + 20_000)
    client = next(cl for cl in sim.clients.values() if cl.phase == "stable" and cl.assignment)
    # Its commit went out at an older epoch than the one it has heard of since: sent again, at the latest one.
    client.commit_epoch = client.member_epoch - 1
    sim._on_consumer_commit(client, {"error": "STALE_MEMBER_EPOCH"})
    retry = sim.run_until(START + 20_000)
    assert [(e["type"], e["generation"]) for e in retry] == [("commit", client.member_epoch)]
    assert client.commit_epoch == client.member_epoch and sim.consumer_errors[-1][3] == "STALE_MEMBER_EPOCH"
    # Stale at its latest epoch, or fenced: dropped (the next heartbeat tells a fenced member to rejoin).
    for error in ("STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
        sim._on_consumer_commit(client, {"error": error})
        assert sim.run_until(START + 20_000) == []


def test_the_scenario_covers_crashes_leaves_static_restarts_subscription_and_topic_changes():
    sim, events = _run()
    _, outputs = _model_outputs(events, sim.settings, START + 10 * MINUTES)
    kinds = collections.Counter(o["type"] for o in outputs)
    assert kinds["member_expired"] > 0 and kinds["member_left"] > 0 and kinds["member_replaced"] > 0
    # Crashed members run out of session; one that crashes while revoking runs out of its rebalance timeout first.
    reasons = collections.Counter(o["reason"] for o in outputs if o["type"] == "member_expired")
    assert reasons["session timeout"] > 0 and set(reasons) <= {"session timeout", "rebalance timeout"}
    assert {o["temporary"] for o in outputs if o["type"] == "member_left"} == {True, False}
    # What bumped the group epoch to each new target (a rebalance names only the first bump before Stable).
    triggers = {t.trigger for h in build_histories(outputs).values() for t in h.targets}
    assert {"join", "leave", "expiry", "metadata", "subscription"} <= triggers
    assert {o["assignor"] for o in outputs if o["type"] == "target_assignment"} == {"uniform", "range"}


def test_revocations_are_acknowledged_after_the_processing_delay():
    sim, events = _run()
    _, outputs = _model_outputs(events, sim.settings, START + 10 * MINUTES)
    pending_since: dict[tuple[str, tuple], int] = {}  # (member, partition) -> revoked at
    latencies = []
    for o in outputs:
        if o["type"] != "assignment":
            continue
        pending = {tuple(tp) for tp in o["pending_revocation"]}
        for key in [k for k in pending_since if k[0] == o["member_id"] and k[1] not in pending]:
            latencies.append(o["ts"] - pending_since.pop(key))
        for tp in pending:
            pending_since.setdefault((o["member_id"], tp), o["ts"])
    assert len(latencies) > 50
    assert 10 <= min(latencies) and max(latencies) < sim.settings.revocation_delay_ms


@pytest.mark.parametrize("seed", [3, 5])
def test_left_alone_every_group_becomes_stable_with_every_partition_owned_once(seed):
    """Eight churny minutes (a disruption every ~12 s per group), then four quiet ones."""
    sim, events = _run(seed, span=12 * MINUTES, calm_after=8 * MINUTES, churn_interval_ms=12_000)
    c = sim.consumer_coordinator
    assert sim.consumer_errors == []
    assert sorted(c.group_ids()) == [f"group-{g}" for g in range(4)]
    stable = 0
    for group_id in c.group_ids():
        d = c.describe_group(group_id)
        if not any(cl.group_id == group_id and cl.phase != "gone" for cl in sim.clients.values()):
            assert d["state"] == "Empty" and not d["members"], d  # its last client crashed just before the calm
            continue
        assert d["state"] == "Stable" and d["members"], d
        stable += 1
        subscribed = {t for m in d["members"] for t in m["subscribed_topic_names"]}
        owned = [tuple(tp) for m in d["members"] for tp in m["assignment"]]
        expected = {(t, p) for t in subscribed for p in range(sim.topic_sizes[t])}
        assert len(owned) == len(set(owned)) and set(owned) == expected
        for m in d["members"]:
            assert m["assignment"] == m["target_assignment"] and m["pending_revocation"] == []
            assert m["member_epoch"] == d["group_epoch"]
        # What the clients believe they own is what the coordinator says they own.
        clients = {cl.member_id: cl for cl in sim.clients.values() if cl.group_id == group_id and cl.phase == "stable"}
        assert set(clients) == {m["member_id"] for m in d["members"]}
        for m in d["members"]:
            assert sorted(map(list, clients[m["member_id"]].assignment)) == m["assignment"]
    assert stable >= 3


def test_a_tracker_replaying_the_feed_sees_what_the_simulated_broker_did():
    sim, events = _run()
    c, _ = _model_outputs(events, sim.settings, START + 10 * MINUTES)
    sim.consumer_coordinator.advance(START + 10 * MINUTES)
    assert sorted(c.group_ids()) == sorted(sim.consumer_coordinator.group_ids())
    for group_id in c.group_ids():
        assert c.describe_group(group_id) == sim.consumer_coordinator.describe_group(group_id)


def test_mixed_runs_classic_and_consumer_groups_side_by_side():
    sim, events = _run(group_protocol="mixed", span=5 * MINUTES)
    by_group = collections.defaultdict(set)
    for e in events:
        by_group[e["group_id"]].add(e["type"])
    assert {"join", "sync", "heartbeat", "commit"} <= by_group["group-0"]
    assert "consumer_heartbeat" not in by_group["group-0"]
    assert by_group["group-1"] == {"consumer_heartbeat", "topic_metadata", "commit"}
    assert sorted(sim.coordinator.group_ids()) == ["group-0", "group-2"]
    assert sorted(sim.consumer_coordinator.group_ids()) == ["group-1", "group-3"]
    assert sim.consumer_errors == []


def test_bad_group_protocol_is_refused():
    with pytest.raises(ValueError, match="group_protocol"):
        SimulationSettings(group_protocol="eager")


def test_simulate_command_writes_consumer_protocol_feeds(tmp_path, capsys):
    out = tmp_path / "feed.jsonl"
    assert (
        simulate_main(
            [
                "--out",
                str(out),
                "--duration",
                "60",
                "--seed",
                "1",
                "--start-ms",
                "0",
                "--group-protocol",
                "consumer",
                "--server-assignors",
                "range",
            ]
        )
        == 0
    )
    # The feed does not carry the broker's settings: the command says which it assumes (Kafka 4.x's defaults).
    assert (
        "assume a broker with group.consumer.session.timeout.ms=45000 group.consumer.heartbeat.interval.ms=5000"
        in capsys.readouterr().err
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    expected = Simulator(
        SimulationSettings(seed=1, group_protocol="consumer", server_assignors=("range",)), start_ms=0
    ).run_until(60_000)
    assert lines == expected and {e["type"] for e in lines} == {"consumer_heartbeat", "topic_metadata", "commit"}
    assert {e["server_assignor"] for e in lines if e.get("member_epoch") == 0} == {"range"}


def test_the_feed_assumes_settings_a_kafka_4_broker_accepts():
    """Kafka 4.x refuses a consumer-protocol session outside group.consumer.min/max.session.timeout.ms (45-60 s by
    default) and a heartbeat interval outside 5-15 s. The simulator's groups use the defaults, which need nothing
    more; other values name the bound a default broker would refuse them by."""
    default = SimulationSettings(group_protocol="consumer")
    assert default.broker_settings() == {
        "group.consumer.session.timeout.ms": 45_000,
        "group.consumer.heartbeat.interval.ms": 5_000,
    }
    c = default.consumer_config()
    assert (c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms) == (45_000, 5_000)
    sim, _ = _run(seed=1, span=2 * MINUTES)  # the simulated broker gave every member that interval
    assert {c.heartbeat_interval_ms for c in sim.clients.values() if c.heartbeat_interval_ms} == {5_000}
    fast = SimulationSettings(
        group_protocol="consumer", consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=3_000
    )
    assert fast.broker_settings() == {
        "group.consumer.session.timeout.ms": 10_000,
        "group.consumer.heartbeat.interval.ms": 3_000,
        "group.consumer.min.session.timeout.ms": 10_000,
        "group.consumer.min.heartbeat.interval.ms": 3_000,
    }
