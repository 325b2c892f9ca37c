"""The classic group's member checks and session clock as Kafka's group coordinator (GroupMetadataManager and
ClassicGroup in the group-coordinator module) has them; each test names the Kafka test or method it follows."""
from __future__ import annotations

from streaming.coordinator.javahash import hashmap_order
from tests.coordinator_harness import Harness, of_type, one


def static_stable_group(h: Harness, *instances: str) -> dict[str, str]:
    """Static members joined in one round, every one synced: instance id -> member id."""
    for instance in instances:
        h.join(instance_id=instance, client_id=instance)
    h.tick(0)
    ids = {i: h.group().static_members[i] for i in instances}
    h.sync(h.leader(), h.generation())
    for instance, member_id in ids.items():
        if member_id != h.leader():
            h.sync(member_id, h.generation(), instance_id=instance)
    assert h.state() == "Stable"
    return ids


def test_an_instance_id_the_group_does_not_know_is_an_unknown_member():
    """ClassicGroup.validateMember: a group.instance.id with no member is UNKNOWN_MEMBER_ID even when the member id
    is one of the group's (testStaticMemberJoinWithUnknownInstanceIdAndKnownMemberId,
    testStaticMembersUnknownInstanceBatchLeaveGroup) -- for JoinGroup, SyncGroup, Heartbeat and LeaveGroup."""
    h = Harness()
    ids = static_stable_group(h, "leader-instance", "follower-instance")
    leader, generation = ids["leader-instance"], h.generation()
    join = one(h.join(member_id=leader, instance_id="unknown-instance"), "join_response")
    assert join["error"] == "UNKNOWN_MEMBER_ID" and h.state() == "Stable"
    assert h.heartbeat(leader, generation, instance_id="unknown-instance") == "UNKNOWN_MEMBER_ID"
    assert one(h.sync(leader, generation, instance_id="unknown-instance"), "sync_response")["error"] == \
        "UNKNOWN_MEMBER_ID"
    leave = h.send(type="leave", member_id=leader, group_instance_id="unknown-instance")
    assert one(leave, "leave_response")["error"] == "UNKNOWN_MEMBER_ID"
    assert not of_type(leave, "member_left") and h.state() == "Stable" and len(h.group().members) == 2
    # The instance's own member id still passes, and another member's id is fenced.
    assert h.heartbeat(leader, generation, instance_id="leader-instance") == "NONE"
    assert h.heartbeat(ids["follower-instance"], generation, instance_id="leader-instance") == "FENCED_INSTANCE_ID"


def test_a_member_waiting_for_the_leaders_assignment_is_not_expired():
    """ClassicGroupMember.hasSatisfiedHeartbeat: a member awaiting its SyncGroup answer satisfies its heartbeats, so
    a follower that synced at once outlives its session while the leader takes long to assign; its session starts
    again when the assignment reaches it (propagateAssignment reschedules it)."""
    h = Harness()
    leader = h.new_member(client_id="leader", session=10_000, rebalance=60_000)
    follower = h.new_member(client_id="follower", session=10_000, rebalance=60_000)
    h.tick(0)
    assert h.state() == "CompletingRebalance" and h.leader() == leader
    generation = h.generation()
    h.sync(follower, generation)
    for _ in range(5):                        # 15 s: the leader heartbeats, the follower waits in SyncGroup
        h.tick(3_000)
        assert h.heartbeat(leader, generation) == "NONE"
    assert follower in h.group().members and not of_type(h.outputs, "member_expired")
    answered_at = h.now
    out = h.sync(leader, generation, assignments={leader: [["t", 0]], follower: [["t", 1]]})
    assert one(out, "sync_response", follower)["error"] == "NONE" and h.state() == "Stable"
    h.tick(9_999)
    assert h.heartbeat(leader, generation) == "NONE"
    assert not of_type(h.outputs, "member_expired")
    expired = one(h.tick(1), "member_expired")     # silent since it got its assignment: a full session later
    assert expired["member_id"] == follower and expired["ts"] == answered_at + 10_000


def test_a_waiting_member_is_answered_and_its_session_restarts_when_the_round_restarts():
    """prepareRebalance from CompletingRebalance answers the members waiting in SyncGroup with REBALANCE_IN_PROGRESS
    (resetAndPropagateAssignmentWithError) and reschedules their heartbeats from then."""
    h = Harness()
    leader = h.new_member(client_id="leader", session=10_000, rebalance=60_000)
    follower = h.new_member(client_id="follower", session=10_000, rebalance=60_000)
    h.tick(0)
    generation = h.generation()
    h.sync(follower, generation)
    for _ in range(4):                        # past the follower's first deadline, still waiting: kept
        h.tick(3_000)
        assert h.heartbeat(leader, generation) == "NONE"
    restarted_at = h.now
    out = h.join(member_id=leader, session=10_000, rebalance=60_000, client_id="leader",
                 protocols=[{"name": "range", "topics": ["t", "u"]}])     # new metadata: a new round
    assert one(out, "sync_response", follower)["error"] == "REBALANCE_IN_PROGRESS"
    assert h.state() == "PreparingRebalance"
    assert h.group().members[follower].session_deadline == restarted_at + 10_000


def test_sync_group_does_not_extend_the_session():
    """Only heartbeats and commits extend a session (and answering a member waiting in SyncGroup restarts it):
    a SyncGroup in Stable returns the assignment and leaves the clock alone."""
    h = Harness()
    leader, follower = h.stable_group(2, session=10_000)
    generation, started = h.generation(), h.group().members[follower].session_deadline
    h.tick(8_000)
    assert h.heartbeat(leader, generation) == "NONE"
    assert one(h.sync(follower, generation), "sync_response")["error"] == "NONE"
    assert h.group().members[follower].session_deadline == started
    h.tick(2_000)
    assert one(h.outputs[-3:], "member_expired")["member_id"] == follower


