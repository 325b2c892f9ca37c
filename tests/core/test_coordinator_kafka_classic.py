"""The classic group's member checks and session clock as Kafka's group coordinator (GroupMetadataManager and
ClassicGroup in the group-coordinator module) has them; each test names the Kafka test or method it follows."""

from __future__ import annotations

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from assignors.java import java_hash_order as hashmap_order
from tests.coordinator_harness import Harness, of_type, one


def static_stable_group(h: Harness, *instances: str, **join) -> dict[str, str]:
    """Static members joined in one round (``join``: the JoinGroup's timeouts), every one synced: instance id ->
    member id."""
    for instance in instances:
        h.join(instance_id=instance, client_id=instance, **join)
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
    assert (
        one(h.sync(leader, generation, instance_id="unknown-instance"), "sync_response")["error"] == "UNKNOWN_MEMBER_ID"
    )
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
    for _ in range(5):  # 15 s: the leader heartbeats, the follower waits in SyncGroup
        h.tick(3_000)
        assert h.heartbeat(leader, generation) == "NONE"
    assert follower in h.group().members and not of_type(h.outputs, "member_expired")
    answered_at = h.now
    out = h.sync(leader, generation, assignments={leader: [["t", 0]], follower: [["t", 1]]})
    assert one(out, "sync_response", follower)["error"] == "NONE" and h.state() == "Stable"
    h.tick(9_999)
    assert h.heartbeat(leader, generation) == "NONE"
    assert not of_type(h.outputs, "member_expired")
    expired = one(h.tick(1), "member_expired")  # silent since it got its assignment: a full session later
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
    for _ in range(4):  # past the follower's first deadline, still waiting: kept
        h.tick(3_000)
        assert h.heartbeat(leader, generation) == "NONE"
    restarted_at = h.now
    out = h.join(
        member_id=leader,
        session=10_000,
        rebalance=60_000,
        client_id="leader",
        protocols=[{"name": "range", "topics": ["t", "u"]}],
    )  # new metadata: a new round
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
    assert handed_over_out_of_join_order > 0  # the cases tell the two orders apart


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
    for _ in range(6):  # past the rebalance timeout: nobody rejoined, the leader heartbeats
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
    out = h.send(
        type="join",
        member_id="",
        group_instance_id="worker-1",
        client_id="w",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="connect",
        protocols=[{"name": "sessioned", "topics": []}],
    )
    assert one(out, "join_response")["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    assert h.group().protocol_type == "consumer"


def _loaded_group(coordinator: GroupCoordinator, member_ids: list[str], **member) -> None:
    """A Stable group of ``member_ids`` rebuilt from its GroupMetadataValue, as a broker loads it."""
    coordinator.load_records(
        [
            {
                "type": "group_metadata",
                "group_id": "group-id",
                "tombstone": False,
                "protocol_type": "consumer",
                "generation": 1,
                "protocol": "range",
                "leader": member_ids[0],
                "current_state_timestamp": 0,
                "members": [
                    {
                        "member_id": m,
                        "group_instance_id": None,
                        "client_id": "client-id",
                        "client_host": "host",
                        "session_timeout": 10_000,
                        "rebalance_timeout": 10_000,
                        "subscription": {"topics": ["t"]},
                        "assignment": {"partitions": []},
                        **member,
                    }
                    for m in member_ids
                ],
            }
        ],
        now_ms=0,
    )


def test_a_loaded_group_over_the_max_size_rebalances():
    """testOnLoadedExceedGroupMaxSizeTriggersRebalance: group.max.size lowered below a group's size since it was
    written; loading it starts a rebalance (onLoaded), members kept."""
    coordinator = GroupCoordinator(CoordinatorConfig(group_max_size=1, group_initial_rebalance_delay_ms=0))
    _loaded_group(coordinator, ["member-0", "member-1"])
    group = coordinator.groups["group-id"]
    assert group.state.value == "PreparingRebalance" and len(group.members) == 2
    roomy = GroupCoordinator(CoordinatorConfig(group_max_size=2))
    _loaded_group(roomy, ["member-0", "member-1"])
    assert roomy.groups["group-id"].state.value == "Stable"


def test_the_last_members_to_rejoin_a_full_group_are_refused_and_the_round_waits():
    """testLastJoiningMembersAreKickedOutWhenRejoiningGroupWithMaxSize: 12 members, group.max.size 10; the first ten
    to rejoin are in, the last two get GROUP_MAX_SIZE_REACHED and are removed -- which does not complete the round:
    it completes at the rebalance timeout, with the ten."""
    coordinator = GroupCoordinator(
        CoordinatorConfig(group_max_size=10, group_initial_rebalance_delay_ms=50, assignment_mode="leader")
    )
    ids = [f"client-id-{i:02d}" for i in range(12)]
    _loaded_group(coordinator, ids)
    outputs = []
    for member_id in ids:
        event, error = parse_event(
            {
                "type": "join",
                "group_id": "group-id",
                "ts": 1,
                "member_id": member_id,
                "group_instance_id": None,
                "client_id": "client-id",
                "client_host": "host",
                "session_timeout_ms": 10_000,
                "rebalance_timeout_ms": 10_000,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "topics": ["t"]}],
            }
        )
        assert error is None
        outputs += coordinator.handle(event)
    group = coordinator.groups["group-id"]
    assert group.state.value == "PreparingRebalance" and set(group.members) == set(ids[:10])
    assert [o["error"] for o in outputs if o["type"] == "join_response"] == ["GROUP_MAX_SIZE_REACHED"] * 2
    assert group.generation == 1
    answers = coordinator.advance(10_001)
    assert group.state.value == "CompletingRebalance" and group.generation == 2
    assert sorted(o["member_id"] for o in answers if o["type"] == "join_response") == ids[:10]


