"""Members of the classic protocol inside a consumer group (Kafka 4.x's online migration, KIP-848): their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup translated as Kafka's ``GroupMetadataManager`` does
(``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``, ``classicGroupHeartbeatToConsumerGroup``,
``classicGroupLeaveToConsumerGroup``), and the upgrade of a classic group into a consumer group
(``convertToConsumerGroup``, ``ConsumerGroup.fromClassicGroup`` and ``createConsumerGroupRecords``).

A classic member is a ``ConsumerGroupMember`` with ``classic`` set (its session timeout and its JoinGroup's
protocols, written as the ConsumerGroupMemberMetadata's ``classicMemberMetadata``). Its JoinGroup is a heartbeat
of the consumer protocol in all but name: its subscription (the first protocol's embedded
ConsumerProtocolSubscription) may bump the group epoch and compute a new target, and it is reconciled towards its
target with the partitions that subscription says it owns; the JoinGroup's answer carries the member epoch as the
generation. Its SyncGroup writes nothing and answers the member's assigned partitions. Its Heartbeat answers
REBALANCE_IN_PROGRESS while it must rejoin (its epoch is behind the target's, it still has partitions to revoke, or
the partitions it waits for are free), which starts its join timeout (its rebalance timeout; it is fenced when it
runs out). A JoinGroup starts its sync timeout, a SyncGroup ends it. Its session is its own session timeout,
renewed by its Heartbeats and SyncGroups. A LeaveGroup (of any member) fences it as a consumer member's leave does.

Every function takes the ``ConsumerGroupCoordinator`` and returns its outputs, as its handlers do.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING, Mapping

from assignors.java import java_hash_order, java_string_hash, timeline_hash_order
from offsets_store.codec import encode_subscription
from streaming.coordinator import outputs
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.errors import HeartbeatError
from streaming.coordinator.consumer.group import ConsumerGroup
from streaming.coordinator.consumer.member import ClassicMemberMetadata, ConsumerGroupMember, assignment
from streaming.coordinator.consumer.member_state import MemberState
from streaming.coordinator.consumer.reconcile import reconcile
from streaming.coordinator.outputs import Outputs

if TYPE_CHECKING:
    from streaming.coordinator.consumer.coordinator import ConsumerGroupCoordinator

JOIN_TIMER, SYNC_TIMER = 3, 4  # the coordinator's timer kinds (_JOIN, _SYNC)
_MEMBER_ID_NAMESPACE = uuid.UUID("6f1c1c55-3c1e-4b59-9a7e-5e0f2b1f8a48")


def protocol_metadata(p: Mapping) -> str:
    """A JoinGroup protocol's metadata (the embedded ConsumerProtocolSubscription) as the client sent it, in base64:
    the event's decoded fields at the version it names (the newest when it names none)."""
    sub = {
        "topics": p.get("topics") or [],
        "user_data": p.get("user_data"),
        "owned_partitions": p.get("owned_partitions") or [],
        "generation": p.get("generation", -1),
        "rack": p.get("rack"),
    }
    if p.get("version") is not None:
        sub["version"] = p["version"]
    return base64.b64encode(encode_subscription(sub)).decode("ascii")


def classic_metadata(session_timeout_ms: int, protocols: list[Mapping]) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms, tuple((p["name"], protocol_metadata(p)) for p in protocols))


def _refused(c: "ConsumerGroupCoordinator", e: dict, error: str) -> Outputs:
    return [outputs.request_refused(e, c.now, error)]


