"""The KIP-848 consumer group coordinator, scenario by scenario.

Expectations ported from Kafka 4.0's GroupMetadataManagerTest (consumer group heartbeat cases, named on each test):
request validation, joining, epochs and fencing, static members (replacement, UNRELEASED_INSTANCE_ID, temporary
leave with -2), leave with -1, session and rebalance timeouts, subscription and topic metadata changes, regular
expressions, group size limit, the full-request answer, and the records each step writes, in Kafka's order.
"""

from __future__ import annotations

import pytest

from streaming.coordinator.consumer import MemberState
from streaming.coordinator.consumer import records as R
from tests.consumer_harness import CLIENT_HOST, CLIENT_ID, Harness, member, names, records, strip

S = MemberState
G = "fooup"


# ---------------------------------------------------------------- testConsumerHeartbeatRequestValidation
@pytest.mark.parametrize(
    "fields, error, message",
    [
        ({"member_id": ""}, "INVALID_REQUEST", "MemberId can't be empty."),
        ({"group_id": ""}, "INVALID_REQUEST", "GroupId can't be empty."),
        ({"group_id": "   "}, "INVALID_REQUEST", "GroupId can't be empty."),
        ({"member_epoch": 0}, "INVALID_REQUEST", "RebalanceTimeoutMs must be provided in first request."),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 5000},
            "INVALID_REQUEST",
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 5000, "topic_partitions": []},
            "INVALID_REQUEST",
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        ({"instance_id": ""}, "INVALID_REQUEST", "InstanceId can't be empty."),
        ({"rack_id": ""}, "INVALID_REQUEST", "RackId can't be empty."),
        (
            {"server_assignor": "bar"},
            "UNSUPPORTED_ASSIGNOR",
            "ServerAssignor bar is not supported. Supported assignors: range.",
        ),
        (
            {
                "member_epoch": -2,
                "rebalance_timeout_ms": 5000,
                "subscribed_topic_names": ["foo", "bar"],
                "topic_partitions": [],
            },
            "INVALID_REQUEST",
            "InstanceId can't be null.",
        ),
        ({"member_epoch": -3}, "INVALID_REQUEST", "MemberEpoch is invalid."),
    ],
)
def test_heartbeat_request_validation(fields, error, message):
    h = Harness()
    request = {"group_id": "foo", "member_id": "m", "member_epoch": 1, **fields}
    answer = h.hb(request.pop("member_id"), request.pop("member_epoch"), request.pop("group_id"), **request)[0]
    assert (answer["error"], answer["error_message"]) == (error, message)
    assert answer["member_epoch"] == 0 and answer["assignment"] is None
    assert not h.c.groups


# ---------------------------------------------------------------- testConsumerHeartbeatRegexValidation
def test_regex_validation():
    h = Harness()
    h.assignor.prepare({})
    answer = h.hb("m", 0, "foo", rebalance_timeout_ms=5000, subscribed_topic_regex="[", topic_partitions=[])[0]
    assert answer["error"] == "INVALID_REGULAR_EXPRESSION"
    assert answer["error_message"].startswith("SubscribedTopicRegex `[` is not a valid regular expression:")
    assert (
        h.hb("m", 0, "foo", rebalance_timeout_ms=5000, subscribed_topic_regex=".*", topic_partitions=[])[0][
            "member_epoch"
        ]
        == 1
    )
    assert (
        h.hb("m", 1, "foo", rebalance_timeout_ms=5000, subscribed_topic_regex="[", topic_partitions=[])[0]["error"]
        == "INVALID_REGULAR_EXPRESSION"
    )
    assert (
        h.hb("m", 1, "foo", rebalance_timeout_ms=5000, subscribed_topic_names=["foo"], topic_partitions=[])[0][
            "member_epoch"
        ]
        == 2
    )


# ----------------------------------------------------------- testUnknownGroupId / testUnknownMemberIdJoinsConsumerGroup
def test_unknown_group_id():
    h = Harness()
    answer = h.hb("m", 100, rebalance_timeout_ms=5000, subscribed_topic_names=["foo", "bar"], topic_partitions=[])[0]
    assert answer["error"] == "GROUP_ID_NOT_FOUND"


def test_unknown_member_id_joins_consumer_group():
    h = Harness()
    h.join("m1", ["foo", "bar"])
    assert (
        h.hb("other", 1, rebalance_timeout_ms=5000, subscribed_topic_names=["foo", "bar"], topic_partitions=[])[0][
            "error"
        ]
        == "UNKNOWN_MEMBER_ID"
    )


# ---------------------------------------------------------------- testConsumerGroupMemberEpochValidation
def test_member_epoch_validation():
    h = Harness({"foo": 6})
    m = member(
        "m",
        member_epoch=100,
        previous_member_epoch=99,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=(1, 2, 3)),
    )
    h.seed(G, 100, [m], {"m": h.A(foo=(1, 2, 3))})
    common = dict(rebalance_timeout_ms=5000, subscribed_topic_names=["foo", "bar"])
    assert h.hb("m", 200, **common)[0]["error"] == "FENCED_MEMBER_EPOCH"  # ahead of the coordinator
    assert h.hb("m", 50, **common)[0]["error"] == "FENCED_MEMBER_EPOCH"  # behind
    assert h.hb("m", 99, **common)[0]["error"] == "FENCED_MEMBER_EPOCH"  # previous epoch, owns nothing said
    # The previous epoch with a subset of its partitions: the answer with the new epoch was lost; resend it.
    answer = h.hb("m", 99, topic_partitions=[["foo", 1], ["foo", 2]], **common)[0]
    assert (answer["error"], answer["member_epoch"]) == ("NONE", 100)


