"""Kafka 4.x's online migration between the protocols (KIP-848), as routing.py and consumer/classic_members.py model
it: the expectations of Kafka's GroupMetadataManagerTest (testConsumerGroupHeartbeatWithStableClassicGroup,
...WithPreparingRebalanceClassicGroup, testJoiningConsumerGroupWithNewDynamicMember,
testClassicGroupSyncToConsumerGroup*, testClassicGroupHeartbeatToConsumerGroup*,
testConsumerGroupMemberUsingClassicProtocolFencedWhen*, testLastConsumerProtocolMemberLeavingConsumerGroup,
testNoConversionWhenSizeExceedsClassicMaxGroupSize, testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember,
testJoiningConsumerGroupReplacingExistingStaticMember, testStaticMemberJoiningConsumerGroupWith{UnknownInstanceId,
UnmatchedMemberId}), on our own groups."""

from __future__ import annotations

import base64

import pytest

from offsets_store.codec import encode_subscription
from streaming.coordinator import parse_event
from streaming.coordinator.consumer import classic_members
from streaming.coordinator.consumer import records as R
from streaming.coordinator.migration import snapshot_view
from streaming.coordinator.routing import Configs, GroupModel

G = "g"
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 1000}
RANGE = {"name": "range", "topics": ["t"], "user_data": "", "rack": "", "version": 3}
ROUNDROBIN = {**RANGE, "name": "roundrobin"}


def metadata(p: dict) -> str:
    sub = {k: p[k] for k in ("topics", "user_data", "rack", "version")}
    return base64.b64encode(encode_subscription({**sub, "owned_partitions": p.get("owned_partitions") or []})).decode()


class Driver:
    def __init__(self, **settings):
        self.model = GroupModel(Configs.from_properties({**SETTINGS, **settings}))
        self.ts = 1_000
        self.send(type="topic_metadata", topic="t", partitions=4, topic_id="AAAAAAAAAAAAAAAAAAAAAQ")

    def send(self, **fields):
        fields.setdefault("group_id", G)
        fields.setdefault("ts", self.ts)
        event, error = parse_event(fields)
        assert error is None, error
        return self.model.handle(event)

    def later(self, ms: int):
        self.ts += ms
        return self.model.advance(self.ts - 1)

    def join(self, member_id="", client_id="k", protocols=(RANGE, ROUNDROBIN), session=10_000, **fields):
        return self.send(
            type="join",
            member_id=member_id,
            client_id=client_id,
            session_timeout_ms=session,
            rebalance_timeout_ms=fields.pop("rebalance", 30_000),
            protocols=list(protocols),
            **fields,
        )

    def classic_member(self, client_id="k", **fields) -> str:
        """A dynamic member's two JoinGroups (KIP-394): its id."""
        member_id = last(self.join(client_id=client_id, **fields), "join_response")["member_id"]
        self.join(member_id, client_id=client_id, **fields)
        return member_id

    def classic_group(self, *clients: str) -> list[str]:
        """A Stable classic group of these clients (generation 1, the leader's range assignment)."""
        ids = [self.classic_member(c) for c in clients]
        self.later(100)
        group = self.classic.groups[G]
        for m in sorted(group.members, key=lambda m: m == group.leader_id):
            self.send(type="sync", member_id=m, generation=group.generation)
        assert group.state.value == "Stable"
        return ids

    def hb(self, member_id="c", epoch=0, **fields):
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5_000)
            fields.setdefault("subscribed_topic_names", ["t"])
            fields.setdefault("topic_partitions", [])
        return self.send(type="consumer_heartbeat", member_id=member_id, member_epoch=epoch, **fields)

    @property
    def classic(self):
        assert self.model.protocol == "classic"
        return self.model.model

    @property
    def consumer(self):
        assert self.model.protocol == "consumer"
        return self.model.model

    def member(self, member_id):
        return self.consumer.groups[G].members[member_id]


def last(outputs, kind):
    return [o for o in outputs if o["type"] == kind][-1]


def kinds(outputs):
    return [o["type"] for o in outputs]


def records(outputs):
    return [
        (o["type"], o.get("member_id"), "tombstone" if o["tombstone"] else None)
        for o in outputs
        if R.is_record(o) or o["type"] == "group_metadata"
    ]


def parts(record) -> list[int]:
    return sorted(p for t in record.get("assignedPartitions") or record.get("topicPartitions") for p in t["partitions"])


