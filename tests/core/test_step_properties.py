"""The job's per-group step (``streaming.spark.group_step.step_group``) under random well-formed feeds.

A hypothesis state machine plays clients that speak the protocol loosely -- right and wrong member ids, stale and
future generations, late reports from other processes, leaves, commits after a leave, static members changing their
instance ids, topic changes, both protocols in one group -- in normal and observe mode, and cuts the feed into
micro-batches at random, every batch through the serialised state as the job does. Whatever the feed:

- nothing raises (a raise in the job would stop the query for every group; bad requests get Kafka's error answers);
- the group's state is one Kafka allows (Empty has no members, Stable and CompletingRebalance have their leader
  among the members, generations never go back, no partition has two owners in a generation the model assigned);
- the state reads back to the same bytes;
- a lost checkpoint (the group rebuilt from the store's records, as Kafka's coordinator loads ``__consumer_offsets``)
  is survived like any other state;
- where every cut's clock stays before the feed's next event, the outputs are the uncut feed's.
"""

from __future__ import annotations

import os
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from streaming.coordinator.consumer import ConsumerGroupCoordinator
from streaming.coordinator.coordinator import GroupCoordinator
from streaming.coordinator.events import parse_event
from streaming.coordinator.routing import Configs, GroupModel
from offsets_store.sqlite_store import SqliteStore
from streaming.coordinator.state import GroupState
from streaming.spark.group_step import step_group
from streaming.spark.restore import group_states

GROUP = "g"
TOPICS = ("orders", "payments")
CLIENTS = ("app-a", "app-b", "app-c")
INSTANCES = (None, None, "instance-1", "instance-2")
ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "custom")


def _configs(observe: bool) -> Configs:
    props = {
        "group.min.session.timeout.ms": 1000,
        "group.initial.rebalance.delay.ms": 500,
        "group.consumer.session.timeout.ms": 10_000,
        "group.consumer.heartbeat.interval.ms": 1000,
    }
    if observe:
        props["tracker.adopt.unknown.members"] = "true"
    return Configs.from_properties(props)


def _member_id(client: str, n: int) -> str:
    return f"{client}-{uuid.UUID(int=n)}"