def test_fenced_member_may_rejoin_with_epoch_zero():
    # KAFKA-19233 (Kafka 4.3; 4.0 answered FENCED_MEMBER_EPOCH): epoch 0 always means "(re)join".
    h = Harness({"foo": 6})
    m = member(
        "m",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo"],
        assigned_partitions=h.A(foo=range(6)),
    )
    h.seed(G, 10, [m], {"m": h.A(foo=range(6))})
    answer = h.join("m", ["foo"])[0]
    assert (answer["error"], answer["member_epoch"]) == ("NONE", 10)
    assert answer["assignment"][0]["partitions"] == list(range(6))


def test_a_new_group_starts_at_epoch_one_since_kafka_4_3():
    """KAFKA-20268 (Kafka 4.3; initial.group.epoch=1): a new group is at group and assignment epoch 1 with an empty
    target, so its first member's join makes epoch 2 -- what Apache Kafka 4.4.0 wrote (tests/test_kip848_kafka.py)."""
    h = Harness({"foo": 3}, scripted=False, initial_group_epoch=1)
    answer, recs, _ = h.join("m", ["foo"])
    assert (answer["error"], answer["member_epoch"]) == ("NONE", 2)
    epochs = [
        (r["type"], r.get("epoch", r.get("assignmentEpoch", r.get("memberEpoch"))))
        for r in recs
        if r["type"]
        in (
            "consumer_group_metadata",
            "consumer_group_target_assignment_metadata",
            "consumer_group_current_member_assignment",
        )
    ]
    assert epochs == [
        ("consumer_group_metadata", 2),
        ("consumer_group_target_assignment_metadata", 2),
        ("consumer_group_current_member_assignment", 2),
    ]
    with pytest.raises(ValueError):
        Harness(initial_group_epoch=2)


# ---------------------------------------------------------------- testMemberJoinsEmptyConsumerGroup
def test_member_joins_empty_consumer_group():
    h = Harness({"foo": 6, "bar": 3})
    foo, bar = h.id("foo"), h.id("bar")
    h.assignor.prepare({"m": {foo: range(6), bar: range(3)}})
    answer, recs, _ = h.join("m", ["foo", "bar"], server_assignor="range")
    assert answer == {**answer, "member_id": "m", "member_epoch": 1, "heartbeat_interval_ms": 5000, "error": "NONE"}
    assert answer["assignment"] == [
        {"topic_id": t, "topic": n, "partitions": list(range(p))}
        for t, n, p in sorted([(foo, "foo", 6), (bar, "bar", 3)])
    ]
    expected = member(
        "m",
        member_epoch=1,
        previous_member_epoch=0,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=range(6), bar=range(3)),
    )
    assert recs == strip(
        [
            R.member_subscription(G, expected),
            R.partition_metadata(G, {"foo": (foo, 6), "bar": (bar, 3)}),
            R.epoch(G, 1),
            R.target_assignment(G, "m", h.A(foo=range(6), bar=range(3))),
            R.target_assignment_epoch(G, 1),
            R.current_assignment(G, expected),
        ]
    )
    assert h.group().state() == "Stable"


# ---------------------------------------------------------------- testUpdatingSubscriptionTriggersNewTargetAssignment
def test_updating_subscription_triggers_new_target_assignment():
    h = Harness({"foo": 6, "bar": 3})
    m = member(
        "m",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo"],
        server_assignor="range",
        assigned_partitions=h.A(foo=range(6)),
    )
    h.seed(G, 10, [m], {"m": h.A(foo=range(6))})
    h.assignor.prepare({"m": h.A(foo=range(6), bar=range(3))})
    answer, recs, _ = h.hb("m", 10, subscribed_topic_names=["foo", "bar"])
    assert (answer["member_epoch"], len(answer["assignment"])) == (11, 2)
    updated = m.with_(subscribed_topic_names=frozenset({"foo", "bar"}))
    assert recs == strip(
        [
            R.member_subscription(G, updated),
            R.partition_metadata(G, {"foo": (h.id("foo"), 6), "bar": (h.id("bar"), 3)}),
            R.epoch(G, 11),
            R.target_assignment(G, "m", h.A(foo=range(6), bar=range(3))),
            R.target_assignment_epoch(G, 11),
            R.current_assignment(
                G,
                updated.with_(
                    member_epoch=11, previous_member_epoch=10, assigned_partitions=h.A(foo=range(6), bar=range(3))
                ),
            ),
        ]
    )


# ---------------------------------------------------------------- testNewJoiningMemberTriggersNewTargetAssignment
def two_member_group(h):
    m1 = member(
        "m1",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=(0, 1, 2), bar=(0, 1)),
    )
    m2 = member(
        "m2",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=(3, 4, 5), bar=(2,)),
    )
    h.seed(G, 10, [m1, m2], {"m1": m1.assigned_partitions, "m2": m2.assigned_partitions})
    return m1, m2


def test_new_joining_member_triggers_new_target_assignment():
    h = Harness({"foo": 6, "bar": 3})
    two_member_group(h)
    h.assignor.prepare(
        {"m1": h.A(foo=(0, 1), bar=(0,)), "m2": h.A(foo=(2, 3), bar=(1,)), "m3": h.A(foo=(4, 5), bar=(2,))}
    )
    answer, recs, _ = h.join("m3", ["foo", "bar"], server_assignor="range")
    assert (answer["member_epoch"], answer["assignment"]) == (11, [])
    expected3 = member(
        "m3",
        member_epoch=11,
        previous_member_epoch=0,
        state=S.UNRELEASED_PARTITIONS,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
    )
    assert (
        recs[0]
        == strip([R.member_subscription(G, expected3.with_(member_epoch=0, previous_member_epoch=-1, state=S.STABLE))])[
            0
        ]
    )
    assert recs[1] == strip([R.epoch(G, 11)])[0]
    assert sorted(recs[2:5], key=lambda r: r["member_id"]) == strip(
        [
            R.target_assignment(G, "m1", h.A(foo=(0, 1), bar=(0,))),
            R.target_assignment(G, "m2", h.A(foo=(2, 3), bar=(1,))),
            R.target_assignment(G, "m3", h.A(foo=(4, 5), bar=(2,))),
        ]
    )
    assert recs[5:] == strip([R.target_assignment_epoch(G, 11), R.current_assignment(G, expected3)])
    assert h.group().state() == "Reconciling"


