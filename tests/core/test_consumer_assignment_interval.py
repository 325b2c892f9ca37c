"""Kafka 4.3+'s ``group.consumer.assignment.interval.ms`` (KIP-1263, KAFKA-20291) in the consumer model.

Expectations ported from Kafka 4.3.0's GroupMetadataManagerTest (``testCanComputeNextTargetAssignment*``,
``testConsumerGroupAssignmentInterval``): a target assignment is computed at most once per interval, by the first
heartbeat at or after the last computation's time + interval; the heartbeat that bumped the group epoch before then
writes no target and its member reconciles to the last one. Kafka 4.3.0 and 4.4.0 compute it in that heartbeat, on
the coordinator's thread: ``group.consumer.assignor.offload.enable`` changes nothing for consumer groups there.
"""

from __future__ import annotations

import pytest

from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, MemberState
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.target import can_compute_next_target_assignment
from tests.consumer_harness import Harness, member, names, strip

S = MemberState
G = "fooup"
T0 = 1_000_000


# ---------------------------------------------------------------- testCanComputeNextTargetAssignment*
def test_a_target_can_be_computed_without_a_previous_timestamp():
    assert can_compute_next_target_assignment(0, 1000, 0)


def test_a_target_can_always_be_computed_without_an_interval():
    assert can_compute_next_target_assignment(1_000_000, 0, 0)
    assert can_compute_next_target_assignment(1_000_000, 0, 999_999)
    assert can_compute_next_target_assignment(1_000_000, 0, 1_000_000)


def test_a_target_waits_for_the_interval_since_the_last_one():
    assert not can_compute_next_target_assignment(1_000_000, 5000, 0)  # before the last one finished
    assert not can_compute_next_target_assignment(1_000_000, 5000, 999_999)
    assert not can_compute_next_target_assignment(1_000_000, 5000, 1_000_000)
    assert not can_compute_next_target_assignment(1_000_000, 5000, 1_004_999)
    assert can_compute_next_target_assignment(1_000_000, 5000, 1_005_000)
    assert can_compute_next_target_assignment(1_000_000, 5000, 1_007_500)


# ---------------------------------------------------------------- testConsumerGroupAssignmentInterval
def interval_harness(**config):
    h = Harness({"foo": 6}, initial_group_epoch=1, group_consumer_assignment_interval_ms=5000, **config)
    h.ts = T0
    return h


def test_the_next_target_waits_for_the_interval():
    h = interval_harness()
    foo = h.id("foo")

    # Member 1 joins and gets an assignment at once (no target computed before).
    h.assignor.prepare({"m1": {foo: range(6)}})
    answer, recs, _ = h.join("m1", ["foo"], server_assignor="range")
    assert (answer["member_epoch"], answer["assignment"][0]["partitions"]) == (2, list(range(6)))
    m1 = member(
        "m1",
        member_epoch=2,
        previous_member_epoch=0,
        subscribed_topic_names=["foo"],
        server_assignor="range",
        assigned_partitions=h.A(foo=range(6)),
    )
    assert recs == strip(
        [
            R.member_subscription(G, m1),
            R.partition_metadata(G, {"foo": (foo, 6)}),
            R.epoch(G, 2),
            R.target_assignment(G, "m1", h.A(foo=range(6))),
            R.target_assignment_epoch(G, 2, T0),  # the time of the computation, as Kafka 4.3+ writes it
            R.current_assignment(G, m1),
        ]
    )
    assert h.assignor.calls == 1

    # Just before the interval runs out, member 2 joins: a new group epoch, no target; it is Stable at the last
    # target's epoch, with nothing.
    h.assignor.prepare({"m1": {foo: (0, 1, 2)}, "m2": {foo: (3, 4, 5)}})
    h.ts = T0 + 4995
    answer, recs, _ = h.join("m2", ["foo"], server_assignor="range")
    assert (answer["member_epoch"], answer["assignment"]) == (2, [])
    m2 = member("m2", member_epoch=2, previous_member_epoch=0, subscribed_topic_names=["foo"], server_assignor="range")
    assert recs == strip([R.member_subscription(G, m2), R.epoch(G, 3), R.current_assignment(G, m2)])
    assert h.assignor.calls == 1
    assert (h.group().group_epoch, h.group().assignment_epoch, h.group().state()) == (3, 2, "Assigning")

    # Member 2's next heartbeat, once the interval has run out, computes the target (epoch 3); member 2 now waits
    # for member 1's partitions.
    h.ts = T0 + 5005
    answer, recs, _ = h.hb("m2", 2)
    assert (answer["member_epoch"], answer.get("assignment")) == (3, None)
    assert sorted(recs[:-2], key=lambda r: r["member_id"]) == strip(
        [R.target_assignment(G, "m1", h.A(foo=(0, 1, 2))), R.target_assignment(G, "m2", h.A(foo=(3, 4, 5)))]
    )
    assert recs[-2:] == strip(
        [
            R.target_assignment_epoch(G, 3, T0 + 5005),
            R.current_assignment(G, m2.with_(member_epoch=3, previous_member_epoch=2, state=S.UNRELEASED_PARTITIONS)),
        ]
    )