def _member(group: ConsumerGroup, e: dict) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember: the member by id, or by instance id (whose member id must match)."""
    member_id, instance_id = e["member_id"], e.get("group_instance_id")
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of group {group.group_id}.")
        return member
    member = group.static_member(instance_id)
    if member is None:
        raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise HeartbeatError("FENCED_INSTANCE_ID", f"Static member {member_id} was fenced by {member.member_id}.")
    return member


def _classic_member(group: ConsumerGroup, e: dict) -> ConsumerGroupMember:
    member = _member(group, e)
    if member.classic is None:
        raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Member {member.member_id} does not use the classic protocol.")
    if e["generation"] != member.member_epoch:
        raise HeartbeatError("ILLEGAL_GENERATION", "The request generation id is not equal to the member epoch.")
    return member


def _new_member_id(c: "ConsumerGroupCoordinator", group: ConsumerGroup, e: dict) -> str:
    """Kafka draws a random UUID; here one derived from the request, so replays give the same ids."""
    hint, c.member_id_hint = c.member_id_hint, None
    if hint and hint not in group.members:
        return hint
    for n in range(1 << 16):
        candidate = str(uuid.uuid5(_MEMBER_ID_NAMESPACE, f"{group.group_id}/{e['client_id']}/{c.now}/{n}"))
        if candidate not in group.members:
            return candidate
    raise HeartbeatError("UNKNOWN_SERVER_ERROR", "no member id left")  # pragma: no cover


# ---------------------------------------------------------------------------------------------------- JoinGroup
def join(c: "ConsumerGroupCoordinator", e: dict) -> Outputs:
    """classicGroupJoinToConsumerGroup, for a non-empty consumer group (routing gives an Empty one to the classic
    model)."""
    gid = e["group_id"]
    group = c.groups.get(gid)
    if group is None or not group.members:
        return _refused(c, e, "UNKNOWN_MEMBER_ID")
    try:
        return _join(c, group, e)
    except HeartbeatError as exc:
        return _refused(c, e, exc.error)


def _join(c: "ConsumerGroupCoordinator", group: ConsumerGroup, e: dict) -> Outputs:
    gid, instance_id = group.group_id, e["group_instance_id"]
    member_id = e["member_id"]
    unknown = not member_id
    if e.get("generation") is not None and instance_id is not None and member_id not in group.members:
        # Reported from the broker's answer (an observer's feed): the id it drew for the static member's JoinGroup,
        # which came without one (sent with an id it would have been refused: fenced, or unknown).
        c.member_id_hint, unknown = member_id, True
    if unknown:
        member_id = _new_member_id(c, group, e)
    limit = c.config.group_consumer_max_size
    if len(group.members) >= limit and (unknown or member_id not in group.members):
        raise HeartbeatError("GROUP_MAX_SIZE_REACHED", "The consumer group has reached its maximum capacity.")
    if not group.supports_classic_protocols(e["protocol_type"], [p["name"] for p in e["protocols"]]):
        raise HeartbeatError("INCONSISTENT_GROUP_PROTOCOL", f"Member {member_id}'s protocols are not supported.")
    if unknown and instance_id is None:  # KIP-394: the member must come back with the id it is given
        return [outputs.join_answer(gid, c.now, member_id, None, "MEMBER_ID_REQUIRED", -1, None, None, None, [])]

    records: list[dict] = []
    replaced = None
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            member = ConsumerGroupMember(member_id)
    else:
        existing = group.static_member(instance_id)
        if existing is None:
            if not unknown:  # throwIfStaticMemberIsUnknown: a new static member comes without an id
                raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Instance id {instance_id} is unknown.")
            member = ConsumerGroupMember(member_id)
        elif unknown:
            # The instance restarted: it takes the place of the departed member, same assignment, epoch 0.
            member = existing.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            replaced = existing
            records += [
                R.current_assignment_tombstone(gid, existing.member_id),
                R.target_assignment(gid, existing.member_id, None),
                R.member_subscription_tombstone(gid, existing.member_id),
                R.member_subscription(gid, member),
                R.target_assignment(gid, member_id, group.target.get(existing.member_id, {})),
                R.current_assignment(gid, member),
            ]
        elif existing.member_id != member_id:
            raise HeartbeatError("FENCED_INSTANCE_ID", f"Static member {member_id} was fenced.")
        else:
            member = existing
    old_ref = replaced if replaced is not None else member

    first = e["protocols"][0]  # Kafka reads the subscription of any protocol: they all carry the same one
    rack = first.get("rack") or None
    updated = member.with_(
        instance_id=instance_id if instance_id is not None else member.instance_id,
        rack_id=rack if rack is not None else member.rack_id,
        rebalance_timeout_ms=e["rebalance_timeout_ms"]
        if e["rebalance_timeout_ms"] != -1
        else member.rebalance_timeout_ms,
        subscribed_topic_names=frozenset(first.get("topics") or []),
        subscribed_topic_regex="",
        client_id=e["client_id"],
        client_host=e["client_host"],
        classic=classic_metadata(e["session_timeout_ms"], e["protocols"]),
    )
    soft = c.soft[gid]
    bump = False
    if updated != member:
        records.append(R.member_subscription(gid, updated))
        bump = updated.subscribed_topic_names != member.subscribed_topic_names
    # A classic member has no regex: a static member's it replaces goes (its tombstone, if no one else has it, and a
    # new epoch), and the group's other regexes may be due a refresh.
    refresh, regex_bump = c._regex_update(group, member, updated, records)
    bump |= regex_bump

    group_epoch = group.group_epoch
    names = group.subscribed_topic_names(old_ref, updated)
    subscription_type = ConsumerGroup.subscription_type(
        group.subscribed_regexes(old_ref, updated), names, len(list(group._members_with(old_ref, updated)))
    )
    metadata = group.subscription_metadata
    if bump or soft.refresh_metadata:
        metadata = ConsumerGroup.compute_subscription_metadata(names, c.image)
        if metadata != group.subscription_metadata:
            bump = True
            records.append(R.partition_metadata(gid, metadata))
        if bump:
            group_epoch += 1
            records.append(R.epoch(gid, group_epoch))

    static = group.static_member(instance_id) if instance_id is not None else None
    if static is not None and downgrade_allowed_replacing(c, group, static):
        # validateOnlineDowngradeWithReplacedMember: this classic member takes the place of the last member of the
        # consumer protocol, and the group becomes a classic one -- at once if its target is current (the member
        # reconciled to it first), with a rebalance if a new target was due (Kafka computes none here).
        stale = group.assignment_epoch < group_epoch
        if not stale and not updated.is_reconciled_to(group.assignment_epoch):
            target = group.target_for(updated.member_id, updated.instance_id)
            reconciled = reconcile(
                updated, group.assignment_epoch, target, group.current_partition_epoch, _owned(c, first)
            )
            if reconciled != updated:
                records.append(R.current_assignment(gid, reconciled))
            updated = reconciled
        return downgrade_replacing(c, group, static, updated, records, stale)

    # The consumer heartbeat's steps 2 and 3: a new target if due, the member reconciled towards it
    updated, assignor_name = c._target_and_reconcile(
        group, updated, old_ref, group_epoch, metadata, subscription_type, _owned(c, first), records
    )

    if assignor_name is not None:
        soft.assignor = assignor_name
    if bump or soft.refresh_metadata:
        soft.refresh_metadata = False
    out: Outputs = []
    if replaced is not None:
        c._cancel_timers(gid, replaced.member_id)
        out.append(outputs.consumer_member_replaced(gid, c.now, member_id, replaced.member_id, instance_id))
    elif member_id not in group.members:
        out.append(
            outputs.consumer_member_joined(
                gid,
                c.now,
                member_id,
                instance_id,
                e["client_id"],
                e["client_host"],
                sorted(updated.subscribed_topic_names),
                None,
            )
        )
    trigger = "join" if member_id not in group.members else "subscription"
    detail = (
        f"member {member_id} joined with the classic protocol"
        if trigger == "join"
        else (f"classic member {member_id} rejoined")
    )
    out += c._apply(group, records, trigger, detail)
    c.cancel_classic_timer(JOIN_TIMER, gid, member_id)
    c._schedule_session(gid, member_id)
    c.schedule_classic_timer(SYNC_TIMER, gid, member_id, e["rebalance_timeout_ms"], if_absent=False)
    out.append(
        outputs.join_answer(
            gid,
            c.now,
            member_id,
            instance_id,
            "NONE",
            updated.member_epoch,
            "consumer",
            updated.classic.protocols[0][0],
            "",
            [],
        )
    )
    if refresh:  # the other members' regexes were due a refresh (Kafka's, asynchronous, after the request)
        out += c._ask_to_resolve(group, refresh)
    return out


def _owned(c: "ConsumerGroupCoordinator", protocol: Mapping) -> dict[str, frozenset]:
    """The subscription's owned partitions by topic id (Kafka's toTopicPartitions: topics it does not know are left
    out); an empty list, never None, so an eager member that owns nothing has revoked everything."""
    owned: dict[str, set] = {}
    for topic, partition in protocol.get("owned_partitions") or []:
        topic_id = c.image.id_for(topic)
        if topic_id is not None:
            owned.setdefault(topic_id, set()).add(int(partition))
    return {t: frozenset(ps) for t, ps in owned.items()}


# ---------------------------------------------------------------------------------------------------- SyncGroup
def sync(c: "ConsumerGroupCoordinator", e: dict) -> Outputs:
    """classicGroupSyncToConsumerGroup: nothing written; the member's assigned partitions, unless it must rejoin."""
    group = c.groups.get(e["group_id"])
    if group is None or not group.members:
        return _refused(c, e, "UNKNOWN_MEMBER_ID")
    try:
        member = _classic_member(group, e)
        protocol = member.classic.protocols[0][0] if member.classic.protocols else ""
        if e.get("protocol_type") is not None and e["protocol_type"] != "consumer":
            raise HeartbeatError("INCONSISTENT_GROUP_PROTOCOL", "protocol type")
        if e.get("protocol_name") is not None and e["protocol_name"] != protocol:
            raise HeartbeatError("INCONSISTENT_GROUP_PROTOCOL", "protocol name")
        if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            c.schedule_classic_timer(JOIN_TIMER, group.group_id, member.member_id, member.rebalance_timeout_ms, True)
            raise HeartbeatError("REBALANCE_IN_PROGRESS", "the member must rejoin")
    except HeartbeatError as exc:
        return _refused(c, e, exc.error)
    c.cancel_classic_timer(SYNC_TIMER, group.group_id, member.member_id)
    c._schedule_session(group.group_id, member.member_id)
    return [
        outputs.sync_answer(
            group.group_id,
            c.now,
            member.member_id,
            member.instance_id,
            member.member_epoch,
            protocol,
            c._pairs(member.assigned_partitions),
        )
    ]