def test_reconciliation_round_trip_revoke_then_assign():
    """The rest of that story: m1 must revoke first (epoch stays 10), and gets epoch 11 once it stops reporting
    the revoked partitions; then m3 gets what m1 released."""
    h = Harness({"foo": 6, "bar": 3})
    two_member_group(h)
    h.assignor.prepare(
        {"m1": h.A(foo=(0, 1), bar=(0,)), "m2": h.A(foo=(2, 3), bar=(1,)), "m3": h.A(foo=(4, 5), bar=(2,))}
    )
    h.join("m3", ["foo", "bar"], server_assignor="range")
    answer = h.hb("m1", 10)[0]
    assert (answer["member_epoch"], h.member("m1").state) == (10, S.UNREVOKED_PARTITIONS)
    assert h.member("m1").partitions_pending_revocation == h.A(foo=(2,), bar=(1,))
    assert h.hb("m1", 10, topic_partitions=[["foo", 0], ["foo", 1], ["bar", 0]])[0]["member_epoch"] == 11
    assert h.member("m1").state is S.STABLE
    h.hb("m2", 10, topic_partitions=[["foo", 2], ["foo", 3], ["bar", 1]])
    m3 = h.hb("m3", 11)[0]
    assert h.member("m3").state is S.STABLE and h.member("m3").assigned_partitions == h.A(foo=(4, 5), bar=(2,))
    assert m3["assignment"] is not None
    assert h.group().state() == "Stable"


# ---------------------------------------------------------------- testLeavingMemberBumpsGroupEpoch
def test_leaving_member_bumps_group_epoch():
    h = Harness({"foo": 6, "bar": 3})
    two_member_group(h)
    answer, recs, out = h.hb("m2", -1)
    assert (answer["member_id"], answer["member_epoch"], answer["error"]) == ("m2", -1, "NONE")
    assert recs == strip(
        [
            R.current_assignment_tombstone(G, "m2"),
            R.target_assignment(G, "m2", None),
            R.member_subscription_tombstone(G, "m2"),
            R.epoch(G, 11),
        ]
    )
    assert [o["reason"] for o in out if o["type"] == "member_left"] == ["leave"]
    assert "m2" not in h.group().members and h.c.next_deadline(G) is not None


def test_the_last_member_leaving_moves_the_assignment_epoch_since_kafka_4_4():
    """KAFKA-20442 (Kafka 4.4; empty.group.assignment.epoch=true): when a removal empties the group, the target
    assignment epoch follows the new group epoch in the same write -- as Apache Kafka 4.4.0 wrote it
    (tests/cli/test_kip848_cluster_feed.py); 4.3.0 and before do not (checked in their GroupMetadataManager)."""
    for flag, tail in ((False, []), (True, [R.target_assignment_epoch(G, 12)])):
        h = Harness({"foo": 6, "bar": 3}, empty_group_assignment_epoch=flag)
        two_member_group(h)
        h.hb("m2", -1)
        _, recs, _ = h.hb("m1", -1)
        assert recs == strip(
            [
                R.current_assignment_tombstone(G, "m1"),
                R.target_assignment(G, "m1", None),
                R.member_subscription_tombstone(G, "m1"),
                R.partition_metadata(G, {}),
                R.epoch(G, 12),
            ]
            + tail
        )
        assert h.group().assignment_epoch == (12 if flag else 10)


# ---------------------------------------------------------------- static members
def static_group(h):
    m1 = member(
        "m1",
        instance_id="instance-1",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=(0, 1, 2), bar=(0, 1)),
    )
    m2 = member(
        "m2",
        instance_id="instance-2",
        member_epoch=10,
        previous_member_epoch=9,
        subscribed_topic_names=["foo", "bar"],
        server_assignor="range",
        assigned_partitions=h.A(foo=(3, 4, 5), bar=(2,)),
    )
    h.seed(G, 10, [m1, m2], {"m1": m1.assigned_partitions, "m2": m2.assigned_partitions})
    return m1, m2


def test_no_group_epoch_bump_when_static_member_temporarily_leaves():
    h = Harness({"foo": 6, "bar": 3})
    m1, _ = static_group(h)
    answer, recs, _ = h.hb("m1", -2, instance_id="instance-1")
    assert (answer["member_id"], answer["member_epoch"]) == ("m1", -2)
    assert recs == strip([R.current_assignment(G, m1.with_(member_epoch=-2))])
    assert h.group().group_epoch == 10
    # Its partitions stay taken (epoch -2 is not free) while it is away.
    assert h.group().current_partition_epoch(h.id("foo"), 0) == -2


def test_static_member_gets_back_assignment_upon_rejoin():
    h = Harness({"foo": 6, "bar": 3})
    m1, _ = static_group(h)
    h.hb("m1", -2, instance_id="instance-1")
    answer, recs, out = h.join("m1-new", ["foo", "bar"], instance_id="instance-1", server_assignor="range")
    assert (answer["member_id"], answer["member_epoch"], answer["error"]) == ("m1-new", 10, "NONE")
    assert {(a["topic"], tuple(a["partitions"])) for a in answer["assignment"]} == {("foo", (0, 1, 2)), ("bar", (0, 1))}
    new = m1.with_(member_id="m1-new", member_epoch=0, previous_member_epoch=0)
    assert recs == strip(
        [
            R.current_assignment_tombstone(G, "m1"),
            R.target_assignment(G, "m1", None),
            R.member_subscription_tombstone(G, "m1"),
            R.member_subscription(G, new),
            R.target_assignment(G, "m1-new", m1.assigned_partitions),
            R.current_assignment(G, new),
            R.current_assignment(G, new.with_(member_epoch=10, previous_member_epoch=0)),
        ]
    )
    assert h.group().group_epoch == 10 and h.group().static_members["instance-1"] == "m1-new"
    assert [o["previous_member_id"] for o in out if o["type"] == "member_replaced"] == ["m1"]


