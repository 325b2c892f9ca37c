"""Observe mode, rule by rule: the broker's answers win, whatever order the clients' reports arrive in.

Each scenario is a feed as several client processes would publish it (each client's events in order, nothing
ordered across clients), including the orders that broke the tracker against Apache Kafka 0.9 (issue #11). The
real-broker tests (test_real_broker.py) check the same rules end to end.
"""

from __future__ import annotations

from tests.coordinator_harness import Harness, of_type, one

T0 = 1_000_000
# Member ids as Kafka makes them: client id, dash, a UUID.
A, B, C, X = (f"{c}-6f1a7c9e-3d2b-4e8a-9c41-5b0d2e7f8a1{i}" for i, c in enumerate("abcx"))


def observer() -> Harness:
    h = Harness(adopt_unknown_members=True)
    h.now = T0
    return h


def answered_join(h: Harness, member: str, generation: int, leader: str, ts: int) -> list[dict]:
    """A join reported from the broker's answer (brokers before 2.2 hand out ids on the first JoinGroup)."""
    return h.join(member_id=member, client_id=member.split("-")[0], generation=generation, leader=leader, ts=ts)


def rejoin(h: Harness, member: str, ts: int) -> list[dict]:
    """A known member's JoinGroup, reported when sent."""
    return h.join(member_id=member, client_id=member.split("-")[0], ts=ts)


def synced(h: Harness, member: str, generation: int, ts: int, assignments: dict | None = None) -> list[dict]:
    fields = dict(type="sync", member_id=member, generation=generation, ts=ts)
    if assignments is not None:
        fields["assignments"] = assignments
    return h.send(**fields)


def stable_two(h: Harness) -> None:
    """a (leader) and b, generation 1, as the broker reported it."""
    answered_join(h, A, 1, A, T0)
    answered_join(h, B, 1, A, T0 + 1)
    synced(h, A, 1, T0 + 5, {A: [["t", 0]], B: [["t", 1]]})
    synced(h, B, 1, T0 + 6)
    assert h.state() == "Stable" and h.generation() == 1 and h.leader() == A


def rebalances(outputs: list[dict]) -> list[dict]:
    return of_type(outputs, "rebalance")


def test_a_newcomers_join_reported_after_the_leaders_sync_starts_no_new_round():
    h = observer()
    stable_two(h)
    out = rejoin(h, A, T0 + 1_000) + rejoin(h, B, T0 + 1_001)
    # The leader's SyncGroup names c, whose own join (published on its answer, by its own producer) is late.
    out += synced(h, A, 2, T0 + 1_010, {A: [["t", 0]], B: [["t", 1]], C: [["t", 2]]})
    assert h.state() == "Stable" and h.generation() == 2
    (line,) = rebalances(out)
    assert line["trigger"] == "join" and set(line["assignment"]) == {A, B, C}
    assert one(out, "member_joined", C)["client_id"] == "c"  # from Kafka's clientId-uuid member id
    late = answered_join(h, C, 2, A, T0 + 1_008)
    assert h.state() == "Stable" and not rebalances(late) and not of_type(late, "state_change")
    assert one(late, "member_updated", C)["protocols"] == ["range"]
    stored = one(late, "group_metadata")  # the store gets c's real subscription
    assert {m["member_id"]: m["subscription"]["topics"] for m in stored["members"]}[C] == ["t"]
    assert one(synced(h, C, 2, T0 + 1_012), "sync_response")["assignment"] == [["t", 2]]


def test_a_followers_rejoin_as_the_first_event_of_a_round_keeps_the_follower():
    h = observer()
    stable_two(h)
    out = rejoin(h, B, T0 + 1_000)  # Kafka's rule: a follower's unchanged rejoin alone opens no round
    assert h.state() == "Stable" and one(out, "join_response", B)["generation"] == 1
    out += rejoin(h, A, T0 + 1_002)  # the leader's does: the round b had heard of, begun by b's rejoin
    assert h.state() == "PreparingRebalance"
    out += synced(h, A, 2, T0 + 1_010, {A: [["t", 1]], B: [["t", 0]]})
    out += synced(h, B, 2, T0 + 1_011)
    for second in range(1, 30):  # both keep heartbeating generation 2 for 3 session timeouts
        for member in (A, B):
            out += h.send(type="heartbeat", member_id=member, generation=2, ts=T0 + 1_011 + second * 1_000)
    assert h.state() == "Stable" and h.generation() == 2 and not of_type(out, "member_expired")
    (line,) = rebalances(out)
    assert line["trigger"] == "rejoin" and line["started_ts"] == T0 + 1_000  # nobody reported why


