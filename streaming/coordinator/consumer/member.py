"""One member of a consumer group (KIP-848), as Kafka's ``ConsumerGroupMember``: immutable, changed by copying.

An assignment is ``{topic id: frozenset(partitions)}`` without empty entries, so two equal assignments compare
equal whatever way they were built.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from streaming.coordinator.consumer.member_state import MemberState

Assignment = Mapping[str, frozenset]
EMPTY: dict[str, frozenset] = {}

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def assignment(mapping: Mapping[str, Iterable[int]] | None = None) -> dict[str, frozenset]:
    """Normalise ``{topic id: partitions}``: frozensets, empty topics dropped."""
    out = {}
    for topic_id, partitions in (mapping or {}).items():
        parts = frozenset(int(p) for p in partitions)
        if parts:
            out[topic_id] = parts
    return out


def assignment_to_json(a: Assignment) -> dict[str, list[int]]:
    return {t: sorted(ps) for t, ps in sorted(a.items())}


def is_subset(owned: Mapping[str, Iterable[int]] | None, target: Assignment) -> bool:
    """Kafka's ``isSubset``: the owned partitions are all in ``target`` (nothing reported is not a subset)."""
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        have = target.get(topic_id)
        parts = set(partitions)
        if not parts:
            continue
        if have is None or not parts <= have:
            return False
    return True


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) inside a consumer group:
    its session timeout and its JoinGroup's protocols, ``(name, metadata)`` with the metadata the embedded
    ConsumerProtocolSubscription bytes in base64 (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, str], ...]

    def to_record(self) -> dict:
        return {
            "sessionTimeoutMs": self.session_timeout_ms,
            "supportedProtocols": [{"name": n, "metadata": m} for n, m in self.protocols],
        }

    @classmethod
    def from_record(cls, value: Mapping | None) -> "ClassicMemberMetadata | None":
        """None for a member of the consumer protocol: a null, or the empty struct a record without the field reads
        as (no JoinGroup has no protocols)."""
        if value is None or not value.get("supportedProtocols"):
            return None
        return cls(
            int(value["sessionTimeoutMs"]),
            tuple((p["name"], p.get("metadata") or "") for p in value.get("supportedProtocols") or []),
        )


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    assigned_partitions: Mapping[str, frozenset] = field(default_factory=dict)
    partitions_pending_revocation: Mapping[str, frozenset] = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set for a member of the classic protocol

    def with_(self, **changes) -> "ConsumerGroupMember":
        return replace(self, **changes)

    def update_member_epoch(self, epoch: int, **changes) -> "ConsumerGroupMember":
        """Kafka's ``Builder.updateMemberEpoch``: the current epoch becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def regex(self) -> str | None:
        """The subscribed regex, or None for none (Kafka stores an empty string)."""
        return self.subscribed_topic_regex or None

    # --- serialisation (the group state, not the records) -----------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": int(self.state),
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "subscribed_topic_names": sorted(self.subscribed_topic_names),
            "subscribed_topic_regex": self.subscribed_topic_regex,
            "server_assignor": self.server_assignor,
            "assigned_partitions": assignment_to_json(self.assigned_partitions),
            "partitions_pending_revocation": assignment_to_json(self.partitions_pending_revocation),
            **({"classic": self.classic.to_record()} if self.classic is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "ConsumerGroupMember":
        return cls(
            d["member_id"],
            d["member_epoch"],
            d["previous_member_epoch"],
            MemberState.from_value(d["state"]),
            d["instance_id"],
            d["rack_id"],
            d["rebalance_timeout_ms"],
            d["client_id"],
            d["client_host"],
            frozenset(d["subscribed_topic_names"]),
            d["subscribed_topic_regex"],
            d["server_assignor"],
            assignment(d["assigned_partitions"]),
            assignment(d["partitions_pending_revocation"]),
            ClassicMemberMetadata.from_record(d.get("classic")),
        )