def test_static_member_rejoins_with_new_subscribed_topics():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    h.hb("m1", -2, instance_id="instance-1")
    h.assignor.prepare({"m1-new": h.A(foo=(0, 1, 2)), "m2": h.A(foo=(3, 4, 5), bar=(0, 1, 2))})
    answer, recs, _ = h.join("m1-new", ["foo"], instance_id="instance-1", server_assignor="range")
    # A rejoining instance owns nothing (its request says so), so bar-0 and bar-1 need no revocation round: it
    # goes straight to the new epoch with what it may keep (Kafka: STABLE at epoch 11, previous epoch 0).
    assert answer["member_epoch"] == 11
    new = h.member("m1-new")
    assert (new.state, new.previous_member_epoch, new.assigned_partitions) == (S.STABLE, 0, h.A(foo=(0, 1, 2)))
    assert [r["epoch"] for r in recs if r["type"] == R.METADATA] == [11]


def test_leaving_static_member_bumps_group_epoch():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    answer, recs, _ = h.hb("m1", -1, instance_id="instance-1")
    assert answer["member_epoch"] == -1
    assert names(recs) == [
        ("ConsumerGroupCurrentMemberAssignment", "m1", True),
        ("ConsumerGroupTargetAssignmentMember", "m1", True),
        ("ConsumerGroupMemberMetadata", "m1", True),
        ("ConsumerGroupMetadata", None, False),
    ]


def test_unreleased_instance_id_when_new_member_joins_with_in_use_instance_id():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    answer = h.join("m1-new", ["foo", "bar"], instance_id="instance-1")[0]
    assert answer["error"] == "UNRELEASED_INSTANCE_ID"
    assert answer["error_message"] == (
        "Static member m1-new with instance id instance-1 cannot join the group "
        "because the instance id is owned by m1 member."
    )


def test_unknown_static_member_joins_or_leaves():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    assert h.hb("m3", 1, instance_id="instance-3")[0]["error"] == "UNKNOWN_MEMBER_ID"
    assert h.hb("m3", -2, instance_id="instance-3")[0]["error"] == "UNKNOWN_MEMBER_ID"


def test_fenced_instance_id_when_static_member_with_other_member_id_heartbeats_or_leaves():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    answer = h.hb("m2", 10, instance_id="instance-1")[0]
    assert answer["error"] == "FENCED_INSTANCE_ID"
    assert answer["error_message"] == "Static member m2 with instance id instance-1 was fenced by member m1."
    assert h.hb("m2", -2, instance_id="instance-1")[0]["error"] == "FENCED_INSTANCE_ID"


def test_member_epoch_validation_for_static_member():
    h = Harness({"foo": 6, "bar": 3})
    static_group(h)
    assert h.hb("m1", 200, instance_id="instance-1")[0]["error"] == "FENCED_MEMBER_EPOCH"
    assert h.hb("m1", 50, instance_id="instance-1")[0]["error"] == "FENCED_MEMBER_EPOCH"


# ---------------------------------------------------------------- testNewMemberIsRejectedWithMaximumMembersIsReached
def test_new_member_is_rejected_when_maximum_members_is_reached():
    h = Harness({"foo": 6, "bar": 3}, group_consumer_max_size=2)
    two_member_group(h)
    answer = h.join("m3", ["foo"])[0]
    assert (answer["error"], answer["error_message"]) == (
        "GROUP_MAX_SIZE_REACHED",
        "The consumer group has reached its maximum capacity of 2 members.",
    )
    assert h.hb("m1", 10)[0]["error"] == "NONE"  # members already in keep heartbeating


# ---------------------------------------------------------------- testConsumerGroupHeartbeatFullResponse
def test_heartbeat_full_response():
    h = Harness({"foo": 2})
    h.assignor.prepare({"m": h.A(foo=(0, 1))})
    assert h.join("m", ["foo"])[0]["assignment"] is not None
    assert h.hb("m", 1)[0]["assignment"] is None  # nothing changed: no assignment
    full = h.hb(
        "m", 1, rebalance_timeout_ms=5000, subscribed_topic_names=["foo"], topic_partitions=[["foo", 0], ["foo", 1]]
    )[0]
    assert full["assignment"][0]["partitions"] == [0, 1]  # a full request always gets it


# ---------------------------------------------------------------- testConsumerGroupStates
def test_group_states():
    h = Harness({"foo": 6})
    h.assignor.prepare({"m1": h.A(foo=range(6))})
    h.join("m1", ["foo"])
    assert h.group().state() == "Stable"
    h.assignor.prepare({"m1": h.A(foo=(0, 1, 2)), "m2": h.A(foo=(3, 4, 5))})
    h.join("m2", ["foo"])
    assert h.group().state() == "Reconciling"
    h.hb("m1", 1)
    h.hb("m1", 1, topic_partitions=[["foo", 0], ["foo", 1], ["foo", 2]])
    h.hb("m2", 2)
    assert h.group().state() == "Stable"
    h.hb("m1", -1)
    h.hb("m2", -1)
    assert h.group().state() == "Empty"