def test_a_followers_rejoin_answered_in_its_own_generation_is_no_round():
    """A follower whose commit the broker refused (a stale generation) rejoins with its member id and the same
    protocols: Kafka 4 answers with the current generation, and nothing rebalances (seen on Apache Kafka 4.4)."""
    h = observer()
    stable_two(h)
    out = rejoin(h, B, T0 + 1_000) + synced(h, B, 1, T0 + 1_010)
    assert h.state() == "Stable" and h.generation() == 1 and not of_type(out, "state_change")
    assert one(out, "sync_response", B)["assignment"] == [["t", 1]]
    out = h.send(type="leave", member_id=A, ts=T0 + 5_000)  # a later round does not count b's old rejoin
    assert one(out, "state_change")["to"] == "PreparingRebalance" and h.group().rebalance.started_ts == T0 + 5_000
    assert not h.group().members[B].awaiting_join


def test_a_rejoin_sent_before_the_generation_was_answered_belongs_to_it():
    h = observer()
    stable_two(h)
    rejoin(h, A, T0 + 1_000)
    synced(h, A, 2, T0 + 1_010, {A: [["t", 0]], B: [["t", 1]]})
    out = rejoin(h, B, T0 + 1_001)  # b's request for round 2, published after the leader's answer
    assert h.state() == "Stable" and h.generation() == 2 and not of_type(out, "state_change")
    rejoin(h, B, T0 + 2_000)  # sent after generation 2 was answered: for a new round, if any
    rejoin(h, A, T0 + 2_100)  # (there is one: the leader rejoins too)
    assert h.state() == "PreparingRebalance" and h.group().rebalance.started_ts == T0 + 2_000


def test_a_leave_reported_while_the_leaders_sync_is_on_its_way_waits_for_it():
    h = observer()
    stable_two(h)
    rejoin(h, A, T0 + 1_000)
    rejoin(h, B, T0 + 1_001)
    out = synced(h, B, 2, T0 + 1_010)  # a follower's answer first: generation 2 is complete
    assert h.state() == "CompletingRebalance" and h.generation() == 2
    out += h.send(type="leave", member_id=B, ts=T0 + 1_050)  # b closes right after its answer
    assert not of_type(out, "member_left")
    out += synced(h, A, 2, T0 + 1_009, {A: [["t", 0]], B: [["t", 1]]})
    (line, *rest) = rebalances(out)
    assert line["generation"] == 2 and set(line["assignment"]) == {A, B} and not rest
    assert one(out, "member_left", B) and h.state() == "PreparingRebalance"
    assert out.index(line) < out.index(one(out, "member_left", B))


def test_a_newcomer_the_leaders_assignment_leaves_out_is_in_the_next_round():
    h = observer()
    stable_two(h)
    rejoin(h, A, T0 + 1_000)
    rejoin(h, B, T0 + 1_001)
    synced(h, B, 2, T0 + 1_010)
    # c's JoinGroup left before generation 2 was answered but reached the broker after the round closed.
    h.join(member_id=C, client_id="c", ts=T0 + 1_005)
    out = synced(h, A, 2, T0 + 1_009, {A: [["t", 0]], B: [["t", 1]]})
    assert set(rebalances(out)[0]["assignment"]) == {A, B} and not of_type(out, "member_expired")
    assert h.state() == "PreparingRebalance" and C in h.group().members


def test_who_is_missing_from_a_generation_died_or_failed_to_rejoin():
    h = observer()
    stable_two(h)
    answered_join(h, C, 2, A, T0 + 500)  # c joins: round 2
    out = synced(h, A, 2, T0 + 510, {A: [["t", 0]], B: [["t", 1]], C: [["t", 2]]})
    for ts in range(T0 + 1_510, T0 + 4_600, 1_000):
        out += h.send(type="heartbeat", member_id=A, generation=2, ts=ts)
        out += h.send(type="heartbeat", member_id=C, generation=2, ts=ts)
    # b went silent after its generation-1 answer; c is alive but never rejoins round 3, which ends at its join
    # timeout (10 s: the members' rebalance timeout).
    out += rejoin(h, A, T0 + 5_000)
    for ts in range(T0 + 5_510, T0 + 14_600, 1_000):
        out += h.send(type="heartbeat", member_id=C, generation=2, ts=ts)
    out += synced(h, A, 3, T0 + 15_010, {A: [["t", 0], ["t", 1], ["t", 2]]})
    expired = {o["member_id"]: o["reason"] for o in of_type(out, "member_expired")}
    assert expired == {B: "session timeout", C: "rebalance timeout"}
    assert rebalances(out)[-1]["trigger"] == "expiry"


