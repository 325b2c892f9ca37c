"""One consumer group's durable state (Kafka's ``ConsumerGroup``), changed only by replaying records.

The coordinator decides what changes and writes records; ``replay`` applies them, exactly as Kafka's coordinator
applies the records it wrote (and those it loads from ``__consumer_offsets``). So a group rebuilt from its records
is the group that wrote them. The indexes Kafka keeps beside the records (static members, partition epochs) are
derived here from the same replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from assignors.java import TIMELINE_MIN_CAPACITY, java_hash_order, java_string_hash, timeline_capacity_after_adding
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ClassicMemberMetadata,
    Assignment,
    ConsumerGroupMember,
    assignment,
    assignment_to_json,
)
from streaming.coordinator.consumer.member_state import MemberState
from streaming.coordinator.consumer.topics import TopicImage

# A consumer group's state (Kafka's ConsumerGroupState) is not stored: ``ConsumerGroup.state`` derives it from the
# records, so a group rebuilt from them is in the state that wrote them. Each state's contract:
#
# Empty        No members. A heartbeat at epoch 0 joins (creating the group); offsets expire from their commit (no
#              member subscribes to anything); without offsets the group is deleted one offsets cleanup interval
#              after it became Empty. DeleteGroups deletes it (NON_EMPTY_GROUP in every other state).
# Assigning    The group epoch is ahead of the target assignment's: members, subscriptions or topic metadata
#              changed and no target exists for the new epoch yet. The model computes the target in the heartbeat
#              that bumps the epoch, so a group stays here only after a bump no heartbeat made (a member fenced or
#              leaving, regular expressions resolved) until the next member's heartbeat -- or as loaded.
# Reconciling  The target is current, but some member is not at its epoch yet: it must first revoke partitions
#              (UNREVOKED_PARTITIONS; fenced if that takes longer than its rebalance timeout) or wait for
#              partitions other members still own (UNRELEASED_PARTITIONS). Each heartbeat moves a member on.
# Stable       Every member is reconciled to the target epoch.
# Dead         Deleted (all its tombstones written): the coordinator forgets it; describe_group reports an unknown
#              group as Dead.
#
# Any state may follow any other through one batch of records, but Dead. The tracker's rebalance (one line of
# history) runs from the first epoch bump after the group was Stable or Empty until it is Stable or Empty again.
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
HOMOGENEOUS, HETEROGENEOUS = "Homogeneous", "Heterogeneous"


class IllegalGroupState(RuntimeError):
    """A record that cannot apply to the group (Kafka's IllegalStateException): a bug, never bad input."""


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset
    version: int
    timestamp: int


class ConsumerGroup:
    def __init__(self, group_id: str, epoch: int = 0) -> None:
        """``epoch``: a new group's group and assignment epoch (``ConsumerGroupConfig.initial_group_epoch``)."""
        self.group_id = group_id
        self.group_epoch = epoch
        self.assignment_epoch = epoch
        # When the target assignment was last computed (Kafka 4.3+'s assignmentTimestamp); 0: unknown, or none yet.
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerGroupMember] = {}  # in the order they joined (Kafka's member table's)
        # The size of Kafka's member table (a TimelineHashMap: it grows as members join, never shrinks): with the
        # members' order it gives the order the assignor sees them in (target.py).
        self.member_slots = TIMELINE_MIN_CAPACITY
        self.target: dict[str, dict[str, frozenset]] = {}
        self.subscription_metadata: dict[str, tuple[str, int]] = {}  # topic name -> (topic id, partitions)
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.deleted = False
        # derived
        self.static_members: dict[str, str] = {}
        self.partition_epochs: dict[tuple[str, int], int] = {}

    # ================================================================ replay
    def replay(self, record: Mapping) -> None:
        """Apply one record (``records`` shapes them; a record decoded from the store reads the same)."""
        kind = record["type"]
        value = None if record.get("tombstone") else record
        if kind == R.METADATA:
            if value is None:
                if self.members or self.target or self.assignment_epoch != -1:
                    raise IllegalGroupState(
                        f"group {self.group_id} deleted while it still has members or an assignment"
                    )
                self.deleted = True
            else:
                self.group_epoch = int(value["epoch"])
                self.deleted = False
        elif kind == R.PARTITION_METADATA:
            self.subscription_metadata = (
                {}
                if value is None
                else {t["topicName"]: (t["topicId"], int(t["numPartitions"])) for t in value["topics"]}
            )
        elif kind == R.MEMBER_METADATA:
            member_id = record["member_id"]
            if value is None:
                old = self.members.get(member_id)
                if old is None:
                    return
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH or member_id in self.target:
                    raise IllegalGroupState(f"member {member_id} deleted before its assignments")
                self._remove_member(member_id)
            else:
                old = self.members.get(member_id) or ConsumerGroupMember(member_id)
                self._update_member(
                    old.with_(
                        instance_id=value["instanceId"],
                        rack_id=value["rackId"],
                        client_id=value["clientId"],
                        client_host=value["clientHost"],
                        subscribed_topic_names=frozenset(value["subscribedTopicNames"]),
                        subscribed_topic_regex=value["subscribedTopicRegex"] or "",
                        rebalance_timeout_ms=int(value.get("rebalanceTimeoutMs", -1)),
                        server_assignor=value["serverAssignor"],
                        classic=ClassicMemberMetadata.from_record(value.get("classicMemberMetadata")),
                    )
                )
        elif kind == R.TARGET_ASSIGNMENT_METADATA:
            if value is None:
                if self.target:
                    raise IllegalGroupState(f"target assignment of {self.group_id} deleted while members have one")
                self.assignment_epoch, self.assignment_timestamp = -1, 0
            else:
                self.assignment_epoch = int(value["assignmentEpoch"])
                self.assignment_timestamp = int(value.get("assignmentTimestamp") or 0)
        elif kind == R.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(record["member_id"], None)
            else:
                self.target[record["member_id"]] = R.assignment_from_record(value["topicPartitions"])
        elif kind == R.CURRENT_MEMBER_ASSIGNMENT:
            member_id = record["member_id"]
            old = self.members.get(member_id)
            if value is None:
                if old is None:
                    return
                self._update_member(
                    old.with_(
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        assigned_partitions={},
                        partitions_pending_revocation={},
                    )
                )
            else:
                self._update_member(
                    (old or ConsumerGroupMember(member_id)).with_(
                        member_epoch=int(value["memberEpoch"]),
                        previous_member_epoch=int(value["previousMemberEpoch"]),
                        state=MemberState.from_value(int(value["state"])),
                        assigned_partitions=R.assignment_from_record(value["assignedPartitions"]),
                        partitions_pending_revocation=R.assignment_from_record(value["partitionsPendingRevocation"]),
                    )
                )
        elif kind == R.REGULAR_EXPRESSION:
            regex = record["regular_expression"]
            if value is None:
                self.resolved_regexes.pop(regex, None)
            else:
                self.resolved_regexes[regex] = ResolvedRegex(
                    frozenset(value["topics"]), int(value["version"]), int(value["timestamp"])
                )
        else:
            raise IllegalGroupState(f"not a consumer group record: {kind!r}")

    def _update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        if old is not None:
            self._remove_partition_epochs(old)
        # Kafka's members table (BaseHashTable.baseAddOrReplace) checks for room before it looks for the key: an
        # update of a member grows it as an addition would, and its growth reorders the members.
        self.member_slots = timeline_capacity_after_adding(self.member_slots, len(self.members))
        self.members[new.member_id] = new
        self._add_partition_epochs(new.assigned_partitions, new.member_epoch)
        self._add_partition_epochs(new.partitions_pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id)
        self._remove_partition_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for a in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, parts in a.items():
                for p in parts:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _add_partition_epochs(self, a: Assignment, epoch: int) -> None:
        for topic_id, parts in a.items():
            for p in parts:
                previous = self.partition_epochs.get((topic_id, p))
                if previous is not None and previous >= epoch:
                    raise IllegalGroupState(
                        f"cannot set the epoch of {topic_id}-{p} to {epoch}: it is still owned at epoch {previous}"
                    )
                self.partition_epochs[(topic_id, p)] = epoch

    # ================================================================ queries (Kafka's ConsumerGroup)
    def state(self) -> str:
        if self.deleted:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def current_partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def target_for(self, member_id: str, instance_id: str | None = None) -> dict[str, frozenset]:
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            return self.target.get(previous, {}) if previous is not None else {}
        return self.target.get(member_id, {})

    def subscribed_regexes(
        self, old: ConsumerGroupMember | None = None, new: ConsumerGroupMember | None = None
    ) -> dict[str, int]:
        """Regex -> members subscribed to it; with ``old``/``new``: as if ``old`` were replaced by ``new``."""
        counts: dict[str, int] = {}
        for m in self._members_with(old, new):
            if m.regex:
                counts[m.regex] = counts.get(m.regex, 0) + 1
        return counts

    def classic_members(self) -> list[ConsumerGroupMember]:
        return [m for m in self.members.values() if m.uses_classic_protocol]

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: a JoinGroup's protocols fit the group when its protocol
        type is ``consumer`` and, the group not being empty, one of its protocols is supported by every member of
        the classic protocol (any, when there is none)."""
        names = set(names)
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = self.classic_members()
        return any(all(name in {n for n, _ in m.classic.protocols} for m in classic) for name in names)

    def all_classic_except(self, leaving: Iterable[ConsumerGroupMember]) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept: every member but ``leaving`` speaks the classic protocol."""
        gone = {m.member_id for m in leaving}
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid not in gone)

    def num_subscribed_members(self, regex: str) -> int:
        return sum(1 for m in self.members.values() if m.subscribed_topic_regex == regex)

    def subscribed_topic_names(
        self,
        old: ConsumerGroupMember | None = None,
        new: ConsumerGroupMember | None = None,
        removed: Iterable[ConsumerGroupMember] = (),
        removed_regexes: Iterable[str] = (),
    ) -> dict[str, list[int]]:
        """Topic name -> [members subscribed by name, resolved regexes naming it] (Kafka's SubscriptionCount).

        With ``old``/``new`` the counts are computed as if ``old`` were replaced by ``new``: a regex only its old
        member used stops counting. ``removed`` members and ``removed_regexes`` are left out."""
        gone = {m.member_id for m in removed}
        members = [m for m in self._members_with(old, new) if m.member_id not in gone]
        counts: dict[str, list[int]] = {}
        for m in members:
            for name in m.subscribed_topic_names:
                counts.setdefault(name, [0, 0])[0] += 1
        live = {m.regex for m in members if m.regex}
        dropped = set(removed_regexes)
        for regex, resolved in self.resolved_regexes.items():
            if regex in dropped or (regex not in live and old is not None and old.regex == regex):
                continue
            for name in resolved.topics:
                counts.setdefault(name, [0, 0])[1] += 1
        return {name: c for name, c in counts.items() if c[0] or c[1]}

    def _members_with(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None):
        members = dict(self.members)
        if old is not None and old.member_id in members and (new is None or new.member_id != old.member_id):
            del members[old.member_id]
        if new is not None:
            members[new.member_id] = new
        return members.values()

    @staticmethod
    def subscription_type(regexes: Mapping[str, int], names: Mapping[str, list[int]], num_members: int) -> str:
        if not regexes:
            return HOMOGENEOUS if all(c[0] == num_members for c in names.values()) else HETEROGENEOUS
        if next(iter(regexes.values())) == num_members:
            return HOMOGENEOUS if all(c[1] == 1 and c[0] == 0 for c in names.values()) else HETEROGENEOUS
        return HETEROGENEOUS

    @staticmethod
    def compute_subscription_metadata(names: Iterable[str], image: TopicImage) -> dict[str, tuple[str, int]]:
        out = {}
        for name in names:
            topic = image.get(name)
            if topic is not None:
                out[name] = (topic.topic_id, topic.partitions)
        return out

    def preferred_server_assignor(
        self, old: ConsumerGroupMember | None = None, new: ConsumerGroupMember | None = None
    ) -> str | None:
        """The assignor most members name (Kafka's ``computePreferredServerAssignor``; ties: HashMap order)."""
        counts: dict[str, int] = {}
        for m in self._members_with(old, new):
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return None
        best = None
        for name in java_hash_order(counts, java_string_hash):
            if best is None or counts[name] > counts[best]:
                best = name
        return best

    # ================================================================ serialisation
    def to_dict(self) -> dict:
        d = {
            "group_id": self.group_id,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": [m.to_dict() for m in self.members.values()],
            "target": {mid: assignment_to_json(a) for mid, a in self.target.items()},
            "subscription_metadata": {n: list(v) for n, v in self.subscription_metadata.items()},
            "resolved_regexes": {
                r: [sorted(v.topics), v.version, v.timestamp] for r, v in self.resolved_regexes.items()
            },
            "deleted": self.deleted,
            "member_slots": self.member_slots,
        }
        if self.assignment_timestamp:
            d["assignment_timestamp"] = self.assignment_timestamp
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "ConsumerGroup":
        group = cls(d["group_id"])
        group.group_epoch, group.assignment_epoch = d["group_epoch"], d["assignment_epoch"]
        group.assignment_timestamp = int(d.get("assignment_timestamp", 0))
        for md in d["members"]:
            group._update_member(ConsumerGroupMember.from_dict(md))
        group.target = {mid: assignment(a) for mid, a in d["target"].items()}
        group.subscription_metadata = {n: (v[0], v[1]) for n, v in d["subscription_metadata"].items()}
        group.resolved_regexes = {
            r: ResolvedRegex(frozenset(v[0]), v[1], v[2]) for r, v in d["resolved_regexes"].items()
        }
        group.deleted = d["deleted"]
        group.member_slots = max(group.member_slots, d.get("member_slots", TIMELINE_MIN_CAPACITY))
        return group

    def durable_view(self) -> dict:
        """What the records determine: two groups with equal views are the same group."""
        d = self.to_dict()
        d["members"] = sorted(d["members"], key=lambda m: m["member_id"])
        del d["member_slots"]  # history (members that left), not records
        return d