# ---------------------------------------------------------------------------------------------------- Heartbeat
def heartbeat(c: "ConsumerGroupCoordinator", e: dict) -> Outputs:
    """classicGroupHeartbeatToConsumerGroup: the session goes on; REBALANCE_IN_PROGRESS when the member must
    rejoin (and its join timeout starts, unless it runs already)."""
    group = c.groups.get(e["group_id"])
    if group is None:
        return _refused(c, e, "UNKNOWN_MEMBER_ID")
    try:
        member = _classic_member(group, e)
    except HeartbeatError as exc:
        return _refused(c, e, exc.error)
    gid = group.group_id
    c._schedule_session(gid, member.member_id)
    error = "NONE"
    if (
        member.member_epoch < group.assignment_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waits_on_unreleased(group, member))
    ):
        error = "REBALANCE_IN_PROGRESS"
        c.schedule_classic_timer(JOIN_TIMER, gid, member.member_id, member.rebalance_timeout_ms, if_absent=True)
    return [outputs.heartbeat_response(e, c.now, error)]


def _waits_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target it lacks is still owned by another."""
    for topic_id, parts in group.target.get(member.member_id, {}).items():
        have = member.assigned_partitions.get(topic_id, frozenset())
        for p in parts:
            if p not in have and group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False


# ---------------------------------------------------------------------------------------------------- LeaveGroup
def leave(c: "ConsumerGroupCoordinator", e: dict) -> Outputs:
    """classicGroupLeaveToConsumerGroup: the member (of either protocol; by instance id alone for an admin's
    removal) is fenced as a consumer member's leave is."""
    group = c.groups.get(e["group_id"])
    if group is None:
        return _refused(c, e, "UNKNOWN_MEMBER_ID")
    member_id, instance_id = e["member_id"], e["group_instance_id"]
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            return _refused(c, e, "UNKNOWN_MEMBER_ID")
    else:
        member = group.static_member(instance_id)
        if member is None:
            return _refused(c, e, "UNKNOWN_MEMBER_ID")
        if member_id and member.member_id != member_id:
            return _refused(c, e, "FENCED_INSTANCE_ID")
    out: Outputs = [
        outputs.consumer_member_left(group.group_id, c.now, member.member_id, member.instance_id, "leave", False)
    ]
    out += c._fence(group, [member], None, "left the group")
    return out + [outputs.leave_response(e, c.now, "NONE")]


