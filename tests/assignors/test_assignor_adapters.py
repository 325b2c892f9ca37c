"""kafka-python adapters: wire format checks, then real KafkaConsumers in one group against the broker."""

from __future__ import annotations

import threading
import time

import pytest
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from assignors import Subscription, TopicPartition, get_assignor
from assignors.kafka_python import decode_sticky_user_data, encode_sticky_user_data, kafka_python_strategy
from assignors.priority_failover import encode_priority

# ---- offline: what a member puts on the wire ------------------------------------------------------------------


def test_sticky_user_data_round_trip_matches_java_layout():
    parts = [TopicPartition("t", 0), TopicPartition("t", 2), TopicPartition("u", 1)]
    data = encode_sticky_user_data(parts, 7)
    # array(2) of [STRING "t", array(2) of INT32 0,2], [STRING "u", array(1) of INT32 1], generation 7
    assert data == (
        b"\x00\x00\x00\x02"
        + b"\x00\x01t"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00\x00\x00\x00\x02"
        + b"\x00\x01u"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x07"
    )
    assert decode_sticky_user_data(data) == (parts, 7)
    assert decode_sticky_user_data(data[:-4]) == (parts, None)  # V0: no generation
    assert decode_sticky_user_data(b"\x00\x00\x00\x05") is None


def test_adapter_metadata_carries_owned_partitions_and_generation():
    strategy = kafka_python_strategy("cooperative-sticky", rack="r1")()
    assert strategy.name == "cooperative-sticky"
    assert RebalanceProtocol.COOPERATIVE in strategy.supported_protocols()
    assert kafka_python_strategy("range")().supported_protocols() == [RebalanceProtocol.EAGER]

    class _Assignment:  # what kafka-python hands to on_assignment
        @staticmethod
        def partitions():
            return [TopicPartition("t", 1), TopicPartition("t", 0)]

    strategy.on_assignment(_Assignment(), 4)
    decoded = ConsumerProtocolSubscription.decode(strategy.metadata({"t"}).encode())
    assert decoded.topics == ["t"] and decoded.generation_id == 4 and decoded.rack_id == "r1"
    assert [(tp.topic, tp.partitions) for tp in decoded.owned_partitions] == [("t", [0, 1])]
    # CooperativeStickyAssignor.subscriptionUserData: the generation as an INT32 too, for leaders reading v0/v1.
    assert decoded.user_data == b"\x00\x00\x00\x04"


def _member(member_id: str, owned=(), generation=-1, user_data=None) -> object:
    """A group member as kafka-python hands it to the leader's assign()."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in owned:
        by_topic.setdefault(topic, []).append(p)
    metadata = ConsumerProtocolSubscription(
        version=1 if generation < 0 else 3,
        topics=["t"],
        user_data=user_data,
        owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()
        ],
        generation_id=generation,
        rack_id=None,
    )
    return type("Member", (), {"member_id": member_id, "group_instance_id": None, "metadata": metadata})()


def _assign(name: str, members: list) -> dict[str, list]:
    strategy = kafka_python_strategy(name)()
    subscriptions = {m.member_id: strategy._subscription(m) for m in members}
    return {m: sorted(map(tuple, tps)) for m, tps in strategy.assignor.assign({"t": 2}, subscriptions).items()}


def test_eager_sticky_reads_what_a_member_owned_from_its_user_data_only():
    """StickyAssignor.memberData (testMemberDataWillHonorUserData, testMemberDataWithInconsistentData): no user data
    means nothing owned and no generation, whatever the subscription's own fields say; unreadable user data too."""
    claims_t1 = dict(owned=[("t", 1)], generation=1)
    for user_data in (None, b"", b"\x00\x01"):
        assert _assign("sticky", [_member("c1", **claims_t1, user_data=user_data), _member("c2")]) == {
            "c1": [("t", 0)],
            "c2": [("t", 1)],
        }
    sticky = encode_sticky_user_data([TopicPartition("t", 1)], 1)
    assert _assign("sticky", [_member("c1", user_data=sticky), _member("c2")]) == {"c1": [("t", 1)], "c2": [("t", 0)]}