def test_an_expiry_ends_the_initial_rebalance_delay_when_everyone_is_in():
    """removePendingMemberAndUpdateClassicGroup / removeMemberAndUpdateClassicGroup complete the join round as soon
    as all remaining members have joined -- during the initial rebalance delay too (a join or a leave waits for the
    delay): here the pending member that never came back expires at 10 s, and the round completes then, not at 20 s."""
    h = Harness(group_initial_rebalance_delay_ms=20_000)
    h.new_member(client_id="a", session=10_000, rebalance=300_000)
    pending = one(h.join(client_id="p", session=10_000, rebalance=300_000), "join_response")
    assert pending["error"] == "MEMBER_ID_REQUIRED" and h.state() == "PreparingRebalance"
    h.tick(9_999)
    assert h.state() == "PreparingRebalance"
    h.tick(1)
    assert h.state() == "CompletingRebalance" and h.generation() == 1


def test_a_static_members_id_starts_with_its_instance_id_and_keeps_its_first_client_id():
    """ClassicGroup.generateMemberId: ``groupInstanceId-uuid`` for a static member, ``clientId-uuid`` otherwise;
    a member's client id and host are fixed at its first join (replaceStaticMember copies them to the restarted
    member, updateMember changes protocols and timeouts only)."""
    h = Harness()
    h.join(instance_id="inst-1", client_id="consumer-app-1", client_host="/10.0.0.1")
    h.tick(0)
    static_id = h.group().static_members["inst-1"]
    assert static_id.startswith("inst-1-")
    h.sync(static_id, h.generation(), assignments={static_id: [["t", 0]]}, instance_id="inst-1")
    out = h.join(instance_id="inst-1", client_id="consumer-app-1-restarted", client_host="/10.0.0.9")
    restarted = one(out, "member_replaced")["member_id"]
    assert restarted.startswith("inst-1-") and restarted != static_id
    member = h.group().members[restarted]
    assert (member.client_id, member.client_host) == ("consumer-app-1", "/10.0.0.1")
    dynamic = Harness(group_id="d")
    a, b = dynamic.stable_group(2)
    assert a.startswith("c0-") and b.startswith("c1-")
    dynamic.join(member_id=b, client_id="renamed", protocols=[{"name": "range", "topics": ["t", "u"]}])
    assert dynamic.group().members[b].client_id == "c1"


