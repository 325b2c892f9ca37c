"""A group runs on the classic or the consumer-protocol model (streaming/coordinator/routing.py), by its state or its
first request, and a request of the other protocol gets Kafka's answer (GroupMetadataManager): an Empty group is
replaced by a group of the other protocol; a non-empty one is refused, saying when Kafka would have converted it."""

from __future__ import annotations

import pytest

from streaming.coordinator import CoordinatorConfig, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, is_consumer_state
from streaming.coordinator.consumer import records as R
from streaming.coordinator.routing import Configs, GroupModel
from streaming.spark.group_step import step_group

G = "g"
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 1000}


class Driver:
    def __init__(self, **settings):
        self.configs = Configs.from_properties({**SETTINGS, **settings})
        self.model = GroupModel(self.configs)
        self.ts = 1_000

    def send(self, **fields):
        fields.setdefault("group_id", G)
        fields.setdefault("ts", self.ts)
        event, error = parse_event(fields)
        assert error is None, error
        return self.model.handle(event)

    def topic(self, name="t", partitions=4):
        return self.send(type="topic_metadata", topic=name, partitions=partitions)

    def classic_member(self):
        """A dynamic classic member's two-step join: the group is then non-empty."""
        first = self.send(
            type="join", member_id="", session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["t"]}]
        )
        member_id = one(first, "join_response")["member_id"]
        self.send(
            type="join", member_id=member_id, session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["t"]}]
        )
        return member_id

    def hb(self, member_id="m", epoch=0, **fields):
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5_000)
            fields.setdefault("subscribed_topic_names", ["t"])
            fields.setdefault("topic_partitions", [])
        return self.send(type="consumer_heartbeat", member_id=member_id, member_epoch=epoch, **fields)

    def state(self):
        return self.model.to_bytes()


def one(outputs, kind):
    found = [o for o in outputs if o["type"] == kind]
    assert len(found) == 1, (kind, outputs)
    return found[0]


def kinds(outputs):
    return [o["type"] for o in outputs]


def test_a_new_group_runs_on_the_model_of_its_first_request():
    d = Driver()
    d.topic()
    assert not is_consumer_state(d.state()) and d.model.protocol == "classic"  # topics alone: classic
    answer = one(d.hb(), "consumer_heartbeat_response")
    assert answer["error"] == "NONE" and answer["member_epoch"] == 1
    assert is_consumer_state(d.state()) and d.model.protocol == "consumer"
    # The topic size the classic state knew came along: the member got all four partitions.
    assert [p for tp in answer["assignment"] for p in tp["partitions"]] == [0, 1, 2, 3]
    c = Driver()
    c.classic_member()
    assert not is_consumer_state(c.state()) and c.model.protocol == "classic"


def test_an_empty_classic_group_is_replaced_by_a_consumer_group():
    d = Driver()
    d.topic()
    member_id = d.classic_member()
    d.send(type="leave", member_id=member_id)
    d.ts += 10_000
    d.model.advance(d.ts)
    assert d.model.model.groups[G].state.value == "Empty"
    out = d.hb()
    assert kinds(out)[:2] == ["protocol_switch", "group_metadata"]
    assert out[0]["from"] == "classic" and out[0]["to"] == "consumer"
    assert out[1]["tombstone"] is True
    assert one(out, "consumer_heartbeat_response")["error"] == "NONE"
    assert is_consumer_state(d.state())
    assert {o["type"] for o in out if R.is_record(o)} >= {R.METADATA, R.MEMBER_METADATA, R.CURRENT_MEMBER_ASSIGNMENT}


def test_a_classic_member_expiring_just_before_the_heartbeat_empties_the_group_first():
    d = Driver()
    d.topic()
    d.classic_member()
    d.ts += 10_001  # the classic session (10 s) ran out before this request
    out = d.hb()
    assert kinds(out).index("member_expired") < kinds(out).index("protocol_switch")
    assert is_consumer_state(d.state())


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_a_non_empty_classic_group_is_not_upgraded_when_the_policy_forbids_it(policy):
    """Kafka's validateOnlineUpgrade; the upgrade itself: tests/core/test_consumer_migration.py."""
    d = Driver(**{"group.consumer.migration.policy": policy})
    d.topic()
    d.classic_member()
    out = d.hb()
    answer = one(out, "consumer_heartbeat_response")
    assert (answer["error"], answer["error_message"]) == (
        "GROUP_ID_NOT_FOUND",
        f"Cannot upgrade classic group {G} to consumer group because online upgrade is disabled.",
    )
    assert "protocol_switch" not in kinds(out) and d.model.protocol == "classic"
    # A heartbeat that does not join (epoch != 0) or leaves is no upgrade: Kafka's plain refusal.
    for epoch in (3, -1):
        out = d.hb("x", epoch)
        answer = one(out, "consumer_heartbeat_response")
        assert (answer["error"], answer["error_message"]) == (
            "GROUP_ID_NOT_FOUND",
            f"Group {G} is not a consumer group.",
        )