def test_partition_assignor_exception_on_regular_heartbeat():
    h = Harness({"foo": 6})

    class Failing:
        def assign(self, spec, describer):
            from assignors.server import PartitionAssignorError

            raise PartitionAssignorError("Assignment failed.")

    h.c._assignors["range"] = Failing()
    answer = h.join("m", ["foo"])[0]
    assert (answer["error"], answer["error_message"]) == (
        "UNKNOWN_SERVER_ERROR",
        "Failed to compute a new target assignment for epoch 1: Assignment failed.",
    )
    assert not h.c.groups


# ---------------------------------------------------------------- timers
def test_session_timeout_expiration():
    h = Harness({"foo": 6})
    h.assignor.prepare({"m": h.A(foo=range(6))})
    assert h.join("m", ["foo"], rebalance_timeout_ms=90000)[0]["member_epoch"] == 1
    assert h.c.next_deadline(G) == 45000
    assert h.advance(44999) == []
    out = h.advance(45000)
    assert records(out) == strip(
        [
            R.current_assignment_tombstone(G, "m"),
            R.target_assignment(G, "m", None),
            R.member_subscription_tombstone(G, "m"),
            R.partition_metadata(G, {}),
            R.epoch(G, 2),
        ]
    )
    assert [(o["reason"], o["last_heartbeat_ts"]) for o in out if o["type"] == "member_expired"] == [
        ("session timeout", 0)
    ]
    # No session left; the Empty group without offsets goes at the cleanup pass (offsets.retention.check.interval.ms).
    assert h.c.soft[G].sessions == {} and h.c.next_deadline(G) == 45000 + 600_000


def test_session_timeout_lifecycle():
    h = Harness({"foo": 6})
    h.assignor.prepare({"m": h.A(foo=range(6))})
    h.join("m", ["foo"])
    h.ts = 40_000
    h.hb("m", 1)  # a heartbeat restarts the session
    assert h.c.next_deadline(G) == 85_000
    assert h.advance(84_999) == [] and "m" in h.group().members
    h.hb("m", -1)  # leaving cancels it
    assert h.c.soft[G].sessions == {} and h.c.next_deadline(G) == 84_999 + 600_000  # the cleanup of the Empty group


def test_session_timeout_expiration_static_member():
    h = Harness({"foo": 6})
    h.assignor.prepare({"m": h.A(foo=range(6))})
    h.join("m", ["foo"], instance_id="instance")
    h.ts = 10_000
    h.hb("m", -2, instance_id="instance")
    assert h.c.next_deadline(G) == 45_000  # a temporary leave does not restart the session
    out = h.advance(45_000)
    assert names(records(out))[:3] == [
        ("ConsumerGroupCurrentMemberAssignment", "m", True),
        ("ConsumerGroupTargetAssignmentMember", "m", True),
        ("ConsumerGroupMemberMetadata", "m", True),
    ]
    assert not h.group().members and not h.group().static_members


def test_an_observed_session_expiry_fences_as_the_timer_does():
    """``session_expired`` (the cluster feed: the broker's timer fired, its records in the log) where the tracker runs
    no sessions of its own: the records of Kafka's timer above (testSessionTimeoutExpirationStaticMember), at the
    event's time, told as a session expiry; for a member the group does not have, nothing."""
    h = Harness({"foo": 6}, group_consumer_session_timeout_ms=2**31 - 1)
    h.assignor.prepare({"m": h.A(foo=range(6))})
    h.join("m", ["foo"], instance_id="instance")
    h.ts = 10_000
    h.hb("m", -2, instance_id="instance")
    assert h.advance(44_000) == []  # no session of its own
    h.ts = 44_500
    out = h.event(type="session_expired", member_id="m", group_id=G)
    assert records(out) == strip(
        [
            R.current_assignment_tombstone(G, "m"),
            R.target_assignment(G, "m", None),
            R.member_subscription_tombstone(G, "m"),
            R.partition_metadata(G, {}),
            R.epoch(G, 2),
        ]
    )
    assert [(o["ts"], o["member_id"], o["reason"]) for o in out if o["type"] == "member_expired"] == [
        (44_500, "m", "session timeout")
    ]
    assert not h.group().members and not h.group().static_members and h.c.soft[G].sessions == {}
    again = h.event(type="session_expired", member_id="m", group_id=G)
    assert [o["type"] for o in again] == ["ignored_event"]


def test_an_observed_session_expiry_of_no_consumer_group_is_ignored():
    """The routing's models: a ``session_expired`` for a group nobody holds, or a classic one, is ignored and says
    why (never an error that would stop the job)."""
    from streaming.coordinator.routing import Configs, run_feed

    join = {"type": "join", "group_id": "g", "ts": 1, "member_id": "k", "protocols": [{"name": "range", "topics": []}]}
    for events in ([], [join]):
        outputs, rejected = run_feed(
            events + [{"type": "session_expired", "group_id": "g", "ts": 2, "member_id": "k"}],
            Configs.from_properties({}),
        )
        assert rejected == 0 and outputs[-1]["type"] == "ignored_event", outputs


def test_rebalance_timeout_expiration():
    h = Harness({"foo": 3})
    h.assignor.prepare({"m1": h.A(foo=(0, 1, 2))})
    h.join("m1", ["foo"], rebalance_timeout_ms=12000)
    h.assignor.prepare({"m1": h.A(foo=(0, 1)), "m2": h.A(foo=(2,))})
    h.ts = 1000
    h.join("m2", ["foo"], rebalance_timeout_ms=90000)
    h.ts = 2000
    answer = h.hb("m1", 1)[0]  # m1 must revoke foo-2: the rebalance timer starts
    assert answer["member_epoch"] == 1 and h.member("m1").state is S.UNREVOKED_PARTITIONS
    assert h.c.soft[G].rebalance["m1"] == [14000, 1]
    out = h.advance(14000)
    assert [o["reason"] for o in out if o["type"] == "member_expired"] == ["rebalance timeout"]
    assert "m1" not in h.group().members and h.group().group_epoch == 3