# ------------------------------------------------------------------------------------------------ the upgrade
def test_a_heartbeat_joining_a_stable_classic_group_upgrades_it():
    """The classic group's tombstone; the consumer group with its members at the classic generation, Stable, their
    target what they were given; then the joining member's records; the classic members' sessions are their own."""
    d = Driver()
    k0, k1 = d.classic_group("k0", "k1")
    given = {m.member_id: sorted(p for _, p in m.assignment) for m in d.classic.groups[G].members.values()}
    d.ts += 100
    out = d.hb("c")
    switch = last(out, "protocol_switch")
    assert (switch["from"], switch["to"]) == ("classic", "consumer") and "upgrade" in switch["reason"]
    written = [o for o in out if R.is_record(o) or o["type"] == "group_metadata"]
    assert written[0]["type"] == "group_metadata" and written[0]["tombstone"]
    members = [r["member_id"] for r in written[1:3]]
    assert set(members) == {k0, k1}
    assert records(written[1:9]) == [
        (R.MEMBER_METADATA, members[0], None),
        (R.MEMBER_METADATA, members[1], None),
        (R.METADATA, None, None),
        (R.TARGET_ASSIGNMENT_MEMBER, members[0], None),
        (R.TARGET_ASSIGNMENT_MEMBER, members[1], None),
        (R.TARGET_ASSIGNMENT_METADATA, None, None),
        (R.CURRENT_MEMBER_ASSIGNMENT, members[0], None),
        (R.CURRENT_MEMBER_ASSIGNMENT, members[1], None),
    ]
    assert written[3]["epoch"] == 1 and written[6]["assignmentEpoch"] == 1  # the classic generation
    for r in written[1:3]:
        assert r["classicMemberMetadata"] == {
            "sessionTimeoutMs": 10_000,
            "supportedProtocols": [
                {"name": "range", "metadata": metadata(RANGE)},
                {"name": "roundrobin", "metadata": metadata(ROUNDROBIN)},
            ],
        }
        assert r["rebalanceTimeoutMs"] == 30_000 and r["serverAssignor"] is None and r["rackId"] is None
    for r in written[7:9]:
        assert (r["memberEpoch"], r["previousMemberEpoch"], r["state"]) == (1, 1, 0)
        assert parts(r) == given[r["member_id"]]
    for r in written[4:6]:
        assert parts(r) == given[r["member_id"]]
    # then the joining member: its subscription, a new epoch, the new target, its own assignment
    rest = records(written[9:])
    assert rest[0] == (R.MEMBER_METADATA, "c", None) and rest[-1] == (R.CURRENT_MEMBER_ASSIGNMENT, "c", None)
    assert [r["epoch"] for r in written[9:] if r["type"] == R.METADATA] == [2]
    assert written[9]["classicMemberMetadata"] is None
    answer = last(out, "consumer_heartbeat_response")
    assert answer["error"] == "NONE" and answer["member_epoch"] == 2
    assert "member_left" not in kinds(out)  # nobody left
    soft = d.consumer.soft[G]
    assert soft.sessions[k0] == d.ts + 10_000 and soft.sessions["c"] == d.ts + 45_000
    assert d.member(k0).classic is not None and d.member("c").classic is None


def test_the_members_waiting_in_a_round_are_told_to_rejoin():
    """testConsumerGroupHeartbeatWithPreparingRebalanceClassicGroup: an upgrade during a round answers the members
    waiting for it REBALANCE_IN_PROGRESS; their epoch is the generation they had."""
    d = Driver()
    k0, k1 = d.classic_group("k0", "k1")
    d.ts += 100
    d.join(k0, client_id="k0", protocols=[RANGE])  # a changed protocol list: a new round, k0 waits in it
    assert d.classic.groups[G].state.value == "PreparingRebalance"
    d.ts += 100
    out = d.hb("c")
    refused = [o for o in out if o["type"] == "join_response" and o["error"] == "REBALANCE_IN_PROGRESS"]
    assert [o["member_id"] for o in refused] == [k0]
    assert d.member(k0).member_epoch == d.member(k1).member_epoch == 1


def test_an_upgrade_kafka_refuses_is_refused_with_its_words():
    d = Driver(**{"group.consumer.max.size": 1})
    d.classic_group("k0", "k1")
    answer = last(d.hb("c"), "consumer_heartbeat_response")
    assert answer["error"] == "GROUP_ID_NOT_FOUND"
    assert answer["error_message"] == (
        f"Cannot upgrade classic group {G} to consumer group because the group size exceeds the consumer group "
        "maximum size."
    )
    assert d.model.protocol == "classic"
    other = Driver()
    other.join(protocol_type="connect", client_id="w")
    member = last(other.join(protocol_type="connect", client_id="w"), "join_response")["member_id"]
    other.join(member, protocol_type="connect", client_id="w")
    answer = last(other.hb("c"), "consumer_heartbeat_response")
    assert "does not use the consumer embedded protocol" in answer["error_message"]


def test_an_assignment_with_user_data_is_not_upgraded():
    """testConsumerGroupHeartbeatWithCustomAssignorClassicGroup: Kafka will not lose a custom assignor's user data."""
    record = {
        "group_id": G,
        "generation": 3,
        "protocol_type": "consumer",
        "protocol": "range",
        "members": [
            {
                "member_id": "m",
                "client_id": "k",
                "client_host": "/h",
                "session_timeout": 10_000,
                "rebalance_timeout": 30_000,
                "subscription": {"topics": ["t"], "version": 3},
                "assignment": {"partitions": [["t", 0]], "user_data": base64.b64encode(b"x").decode()},
            }
        ],
    }
    d = Driver()
    assert "custom assignor" in classic_members.upgrade_error(d.model._new("consumer"), snapshot_view(record))[1]
    record["members"][0]["assignment"]["user_data"] = ""
    assert classic_members.upgrade_error(d.model._new("consumer"), snapshot_view(record)) is None
    # a partition given twice (a broken leader's assignment): Kafka's group refuses it, the request fails
    record["members"].append({**record["members"][0], "member_id": "n"})
    assert classic_members.upgrade_error(d.model._new("consumer"), snapshot_view(record))[0] == "UNKNOWN_SERVER_ERROR"


# ------------------------------------------------------------------------------------------------ classic members
def rejoin(d: Driver, member_id: str) -> None:
    """A classic member's JoinGroup and SyncGroup, at its new epoch."""
    generation = last(d.join(member_id, client_id=member_id[:2]), "join_response")["generation"]
    assert last(d.send(type="sync", member_id=member_id, generation=generation), "sync_response")["error"] == "NONE"


