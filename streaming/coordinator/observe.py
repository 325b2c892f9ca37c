"""Observe mode: follow a group that a real broker runs, from the events its clients report.

With ``tracker.adopt.unknown.members=true`` the broker is the coordinator and the feed reports its answers, so the
broker's word wins over the model's own decisions. The feed comes from many client processes: each client's events
are in order, but nothing orders them across clients, so any member's report of a round may arrive before or after
another's. The rules:

* An answer that carries a generation (a SyncGroup answer, a JoinGroup reported from its answer, an accepted
  commit) proves the broker completed that join round: the model moves to that generation, whatever its own timers
  said.
* The leader's SyncGroup names the generation's members (its assignment has an entry for every member): they are
  the members, adopted if their own joins are still on the way, and anyone it leaves out is gone.
* A rejoin sent before the earliest answer of the current generation belongs to that (finished) round; a later one
  means the broker is rebalancing again, so a round starts; its cause (a leave, an expiry, a newcomer) replaces
  "rejoin" when the model learns it.
* While the model waits for the leader's SyncGroup of a generation it entered on another member's answer, leaves
  and later joins wait too: they happened after the broker completed that join, so they belong to the next round.
  A newcomer the leader's assignment leaves out was on its way to the next round as well. A leave sent before the
  generation's earliest answer waits as well (the previous generation's leader's included): the member left before
  the round completed, and its leave is why the leader's assignment leaves it out.
* Accepted commits are facts: stored whatever the model thinks of the member, unless a newer commit of the same
  partition is already there.
* An answer in a lower generation that comes after the group emptied means the broker dropped the group and numbers
  a new one from the start (Kafka 0.9 does so when its last member leaves): the model follows.

The model fills in only what nobody reported, such as an expiry when a member's heartbeats stop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from streaming.coordinator import offsets as O
from streaming.coordinator import outputs
from streaming.coordinator.group import Group, is_cooperative
from streaming.coordinator.member import Member
from streaming.coordinator.member import Protocol as JoinProtocol
from streaming.coordinator.outputs import Output, Outputs
from streaming.coordinator.state import GroupState as S

if TYPE_CHECKING:
    from streaming.coordinator.config import CoordinatorConfig

REJOIN = "rejoin"  # a round whose cause the model has not seen (yet)


class ClassicRules(Protocol):
    """What observe mode asks of the classic coordinator (``GroupCoordinator``): Kafka's own operations on a group,
    applied when the broker's answers show they happened, and the timers that go with them. Nothing else of the
    coordinator is used here."""

    groups: dict[str, Group]

    def apply_kafka_rules(self, group: Group | None, e: dict) -> Outputs:
        """A request answered as Kafka's handler for its type answers it."""

    def create_group(self, e: dict, start_seen: bool = True) -> Group: ...

    def schedule_session(self, group: Group, member: Member) -> None:
        """Restart the member's session now."""

    def extend_session(self, group: Group, member: Member) -> None:
        """The member was heard from: its session runs from now."""

    def set_join_deadline(self, group: Group, deadline: int | None) -> None: ...

    def set_sync_deadline(self, group: Group, deadline: int | None) -> None: ...

    def change_state(self, group: Group, target: S, reason: str) -> Output: ...

    def prepare_rebalance(self, group: Group, trigger: str, detail: str) -> Outputs: ...

    def update_member_and_rebalance(
        self, group: Group, member: Member, e: dict, protocols: list[JoinProtocol], trigger: str
    ) -> Outputs: ...

    def remove_member(
        self, group: Group, member: Member, trigger: str, detail: str, update_group: bool = True, reason: str = ""
    ) -> Outputs: ...

    def complete_sync(self, group: Group, given: dict[str, list] | None) -> Outputs:
        """The leader's SyncGroup: the generation's assignment, and Stable."""

    def answer_sync(self, group: Group, member: Member) -> Output: ...

    def observe_delivery(self, group: Group, member: Member, assigned: list) -> Outputs:
        """What an instrumented client reported it received."""

    def restore_gap(self, group: Group, e: dict, reason: str, follows: bool) -> Outputs:
        """A sign of what the store did not hold, after a restore (restored.py)."""