def test_an_invalid_heartbeat_to_a_classic_group_gets_its_own_error_first():
    d = Driver()
    d.classic_member()
    out = d.hb(rebalance_timeout_ms=-1)
    assert one(out, "consumer_heartbeat_response")["error"] == "INVALID_REQUEST"
    assert d.model.protocol == "classic"


def test_an_empty_consumer_group_is_replaced_by_a_classic_group():
    d = Driver()
    d.topic()
    d.hb()
    d.hb("m", -1)
    assert d.model.model.groups[G].state() == "Empty"
    out = d.send(type="join", member_id="", session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["t"]}])
    assert out[0]["type"] == "protocol_switch" and (out[0]["from"], out[0]["to"]) == ("consumer", "classic")
    tombstones = [o for o in out if R.is_record(o)]
    assert tombstones and all(o["tombstone"] for o in tombstones)
    assert {o["type"] for o in tombstones} == {R.METADATA, R.PARTITION_METADATA, R.TARGET_ASSIGNMENT_METADATA}
    assert one(out, "join_response")["error"] == "MEMBER_ID_REQUIRED"
    assert not is_consumer_state(d.state()) and d.model.protocol == "classic"
    assert d.model.model.groups[G].topics == {"t": 4}  # the topic sizes came along


def test_a_refused_join_leaves_the_empty_consumer_group_in_place():
    d = Driver()
    d.topic()
    d.hb()
    d.hb("m", -1)
    out = d.send(type="join", member_id="", session_timeout_ms=1, protocols=[{"name": "range", "topics": ["t"]}])
    assert kinds(out) == ["join_response"] and out[0]["error"] == "INVALID_SESSION_TIMEOUT"
    assert is_consumer_state(d.state())


def test_classic_requests_to_a_non_empty_consumer_group():
    """Kafka's classicGroup* for a consumer group's members of the consumer protocol; a JoinGroup makes a classic
    member of the consumer group (tests/core/test_consumer_migration.py)."""
    d = Driver()
    d.topic()
    d.hb()
    assert one(d.send(type="sync", member_id="m", generation=1), "sync_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert (
        one(d.send(type="heartbeat", member_id="m", generation=1), "heartbeat_response")["error"] == "UNKNOWN_MEMBER_ID"
    )
    # An OffsetCommit is no classic-only request: the member commits at its epoch (tests/core/test_consumer_offsets.py).
    commit = d.send(type="commit", member_id="m", generation=1, offsets=[{"topic": "t", "partition": 0, "offset": 1}])
    assert one(commit, "commit_response")["error"] == "NONE" and one(commit, "offset_commit")["offset"] == 1
    assert is_consumer_state(d.state()) and d.model.model.groups[G].members["m"].member_epoch == 1
    out = d.send(type="join", member_id="", session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["t"]}])
    assert one(out, "join_response")["error"] == "MEMBER_ID_REQUIRED" and "protocol_switch" not in kinds(out)
    # A LeaveGroup removes a member of either protocol (classicGroupLeaveToConsumerGroup).
    out = d.send(type="leave", member_id="m")
    assert one(out, "leave_response")["error"] == "NONE" and one(out, "member_left")["member_id"] == "m"
    assert d.model.model.groups[G].state() == "Empty"


def test_settings_are_split_by_name():
    configs = Configs.from_properties(
        {
            "group.consumer.session.timeout.ms": "20000",
            "group.max.size": "7",
            "group.consumer.migration.policy": "disabled",
        }
    )
    assert configs.consumer == ConsumerGroupConfig(
        group_consumer_session_timeout_ms=20_000, group_consumer_migration_policy="disabled"
    )
    assert configs.classic == CoordinatorConfig(group_max_size=7)
    for bad in ({"group.consumer.nope": 1}, {"group.nope": 1}, {"group.consumer.migration.policy": "sideways"}):
        with pytest.raises(ValueError):
            Configs.from_properties(bad)