# ---------------------------------------------------------------------------------------------------- the upgrade
def upgrade_error(c: "ConsumerGroupCoordinator", view: Mapping) -> tuple[str, str] | None:
    """Kafka's validateOnlineUpgrade and what fromClassicGroup refuses: (error, message) of its refusal, or None when
    the classic group ``view`` (``migration.classic_group_view``) may become a consumer group."""
    gid = view["group_id"]
    cannot = f"Cannot upgrade classic group {gid} to consumer group"
    if not c.config.upgrade_enabled:
        return "GROUP_ID_NOT_FOUND", f"{cannot} because online upgrade is disabled."
    if view["protocol_type"] != "consumer":
        return "GROUP_ID_NOT_FOUND", f"{cannot} because the group does not use the consumer embedded protocol."
    if len(view["members"]) > c.config.group_consumer_max_size:
        return "GROUP_ID_NOT_FOUND", f"{cannot} because the group size exceeds the consumer group maximum size."
    if any(m["assignment_user_data"] for m in view["members"]):
        return "GROUP_ID_NOT_FOUND", (
            f"{cannot} because an unsupported custom assignor is in use. "
            "Please refer to the documentation or switch to a default assignor before re-attempting the upgrade."
        )
    owned = [(t, int(p)) for m in view["members"] for t, p in m["assignment"]]
    if len(owned) != len(set(owned)):
        # Kafka's ConsumerGroup refuses a partition owned twice at one epoch (an IllegalStateException)
        return "UNKNOWN_SERVER_ERROR", f"{cannot}: a partition is assigned to more than one member."
    return None