def test_a_restarted_static_follower_fences_its_old_incarnations_sync_and_the_round_goes_on_without_it():
    """testStaticMemberFenceDuplicateSyncingFollowerAfterMemberIdChanged: the old follower waits in SyncGroup when
    its restarted self joins with no member id: the old one is answered FENCED_INSTANCE_ID (and nothing is sent to
    the new id, which never synced), the group prepares a rebalance, and at the rebalance timeout the round completes
    with the new incarnation alone, as leader (the old leader, silent, expired meanwhile)."""
    h = Harness()
    kw = dict(session=6_000, rebalance=10_000)
    ids = static_stable_group(h, "leader-instance", "follower-instance", **kw)
    leader, follower = ids["leader-instance"], ids["follower-instance"]
    superset = [{"name": "range", "topics": ["t"]}, {"name": "roundrobin", "topics": ["t"]}]
    h.join(member_id=leader, instance_id="leader-instance", client_id="leader-instance", protocols=superset, **kw)
    assert h.state() == "PreparingRebalance"
    out = h.join(
        member_id=follower, instance_id="follower-instance", client_id="follower-instance", protocols=superset, **kw
    )
    assert h.state() == "CompletingRebalance" and one(out, "join_response", follower)["leader"] == leader
    generation = h.generation()
    assert of_type(h.sync(follower, generation, instance_id="follower-instance"), "sync_response") == []
    out = h.join(instance_id="follower-instance", client_id="follower-instance", protocols=superset, **kw)
    restarted = h.group().static_members["follower-instance"]
    assert one(out, "sync_response", follower)["error"] == "FENCED_INSTANCE_ID"
    assert of_type(out, "sync_response", restarted) == [] and h.state() == "PreparingRebalance"
    h.tick(10_000)
    assert h.state() == "CompletingRebalance" and h.generation() == generation + 1
    assert set(h.group().members) == {restarted} and h.leader() == restarted


def test_a_static_member_restarted_before_its_old_self_synced_rebalances_at_the_sync_timeout():
    """replaceStaticMember leaves the old member id among those the sync timeout waits for: a follower that restarts
    in Stable before its old incarnation's SyncGroup keeps the group Stable (same protocol, no rebalance) until the
    sync timeout, which then starts a rebalance -- as Kafka's expirePendingSync does."""
    h = Harness()
    kw = dict(session=30_000, rebalance=20_000)
    h.join(instance_id="leader-instance", client_id="l", **kw)
    h.join(instance_id="follower-instance", client_id="f", **kw)
    h.tick(0)
    leader = h.group().static_members["leader-instance"]
    h.sync(leader, h.generation(), instance_id="leader-instance")
    assert h.state() == "Stable"
    out = h.join(instance_id="follower-instance", client_id="f", **kw)  # restarted before the old self synced
    restarted = one(out, "member_replaced")["member_id"]
    assert h.state() == "Stable"
    assert one(h.sync(restarted, h.generation(), instance_id="follower-instance"), "sync_response")["error"] == "NONE"
    h.tick(19_999)
    assert h.state() == "Stable"
    h.tick(1)
    assert h.state() == "PreparingRebalance"


# ---------------------------------------------------------------- sessions of members waiting in a round
def kafka_test_harness(**config) -> Harness:
    """GroupMetadataManagerTest's defaults: initial delay 3 s, new-member join timeout 5 min, sessions 10 ms..10 min."""
    return Harness(
        **{
            "group_initial_rebalance_delay_ms": 3_000,
            "new_member_join_timeout_ms": 300_000,
            "group_min_session_timeout_ms": 10,
            "group_max_session_timeout_ms": 600_000,
            **config,
        }
    )


def test_a_restarted_static_member_keeps_the_old_session_timeout_until_its_first_heartbeat():
    """updateStaticMemberThenRebalanceOrCompleteJoin reschedules the heartbeat of the replacing member (a copy of
    the old one) before updateMember takes the join's timeouts: with the protocols unchanged (no rebalance) the
    first session is the old member's."""
    h = kafka_test_harness()
    h.join(instance_id="gi", session=10_000, rebalance=10_000)
    h.tick(3_000)
    old = h.group().static_members["gi"]
    h.sync(old, 1, instance_id="gi")
    restarted = h.now
    h.join(instance_id="gi", session=5_000, rebalance=10_000)  # the same consumer restarted, a shorter session
    new = h.group().static_members["gi"]
    assert new != old and h.state() == "Stable"
    assert h.group().members[new].session_deadline == restarted + 10_000
    h.tick(5_000)
    assert new in h.group().members and not of_type(h.outputs, "member_expired")
    assert h.heartbeat(new, 1, instance_id="gi") == "NONE"  # from here on its own session timeout
    assert h.group().members[new].session_deadline == h.now + 5_000


def test_a_new_members_heartbeat_while_its_join_waits_trades_the_join_timeout_for_a_session():
    """classicGroupHeartbeatToClassicGroup reschedules any valid member's heartbeat in PreparingRebalance, and
    ClassicGroupMember.hasSatisfiedHeartbeat is false for a new member: when that session ends it is removed, its
    parked JoinGroup answered UNKNOWN_MEMBER_ID (testHeartbeatDuringPreparingRebalance's scenario, to its end)."""
    h = kafka_test_harness()
    member = h.new_member(session=500, rebalance=500)  # parked in the initial round, generation 0
    assert h.heartbeat(member, 0) == "REBALANCE_IN_PROGRESS"
    out = h.tick(500)
    assert one(out, "join_response", member)["error"] == "UNKNOWN_MEMBER_ID"
    assert member not in h.group().members and h.state() == "Empty" and h.generation() == 1