def test_rebalance_timeout_lifecycle():
    h = Harness({"foo": 3})
    h.assignor.prepare({"m1": h.A(foo=(0, 1, 2))})
    h.join("m1", ["foo"], rebalance_timeout_ms=12000)
    h.assignor.prepare({"m1": h.A(foo=(0, 1)), "m2": h.A(foo=(2,))})
    h.join("m2", ["foo"], rebalance_timeout_ms=90000)
    h.hb("m1", 1)
    assert "m1" in h.c.soft[G].rebalance
    h.ts = 5000
    assert h.hb("m1", 1, topic_partitions=[["foo", 0], ["foo", 1]])[0]["member_epoch"] == 2
    assert "m1" not in h.c.soft[G].rebalance  # revoked in time: the timer is cancelled
    assert h.advance(20000) == [] and "m1" in h.group().members


# ---------------------------------------------------------------- topic metadata (testOnNewMetadataImage et al.)
def test_partition_count_change_bumps_epoch_on_next_heartbeat():
    h = Harness({"foo": 6})
    h.assignor.prepare({"m": h.A(foo=range(6))})
    h.join("m", ["foo"])
    assert h.topic("foo", 8) == []  # Kafka only flags the group; the next heartbeat refreshes
    assert h.group().group_epoch == 1
    h.assignor.prepare({"m": h.A(foo=range(8))})
    answer, recs, _ = h.hb("m", 1)
    assert names(recs) == [
        ("ConsumerGroupPartitionMetadata", None, False),
        ("ConsumerGroupMetadata", None, False),
        ("ConsumerGroupTargetAssignmentMember", "m", False),
        ("ConsumerGroupTargetAssignmentMetadata", None, False),
        ("ConsumerGroupCurrentMemberAssignment", "m", False),
    ]
    assert recs[0]["topics"][0]["numPartitions"] == 8
    assert answer["member_epoch"] == 2 and answer["assignment"][0]["partitions"] == list(range(8))


def test_unrelated_topic_change_does_not_bump():
    h = Harness({"foo": 6, "other": 1})
    h.assignor.prepare({"m": h.A(foo=range(6))})
    h.join("m", ["foo"])
    h.topic("other", 4)
    assert records(h.hb("m", 1)[2]) == []


def test_subscribed_topic_created_later():
    h = Harness({})
    h.assignor.prepare({})
    assert h.join("m", ["foo"])[0]["member_epoch"] == 1
    h.topic("foo", 2)
    h.assignor.prepare({"m": h.A(foo=(0, 1))})
    answer = h.hb("m", 1)[0]
    assert answer["member_epoch"] == 2 and answer["assignment"][0]["topic"] == "foo"


def test_deleted_topic_is_dropped():
    h = Harness({"foo": 2, "bar": 2})
    h.assignor.prepare({"m": h.A(foo=(0, 1), bar=(0, 1))})
    h.join("m", ["foo", "bar"])
    h.topic("bar", 0)
    h.assignor.prepare({"m": {h.id("foo"): (0, 1)}})
    answer = h.hb("m", 1)[0]
    assert h.group().subscription_metadata == {"foo": (h.id("foo"), 2)}
    assert answer["member_epoch"] == 1 and h.member("m").state is S.UNREVOKED_PARTITIONS


# ---------------------------------------------------------------- regular expressions
def test_member_joins_with_new_regex():
    """testConsumerGroupMemberJoinsWithNewRegex: the regex is resolved after the heartbeat (Kafka: asynchronously),
    written as a ConsumerGroupRegularExpression record, and the epoch is bumped; the next heartbeat assigns."""
    h = Harness({"foo": 6, "bar": 3})
    h.assignor.prepare({})
    h.ts = 10_000
    answer, recs, _ = h.hb("m", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="foo*|bar", topic_partitions=[])
    assert answer["member_epoch"] == 1
    regex = [r for r in recs if r["type"] == R.REGULAR_EXPRESSION]
    assert (regex[0]["group_id"], regex[0]["regular_expression"]) == (G, "foo*|bar")
    assert regex[0]["topics"] == ["bar", "foo"] and regex[0]["timestamp"] == 10_000
    assert recs[-1] == strip([R.epoch(G, 2)])[0]
    h.assignor.prepare({"m": h.A(foo=range(6), bar=range(3))})
    assert h.hb("m", 1)[0]["member_epoch"] == 2
    assert set(h.assignor.spec.members["m"].topic_ids) == {h.id("foo"), h.id("bar")}


def test_member_picks_up_existing_resolved_regex():
    h = Harness({"foo": 6})
    h.assignor.prepare({})
    h.ts = 10_000
    h.hb("m1", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="foo", topic_partitions=[])
    before = h.group().group_epoch
    h.ts = 12_000
    recs = h.hb("m2", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="foo", topic_partitions=[])[1]
    assert R.REGULAR_EXPRESSION not in [r["type"] for r in recs]
    assert h.group().group_epoch == before + 1


def test_regexes_removed_when_members_leave():
    h = Harness({"foo": 6})
    h.assignor.prepare({})
    h.hb("m1", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="fo.*", topic_partitions=[])
    assert "fo.*" in h.group().resolved_regexes
    recs = h.hb("m1", -1)[1]
    assert ("ConsumerGroupRegularExpression", None, True) in names(recs)
    assert not h.group().resolved_regexes