def test_without_an_interval_the_joining_heartbeat_computes_the_target():
    """``group.consumer.assignment.interval.ms=0`` (the default here; Kafka up to 4.2): the same joins, 5 ms
    apart, each compute their target."""
    h = Harness({"foo": 6}, initial_group_epoch=1)
    h.ts = T0
    foo = h.id("foo")
    h.assignor.prepare({"m1": {foo: range(6)}})
    h.join("m1", ["foo"])
    h.assignor.prepare({"m1": {foo: (0, 1, 2)}, "m2": {foo: (3, 4, 5)}})
    h.ts = T0 + 5
    answer, recs, _ = h.join("m2", ["foo"])
    assert answer["member_epoch"] == 3
    assert ("ConsumerGroupTargetAssignmentMetadata", None, False) in names(recs)
    assert h.assignor.calls == 2


def test_a_pending_target_is_computed_by_any_members_heartbeat_and_only_once():
    """Member 1 leaves within the interval (a new group epoch; a leave never computes a target); member 3's
    heartbeat after the interval computes the one target of the two bumps; the heartbeats after it write none."""
    h = interval_harness()
    foo = h.id("foo")
    h.assignor.prepare({"m1": {foo: range(6)}})
    h.join("m1", ["foo"])
    h.ts = T0 + 100
    h.join("m2", ["foo"])
    h.ts = T0 + 200
    h.join("m3", ["foo"])
    h.ts = T0 + 300
    h.hb("m1", -1)
    assert (h.group().group_epoch, h.group().assignment_epoch) == (5, 2)
    h.ts = T0 + 4999
    _, recs, _ = h.hb("m3", 2)
    assert recs == [] and h.assignor.calls == 1
    h.assignor.prepare({"m2": {foo: (0, 1, 2)}, "m3": {foo: (3, 4, 5)}})
    h.ts = T0 + 5000
    _, recs, _ = h.hb("m3", 2)
    targets = [n for n in names(recs) if n[0].startswith("ConsumerGroupTarget")]
    assert sorted(targets[:2]) == [
        ("ConsumerGroupTargetAssignmentMember", "m2", False),
        ("ConsumerGroupTargetAssignmentMember", "m3", False),
    ]
    assert targets[2:] == [("ConsumerGroupTargetAssignmentMetadata", None, False)]
    assert (h.group().assignment_epoch, h.group().assignment_timestamp, h.assignor.calls) == (5, T0 + 5000, 2)
    h.ts = T0 + 5001
    _, recs, _ = h.hb("m2", 2)
    assert "ConsumerGroupTargetAssignmentMetadata" not in [n[0] for n in names(recs)]
    assert h.assignor.calls == 2