def upgrade(c: "ConsumerGroupCoordinator", view: Mapping) -> Outputs:
    """convertToConsumerGroup: the consumer group a classic group becomes (``upgrade_error`` said it may), its
    records as Kafka writes them (every member's subscription, the group epoch, every member's target, the target
    epoch, every member's current assignment), each member Stable at the classic generation with the partitions
    it was given, its target the same; with ``upgrade_with_metadata`` (4.1+) the subscribed topics' metadata too;
    the members' sessions start, with their classic session timeouts. The
    GroupMetadata tombstone that comes first is the caller's (the classic model's record)."""
    gid, generation = view["group_id"], view["generation"]
    group = ConsumerGroup(gid, generation)
    # Kafka adds the members in its classic group's HashMap order; its member table's order gives the records'.
    by_id = {m["member_id"]: m for m in view["members"]}
    members: dict[str, ConsumerGroupMember] = {}
    for member_id in java_hash_order(list(by_id), java_string_hash):
        m = by_id[member_id]
        sub = m["subscription"]
        given = {}
        for topic, partition in m["assignment"]:
            topic_id = c.image.id_for(topic)
            if topic_id is not None:
                given.setdefault(topic_id, set()).add(int(partition))
        members[member_id] = ConsumerGroupMember(
            member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            instance_id=m["instance_id"],
            rack_id=sub.get("rack") or None,
            rebalance_timeout_ms=m["rebalance_timeout_ms"],
            client_id=m["client_id"],
            client_host=m["client_host"],
            subscribed_topic_names=frozenset(sub.get("topics") or []),
            assigned_partitions=assignment(given),
            classic=ClassicMemberMetadata(m["session_timeout_ms"], tuple((n, md) for n, md in m["protocols"])),
        )
        # the table's order, before the records fill it
        group._update_member(ConsumerGroupMember(member_id, member_epoch=generation))
    order = timeline_order(group)
    records = [R.member_subscription(gid, members[mid]) for mid in order]
    if c.config.upgrade_with_metadata:  # in the model's records as 4.0's, not as 4.1+'s hash
        names = {t for m in members.values() for t in m.subscribed_topic_names}
        metadata = ConsumerGroup.compute_subscription_metadata(sorted(names), c.image)
        if metadata:
            records.append(R.partition_metadata(gid, metadata))
    records.append(R.epoch(gid, generation))
    records += [R.target_assignment(gid, mid, members[mid].assigned_partitions) for mid in order]
    records.append(R.target_assignment_epoch(gid, generation))
    records += [R.current_assignment(gid, members[mid]) for mid in order]
    out = c._apply(group, records)
    c.soft[gid].refresh_metadata = True
    for mid in order:
        c._schedule_session(gid, mid)
    return out


