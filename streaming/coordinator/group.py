"""A classic group's state: members, generation, protocol, offsets, timers. Bookkeeping only — the request
handling that drives it lives in ``coordinator.py``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from assignors.java import java_hash_order
from streaming.coordinator import outputs
from streaming.coordinator.figures import Ledger
from streaming.coordinator.member import Member, Partition
from streaming.coordinator.offsets import CommittedOffset
from streaming.coordinator.restored import Restored
from streaming.coordinator.state import GroupState, IllegalGroupState, IllegalStateTransition

__all__ = ["CommittedOffset", "Group", "RebalanceInProgress", "is_cooperative"]


def is_cooperative(protocol: str | None) -> bool:
    """Whether the assignor a protocol names rebalances cooperatively (members keep their partitions through a
    round); an unknown one counts as eager."""
    if protocol is None:
        return False
    try:
        from assignors import get_assignor

        return "cooperative" in get_assignor(protocol).supported_protocols
    except (LookupError, ValueError):
        return False


@dataclass
class RebalanceInProgress:
    """What the history needs about the round now running (Kafka keeps none of this)."""

    started_ts: int
    trigger: str  # join / leave / expiry / metadata / static-replace / sync-timeout / ...
    detail: str
    join_completed_ts: int | None = None
    start_seen: bool = True  # False: the feed shows rounds only when they complete (its start is unknown)
    not_before: int | None = None  # it began after this: the previous generation's join (-1/None: unknown)


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order matters (leader re-election)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline (MEMBER_ID_REQUIRED)
    pending_sync: list[str] = field(default_factory=list)
    offsets: dict[Partition, CommittedOffset] = field(default_factory=dict)
    topics: dict[str, int] = field(default_factory=dict)  # partition counts known to this group
    clock: int = 0  # latest time seen; never moves back
    generation_ts: int = -1  # when this generation's join completed (observe mode: its earliest answer)
    deferred: list[dict] = field(default_factory=list)  # observe mode: events held for the next round
    recorded_generation: int = -1  # the last generation that has its line in the rebalance history
    # How many members support each protocol name, kept as members come, go and change their protocols (Kafka's
    # supportedProtocols): a join checks it, and recounting per join made a join storm quadratic.
    protocol_counts: Counter = field(default_factory=Counter, repr=False, compare=False)
    member_seq: int = 0  # for deterministic member ids
    # subscribed_topics() walks every member, and retention asks for it after every request of a Stable group: kept
    # until the membership, a member's protocols, the protocol, generation or state change (a 10k-member group
    # took minutes to get through one round without it).
    membership_version: int = field(default=0, repr=False, compare=False)
    _subscribed: tuple | None = field(default=None, repr=False, compare=False)
    # The topics the members subscribed to when the generation began (Kafka's subscribedTopics, computed in
    # initNextGeneration and at load only): a Stable group's offsets of any other topic expire. A static member
    # restarted with other topics and the same protocol changes the members, not this.
    generation_topics: frozenset[str] | None = None
    # Timers (epoch ms, None = not armed).
    join_deadline: int | None = None
    initial_delay_remaining_ms: int | None = None  # set while the initial delayed join runs
    new_member_added: bool = False
    sync_deadline: int | None = None
    retention_deadline: int | None = None
    rebalance: RebalanceInProgress | None = None
    figures: Ledger = field(default_factory=Ledger, repr=False, compare=False)  # owners over time (figures.py)
    restored: Restored | None = None  # rebuilt from the store after a lost checkpoint (restored.py)

    # --- state -----------------------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, target: GroupState, now: int) -> GroupState:
        if not target.can_follow(self.state):
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        previous, self.state, self.state_timestamp = self.state, target, now
        return previous

    # --- membership --------------------------------------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.figures.presence(self.clock, True)
        self.protocol_counts.update(member.protocol_names())
        self.membership_version += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id  # the first member to join leads

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.figures.presence(self.clock, bool(self.members))
        self.protocol_counts.subtract(member.protocol_names())
        self.protocol_counts += Counter()  # drop the zeros
        self.membership_version += 1
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member_id in self.pending_sync:
            self.pending_sync.remove(member_id)
        if self.leader_id == member_id:  # the next leader is the member Kafka's HashMap of members yields first
            self.leader_id = next((m.member_id for m in self.members_in_kafka_order()), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> Member:
        """A static member restarted: same instance id, new member id, same place and assignment."""
        member = self.members.pop(old_id)
        self.membership_version += 1
        self.members[new_id] = member  # Kafka removes the old id and puts the new one (last in its HashMap bucket)
        member.member_id = new_id
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        # The old id stays among the members the sync timeout waits for, as in Kafka's replaceStaticMember: a
        # restart before the old incarnation synced ends in a rebalance at that timeout.
        return member

    def members_in_kafka_order(self) -> list[Member]:
        """The members as Kafka's ``HashMap`` of member ids iterates them: its leader choices, JoinGroup member list,
        GroupMetadataValue and DescribeGroups follow that order."""
        return [self.members[member_id] for member_id in java_hash_order(self.members)]

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """If the leader did not rejoin, hand leadership to the first member that did, in the order Kafka's HashMap
        of members iterates (maybeElectNewJoinedLeader). Nobody rejoined: False, and the leader stays as it was."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members_in_kafka_order():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols ---------------------------------------------------------------------------------------------
    def set_protocols(self, member: Member, protocols: list) -> None:
        self.protocol_counts.subtract(member.protocol_names())
        member.protocols = protocols
        self.protocol_counts.update(member.protocol_names())
        self.protocol_counts += Counter()
        self.membership_version += 1

    def supported_protocols(self) -> Counter:
        return self.protocol_counts

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols().items() if count == n}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        # Only an Empty group takes any protocol type: one whose members all left mid-round keeps its type.
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        counts, n = self.supported_protocols(), len(self.members)
        return self.protocol_type == protocol_type and any(counts.get(name, 0) == n for name in names)

    def select_protocol(self) -> str:
        """Every member votes for its preferred candidate; most votes wins. Ties go to the protocol Java's HashMap
        iterates first, as in Kafka's ``votesByProtocol.entrySet().stream().max(...)``."""
        if not self.members:
            raise IllegalGroupState(f"group {self.group_id}: cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        if not candidates:
            # Kafka refuses a join whose protocols the group does not share, so it always has candidates. Observe
            # mode admits the members a broker reported, whatever they sent: the protocols most members support.
            most = max(self.protocol_counts.values(), default=0)
            candidates = {name for name, count in self.protocol_counts.items() if count == most}
        votes = Counter()
        order: list[str] = []
        for m in self.members.values():
            name = m.vote(candidates)
            if name is not None:
                votes[name] += 1
                order.append(name)
        best = None
        for name in java_hash_order(order):
            if best is None or votes[name] > votes[best]:
                best = name
        return best

    def subscribed_topics(self) -> set[str] | None:
        """Topics some member subscribes to under the chosen protocol; None when unknown (not a consumer group)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        key = (self.protocol_name, self.generation, self.state, len(self.members), self.membership_version)
        if self._subscribed is None or self._subscribed[0] != key:
            topics: set[str] = set()
            for m in self.members.values():
                p = m.protocol(self.protocol_name)
                if p is not None:
                    topics.update(p.topics)
            self._subscribed = (key, frozenset(topics))
        return set(self._subscribed[1])

    def current_owners(self) -> dict[Partition, str]:
        return {tp: m.member_id for m in self.members.values() for tp in m.assignment}

    # --- what the group answers and writes ---------------------------------------------------------------------
    def join_answer(self, member: Member) -> outputs.JoinAnswer:
        """The JoinGroup answer of ``member`` in the current generation; only the leader's lists the members, with
        the topics each subscribes to under the group's protocol."""
        members = []
        if member.member_id == self.leader_id:
            for m in self.members_in_kafka_order():
                p = m.protocol(self.protocol_name)
                members.append(outputs.join_member(m.member_id, m.group_instance_id, p.topics if p else []))
        return outputs.join_answer(
            self.group_id,
            self.clock,
            member.member_id,
            member.group_instance_id,
            "NONE",
            self.generation,
            self.protocol_type,
            self.protocol_name,
            self.leader_id,
            members,
        )

    def member_joined(self, member: Member) -> outputs.MemberJoined:
        return outputs.member_joined(
            self.group_id,
            self.clock,
            member.member_id,
            member.group_instance_id,
            member.client_id,
            member.client_host,
            member.protocol_names(),
        )

    def sync_answer(self, member: Member) -> outputs.SyncResponse:
        return outputs.sync_answer(
            self.group_id,
            self.clock,
            member.member_id,
            member.group_instance_id,
            self.generation,
            self.protocol_name,
            [list(tp) for tp in member.assignment],
        )

    def metadata_record(self) -> outputs.GroupMetadataRecord:
        """The GroupMetadata record of the current generation (members in Kafka's order, each with the metadata of
        the group's protocol, or its first one)."""
        members = []
        for m in self.members_in_kafka_order():
            p = m.protocol(self.protocol_name) or (m.protocols[0] if m.protocols else None)
            members.append(
                outputs.group_metadata_member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    list(p.topics) if p else [],
                    p.user_data if p else None,
                    [list(tp) for tp in (p.owned_partitions or [])] if p else [],
                    p.generation if p else -1,
                    p.rack if p else None,
                    [list(tp) for tp in m.assignment],
                )
            )
        return outputs.group_metadata(
            self.group_id,
            self.clock,
            self.protocol_type or "",
            self.generation,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp,
            members,
        )