def test_a_pending_member_that_leaves_a_stable_group_starts_a_rebalance():
    """classicGroupLeaveToClassicGroup counts a pending member among the members that left: a Stable (or
    CompletingRebalance) group prepares a rebalance; in PreparingRebalance the round may complete at once
    (testPendingMembersLeaveGroup); an Empty group just forgets it."""
    h = Harness()
    h.stable_group(2)
    pending = one(h.join(client_id="newcomer"), "join_response")
    assert pending["error"] == "MEMBER_ID_REQUIRED" and h.state() == "Stable"
    assert one(h.send(type="leave", member_id=pending["member_id"]), "leave_response")["error"] == "NONE"
    assert h.state() == "PreparingRebalance" and pending["member_id"] not in h.group().pending_members

    empty = Harness(group_id="e")
    first = one(empty.join(client_id="alone"), "join_response")
    assert empty.state() == "Empty"
    assert one(empty.send(type="leave", member_id=first["member_id"]), "leave_response")["error"] == "NONE"
    assert empty.state() == "Empty" and not empty.group().pending_members


def test_a_pending_member_leaving_lets_the_join_round_complete():
    """testPendingMembersLeaveGroup: both members rejoined, the pending one is all the round waits for; its leave
    completes the round (CompletingRebalance, two members, nobody pending)."""
    h = Harness()
    leader, follower = h.stable_group(2, session=6_000, rebalance=10_000)
    h.join(member_id=leader, client_id="c0", session=6_000, rebalance=10_000)
    assert h.state() == "PreparingRebalance"
    pending = one(h.join(client_id="c2", session=6_000, rebalance=10_000), "join_response")["member_id"]
    h.join(member_id=follower, client_id="c1", session=6_000, rebalance=10_000)
    assert h.state() == "PreparingRebalance" and pending in h.group().pending_members
    assert one(h.send(type="leave", member_id=pending), "leave_response")["error"] == "NONE"
    assert h.state() == "CompletingRebalance"
    assert set(h.group().members) == {leader, follower} and not h.group().pending_members


def test_a_leader_that_leaves_hands_over_in_the_order_of_kafkas_member_map():
    """ClassicGroup.remove gives the leadership to the first member of its java.util.HashMap of members, and the
    leader's JoinGroup response lists the members in that order -- not in the order they joined."""
    handed_over_out_of_join_order = 0
    for n in range(12):
        h = Harness(group_id=f"g{n}")
        ids = h.stable_group(3)
        leader = h.leader()
        rest = [m for m in ids if m != leader]
        h.send(type="leave", member_id=leader)
        assert h.leader() == hashmap_order(rest)[0]
        handed_over_out_of_join_order += h.leader() != rest[0]
        for i, member_id in enumerate(ids[1:], start=1):
            h.join(member_id=member_id, client_id=f"c{i}")
        response = one(h.outputs[-6:], "join_response", h.leader())
        assert [m["member_id"] for m in response["members"]] == hashmap_order(rest)
    assert handed_over_out_of_join_order > 0     # the cases tell the two orders apart


def test_a_round_nobody_rejoins_keeps_its_leader():
    """testGroupStuckInRebalanceTimeoutDueToNonjoinedStaticMember, carried on: a static leader that does not rejoin
    keeps the group waiting (maybeElectNewJoinedLeader is false and leaves the leader as it is), so a member that
    joins meanwhile does not become leader, and the static leader leads again once it rejoins."""
    h = Harness(group_min_session_timeout_ms=1_000)
    kw = dict(session=10_000, rebalance=5_000)
    h.join(instance_id="leader-instance", client_id="l", **kw)
    h.join(instance_id="follower-instance", client_id="f", **kw)
    h.tick(0)
    leader, follower = (h.group().static_members[i] for i in ("leader-instance", "follower-instance"))
    generation = h.generation()
    h.sync(leader, generation, assignments={leader: [], follower: []}, instance_id="leader-instance")
    h.sync(follower, generation, instance_id="follower-instance")
    h.send(type="leave", member_id=follower, group_instance_id="follower-instance")
    assert h.state() == "PreparingRebalance"
    for _ in range(6):                        # past the rebalance timeout: nobody rejoined, the leader heartbeats
        h.tick(1_000)
        h.heartbeat(leader, generation, instance_id="leader-instance")
    assert h.state() == "PreparingRebalance" and h.generation() == generation and h.leader() == leader
    newcomer = h.new_member(client_id="n", **kw)
    assert h.leader() == leader
    h.join(member_id=leader, instance_id="leader-instance", client_id="l", **kw)
    h.tick(0)
    assert h.state() == "CompletingRebalance" and h.leader() == leader
    assert set(h.group().members) == {leader, newcomer}


def test_only_an_empty_group_takes_another_protocol_type():
    """ClassicGroup.supportsProtocols relaxes the protocol type only in state Empty: a group whose members all left
    during its first round is still a consumer group (INCONSISTENT_GROUP_PROTOCOL for a connect worker)."""
    h = Harness(group_initial_rebalance_delay_ms=3_000)
    member = h.new_member(client_id="a")
    h.send(type="leave", member_id=member)
    assert h.state() == "PreparingRebalance" and not h.group().members
    out = h.send(type="join", member_id="", group_instance_id="worker-1", client_id="w", session_timeout_ms=10_000,
                 rebalance_timeout_ms=10_000, protocol_type="connect", protocols=[{"name": "sessioned", "topics": []}])
    assert one(out, "join_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    assert h.group().protocol_type == "consumer"