def test_a_member_gone_from_a_round_too_short_for_any_timeout_left():
    """Neither its session nor the round's join timeout can have removed b: it left, though no leave was reported
    (the cluster feed never sees one; an instrumented client's may come later)."""
    h = observer()
    stable_two(h)
    rejoin(h, A, T0 + 1_000)
    out = synced(h, A, 2, T0 + 1_010, {A: [["t", 0], ["t", 1]]})
    assert one(out, "member_left", B)["reason"] == "leave" and not of_type(out, "member_expired")
    assert not of_type(h.send(type="leave", member_id=B, ts=T0 + 1_005), "member_left")


def test_a_generation_reported_after_a_later_one_gets_a_late_history_line():
    h = observer()
    answered_join(h, B, 2, A, T0 + 100)  # generation 2's answer arrives first ...
    late = answered_join(h, A, 1, A, T0)  # ... then the leader's reports of generation 1
    late += synced(h, A, 1, T0 + 10, {A: [["t", 0], ["t", 1]]})
    (line,) = rebalances(late)
    assert line["generation"] == 1 and line["late"] and line["assignment"] == {A: [["t", 0], ["t", 1]]}
    assert h.generation() == 2 and h.state() == "CompletingRebalance"
    out = synced(h, A, 2, T0 + 110, {A: [["t", 0]], B: [["t", 1]]})
    assert [r["generation"] for r in rebalances(out)] == [2] and h.state() == "Stable"


def test_accepted_commits_are_facts_and_an_older_one_arriving_late_changes_nothing():
    h = observer()
    stable_two(h)
    commit = dict(type="commit", generation=1, offsets=[{"topic": "t", "partition": 0, "offset": 7}])
    out = h.send(member_id=A, ts=T0 + 2_000, **commit)
    assert one(out, "commit_response")["error"] == "NONE"
    # Accepted by the broker from a member this model never saw (its reports are lost): still stored.
    h.send(member_id=X, ts=T0 + 2_100, **{**commit, "offsets": [{"topic": "t", "partition": 1, "offset": 3}]})
    out = h.send(member_id=B, ts=T0 + 1_900, **{**commit, "offsets": [{"topic": "t", "partition": 0, "offset": 5}]})
    assert one(out, "commit_response")["error"] == "NONE" and not of_type(out, "offset_commit")
    assert {tp: o["offset"] for tp, o in h.coordinator.fetch_offsets("g").items()} == {("t", 0): 7, ("t", 1): 3}


def test_a_round_the_model_opened_early_waits_for_the_member_still_heartbeating_the_old_generation():
    """The CI failure of 2026-11-26: the model expires b from b's last report, but the broker heard b for longer
    (b's last reports were lost with its process, or the broker's expiry ran late); a keeps heartbeating generation 1
    until the broker's round starts, then rejoins. The broker's join timeout counts from its own start."""
    h = observer()
    stable_two(h)
    out = []
    for ts in range(T0 + 1_000, T0 + 23_000, 1_000):  # the model's own round opens at b's expiry, T0 + 10_006
        out += h.send(type="heartbeat", member_id=A, generation=1, ts=ts)
    assert h.state() == "PreparingRebalance"
    assert [(o["member_id"], o["reason"]) for o in of_type(out, "member_expired")] == [(B, "session timeout")]
    out += rejoin(h, A, T0 + 23_500)  # 13.5 s after the model's round opened: past the 10 s join timeout
    out += synced(h, A, 2, T0 + 23_510, {A: [["t", 0], ["t", 1]]})
    assert not of_type(out, "member_expired", A) and h.state() == "Stable" and h.generation() == 2
    (line,) = [r for r in rebalances(out) if r["members"]]
    assert line["generation"] == 2 and line["assignment"] == {A: [["t", 0], ["t", 1]]} and line["trigger"] == "expiry"