def test_a_topic_with_an_id_starts_the_consumer_model_and_its_id_is_kept():
    """The cluster feed sends a KIP-848 group's topics (with the broker's ids) before its first heartbeat. Run first
    by the classic model, the switch kept names and sizes only and the tracker made up its own ids -- its records
    named other topic ids than the broker's (found on Kafka 4.4, tests/cli/test_kip848_cluster_feed.py)."""
    topic_id = "AzQesgASTGyvz1d4xRup8w"
    d = Driver()
    assert d.send(type="topic_metadata", topic="t", partitions=2, topic_id=topic_id) == []
    out = d.send(
        type="consumer_heartbeat",
        member_id="m",
        member_epoch=0,
        subscribed_topic_names=["t"],
        topic_partitions=[],
        rebalance_timeout_ms=5_000,
    )
    target = one(out, "consumer_group_target_assignment_member")
    assert [t["topicId"] for t in target["topicPartitions"]] == [topic_id]
    assert not any(o["type"] == "protocol_switch" for o in out)
    # without an id, a topic's size alone starts the classic model, as before; a classic join then finds it
    classic = Driver()
    classic.topic()
    assert classic.model.protocol == "classic"
    # and a classic request to the consumer model holding only topics: the classic model takes over, sizes seeded
    d2 = Driver()
    d2.send(type="topic_metadata", topic="t", partitions=4, topic_id=topic_id)
    d2.classic_member()
    assert d2.model.protocol == "classic" and d2.model.model.groups[G].topics == {"t": 4}


def test_observer_settings_hold_for_both_protocols():
    """The cluster feed's settings (docs/real-cluster.md): with ``tracker.expire.members=false`` no consumer-protocol
    member is expired by the tracker's clock either, unless a session timeout is given, nor a classic-protocol member
    of a consumer group, and regexes are resolved when the feed says the broker did; ``initial.group.epoch`` (Kafka
    4.3+) is the consumer model's, by its dotted name too."""
    observer = {"tracker.adopt.unknown.members": "true", "tracker.expire.members": "false"}
    configs = Configs.from_properties({**observer, "initial.group.epoch": "1"})
    assert configs.consumer == ConsumerGroupConfig(
        group_consumer_session_timeout_ms=2**31 - 1,
        initial_group_epoch=1,
        classic_member_timeouts=False,
        regex_resolution_events=True,
    )
    assert not configs.classic.expire_members and configs.classic.adopt_unknown_members
    given = Configs.from_properties({**observer, "group.consumer.session.timeout.ms": "60000"})
    assert given.consumer.group_consumer_session_timeout_ms == 60_000
    assert Configs.from_properties({}).consumer == ConsumerGroupConfig()


def test_step_group_runs_consumer_groups_with_their_session_timeout():
    configs = Configs.from_properties({})
    topic, _ = parse_event({"type": "topic_metadata", "group_id": G, "topic": "t", "partitions": 2, "ts": 1_000})
    join, _ = parse_event(
        {
            "type": "consumer_heartbeat",
            "group_id": G,
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 5_000,
            "subscribed_topic_names": ["t"],
            "topic_partitions": [],
            "ts": 1_000,
        }
    )
    first = step_group(None, [topic, join], None, configs)
    assert is_consumer_state(first.state) and first.next_deadline == 1_000 + 45_000  # Kafka's default session
    assert {"member_joined", "target_assignment", "assignment", R.METADATA} <= set(kinds(first.outputs))
    assert "consumer_heartbeat_response" not in kinds(first.outputs)  # responses are left out
    later = step_group(first.state, [], 46_000, configs)
    assert one(later.outputs, "member_expired")["reason"] == "session timeout"
    assert is_consumer_state(later.state)  # the Empty group stays (its epoch is on record)


def test_topic_ids_must_be_kafka_uuids():
    event, error = parse_event(
        {"type": "topic_metadata", "topic": "t", "partitions": 1, "topic_id": "0c5b4d0e-8f7e-4c43-9a0b-1d6f3e8a2b71"}
    )
    assert error is None and event["topic_id"] == "DFtNDo9-TEOaCx1vPoorcQ"
    assert parse_event({"type": "topic_metadata", "topic": "t", "partitions": 1, "topic_id": "abc"})[0] is None