def test_new_topic_matching_regex_is_picked_up_after_refresh_interval():
    h = Harness({"foo": 1})
    h.assignor.prepare({})
    h.hb("m", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="f.*", topic_partitions=[])
    h.topic("fizz", 1)
    h.ts = 5_000
    assert h.group().resolved_regexes["f.*"].topics == {"foo"}
    assert h.hb("m", 1)[0]["member_epoch"] == 2  # within 10 s of the last refresh: not yet
    assert h.group().resolved_regexes["f.*"].topics == {"foo"}
    h.ts = 10_001
    assert h.hb("m", 2)[0]["error"] == "NONE"
    assert h.group().resolved_regexes["f.*"].topics == {"foo", "fizz"}
    assert h.group().group_epoch == 3


# ---------------------------------------------------------------- uniform assignor, end to end
def test_uniform_assignor_default():
    h = Harness({"foo": 6}, scripted=False)
    h.join("a", ["foo"])
    h.join("b", ["foo"])
    h.hb("a", 1)
    h.hb(
        "a",
        1,
        topic_partitions=[
            [t, p] for t, p in [("foo", p) for p in sorted(h.member("a").assigned_partitions[h.id("foo")])]
        ],
    )
    h.hb("b", 2)
    sizes = sorted(len(h.member(m).assigned_partitions.get(h.id("foo"), ())) for m in "ab")
    assert sizes == [3, 3] and h.group().state() == "Stable"
    assert h.c.soft[G].assignor == "uniform"


# ---------------------------------------------------------------- DeleteGroups, serialisation
def test_delete_group_writes_tombstones():
    h = Harness({"foo": 1})
    h.assignor.prepare({"m": h.A(foo=(0,))})
    h.join("m", ["foo"])
    assert [o["error"] for o in h.event(type="delete_group", group_id=G) if o["type"] == "delete_group_response"] == [
        "NON_EMPTY_GROUP"
    ]
    h.hb("m", -1)
    out = h.event(type="delete_group", group_id=G)
    assert names(records(out)) == [
        ("ConsumerGroupTargetAssignmentMetadata", None, True),
        ("ConsumerGroupPartitionMetadata", None, True),
        ("ConsumerGroupMetadata", None, True),
    ]
    assert G not in h.c.groups


def test_state_round_trips_through_bytes():
    h = Harness({"foo": 6, "bar": 3})
    two_member_group(h)
    h.assignor.prepare(
        {"m1": h.A(foo=(0, 1), bar=(0,)), "m2": h.A(foo=(2, 3), bar=(1,)), "m3": h.A(foo=(4, 5), bar=(2,))}
    )
    h.join("m3", ["foo", "bar"])
    h.hb("m1", 10)
    from streaming.coordinator.consumer import ConsumerGroupCoordinator

    copy = ConsumerGroupCoordinator.from_bytes(h.c.to_bytes(), h.c.config, h.c._assignors)
    assert copy.to_dict() == h.c.to_dict()
    assert copy.next_deadline() == h.c.next_deadline()
    assert strip(copy.advance(10**7)) == strip(h.c.advance(10**7))


def test_client_fields_are_recorded():
    h = Harness({"foo": 1})
    h.assignor.prepare({})
    recs = h.join("m", ["foo"], rack_id="rack-a")[1]
    value = recs[0]
    assert (value["clientId"], value["clientHost"], value["rackId"], value["rebalanceTimeoutMs"]) == (
        CLIENT_ID,
        CLIENT_HOST,
        "rack-a",
        5000,
    )


def test_state_bytes_are_told_apart_from_the_classic_coordinators():
    from streaming.coordinator import GroupCoordinator
    from streaming.coordinator.consumer import ConsumerGroupCoordinator, is_consumer_state

    h = Harness({"foo": 1})
    h.assignor.prepare({})
    h.join("m", ["foo"])
    assert is_consumer_state(h.c.to_bytes()) and not is_consumer_state(GroupCoordinator().to_bytes())
    with pytest.raises(ValueError):
        ConsumerGroupCoordinator.from_bytes(GroupCoordinator().to_bytes())


# ---------------------------------------------------------------- loading __consumer_offsets (testReplay*)
def test_replaying_records_rebuilds_the_group():
    h = Harness({"foo": 6, "bar": 3}, scripted=False)
    outs = h.join("a", ["foo", "bar"])[2]
    outs += h.join("b", ["foo"], instance_id="ib")[2]
    outs += h.hb("c", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="ba.*", topic_partitions=[])[2]
    outs += h.hb("a", 1)[2]
    outs += h.hb("b", -2, instance_id="ib")[2]
    # Replay everything the coordinator wrote, as a broker loading the partition would.
    loaded = Harness({"foo": 6, "bar": 3}, scripted=False)
    loaded.c.load_records([o for o in outs if R.is_record(o)], 1234)
    assert loaded.group().durable_view() == h.group().durable_view()
    assert loaded.group().static_members == {"ib": "b"} and loaded.group().resolved_regexes.keys() == {"ba.*"}
    assert loaded.group().partition_epochs == h.group().partition_epochs
    assert loaded.group().members["b"].member_epoch == -2
    # onLoaded: every member's session starts at load time.
    assert set(loaded.c.soft[G].sessions.values()) == {1234 + 45_000}


def test_replaying_tombstones_removes_members_and_groups():
    h = Harness({"foo": 1})
    h.assignor.prepare({"m": h.A(foo=(0,))})
    outs = h.join("m", ["foo"])[2] + h.hb("m", -1)[2] + h.event(type="delete_group", group_id=G)
    rebuilt = Harness({"foo": 1})
    rebuilt.c.load_records([o for o in outs if R.is_record(o)], 0)
    assert rebuilt.c.groups == {}
    partial = Harness({"foo": 1})
    partial.c.load_records([o for o in outs if R.is_record(o)][:-3], 0)
    assert partial.group().state() == "Empty" and partial.group().group_epoch == 2


