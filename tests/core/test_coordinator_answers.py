"""Answers the coordinator gives exactly as Kafka's GroupCoordinator does: the order of the OffsetCommit checks, the
answer to a pending JoinGroup when its member is removed, sessions restarted when a join round completes, requests
with an empty group id or no protocols, and protocol selection on an empty group.

Expectations follow Kafka's GroupCoordinator.scala (3.x) and GroupMetadataManager / ClassicGroup /
OffsetMetadataManager (4.x) and their tests.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

from streaming.coordinator import parse_event
from streaming.coordinator.group import Group
from streaming.spark.job import BROADCAST_KEY, JobOptions, make_state_function, parse_rows
from streaming.spark.sinks import TrackerSink
from tests.coordinator_harness import Harness, of_type, one


# ---------------------------------------------------------------- OffsetCommit: Kafka's order of checks
def group_in(state: str) -> tuple[Harness, str, str]:
    """A group in ``state`` with a dynamic leader and a static member (instance "i1"); returns (harness, leader id,
    static member id). Empty is reached by both members leaving."""
    h = Harness()
    leader = h.new_member(client_id="a")
    static = one(h.join(instance_id="i1", client_id="s"), "member_joined")["member_id"]
    h.tick(0)
    if state == "CompletingRebalance":
        return h, leader, static
    h.sync(leader, 1)
    h.sync(static, 1, instance_id="i1")
    if state == "PreparingRebalance":
        h.new_member(client_id="late")
    elif state == "Empty":
        h.send(type="leave", member_id=leader)
        h.send(type="leave", member_id=static, group_instance_id="i1")
    assert h.state() == state
    return h, leader, static


# (who commits, with which instance id, which generation) -> answer in Empty / PreparingRebalance /
# CompletingRebalance / Stable. "G" is the group's current generation. Kafka: Dead -> COORDINATOR_NOT_AVAILABLE;
# generation < 0 on an Empty group is always accepted; otherwise a request naming a member, an instance or a
# generation must come from the current member (unknown instance or member -> UNKNOWN_MEMBER_ID, instance mapped to
# another member -> FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION); an anonymous commit to a group
# with members -> UNKNOWN_MEMBER_ID; only a valid member's commit during CompletingRebalance -> REBALANCE_IN_PROGRESS.
COMMIT_CASES = {
    "member, current generation": (
        ("leader", None, "G"),
        ("UNKNOWN_MEMBER_ID", "NONE", "REBALANCE_IN_PROGRESS", "NONE"),
    ),
    "static member, current generation": (
        ("static", "i1", "G"),
        ("UNKNOWN_MEMBER_ID", "NONE", "REBALANCE_IN_PROGRESS", "NONE"),
    ),
    "unknown member": (("ghost", None, "G"), ("UNKNOWN_MEMBER_ID",) * 4),
    "wrong generation": (("leader", None, "G+1"), ("UNKNOWN_MEMBER_ID",) + ("ILLEGAL_GENERATION",) * 3),
    "anonymous, generation -1": (("", None, -1), ("NONE",) + ("UNKNOWN_MEMBER_ID",) * 3),
    "member, generation -1": (("leader", None, -1), ("NONE",) + ("ILLEGAL_GENERATION",) * 3),
    "instance of another member": (("leader", "i1", "G"), ("UNKNOWN_MEMBER_ID",) + ("FENCED_INSTANCE_ID",) * 3),
    "instance only, generation -1": (("", "i1", -1), ("NONE",) + ("FENCED_INSTANCE_ID",) * 3),
    "unknown instance of a known member": (("static", "i9", "G"), ("UNKNOWN_MEMBER_ID",) * 4),
}
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")


@pytest.mark.parametrize("case", list(COMMIT_CASES))
@pytest.mark.parametrize("state", STATES)
def test_commit_checks_member_and_generation_in_kafkas_order(state, case):
    (who, instance, generation), answers = COMMIT_CASES[case]
    h, leader, static = group_in(state)
    member_id = {"leader": leader, "static": static}.get(who, who)
    generation = {"G": h.generation(), "G+1": h.generation() + 1}.get(generation, generation)
    out = h.commit(member_id=member_id, generation=generation, group_instance_id=instance)
    expected = answers[STATES.index(state)]
    response = one(out, "commit_response")
    assert response["error"] == expected
    assert response["partitions"] == [["t", 0, expected]]
    assert bool(of_type(out, "offset_commit")) == (expected == "NONE")


def test_commit_during_completing_rebalance_validates_before_answering_rebalance_in_progress():
    h = Harness()
    a = h.new_member()
    h.tick(0)
    assert h.state() == "CompletingRebalance"
    assert one(h.commit(member_id="ghost", generation=1), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.commit(member_id=a, generation=0), "commit_response")["error"] == "ILLEGAL_GENERATION"
    assert one(h.commit(), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.commit(member_id=a, generation=1), "commit_response")["error"] == "REBALANCE_IN_PROGRESS"
    assert h.coordinator.fetch_offsets("g") == {}


# ---------------------------------------------------------------- removing a member whose JoinGroup is pending
def test_new_member_join_timeout_answers_its_pending_join_with_unknown_member_id():
    h = Harness(new_member_join_timeout_ms=5_000)
    (a,) = h.stable_group(1, session=10_000, rebalance=60_000)
    b = h.new_member(client_id="b", session=10_000, rebalance=60_000)
    assert h.state() == "PreparingRebalance"
    h.tick(3_000)
    h.heartbeat(a, 1)  # a stays alive but never rejoins: the round hangs
    out = h.tick(2_000)
    assert one(out, "join_response", b)["error"] == "UNKNOWN_MEMBER_ID"
    expired = one(out, "member_expired", b)
    assert expired["reason"] == "new member join timeout"
    assert out.index(one(out, "join_response", b)) < out.index(expired)  # answered before it is removed
    assert b not in h.group().members and h.state() == "PreparingRebalance"


def test_leave_answers_the_leaving_members_pending_join():
    h = Harness()
    a, b = h.stable_group(2)
    h.join(member_id=a)  # the leader rejoins and waits for b
    assert h.group().members[a].awaiting_join
    out = h.send(type="leave", member_id=a)
    assert one(out, "leave_response", a)["error"] == "NONE"
    assert one(out, "join_response", a)["error"] == "UNKNOWN_MEMBER_ID"
    out = h.join(member_id=b)
    assert one(out, "join_response", b)["error"] == "NONE" and one(out, "join_response", b)["leader"] == b


def test_admin_removal_answers_the_static_members_pending_join():
    h = Harness()
    ids = {i: one(h.join(instance_id=i, client_id=i), "member_joined")["member_id"] for i in ("i1", "i2")}
    h.tick(0)
    h.sync(ids["i1"], 1, instance_id="i1")
    h.new_member(client_id="d")
    h.join(member_id=ids["i2"], instance_id="i2")  # i2 waits in the new round
    out = h.send(type="leave", member_id="", group_instance_id="i2")
    assert one(out, "join_response", ids["i2"])["error"] == "UNKNOWN_MEMBER_ID"
    assert one(out, "member_left")["member_id"] == ids["i2"]


def test_removing_a_member_that_awaits_sync_leaves_its_sync_unanswered():
    # Kafka answers a pending SyncGroup of a removed member only when a static member is replaced (FENCED_INSTANCE_ID);
    # on leave the rebalance it starts answers the members that remain, not the one that left.
    h = Harness()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    c = h.new_member(client_id="c")
    h.tick(0)
    h.sync(b, 1)
    h.sync(c, 1)  # b and c wait for the leader's assignment
    out = h.send(type="leave", member_id=b)
    assert of_type(out, "sync_response", b) == []
    assert one(out, "sync_response", c)["error"] == "REBALANCE_IN_PROGRESS"
    assert of_type(out, "join_response") == [] and h.state() == "PreparingRebalance" and a in h.group().members


# ---------------------------------------------------------------- completing a join round restarts every session
def test_join_completion_restarts_the_session_of_a_static_member_that_did_not_rejoin():
    h = Harness()
    ids = {i: one(h.join(instance_id=i, client_id=i), "member_joined")["member_id"] for i in ("i1", "i2")}
    h.tick(0)
    h.sync(ids["i1"], 1, instance_id="i1")
    h.sync(ids["i2"], 1, instance_id="i2")
    h.new_member(client_id="d")  # rebalance timeout 10 s
    h.join(member_id=ids["i1"], instance_id="i1")
    h.tick(5_000)
    h.heartbeat(ids["i2"], 1, instance_id="i2")  # i2's session would end 10 s from here
    h.tick(5_000)
    assert h.state() == "CompletingRebalance" and ids["i2"] in h.group().members
    completed = h.now
    # Kafka reschedules every member's heartbeat in onCompleteJoin, the static member that missed the round included.
    assert {m.session_deadline for m in h.group().members.values()} == {completed + 10_000}
    out = h.tick(5_000)  # where i2's old session would have ended
    assert of_type(out, "member_expired") == []


# ---------------------------------------------------------------- requests Kafka answers with an error, not bad input
def test_empty_group_id_and_empty_protocols_are_requests_not_dead_letters():
    join = {"type": "join", "group_id": "g", "protocols": [{"name": "range", "topics": ["t"]}]}
    assert parse_event(dict(join, protocols=[]))[1] is None
    assert parse_event(dict(join, protocols=[{"name": "", "topics": ["t"]}]))[1] is None
    for kind, fields in [
        ("join", join),
        ("sync", {"generation": 1}),
        ("heartbeat", {"generation": 1}),
        ("leave", {}),
        ("commit", {"offsets": []}),
        ("delete_group", {}),
    ]:
        event, error = parse_event({**fields, "type": kind, "group_id": ""})
        assert error is None and event["group_id"] == "", kind
    # What cannot be read as a request at all is still bad input.
    assert "missing field 'protocols'" in parse_event({"type": "join", "group_id": "g"})[1]
    assert "missing field 'group_id'" in parse_event({"type": "heartbeat", "generation": 1})[1]


def test_join_with_no_protocols_is_inconsistent_and_leaves_no_group():
    h = Harness()
    out = h.join(protocols=[])
    assert one(out, "join_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    assert h.coordinator.group_ids() == [] and h.coordinator.is_blank()
    a, b = h.stable_group(2)
    out = h.join(member_id=a, protocols=[])
    assert one(out, "join_response", a)["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    assert h.state() == "Stable" and h.generation() == 1 and not h.group().members[a].awaiting_join


@pytest.mark.parametrize(
    "refusal",
    [dict(protocols=[]), dict(protocol_type=""), dict(session=1_000)],
    ids=["no protocols", "no protocol type", "session timeout"],
)
def test_a_refused_join_leaves_no_group_and_keeps_the_groups_topic_sizes(refusal):
    h = Harness(assignment_mode="tracker")
    h.send(type="topic_metadata", topic="t", partitions=2)
    assert one(h.join(**refusal), "join_response")["error"] != "NONE"
    assert h.coordinator.group_ids() == []
    a = h.new_member()
    h.tick(0)
    assert one(h.sync(a, 1), "sync_response", a)["assignment"] == [["t", 0], ["t", 1]]


def test_protocol_with_an_empty_name_is_a_protocol_like_any_other():
    h = Harness()
    a = h.new_member(protocols=[{"name": "", "topics": ["t"]}])
    assert one(h.tick(0), "join_response", a)["protocol"] == ""


@pytest.mark.parametrize(
    "kind,fields,answer",
    [
        (
            "join",
            dict(member_id="", session_timeout_ms=10_000, protocols=[{"name": "range", "topics": ["t"]}]),
            "join_response",
        ),
        ("join", dict(member_id="m", session_timeout_ms=1, protocols=[]), "join_response"),  # checked before all else
        ("sync", dict(member_id="m", generation=1), "sync_response"),
        ("heartbeat", dict(member_id="m", generation=1), "heartbeat_response"),
        ("leave", dict(member_id="m"), "leave_response"),
        ("leave", dict(group_instance_id="i1"), "leave_response"),
    ],
)
def test_group_management_requests_with_an_empty_group_id_are_invalid(kind, fields, answer):
    h = Harness(group_id="")
    h.commit(offsets=[("t", 0, 5)])  # an offsets-only group "" exists: the group id is refused all the same
    out = h.send(type=kind, **fields)
    response = one(out, answer)
    assert response["error"] == "INVALID_GROUP_ID" and response["group_id"] == ""
    assert response["member_id"] == fields.get("member_id", "")
    assert h.coordinator.group_ids() == [""] and h.state() == "Empty" and not h.group().members
    assert len(out) == 1


def test_commit_and_delete_accept_the_empty_group_id_as_kafka_does():
    # Kafka keeps OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups working for the empty group id.
    h = Harness(group_id="")
    assert one(h.commit(offsets=[("t", 0, 5)]), "commit_response")["error"] == "NONE"
    assert h.coordinator.fetch_offsets("") == {("t", 0): {"offset": 5, "leader_epoch": -1, "metadata": ""}}
    assert h.coordinator.describe_group("")["state"] == "Empty"
    out = h.send(type="delete_group")
    assert one(out, "delete_group_response")["error"] == "NONE"
    assert one(out, "offset_commit")["tombstone"] and h.coordinator.group_ids() == []


class FakeGroupState:
    """The slice of Spark's GroupState the job's state function uses."""

    def __init__(self):
        self.value = None
        self.hasTimedOut = False

    @property
    def exists(self):
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value):
        self.value = value

    def remove(self):
        self.value = None

    def getCurrentProcessingTimeMs(self):
        return 10_000

    def setTimeoutDuration(self, ms):
        pass


def kafka_rows(events: list[dict], keys: list[bytes | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": keys,
            "value": [json.dumps(e).encode() for e in events],
            "topic": "events",
            "partition": 0,
            "offset": range(len(events)),
            "timestamp_ms": [e.get("ts", 0) for e in events],
        }
    )


def test_job_keys_the_empty_group_id_as_a_group_and_global_metadata_apart():
    events = [
        {"type": "commit", "group_id": "", "ts": 1_000, "offsets": [{"topic": "t", "partition": 0, "offset": 7}]},
        {"type": "join", "group_id": "", "ts": 1_000, "protocols": []},
        {"type": "topic_metadata", "ts": 1_000, "topic": "t", "partitions": 3},
        {"type": "topic_metadata", "group_id": "", "ts": 1_000, "topic": "u", "partitions": 1},
    ]
    (parsed,) = parse_rows([kafka_rows(events, [b"", b"", None, b""])])
    # One row per group's run of events (none bad: a bad record has no event time); no group id: every group's.
    assert parsed["event_time"].notna().all()
    assert list(parsed["group_id"]) == ["", BROADCAST_KEY]
    on_group = make_state_function(JobOptions(output_types=None))
    by_key = {}
    for key, rows in parsed.groupby(parsed["group_id"].map(repr)):
        state = FakeGroupState()
        frames = list(on_group((rows["group_id"].iloc[0],), iter([rows]), state))
        by_key[key] = ([json.loads(p) for f in frames for p in f["payload"]], state)
    group_outputs, state = by_key[repr("")]
    assert [o["type"] for o in group_outputs] == ["offset_commit", "commit_response", "join_response"]
    assert group_outputs[-1]["error"] == "INVALID_GROUP_ID" and state.exists  # group "" lives on, offsets only
    broadcasts, state = by_key[repr(BROADCAST_KEY)]
    assert [(o["type"], o["event"]["topic"]) for o in broadcasts] == [
        ("broadcast_event", "t"),
        ("broadcast_event", "u"),
    ]
    assert not state.exists


class ArrowBatch:
    """Just enough of a Spark DataFrame for TrackerSink.__call__."""

    def __init__(self, rows: list[dict]):
        self.table = pa.Table.from_pylist(rows)

    def select(self, *columns):
        return self

    def toArrow(self):
        return self.table


def test_sink_orders_a_batch_holding_the_empty_group_and_broadcasts():
    seen = []
    sink = TrackerSink(on_outputs=lambda batch_id, outputs: seen.extend(outputs))
    rows = [
        {"group_id": "g", "seq": 0, "payload": json.dumps({"type": "state_change", "group_id": "g"})},
        {
            "group_id": BROADCAST_KEY,
            "seq": 0,
            "payload": json.dumps({"type": "broadcast_event", "group_id": BROADCAST_KEY}),
        },
        {"group_id": "", "seq": 0, "payload": json.dumps({"type": "offset_commit", "group_id": ""})},
    ]
    sink(ArrowBatch(rows), 0)
    assert [o["group_id"] for o in seen] == [BROADCAST_KEY, "", "g"]
    # Global metadata is never fanned out to "": a topic_metadata for "" is itself global, it would come back again.
    assert sink.known_groups == {"g"}


def test_sink_restarting_from_a_store_with_the_empty_group_does_not_fan_out_to_it():
    class Store:
        def groups(self):
            return ["", "g"]

    assert TrackerSink(store=Store()).known_groups == {"g"}


@pytest.mark.spark
def test_streaming_job_runs_the_empty_group_id_as_its_own_group(spark, tmp_path):
    from tests.spark.test_job import Collector, start, write_rows

    source = tmp_path / "in"
    source.mkdir()
    ts = 1_700_000_000_000
    events = [
        {"type": "topic_metadata", "ts": ts, "topic": "t", "partitions": 3},
        {"type": "commit", "group_id": "", "ts": ts, "offsets": [{"topic": "t", "partition": 0, "offset": 7}]},
        {"type": "heartbeat", "group_id": "", "ts": ts, "member_id": "m", "generation": 1},
    ]
    write_rows(source, "a", [json.dumps(e).encode() for e in events], [b"", b"", b""], 0, [ts] * 3)
    sink = Collector()
    query = start(spark, source, tmp_path / "checkpoint", JobOptions(time_mode="event", output_types=None), sink)
    query.processAllAvailable()
    query.stop()
    got = [(o["type"], o["group_id"], o.get("error")) for o in sink.outputs]
    assert sorted(got, key=repr) == sorted(
        [
            ("broadcast_event", None, None),
            ("offset_commit", "", None),
            ("commit_response", "", "NONE"),
            ("heartbeat_response", "", "INVALID_GROUP_ID"),
        ],
        key=repr,
    )


# ---------------------------------------------------------------- protocol selection needs members
def test_selecting_a_protocol_for_a_group_without_members_is_a_bug():
    from streaming.coordinator.state import IllegalGroupState  # Kafka: IllegalStateException

    with pytest.raises(IllegalGroupState, match="empty group"):
        Group("g").select_protocol()


def test_a_round_that_ends_with_nobody_left_never_selects_a_protocol():
    # The last members go in every way a round can lose them: a new member's join timeout, a member that does not
    # rejoin in time, a leave during the round. The round still completes: Empty, next generation, no protocol.
    h = Harness(new_member_join_timeout_ms=5_000)
    a, b = h.stable_group(2, rebalance=20_000)
    h.new_member(client_id="c", rebalance=20_000)
    h.join(member_id=b, rebalance=20_000)
    h.send(type="leave", member_id=b)
    for _ in range(7):
        h.tick(3_000)
        if a in h.group().members:
            h.heartbeat(a, 1)  # alive, but never rejoins
    assert h.state() == "Empty" and h.generation() == 2 and h.group().protocol_name is None
    assert [(o["member_id"], o["reason"]) for o in of_type(h.outputs, "member_expired")][-1] == (a, "rebalance timeout")
    assert of_type(h.outputs, "group_metadata")[-1]["members"] == []


def test_job_refuses_an_unknown_state_key():
    with pytest.raises(ValueError, match="state key must be one of"):
        make_state_function(JobOptions(state_key="member"))
