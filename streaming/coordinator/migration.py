"""What the online migration between the protocols needs of the models' groups (Kafka 4.x, KIP-848): a classic
group as the consumer model takes it over (``classic_group_view``, read by
``consumer.classic_members.upgrade``); the cluster feed builds the same view from the broker's GroupMetadata record
(``snapshot_view``), so both convert a group alike.

A view: ``group_id``, ``generation``, ``protocol_type``, ``protocol_name`` and ``members``, each with ``member_id``,
``instance_id``, ``client_id``, ``client_host``, ``rebalance_timeout_ms``, ``session_timeout_ms``, ``protocols``
(``[name, metadata in base64]``), ``subscription`` (the group protocol's, decoded), ``assignment`` (topic-partition
pairs) and ``assignment_user_data`` (whether the assignment carried user data: Kafka refuses to lose it).
"""

from __future__ import annotations

import base64

from typing import TYPE_CHECKING

from offsets_store.codec import CodecError, decode_subscription, encode_subscription
from streaming.coordinator.consumer.classic_members import protocol_metadata
from streaming.coordinator.group import Group
from streaming.coordinator.member import Member, Protocol
from streaming.coordinator.outputs import Outputs
from streaming.coordinator.state import GroupState

if TYPE_CHECKING:
    from streaming.coordinator.coordinator import GroupCoordinator


def classic_group_view(group: Group) -> dict:
    """The view of a group of the classic model."""
    members = []
    for m in group.members.values():
        chosen = m.protocol(group.protocol_name) or (m.protocols[0] if m.protocols else None)
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "session_timeout_ms": m.session_timeout_ms,
                "protocols": [[p.name, protocol_metadata(vars(p))] for p in m.protocols],
                "subscription": {"topics": list(chosen.topics), "rack": chosen.rack} if chosen is not None else {},
                "assignment": [list(tp) for tp in m.assignment],
                # the tracker's classic model keeps an assignment's partitions only (the cluster feed's view says)
                "assignment_user_data": False,
            }
        )
    return {
        "group_id": group.group_id,
        "generation": group.generation,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "members": members,
    }


def snapshot_view(record: dict) -> dict:
    """The view of a GroupMetadata record (as ``offsets_store.codec`` decodes it): each member with the group's
    protocol only -- the record keeps no other (the consumer group's records name them all)."""
    name = record.get("protocol") or ""
    members = []
    for m in record.get("members") or []:
        sub = m.get("subscription") or {}
        raw = sub["raw"] if "raw" in sub else base64.b64encode(encode_subscription(sub)).decode("ascii")
        given = m.get("assignment") or {}
        members.append(
            {
                "member_id": m["member_id"],
                "instance_id": m.get("group_instance_id"),
                "client_id": m.get("client_id", ""),
                "client_host": m.get("client_host", ""),
                "rebalance_timeout_ms": m.get("rebalance_timeout", m.get("session_timeout", -1)),
                "session_timeout_ms": m["session_timeout"],
                "protocols": [[name, raw]],
                "subscription": sub,
                "assignment": given.get("partitions") or [],
                "assignment_user_data": bool(given.get("user_data")),
            }
        )
    return {
        "group_id": record["group_id"],
        "generation": record["generation"],
        "protocol_type": record.get("protocol_type"),
        "protocol_name": name,
        "members": members,
    }


def downgrade_into(classic: GroupCoordinator, view: dict) -> Outputs:
    """The classic group a consumer group becomes when its last member of the consumer protocol goes
    (``consumer.classic_members.downgrade``; Kafka's ClassicGroup.fromConsumerGroup, createClassicGroupRecords and
    convertToClassicGroup): Stable at the consumer group's epoch, the members in its member table's order (the first
    leads), each with its JoinGroup's protocols and its target assignment; its GroupMetadata record; every member's
    session starts; then the rebalance Kafka prepares (``reason``; None: none), which the members join on their next
    heartbeat."""
    gid, now = view["group_id"], view["ts"]
    group = classic.create_group({"group_id": gid, "ts": now})
    for name, partitions in view["topics"].items():
        group.topics.setdefault(name, partitions)
    classic.topic_ids.update(view["topic_ids"])
    for m in view["members"]:
        member = Member(
            m["member_id"],
            m["instance_id"],
            m["client_id"],
            m["client_host"],
            m["session_timeout_ms"],
            m["rebalance_timeout_ms"],
            "consumer",
            [_protocol(name, metadata) for name, metadata in m["protocols"]],
        )
        member.assignment = sorted((t, int(p)) for t, p in m["assignment"])
        group.add(member)
    group.generation = group.recorded_generation = view["generation"]
    for member in group.members.values():
        member.assignment_generation = group.generation
    group.protocol_name = group.select_protocol()
    group.state, group.state_timestamp, group.generation_ts = GroupState.STABLE, now, now
    group.generation_topics = frozenset(group.subscribed_topics() or ())
    out: Outputs = [group.metadata_record()]
    for member in group.members.values():
        classic.schedule_session(group, member)
    classic.adopt_offsets(gid, view["offsets"])
    if view["reason"] is None:  # a classic static member took the last consumer-protocol member's place, in time
        return out
    return out + classic.prepare_rebalance(group, "downgrade", view["reason"])


def _protocol(name: str, metadata: str) -> Protocol:
    try:
        sub = decode_subscription(base64.b64decode(metadata))
    except (CodecError, ValueError):
        return Protocol(name, [])
    owned = [(t, int(p)) for t, p in sub["owned_partitions"]]
    return Protocol(name, list(sub["topics"]), owned, sub["generation"], sub["user_data"], sub["rack"], sub["version"])