def test_a_member_clearing_its_regex_deletes_it_and_bumps_the_epoch():
    """testConsumerGroupMemberClearsRegex: a member that sends an empty regex loses the regex's topics at once --
    its metadata, the regex's tombstone (it was the regex's last subscriber), a new group epoch, its (empty) target
    and its current assignment at the new epoch (it says it owns nothing: no revocation to wait for)."""
    h = Harness({"foo": 6})
    m1 = member(
        "m1",
        member_epoch=10,
        previous_member_epoch=10,
        subscribed_topic_regex="foo*",
        server_assignor="range",
        assigned_partitions=h.A(foo=range(6)),
    )
    h.seed(G, 10, [m1], {"m1": h.A(foo=range(6))})
    h.assignor.prepare({})
    answer, recs, _ = h.hb(
        "m1", 10, rebalance_timeout_ms=5000, subscribed_topic_regex="", server_assignor="range", topic_partitions=[]
    )
    assert (answer["error"], answer["member_epoch"], answer["assignment"]) == ("NONE", 11, [])
    assert names(recs) == [
        ("ConsumerGroupMemberMetadata", "m1", False),
        ("ConsumerGroupRegularExpression", None, True),
        ("ConsumerGroupMetadata", None, False),
        ("ConsumerGroupTargetAssignmentMember", "m1", False),
        ("ConsumerGroupTargetAssignmentMetadata", None, False),
        ("ConsumerGroupCurrentMemberAssignment", "m1", False),
    ]
    assert recs[0]["subscribedTopicRegex"] == "" and recs[2]["epoch"] == 11
    current = recs[-1]
    assert (current["memberEpoch"], current["previousMemberEpoch"], current["assignedPartitions"]) == (11, 10, [])


def test_the_uniform_assignor_sees_the_members_in_kafkas_order_after_their_updates():
    """Apache Kafka 4.4.0, asked with these member ids (ConsumerGroupHeartbeat requests, one topic of 7 partitions,
    targets at once): X joins, Y joins (X 0-3, Y 4-6), Z joins -- X keeps 0-2, Y gives up 6, Z gets 3 and 6, and
    the target records come X, Y, Z. Y's join updated X's and Y's records in a member table of two slots, which
    grew it to four (Kafka grows before it looks for the key) and put X first; the model once kept two slots,
    iterated Y first and gave Y the extra partition (X 0-1, Y 4-6, Z 2-3)."""
    x, y, z = "jeeokxs9SjWq1aalxUqAxQ", "IMtFSVn7SiaXeSqtLv1SAQ", "zT/X1QsSTZO6lKOW5akERw"
    h = Harness({"t": 7}, scripted=False, group_consumer_assignors=("uniform",))
    h.join(x, ["t"])
    _, recs, _ = h.join(y, ["t"])
    targets = [
        (r["member_id"], r["topicPartitions"][0]["partitions"]) for r in recs if r["type"] == R.TARGET_ASSIGNMENT_MEMBER
    ]
    assert targets == [(x, [0, 1, 2, 3]), (y, [4, 5, 6])]
    _, recs, _ = h.join(z, ["t"])
    targets = [
        (r["member_id"], r["topicPartitions"][0]["partitions"]) for r in recs if r["type"] == R.TARGET_ASSIGNMENT_MEMBER
    ]
    assert targets == [(x, [0, 1, 2]), (y, [4, 5]), (z, [3, 6])]


def test_regexes_resolved_when_the_broker_says_so():
    """regex.resolution.events (an observer's feed): Kafka resolves a new regex after the request, as a write of its
    own, other requests perhaps between. m1's join with a regex writes no resolution; m2's join before it sees no
    regex topics (its target: everything to m2); the regex_resolved event writes the regex's record and a new group
    epoch; a second one with nothing asked is ignored."""
    h = Harness({"foo": 3}, scripted=False, group_consumer_assignors=("uniform",), regex_resolution_events=True)
    h.ts = 10_000
    _, recs, _ = h.hb("m1", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="fo.*", topic_partitions=[])
    assert R.REGULAR_EXPRESSION not in [r["type"] for r in recs] and not h.group().resolved_regexes
    h.ts = 10_005
    _, recs, _ = h.join("m2", ["foo"])
    targets = {r["member_id"]: r["topicPartitions"] for r in recs if r["type"] == R.TARGET_ASSIGNMENT_MEMBER}
    assert [p for t in targets["m2"] for p in t["partitions"]] == [0, 1, 2] and not targets.get("m1")
    epoch = h.group().group_epoch
    h.c = type(h.c).from_dict(h.c.to_dict(), h.c.config)  # what was asked survives the group's state round trip
    h.ts = 10_012
    out = h.event(type="regex_resolved", group_id=G)
    assert names(records(out)) == [
        ("ConsumerGroupRegularExpression", None, False),
        ("ConsumerGroupMetadata", None, False),
    ]
    assert h.group().resolved_regexes["fo.*"].topics == {"foo"} and h.group().group_epoch == epoch + 1
    again = h.event(type="regex_resolved", group_id=G)
    assert [o["type"] for o in again] == ["ignored_event"]


@pytest.mark.parametrize(
    "started, reason",
    [
        (-1, "regex_resolved.started_ms = -1 is out of range [0, 9223372036854775807]"),
        (2**63, f"regex_resolved.started_ms = {2**63} is out of range [0, 9223372036854775807]"),
        ("soon", "regex_resolved.started_ms must be an integer, got str"),
    ],
)
def test_a_bad_regex_resolution_is_refused_with_its_reason(started, reason):
    """A hostile or broken feed: the event is refused (the job dead-letters it), never applied."""
    from streaming.coordinator import parse_event

    event, error = parse_event({"type": "regex_resolved", "group_id": G, "ts": 1, "started_ms": started})
    assert event is None and error == reason