# ---------------------------------------------------------------- rules found on Apache Kafka 4.4 (issue #29)
S1, S2 = (f"s0-6f1a7c9e-3d2b-4e8a-9c41-5b0d2e7f8a2{i}" for i in range(2))


def test_a_static_member_restarted_in_its_session_takes_its_old_place_without_a_round():
    """KIP-345: the restarted consumer's JoinGroup (no member id, its group.instance.id) is answered at once with a
    new member id in the current generation; Kafka writes the group with the new id. The instrumentation reports
    the join from that answer."""
    h = observer()
    answered_join(h, A, 1, A, T0)
    # s0's own join arrives after the leader's SyncGroup named it: admitted as a stand-in, then told it is static.
    synced(h, A, 1, T0 + 5, {A: [["t", 0]], S1: [["t", 1]]})
    h.join(member_id=S1, instance_id="s0", client_id="s0", generation=1, leader=A, ts=T0 + 3)
    synced(h, S1, 1, T0 + 6)
    assert h.group().static_members == {"s0": S1}
    out = h.join(member_id=S2, instance_id="s0", client_id="s0", generation=1, leader=A, ts=T0 + 2_000)
    out += synced(h, S2, 1, T0 + 2_010)
    assert one(out, "member_replaced")["previous_member_id"] == S1 and h.group().static_members == {"s0": S2}
    assert h.state() == "Stable" and h.generation() == 1 and not rebalances(out) and not of_type(out, "state_change")
    (stored,) = of_type(out, "group_metadata")
    assert sorted(m["member_id"] for m in stored["members"]) == sorted([A, S2]) and stored["generation"] == 1
    assert one(out, "sync_response", S2)["assignment"] == [["t", 1]]  # its old place
    for ts in range(T0 + 3_000, T0 + 30_000, 1_000):  # the old id is gone, not expired later
        out += h.send(type="heartbeat", member_id=A, generation=1, ts=ts)
        out += h.send(type="heartbeat", member_id=S2, group_instance_id="s0", generation=1, ts=ts)
    assert not of_type(out, "member_expired") and set(h.group().members) == {A, S2}


def test_the_leaders_own_leave_does_not_wait_for_its_sync():
    """The model completed a round on its own -- the join timeout, keeping a silent static member, as Kafka does --
    and waits for the leader's SyncGroup; the leader leaves instead. Its SyncGroup would have reached the feed before
    its leave, so the leave is not held for it (seen on Apache Kafka 4.4: the group's last members closing)."""
    h = observer()
    h.join(member_id=A, client_id="a", generation=1, leader=A, rebalance=5_000, ts=T0)
    h.join(member_id=S1, instance_id="s0", client_id="s0", generation=1, leader=A, rebalance=5_000, ts=T0 + 1)
    synced(h, A, 1, T0 + 5, {A: [["t", 0]], S1: [["t", 1]]})
    synced(h, S1, 1, T0 + 6)
    h.join(member_id=A, client_id="a", rebalance=5_000, ts=T0 + 1_000)  # the leader's rejoin; s0 is silent
    h.now = T0 + 6_001
    h.tick(0)  # the join timeout: s0 keeps its place, a leads generation 2
    assert h.state() == "CompletingRebalance" and h.generation() == 2 and set(h.group().members) == {A, S1}
    out = h.send(type="leave", member_id=A, ts=T0 + 6_500)
    assert one(out, "member_left", A) and h.state() == "PreparingRebalance" and not h.group().deferred


def test_a_newcomers_join_that_missed_the_round_it_was_sent_in_waits_for_the_next():
    """A new member's JoinGroup (reported when sent) before the round's first answer, which the leader's assignment
    leaves out: it reached the broker after the join completed. It is on its way, not expired."""
    h = observer()
    h.join(member_id=A, client_id="a", ts=T0)
    h.join(member_id=B, client_id="b", ts=T0 + 100)
    out = synced(h, A, 1, T0 + 130, {A: [["t", 0], ["t", 1]]})
    assert not of_type(out, "member_expired") and not of_type(out, "member_left")
    assert B in h.group().members and h.state() == "PreparingRebalance"
    out = rejoin(h, A, T0 + 1_100) + synced(h, B, 2, T0 + 1_190)
    out += synced(h, A, 2, T0 + 1_188, {A: [["t", 0]], B: [["t", 1]]})
    assert [(r["generation"], sorted(r["assignment"])) for r in rebalances(out)] == [(2, sorted([A, B]))]