# ---------------------------------------------------------------------------------------------------- the downgrade
def downgrade_allowed(c: "ConsumerGroupCoordinator", group: ConsumerGroup, leaving: list[ConsumerGroupMember]) -> bool:
    """validateOnlineDowngradeWithFencedMembers: once ``leaving`` are gone, members remain, all of the classic
    protocol; the policy allows the downgrade; they fit the classic group.max.size."""
    remaining = len(group.members) - len({m.member_id for m in leaving})
    return (
        group.all_classic_except(leaving)
        and remaining > 0
        and c.config.downgrade_enabled
        and remaining <= c.classic_group_max_size
    )


def downgrade_allowed_replacing(
    c: "ConsumerGroupCoordinator", group: ConsumerGroup, replaced: ConsumerGroupMember
) -> bool:
    """validateOnlineDowngradeWithReplacedMember: ``replaced`` (the static member a classic JoinGroup of its instance
    id takes the place of) is the group's only member of the consumer protocol; the policy allows the downgrade; the
    members fit the classic group.max.size."""
    return (
        replaced.classic is None
        and group.all_classic_except([replaced])
        and c.config.downgrade_enabled
        and len(group.members) <= c.classic_group_max_size
    )


def _view_member(c: "ConsumerGroupCoordinator", m: ConsumerGroupMember, target: Mapping) -> dict:
    """A member of the classic group a downgrade makes (``migration.downgrade_into``), given its target."""
    return {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "session_timeout_ms": m.classic.session_timeout_ms,
        "protocols": [list(p) for p in m.classic.protocols],
        "assignment": c._pairs(target),
    }


def _downgrade_view(c: "ConsumerGroupCoordinator", group: ConsumerGroup, members: list[dict], **fields) -> dict:
    return {
        "group_id": group.group_id,
        "generation": group.group_epoch,
        "members": members,
        "offsets": dict(c.offsets.get(group.group_id, {})),
        "topics": {name: topic.partitions for name, topic in c.image.by_name.items()},
        "topic_ids": {name: topic.topic_id for name, topic in c.image.by_name.items()},
        "ts": c.now,
        **fields,
    }