def test_the_step_gives_the_same_outputs_however_the_feed_is_cut():
    """The job serialises each group's state between micro-batches: event by event, a consumer-protocol feed (with a
    switch to the classic protocol) gives exactly the outputs of one uninterrupted model."""
    from streaming.coordinator.routing import GroupModels
    from tests.consumer_feed import consumer_groups_feed

    configs = Configs.from_properties({})
    events = [parse_event(e)[0] for e in consumer_groups_feed(1_700_000_000_000, duration_ms=110_000)]
    model, want, got, states = GroupModels(configs), {}, {}, {}
    for e in events:
        want.setdefault(e["group_id"], []).extend(step_filter(model.handle(e)))
        result = step_group(states.get(e["group_id"]), [e], None, configs)
        states[e["group_id"]] = result.state
        got.setdefault(e["group_id"], []).extend(result.outputs)
    assert got == want and "protocol_switch" in kinds(got["cgroup-1"])
    # The consumer members' commits (at their epochs) are stored, and follow cgroup-1 into the classic model.
    assert "offset_commit" in kinds(got["cgroup-0"]) and "offset_commit" in kinds(got["cgroup-1"])
    assert model.models["cgroup-1"].protocol == "classic" and model.models["cgroup-1"].model.fetch_offsets("cgroup-1")


def step_filter(outputs):
    from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES

    return [o for o in outputs if o["type"] in DEFAULT_OUTPUT_TYPES]


def test_broadcast_topic_metadata_reaches_consumer_groups(tmp_path):
    """Topic metadata without a group id is fanned out by the sink to every group it knows -- consumer groups too,
    from their outputs or, after a restart, from their records in the store -- and resizes their assignment."""
    from offsets_store.sqlite_store import SqliteStore
    from offsets_store.store import STORE_TYPES
    from streaming.spark.sinks import TrackerSink

    configs = Configs.from_properties({})
    topic, _ = parse_event({"type": "topic_metadata", "group_id": G, "topic": "t", "partitions": 2, "ts": 1_000})
    join, _ = parse_event(
        {
            "type": "consumer_heartbeat",
            "group_id": G,
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 5_000,
            "subscribed_topic_names": ["t"],
            "topic_partitions": [],
            "ts": 1_000,
        }
    )
    first = step_group(None, [topic, join], None, configs)
    sink = TrackerSink()
    sink.handle(first.outputs, 0)
    assert sink.known_groups == {G}
    store = SqliteStore(str(tmp_path / "offsets.db"))
    store.write([o for o in first.outputs if o["type"] in STORE_TYPES], batch_id=0)
    assert TrackerSink(store=store).known_groups == {G}
    store.close()
    broadcast, _ = parse_event({"type": "topic_metadata", "topic": "t", "partitions": 4, "ts": 2_000})
    heartbeat, _ = parse_event(
        {
            "type": "consumer_heartbeat",
            "group_id": G,
            "member_id": "m",
            "member_epoch": 1,
            "topic_partitions": [["t", 0], ["t", 1]],
            "ts": 3_000,
        }
    )
    later = step_group(first.state, [dict(broadcast, group_id=G), heartbeat], None, configs)  # the sink's copy
    assert one(later.outputs, "target_assignment")["assignment"] == {"m": [["t", p] for p in range(4)]}


# ---------------------------------------------------------------- the views run the feed through the same routing
def _feed_through_group_models(feed, configs):
    """What the job computes for a feed, per group: each event to its group's model, the timers due at the end."""
    from streaming.coordinator.routing import GroupModels

    models, out = GroupModels(configs), []
    for raw in feed:
        out.extend(models.handle(parse_event(raw)[0]))
    return out + models.advance(max(e["ts"] for e in feed))


def _of_group(outputs, group_id):
    return [o for o in outputs if o.get("group_id") == group_id]


def _classic_join(group_id, ts):
    """A dynamic classic member's two joins (the coordinator names it in its MEMBER_ID_REQUIRED answer)."""
    from streaming.views.history import coordinator_outputs

    first = {
        "type": "join",
        "group_id": group_id,
        "member_id": "",
        "protocols": [{"name": "range", "topics": ["t"]}],
        "ts": ts,
    }
    member_id = one(coordinator_outputs([first])[0], "join_response")["member_id"]
    return member_id, [first, dict(first, member_id=member_id)]