def test_a_group_loaded_from_its_records_keeps_the_last_computation_time():
    """The time comes back from the target's metadata record (a group rebuilt from the log), and from the model's
    serialised state; a record without one (Kafka before 4.3, or the 4.4 record of an emptied group) lets the next
    heartbeat compute at once."""
    h = interval_harness()
    foo = h.id("foo")
    h.assignor.prepare({"m1": {foo: range(6)}})
    _, first, _ = h.join("m1", ["foo"])
    assert first[-2]["assignmentTimestamp"] == T0

    restored = ConsumerGroupCoordinator.from_bytes(h.c.to_bytes(), h.c.config, {"range": h.assignor})
    assert restored.groups[G].assignment_timestamp == T0
    loaded = ConsumerGroupCoordinator(h.c.config, {"range": h.assignor})
    loaded.handle(_topic(h))
    loaded.load_records(first, T0 + 10)
    assert loaded.groups[G].assignment_timestamp == T0

    without = [r if r["type"] != R.TARGET_ASSIGNMENT_METADATA else R.target_assignment_epoch(G, 2) for r in first]
    loaded.load_records(without, T0 + 10)
    assert loaded.groups[G].assignment_timestamp == 0


def _topic(h):
    from streaming.coordinator import parse_event

    event, error = parse_event(
        {"type": "topic_metadata", "topic": "foo", "partitions": 6, "topic_id": h.id("foo"), "ts": T0}
    )
    assert error is None, error
    return event


def test_an_emptied_group_computes_its_next_target_at_once():
    """Kafka 4.4 (KAFKA-20442) writes an emptied group's target metadata with no timestamp: the next member to join
    within the interval gets its target at once."""
    h = interval_harness(empty_group_assignment_epoch=True)
    foo = h.id("foo")
    h.assignor.prepare({"m1": {foo: range(6)}})
    h.join("m1", ["foo"])
    h.ts = T0 + 10
    _, recs, _ = h.hb("m1", -1)
    assert recs[-1] == strip([R.target_assignment_epoch(G, 3)])[0]
    h.assignor.prepare({"m2": {foo: range(6)}})
    h.ts = T0 + 20
    answer, recs, _ = h.join("m2", ["foo"])
    assert (answer["member_epoch"], h.group().assignment_timestamp) == (4, T0 + 20)


# ---------------------------------------------------------------- the settings
def test_the_settings_under_kafkas_names():
    config = ConsumerGroupConfig.from_properties(
        {"group.consumer.assignment.interval.ms": "1000", "group.consumer.assignor.offload.enable": "false"}
    )
    assert (config.group_consumer_assignment_interval_ms, config.group_consumer_assignor_offload_enable) == (
        1000,
        False,
    )
    defaults = ConsumerGroupConfig()
    assert (defaults.group_consumer_assignment_interval_ms, defaults.group_consumer_assignor_offload_enable) == (
        0,
        True,
    )
    assert ConsumerGroupConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "props",
    [
        {"group.consumer.assignment.interval.ms": "-1"},
        {"group.consumer.assignment.interval.ms": "soon"},
        {"group.consumer.assignment.interval.ms": str(2**31)},
        {"group.consumer.assignor.offload.enable": "maybe"},
    ],
)
def test_bad_settings_are_refused(props):
    with pytest.raises(ValueError):
        ConsumerGroupConfig.from_properties(props)


def test_offloading_changes_nothing():
    """Kafka 4.3.0 and 4.4.0 read group.consumer.assignor.offload.enable and compute consumer groups' targets in
    the heartbeat all the same: so does the model."""

    def run(offload):
        h = interval_harness(group_consumer_assignor_offload_enable=offload)
        foo = h.id("foo")
        out = []
        h.assignor.prepare({"m1": {foo: range(6)}})
        out += h.join("m1", ["foo"])[1]
        h.assignor.prepare({"m1": {foo: (0, 1, 2)}, "m2": {foo: (3, 4, 5)}})
        h.ts = T0 + 100
        out += h.join("m2", ["foo"])[1]
        h.ts = T0 + 5100
        out += h.hb("m1", 2)[1]
        return out

    assert run(True) == run(False)