def test_a_new_member_that_sends_its_join_again_keeps_its_join_timeout():
    """The new-member join timeout is set once, when the member is added (addMemberThenRebalanceOrCompleteJoin:
    for clients that retry a JoinGroup in a long rebalance); a second JoinGroup of the open round leaves it running
    (testNewMemberJoinExpiration, with the retry)."""
    h = kafka_test_harness()
    h.new_member(session=305_000, rebalance=600_000)
    h.tick(3_000)  # CompletingRebalance, generation 1
    newcomer = h.new_member(session=5_000, rebalance=5_000)
    joined = h.now
    h.tick(1_000)
    h.join(member_id=newcomer, session=5_000, rebalance=5_000)  # the retry, with its id
    out = h.tick(299_000)
    assert one(out, "join_response", newcomer)["error"] == "UNKNOWN_MEMBER_ID"
    assert one(out, "member_expired", newcomer)["ts"] == joined + 300_000
    assert newcomer not in h.group().members


def test_a_member_waiting_in_sync_that_rejoins_is_not_expired_while_it_waits_to_join():
    """prepareRebalance answers the members waiting in SyncGroup and reschedules their heartbeats
    (resetAndPropagateAssignmentWithError); one that has itself rejoined satisfies its heartbeats while it waits to
    join (hasSatisfiedHeartbeat), so that timer removes nobody."""
    h = kafka_test_harness(group_initial_rebalance_delay_ms=0)
    leader = h.new_member(client_id="leader", session=10_000, rebalance=60_000)
    follower = h.new_member(client_id="follower", session=10_000, rebalance=60_000)
    h.tick(0)
    generation = h.generation()
    h.sync(follower, generation)  # parked until the leader's assignment
    out = h.join(
        member_id=follower,
        client_id="follower",
        session=10_000,
        rebalance=60_000,
        protocols=[{"name": "range", "topics": ["t", "u"]}],
    )  # and rejoins with new metadata
    assert one(out, "sync_response", follower)["error"] == "REBALANCE_IN_PROGRESS"
    for _ in range(4):
        h.tick(3_000)
        assert h.heartbeat(leader, generation) == "REBALANCE_IN_PROGRESS"
    assert follower in h.group().members and not of_type(h.outputs, "member_expired")


# ---------------------------------------------------------------- offsets, as OffsetMetadataManager keeps them
def test_only_a_retention_of_minus_one_means_the_brokers_rule():
    """expireTimestampMs: -1 (DEFAULT_RETENTION_TIME) leaves the expiry to the broker; any other retention is added
    to the commit time as Java adds longs, negative ones and overflowing ones included
    (testGenericGroupOffsetCommitWithRetentionTime)."""
    from offsets_store.codec import decode_record, encode_record

    h = Harness()
    assert one(h.commit(retention_ms=-1), "offset_commit")["expire_timestamp"] == -1

    def stored(out: list[dict]) -> dict:
        (record,) = [o for o in of_type(out, "offset_commit") if not o["tombstone"]]
        return record

    assert stored(h.commit(offsets=[("t", 1, 5)], retention_ms=-2))["expire_timestamp"] == h.now - 2
    wrapped = stored(h.commit(offsets=[("t", 2, 5)], retention_ms=2**63 - 1))
    assert wrapped["expire_timestamp"] == h.now + 2**63 - 1 - 2**64  # Java's long arithmetic
    assert decode_record(*encode_record(wrapped))["expire_timestamp"] == wrapped["expire_timestamp"]
    h.tick(1)
    assert set(h.coordinator.fetch_offsets("g")) == {("t", 0)}  # both expired at the first look
    assert {(o["partition"], o["reason"]) for o in of_type(h.outputs, "offset_commit") if o["tombstone"]} == {
        (1, "retention"),
        (2, "retention"),
    }