def test_the_views_switch_an_empty_classic_group_to_the_consumer_protocol_as_the_job_does():
    """coordinator_outputs routes like the job: once the last classic member left, a ConsumerGroupHeartbeat that
    joins replaces the Empty classic group (before, the views ran it in a second, separate consumer group)."""
    from streaming.views.history import build_history, coordinator_outputs

    member_id, joins = _classic_join(G, 1_000)
    feed = [
        {"type": "topic_metadata", "group_id": G, "topic": "t", "partitions": 4, "ts": 1_000},
        *joins,
        _classic_join("other", 2_000)[1][0],
        {"type": "sync", "group_id": G, "member_id": member_id, "generation": 1, "ts": 4_500},
        {"type": "leave", "group_id": G, "member_id": member_id, "ts": 5_000},
        {
            "type": "consumer_heartbeat",
            "group_id": G,
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 5_000,
            "subscribed_topic_names": ["t"],
            "topic_partitions": [],
            "ts": 6_000,
        },
        {
            "type": "consumer_heartbeat",
            "group_id": G,
            "member_id": "m",
            "member_epoch": 1,
            "topic_partitions": [{"topic": "t", "partitions": [0, 1, 2, 3]}],
            "ts": 9_000,
        },
    ]
    outputs, rejected = coordinator_outputs(feed)
    assert rejected == 0
    want = _feed_through_group_models(feed, Configs.of(CoordinatorConfig()))
    for group_id in (G, "other"):
        assert _of_group(outputs, group_id) == _of_group(want, group_id)
    mine = _of_group(outputs, G)
    switch = one(mine, "protocol_switch")
    assert (switch["from"], switch["to"], switch["ts"]) == ("classic", "consumer", 6_000)
    after = mine[mine.index(switch) :]
    assert kinds(after)[1] == "group_metadata" and after[1]["tombstone"] is True
    answers = [o for o in after if o["type"] == "consumer_heartbeat_response"]
    assert [(a["error"], a["member_epoch"]) for a in answers] == [("NONE", 1), ("NONE", 1)]
    assert [o["assignment"] for o in after if o["type"] == "target_assignment"] == [{"m": [["t", p] for p in range(4)]}]
    assert build_history(outputs, G).is_consumer


def test_group_less_topic_metadata_reaches_the_groups_there_and_those_that_come_later():
    """Topic metadata without a group id (or with an empty one) is every group's: the groups already there get it, and
    a group that appears later knows the topic's size before its first request -- whichever protocol it speaks."""
    from streaming.views.history import coordinator_outputs

    def hb(group_id, ts, epoch=0, owned=None):
        event = {"type": "consumer_heartbeat", "group_id": group_id, "member_id": "m", "member_epoch": epoch, "ts": ts}
        if epoch == 0:
            event.update(rebalance_timeout_ms=5_000, subscribed_topic_names=["t"], topic_partitions=[])
        else:
            event.update(topic_partitions=[{"topic": "t", "partitions": owned}])
        return event

    member_id, joins = _classic_join("classic", 5_000)
    for no_group in ({}, {"group_id": ""}):
        feed = [
            {"type": "topic_metadata", "topic": "t", "partitions": 3, "ts": 1_000, **no_group},
            hb("early", 2_000),
            {"type": "topic_metadata", "topic": "t", "partitions": 5, "ts": 3_000, **no_group},
            hb("early", 4_000, 1, [0, 1, 2]),
            hb("late", 5_000),
            *joins,
            {"type": "sync", "group_id": "classic", "member_id": member_id, "generation": 1, "ts": 8_100},
        ]
        outputs, _ = coordinator_outputs(feed, CoordinatorConfig(group_initial_rebalance_delay_ms=3_000))
        targets = {
            g: [
                sorted(p for _, p in o["assignment"]["m"])
                for o in _of_group(outputs, g)
                if o["type"] == "target_assignment"
            ]
            for g in ("early", "late")
        }
        assert targets == {"early": [[0, 1, 2], [0, 1, 2, 3, 4]], "late": [[0, 1, 2, 3, 4]]}
        rebalance = one(_of_group(outputs, "classic"), "rebalance")
        assert sorted(p for _, p in rebalance["assignment"][member_id]) == [0, 1, 2, 3, 4]
