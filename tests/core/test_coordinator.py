"""The classic group coordinator, scenario by scenario.

Expectations ported from Kafka's GroupCoordinatorTest / GroupMetadataTest / ClassicGroupTest (as event scripts) and
from the seeds' flows: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, a member joining a Stable
group, crash versus leave, offsets committed during a rebalance.
"""

from __future__ import annotations

import pytest

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, parse_event
from assignors.java import java_hash_order as hashmap_order
from streaming.coordinator.state import VALID_PREVIOUS
from tests.coordinator_harness import Harness, of_type, one


# ---------------------------------------------------------------- states
def test_state_transitions_are_kafkas():
    S = GroupState
    assert VALID_PREVIOUS[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert S.PREPARING_REBALANCE.can_follow(S.EMPTY) and not S.STABLE.can_follow(S.EMPTY)


# ---------------------------------------------------------------- JoinGroup validation
def test_join_with_unknown_member_id_on_unknown_group():
    h = Harness()
    assert one(h.join(member_id="ghost"), "join_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert "g" not in h.coordinator.groups


@pytest.mark.parametrize("session", [5_999, 1_800_001])
def test_join_with_session_timeout_out_of_bounds(session):
    h = Harness()
    assert one(h.join(session=session), "join_response")["error"] == "INVALID_SESSION_TIMEOUT"


def test_join_with_empty_protocol_type_is_inconsistent():
    h = Harness()
    out = h.join(protocol_type="")
    assert one(out, "join_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"


def test_join_with_no_common_protocol_is_inconsistent():
    h = Harness()
    h.new_member()
    out = h.join(protocols=[{"name": "roundrobin", "topics": ["t"]}])
    assert one(out, "join_response", "")["error"] == "INCONSISTENT_GROUP_PROTOCOL"


def test_join_with_other_protocol_type_is_inconsistent():
    h = Harness()
    h.new_member()
    assert one(h.join(protocol_type="connect"), "join_response", "")["error"] == "INCONSISTENT_GROUP_PROTOCOL"


def test_new_dynamic_member_must_come_back_with_its_id():
    h = Harness()
    first = one(h.join(client_id="app"), "join_response")
    assert first["error"] == "MEMBER_ID_REQUIRED" and first["member_id"].startswith("app-")
    assert h.state() == "Empty" and not h.group().members
    h.join(member_id=first["member_id"], client_id="app")
    assert h.state() == "PreparingRebalance"
    response = one(h.tick(0), "join_response")
    assert response["error"] == "NONE" and response["generation"] == 1 and response["leader"] == first["member_id"]


def test_pending_member_expires_after_its_session_timeout():
    h = Harness()
    member_id = one(h.join(session=6_000), "join_response")["member_id"]
    h.tick(6_000)
    assert one(h.join(member_id=member_id, session=6_000), "join_response")["error"] == "UNKNOWN_MEMBER_ID"


def test_member_ids_are_deterministic():
    a, b = Harness(), Harness()
    assert a.new_member() == b.new_member()


def test_group_max_size_refuses_extra_members():
    h = Harness(group_max_size=2)
    h.stable_group(2)
    out = h.join(member_id="", client_id="third")
    assert one(out, "join_response")["error"] == "GROUP_MAX_SIZE_REACHED"
    assert len(h.group().members) == 2 and h.state() == "Stable"


# ---------------------------------------------------------------- the first rebalance
def test_first_rebalance_walks_the_four_states_and_elects_the_first_joiner():
    h = Harness()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    out = h.tick(0)
    states = [o["to"] for o in h.outputs if o["type"] == "state_change"]
    assert states == ["PreparingRebalance", "CompletingRebalance"]
    responses = {o["member_id"]: o for o in of_type(out, "join_response")}
    assert set(responses) == {a, b}
    assert {r["generation"] for r in responses.values()} == {1}
    # The leader learns the members in the order Kafka's HashMap of members iterates them (here b's id first).
    assert responses[a]["leader"] == a and [m["member_id"] for m in responses[a]["members"]] == hashmap_order([a, b])
    assert hashmap_order([a, b]) == [b, a]
    assert responses[b]["members"] == []  # only the leader learns the members
    out = h.sync(b, 1)
    assert of_type(out, "sync_response") == []  # a follower waits for the leader
    out = h.sync(a, 1, assignments={a: [["t", 0]], b: [["t", 1]]})
    assert one(out, "sync_response", a)["assignment"] == [["t", 0]]
    assert one(out, "sync_response", b)["assignment"] == [["t", 1]]
    assert h.state() == "Stable"
    record = one(out, "group_metadata")
    assert record["generation"] == 1 and record["leader"] == a and record["protocol"] == "range"
    assert {m["member_id"]: m["assignment"]["partitions"] for m in record["members"]} == {a: [["t", 0]], b: [["t", 1]]}
    assert [m["member_id"] for m in record["members"]] == hashmap_order([a, b])
    rebalance = one(out, "rebalance")
    assert rebalance["trigger"] == "join" and rebalance["generation"] == 1


def test_initial_rebalance_delay_gathers_members_into_one_generation():
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    a = h.new_member(rebalance=10_000)
    h.tick(2_000)
    b = h.new_member(rebalance=10_000)  # arrives within the delay: the delay is extended once more
    h.tick(1_000)
    assert h.state() == "PreparingRebalance"
    h.tick(2_999)
    assert h.state() == "PreparingRebalance"
    out = h.tick(1)
    assert h.state() == "CompletingRebalance"
    assert {o["member_id"] for o in of_type(out, "join_response")} == {a, b}


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    h.new_member(session=6_000, rebalance=6_000)
    for _ in range(5):  # a member arrives every 2.9 s, for ever
        h.tick(2_900)
        if h.state() != "PreparingRebalance":
            break
        h.new_member(session=6_000, rebalance=6_000)
    started = next(o["ts"] for o in h.outputs if o.get("to") == "PreparingRebalance")
    completed = next(o["ts"] for o in h.outputs if o.get("to") == "CompletingRebalance")
    assert completed - started == 6_000  # delay 3 s + remaining 3 s, never more than the rebalance timeout


def test_protocol_vote_picks_what_most_members_prefer():
    h = Harness()
    both = [{"name": "range", "topics": ["t"]}, {"name": "roundrobin", "topics": ["t"]}]
    rr_first = [{"name": "roundrobin", "topics": ["t"]}, {"name": "range", "topics": ["t"]}]
    h.new_member(protocols=both)
    h.new_member(protocols=rr_first)
    h.new_member(protocols=rr_first)
    out = h.tick(0)
    assert {o["protocol"] for o in of_type(out, "join_response")} == {"roundrobin"}


def test_protocol_vote_tie_follows_java_hashmap_order():
    # One vote each for "range" and "sticky". Java's HashMap iterates "sticky" (bucket 5) before "range"
    # (bucket 6), and Stream.max keeps the first of equal maxima.
    h = Harness()
    h.new_member(protocols=[{"name": "range", "topics": ["t"]}, {"name": "sticky", "topics": ["t"]}])
    h.new_member(protocols=[{"name": "sticky", "topics": ["t"]}, {"name": "range", "topics": ["t"]}])
    out = h.tick(0)
    assert {o["protocol"] for o in of_type(out, "join_response")} == {"sticky"}


# ---------------------------------------------------------------- heartbeats and sessions
def test_heartbeat_errors():
    h = Harness()
    a, b = h.stable_group(2)
    assert h.heartbeat(a, 1) == "NONE"
    assert h.heartbeat("ghost", 1) == "UNKNOWN_MEMBER_ID"
    assert h.heartbeat(a, 2) == "ILLEGAL_GENERATION"
    assert (
        one(h.send(type="heartbeat", group_id="nope", member_id=a, generation=1), "heartbeat_response")["error"]
        == "UNKNOWN_MEMBER_ID"
    )
    h.new_member(client_id="late")  # Stable -> PreparingRebalance
    assert h.heartbeat(a, 1) == "REBALANCE_IN_PROGRESS"


def test_heartbeat_during_completing_rebalance_is_fine():
    h = Harness()
    a = h.new_member()
    h.tick(0)
    assert h.state() == "CompletingRebalance"
    assert h.heartbeat(a, 1) == "NONE"


def test_heartbeats_keep_a_member_alive_and_silence_expires_it():
    h = Harness()
    a, b = h.stable_group(2, session=10_000)
    for _ in range(8):  # a heartbeats every 3 s; b stops after its heartbeat at t0+9 s
        h.tick(3_000)
        h.heartbeat(a, 1)
        if h.now - 1_000 < 10_000:
            h.heartbeat(b, 1)
    expired = of_type(h.outputs, "member_expired")
    assert [e["member_id"] for e in expired] == [b] and expired[0]["reason"] == "session timeout"
    assert expired[0]["ts"] == expired[0]["last_heartbeat_ts"] + 10_000
    assert h.state() == "PreparingRebalance"
    out = h.join(member_id=a)  # the only member left rejoins: the round completes at once
    assert one(out, "join_response", a)["generation"] == 2
    h.sync(a, 2)
    rebalance = of_type(h.outputs, "rebalance")[-1]
    assert rebalance["trigger"] == "expiry" and [m["member_id"] for m in rebalance["members"]] == [a]


def test_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout():
    h = Harness()
    a, b = h.stable_group(2, session=10_000, rebalance=20_000)
    h.new_member(client_id="c", session=10_000, rebalance=20_000)
    h.join(member_id=a, session=10_000, rebalance=20_000)
    for _ in range(6):  # b keeps heartbeating but never rejoins
        h.tick(3_000)
        h.heartbeat(b, 1)
    assert h.state() == "PreparingRebalance"
    out = h.tick(2_000)
    assert h.state() == "CompletingRebalance"
    assert [e["member_id"] for e in of_type(out, "member_expired")] == [b]
    assert one(out, "member_expired")["reason"] == "rebalance timeout"
    assert b not in h.group().members


def test_leader_that_does_not_rejoin_hands_over_leadership():
    h = Harness()
    a, b = h.stable_group(2)
    assert h.leader() == a
    h.join(member_id=b, protocols=[{"name": "range", "topics": ["t", "u"]}])  # b's subscription changed
    h.heartbeat(a, 1)  # a is alive but never rejoins
    out = h.tick(10_000)
    assert one(out, "join_response", b)["leader"] == b


# ---------------------------------------------------------------- joining a Stable group (seed 003)
def test_new_member_while_stable_triggers_a_rebalance_and_everyone_rejoins():
    h = Harness()
    a, b = h.stable_group(2)
    c = h.new_member(client_id="c")
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, 1) == "REBALANCE_IN_PROGRESS"
    h.join(member_id=a)
    assert h.state() == "PreparingRebalance"  # still waiting for b
    out = h.join(member_id=b)
    assert h.state() == "CompletingRebalance"
    assert {o["member_id"] for o in of_type(out, "join_response")} == {a, b, c}
    assert {o["generation"] for o in of_type(out, "join_response")} == {2}


def test_rejoin_of_follower_with_same_metadata_in_stable_returns_current_generation():
    h = Harness()
    a, b = h.stable_group(2)
    out = h.join(member_id=b)
    assert h.state() == "Stable"
    assert one(out, "join_response", b)["generation"] == 1


def test_rejoin_of_leader_in_stable_triggers_a_rebalance():
    h = Harness()
    a, b = h.stable_group(2)
    h.join(member_id=a)
    assert h.state() == "PreparingRebalance"


def test_rejoin_with_changed_subscription_triggers_a_rebalance():
    h = Harness()
    a, b = h.stable_group(2)
    h.join(member_id=b, protocols=[{"name": "range", "topics": ["t", "u"]}])
    assert h.state() == "PreparingRebalance"


# ---------------------------------------------------------------- SyncGroup
def test_sync_errors():
    h = Harness()
    a, b = h.stable_group(2)
    assert one(h.sync("ghost", 1), "sync_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.sync(a, 7), "sync_response")["error"] == "ILLEGAL_GENERATION"
    out = h.send(type="sync", member_id=a, generation=1, protocol_name="roundrobin")
    assert one(out, "sync_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    h.new_member(client_id="late")
    assert one(h.sync(a, 1), "sync_response")["error"] == "REBALANCE_IN_PROGRESS"


def test_sync_in_stable_returns_the_members_assignment_again():
    h = Harness()
    a = h.new_member()
    h.tick(0)
    h.sync(a, 1, assignments={a: [["t", 0], ["t", 1]]})
    assert one(h.sync(a, 1), "sync_response")["assignment"] == [["t", 0], ["t", 1]]


def test_rebalance_restarting_during_completing_rebalance_answers_waiting_followers():
    h = Harness()
    h.new_member()  # the leader, which never syncs here
    b = h.new_member()
    h.tick(0)
    h.sync(b, 1)  # b waits for the leader
    h.new_member(client_id="c")
    assert one(h.outputs, "sync_response", b)["error"] == "REBALANCE_IN_PROGRESS"


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout():
    h = Harness()
    a = h.new_member(rebalance=20_000)
    b = h.new_member(rebalance=20_000)
    h.tick(0)
    h.sync(a, 1)
    assert h.state() == "Stable"
    for _ in range(3):
        h.tick(5_000)
        h.heartbeat(a, 1)
        h.heartbeat(b, 1)  # b heartbeats but never sends SyncGroup
    h.tick(4_999)
    assert h.state() == "Stable"
    h.heartbeat(a, 1)
    out = h.tick(1)
    assert [(e["member_id"], e["reason"]) for e in of_type(out, "member_expired")] == [(b, "sync timeout")]
    assert h.state() == "PreparingRebalance"


# ---------------------------------------------------------------- LeaveGroup (seed 003: leave versus crash)
def test_leave_rebalances_at_once_and_crash_only_after_the_session_timeout():
    leave = Harness()
    a, b = leave.stable_group(2)
    out = leave.send(type="leave", member_id=b)
    assert one(out, "leave_response")["error"] == "NONE"
    assert one(out, "member_left")["member_id"] == b and leave.state() == "PreparingRebalance"

    crash = Harness()
    a, b = crash.stable_group(2, session=10_000)
    crash.tick(9_999)
    crash.heartbeat(a, 1)
    assert crash.state() == "Stable"
    crash.tick(1)
    assert crash.state() == "PreparingRebalance" and one(crash.outputs, "member_expired")["member_id"] == b


def test_leave_errors():
    h = Harness()
    a, b = h.stable_group(2)
    assert one(h.send(type="leave", member_id="ghost"), "leave_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.send(type="leave", group_id="nope", member_id=a), "leave_response")["error"] == "UNKNOWN_MEMBER_ID"


def test_last_member_leaving_empties_the_group_and_writes_empty_metadata():
    h = Harness()
    (a,) = h.stable_group(1)
    out = h.send(type="leave", member_id=a)
    assert h.state() == "Empty" and h.generation() == 2
    record = one(out, "group_metadata")
    assert record["members"] == [] and record["generation"] == 2 and record["protocol"] is None


# ---------------------------------------------------------------- static membership (KIP-345)
def static_group(h: Harness, instances=("i1", "i2")) -> dict[str, str]:
    ids = {}
    for i in instances:
        ids[i] = one(h.join(instance_id=i, client_id=i), "member_joined")["member_id"]
    h.tick(0)
    h.sync(
        ids[instances[0]],
        1,
        assignments={ids[i]: [["t", n]] for n, i in enumerate(instances)},
        instance_id=instances[0],
    )
    return ids


def test_static_member_joins_without_member_id_required():
    h = Harness()
    out = h.join(instance_id="i1")
    assert of_type(out, "join_response") == [] and h.state() == "PreparingRebalance"


def test_static_member_restart_in_stable_keeps_assignment_without_rebalance():
    h = Harness()
    ids = static_group(h)
    out = h.join(instance_id="i2", client_id="i2")
    new_id = one(out, "member_replaced")["member_id"]
    assert new_id != ids["i2"] and h.state() == "Stable" and h.generation() == 1
    assert one(out, "join_response")["generation"] == 1
    assert one(h.sync(new_id, 1, instance_id="i2"), "sync_response")["assignment"] == [["t", 1]]
    assert h.heartbeat(ids["i2"], 1, instance_id="i2") == "FENCED_INSTANCE_ID"
    assert of_type(h.outputs, "state_change")[-1]["to"] == "Stable"


def test_static_leader_restart_keeps_leadership():
    h = Harness()
    static_group(h)
    new_id = one(h.join(instance_id="i1", client_id="i1"), "member_replaced")["member_id"]
    assert h.leader() == new_id and h.state() == "Stable"


def test_static_member_restart_with_other_protocol_rebalances():
    h = Harness()
    static_group(h)
    h.join(instance_id="i2", protocols=[{"name": "roundrobin", "topics": ["t"]}, {"name": "range", "topics": ["t"]}])
    assert h.state() == "Stable"  # range is still what every member supports and votes for
    h2 = Harness()
    static_group(h2, ("i1",))
    out = h2.join(
        instance_id="i1", protocols=[{"name": "roundrobin", "topics": ["t"]}, {"name": "range", "topics": ["t"]}]
    )
    assert [o["to"] for o in of_type(out, "state_change")] == ["PreparingRebalance", "CompletingRebalance"]
    assert one(out, "join_response")["protocol"] == "roundrobin" and h2.generation() == 2


def test_static_member_that_misses_the_rebalance_keeps_its_place():
    h = Harness()
    ids = static_group(h)
    h.new_member(client_id="d", rebalance=10_000)
    h.join(member_id=ids["i1"], instance_id="i1")
    h.tick(5_000)
    h.heartbeat(ids["i2"], 1, instance_id="i2")  # alive, but does not rejoin in time
    out = h.tick(5_000)
    assert h.state() == "CompletingRebalance"
    assert ids["i2"] in h.group().members and of_type(out, "member_expired") == []


def test_static_member_fenced_by_instance_id():
    h = Harness()
    ids = static_group(h)
    out = h.join(member_id=ids["i1"], instance_id="i2")
    assert one(out, "join_response")["error"] == "FENCED_INSTANCE_ID"
    assert (
        one(h.send(type="leave", member_id=ids["i1"], group_instance_id="i2"), "leave_response")["error"]
        == "FENCED_INSTANCE_ID"
    )


def test_admin_removal_of_static_member_by_instance_id():
    h = Harness()
    ids = static_group(h)
    out = h.send(type="leave", member_id="", group_instance_id="i2")
    assert one(out, "leave_response")["error"] == "NONE" and one(out, "member_left")["member_id"] == ids["i2"]
    assert h.state() == "PreparingRebalance"


# ---------------------------------------------------------------- OffsetCommit
def test_simple_commit_creates_an_offsets_only_group():
    h = Harness()
    out = h.commit(offsets=[("t", 0, 42), ("t", 1, 7)])
    assert one(out, "commit_response")["error"] == "NONE" and h.state() == "Empty"
    assert {tp: o["offset"] for tp, o in h.coordinator.fetch_offsets("g").items()} == {("t", 0): 42, ("t", 1): 7}
    record = of_type(out, "offset_commit")[0]
    assert record == {
        "type": "offset_commit",
        "group_id": "g",
        "ts": h.now,
        "topic": "t",
        "partition": 0,
        "offset": 42,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": h.now,
        "expire_timestamp": -1,
        "tombstone": False,
    }


def test_commit_errors():
    h = Harness()
    assert one(h.commit(member_id="m", generation=3), "commit_response")["error"] == "ILLEGAL_GENERATION"
    a, b = h.stable_group(2)
    assert one(h.commit(), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.commit(member_id="ghost", generation=1), "commit_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert one(h.commit(member_id=a, generation=2), "commit_response")["error"] == "ILLEGAL_GENERATION"
    out = h.send(
        type="commit",
        member_id=a,
        generation=1,
        offsets=[{"topic": "t", "partition": 0, "offset": 1, "metadata": "x" * 4097}],
    )
    assert one(out, "commit_response")["partitions"] == [["t", 0, "OFFSET_METADATA_TOO_LARGE"]]


def test_commit_to_an_unknown_group_by_api_version():
    # OffsetMetadataManagerTest.testOffsetCommitWithUnknownGroup (Kafka 4.0): GROUP_ID_NOT_FOUND from v9, else
    # ILLEGAL_GENERATION; a commit that does not state its version gets the older answer.
    h = Harness()
    for version, error in ((None, "ILLEGAL_GENERATION"), (8, "ILLEGAL_GENERATION"), (9, "GROUP_ID_NOT_FOUND")):
        out = h.commit(member_id="m", generation=10, api_version=version)
        assert one(out, "commit_response")["error"] == error and not of_type(out, "offset_commit")
    assert "g" not in h.coordinator.groups


def test_commit_metadata_is_measured_as_kafka_does():
    """OffsetMetadataManager.isMetadataInvalid: ``String.length()`` against offset.metadata.max.bytes -- UTF-16
    code units, not UTF-8 bytes."""
    h = Harness(offset_metadata_max_bytes=4)
    out = h.send(
        type="commit",
        offsets=[
            {"topic": "t", "partition": p, "offset": 1, "metadata": m}
            for p, m in enumerate(("éééé", "ééééé", "\U0001f600\U0001f600", "\U0001f600\U0001f600x"))
        ],
    )
    assert [e for _, _, e in one(out, "commit_response")["partitions"]] == [
        "NONE",
        "OFFSET_METADATA_TOO_LARGE",
        "NONE",
        "OFFSET_METADATA_TOO_LARGE",
    ]


def test_commit_during_a_rebalance():
    # Seed 001/003: a member may still commit for the generation it has while the group prepares a rebalance,
    # but not while the new generation's assignment is being handed out.
    h = Harness()
    a, b = h.stable_group(2)
    h.new_member(client_id="c")
    assert h.state() == "PreparingRebalance"
    assert one(h.commit(member_id=a, generation=1), "commit_response")["error"] == "NONE"
    h.join(member_id=a)
    h.join(member_id=b)
    assert h.state() == "CompletingRebalance"
    assert one(h.commit(member_id=a, generation=2), "commit_response")["error"] == "REBALANCE_IN_PROGRESS"


def test_commit_counts_as_a_heartbeat():
    h = Harness()
    (a,) = h.stable_group(1, session=10_000)
    h.tick(8_000)
    h.commit(member_id=a, generation=1)
    h.tick(8_000)
    assert h.state() == "Stable"


# ---------------------------------------------------------------- retention (KIP-211) and deletion
def test_offsets_of_an_empty_group_expire_after_retention_counted_from_empty():
    h = Harness(offsets_retention_minutes=1)
    (a,) = h.stable_group(1)
    h.commit(member_id=a, generation=1)
    for _ in range(10):
        h.tick(5_000)
        h.heartbeat(a, 1)
    h.send(type="leave", member_id=a)  # Empty from now on: retention counts from here, not from the commit
    h.tick(59_999)
    assert h.coordinator.fetch_offsets("g")
    out = h.tick(1)
    tombstone = one(out, "offset_commit")
    assert tombstone["tombstone"] is True and (tombstone["topic"], tombstone["partition"]) == ("t", 0)
    assert one(out, "group_metadata")["tombstone"] is True and h.state() == "Dead"


def test_offsets_of_a_stable_group_expire_only_for_unsubscribed_topics():
    h = Harness(offsets_retention_minutes=1)
    (a,) = h.stable_group(1)
    h.commit(member_id=a, generation=1, offsets=[("t", 0, 1), ("old", 0, 5)])
    for _ in range(14):
        h.tick(5_000)
        h.heartbeat(a, 1)
    assert set(h.coordinator.fetch_offsets("g")) == {("t", 0)}
    assert [(o["topic"], o["tombstone"]) for o in of_type(h.outputs, "offset_commit")][-1] == ("old", True)


def test_explicit_retention_time_expires_offsets():
    h = Harness()
    h.commit(offsets=[("t", 0, 1)], retention_ms=5_000)
    assert one(h.outputs, "offset_commit")["expire_timestamp"] == h.now + 5_000
    out = h.tick(5_000)
    assert h.coordinator.fetch_offsets("g") == {} and h.state() == "Dead"
    # An offsets-only group (generation 0) never had metadata written, so no group tombstone either.
    assert of_type(out, "group_metadata") == [] and one(out, "offset_commit")["tombstone"] is True


def test_delete_group():
    h = Harness()
    (a,) = h.stable_group(1)
    assert one(h.send(type="delete_group"), "delete_group_response")["error"] == "NON_EMPTY_GROUP"
    h.commit(member_id=a, generation=1)
    h.send(type="leave", member_id=a)
    out = h.send(type="delete_group")
    assert one(out, "delete_group_response")["error"] == "NONE"
    assert one(out, "offset_commit")["tombstone"] and one(out, "group_metadata")["tombstone"]
    assert h.state() == "Dead"
    assert one(h.send(type="delete_group"), "delete_group_response")["error"] == "GROUP_ID_NOT_FOUND"


# ---------------------------------------------------------------- determinism, serialisation, reload
def scripted_run(split_at: int | None = None) -> list[dict]:
    """A busy scenario; when split_at is given the coordinator is serialised and rebuilt after that event."""
    h = Harness(offsets_retention_minutes=1)
    a, b = h.stable_group(2)
    c = h.new_member(client_id="c")
    h.join(member_id=a)
    h.join(member_id=b)
    h.sync(a, 2, assignments={a: [["t", 0]], b: [["t", 1]], c: [["t", 2]]})
    h.commit(member_id=b, generation=2, offsets=[("t", 1, 9)])
    h.tick(30_000)
    events, config = h.events, h.config
    coordinator = GroupCoordinator(config)
    out: list[dict] = []
    for i, event in enumerate(events):
        if i == split_at:
            coordinator = GroupCoordinator.from_bytes(coordinator.to_bytes(), config)
        out += coordinator.handle(event)
    out += coordinator.advance(events[-1]["ts"] + 200_000)
    return out


def test_replay_is_identical_and_survives_serialisation_anywhere():
    baseline = scripted_run()
    assert baseline == scripted_run()
    assert any(o["type"] == "member_expired" for o in baseline)
    for split in range(1, 15):
        assert scripted_run(split) == baseline, f"differs when split after event {split}"


def test_export_and_import_of_one_group():
    h = Harness()
    h.stable_group(2)
    other = GroupCoordinator(h.config)
    other.import_group(h.coordinator.export_group("g"))
    assert other.describe_group("g") == h.coordinator.describe_group("g")
    assert other.next_deadline("g") == h.coordinator.next_deadline("g")


def test_reload_from_written_records_restores_groups_and_offsets():
    h = Harness()
    a, b = h.stable_group(2)
    h.commit(member_id=a, generation=1, offsets=[("t", 0, 11), ("t", 1, 12)])
    h.commit(member_id=b, generation=1, offsets=[("t", 1, 13)])
    records = [o for o in h.outputs if o["type"] in ("offset_commit", "group_metadata")]
    restarted = GroupCoordinator(h.config)
    restarted.load_records(records, now_ms=h.now)
    assert restarted.fetch_offsets("g") == h.coordinator.fetch_offsets("g")
    assert restarted.describe_group("g") == h.coordinator.describe_group("g")
    assert restarted.next_deadline("g") == h.now + 10_000
    # and the reloaded group carries on: a heartbeat of the current generation is accepted
    event, _ = parse_event({"type": "heartbeat", "group_id": "g", "member_id": a, "generation": 1, "ts": h.now})
    assert one(restarted.handle(event), "heartbeat_response")["error"] == "NONE"


def test_reload_honours_tombstones():
    h = Harness()
    h.commit(offsets=[("t", 0, 1)], retention_ms=1)
    h.tick(1)
    restarted = GroupCoordinator(h.config)
    restarted.load_records([o for o in h.outputs if o["type"] in ("offset_commit", "group_metadata")], h.now)
    assert restarted.fetch_offsets("g") == {}


def test_reloaded_v0_members_get_their_session_timeout_as_rebalance_timeout():
    from offsets_store import decode_record
    from tests.offsets.test_offsets_codec import KAFKA_09_GROUP_KEY, KAFKA_09_GROUP_VALUE

    record = decode_record(bytes.fromhex(KAFKA_09_GROUP_KEY), bytes.fromhex(KAFKA_09_GROUP_VALUE))
    leader, follower = (m["member_id"] for m in record["members"])
    h = Harness("g1")
    h.coordinator.load_records([record], now_ms=h.now)
    assert h.coordinator.describe_group("g1")["state"] == "Stable"
    h.send(type="leave", member_id=follower)  # a round starts; the leader has its 6 s to rejoin
    h.tick(5_999)
    assert [m["member_id"] for m in h.coordinator.describe_group("g1")["members"]] == [leader]
    h.join(member_id=leader, session=6_000)
    completing = [o for o in h.outputs if o["type"] == "state_change" and o["to"] == "CompletingRebalance"]
    assert [o["generation"] for o in completing] == [3]


def test_config_from_kafka_property_names():
    config = CoordinatorConfig.from_properties(
        {"group.max.size": "5", "group.initial.rebalance.delay.ms": 0, "tracker.assignment.mode": "leader"}
    )
    assert (config.group_max_size, config.group_initial_rebalance_delay_ms, config.assignment_mode) == (5, 0, "leader")
    with pytest.raises(ValueError, match="unknown coordinator setting"):
        CoordinatorConfig.from_properties({"group.max.sise": 5})
    assert CoordinatorConfig().group_min_session_timeout_ms == 6_000
    assert CoordinatorConfig().offsets_retention_minutes == 7 * 24 * 60


# ---------------------------------------------------------------- observing a real broker (adopt mode)
def test_observing_a_broker_follows_its_ids_generations_and_leader():
    h = Harness(adopt_unknown_members=True)
    assert one(h.join(client_id="a"), "join_response")["error"] == "MEMBER_ID_REQUIRED"
    assert "g" not in h.coordinator.groups  # no pending member of ours: the broker hands out the id
    h.join(member_id="a-broker-id", client_id="a")
    h.join(member_id="b-broker-id", client_id="b")
    h.tick(0)
    assert h.state() == "PreparingRebalance"  # our own timers do not end the broker's round
    # The broker numbered this generation 0 and made b its leader: b's SyncGroup carries the assignment.
    h.sync("a-broker-id", 0)
    assert h.state() == "CompletingRebalance" and h.generation() == 0
    out = h.sync("b-broker-id", 0, assignments={"a-broker-id": [["t", 0]], "b-broker-id": [["t", 1]]})
    assert h.state() == "Stable" and h.leader() == "b-broker-id"
    assert one(out, "sync_response", "a-broker-id")["assignment"] == [["t", 0]]
    assert one(out, "rebalance")["generation"] == 0


def test_observing_a_static_member_takes_the_broker_issued_id():
    h = Harness(adopt_unknown_members=True)
    ours = one(h.join(instance_id="i1"), "member_joined")["member_id"]
    h.sync("broker-id", 1, instance_id="i1", assignments={"broker-id": [["t", 0]]})
    assert ours not in h.group().members and h.group().static_members["i1"] == "broker-id"
    assert h.state() == "Stable"