def test_each_entry_of_a_commit_is_judged_on_its_own():
    """commitOffset answers and stores entry by entry: a partition named twice, once with metadata over
    offset.metadata.max.bytes, is refused once and stored once."""
    h = Harness(offset_metadata_max_bytes=3)
    out = h.send(
        type="commit",
        offsets=[
            {"topic": "t", "partition": 0, "offset": 5, "metadata": "ok"},
            {"topic": "t", "partition": 0, "offset": 6, "metadata": "too-long"},
        ],
    )
    assert one(out, "commit_response")["partitions"] == [["t", 0, "NONE"], ["t", 0, "OFFSET_METADATA_TOO_LARGE"]]
    assert h.coordinator.fetch_offsets("g")[("t", 0)]["offset"] == 5


def test_an_empty_group_whose_offsets_are_gone_is_deleted_with_its_pending_members():
    """cleanupGroupMetadata deletes an Empty group once no offset is left (ClassicGroup.isEmpty looks at the state
    only): a member waiting on MEMBER_ID_REQUIRED goes with it, and its JoinGroup finds no group."""
    h = Harness(offsets_retention_minutes=1)
    (a,) = h.stable_group(1)
    h.commit(member_id=a, generation=1)
    h.send(type="leave", member_id=a)
    h.tick(59_990)
    pending = one(h.join(session=30_000), "join_response")["member_id"]  # MEMBER_ID_REQUIRED
    out = h.tick(20)
    assert [(o["type"], o["tombstone"]) for o in out if o["type"] in ("offset_commit", "group_metadata")] == [
        ("offset_commit", True),
        ("group_metadata", True),
    ]
    assert h.state() == "Dead"
    assert one(h.join(member_id=pending, session=30_000), "join_response")["error"] == "UNKNOWN_MEMBER_ID"


def test_a_group_a_join_created_waits_a_cleanup_interval_for_its_pending_member():
    """A new group is Empty from its creation (ClassicGroup's constructor stamps the state): with nothing stored it
    goes at a cleanup pass, not before its first member had the time to send its JoinGroup again."""
    h = Harness()
    pending = one(h.join(session=30_000), "join_response")["member_id"]
    assert h.group().retention_deadline == h.now + 600_000  # offsets.retention.check.interval.ms
    h.tick(1_000)
    h.join(member_id=pending, session=30_000)
    assert pending in h.group().members and h.state() == "PreparingRebalance"


def test_a_commit_from_a_new_member_in_its_first_round_trades_its_join_timeout_for_a_session():
    """commitOffset reschedules the member's heartbeat in Stable and PreparingRebalance; a new member does not
    satisfy it while it waits to join (hasSatisfiedHeartbeat): one session later it is removed
    (testGenericGroupOffsetCommitMaintainsSession's rule, for a member still joining)."""
    h = Harness()
    h.stable_group(1, session=10_000, rebalance=100_000)
    newcomer = h.new_member(client_id="b", session=10_000, rebalance=100_000)  # PreparingRebalance
    assert one(h.commit(member_id=newcomer, generation=1), "commit_response")["error"] == "NONE"
    h.tick(10_000)
    assert newcomer not in h.group().members
    assert one(h.outputs, "member_expired", newcomer)["ts"] == h.now


def test_a_stable_groups_offsets_expire_by_the_topics_subscribed_when_the_generation_began():
    """ClassicGroup.offsetExpirationCondition spares, in a Stable consumer group, the topics of subscribedTopics --
    computed in initNextGeneration (and at load) only. A static member restarted with other topics and the same
    protocol changes no generation (updateStaticMemberThenRebalanceOrCompleteJoin), so the old topic is still the
    subscribed one (testCleanupExpiredOffsets's isSubscribedToTopic rule). The state keeps it across a restart."""
    h = Harness(offsets_retention_minutes=1)
    h.join(instance_id="i1", protocols=[{"name": "range", "topics": ["t"]}], session=30_000)
    h.tick(0)
    member = h.leader()
    h.sync(member, 1, instance_id="i1")
    h.commit(member_id=member, generation=1, group_instance_id="i1", offsets=[("t", 0, 1), ("x", 0, 1)])
    restarted = one(
        h.join(instance_id="i1", protocols=[{"name": "range", "topics": ["x"]}], session=30_000), "join_response"
    )["member_id"]
    assert h.state() == "Stable" and h.generation() == 1
    h.coordinator = GroupCoordinator.from_bytes(h.coordinator.to_bytes(), h.config)
    for _ in range(14):
        h.tick(5_000)
        h.heartbeat(restarted, 1, instance_id="i1")
    assert set(h.coordinator.fetch_offsets("g")) == {("t", 0)}
