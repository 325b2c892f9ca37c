"""Offset commits of consumer-protocol (KIP-848) groups: the consumer model's OffsetCommit, offsets expiry and group
cleanup, DeleteGroups with offsets, restore from records, the state, and the routing between the two models.

Expectations ported from Kafka 4.0 (named on each test): OffsetMetadataManagerTest (testConsumerGroupOffsetCommit,
...WithStaleMemberEpoch, ...WithUnknownMemberId, ...FromAdminClient, ...WithOffsetMetadataTooLarge,
testOffsetCommitWithUnknownGroup, testCleanupExpiredOffsets, testDeleteGroupAllOffsets), ConsumerGroupTest
(testValidateOffsetCommit, testOffsetExpirationCondition, testIsSubscribedToTopic), GroupMetadataManagerTest
(testConsumerGroupMaybeDelete) and GroupCoordinatorShardTest (testCleanupGroupMetadata: offsets' tombstones, then
the group's).
"""

from __future__ import annotations

import pytest

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.coordinator.consumer import records as R
from streaming.coordinator.routing import Configs, GroupModels
from tests.consumer_harness import Harness, member, records

G = "fooup"  # the harness's group (Kafka's tests say "foo")
MINUTE = 60_000


def commit(h: Harness, member_id="member", epoch=10, offsets=(("bar", 0, 100),), group_id=G, **fields):
    offsets = [o if isinstance(o, dict) else {"topic": o[0], "partition": o[1], "offset": o[2]} for o in offsets]
    return h.event(type="commit", group_id=group_id, member_id=member_id, generation=epoch, offsets=offsets, **fields)


def one(outputs, kind):
    found = [o for o in outputs if o["type"] == kind]
    assert len(found) == 1, (kind, outputs)
    return found[0]


def of_type(outputs, kind):
    return [o for o in outputs if o["type"] == kind]


def offset_records(outputs):
    return [{k: v for k, v in o.items() if k != "ts"} for o in of_type(outputs, "offset_commit")]


def empty_group(h: Harness, epoch=10):
    """Kafka's getOrMaybeCreatePersistedConsumerGroup / ConsumerGroupBuilder(groupId, epoch): no member."""
    h.c.load_records([R.epoch(G, epoch), R.target_assignment_epoch(G, epoch)], h.ts)


def group_with_member(h: Harness, epoch=10, topics=("bar",), **fields):
    m = member("member", member_epoch=epoch, previous_member_epoch=epoch, subscribed_topic_names=list(topics), **fields)
    h.seed(G, epoch, [m], {"member": {}})


# ---------------------------------------------------------------- testConsumerGroupOffsetCommit
def test_commit_at_the_member_epoch():
    h = Harness({"bar": 2})
    group_with_member(h)
    h.ts = 1_000
    out = commit(
        h, offsets=[{"topic": "bar", "partition": 0, "offset": 100, "leader_epoch": 10, "metadata": "metadata"}]
    )
    assert one(out, "commit_response") == {
        "type": "commit_response",
        "group_id": G,
        "ts": 1_000,
        "member_id": "member",
        "group_instance_id": None,
        "error": "NONE",
        "partitions": [["bar", 0, "NONE"]],
    }
    assert offset_records(out) == [
        {
            "type": "offset_commit",
            "group_id": G,
            "topic": "bar",
            "partition": 0,
            "offset": 100,
            "leader_epoch": 10,
            "metadata": "metadata",
            "commit_timestamp": 1_000,
            "expire_timestamp": -1,
            "tombstone": False,
        }
    ]
    assert [o["type"] for o in out] == ["offset_commit", "commit_response"]  # the record, then the answer
    assert h.c.fetch_offsets(G) == {("bar", 0): {"offset": 100, "leader_epoch": 10, "metadata": "metadata"}}


# ---------------------------------------------------------------- testConsumerGroupOffsetCommitWithStaleMemberEpoch
@pytest.mark.parametrize("epoch", [9, 11])
def test_commit_with_a_stale_member_epoch(epoch):
    h = Harness({"bar": 2})
    group_with_member(h)
    out = commit(h, epoch=epoch)
    assert one(out, "commit_response")["error"] == "STALE_MEMBER_EPOCH"
    assert one(out, "commit_response")["partitions"] == [["bar", 0, "STALE_MEMBER_EPOCH"]]
    assert not of_type(out, "offset_commit") and h.c.fetch_offsets(G) == {}