def test_cooperative_sticky_takes_the_generation_from_user_data_when_the_subscription_has_none():
    """CooperativeStickyAssignor.memberData (testMemberDataWithInconsistentData): a v0/v1 subscription carries its
    generation in the user data; the higher one keeps a partition two members claim."""
    members = [
        _member("consumer1", owned=[("t", 0)], user_data=b"\x00\x00\x00\x02"),
        _member("consumer2", owned=[("t", 0), ("t", 1)], user_data=b"\x00\x00\x00\x01"),
    ]
    assert _assign("cooperative-sticky", members) == {"consumer1": [("t", 0)], "consumer2": [("t", 1)]}


# ---- live: real consumers in a group --------------------------------------------------------------------------


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


class _Member:
    """A KafkaConsumer polled on its own thread, so group joins proceed concurrently."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=[strategy],
            session_timeout_ms=3000,
            heartbeat_interval_ms=500,
            max_poll_interval_ms=10000,
            enable_auto_commit=False,
        )
        self.consumer.subscribe([topic])
        self.lock = threading.Lock()
        self.partitions: set[tuple[str, int]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(timeout_ms=100)
            with self.lock:
                self.partitions = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    @property
    def member_id(self) -> str:
        return self.consumer._coordinator._generation.member_id

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.consumer.close()


def _wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def _snapshot(members):
    out = []
    for m in members:
        with m.lock:
            out.append(set(m.partitions))
    return out


@pytest.mark.kafka
def test_real_consumers_use_range_and_priority_failover(kafka_bootstrap, topic_name):
    _create_topic(kafka_bootstrap, topic_name, 4)
    members = [
        _Member(kafka_bootstrap, f"{topic_name}-range", topic_name, kafka_python_strategy("range")) for _ in range(2)
    ]
    high = kafka_python_strategy("priority-failover", user_data=encode_priority(9))
    low = kafka_python_strategy("priority-failover", user_data=encode_priority(1))
    standby = [_Member(kafka_bootstrap, f"{topic_name}-prio", topic_name, s) for s in (low, high)]
    try:
        everything = {(topic_name, p) for p in range(4)}

        def settled():
            snap = _snapshot(members)
            return all(len(s) == 2 for s in snap) and snap[0] | snap[1] == everything

        assert _wait_for(settled, 90), _snapshot(members)
        expected = get_assignor("range").assign(
            {topic_name: 4}, {m.member_id: Subscription([topic_name]) for m in members}
        )
        for m, got in zip(members, _snapshot(members)):
            assert got == set(expected[m.member_id])

        assert _wait_for(lambda: _snapshot(standby) == [set(), everything], 90), _snapshot(standby)
    finally:
        for m in members + standby:
            m.close()


@pytest.mark.kafka
def test_real_consumers_cooperative_sticky_join_is_incremental(kafka_bootstrap, topic_name):
    _create_topic(kafka_bootstrap, topic_name, 6)
    group = f"{topic_name}-coop"
    strategy = kafka_python_strategy("cooperative-sticky")
    first = _Member(kafka_bootstrap, group, topic_name, strategy)
    members = [first]
    try:
        everything = {(topic_name, p) for p in range(6)}
        assert _wait_for(lambda: _snapshot(members) == [everything], 90), _snapshot(members)
        members.append(_Member(kafka_bootstrap, group, topic_name, strategy))
        overlaps = []

        def settled():
            snap = _snapshot(members)
            if snap[0] & snap[1]:
                overlaps.append(snap)  # a partition held by two consumers at once
            return len(snap[0]) == len(snap[1]) == 3 and snap[0] | snap[1] == everything

        assert _wait_for(settled, 90), _snapshot(members)
        assert not overlaps
        # sticky: the first member kept half of what it had and gave up only the rest
        assert _snapshot(members)[0] < everything
    finally:
        for m in members:
            m.close()