def upgraded(**settings) -> tuple[Driver, str, str]:
    d = Driver(**settings)
    k0, k1 = d.classic_group("k0", "k1")
    d.ts += 100
    d.hb("c")
    return d, k0, k1


def test_a_classic_member_joins_a_consumer_group():
    """testJoiningConsumerGroupWithNewDynamicMember: MEMBER_ID_REQUIRED, then the member's records as a heartbeat's
    (subscription with its classicMemberMetadata, a new epoch and target, its assignment); the JoinGroup's answer is
    its epoch as generation and its first protocol, no leader; its sync timeout runs."""
    d, _, _ = upgraded()
    d.ts += 100
    first = last(d.join(client_id="k2"), "join_response")
    assert first["error"] == "MEMBER_ID_REQUIRED"
    out = d.join(first["member_id"], client_id="k2")
    k2 = first["member_id"]
    kinds_written = records(out)
    assert kinds_written[0] == (R.MEMBER_METADATA, k2, None) and kinds_written[-1] == (
        R.CURRENT_MEMBER_ASSIGNMENT,
        k2,
        None,
    )
    assert (R.METADATA, None, None) in kinds_written
    meta = next(o for o in out if o["type"] == R.MEMBER_METADATA)
    assert meta["classicMemberMetadata"]["sessionTimeoutMs"] == 10_000 and meta["subscribedTopicRegex"] == ""
    answer = last(out, "join_response")
    assert (answer["error"], answer["generation"], answer["protocol"], answer["leader"], answer["members"]) == (
        "NONE",
        d.member(k2).member_epoch,
        "range",
        "",
        [],
    )
    assert d.consumer.soft[G].syncs[k2] == d.ts + 30_000 and d.consumer.soft[G].sessions[k2] == d.ts + 10_000
    assert last(out, "member_joined")["member_id"] == k2
    # a protocol no classic member supports, or another protocol type, does not fit
    bad = last(d.join(client_id="k3", protocols=[{**RANGE, "name": "sticky"}]), "join_response")
    assert bad["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    assert (
        last(d.join(client_id="k3", protocol_type="connect"), "join_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    )
    assert last(d.join(client_id="k3", session=10), "join_response")["error"] == "INVALID_SESSION_TIMEOUT"


def test_a_classic_members_sync_and_heartbeat():
    """testClassicGroupSyncToConsumerGroup* and testClassicGroupHeartbeatToConsumerGroup*."""
    d, k0, k1 = upgraded()
    d.ts += 100
    epoch = d.member(k0).member_epoch
    assert epoch == 1 and d.consumer.groups[G].assignment_epoch == 2
    hb = last(d.send(type="heartbeat", member_id=k0, generation=epoch), "heartbeat_response")
    assert hb["error"] == "REBALANCE_IN_PROGRESS"  # its epoch is behind the target's: it must rejoin
    assert d.consumer.soft[G].joins[k0] == d.ts + 30_000 and d.consumer.soft[G].sessions[k0] == d.ts + 10_000
    for fields, error in (
        ({"member_id": "nobody", "generation": epoch}, "UNKNOWN_MEMBER_ID"),
        ({"member_id": "c", "generation": 2}, "UNKNOWN_MEMBER_ID"),  # c speaks the consumer protocol
        ({"member_id": k0, "generation": epoch + 1}, "ILLEGAL_GENERATION"),
        ({"member_id": k0, "generation": epoch, "protocol_name": "roundrobin"}, "INCONSISTENT_GROUP_PROTOCOL"),
        ({"member_id": k0, "generation": epoch}, "REBALANCE_IN_PROGRESS"),
    ):
        assert last(d.send(type="sync", **fields), "sync_response")["error"] == error, fields
        assert last(d.send(type="heartbeat", **{**fields, "protocol_name": None}), "heartbeat_response")["error"] in (
            error,
            "NONE",
            "REBALANCE_IN_PROGRESS",
        )
    d.ts += 100
    joined = last(d.join(k0, client_id="k0"), "join_response")  # it rejoins: reconciled to the new epoch
    assert joined["generation"] == d.member(k0).member_epoch == 2
    assert k0 not in d.consumer.soft[G].joins and k0 in d.consumer.soft[G].syncs
    synced = last(d.send(type="sync", member_id=k0, generation=2, protocol_name="range"), "sync_response")
    assert synced["error"] == "NONE" and synced["assignment"] == [
        ["t", p] for p in sorted(p for ps in d.member(k0).assigned_partitions.values() for p in ps)
    ]
    assert k0 not in d.consumer.soft[G].syncs
    assert last(d.send(type="heartbeat", member_id=k0, generation=2), "heartbeat_response")["error"] == "NONE"


def test_a_classic_member_is_fenced_when_its_timeouts_run_out():
    """testConsumerGroupMemberUsingClassicProtocolFencedWhenSessionTimeout / ...WhenJoinTimeout: its own session
    timeout (not the consumer protocol's), and the rebalance timeout it has to rejoin once told to."""
    d, k0, k1 = upgraded()
    rejoin(d, k1)  # k1 rejoins at once
    out = d.send(type="heartbeat", member_id=k0, generation=1)  # told to rejoin: its join timeout starts
    for _ in range(4):  # k1 and c keep going; k0 heartbeats but never rejoins
        d.ts += 8_000
        out += d.send(type="heartbeat", member_id=k0, generation=1)
        out += d.send(type="heartbeat", member_id=k1, generation=2)
        out += d.hb("c", d.member("c").member_epoch)
    expired = [o for o in out if o["type"] == "member_expired"]
    assert [(o["member_id"], o["reason"]) for o in expired] == [(k0, "join timeout")]
    assert (R.CURRENT_MEMBER_ASSIGNMENT, k0, "tombstone") in records(out)
    out = d.later(11_000)  # k1 has been silent for longer than its session (10 s; the consumer protocol's is 45 s)
    assert [(o["member_id"], o["reason"]) for o in out if o["type"] == "member_expired"] == [(k1, "session timeout")]


def test_a_classic_members_commit_and_leave():
    d, k0, k1 = upgraded()
    commit = d.send(type="commit", member_id=k0, generation=7, offsets=[{"topic": "t", "partition": 0, "offset": 3}])
    assert last(commit, "commit_response")["error"] == "ILLEGAL_GENERATION"  # a classic member's error
    commit = d.send(type="commit", member_id=k0, generation=1, offsets=[{"topic": "t", "partition": 0, "offset": 3}])
    assert last(commit, "commit_response")["error"] == "NONE"
    out = d.send(type="leave", member_id=k1)
    assert last(out, "leave_response")["error"] == "NONE" and last(out, "member_left")["member_id"] == k1
    assert records(out) == [
        (R.CURRENT_MEMBER_ASSIGNMENT, k1, "tombstone"),
        (R.TARGET_ASSIGNMENT_MEMBER, k1, "tombstone"),
        (R.MEMBER_METADATA, k1, "tombstone"),
        (R.METADATA, None, None),
    ]
    assert last(d.send(type="leave", member_id=k1), "leave_response")["error"] == "UNKNOWN_MEMBER_ID"


# ------------------------------------------------------------------------------------------------ the downgrade
def test_the_last_consumer_protocol_member_leaving_downgrades_the_group():
    """testLastConsumerProtocolMemberLeavingConsumerGroup: the consumer group's tombstones, then the classic group's
    GroupMetadata (Stable at the group epoch, the members' target assignments), then a rebalance."""
    d, k0, k1 = upgraded()
    d.ts += 100
    for k in (k0, k1):
        d.join(k, client_id=k[:2])
    targets = {m: sorted(p for ps in a.values() for p in ps) for m, a in d.consumer.groups[G].target.items()}
    epoch = d.consumer.groups[G].group_epoch
    d.ts += 100
    out = d.hb("c", -1)
    written = records(out)
    assert written[:3] == sorted(written[:3], key=lambda r: r[0]) and all(r[2] == "tombstone" for r in written[:-1])
    assert [r[0] for r in written[-3:]] == [R.PARTITION_METADATA, R.METADATA, "group_metadata"]
    classic = last(out, "group_metadata")
    assert classic["generation"] == epoch and classic["protocol"] == "range" and classic["protocol_type"] == "consumer"
    assert {m["member_id"]: sorted(p for _, p in m["assignment"]["partitions"]) for m in classic["members"]} == {
        k: targets[k] for k in (k0, k1)
    }
    assert classic["leader"] in (k0, k1)
    switch = last(out, "protocol_switch")
    assert (switch["from"], switch["to"]) == ("consumer", "classic") and "downgrade" in switch["reason"]
    assert last(out, "consumer_heartbeat_response")["member_epoch"] == -1
    group = d.classic.groups[G]
    assert group.state.value == "PreparingRebalance" and group.generation == epoch
    # the classic members rejoin on their next heartbeat; the round completes as any classic round
    d.ts += 100
    for k in (k0, k1):
        assert last(d.send(type="heartbeat", member_id=k, generation=epoch), "heartbeat_response")["error"] == (
            "REBALANCE_IN_PROGRESS"
        )
    for k in (k0, k1):
        out = d.join(k, client_id=k[:2])
    assert group.generation == epoch + 1 and group.state.value == "CompletingRebalance"


def test_the_last_consumer_protocol_members_session_running_out_downgrades_the_group():
    d, k0, k1 = upgraded()
    for k in (k0, k1):
        rejoin(d, k)
    out = []
    for _ in range(6):  # c goes silent; k0 and k1 heartbeat
        d.ts += 8_000
        out += d.send(type="heartbeat", member_id=k0, generation=2)
        out += d.send(type="heartbeat", member_id=k1, generation=2)
    assert d.model.protocol == "classic" and last(out, "member_expired")["member_id"] == "c"
    # the consumer group's epoch (c's join made it 2) is the classic generation; no epoch is written for c's fence
    assert last(out, "group_metadata")["generation"] == 2


@pytest.mark.parametrize("settings", [{"group.consumer.migration.policy": "upgrade"}, {"group.max.size": 2}])
def test_no_downgrade_when_the_policy_or_the_classic_size_forbids_it(settings):
    """testNoConversionWhenSizeExceedsClassicMaxGroupSize, and the policy: the member is fenced as any."""
    d, k0, k1 = upgraded(**settings)
    k2 = d.classic_member("k2")  # three classic members: one more than the classic group.max.size of 2
    out = d.hb("c", -1)
    assert d.model.protocol == "consumer" and "protocol_switch" not in kinds(out)
    assert set(d.consumer.groups[G].members) == {k0, k1, k2}


def test_a_group_with_classic_members_survives_its_state_round_trip():
    d, k0, k1 = upgraded()
    d.send(type="heartbeat", member_id=k0, generation=1)
    state = d.model.to_bytes()
    again = GroupModel.from_bytes(state, d.model.configs)
    assert again.to_bytes() == state
    assert again.model.groups[G].members[k0].classic == d.member(k0).classic
    assert again.model.soft[G].joins == d.consumer.soft[G].joins and again.next_deadline() == d.model.next_deadline()


def test_static_members_of_either_protocol_replace_each_other():
    """testConsumerGroupHeartbeatFromExistingClassicStaticMember: a consumer-protocol member takes a classic static
    member's place at once (no UNRELEASED_INSTANCE_ID), and is of the consumer protocol from then on. (The reverse,
    when the member replaced is the last of the consumer protocol, downgrades the group: below.)"""
    d, k0, k1 = upgraded()
    s0 = d.classic_member("s0", group_instance_id="i0")
    d.ts += 100
    out = d.hb("s1", instance_id="i0")
    assert last(out, "consumer_heartbeat_response")["error"] == "NONE"
    assert last(out, "member_replaced")["previous_member_id"] == s0
    assert d.member("s1").classic is None and s0 not in d.consumer.groups[G].members


@pytest.mark.parametrize("kafka", ["4.0", "4.1+"])
def test_a_static_member_restarted_with_the_consumer_protocol_upgrades_the_group_and_takes_its_place(kafka):
    """testConsumerGroupHeartbeatToClassicGroupFromExistingStaticMember: a Stable classic group of one static member,
    which restarts with the consumer protocol under a new member id. One write: the classic group's tombstone; the
    consumer group with the classic member, at its generation; the classic member replaced (its three tombstones,
    the new member's records at epoch 0 with its predecessor's partitions and classic metadata); the new member's
    own metadata; its assignment at the group epoch. Kafka 4.1+ converts with the topics' metadata (the epoch
    record's hash), so nothing changed: no new epoch, no new target. 4.0 leaves the metadata to this heartbeat,
    which writes it and bumps the epoch."""
    d = Driver(**({"upgrade.with.metadata": "true"} if kafka == "4.1+" else {}))
    d.join(client_id="k", group_instance_id="i0")
    d.later(100)
    classic = d.classic.groups[G]
    (k,) = classic.members
    d.send(type="sync", member_id=k, generation=classic.generation, group_instance_id="i0")
    assert classic.state.value == "Stable" and classic.generation == 1
    d.ts += 100
    out = d.hb("c", instance_id="i0")
    conversion = [(R.MEMBER_METADATA, k, None)]
    conversion += [(R.PARTITION_METADATA, None, None)] if kafka == "4.1+" else []
    conversion += [
        (R.METADATA, None, None),
        (R.TARGET_ASSIGNMENT_MEMBER, k, None),
        (R.TARGET_ASSIGNMENT_METADATA, None, None),
        (R.CURRENT_MEMBER_ASSIGNMENT, k, None),
    ]
    replacement = [
        (R.CURRENT_MEMBER_ASSIGNMENT, k, "tombstone"),
        (R.TARGET_ASSIGNMENT_MEMBER, k, "tombstone"),
        (R.MEMBER_METADATA, k, "tombstone"),
        (R.MEMBER_METADATA, "c", None),
        (R.TARGET_ASSIGNMENT_MEMBER, "c", None),
        (R.CURRENT_MEMBER_ASSIGNMENT, "c", None),
        (R.MEMBER_METADATA, "c", None),
    ]
    if kafka == "4.1+":
        heartbeat = [(R.CURRENT_MEMBER_ASSIGNMENT, "c", None)]
    else:
        heartbeat = [
            (R.PARTITION_METADATA, None, None),
            (R.METADATA, None, None),
            (R.TARGET_ASSIGNMENT_MEMBER, "c", None),
            (R.TARGET_ASSIGNMENT_METADATA, None, None),
            (R.CURRENT_MEMBER_ASSIGNMENT, "c", None),
        ]
    assert records(out) == [("group_metadata", None, "tombstone")] + conversion + replacement + heartbeat
    written = [o for o in out if R.is_record(o)]
    taking = [r for r in written if r.get("member_id") == "c"]
    assert taking[0]["classicMemberMetadata"] is not None and taking[3]["classicMemberMetadata"] is None
    assert (taking[2]["memberEpoch"], taking[2]["previousMemberEpoch"], taking[2]["state"]) == (0, 0, 0)
    assert parts(taking[2]) == parts(taking[1]) == [0, 1, 2, 3]  # its predecessor's, at once
    epoch = 1 if kafka == "4.1+" else 2
    assert (taking[-1]["memberEpoch"], parts(taking[-1])) == (epoch, [0, 1, 2, 3])
    answer = last(out, "consumer_heartbeat_response")
    assert (answer["member_id"], answer["member_epoch"], answer["error"]) == ("c", epoch, "NONE")
    assert last(out, "member_replaced")["previous_member_id"] == k
    assert d.consumer.soft[G].sessions["c"] == d.ts + 45_000  # group.consumer.session.timeout.ms


# ------------------------------------------------------------------ a classic static member replaces the last one
T_U = {**RANGE, "topics": ["t", "u"]}


def static_consumer_and_classic(**settings) -> tuple[Driver, str]:
    """A consumer group of c1 (consumer protocol, static: instance i1, subscribed to t) and k (classic, subscribed to
    t and u), both Stable on the group's target."""
    d = Driver(**settings)
    d.send(type="topic_metadata", topic="u", partitions=2, topic_id="AAAAAAAAAAAAAAAAAAAAAg")
    d.hb("c1", instance_id="i1")
    k = d.classic_member("k", protocols=[T_U])
    for _ in range(6):  # c1 acknowledges what it gives up and gets; k rejoins for what was released, and syncs
        d.ts += 500
        owned = [{"topic_id": t, "partitions": sorted(p)} for t, p in d.member("c1").assigned_partitions.items()]
        d.hb("c1", d.member("c1").member_epoch, topic_partitions=owned)
        beat = d.send(type="heartbeat", member_id=k, generation=d.member(k).member_epoch)
        if last(beat, "heartbeat_response")["error"] == "REBALANCE_IN_PROGRESS":
            generation = last(d.join(k, protocols=[T_U]), "join_response")["generation"]
            d.send(type="sync", member_id=k, generation=generation)
    group = d.consumer.groups[G]
    assert group.state() == "Stable" and group.group_epoch == group.assignment_epoch == 2
    assert {m.member_epoch for m in group.members.values()} == {2}
    return d, k


@pytest.mark.parametrize("changed", [False, True], ids=["same subscription", "subscription changed"])
def test_a_classic_static_member_replacing_the_last_consumer_protocol_member_downgrades_the_group(changed):
    """testLastStaticConsumerProtocolMemberReplacedByClassicProtocolMember: in one write, the replacement (the old
    member's records deleted, the new member's written with its assignment, at epoch 0), the new member's metadata
    and -- same subscription -- its assignment reconciled to the target or -- changed -- a new group epoch; then the
    consumer group's tombstones with the new member in the old one's place, and the classic group's GroupMetadata:
    at the group epoch before the JoinGroup, the other members first (the first leads), the new one last with the
    old one's target. Stable, or rebalancing when the subscription changed (no target was computed for it)."""
    d, k = static_consumer_and_classic()
    group = d.consumer.groups[G]
    k_target, c1_target = (d.consumer._pairs(group.target[m]) for m in (k, "c1"))
    c1_held = sorted(p for ps in d.member("c1").assigned_partitions.values() for p in ps)
    before = classic_members.timeline_order(group)  # the member table the JoinGroup found
    d.ts += 100
    out = d.join(client_id="k9", group_instance_id="i1", protocols=[T_U if changed else RANGE])
    new = last(out, "join_response")["member_id"]
    assert d.model.protocol == "classic" and last(out, "member_replaced")["previous_member_id"] == "c1"
    replacing = [
        (R.CURRENT_MEMBER_ASSIGNMENT, "c1", "tombstone"),
        (R.TARGET_ASSIGNMENT_MEMBER, "c1", "tombstone"),
        (R.MEMBER_METADATA, "c1", "tombstone"),
        (R.MEMBER_METADATA, new, None),
        (R.TARGET_ASSIGNMENT_MEMBER, new, None),
        (R.CURRENT_MEMBER_ASSIGNMENT, new, None),
    ]
    update = [(R.MEMBER_METADATA, new, None)]
    update += [(R.METADATA, None, None)] if changed else [(R.CURRENT_MEMBER_ASSIGNMENT, new, None)]
    table = [new if m == "c1" else m for m in before]
    downgrade = [(R.CURRENT_MEMBER_ASSIGNMENT, m, "tombstone") for m in table]
    downgrade += [(R.TARGET_ASSIGNMENT_MEMBER, m, "tombstone") for m in table]
    downgrade += [(R.TARGET_ASSIGNMENT_METADATA, None, "tombstone")]
    downgrade += [(R.MEMBER_METADATA, m, "tombstone") for m in table]
    downgrade += [(R.PARTITION_METADATA, None, "tombstone"), (R.METADATA, None, "tombstone")]
    downgrade += [("group_metadata", None, None)]
    assert records(out) == replacing + update + downgrade
    written = [o for o in out if R.is_record(o)]
    assert written[5]["memberEpoch"] == 0 and parts(written[5]) == c1_held  # it takes c1's place as it was
    if changed:
        assert written[7]["epoch"] == 3
    else:
        assert written[7]["memberEpoch"] == 2 and written[7]["state"] == 0
    metadata = last(out, "group_metadata")
    assert metadata["generation"] == 2 and metadata["protocol"] == "range" and metadata["leader"] == k
    # (the record lists the members in the classic group's HashMap order, as the classic model writes it)
    assert {m["member_id"]: (m["group_instance_id"], m["client_id"]) for m in metadata["members"]} == {
        k: (None, "k"),
        new: ("i1", "k9"),
    }
    assert {m["member_id"]: m["assignment"]["partitions"] for m in metadata["members"]} == {k: k_target, new: c1_target}
    switch = last(out, "protocol_switch")
    assert (switch["from"], switch["to"]) == ("consumer", "classic") and switch["reason"].startswith("downgrade: ")
    classic = d.classic.groups[G]
    # The answer: the new member's epoch as its generation, its first protocol, no leader.
    answer = last(out, "join_response")
    assert (answer["error"], answer["protocol"], answer["leader"]) == ("NONE", "range", "")
    d.ts += 100
    beat = last(d.send(type="heartbeat", member_id=k, generation=2), "heartbeat_response")
    if changed:
        assert classic.state.value == "PreparingRebalance" and answer["generation"] == 0
        assert beat["error"] == "REBALANCE_IN_PROGRESS"
        assert (
            last(out, "state_change")["reason"]
            == f"Downgrade group {G} from consumer to classic with stale assignment."
        )
    else:
        assert classic.state.value == "Stable" and answer["generation"] == 2
        assert beat["error"] == "NONE"  # k's session runs in the classic group
        synced = last(d.send(type="sync", member_id=new, generation=2, group_instance_id="i1"), "sync_response")
        assert synced["error"] == "NONE" and sorted(map(list, synced["assignment"])) == c1_target


INTERVAL = {"group.consumer.assignment.interval.ms": 1_000}


def replaced_by_classic_into_a_rebalance(d: Driver, epoch: int) -> dict[str, list]:
    """k9, classic, takes instance i1's place 100 ms on: the classic group the downgrade makes, at the consumer
    group's epoch, rebalances; each member's assignment (client id -> partitions) in its GroupMetadata."""
    d.ts += 100
    out = d.join(client_id="k9", group_instance_id="i1", protocols=[T_U])
    metadata = last(out, "group_metadata")
    assert metadata["generation"] == epoch and d.classic.groups[G].state.value == "PreparingRebalance"
    return {m["client_id"]: m["assignment"]["partitions"] for m in metadata["members"]}


def test_the_downgrade_rebalances_when_the_target_assignment_is_stale():
    """...WhenTargetAssignmentIsStale: c1 changed its subscription within group.consumer.assignment.interval.ms of
    the last target (a new group epoch, no target yet): the classic group starts at that epoch and rebalances at
    once; each member's assignment is its last target."""
    d, k = static_consumer_and_classic(**INTERVAL)
    group = d.consumer.groups[G]
    owned = [{"topic_id": t, "partitions": sorted(p)} for t, p in d.member("c1").assigned_partitions.items()]
    d.ts += 100
    d.hb("c1", 2, subscribed_topic_names=["t", "u"], topic_partitions=owned)  # a new target at once: epoch 3
    targets = {m: d.consumer._pairs(group.target[m]) for m in (k, "c1")}
    d.ts += 100
    d.hb("c1", d.member("c1").member_epoch, subscribed_topic_names=["t"])  # within the interval: epoch 4, no target
    epoch = group.group_epoch
    assert epoch == group.assignment_epoch + 1
    assignments = replaced_by_classic_into_a_rebalance(d, epoch)
    assert assignments == {"k": targets[k], "k9": targets["c1"]}


def test_the_downgrade_rebalances_when_a_member_has_no_target_yet():
    """...WhenTargetAssignmentIsMissing: k joined within the interval of c1's target (no target for it): the classic
    group rebalances, k with nothing, the new member with all c1 had."""
    d = Driver(**INTERVAL)
    d.send(type="topic_metadata", topic="u", partitions=2, topic_id="AAAAAAAAAAAAAAAAAAAAAg")
    d.hb("c1", instance_id="i1", subscribed_topic_names=["t", "u"])  # the first target: c1 takes all
    d.ts += 100
    d.classic_member("k", protocols=[T_U])
    group = d.consumer.groups[G]
    epoch = group.group_epoch
    assert epoch == group.assignment_epoch + 1
    assignments = replaced_by_classic_into_a_rebalance(d, epoch)
    assert assignments == {"k": [], "k9": [["t", p] for p in range(4)] + [["u", 0], ["u", 1]]}


def test_no_downgrade_when_the_static_member_replaced_is_not_the_last_of_the_consumer_protocol():
    """allMembersUseClassicProtocolExcept(replacedMember): with another consumer-protocol member, or when the policy
    forbids it, the classic member takes the static member's place in the consumer group."""
    for settings, others in (({}, ["c2"]), ({"group.consumer.migration.policy": "upgrade"}, [])):
        d = Driver(**settings)
        d.hb("c1", instance_id="i1")
        for c in others:
            d.hb(c)
        d.classic_member("k")
        d.ts += 100
        out = d.join(client_id="k9", group_instance_id="i1")
        assert d.model.protocol == "consumer" and "protocol_switch" not in kinds(out)
        assert last(out, "member_replaced")["previous_member_id"] == "c1"
        assert last(out, "join_response")["error"] == "NONE"


def consumer_group_with_classic_static_member() -> tuple[Driver, str]:
    """c1 (consumer protocol) and s (classic, static: instance i0, joined without an id), Stable at epoch 2."""
    d = Driver()
    d.hb("c1")
    s = last(d.join(client_id="s", group_instance_id="i0"), "join_response")["member_id"]
    for _ in range(4):  # c1 gives up what s gets; s rejoins for it and syncs
        d.ts += 500
        owned = [{"topic_id": t, "partitions": sorted(p)} for t, p in d.member("c1").assigned_partitions.items()]
        d.hb("c1", d.member("c1").member_epoch, topic_partitions=owned)
        beat = d.send(type="heartbeat", member_id=s, generation=d.member(s).member_epoch)
        if last(beat, "heartbeat_response")["error"] == "REBALANCE_IN_PROGRESS":
            generation = last(d.join(s, client_id="s", group_instance_id="i0"), "join_response")["generation"]
            d.send(type="sync", member_id=s, generation=generation, group_instance_id="i0")
    group = d.consumer.groups[G]
    assert group.state() == "Stable" and group.group_epoch == 2 and d.member(s).member_epoch == 2
    return d, s


def test_a_classic_static_member_restarted_takes_its_place_in_the_consumer_group():
    """testJoiningConsumerGroupReplacingExistingStaticMember: the instance's JoinGroup without an id replaces the
    static member in one write -- its three tombstones, the new member's metadata, target and current assignment
    (epoch 0, the old one's partitions), then its own metadata and its assignment at the group epoch -- and is
    answered at that epoch with its first protocol. No new group epoch."""
    d, s = consumer_group_with_classic_static_member()
    held = sorted(p for ps in d.member(s).assigned_partitions.values() for p in ps)
    d.ts += 100
    out = d.join(client_id="s2", group_instance_id="i0")
    answer = last(out, "join_response")
    new = answer["member_id"]
    assert records(out) == [
        (R.CURRENT_MEMBER_ASSIGNMENT, s, "tombstone"),
        (R.TARGET_ASSIGNMENT_MEMBER, s, "tombstone"),
        (R.MEMBER_METADATA, s, "tombstone"),
        (R.MEMBER_METADATA, new, None),
        (R.TARGET_ASSIGNMENT_MEMBER, new, None),
        (R.CURRENT_MEMBER_ASSIGNMENT, new, None),
        (R.MEMBER_METADATA, new, None),
        (R.CURRENT_MEMBER_ASSIGNMENT, new, None),
    ]
    written = [o for o in out if R.is_record(o)]
    assert (written[5]["memberEpoch"], parts(written[5])) == (0, held)
    assert (written[3]["clientId"], written[6]["clientId"]) == ("s", "s2")  # the copy first, then its own
    assert (written[7]["memberEpoch"], written[7]["previousMemberEpoch"], parts(written[7])) == (2, 0, held)
    assert (answer["error"], answer["generation"], answer["protocol"]) == ("NONE", 2, "range")
    assert d.consumer.groups[G].group_epoch == 2


def test_a_known_member_joining_with_an_unknown_instance_id_is_refused():
    """testStaticMemberJoiningConsumerGroupWithUnknownInstanceId: a new static member comes without an id; a member
    id with an instance id no member has is UNKNOWN_MEMBER_ID (throwIfStaticMemberIsUnknown)."""
    d, k0, _ = upgraded()
    out = d.join(k0, client_id="k0", group_instance_id="i9")
    assert last(out, "join_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert d.member(k0).instance_id is None


def test_a_static_members_classic_join_reported_from_its_answer_takes_its_place_under_the_answers_id():
    """An observer's feed (the cluster feed) reports a classic JoinGroup from the broker's answer: the member id the
    broker drew for the instance's JoinGroup, which came without one, and the epoch it answered. The model takes the
    static member's place under that id, as for the request itself; a JoinGroup sent with an id that is not the
    static member's is still fenced (a zombie's)."""
    d = Driver()
    d.hb("c1", instance_id="i1")
    d.hb("c2")
    d.ts += 100
    fenced = d.join("k-zombie", client_id="k9", group_instance_id="i1")
    assert last(fenced, "join_response")["error"] == "FENCED_INSTANCE_ID"
    out = d.join("k-drawn", client_id="k9", group_instance_id="i1", generation=d.member("c1").member_epoch)
    assert last(out, "join_response")["error"] == "NONE"
    assert (last(out, "member_replaced")["previous_member_id"], last(out, "member_replaced")["member_id"]) == (
        "c1",
        "k-drawn",
    )
    assert "c1" not in d.consumer.groups[G].members and d.member("k-drawn").instance_id == "i1"


@pytest.mark.parametrize(
    "names, regex, joins_with",
    [(["t"], "u.*", ["t"]), ([], "t.*", [])],
    ids=["same subscription", "subscription changed"],
)
def test_a_classic_member_replacing_a_static_member_with_a_regex_deletes_the_regex(names, regex, joins_with):
    """testConsumerMemberWithRegexReplacedByClassicMemberWith{Same,Changed}Subscription: a classic JoinGroup under
    the instance id of a consumer-protocol member with a regex (another member of that protocol stays: no
    downgrade) -- the replacement, the new member's metadata without the regex, the regex's tombstone (the member
    replaced was its one subscriber), a new group epoch, the new target."""
    d = Driver()
    d.send(type="topic_metadata", topic="u", partitions=2, topic_id="AAAAAAAAAAAAAAAAAAAAAg")
    d.hb("c1", instance_id="i1", subscribed_topic_names=names, subscribed_topic_regex=regex)
    d.hb("c2")
    group = d.consumer.groups[G]
    assert regex in group.resolved_regexes
    epoch = group.group_epoch
    d.ts += 100
    out = d.join(client_id="k9", group_instance_id="i1", protocols=[{**RANGE, "topics": joins_with}])
    new = last(out, "member_replaced")["member_id"]
    kept = [r for r in records(out) if r[0] != "consumer_group_partition_metadata"]  # Kafka 4.1+ writes none
    assert kept[:9] == [
        ("consumer_group_current_member_assignment", "c1", "tombstone"),
        ("consumer_group_target_assignment_member", "c1", "tombstone"),
        ("consumer_group_member_metadata", "c1", "tombstone"),
        ("consumer_group_member_metadata", new, None),
        ("consumer_group_target_assignment_member", new, None),
        ("consumer_group_current_member_assignment", new, None),
        ("consumer_group_member_metadata", new, None),
        ("consumer_group_regular_expression", None, "tombstone"),
        ("consumer_group_metadata", None, None),
    ]
    regex_tombstone = next(o for o in out if o["type"] == "consumer_group_regular_expression")
    assert regex_tombstone["regular_expression"] == regex
    assert last(out, "consumer_group_metadata")["epoch"] == epoch + 1
    assert regex not in group.resolved_regexes and d.member(new).subscribed_topic_regex == ""
    assert d.model.protocol == "consumer" and last(out, "join_response")["error"] == "NONE"