# ---------------------------------------------------------------- testConsumerGroupOffsetCommitWithUnknownMemberId
def test_commit_of_an_unknown_member():
    h = Harness({"bar": 2})
    empty_group(h)
    assert one(commit(h, epoch=10), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"  # an epoch, nobody there
    group_with_member(h)
    assert one(commit(h, member_id="ghost"), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert h.c.fetch_offsets(G) == {}


# ---------------------------------------------------------------- testConsumerGroupOffsetCommitFromAdminClient
def test_admin_commit_to_an_empty_group():
    h = Harness({"bar": 2})
    empty_group(h)
    out = commit(h, member_id="", epoch=-1)
    assert one(out, "commit_response")["error"] == "NONE"
    assert offset_records(out) == [
        {
            "type": "offset_commit",
            "group_id": G,
            "topic": "bar",
            "partition": 0,
            "offset": 100,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": h.ts,
            "expire_timestamp": -1,
            "tombstone": False,
        }
    ]


# ---------------------------------------------------------------- ConsumerGroupTest.testValidateOffsetCommit
def test_commit_validation_in_kafkas_order():
    h = Harness({"bar": 2})
    empty_group(h)
    assert one(commit(h, member_id="", epoch=-1), "commit_response")["error"] == "NONE"  # the admin client
    assert one(commit(h, member_id="member-id", epoch=0), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    group_with_member(h, epoch=0)
    # The group has a member: the admin client (and a consumer without group management) may not commit.
    assert one(commit(h, member_id="", epoch=-1), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert (
        one(commit(h, member_id="", epoch=-1, group_instance_id="i"), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    )
    for version in (None, 9, 10):
        assert one(commit(h, epoch=10, api_version=version), "commit_response")["error"] == "STALE_MEMBER_EPOCH"
        assert one(commit(h, epoch=0, api_version=version), "commit_response")["error"] == "NONE"
    for version in (0, 1, 5, 8):  # a consumer-protocol member must use OffsetCommit v9+, whatever its epoch
        assert one(commit(h, epoch=10, api_version=version), "commit_response")["error"] == "UNSUPPORTED_VERSION"
        assert one(commit(h, epoch=0, api_version=version), "commit_response")["error"] == "UNSUPPORTED_VERSION"
    # The member is found before the version is checked, and the instance id is not checked at all.
    assert one(commit(h, member_id="ghost", epoch=0, api_version=8), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(commit(h, epoch=0, group_instance_id="someone-else"), "commit_response")["error"] == "NONE"


# -------------------------------------------------------------- testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge
def test_metadata_too_large():
    h = Harness({"bar": 2}, offset_metadata_max_bytes=5)
    group_with_member(h)
    out = commit(
        h,
        offsets=[
            {"topic": "bar", "partition": 0, "offset": 100, "leader_epoch": 10, "metadata": "toolarge"},
            {"topic": "bar", "partition": 1, "offset": 100, "leader_epoch": 10, "metadata": "small"},
        ],
    )
    answer = one(out, "commit_response")
    assert answer["error"] == "NONE"
    assert answer["partitions"] == [["bar", 0, "OFFSET_METADATA_TOO_LARGE"], ["bar", 1, "NONE"]]
    assert [(r["partition"], r["metadata"]) for r in offset_records(out)] == [(1, "small")]
    # Each entry is judged on its own (OffsetMetadataManager.commitOffset): a partition named twice, once with
    # metadata too large, is refused once and stored once.
    out = commit(
        h,
        offsets=[
            {"topic": "bar", "partition": 0, "offset": 7, "leader_epoch": 10, "metadata": "ok"},
            {"topic": "bar", "partition": 0, "offset": 8, "leader_epoch": 10, "metadata": "toolarge"},
        ],
    )
    assert one(out, "commit_response")["partitions"] == [["bar", 0, "NONE"], ["bar", 0, "OFFSET_METADATA_TOO_LARGE"]]
    assert [(r["partition"], r["offset"]) for r in offset_records(out)] == [(0, 7)]


# ---------------------------------------------------------------- testOffsetCommitWithUnknownGroup
def test_commit_to_a_group_the_model_does_not_hold():
    h = Harness({"bar": 2})
    assert one(commit(h), "commit_response")["error"] == "ILLEGAL_GENERATION"  # version not stated
    assert one(commit(h, api_version=8), "commit_response")["error"] == "ILLEGAL_GENERATION"
    assert one(commit(h, api_version=9), "commit_response")["error"] == "GROUP_ID_NOT_FOUND"
    # Without an epoch Kafka creates a simple classic group: not this model's (routing gives it to the classic one).
    assert one(commit(h, member_id="", epoch=-1), "ignored_event")["event_type"] == "commit"
    assert not h.c.groups and not h.c.offsets


def test_a_commit_does_not_keep_the_member_alive():
    """OffsetMetadataManager.commitOffset reschedules the heartbeat of classic groups only."""
    h = Harness({"bar": 2}, scripted=False)
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    h.ts = 44_000
    assert one(commit(h, member_id="m", epoch=epoch), "commit_response")["error"] == "NONE"
    assert h.c.next_deadline(G) == 45_000 and h.c.soft[G].last_heartbeat["m"] == 0
    out = h.advance(45_000)
    assert one(out, "member_expired")["reason"] == "session timeout"
    assert h.c.fetch_offsets(G) == {("bar", 0): {"offset": 100, "leader_epoch": -1, "metadata": ""}}


# ---------------------------------------------------------------- testCleanupExpiredOffsets / testIsSubscribedToTopic
def test_offsets_expire_by_commit_time_except_the_subscribed_topics():
    """A minute's retention. While a member subscribes to firstTopic its offsets stay, however old; secondTopic's
    go a minute after each commit (ConsumerGroup.offsetExpirationCondition: the commit timestamp, whatever the
    group's state). When nobody subscribes to firstTopic any more, its old offset goes at once."""
    h = Harness(
        {"firstTopic": 2, "secondTopic": 2},
        scripted=False,
        offsets_retention_minutes=1,
        group_consumer_session_timeout_ms=10 * MINUTE,
    )
    epoch = h.join("m", ["firstTopic"])[0]["member_epoch"]
    start = h.ts = 1_000
    commit(h, "m", epoch, [("firstTopic", 0, 100), ("secondTopic", 0, 100)])
    h.ts = start + 500
    commit(h, "m", epoch, [("secondTopic", 1, 100)])
    assert h.c.next_deadline(G) == start + MINUTE  # secondTopic-0; firstTopic-0 never while subscribed
    out = h.advance(start + MINUTE)
    assert offset_records(out) == [
        {
            "type": "offset_commit",
            "group_id": G,
            "topic": "secondTopic",
            "partition": 0,
            "tombstone": True,
            "reason": "retention",
        }
    ]
    assert out[0]["ts"] == start + MINUTE
    out = h.advance(start + MINUTE + 500)
    assert [(r["topic"], r["partition"]) for r in offset_records(out)] == [("secondTopic", 1)]
    assert set(h.c.fetch_offsets(G)) == {("firstTopic", 0)} and h.c.soft[G].retention is None
    h.advance(start + 5 * MINUTE)
    assert set(h.c.fetch_offsets(G)) == {("firstTopic", 0)}
    # The member subscribes to secondTopic instead: firstTopic's offset is long past its retention.
    h.ts = start + 5 * MINUTE + 1
    answer, _, out = h.hb("m", epoch, subscribed_topic_names=["secondTopic"], topic_partitions=[])
    assert answer["error"] == "NONE" and h.c.next_deadline(G) == start + MINUTE  # past: the next advance takes it
    out = h.advance(h.ts)
    assert [(r["topic"], r["partition"], r["tombstone"]) for r in offset_records(out)] == [("firstTopic", 0, True)]
    assert h.c.fetch_offsets(G) == {} and G in h.c.groups  # the group has a member: it stays


def test_a_regex_subscription_keeps_its_topics_offsets():
    h = Harness(
        {"orders": 1, "audit": 1},
        scripted=False,
        offsets_retention_minutes=1,
        group_consumer_session_timeout_ms=10 * MINUTE,
    )
    answer, _, _ = h.hb("m", 0, rebalance_timeout_ms=5_000, subscribed_topic_regex="ord.*", topic_partitions=[])
    epoch = h.c.groups[G].members["m"].member_epoch
    assert "orders" in h.c.groups[G].subscribed_topic_names()
    h.ts = 1_000
    commit(h, "m", epoch, [("orders", 0, 5), ("audit", 0, 5)])
    h.advance(1_000 + 3 * MINUTE)
    assert set(h.c.fetch_offsets(G)) == {("orders", 0)}


def test_a_commits_own_retention_still_spares_subscribed_topics():
    """An explicit expire timestamp (OffsetCommit v2-v4's retention) replaces the retention rule, but the offsets
    of a subscribed topic are not even looked at (cleanupExpiredOffsets checks isSubscribedToTopic first)."""
    h = Harness({"bar": 1, "baz": 1}, scripted=False, group_consumer_session_timeout_ms=10 * MINUTE)
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    h.ts = 1_000
    out = commit(h, "m", epoch, [("bar", 0, 1), ("baz", 0, 1)], retention_ms=2_000)
    assert {r["expire_timestamp"] for r in offset_records(out)} == {3_000}
    out = h.advance(3_000)
    assert [(r["topic"], r["tombstone"]) for r in offset_records(out)] == [("baz", True)]
    assert set(h.c.fetch_offsets(G)) == {("bar", 0)}


# -------------------------------------------------------------- testCleanupGroupMetadata / testConsumerGroupMaybeDelete
def test_an_empty_group_is_deleted_when_its_offsets_are_gone():
    h = Harness({"bar": 2}, scripted=False, offsets_retention_minutes=1)
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    h.ts = 1_000
    commit(h, "m", epoch, [("bar", 0, 100), ("bar", 1, 50)])
    h.ts = 2_000
    h.hb("m", -1)  # the group is Empty: its offsets now expire
    assert h.c.groups[G].state() == "Empty" and h.c.next_deadline(G) == 1_000 + MINUTE
    assert h.advance(1_000 + MINUTE - 1) == []
    out = h.advance(1_000 + MINUTE)
    # The cleanup pass: the offsets' tombstones, then the group's (Kafka's createGroupTombstoneRecords order).
    assert [
        (o["type"], o.get("partition"), o.get("tombstone"))
        for o in out
        if o["type"] == "offset_commit" or R.is_record(o)
    ] == [
        ("offset_commit", 0, True),
        ("offset_commit", 1, True),
        (R.TARGET_ASSIGNMENT_METADATA, None, True),
        (R.PARTITION_METADATA, None, True),
        (R.METADATA, None, True),
    ]
    change = one(out, "state_change")
    assert (change["from"], change["to"], change["reason"]) == ("Empty", "Dead", "empty group without offsets")
    assert not h.c.groups and not h.c.offsets and not h.c.soft and h.c.next_deadline() is None


def test_an_empty_group_without_offsets_goes_at_the_cleanup_pass():
    h = Harness({"bar": 2}, scripted=False, offsets_retention_check_interval_ms=1_000)
    h.join("m", ["bar"])
    h.ts = 5_000
    h.hb("m", -1)
    assert h.c.next_deadline(G) == 6_000
    out = h.advance(6_000)
    assert [R.KAFKA_NAMES[r["type"]][0] for r in records(out)] == [
        "ConsumerGroupTargetAssignmentMetadata",
        "ConsumerGroupPartitionMetadata",
        "ConsumerGroupMetadata",
    ]
    assert not h.c.groups


def test_a_group_with_members_is_never_deleted_and_a_rejoin_keeps_the_group():
    h = Harness(
        {"bar": 2},
        scripted=False,
        offsets_retention_check_interval_ms=1_000,
        offsets_retention_minutes=1,
        group_consumer_session_timeout_ms=20 * MINUTE,
    )
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    h.ts = 500
    commit(h, "m", epoch, [("bar", 0, 100)])
    h.advance(10 * MINUTE)
    assert G in h.c.groups and h.c.fetch_offsets(G)  # subscribed offsets of a live group stay
    h.ts = 10 * MINUTE
    commit(h, "m", epoch, [("bar", 0, 200)])
    h.hb("m", -1)  # Empty: bar-0 now expires a minute after its commit
    assert h.c.soft[G].retention == 11 * MINUTE
    h.ts = 10 * MINUTE + 30_000
    answer = h.join("m2", ["bar"])[0]  # back before that: the same group, its offsets
    assert answer["member_epoch"] > epoch and h.c.soft[G].retention is None  # bar is subscribed again
    assert h.c.fetch_offsets(G)[("bar", 0)]["offset"] == 200
    h.advance(20 * MINUTE)
    assert G in h.c.groups and h.c.fetch_offsets(G)


# ---------------------------------------------------------------- testDeleteGroupAllOffsets (CONSUMER)
def test_delete_group_deletes_its_offsets_first():
    h = Harness({"bar-0": 2, "bar-1": 1}, scripted=False)
    empty_group(h)
    commit(h, "", -1, [("bar-0", 0, 100), ("bar-0", 1, 100), ("bar-1", 0, 100)])
    out = h.event(type="delete_group", group_id=G)
    kinds = [(o["type"], o.get("topic"), o.get("partition")) for o in out if o["type"] == "offset_commit"]
    assert kinds == [("offset_commit", "bar-0", 0), ("offset_commit", "bar-0", 1), ("offset_commit", "bar-1", 0)]
    assert all(o["tombstone"] and o["reason"] == "group deleted" for o in of_type(out, "offset_commit"))
    first_group_record = next(i for i, o in enumerate(out) if R.is_record(o))
    assert first_group_record == 3 and one(out, "delete_group_response")["error"] == "NONE"
    assert one(out, "state_change")["reason"] == "group deleted"
    assert not h.c.groups and not h.c.offsets


def test_delete_group_of_a_group_with_members_keeps_everything():
    h = Harness({"bar": 2}, scripted=False)
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    commit(h, "m", epoch)
    out = h.event(type="delete_group", group_id=G)
    assert one(out, "delete_group_response")["error"] == "NON_EMPTY_GROUP" and not of_type(out, "offset_commit")
    assert h.c.fetch_offsets(G)


# ---------------------------------------------------------------- restore and state
def history(retention_minutes=60):
    """Two members commit (one with a retention of its own): (harness, everything the model wrote)."""
    h = Harness({"bar": 2, "baz": 1}, scripted=False, offsets_retention_minutes=retention_minutes)
    answer, _, written = h.join("m1", ["bar"])
    h.ts = 1_000
    answer2, _, out = h.join("m2", ["bar", "baz"])
    written += out
    e1, e2 = h.c.groups[G].members["m1"].member_epoch, answer2["member_epoch"]
    h.ts = 2_000
    written += commit(h, "m1", e1, [("bar", 0, 10)])
    written += commit(h, "m2", e2, [("baz", 0, 3)], retention_ms=30 * MINUTE)
    h.ts = 3_000
    written += commit(h, "m1", e1, [("bar", 0, 11), ("bar", 1, 7)])
    assert not [o for o in written if o["type"] == "commit_response" and o["error"] != "NONE"]
    return h, written


def stored(outputs):
    """What the store keeps: consumer-group and offset records (the codec ignores ``ts``; tombstones delete)."""
    return [o for o in outputs if R.is_record(o) or o["type"] == "offset_commit"]


def leave_all(c: ConsumerGroupCoordinator, ts: int) -> None:
    for m in list(c.groups[G].members):
        c.handle(
            parse_event({"type": "consumer_heartbeat", "group_id": G, "member_id": m, "ts": ts, "member_epoch": -1})[0]
        )


def test_restore_from_records_keeps_offsets_and_retention():
    h, written = history()
    # Another group's offsets only (a classic simple group's) are not the consumer model's.
    other = [
        {
            "type": "offset_commit",
            "group_id": "simple",
            "topic": "t",
            "partition": 0,
            "offset": 1,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": 0,
            "expire_timestamp": -1,
            "tombstone": False,
        }
    ]
    loaded = ConsumerGroupCoordinator(h.c.config)
    loaded.load_records(other + stored(written), 10_000)
    assert set(loaded.groups) == {G} and set(loaded.offsets) == {G}
    assert loaded.offsets[G] == h.c.offsets[G]  # offsets, commit and expire timestamps
    # A member commits on at its epoch after the load.
    epoch = h.c.groups[G].members["m1"].member_epoch
    out = loaded.handle(
        parse_event(
            {
                "type": "commit",
                "group_id": G,
                "member_id": "m1",
                "generation": epoch,
                "ts": 11_000,
                "offsets": [{"topic": "bar", "partition": 0, "offset": 12}],
            }
        )[0]
    )
    assert one(out, "commit_response")["error"] == "NONE"
    # Everyone leaves: the group is Empty, and retention counts from each commit, loaded or not.
    leave_all(loaded, 12_000)
    assert loaded.next_deadline(G) == 2_000 + 30 * MINUTE  # baz-0's own retention comes first
    out = loaded.advance(3_000 + 60 * MINUTE)
    assert [(o["topic"], o["partition"]) for o in of_type(out, "offset_commit")] == [("baz", 0), ("bar", 1)]
    assert set(loaded.fetch_offsets(G)) == {("bar", 0)}  # committed again at 11 s
    # Tombstones in the records delete the offsets they name.
    again = ConsumerGroupCoordinator(h.c.config)
    again.load_records(
        stored(written) + [{"type": "offset_commit", "group_id": G, "topic": "bar", "partition": 1, "tombstone": True}],
        10_000,
    )
    assert set(again.fetch_offsets(G)) == {("bar", 0), ("baz", 0)}


def test_a_group_loaded_empty_goes_one_interval_after_the_load():
    h = Harness({"bar": 2}, scripted=False)
    written = h.join("m", ["bar"])[2] + h.hb("m", -1)[2]
    loaded = ConsumerGroupCoordinator(h.c.config)
    loaded.load_records(stored(written), 50_000)
    assert loaded.next_deadline(G) == 50_000 + 600_000
    assert one(loaded.advance(650_000), "state_change")["to"] == "Dead"


def test_state_round_trip_keeps_offsets_and_the_cleanup():
    h, _ = history(retention_minutes=1)
    h.ts = 4_000
    leave_all(h.c, 4_000)
    data = h.c.to_bytes()
    back = ConsumerGroupCoordinator.from_bytes(data, h.c.config)
    assert back.offsets == h.c.offsets and back.soft[G].retention == h.c.soft[G].retention == 3_000 + MINUTE
    assert back.soft[G].empty_since == 4_000
    assert back.to_bytes() == data
    assert back.advance(40 * MINUTE) == h.c.advance(40 * MINUTE)  # the same expiries, then the same deletion
    assert not back.groups
    # A state written before offsets were modelled (no offsets, no cleanup fields) still loads.
    d = ConsumerGroupCoordinator.from_bytes(data, h.c.config).to_dict()
    for entry in d["groups"]:
        entry.pop("offsets")
        entry["soft"].pop("retention")
        entry["soft"].pop("empty_since")
    old = ConsumerGroupCoordinator.from_dict(d, h.c.config)
    assert old.offsets == {} and old.soft[G].retention is None


def test_state_stays_small():
    """Offsets are rows in the state, not dicts: ~40 bytes a partition compressed."""
    h = Harness({"bar": 200}, scripted=False)
    epoch = h.join("m", ["bar"])[0]["member_epoch"]
    before = len(h.c.to_bytes())
    commit(h, "m", epoch, [("bar", p, 1_000_000 + p) for p in range(200)])
    assert (len(h.c.to_bytes()) - before) / 200 < 40


# ---------------------------------------------------------------- through the router (streaming.coordinator.routing)
class Router:
    def __init__(self, **settings):
        self.models = GroupModels(Configs.from_properties(settings))
        self.ts = 1_000

    def send(self, **fields):
        fields.setdefault("group_id", G)
        fields.setdefault("ts", self.ts)
        event, error = parse_event(fields)
        assert error is None, error
        return self.models.handle(event)

    def join(self, member_id, topics=("bar",)):
        out = self.send(
            type="consumer_heartbeat",
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=5_000,
            subscribed_topic_names=list(topics),
            topic_partitions=[],
        )
        return one(out, "consumer_heartbeat_response")["member_epoch"]

    def commit(self, member_id="", epoch=-1, offsets=(("bar", 0, 1),), **fields):
        return self.send(
            type="commit",
            member_id=member_id,
            generation=epoch,
            offsets=[{"topic": t, "partition": p, "offset": o} for t, p, o in offsets],
            **fields,
        )

    @property
    def model(self):
        return self.models.models[G]


def test_commits_reach_the_consumer_model_through_the_router():
    r = Router()
    r.send(type="topic_metadata", topic="bar", partitions=2)
    epoch = r.join("m")
    out = r.commit("m", epoch)
    assert one(out, "commit_response")["error"] == "NONE" and one(out, "offset_commit")["offset"] == 1
    assert one(r.commit("m", epoch + 1), "commit_response")["error"] == "STALE_MEMBER_EPOCH"
    assert one(r.commit("ghost", epoch), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(r.commit(), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"  # no admin commit: a member is in
    assert r.model.protocol == "consumer" and r.model.model.fetch_offsets(G)[("bar", 0)]["offset"] == 1
    assert not [o for o in out if o["type"] == "ignored_event"]


def test_a_simple_group_becomes_a_consumer_group_with_its_offsets():
    """An admin commit to a group that does not exist makes a simple classic group (Kafka does the same); a
    ConsumerGroupHeartbeat then replaces the Empty group, and its offsets go on under the consumer model's rule."""
    r = Router(**{"offsets.retention.minutes": "1", "group.consumer.session.timeout.ms": str(10 * MINUTE)})
    out = r.commit(offsets=[("bar", 0, 5), ("old", 0, 9)])
    assert one(out, "commit_response")["error"] == "NONE" and r.model.protocol == "classic"
    r.ts = 2_000
    r.send(type="topic_metadata", topic="bar", partitions=1)
    epoch = r.join("m")
    assert r.model.protocol == "consumer"
    consumer = r.model.model
    assert set(consumer.fetch_offsets(G)) == {("bar", 0), ("old", 0)}
    assert consumer.soft[G].retention == 1_000 + MINUTE  # "old" is not subscribed: a minute after its commit
    out = r.models.advance(1_000 + MINUTE)
    assert [(o["topic"], o["tombstone"]) for o in of_type(out, "offset_commit")] == [("old", True)]
    assert one(r.commit("m", epoch, [("bar", 0, 6)]), "commit_response")["error"] == "NONE"


def test_an_empty_consumer_group_becomes_a_classic_group_with_its_offsets():
    r = Router()
    r.send(type="topic_metadata", topic="bar", partitions=1)
    epoch = r.join("m")
    r.commit("m", epoch, [("bar", 0, 42)])
    r.send(type="consumer_heartbeat", member_id="m", member_epoch=-1)
    out = r.send(type="join", member_id="", session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["bar"]}])
    assert one(out, "protocol_switch")["to"] == "classic" and not of_type(out, "offset_commit")  # no tombstones
    assert r.model.model.fetch_offsets(G)[("bar", 0)]["offset"] == 42


def test_a_commit_to_a_deleted_consumer_group_is_the_classic_models():
    r = Router(**{"offsets.retention.check.interval.ms": "1000"})
    r.send(type="topic_metadata", topic="bar", partitions=1)
    r.join("m")
    r.send(type="consumer_heartbeat", member_id="m", member_epoch=-1)
    r.ts = 5_000  # the cleanup pass deleted the Empty group
    assert one(r.commit("m", 1, api_version=9), "commit_response")["error"] == "GROUP_ID_NOT_FOUND"
    out = r.commit()
    assert one(out, "commit_response")["error"] == "NONE" and r.model.protocol == "classic"


def test_shared_offsets_settings_reach_both_models():
    configs = Configs.from_properties(
        {
            "offsets.retention.minutes": "3",
            "offset.metadata.max.bytes": "7",
            "offsets.retention.check.interval.ms": "1000",
        }
    )
    for config in (configs.classic, configs.consumer):
        assert (
            config.offsets_retention_ms,
            config.offset_metadata_max_bytes,
            config.offsets_retention_check_interval_ms,
        ) == (3 * MINUTE, 7, 1_000)
    from streaming.coordinator import CoordinatorConfig

    assert Configs.of(CoordinatorConfig(offsets_retention_minutes=2)).consumer == ConsumerGroupConfig(
        offsets_retention_minutes=2
    )


def test_restore_gives_a_consumer_group_its_offsets():
    """restore.group_states: a consumer group's state carries the offsets the store holds for it (not an
    offsets-only classic group of them)."""
    from streaming.coordinator.routing import GroupModel
    from streaming.spark.restore import group_states

    r = Router()
    outputs = r.send(type="topic_metadata", topic="bar", partitions=1)
    outputs += r.send(
        type="consumer_heartbeat",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=["bar"],
        topic_partitions=[],
    )
    outputs += r.commit("m", 1, [("bar", 0, 77)])
    states = group_states(stored(outputs), 20_000, Configs())
    model = GroupModel.from_bytes(states[G], Configs())
    assert model.protocol == "consumer" and model.model.fetch_offsets(G)[("bar", 0)]["offset"] == 77
