"""``replay`` of a group with members of both protocols: the rolling upgrade and back Apache Kafka 4.4.0 recorded
(tests/feeds/kafka44_migration.json: classic k0, k1 -> c0 joins, the upgrade -> k0 closes, c1 joins -> k2 joins
with the classic protocol -> c0, then c1 close, the downgrade -> k1, k2 close), as the cluster feed reads it. Both
kinds of members are replayed, through the tracker's routing. No broker."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache

import pytest

from streaming.coordinator import CoordinatorConfig, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.feeds.cluster_feed import ClusterFeed, events_from
from streaming.feeds.consumer_feed import ConsumerGroupFeed
from streaming.views import replay
from streaming.views.history import build_history
from tests.feeds.test_cluster_feed_migration import DEFERRED, KAFKA_4_4, KAFKA_4_4_DEFAULTS, LOG, pairs, run

GROUP = LOG["group"]
# The recorded broker's settings (streaming/local/apache_kafka_kraft.py, the group's assignment interval 0) and
# assignors: the classic members asked for range, the consumer group used Kafka's default, uniform.
RECORDED_CLASSIC = CoordinatorConfig.from_properties({"group.initial.rebalance.delay.ms": 0})
RECORDED_CONSUMER = ConsumerGroupConfig.from_properties(
    {
        "initial.group.epoch": 1,
        "empty.group.assignment.epoch": "true",
        "upgrade.with.metadata": "true",
        "group.consumer.session.timeout.ms": 10_000,
        "group.consumer.heartbeat.interval.ms": 1_000,
    }
)
CLIENTS = ["c0", "c1", "k0", "k1", "k2"]


# The two recordings (tests/feeds/test_cluster_feed_migration.py): the group's assignment interval 0, and the
# broker's default of 1000 ms, in which k2's JoinGroup came within the interval of the last target.
RECORDINGS = {"interval 0": (LOG, KAFKA_4_4, 0), "default interval": (DEFERRED, KAFKA_4_4_DEFAULTS, 1_000)}


@lru_cache(maxsize=None)
def feed(recording: str = "interval 0") -> tuple[dict, ...]:
    log, settings, _ = RECORDINGS[recording]
    topics = {name: tuple(v) for name, v in log["topics"].items()}
    consumer = ConsumerGroupFeed(ConsumerGroupConfig.from_properties(settings), topics=topics.get)
    return tuple(parse_event(e)[0] for e in events_from(pairs(log), ClusterFeed(consumer)))


@lru_cache(maxsize=None)
def replayed(assignor: str = "server:uniform", recording: str = "interval 0") -> tuple[dict, ...]:
    interval = RECORDINGS[recording][2]
    consumer = replace(RECORDED_CONSUMER, group_consumer_assignment_interval_ms=interval)
    return tuple(replay.replay_outputs(list(feed(recording)), assignor, RECORDED_CLASSIC, consumer_config=consumer))


@lru_cache(maxsize=None)
def recorded(recording: str = "interval 0") -> tuple[dict, ...]:
    log, settings, _ = RECORDINGS[recording]
    return tuple(run(pairs(log), log, settings)[1])


def clients(outputs) -> dict[str, str]:
    """member id -> client id, of every member that joined."""
    return {o["member_id"]: o["client_id"] for o in outputs if o["type"] == "member_joined"}


def story(outputs) -> dict:
    """What the tracker tells of the group, without the moments its members' reactions came."""
    names = clients(outputs)
    generations, targets, held = [], [], {}
    for o in outputs:
        if o["type"] == "rebalance" and "generation" in o:
            generations.append((o["generation"], {names[m]: sorted(map(tuple, p)) for m, p in o["assignment"].items()}))
        elif o["type"] == "target_assignment":
            targets.append(
                (o["assignment_epoch"], {names[m]: sorted(map(tuple, p)) for m, p in o["assignment"].items()})
            )
        elif o["type"] == "assignment":
            partitions = sorted(map(tuple, o["partitions"]))
            seq = held.setdefault(names[o["member_id"]], [])
            if partitions and (not seq or seq[-1] != partitions):
                seq.append(partitions)
    return {
        "members": sorted(names.items()),
        "switches": [
            (o["ts"], o["from"], o["to"], o["reason"].split(":")[0]) for o in outputs if o["type"] == "protocol_switch"
        ],
        "departures": [names[o["member_id"]] for o in outputs if o["type"] in ("member_left", "member_expired")],
        "group epochs": [
            o["epoch"] for o in outputs if o["type"] == "consumer_group_metadata" and not o.get("tombstone")
        ],
        "classic generations": generations,
        "targets": targets,
        "partitions each member held, in turn": held,
    }