class StepMachine(RuleBasedStateMachine):
    """One group's feed, cut into micro-batches, through ``step_group`` as the job runs it."""

    def __init__(self):
        super().__init__()
        self.pending: list[dict] = []  # events of the micro-batch being gathered
        self.feed: list[dict] = []  # every event, for the uncut comparison
        self.cuts: list[tuple[int, int]] = []  # (events before the cut, the cut's clock)
        self.outputs: list[dict] = []
        self.state: bytes | None = None
        self.now = 1_000_000
        self.ids: set[str] = set()  # member ids seen in answers or made up
        self.generation = 0  # the highest generation the model has shown
        self.epochs: dict[str, int] = {}  # consumer-protocol member -> the epoch it last got
        self.restored = False  # the state was rebuilt from the store at some point

    @initialize(observe=st.booleans())
    def mode(self, observe):
        self.observe = observe
        self.configs = _configs(observe)

    # ------------------------------------------------------------------------------------------ helpers
    def _emit(self, event: dict, late_ms: int = 0) -> None:
        event = {"group_id": GROUP, "ts": max(self.now - late_ms, 0), **event}
        parsed, error = parse_event(event)
        assert error is None, (error, event)  # the machine writes only well-formed events
        self.pending.append(parsed)
        self.feed.append(parsed)

    def _some_member(self, data, allow_empty: bool = True) -> str:
        choices = sorted(self.ids) + [_member_id(data.draw(st.sampled_from(CLIENTS)), data.draw(st.integers(0, 3)))]
        if allow_empty:
            choices.append("")
        return data.draw(st.sampled_from(choices))

    def _generation(self, data) -> int:
        return data.draw(
            st.sampled_from(
                [-1, 0, max(self.generation - 1, 0), self.generation, self.generation + 1, self.generation + 2]
            )
        )

    def _partitions(self, data, max_size=4) -> list[list]:
        return data.draw(
            st.lists(
                st.tuples(st.sampled_from(TOPICS), st.integers(0, 5)).map(list), max_size=max_size, unique_by=tuple
            )
        )

    def _learn(self, outputs: list[dict]) -> None:
        for o in outputs:
            member = o.get("member_id")
            if member and o["type"] in ("join_response", "member_joined", "sync_response", "assignment"):
                self.ids.add(member)
            if isinstance(o.get("generation"), int):
                self.generation = max(self.generation, o["generation"])
            if o["type"] == "consumer_heartbeat_response" and o.get("error") == "NONE":
                self.epochs[o["member_id"]] = o["member_epoch"]

    # ------------------------------------------------------------------------------------------ classic requests
    @rule(data=st.data(), late=st.sampled_from([0, 0, 0, 300, 2_000]))
    def join(self, data, late):
        member = self._some_member(data)
        protocols = data.draw(st.lists(st.sampled_from(ASSIGNORS), min_size=1, max_size=2, unique=True))
        topics = data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
        event = {
            "type": "join",
            "member_id": member,
            "group_instance_id": data.draw(st.sampled_from(INSTANCES)),
            "client_id": data.draw(st.sampled_from(CLIENTS)),
            "session_timeout_ms": data.draw(st.sampled_from([500, 3000, 10_000])),
            "rebalance_timeout_ms": data.draw(st.sampled_from([3000, 10_000])),
            "protocols": [
                {"name": p, "topics": topics, "owned_partitions": data.draw(st.sampled_from([None, []])) or None}
                for p in protocols
            ],
        }
        if self.observe and member and data.draw(st.booleans()):
            # Reported from the broker's answer: the generation it opened and its leader.
            event["generation"] = self._generation(data)
            event["leader"] = self._some_member(data, allow_empty=False)
        self._emit(event, late)

    @rule(data=st.data(), late=st.sampled_from([0, 0, 300, 2_000]))
    def sync(self, data, late):
        member = self._some_member(data)
        event = {
            "type": "sync",
            "member_id": member,
            "generation": self._generation(data),
            "group_instance_id": data.draw(st.sampled_from(INSTANCES)),
        }
        if data.draw(st.booleans()):  # the leader's SyncGroup: every member's assignment, no partition twice
            members = data.draw(
                st.lists(st.sampled_from(sorted(self.ids | {member}) or [member]), unique=True, min_size=1, max_size=4)
            )
            parts = self._partitions(data, max_size=8)
            event["assignments"] = {m: parts[i :: len(members)] for i, m in enumerate(members)}
        if data.draw(st.booleans()):
            event["assigned"] = self._partitions(data)
        if self.observe and data.draw(st.booleans()):
            event["protocol_name"] = data.draw(st.sampled_from(ASSIGNORS))
        self._emit(event, late)

    @rule(data=st.data())
    def heartbeat(self, data):
        self._emit(
            {
                "type": "heartbeat",
                "member_id": self._some_member(data),
                "generation": self._generation(data),
                "group_instance_id": data.draw(st.sampled_from(INSTANCES)),
            }
        )

    @rule(data=st.data(), late=st.sampled_from([0, 0, 500]))
    def leave(self, data, late):
        if data.draw(st.booleans()):
            self._emit(
                {
                    "type": "leave",
                    "member_id": self._some_member(data),
                    "group_instance_id": data.draw(st.sampled_from(INSTANCES)),
                },
                late,
            )
        else:  # an admin removal of a static member
            self._emit(
                {"type": "leave", "member_id": "", "group_instance_id": data.draw(st.sampled_from(INSTANCES[2:]))}, late
            )

    @rule(data=st.data(), late=st.sampled_from([0, 0, 1_000, 5_000]))
    def commit(self, data, late):
        offsets = [
            {"topic": t, "partition": p, "offset": data.draw(st.integers(0, 100))}
            for t, p in self._partitions(data, max_size=3)
        ]
        member = self._some_member(data)
        generation = self._generation(data) if member else data.draw(st.sampled_from([-1, self.generation]))
        if self.epochs and data.draw(st.booleans()):  # a consumer-protocol member commits with its epoch
            member = data.draw(st.sampled_from(sorted(self.epochs)))
            generation = self.epochs[member] + data.draw(st.sampled_from([0, 0, -1, 1]))
        self._emit(
            {
                "type": "commit",
                "member_id": member,
                "generation": generation,
                "offsets": offsets,
                "group_instance_id": data.draw(st.sampled_from(INSTANCES)),
                "retention_ms": data.draw(st.sampled_from([-1, 60_000])),
            },
            late,
        )

    @rule(data=st.data())
    def topic_metadata(self, data):
        event = {
            "type": "topic_metadata",
            "topic": data.draw(st.sampled_from(TOPICS)),
            "partitions": data.draw(st.integers(0, 6)),
        }
        if data.draw(st.booleans()):
            event["group_id"] = None  # every group's topics
        self._emit(event)

    @rule()
    def delete_group(self):
        self._emit({"type": "delete_group"})

    # ------------------------------------------------------------------------------------------ KIP-848 requests
    @rule(data=st.data())
    def consumer_heartbeat(self, data):
        member = data.draw(st.sampled_from(["m1", "m2", "m3"]))
        epoch = data.draw(st.sampled_from([0, -1, -2, self.epochs.get(member, 0), self.epochs.get(member, 0) + 1]))
        event = {
            "type": "consumer_heartbeat",
            "member_id": member,
            "member_epoch": epoch,
            "instance_id": data.draw(st.sampled_from([None, "instance-1"])),
            "topic_partitions": self._partitions(data, max_size=3),
        }
        if epoch == 0:
            event["rebalance_timeout_ms"] = 5000
            event["subscribed_topic_names"] = data.draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))
        self._emit(event)

    # ------------------------------------------------------------------------------------------ time and batches
    @rule(ms=st.sampled_from([1, 100, 1_000, 3_000, 11_000, 60_000]))
    def time_passes(self, ms):
        self.now += ms

    @rule(behind=st.sampled_from([0, 0, 1, 500, 20_000]))
    def micro_batch(self, behind):
        """The job's step: this batch's events, then the timers due at the batch's clock (which may lag)."""
        clock = self.now - behind
        result = step_group(self.state, self.pending, clock, self.configs, keep_types=None)
        self.cuts.append((len(self.feed), clock))
        self.pending = []
        self.outputs += result.outputs
        self._learn(result.outputs)
        if result.state is not None:
            again = GroupModel.from_bytes(result.state, self.configs).to_bytes()
            assert again == result.state, "the state does not read back to the same bytes"
        self.state = result.state

    @rule()
    def checkpoint_lost(self):
        """The job restarts without its checkpoint: the group is rebuilt from what the store holds."""
        store = SqliteStore(":memory:")
        store.write(self.outputs)
        self.state = group_states(store.load_records(), self.now, self.configs).get(GROUP)
        self.restored = True  # the uncut feed no longer describes the state

    # ------------------------------------------------------------------------------------------ invariants
    @invariant()
    def a_state_kafka_allows(self):
        if self.state is None:
            return
        model = GroupModel.from_bytes(self.state, self.configs).model
        if isinstance(model, ConsumerGroupCoordinator):
            group = model.groups.get(GROUP)
            if group is None:
                return
            assert group.assignment_epoch <= group.group_epoch
            owners = {}
            for m in group.members.values():
                for a in (m.assigned_partitions, m.partitions_pending_revocation):
                    for t, ps in a.items():
                        for p in ps:
                            assert (t, p) not in owners, f"{t}-{p} owned by {owners[(t, p)]} and {m.member_id}"
                            owners[(t, p)] = m.member_id
            return
        assert isinstance(model, GroupCoordinator)
        group = model.groups.get(GROUP)
        if group is None:
            return
        if group.is_(GroupState.EMPTY):
            assert not group.members, f"an Empty group with members {list(group.members)}"
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.members and group.leader_id in group.members, (group.state, group.leader_id)
        for instance, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance
        assert group.generation >= 0
        if group.is_(GroupState.STABLE) and not self.observe:
            owned = [tp for m in group.members.values() for tp in m.assignment]
            assert len(owned) == len(set(owned)), "a partition has two owners"

    def teardown(self):
        if not hasattr(self, "observe"):
            return
        for o in self.outputs:
            if o["type"] == "state_change":
                assert o["from"] != o["to"]
        generations = [
            o["generation"]
            for o in self.outputs
            if o["type"] == "rebalance" and "generation" in o and not o.get("late")
        ]
        if not self.observe:
            assert generations == sorted(generations), "rebalance generations went back"
        # The same feed uncut, where no cut's clock ran past an event of a later batch: the same outputs.
        times = [e["ts"] for e in self.feed]
        if self.cuts and not self.restored and all(clock < min(times[n:], default=clock + 1) for n, clock in self.cuts):
            whole = step_group(None, self.feed[: self.cuts[-1][0]], self.cuts[-1][1], self.configs, keep_types=None)
            assert whole.outputs == self.outputs, "cutting the feed into micro-batches changed the outputs"


# STEP_PROPERTY_EXAMPLES=5000 for a longer search than the suite's.
StepMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("STEP_PROPERTY_EXAMPLES", 150)),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_step_group_never_raises_and_keeps_kafka_states = StepMachine.TestCase