def downgrade_replacing(
    c: "ConsumerGroupCoordinator",
    group: ConsumerGroup,
    replaced: ConsumerGroupMember,
    joining: ConsumerGroupMember,
    records: list[dict],
    stale: bool,
) -> Outputs:
    """convertToClassicGroup for a classic static member (``joining``) replacing the last member of the consumer
    protocol: the JoinGroup's ``records`` (the replacement, the member's metadata), then the consumer group's
    tombstones with the joining member's id in the replaced one's place (createGroupTombstoneRecordsWithReplacedMember:
    the member table before the JoinGroup, whose records Kafka does not replay); in ``c.downgraded`` the classic group
    (ClassicGroup.fromConsumerGroup): Stable at the group epoch before the JoinGroup, the other members in the member
    table's order, the joining one last with the replaced one's target; a rebalance only if the target was ``stale``
    ("Downgrade group g from consumer to classic with stale assignment."). Then the JoinGroup's answer, at the member's
    epoch."""
    gid, now = group.group_id, c.now
    out: Outputs = []
    if joining.member_id != replaced.member_id:
        out.append(
            outputs.consumer_member_replaced(gid, now, joining.member_id, replaced.member_id, joining.instance_id)
        )
    order = timeline_order(group)
    members = [
        _view_member(c, group.members[mid], group.target.get(mid, {})) for mid in order if mid != replaced.member_id
    ]
    members.append(_view_member(c, joining, group.target.get(replaced.member_id, {})))
    view = _downgrade_view(
        c,
        group,
        members,
        reason=f"Downgrade group {gid} from consumer to classic with stale assignment." if stale else None,
        switch=f"downgrade: static member {joining.member_id} of the classic protocol took the place of "
        f"{replaced.member_id} (instance {joining.instance_id}), the last member of the consumer protocol; its "
        f"{len(members)} members of the classic protocol form a classic group"
        + (", which rebalances (its target assignment was stale)" if stale else ""),
    )
    ids = [joining.member_id if mid == replaced.member_id else mid for mid in order]
    tombstones = [R.current_assignment_tombstone(gid, m) for m in ids]
    tombstones += [R.target_assignment(gid, m, None) for m in ids]
    tombstones.append(R.target_assignment_epoch(gid, None))
    tombstones += [R.member_subscription_tombstone(gid, m) for m in ids]
    tombstones += [R.regular_expression(gid, r, None) for r in group.resolved_regexes]
    tombstones += [R.partition_metadata(gid, None), R.epoch(gid, None)]
    for mid in list(group.members):
        c._cancel_timers(gid, mid)
    why = f"static member {joining.member_id} of the classic protocol replaced the last of the consumer protocol"
    out += c._apply(group, records)  # one write with the tombstones; replayed apart, so each record has its member
    out += c._apply(group, tombstones, reason=f"downgraded to a classic group: {why}")
    c.downgraded[gid] = view
    protocol = joining.classic.protocols[0][0] if joining.classic.protocols else ""
    out.append(
        outputs.join_answer(
            gid, now, joining.member_id, joining.instance_id, "NONE", joining.member_epoch, "consumer", protocol, "", []
        )
    )
    return out


def downgrade(
    c: "ConsumerGroupCoordinator",
    group: ConsumerGroup,
    leaving: list[ConsumerGroupMember],
    reason: str | None,
    why: str,
    answer: dict | None,
) -> Outputs:
    """convertToClassicGroup for members leaving (or fenced): the consumer group's tombstones (as a deletion
    writes them), and, in ``c.downgraded``, the classic group the remaining members form: Stable at the group epoch,
    each member with its JoinGroup's protocols and its target assignment, the first of the member table its leader.
    routing.py hands it to the classic model, which writes its GroupMetadata and starts the rebalance Kafka starts
    ("Downgrade group g from consumer to classic for member leaving.")."""
    gid = group.group_id
    gone = {m.member_id for m in leaving}
    out: Outputs = []
    for m in leaving:
        if reason is not None:
            out.append(
                outputs.consumer_member_expired(
                    gid, c.now, m.member_id, m.instance_id, reason, why, c.soft[gid].last_heartbeat.get(m.member_id)
                )
            )
    order = [mid for mid in timeline_order(group) if mid not in gone]
    members = [_view_member(c, group.members[mid], group.target.get(mid, {})) for mid in order]
    view = _downgrade_view(
        c, group, members, reason=f"Downgrade group {gid} from consumer to classic for member leaving."
    )
    for mid in list(group.members):
        c._cancel_timers(gid, mid)
    out += c._apply(group, c._tombstones(group), reason=f"downgraded to a classic group: {why}")
    c.downgraded[gid] = view
    if answer is not None:
        out.append(c._answer(answer, member_id=answer["member_id"], member_epoch=answer["member_epoch"]))
    return out


def timeline_order(group: ConsumerGroup) -> list[str]:
    """The members as Kafka's member table (a TimelineHashMap) iterates them."""
    return timeline_hash_order(list(group.members), capacity=group.member_slots)