def test_the_previous_leaders_leave_reported_after_a_followers_answer_waits_for_the_new_leader():
    """Found on Apache Kafka 4.4 (a Kafka 4 history with the clients' reports shuffled): leader a leaves, the broker
    forms generation 2 with b and c, and a's LeaveGroup reaches the feed after b's answer of generation 2. The model,
    in generation 2 on b's word, does not know its leader yet; a is the previous generation's leader, and its leave
    was sent before the round completed, so it waits: c's assignment leaves a out, and a's leave says why -- no new
    round for it."""
    h = observer()
    answered_join(h, A, 1, A, T0)
    answered_join(h, B, 1, A, T0 + 1)
    answered_join(h, C, 1, A, T0 + 2)
    synced(h, A, 1, T0 + 5, {A: [["t", 0]], B: [["t", 1]], C: [["t", 2]]})
    synced(h, B, 1, T0 + 6)
    synced(h, C, 1, T0 + 7)
    out = synced(h, B, 2, T0 + 1_020)  # its rejoin and answer: the broker opened and completed generation 2
    out += h.send(type="leave", member_id=A, ts=T0 + 1_000)  # sent before, reported late
    assert h.state() == "CompletingRebalance" and h.generation() == 2
    out += synced(h, C, 2, T0 + 1_021, {B: [["t", 0], ["t", 1]], C: [["t", 2]]})
    assert h.state() == "Stable" and h.generation() == 2
    (gone,) = of_type(out, "member_left")
    assert gone["member_id"] == A and gone["reason"] == "leave"
    assert one(out, "leave_response", A)["error"] == "NONE"
    (line,) = rebalances(out)
    assert line["generation"] == 2 and set(line["assignment"]) == {B, C}


def test_a_late_heartbeat_restarts_the_session_from_when_it_was_sent():
    """a's last heartbeat reaches the feed after b's later events: the broker's timer for a ran from when a sent
    it, so a is gone 10 s later -- before b's rejoin, not in the middle of the round b's rejoin opened."""
    h = observer()
    stable_two(h)
    h.send(type="heartbeat", member_id=B, generation=1, ts=T0 + 1_400)
    h.send(type="heartbeat", member_id=A, generation=1, ts=T0 + 1_000)  # a's last word, published late
    out = []
    for ts in range(T0 + 2_400, T0 + 11_000, 1_000):
        out += h.send(type="heartbeat", member_id=B, generation=1, ts=ts)
    out += answered_join(h, B, 2, B, T0 + 11_100)
    out += synced(h, B, 2, T0 + 11_500, {B: [["t", 0], ["t", 1]]})
    expired = one(out, "member_expired", A)
    assert expired["reason"] == "session timeout" and expired["ts"] == T0 + 11_000
    (line,) = rebalances(out)
    assert line["generation"] == 2 and line["trigger"] == "expiry" and set(line["assignment"]) == {B}
    assert h.state() == "Stable" and h.generation() == 2


def test_a_rejoin_answered_in_the_next_generation_stores_nothing_for_the_last():
    """A cooperative member's JoinGroup names the partitions it owns, new each generation. Reported with the next
    generation's answer, it opens that generation: the broker wrote no record for the last one with it, and the
    next one's completion stores it (seen through the cluster feed on Kafka 4.4: a GroupMetadata too many)."""
    h = observer()
    stable_two(h)
    owning = [{"name": "range", "topics": ["t"], "owned_partitions": [["t", 0]]}]
    out = h.join(member_id=A, client_id="a", generation=2, leader=A, ts=T0 + 1_000, protocols=owning)
    assert h.generation() == 2 and not of_type(out, "group_metadata")
    out = answered_join(h, B, 2, A, T0 + 1_001)
    out += synced(h, A, 2, T0 + 1_010, {A: [["t", 0]], B: [["t", 1]]}) + synced(h, B, 2, T0 + 1_011)
    (stored,) = of_type(out, "group_metadata")
    assert stored["generation"] == 2
    subscriptions = {m["member_id"]: m["subscription"] for m in stored["members"]}
    assert subscriptions[A]["owned_partitions"] == [["t", 0]]