class BrokerObserver:
    """Observe mode's request handling, beside the coordinator (``rules``) whose operations it applies. The
    coordinator hands it every event (``handle``); it also tells it when a round opens (``take_noted_rejoins``) and
    when a generation's sync timeout ends what waited for it (``release_deferred``)."""

    def __init__(self, rules: ClassicRules, config: CoordinatorConfig) -> None:
        self.rules = rules
        self.records_only = config.records_only

    def handle(self, group: Group | None, e: dict) -> Outputs:
        """The outputs of one event: the broker's answer it reports wins; what it does not settle gets Kafka's
        rules. An event that belongs to the round after the one under way waits for it."""
        if group is not None and self._belongs_to_next_round(group, e):
            group.deferred.append(e)
            return []
        return self._handle_now(group, e)

    def _handle_now(self, group: Group | None, e: dict) -> Outputs:
        out = self._observe(group, e)
        return out if out is not None else self.rules.apply_kafka_rules(group, e)

    def _observe(self, group: Group | None, e: dict) -> Outputs | None:
        """The outputs of an event the broker's answers settle; None leaves it to Kafka's rules."""
        kind = e["type"]
        if kind == "join":
            return self._observe_join(group, e)
        if kind == "sync":
            return self._observe_sync(group, e)
        if kind == "commit":
            return self._observe_commit(group, e)
        if kind == "leave" and self.records_only and group is not None:
            return self._observe_gone(group, e)
        if kind == "heartbeat" and group is not None:
            self._observe_heartbeat(group, e)
        return None

    def _observe_heartbeat(self, group: Group, e: dict) -> None:
        member = group.members.get(e["member_id"])
        if member is not None and not member.awaiting_join:
            self.rules.extend_session(group, member, _ts(e, group))  # alive, whatever generation it still reports
            if group.is_(S.PREPARING_REBALANCE) and e["generation"] == group.generation:
                self._broker_round_not_before(group, _ts(e, group))

    def take_noted_rejoins(self, group: Group) -> None:
        """A round opens: followers whose unchanged rejoins were answered without one since this generation's
        answers (``_observe_join``) were rejoining for it -- their heartbeats had heard of it. It began no later,
        and they are in it (an eager one gave up its partitions then)."""
        rb = group.rebalance
        for m in group.members.values():
            ts, m.rejoin_ts = m.rejoin_ts, None
            if ts is None or ts < group.generation_ts or m.awaiting_join:
                continue
            m.awaiting_join, m.session_deadline = True, None  # the round's timeout governs it now
            rb.started_ts = min(rb.started_ts, ts)
            if not is_cooperative(group.protocol_name):
                group.figures.release(m.group_instance_id or m.member_id, None if self.records_only else ts)

    def _broker_round_not_before(self, group: Group, ts: int) -> None:
        """A member still heartbeating in the generation before the round has not been told of the round: it
        rejoins on the first answer that says REBALANCE_IN_PROGRESS. So the broker's round started no earlier than
        about now, even when the model opened it sooner on its own (an expiry it inferred from reports that arrived
        late or not at all, while the broker still heard the member). The broker's join timeout counts from its own
        start: the model's waits as long, rather than remove members that are alive and about to rejoin."""
        deadline = ts + group.max_rebalance_timeout_ms()
        if group.join_deadline is not None and deadline > group.join_deadline:
            self.rules.set_join_deadline(group, deadline)

    def _belongs_to_next_round(self, group: Group, e: dict) -> bool:
        if not group.is_(S.COMPLETING_REBALANCE) or e["type"] not in ("join", "leave"):
            return False
        if e["type"] == "leave":
            # The leader's own leave cannot wait for its SyncGroup: that would have reached the feed first. Only
            # a leader of this generation, though: one that left before its earliest answer is the previous
            # generation's (entered on a follower's answer, the model does not know the new leader yet), and it
            # left before the round completed -- the leader's assignment will leave it out.
            return e["member_id"] != group.leader_id or _ts(e, group) < group.generation_ts
        return bool(e["member_id"]) and e.get("generation") is None and _ts(e, group) >= group.generation_ts

    def release_deferred(self, group: Group) -> Outputs:
        """Apply what waited for the generation's end, in the order it arrived."""
        deferred, group.deferred = group.deferred, []
        out: Outputs = []
        for e in deferred:
            if group.group_id not in self.rules.groups:
                break
            out += self._handle_now(group, e)
        return out

    # --- JoinGroup ------------------------------------------------------------------------------------------
    def _observe_join(self, group: Group | None, e: dict) -> Outputs | None:
        member_id, generation = e["member_id"], e.get("generation")
        if not member_id:
            return None  # asks for an id (KIP-394) or a static member's restart
        if generation is not None and generation < 0:
            generation = None  # no broker answers a join with a negative generation: a request
        if generation is None:  # reported when sent: a request for the next round
            return self._observe_join_request(group, e)
        # Reported from the broker's answer: this member is in that generation.
        if group is None:
            group = self.rules.create_group(e)
        reopen = self._reopens(group, _ts(e, group))
        if not reopen and (generation < group.generation or _is_empty(group)):
            if member_id in group.members:  # an answer from a round already past
                return self._refresh_member(group, group.members[member_id], e)
            return []
        member = group.members.get(member_id)
        replaced = group.static_members.get(e.get("group_instance_id")) if member is None else None
        newcomer = member is None and replaced is None
        if replaced is not None:
            member, out = self._static_restart(group, replaced, e)
        elif newcomer:
            member = Member.from_join(member_id, e)
            out = self._admit(group, member, f"adding new member {member_id}", _ts(e, group))
        else:  # the record is stored anew for a late report of this generation; a later one's sync writes its own
            out = self._refresh_member(group, member, e, store=generation == group.generation)
        out += self._note_answer(group, generation, _ts(e, group), leader=e.get("leader"), reopen=reopen)
        if newcomer:  # the round its answer completed may have opened only now: a newcomer is its cause
            note_cause(group, "join", f"adding new member {member_id}", _ts(e, group))
        member.awaiting_join = member.is_new = False
        self.rules.schedule_session(group, member, heard_ms=_ts(e, group))
        return out

    def _observe_join_request(self, group: Group | None, e: dict) -> Outputs | None:
        """A known member's JoinGroup, reported when sent (without the broker's answer)."""
        member_id = e["member_id"]
        if group is None or _is_empty(group):
            return None  # a join to a group without members starts a round (Kafka's rules)
        member = group.members.get(member_id)
        if _ts(e, group) < group.generation_ts:  # sent for the round that has since completed
            if member is not None:
                return self._refresh_member(group, member, e)
            member = Member.from_join(member_id, e)
            member.is_new = True  # its place in the generation awaits the leader's word
            return self._admit(group, member, f"adding new member {member_id}", _ts(e, group))
        if member is None or group.is_(S.PREPARING_REBALANCE):
            return None  # a newcomer starts a round; a round under way takes the rejoin
        protocols = [JoinProtocol.from_event(p) for p in e["protocols"]]
        if group.is_(S.STABLE) and member_id != group.leader_id and member.same_protocols(protocols):
            # Kafka answers a follower's unchanged rejoin with the current generation (a consumer whose commit was
            # refused rejoins so): no round by itself. If a round is under way, its cause or its answers will say
            # so; it began no later than this.
            member.rejoin_ts = _ts(e, group)
            return None
        return self.rules.update_member_and_rebalance(group, member, e, protocols, trigger=REJOIN)

    def _static_restart(self, group: Group, old_id: str, e: dict) -> tuple[Member, Outputs]:
        """A known group.instance.id answered under a new member id: the consumer restarted and the broker gave it
        its old place (KIP-345), in the generation the answer names -- without a rebalance when that is the current
        one (Kafka stores the group with the new id)."""
        member = group.replace_static(old_id, e["member_id"])
        out = self._refresh_member(group, member, e)
        out.append(
            outputs.member_replaced(group.group_id, group.clock, member.member_id, old_id, member.group_instance_id)
        )
        if e["generation"] == group.generation and group.is_(S.STABLE):
            out.append(group.metadata_record())
        return member, out

    # --- SyncGroup ------------------------------------------------------------------------------------------
    def _observe_sync(self, group: Group | None, e: dict) -> Outputs | None:
        if group is None and e["member_id"] and e["generation"] >= 0 and e.get("assignments") is not None:
            # The leader's word on a group whose round the tracker never saw begin (before it started, or before
            # a restore from a store that had no record of the group yet): it names the generation's members.
            group = self.rules.create_group(e, start_seen=False)
            group.protocol_type = e.get("protocol_type") or "consumer"
        if group is None or not e["member_id"] or e["generation"] < 0:
            return None  # not an answer a broker gives: Kafka's rules answer the request
        reopen = self._reopens(group, _ts(e, group))
        if not reopen and e["generation"] < group.generation:
            late = []
            if e.get("assignments") is not None and e["generation"] > group.recorded_generation:
                late.append(self._late_generation_record(group, e))
            return late + self.rules.apply_kafka_rules(group, e)  # and Kafka's answer to a stale request
        if not reopen and _is_empty(group):
            return None  # sent before the group emptied: Kafka's answer (UNKNOWN_MEMBER_ID)
        member = group.members.get(e["member_id"])
        out: Outputs = []
        if member is None:
            member, out = self._stand_in(group, e["member_id"], e)
        leader = e["member_id"] if e.get("assignments") is not None else None
        out += self._note_answer(
            group, e["generation"], _ts(e, group), leader=leader, protocol=e.get("protocol_name"), reopen=reopen
        )
        if e["member_id"] in group.pending_sync:
            group.pending_sync.remove(e["member_id"])
        member.rejoin_ts = None  # its rejoin, if any, was answered in this generation
        member.awaiting_join = member.is_new = False
        self.rules.schedule_session(group, member, heard_ms=_ts(e, group))
        if group.is_(S.COMPLETING_REBALANCE):
            member.awaiting_sync = True  # answered once the leader's assignment is known
            if leader is not None:
                out += self._complete_observed_round(
                    group, member, e["assignments"], dated_by_neighbours=e.get("ts_inferred") is not None
                )
            return out
        if group.is_(S.STABLE):
            out.append(self.rules.answer_sync(group, member))
        if e.get("assigned") is not None:  # also a late answer of this generation while the next round runs
            out += self.rules.observe_delivery(group, member, e["assigned"])
        return out

    def _complete_observed_round(
        self, group: Group, leader: Member, assignments: dict[str, list], dated_by_neighbours: bool = False
    ) -> Outputs:
        """The leader's SyncGroup: its assignment names the generation's members. ``dated_by_neighbours``: its time
        is not the broker's but inferred by the feed (a record with no time of its own: the group's nearest commit,
        or when a following reader read it)."""
        out: Outputs = []
        on_the_way = []
        unheard = group.restored.unheard if group.restored is not None else set()
        for m in list(group.members.values()):
            if m.member_id in assignments or m is leader:  # the leader is in its own generation, named or not
                m.is_new = False
                continue
            if m.is_new:  # joined too late for this generation: it is in the next one
                on_the_way.append(m)
                group.members.pop(m.member_id)  # out of this generation's books only: it is back below
                continue
            leave = next((d for d in group.deferred if d["type"] == "leave" and d["member_id"] == m.member_id), None)
            if leave is not None:  # its LeaveGroup, reported late: why it is not in this generation
                group.deferred.remove(leave)
                out.append(outputs.leave_response(leave, group.clock, "NONE"))
                out += self.rules.remove_member(
                    group,
                    m,
                    "leave",
                    f"removing member {m.member_id} on LeaveGroup, before generation {group.generation}",
                    update_group=False,
                    reason="leave",
                )
                continue
            out += self._left_out(group, m, unheard, dated_by_neighbours)
        for member_id in assignments:
            if member_id not in group.members:
                stand_in, joined = self._stand_in(group, member_id, None)
                stand_in.awaiting_sync = False
                out += joined
        group.leader_id = leader.member_id
        group.pending_sync, group.sync_deadline = [], None  # the leader's word settles the generation
        out += self.rules.complete_sync(group, assignments)
        for m in on_the_way:
            group.members[m.member_id] = m
            out += self.rules.prepare_rebalance(group, "join", f"adding new member {m.member_id}")
            m.awaiting_join = True
        return out + self.release_deferred(group)

    def _left_out(self, group: Group, m: Member, unheard: set[str], dated_by_neighbours: bool) -> Outputs:
        """A member the leader's assignment leaves out: why it went, as far as the feed can tell."""
        # Silent for half a session or more: it died and the broker expired it (a live member reports at least
        # every heartbeat interval, a third of the session by convention; the broker's session clock may run
        # a little ahead of ours, as 0.9 counts only heartbeats and later brokers commits too) -- unless less
        # than a session has passed since the previous generation's join, which restarted every member's
        # session. Otherwise it was alive but did not rejoin in time, or it left. (A member restored from the
        # store counts as heard at the load.)
        dead = (
            group.clock - m.last_heartbeat_ts >= m.session_timeout_ms // 2
            and not self._within_a_session_of_the_last_join(group, m, dated_by_neighbours)
        )
        out: Outputs = []
        if m.member_id in unheard:  # silent since the group was rebuilt: it went quiet before the restore
            if group.restored is not None:
                out += self.rules.restore_gap(
                    group,
                    {"type": "sync", "member_id": m.member_id},
                    f"member {m.member_id}, not heard from since the restore, is not in "
                    f"generation {group.generation}: it went quiet before the restore",
                    follows=True,
                )
            if not dead:  # too soon to tell an expiry from a leave the restore lost
                return out + self.rules.remove_member(
                    group,
                    m,
                    "unknown",
                    f"member {m.member_id} left, or its session ran out, before the group was restored from the store",
                    update_group=False,
                    reason="unknown",
                )
        elif not dead and self._round_shorter_than_its_timeout(group):
            # Neither timeout can have removed it: it left (its LeaveGroup unreported, or this feed shows none).
            return out + self.rules.remove_member(
                group,
                m,
                "leave",
                f"removing member {m.member_id}: it left before generation {group.generation}, too soon for a timeout",
                update_group=False,
                reason="leave",
            )
        detail = (
            f"removing member {m.member_id} on heartbeat expiration"
            if dead
            else f"member {m.member_id} did not rejoin generation {group.generation} in time"
        )
        return out + self.rules.remove_member(
            group, m, "expiry", detail, update_group=False, reason="session timeout" if dead else "rebalance timeout"
        )

    @staticmethod
    def _within_a_session_of_the_last_join(group: Group, member: Member, dated_by_neighbours: bool) -> bool:
        """Kafka restarts every member's session when a join completes: none can expire within a session of the
        previous generation's join (``not_before``). A member that dies just after a join expires exactly a session
        after it, so this holds only on the broker's own times: records dated by their neighbours (Kafka 0.9's, by
        the group's last commit before them, which the members make until their next heartbeat tells them of a
        round) may each be off by a heartbeat -- a third of the session, by Kafka's advice -- and prove it only
        that much sooner. (A killed member read as gone 9.9 s after a join with a 10 s session had expired.)"""
        rb = group.rebalance
        since = rb.not_before if rb is not None else None
        margin = member.session_timeout_ms // 3 if dated_by_neighbours else 0
        return since is not None and since >= 0 and group.clock - since < member.session_timeout_ms - margin

    def _round_shorter_than_its_timeout(self, group: Group) -> bool:
        """The round that ends now began after the previous generation's join (``not_before``): if less than the
        members' rebalance timeout has passed since, its join timeout cannot have fired. Following the records only,
        the group's commits say more: its members committed until they heard of the round, at their next heartbeat
        (Kafka advises one at most every third of a session), so it began no earlier than that before the last."""
        rb = group.rebalance
        since = rb.not_before if rb is not None else None
        if since is None or since < 0:
            return False
        if self.records_only and group.members:
            last = max(
                (o.commit_timestamp for o in group.offsets.values() if o.commit_timestamp <= group.clock), default=None
            )
            if last is not None:
                since = max(since, last - min(m.session_timeout_ms for m in group.members.values()) // 3)
        return group.clock - since < group.max_rebalance_timeout_ms()

    def _late_generation_record(self, group: Group, e: dict) -> Output:
        """The leader's SyncGroup of a generation the model went past before hearing of it (another client's
        report of a later round arrived first): the generation was real, so it gets its line in the history,
        marked late; the group's state stays where it is."""
        assignment = {m: sorted(map(list, parts)) for m, parts in e["assignments"].items()}
        members = [group.members.get(m) for m in assignment]
        group.recorded_generation = e["generation"]
        return outputs.late_rebalance(
            group.group_id,
            _ts(e, group),
            e["generation"],
            group.protocol_type,
            e.get("protocol_name") or group.protocol_name,
            "cooperative" if is_cooperative(group.protocol_name) else "eager",
            e["member_id"],
            [
                outputs.rebalance_member(
                    mid,
                    m.group_instance_id if m else None,
                    m.client_id if m else _client_id(mid),
                    m.client_host if m else "",
                )
                for mid, m in zip(assignment, members)
            ],
            assignment,
        )

    # --- LeaveGroup ----------------------------------------------------------------------------------------
    def _observe_gone(self, group: Group, e: dict) -> Outputs | None:
        """Following ``__consumer_offsets`` (records only), a leave is the feed saying a member is gone, not a
        request: one silent for its whole session when it went was expired, as far as anyone can tell."""
        member = group.members.get(e["member_id"])
        if member is None or _ts(e, group) - member.last_heartbeat_ts < member.session_timeout_ms:
            return None  # Kafka's rules for a LeaveGroup
        return self.rules.remove_member(
            group,
            member,
            "expiry",
            f"removing member {member.member_id} on heartbeat expiration",
            reason="session timeout",
        )

    # --- OffsetCommit ---------------------------------------------------------------------------------------
    def _observe_commit(self, group: Group | None, e: dict) -> Outputs:
        if group is None:
            group = self.rules.create_group(e)
        member = group.members.get(e["member_id"])
        ts = _ts(e, group)
        if member is not None and not member.awaiting_join:
            self.rules.extend_session(group, member, ts)
        out: Outputs = []
        if e["member_id"] and e["generation"] >= 0 and not _is_empty(group):
            # (In a group without members a commit proves a generation the model cannot enter: nobody to put in it.
            # The members' own reports will open it.)
            out += self._note_answer(group, e["generation"], ts)
        fresh = [
            o
            for o in e["offsets"]
            if (current := group.offsets.get((o["topic"], o["partition"]))) is None or current.commit_timestamp <= ts
        ]  # an older commit arriving late changes nothing
        out += O.store(group.offsets, group.group_id, fresh, ts, e["retention_ms"], now=group.clock)
        out.append(
            outputs.commit_response(
                e, group.clock, "NONE", [[o["topic"], o["partition"], "NONE"] for o in e["offsets"]]
            )
        )
        return out

    # --- generations and members ----------------------------------------------------------------------------
    def _note_answer(
        self,
        group: Group,
        generation: int,
        ts: int,
        leader: str | None = None,
        protocol: str | None = None,
        reopen: bool = False,
    ) -> Outputs:
        """The broker answered in ``generation``: move there if the model is behind, or whatever the model's number
        if the answer reopens a group the model saw empty."""
        out: Outputs = []
        if reopen or generation > group.generation or (generation == group.generation and group.generation_ts < 0):
            out = self._enter_generation(group, generation, ts, protocol)  # (some brokers number the first 0)
        if generation == group.generation:
            group.generation_ts = min(group.generation_ts, ts) if group.generation_ts >= 0 else ts
            if leader is not None and leader in group.members:
                group.leader_id = leader
        return out

    def _enter_generation(self, group: Group, generation: int, ts: int, protocol: str | None) -> Outputs:
        """The broker completed a join round the model did not see complete: end it here, keeping every member
        (the leader's SyncGroup will say who is in it). Callers admit the answering member first."""
        out: Outputs = []
        if group.is_(S.COMPLETING_REBALANCE):
            out += self.release_deferred(group)  # the previous generation's leader was never heard from
        if not group.members or group.group_id not in self.rules.groups:
            return out  # what waited emptied the group: nobody is left to be in it
        if not group.is_(S.PREPARING_REBALANCE):
            out += self.rules.prepare_rebalance(group, REJOIN, f"the broker opened generation {generation}")
        group.join_deadline = None
        group.initial_delay_remaining_ms = None
        group.generation, group.generation_ts = generation, ts
        group.protocol_name = protocol or _observed_protocol(group)
        out.append(
            self.rules.change_state(
                group, S.COMPLETING_REBALANCE, f"the broker completed the join of generation {generation}"
            )
        )
        if group.rebalance is not None:
            group.rebalance.join_completed_ts = group.clock
        group.pending_sync = list(group.members)
        self.rules.set_sync_deadline(group, group.clock + group.max_rebalance_timeout_ms())
        for m in group.members.values():
            # A newcomer stays new until the leader's assignment names it: its JoinGroup may have reached the
            # broker after this join completed (_complete_observed_round).
            if m.awaiting_join:  # known to be in the round: the broker restarted its session on completing it
                m.awaiting_join = False
                out.append(group.join_answer(m))
                self.rules.schedule_session(group, m)
        return out

    @staticmethod
    def _reopens(group: Group, ts: int) -> bool:
        """An answer at ``ts`` to a group the model saw empty, sent after it emptied: the broker went on with the
        group (Kafka 0.9 drops a group its last member left and numbers a new one from the start; a later broker
        may have kept members whose expiry the model inferred). The model follows the broker's generation, even a
        lower one. An answer sent before the group emptied is from a round already past; a group that never had a
        generation (made by a commit reported before its member's join) takes any."""
        return _is_empty(group) and (ts >= group.state_timestamp or group.generation_ts < 0)

    def _admit(self, group: Group, member: Member, detail: str, ts: int) -> Outputs:
        """A member the broker let in, whose round may already be over in the model."""
        group.add(member)
        self.rules.schedule_session(group, member, heard_ms=ts)
        joined = group.member_joined(member)
        note_cause(group, "join", detail, ts)
        return [joined]

    def _stand_in(self, group: Group, member_id: str, e: dict | None) -> tuple[Member, Outputs]:
        """A member named by the broker before its own join reached the feed: admitted with what is known (the
        leader's timeouts and protocol, the client id from Kafka's ``clientId-uuid`` member ids); its join fills
        in the rest."""
        like = group.members.get(group.leader_id or "") or next(iter(group.members.values()), None)
        name = (e or {}).get("protocol_name") or group.protocol_name or ""
        topics = list(like.protocol(name).topics) if like is not None and like.protocol(name) else []
        member = Member(
            member_id,
            (e or {}).get("group_instance_id"),
            _client_id(member_id),
            "",
            like.session_timeout_ms if like else 10_000,
            like.rebalance_timeout_ms if like else 10_000,
            group.protocol_type or "consumer",
            [JoinProtocol(name, topics)],
        )
        member.stand_in = True
        return member, self._admit(group, member, f"adding new member {member_id}", group.clock)

    def _refresh_member(self, group: Group, member: Member, e: dict, store: bool = True) -> Outputs:
        """A join reported late: take the metadata it carries; the stored group record follows (``store``). Not for
        a join that opened a later generation: the broker wrote nothing then (a cooperative member's rejoin names
        the partitions it owns, new each generation), the generation's completion writes the record."""
        was_stand_in = member.stand_in
        member.stand_in = False
        instance_id = e.get("group_instance_id")
        if instance_id is not None and member.group_instance_id is None:  # a stand-in learns it is static
            member.group_instance_id = instance_id
            group.static_members[instance_id] = member.member_id
        protocols = [JoinProtocol.from_event(p) for p in e["protocols"]]
        changed = (
            member.protocols,
            member.client_id,
            member.client_host,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
        ) != (protocols, e["client_id"], e["client_host"], e["session_timeout_ms"], e["rebalance_timeout_ms"])
        group.set_protocols(member, protocols)
        member.client_id, member.client_host = e["client_id"], e["client_host"]
        member.session_timeout_ms, member.rebalance_timeout_ms = e["session_timeout_ms"], e["rebalance_timeout_ms"]
        out: Outputs = []
        if was_stand_in:
            out.append(
                outputs.member_updated(
                    group.group_id,
                    group.clock,
                    member.member_id,
                    member.client_id,
                    member.client_host,
                    member.protocol_names(),
                )
            )
        if changed and store and group.is_(S.STABLE):
            out.append(group.metadata_record())
        return out


def note_cause(group: Group, trigger: str, detail: str, ts: int) -> None:
    """A round started on a rejoin learns what really started it (only observe mode opens rounds on a rejoin)."""
    rb = group.rebalance
    if rb is not None and rb.trigger == REJOIN and trigger != REJOIN:
        rb.trigger, rb.detail, rb.started_ts = trigger, detail, min(rb.started_ts, ts)


def _observed_protocol(group: Group) -> str | None:
    candidates = group.candidate_protocols()
    if group.protocol_name in candidates or not candidates:
        return group.protocol_name
    return group.select_protocol()


def _is_empty(group: Group) -> bool:
    return group.is_(S.EMPTY) and not group.members


def _ts(e: dict, group: Group) -> int:
    return e["ts"] if e.get("ts") is not None else group.clock


def _client_id(member_id: str) -> str:
    """Kafka builds member ids as ``clientId-<uuid>``: the client id is what precedes the UUID's five groups."""
    parts = member_id.rsplit("-", 5)
    return parts[0] if len(parts) == 6 else ""