def test_every_member_of_both_protocols_is_replayed():
    assert replay.mixed_groups(feed()) == {GROUP}
    names = clients(replayed())
    assert sorted(names.values()) == CLIENTS
    h = build_history(list(replayed()), GROUP)
    lanes = {lane.label.split("-")[0]: lane for lane in h.lanes.values()}
    assert {name: lane.protocols for name, lane in lanes.items()} == {
        "k0": ["classic"],
        "k1": ["classic"],
        "k2": ["classic"],
        "c0": ["consumer"],
        "c1": ["consumer"],
    }
    assert [(s.from_protocol, s.to_protocol, s.kind) for s in h.switches] == [
        ("classic", "consumer", "upgrade"),
        ("consumer", "classic", "downgrade"),
    ]
    # The members each switch kept, as the recording's: k0 and k1 through the upgrade, k1 and k2 the downgrade.
    assert [s.members for s in h.switches] == [s.members for s in build_history(list(recorded()), GROUP).switches]
    assert [sorted(s.members) for s in h.switches] == [
        [lanes["k0"].key, lanes["k1"].key],
        sorted([lanes["k1"].key, lanes["k2"].key]),
    ]
    # The replayed clients were refused nothing but what a client reacts to: k2, at epoch 6 when the group became a
    # classic one at generation 7, heard ILLEGAL_GENERATION at its next heartbeat (Kafka checks the generation
    # before the group's state) and rejoined.
    errors = [(clients(replayed())[o["member_id"]], o["error"]) for o in replayed() if o["type"].endswith("_response")]
    assert {e for _, e in errors} == {"NONE", "MEMBER_ID_REQUIRED", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"}
    assert [c for c, e in errors if e == "ILLEGAL_GENERATION"] == ["k2"]


@pytest.mark.parametrize("recording", list(RECORDINGS))
def test_under_the_recorded_assignors_and_settings_the_replay_tells_the_recorded_story(recording):
    """Equal: the members (the ids too: each asks the replayed coordinator for the one the recorded broker drew), the
    switches at the same moments (c0's first heartbeat, c1's leave), the departures in order, the group epochs, every
    target, the classic generations with their assignments, and the partitions each member held in turn. Not equal:
    the moments of the members' reactions (rejoins, syncs, acknowledgements: the recorded clients' own times, the
    replayed ones' REACTION_MS or their next heartbeat), hence when each rebalance completed. With the broker's
    default interval too: k2 joins within it in the replay as in the recording (its target comes a heartbeat
    later)."""
    was, now = story(recorded(recording)), story(replayed("server:uniform", recording))
    assert now == was
    assert sorted(now["partitions each member held, in turn"]) == CLIENTS and len(now["switches"]) == 2
    if recording == "interval 0":  # what that story is
        assert len(was["targets"]) == 4 and [g for g, _ in was["classic generations"]] == [1, 2, 8, 9, 10]
        assert was["group epochs"] == [2, 3, 4, 5, 6, 7]
    # The rebalances count alike, at other moments.
    ended = [(o.get("generation"), o.get("group_epoch")) for o in recorded(recording) if o["type"] == "rebalance"]
    again = replayed("server:uniform", recording)
    assert [(o.get("generation"), o.get("group_epoch")) for o in again if o["type"] == "rebalance"] == ended
    moments = [o["ts"] for o in recorded(recording) if o["type"] == "rebalance"]
    assert [o["ts"] for o in again if o["type"] == "rebalance"] != moments


@pytest.mark.parametrize("assignor", replay.DEFAULT_ASSIGNORS + replay.SERVER_ASSIGNORS)
def test_each_assignor_runs_on_its_own_side_of_the_migration(assignor):
    """A client-side assignor is the classic members' (the classic generations name it), a server-side one the
    consumer group's (its targets name it); the group goes through both switches under every one."""
    outputs = list(replayed(assignor))
    h = build_history(outputs, GROUP)
    assert [s.kind for s in h.switches] == ["upgrade", "downgrade"]
    assert sorted(clients(outputs).values()) == CLIENTS
    protocols = {o["protocol"] for o in outputs if o["type"] == "rebalance" and o.get("protocol")}
    assignors = {o["assignor"] for o in outputs if o["type"] == "target_assignment"}
    if replay.is_server_assignor(assignor):
        assert protocols == {"range"} and assignors == {assignor.split(":")[1]}
    else:
        assert protocols == {assignor} and assignors == {"uniform"}
    score = replay.score(assignor, outputs)
    assert score.rebalances == 8 and score.members_expired == 0


def test_classic_stimuli_of_the_recorded_run():
    """k0 and k1 start at their first JoinGroup, k2 at its first (in the consumer group); k0 leaves; k1, left out of
    generation 9 half a second after its last JoinGroup, left then; k2's leave, dated at its JoinGroup of generation 9,
    comes after that round."""
    events = list(feed())
    members = replay.classic_stimuli(events)
    names = {e["member_id"]: e["client_id"] for e in events if e["type"] == "join"}
    starts = [(names[s["key"][1]], s["ts"] - events[0]["ts"]) for s in members.stimuli if s["kind"] == "classic_join"]
    assert starts == [("k0", 0), ("k1", 3573), ("k2", 10191)]
    leaves = [(names[s["key"][1]], bool(s.get("after_round"))) for s in members.stimuli if s["kind"] == "classic_leave"]
    assert leaves == [("k0", False), ("k1", False), ("k2", True)]
    assert sorted(names[k[1]] for k in members.until) == ["k0", "k1", "k2"]
    # The topic's size, from the leaders' assignments: the feed names it only once the group is a consumer group.
    grown = [s["event"] for s in members.stimuli if s["kind"] == "event"]
    assert [(e["topic"], e["partitions"]) for e in grown] == [(next(iter(LOG["topics"])), 4)]
    assert grown[0]["ts"] == events[0]["ts"]


def test_cli_replays_the_migrating_group_without_a_warning(tmp_path, capsys):
    path = tmp_path / "feed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in feed()))
    settings = [
        "group.initial.rebalance.delay.ms=0",
        "group.consumer.session.timeout.ms=10000",
        "group.consumer.heartbeat.interval.ms=1000",
    ]
    args = ["--feed", str(path), "--assignor", "range,server:uniform", "--json"]
    args += [a for kv in settings for a in ("--coordinator-conf", kv)]
    assert replay.main(args) == 0
    captured = capsys.readouterr()
    assert "both protocols" not in captured.err and "not the classic members" not in captured.err
    scores = {s["assignor"]: s for s in json.loads(captured.out)}
    assert sorted(scores) == ["range", "server:uniform"]
    assert all(s["rebalances"] == 8 for s in scores.values())


def test_replay_of_a_migrating_group_is_deterministic():
    events = list(feed())
    assert replay.replay_outputs(events, "server:uniform") == replay.replay_outputs(events, "server:uniform")


def test_a_migration_recorded_request_by_request_replays_to_its_story():
    """A feed with the clients' own requests (KIP-394's two JoinGroups, SyncGroups, classic heartbeats, as an
    instrumented client records them) rather than a broker's records: k0, k1 (classic) -> c joins, the upgrade -> k0
    and k1 rejoin -> k0 leaves -> c leaves, the downgrade -> k1 rejoins alone, which ends the recording. Replayed
    with the recorded settings it tells the same story; the replay runs on past the recording's last moment for
    the reactions k1's last JoinGroup started (a rejoin, a SyncGroup)."""
    from streaming.coordinator.routing import Configs
    from tests.core.test_consumer_migration import SETTINGS
    from tests.views.test_views_migration import Recorded, upgrade_and_back

    class Feed(Recorded):
        def __init__(self):
            self.events = []
            super().__init__()

        def send(self, **fields):
            fields.setdefault("group_id", "g")
            fields.setdefault("ts", self.ts)
            self.events.append(parse_event(fields)[0])
            return super().send(**fields)

    d = Feed()
    k0, k1 = upgrade_and_back(d)
    configs = Configs.from_properties(SETTINGS)
    again = replay.replay_outputs(d.events, "server:uniform", configs.classic, consumer_config=configs.consumer)
    assert replay.mixed_groups(d.events) == {"g"}
    assert story(again) == story(d.outputs)
    assert [g for g, _ in story(again)["classic generations"]] == [1, 4]
    assert max(o["ts"] for o in again) - max(e["ts"] for e in d.events) <= 4 * replay.REACTION_MS
