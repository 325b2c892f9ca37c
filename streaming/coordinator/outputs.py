"""Every output of the two models, declared in one place: the answers to requests, the tracker's reports and the
``__consumer_offsets`` records.

An output is a plain dict with a ``type``, a ``group_id`` and a ``ts``: the public JSON shape that the job writes
(docs/outputs.md, docs/figures.md), the views and replays read and stored feeds hold. Each type's shape is a
TypedDict below, and each is built by one function below -- the only place a dict of that type is written; every
other module names output types by the constants here. The answers of the models' queries (``describe_group``,
``fetch_offsets``) are declared here too; each model builds its own, in one place.

TypedDicts rather than msgspec Structs: every reader downstream reads dicts, and a TypedDict costs nothing at run
time, where a Struct would have to become a dict again for each output on the job's hot path. Key order is part of
the format (JSON written without sorted keys keeps it), so each builder writes its keys in one fixed order.

Field names follow these rules. Outputs are snake_case, under the names of the protocol they describe: a classic
group's member carries ``group_instance_id`` (JoinGroup's field), a consumer-protocol group's ``instance_id``
(ConsumerGroupHeartbeat's). Records (``offset_commit``, ``group_metadata`` and the KIP-848 ``consumer_group_*``)
are what ``offsets_store.codec`` reads and writes: their key fields are snake_case (``group_id``, ``member_id``,
``regular_expression``); the classic records' value fields are snake_case renderings of Kafka's schema names
(``current_state_timestamp``, ``session_timeout``), while the KIP-848 records' value fields carry Kafka's JSON names
as they are (``memberEpoch``, ``assignedPartitions``), as Kafka's generated JSON converters write them. All of these
names are public and stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, TypedDict, Union

if TYPE_CHECKING:
    from streaming.coordinator.restored import Restored

Pair = list  # [topic, partition]

# ==================================================================================== output types
# Answers to requests (one per request; the job drops them unless asked: most of the volume, rarely needed).
JOIN_RESPONSE = "join_response"
SYNC_RESPONSE = "sync_response"
HEARTBEAT_RESPONSE = "heartbeat_response"
LEAVE_RESPONSE = "leave_response"
COMMIT_RESPONSE = "commit_response"
DELETE_GROUP_RESPONSE = "delete_group_response"
CONSUMER_HEARTBEAT_RESPONSE = "consumer_heartbeat_response"
# What happened to the group and its members.
STATE_CHANGE = "state_change"
MEMBER_JOINED = "member_joined"
MEMBER_UPDATED = "member_updated"  # observe mode: a member first named by the broker, its join now seen
MEMBER_REPLACED = "member_replaced"  # a static member restarted under a new member id
MEMBER_LEFT = "member_left"
MEMBER_EXPIRED = "member_expired"
ASSIGNMENT = "assignment"
TARGET_ASSIGNMENT = "target_assignment"
REBALANCE = "rebalance"  # one line of rebalance history, with its figures (figures.py)
# A group rebuilt from the store after a lost checkpoint (restored.py).
GROUP_RESTORED = "group_restored"
RESTORE_GAP = "restore_gap"
# The switch between the two protocols' models (routing.py), and what the tracker does not model.
PROTOCOL_SWITCH = "protocol_switch"
IGNORED_EVENT = "ignored_event"
# A partition's log end as sampled for the group (a ``log_end`` event, passed on): what lag is measured against.
LOG_END = "log_end"
# What a client library told its application (a ``client_report`` event, passed on): the client's side of the story.
CLIENT_REPORT = "client_report"
# What the job could not use (streaming/dead_letters.py builds it).
DEAD_LETTER = "dead_letter"
# __consumer_offsets records: the classic ones, and the KIP-848 consumer group's (record type ids in
# consumer/records.py).
OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
CONSUMER_GROUP_METADATA = "consumer_group_metadata"
CONSUMER_GROUP_PARTITION_METADATA = "consumer_group_partition_metadata"
CONSUMER_GROUP_MEMBER_METADATA = "consumer_group_member_metadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = "consumer_group_target_assignment_metadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = "consumer_group_target_assignment_member"
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = "consumer_group_current_member_assignment"
CONSUMER_GROUP_REGULAR_EXPRESSION = "consumer_group_regular_expression"

MEMBER_GONE = frozenset({MEMBER_LEFT, MEMBER_EXPIRED})
CLASSIC_RESPONSES = {
    "join": JOIN_RESPONSE,
    "sync": SYNC_RESPONSE,
    "heartbeat": HEARTBEAT_RESPONSE,
    "leave": LEAVE_RESPONSE,
    "commit": COMMIT_RESPONSE,
}  # request type -> its answer's type


# ==================================================================================== classic protocol answers
class Answer(TypedDict):
    """A classic request's answer: ``heartbeat_response`` and ``leave_response`` are no more than this."""

    type: str
    group_id: str
    ts: int
    member_id: str
    group_instance_id: str | None
    error: str


class JoinResponse(Answer):
    """A refused JoinGroup (generation -1), or the refusal of a member's waiting JoinGroup."""

    generation: int


class JoinMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    topics: list[str]  # of the group's protocol


class JoinAnswer(JoinResponse):
    """A JoinGroup answered with the generation (or MEMBER_ID_REQUIRED); only the leader's lists the members."""

    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: list[JoinMember]


class SyncResponse(JoinResponse, total=False):
    """A SyncGroup's answer: its assignment when NONE (with the protocol), empty when refused; a static member's
    SyncGroup fenced by its restart carries neither."""

    protocol: str | None
    assignment: list[Pair]


class CommitResponse(Answer):
    partitions: list[list]  # [topic, partition, error] per requested partition


def _answer(kind: str, group_id: str, ts: int, member_id: str, instance_id: str | None, error: str) -> Answer:
    return {
        "type": kind,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "error": error,
    }


def heartbeat_response(request: Mapping, ts: int, error: str) -> Answer:
    # Written out rather than through _answer: the most frequent output of all.
    return {
        "type": HEARTBEAT_RESPONSE,
        "group_id": request["group_id"],
        "ts": ts,
        "member_id": request.get("member_id", ""),
        "group_instance_id": request.get("group_instance_id"),
        "error": error,
    }


def leave_response(request: Mapping, ts: int, error: str) -> Answer:
    return _answer(
        LEAVE_RESPONSE, request["group_id"], ts, request.get("member_id", ""), request.get("group_instance_id"), error
    )


def join_refused(group_id: str, ts: int, member_id: str, instance_id: str | None, error: str) -> JoinResponse:
    return {**_answer(JOIN_RESPONSE, group_id, ts, member_id, instance_id, error), "generation": -1}


def join_answer(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    error: str,
    generation: int,
    protocol_type: str | None,
    protocol: str | None,
    leader: str | None,
    members: list[JoinMember],
) -> JoinAnswer:
    return {
        "type": JOIN_RESPONSE,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "error": error,
        "generation": generation,
        "protocol_type": protocol_type,
        "protocol": protocol,
        "leader": leader,
        "members": members,
    }


def join_member(member_id: str, instance_id: str | None, topics: list[str]) -> JoinMember:
    return {"member_id": member_id, "group_instance_id": instance_id, "topics": topics}


def sync_refused(
    group_id: str, ts: int, member_id: str, instance_id: str | None, error: str, generation: int
) -> SyncResponse:
    return {
        **_answer(SYNC_RESPONSE, group_id, ts, member_id, instance_id, error),
        "generation": generation,
        "assignment": [],
    }


def sync_answer(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    generation: int,
    protocol: str | None,
    assignment: list[Pair],
) -> SyncResponse:
    return {
        **_answer(SYNC_RESPONSE, group_id, ts, member_id, instance_id, "NONE"),
        "generation": generation,
        "protocol": protocol,
        "assignment": assignment,
    }


def fenced_by_restart(kind: str, group_id: str, ts: int, member_id: str, instance_id: str | None) -> JoinResponse:
    """The answer to a static member's JoinGroup (``kind`` join_response) or SyncGroup (sync_response) still waiting
    when the same instance restarted: FENCED_INSTANCE_ID."""
    return {**_answer(kind, group_id, ts, member_id, instance_id, "FENCED_INSTANCE_ID"), "generation": -1}


def commit_response(request: Mapping, ts: int, error: str, partitions: list[list]) -> CommitResponse:
    """OffsetCommitResponse (both protocols): ``partitions`` is [topic, partition, error] per requested entry."""
    return {
        **_answer(
            COMMIT_RESPONSE,
            request["group_id"],
            ts,
            request.get("member_id", ""),
            request.get("group_instance_id"),
            error,
        ),
        "partitions": partitions,
    }


def request_refused(request: Mapping, ts: int, error: str) -> Answer:
    """Kafka's answer to a classic request (join, sync, heartbeat, leave, commit) refused as a whole with
    ``error``: a JoinGroup's and SyncGroup's with generation -1 (and no assignment), an OffsetCommit's with the
    error for every partition."""
    kind, group_id = request["type"], request["group_id"]
    member_id, instance_id = request.get("member_id", ""), request.get("group_instance_id")
    if kind == "join":
        return join_refused(group_id, ts, member_id, instance_id, error)
    if kind == "sync":
        return sync_refused(group_id, ts, member_id, instance_id, error, -1)
    if kind == "commit":
        return commit_response(request, ts, error, [[o["topic"], o["partition"], error] for o in request["offsets"]])
    return _answer(CLASSIC_RESPONSES[kind], group_id, ts, member_id, instance_id, error)


class DeleteGroupResponse(TypedDict):
    type: str
    group_id: str
    ts: int
    error: str


def delete_group_response(group_id: str, ts: int, error: str) -> DeleteGroupResponse:
    """DeleteGroups names no member: one shape for both protocols."""
    return {"type": DELETE_GROUP_RESPONSE, "group_id": group_id, "ts": ts, "error": error}


# ==================================================================================== consumer protocol answers
class TopicAssignment(TypedDict):
    topic_id: str
    topic: str | None
    partitions: list[int]


class ConsumerHeartbeatResponse(TypedDict):
    """ConsumerGroupHeartbeatResponse: an error answer carries only the error (and the request's member id, repeated
    for the tracker's readers); ``assignment`` is None when the answer does not carry one."""

    type: str
    group_id: str
    ts: int
    member_id: str
    instance_id: str | None
    error: str
    error_message: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicAssignment] | None


def consumer_heartbeat_response(
    request: Mapping,
    ts: int,
    error: str = "NONE",
    message: str | None = None,
    member_id: str | None = None,
    member_epoch: int = 0,
    heartbeat_interval_ms: int = 0,
    assignment: list[TopicAssignment] | None = None,
) -> ConsumerHeartbeatResponse:
    return {
        "type": CONSUMER_HEARTBEAT_RESPONSE,
        "group_id": request["group_id"],
        "ts": ts,
        "member_id": member_id if member_id is not None else request["member_id"],
        "instance_id": request.get("instance_id"),
        "error": error,
        "error_message": message,
        "member_epoch": member_epoch,
        "heartbeat_interval_ms": heartbeat_interval_ms,
        "assignment": assignment,
    }


# ==================================================================================== what happened: classic groups
StateChange = TypedDict(
    "StateChange", {"type": str, "group_id": str, "ts": int, "from": str, "to": str, "generation": int, "reason": str}
)


def state_change(group_id: str, ts: int, previous: str, state: str, generation: int, reason: str) -> StateChange:
    return {
        "type": STATE_CHANGE,
        "group_id": group_id,
        "ts": ts,
        "from": previous,
        "to": state,
        "generation": generation,
        "reason": reason,
    }


class MemberJoined(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocols: list[str]


def member_joined(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    client_id: str,
    client_host: str,
    protocols: list[str],
) -> MemberJoined:
    return {
        "type": MEMBER_JOINED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "client_id": client_id,
        "client_host": client_host,
        "protocols": protocols,
    }


class MemberUpdated(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    client_id: str
    client_host: str
    protocols: list[str]


def member_updated(
    group_id: str, ts: int, member_id: str, client_id: str, client_host: str, protocols: list[str]
) -> MemberUpdated:
    return {
        "type": MEMBER_UPDATED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "client_id": client_id,
        "client_host": client_host,
        "protocols": protocols,
    }


class MemberReplaced(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    previous_member_id: str
    group_instance_id: str | None


def member_replaced(
    group_id: str, ts: int, member_id: str, previous_member_id: str, instance_id: str | None
) -> MemberReplaced:
    return {
        "type": MEMBER_REPLACED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "previous_member_id": previous_member_id,
        "group_instance_id": instance_id,
    }


class MemberGone(TypedDict):
    """``member_left`` (reason ``leave``) or ``member_expired`` (session timeout, rebalance timeout, sync timeout,
    new member join timeout, ``unknown``: gone before a restore)."""

    type: str
    group_id: str
    ts: int
    member_id: str
    group_instance_id: str | None
    client_id: str
    reason: str
    last_heartbeat_ts: int
    generation: int


def member_gone(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    client_id: str,
    reason: str,
    last_heartbeat_ts: int,
    generation: int,
) -> MemberGone:
    return {
        "type": MEMBER_LEFT if reason == "leave" else MEMBER_EXPIRED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "client_id": client_id,
        "reason": reason,
        "last_heartbeat_ts": last_heartbeat_ts,
        "generation": generation,
    }


class Assignment(TypedDict, total=False):
    """A member's partitions for the generation, and what changed since its previous ones; ``observed``: what an
    instrumented client reported it received, where that differs from the model's."""

    type: str
    group_id: str
    ts: int
    member_id: str
    group_instance_id: str | None
    generation: int
    protocol: str | None
    partitions: list[Pair]
    added: list[Pair]
    revoked: list[Pair]
    observed: bool


def assignment(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    generation: int,
    protocol: str | None,
    partitions: list[Pair],
    added: list[Pair],
    revoked: list[Pair],
    observed: bool = False,
) -> Assignment:
    out: Assignment = {
        "type": ASSIGNMENT,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "generation": generation,
        "protocol": protocol,
        "partitions": partitions,
        "added": added,
        "revoked": revoked,
    }
    if observed:
        out["observed"] = True
    return out


# ==================================================================================== what happened: consumer groups
ConsumerStateChange = TypedDict(
    "ConsumerStateChange",
    {
        "type": str,
        "group_id": str,
        "ts": int,
        "from": str,
        "to": str,
        "group_epoch": int,
        "assignment_epoch": int,
        "reason": str,
    },
    total=False,
)


def consumer_state_change(
    group_id: str, ts: int, previous: str, state: str, group_epoch: int, assignment_epoch: int, reason: str | None
) -> ConsumerStateChange:
    out: ConsumerStateChange = {
        "type": STATE_CHANGE,
        "group_id": group_id,
        "ts": ts,
        "from": previous,
        "to": state,
        "group_epoch": group_epoch,
        "assignment_epoch": assignment_epoch,
    }
    if reason is not None:
        out["reason"] = reason
    return out


class ConsumerMemberJoined(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None


def consumer_member_joined(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    client_id: str,
    client_host: str,
    subscribed_topic_names: list[str],
    subscribed_topic_regex: str | None,
) -> ConsumerMemberJoined:
    return {
        "type": MEMBER_JOINED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "instance_id": instance_id,
        "client_id": client_id,
        "client_host": client_host,
        "subscribed_topic_names": subscribed_topic_names,
        "subscribed_topic_regex": subscribed_topic_regex,
    }


class ConsumerMemberReplaced(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    previous_member_id: str
    instance_id: str


def consumer_member_replaced(
    group_id: str, ts: int, member_id: str, previous_member_id: str, instance_id: str
) -> ConsumerMemberReplaced:
    return {
        "type": MEMBER_REPLACED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "previous_member_id": previous_member_id,
        "instance_id": instance_id,
    }


class ConsumerMemberLeft(TypedDict):
    """``temporary``: a static member's leave (epoch -2): it keeps its assignment until it is back or its session
    ends."""

    type: str
    group_id: str
    ts: int
    member_id: str
    instance_id: str | None
    reason: str
    temporary: bool


def consumer_member_left(
    group_id: str, ts: int, member_id: str, instance_id: str | None, reason: str, temporary: bool
) -> ConsumerMemberLeft:
    return {
        "type": MEMBER_LEFT,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "instance_id": instance_id,
        "reason": reason,
        "temporary": temporary,
    }


class ConsumerMemberExpired(TypedDict):
    type: str
    group_id: str
    ts: int
    member_id: str
    instance_id: str | None
    reason: str  # session timeout / rebalance timeout
    detail: str
    last_heartbeat_ts: int | None


def consumer_member_expired(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    reason: str,
    detail: str,
    last_heartbeat_ts: int | None,
) -> ConsumerMemberExpired:
    return {
        "type": MEMBER_EXPIRED,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "instance_id": instance_id,
        "reason": reason,
        "detail": detail,
        "last_heartbeat_ts": last_heartbeat_ts,
    }


class ConsumerAssignment(TypedDict):
    """A member's current assignment (its ConsumerGroupCurrentMemberAssignment record, with topic names)."""

    type: str
    group_id: str
    ts: int
    member_id: str
    instance_id: str | None
    member_epoch: int
    previous_member_epoch: int
    state: str  # MemberState's name
    partitions: list[Pair]
    pending_revocation: list[Pair]
    added: list[Pair]
    revoked: list[Pair]


def consumer_assignment(
    group_id: str,
    ts: int,
    member_id: str,
    instance_id: str | None,
    member_epoch: int,
    previous_member_epoch: int,
    state: str,
    partitions: list[Pair],
    pending_revocation: list[Pair],
    added: list[Pair],
    revoked: list[Pair],
) -> ConsumerAssignment:
    return {
        "type": ASSIGNMENT,
        "group_id": group_id,
        "ts": ts,
        "member_id": member_id,
        "instance_id": instance_id,
        "member_epoch": member_epoch,
        "previous_member_epoch": previous_member_epoch,
        "state": state,
        "partitions": partitions,
        "pending_revocation": pending_revocation,
        "added": added,
        "revoked": revoked,
    }


class TargetAssignment(TypedDict):
    type: str
    group_id: str
    ts: int
    assignment_epoch: int
    assignor: str | None
    assignment: dict[str, list[Pair]]  # member id -> its target partitions


def target_assignment(
    group_id: str, ts: int, assignment_epoch: int, assignor: str | None, assignment: dict[str, list[Pair]]
) -> TargetAssignment:
    return {
        "type": TARGET_ASSIGNMENT,
        "group_id": group_id,
        "ts": ts,
        "assignment_epoch": assignment_epoch,
        "assignor": assignor,
        "assignment": assignment,
    }


# ==================================================================================== rebalance history
class RebalanceFigures(TypedDict):
    """What a rebalance cost (``figures.rebalance_fields``; docs/figures.md defines each): None where unknown."""

    started_ts: int | None
    completed_ts: int
    duration_ms: int | None
    partitions_moved: int | None
    max_partition_unavailable_ms: int | None
    partitions_without_owner: list[list]  # [topic, partition, released_ts, taken_ts, no_members_ms]
    awaiting_owner: list[list]  # [topic, partition, released_ts]


class RebalanceMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str


class Rebalance(TypedDict, total=False):
    """One line of a classic group's rebalance history: the generation it completed, what started it, what it cost
    (the figures' fields), and what moved. ``assignor_missing``: the tracker has no assignor of the chosen protocol
    (a client-side custom one), so it assigned nothing. ``late``: a generation the model heard of only after a later
    one (observe mode); its figures are unknown and left out."""

    type: str
    group_id: str
    ts: int
    generation: int
    protocol_type: str | None
    protocol: str | None
    rebalance_protocol: str  # eager / cooperative
    leader: str | None
    members: list[RebalanceMember]
    assignment: dict[str, list[Pair]]
    trigger: str
    trigger_detail: str
    join_completed_ts: int | None
    started_ts: int | None
    completed_ts: int
    duration_ms: int | None
    partitions_moved: int | None
    max_partition_unavailable_ms: int | None
    partitions_without_owner: list[list]
    awaiting_owner: list[list]
    unknown_topics: list[str]
    assignor_missing: bool
    late: bool


def rebalance_member(member_id: str, instance_id: str | None, client_id: str, client_host: str) -> RebalanceMember:
    return {
        "member_id": member_id,
        "group_instance_id": instance_id,
        "client_id": client_id,
        "client_host": client_host,
    }


def rebalance(
    group_id: str,
    ts: int,
    generation: int,
    protocol_type: str | None,
    protocol: str | None,
    rebalance_protocol: str,
    leader: str | None,
    members: list[RebalanceMember],
    assignment: dict[str, list[Pair]],
    trigger: str,
    trigger_detail: str,
    join_completed_ts: int | None,
    figures: RebalanceFigures,
    unknown_topics: list[str],
    assignor_missing: bool = False,
) -> Rebalance:
    out: Rebalance = {
        "type": REBALANCE,
        "group_id": group_id,
        "ts": ts,
        "generation": generation,
        "protocol_type": protocol_type,
        "protocol": protocol,
        "rebalance_protocol": rebalance_protocol,
        "leader": leader,
        "members": members,
        "assignment": assignment,
        "trigger": trigger,
        "trigger_detail": trigger_detail,
        "join_completed_ts": join_completed_ts,
        **figures,
        "unknown_topics": unknown_topics,
    }
    if assignor_missing:
        out["assignor_missing"] = True
    return out


def late_rebalance(
    group_id: str,
    ts: int,
    generation: int,
    protocol_type: str | None,
    protocol: str | None,
    rebalance_protocol: str,
    leader: str,
    members: list[RebalanceMember],
    assignment: dict[str, list[Pair]],
) -> Rebalance:
    """A generation reported after a later one (observe mode): it was real, so it gets its line, marked late; when
    it started and what it cost are unknown (None; the partition lists are empty: none is known)."""
    unknown: RebalanceFigures = {
        "started_ts": None,
        "completed_ts": ts,
        "duration_ms": None,
        "partitions_moved": None,
        "max_partition_unavailable_ms": None,
        "partitions_without_owner": [],
        "awaiting_owner": [],
    }
    trigger, detail = "unknown", "reported after a later generation"
    out = rebalance(group_id, ts, generation, protocol_type, protocol, rebalance_protocol, leader, members, assignment,
                    trigger, detail, ts, unknown, [])  # fmt: skip
    out["late"] = True
    return out


class ConsumerRebalanceMember(TypedDict):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str


class ConsumerRebalance(TypedDict):
    """One line of a consumer-protocol group's rebalance history: from the first epoch bump after it was settled
    until it is settled again (Stable or Empty)."""

    type: str
    group_id: str
    ts: int
    rebalance_protocol: str  # "consumer"
    group_epoch: int
    assignment_epoch: int
    assignor: str | None
    trigger: str
    trigger_detail: str
    started_ts: int | None
    completed_ts: int
    duration_ms: int | None
    partitions_moved: int | None
    max_partition_unavailable_ms: int | None
    partitions_without_owner: list[list]
    awaiting_owner: list[list]
    members: list[ConsumerRebalanceMember]
    assignment: dict[str, list[Pair]]


def consumer_rebalance_member(
    member_id: str, instance_id: str | None, client_id: str, client_host: str
) -> ConsumerRebalanceMember:
    return {"member_id": member_id, "instance_id": instance_id, "client_id": client_id, "client_host": client_host}


def consumer_rebalance(
    group_id: str,
    ts: int,
    group_epoch: int,
    assignment_epoch: int,
    assignor: str | None,
    trigger: str,
    trigger_detail: str,
    figures: RebalanceFigures,
    members: list[ConsumerRebalanceMember],
    assignment: dict[str, list[Pair]],
) -> ConsumerRebalance:
    return {
        "type": REBALANCE,
        "group_id": group_id,
        "ts": ts,
        "rebalance_protocol": "consumer",
        "group_epoch": group_epoch,
        "assignment_epoch": assignment_epoch,
        "assignor": assignor,
        "trigger": trigger,
        "trigger_detail": trigger_detail,
        **figures,
        "members": members,
        "assignment": assignment,
    }


# ==================================================================================== after a lost checkpoint
class GroupRestored(TypedDict):
    """A classic group rebuilt from the store: its stored generation; ``topics`` are the partitions the stored
    assignment names until the feed says more (the classic coordinator keeps no topic sizes)."""

    type: str
    group_id: str
    ts: int
    generation: int
    state: str
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: list[str]
    committed_partitions: int
    topics: dict[str, int]


def group_restored(
    group_id: str,
    ts: int,
    generation: int,
    state: str,
    protocol_type: str | None,
    protocol: str | None,
    leader: str | None,
    members: list[str],
    committed_partitions: int,
    topics: dict[str, int],
) -> GroupRestored:
    return {
        "type": GROUP_RESTORED,
        "group_id": group_id,
        "ts": ts,
        "generation": generation,
        "state": state,
        "protocol_type": protocol_type,
        "protocol": protocol,
        "leader": leader,
        "members": members,
        "committed_partitions": committed_partitions,
        "topics": topics,
    }


class ConsumerGroupRestored(TypedDict):
    type: str
    group_id: str
    ts: int
    group_epoch: int
    assignment_epoch: int
    state: str
    members: list[str]
    committed_partitions: int
    topics: dict[str, int]


def consumer_group_restored(
    group_id: str,
    ts: int,
    group_epoch: int,
    assignment_epoch: int,
    state: str,
    members: list[str],
    committed_partitions: int,
    topics: dict[str, int],
) -> ConsumerGroupRestored:
    return {
        "type": GROUP_RESTORED,
        "group_id": group_id,
        "ts": ts,
        "group_epoch": group_epoch,
        "assignment_epoch": assignment_epoch,
        "state": state,
        "members": members,
        "committed_partitions": committed_partitions,
        "topics": topics,
    }


class RestoreGap(TypedDict, total=False):
    """The first sign of what the store did not hold (restored.py): ``restored_generation`` (classic) or
    ``restored_group_epoch`` (consumer protocol) is what the store held; ``follows``: the model follows the feed
    into a round it cannot know the start of."""

    type: str
    group_id: str
    ts: int
    restored_generation: int
    restored_group_epoch: int
    loaded_ts: int
    request: str | None
    member_id: str | None
    reason: str
    follows: bool


def restore_gap(
    group_id: str,
    ts: int,
    restored: Restored,
    request: Mapping,
    reason: str,
    follows: bool,
    epoch_field: str = "generation",
) -> RestoreGap:
    return {
        "type": RESTORE_GAP,
        "group_id": group_id,
        "ts": ts,  # type: ignore[misc]
        f"restored_{epoch_field}": restored.generation,
        "loaded_ts": restored.loaded_ts,
        "request": request.get("type"),
        "member_id": request.get("member_id"),
        "reason": reason,
        "follows": follows,
    }


# ==================================================================================== routing between the models
ProtocolSwitch = TypedDict(
    "ProtocolSwitch", {"type": str, "group_id": str, "ts": int, "from": str, "to": str, "reason": str}
)


def protocol_switch(group_id: str, ts: int, previous: str, protocol: str, reason: str) -> ProtocolSwitch:
    return {"type": PROTOCOL_SWITCH, "group_id": group_id, "ts": ts, "from": previous, "to": protocol, "reason": reason}


class IgnoredEvent(TypedDict):
    type: str
    group_id: str
    ts: int
    event_type: str
    reason: str


def ignored_event(group_id: str, ts: int, event_type: str, reason: str) -> IgnoredEvent:
    return {"type": IGNORED_EVENT, "group_id": group_id, "ts": ts, "event_type": event_type, "reason": reason}


class DeadLetter(TypedDict, total=False):
    """``exception``: the group's step raised (a bug), and this is one of its events of the batch."""

    type: str
    group_id: str | None
    ts: int
    reason: str
    raw_base64: str
    source: dict | None  # {topic, partition, offset} of the record
    exception: dict  # {type, message}


# ==================================================================================== records: the classic group's
class OffsetCommitRecord(TypedDict, total=False):
    """OffsetCommitKey/Value (both protocols' groups); a tombstone carries only its key, and why it was written."""

    type: str
    group_id: str
    ts: int
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1: the group's retention rule applies
    tombstone: bool
    reason: str  # tombstones: retention / group deleted


def offset_commit(
    group_id: str,
    ts: int,
    topic: str,
    partition: int,
    offset: int,
    leader_epoch: int,
    metadata: str,
    commit_timestamp: int,
    expire_timestamp: int,
) -> OffsetCommitRecord:
    return {
        "type": OFFSET_COMMIT,
        "group_id": group_id,
        "ts": ts,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "leader_epoch": leader_epoch,
        "metadata": metadata,
        "commit_timestamp": commit_timestamp,
        "expire_timestamp": expire_timestamp,
        "tombstone": False,
    }


def offset_tombstone(group_id: str, ts: int, topic: str, partition: int, reason: str) -> OffsetCommitRecord:
    return {
        "type": OFFSET_COMMIT,
        "group_id": group_id,
        "ts": ts,
        "topic": topic,
        "partition": partition,
        "tombstone": True,
        "reason": reason,
    }


class Subscription(TypedDict):
    topics: list[str]
    user_data: str | None  # base64
    owned_partitions: list[Pair]
    generation: int
    rack: str | None


class GroupMetadataMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: Subscription
    assignment: dict  # {"partitions": [[topic, partition], ...], "user_data": None}


def group_metadata_member(
    member_id: str,
    instance_id: str | None,
    client_id: str,
    client_host: str,
    rebalance_timeout: int,
    session_timeout: int,
    topics: list[str],
    user_data: str | None,
    owned_partitions: list[Pair],
    generation: int,
    rack: str | None,
    partitions: list[Pair],
) -> GroupMetadataMember:
    return {
        "member_id": member_id,
        "group_instance_id": instance_id,
        "client_id": client_id,
        "client_host": client_host,
        "rebalance_timeout": rebalance_timeout,
        "session_timeout": session_timeout,
        "subscription": {
            "topics": topics,
            "user_data": user_data,
            "owned_partitions": owned_partitions,
            "generation": generation,
            "rack": rack,
        },
        "assignment": {"partitions": partitions, "user_data": None},
    }


class GroupMetadataRecord(TypedDict, total=False):
    """GroupMetadataKey/Value: a classic group's generation, written when it changes; a tombstone when the group
    goes."""

    type: str
    group_id: str
    ts: int
    tombstone: bool
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[GroupMetadataMember]


def group_metadata(
    group_id: str,
    ts: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int,
    members: list[GroupMetadataMember],
) -> GroupMetadataRecord:
    return {
        "type": GROUP_METADATA,
        "group_id": group_id,
        "ts": ts,
        "tombstone": False,
        "protocol_type": protocol_type,
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "current_state_timestamp": current_state_timestamp,
        "members": members,
    }


def group_metadata_tombstone(group_id: str, ts: int) -> GroupMetadataRecord:
    return {"type": GROUP_METADATA, "group_id": group_id, "ts": ts, "tombstone": True}


# ==================================================================================== records: KIP-848 consumer groups
# Built by consumer/records.py. Every one has ``type``, ``group_id``, its other key fields, then (unless a
# tombstone) the value's fields under Kafka's JSON names, then ``tombstone``; the model adds ``ts`` last when it
# writes one out. A tombstone has the key fields only.
class ConsumerGroupRecord(TypedDict, total=False):
    type: str
    group_id: str
    member_id: str  # member metadata, target assignment member, current member assignment
    regular_expression: str  # regular expression records
    tombstone: bool
    ts: int
    # consumer_group_metadata
    epoch: int
    # consumer_group_partition_metadata: [{topicId, topicName, numPartitions, partitionMetadata}]
    topics: list
    # consumer_group_member_metadata
    instanceId: str | None
    rackId: str | None
    clientId: str
    clientHost: str
    subscribedTopicNames: list[str]
    subscribedTopicRegex: str | None
    rebalanceTimeoutMs: int
    serverAssignor: str | None
    classicMemberMetadata: dict | None
    # consumer_group_target_assignment_metadata
    assignmentEpoch: int
    # consumer_group_target_assignment_member: [{topicId, partitions}]
    topicPartitions: list[dict]
    # consumer_group_current_member_assignment
    memberEpoch: int
    previousMemberEpoch: int
    state: int  # MemberState's byte
    assignedPartitions: list[dict]
    partitionsPendingRevocation: list[dict]
    # consumer_group_regular_expression (topics: the resolved topic names)
    version: int
    timestamp: int


# ==================================================================================== answers to the models' queries
class OffsetFetchEntry(TypedDict):
    """OffsetFetch's answer for one partition (``fetch_offsets``: partition -> entry)."""

    offset: int
    leader_epoch: int
    metadata: str


class DescribedMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[Pair]


class GroupDescription(TypedDict, total=False):
    """DescribeGroups (``GroupCoordinator.describe_group``); an unknown group is Dead, with no members."""

    group_id: str
    state: str
    generation: int
    protocol_type: str
    protocol: str
    leader: str | None
    members: list[DescribedMember]


class DescribedConsumerMember(TypedDict):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    state: str  # MemberState's name
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    assignment: list[Pair]
    pending_revocation: list[Pair]
    target_assignment: list[Pair]


class ConsumerGroupDescription(TypedDict, total=False):
    """ConsumerGroupDescribe (``ConsumerGroupCoordinator.describe_group``); an unknown group is Dead."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[DescribedConsumerMember]


# ==================================================================================== every output
Output = Union[
    Answer,
    JoinResponse,
    JoinAnswer,
    SyncResponse,
    CommitResponse,
    DeleteGroupResponse,
    ConsumerHeartbeatResponse,
    StateChange,
    ConsumerStateChange,
    MemberJoined,
    ConsumerMemberJoined,
    MemberUpdated,
    MemberReplaced,
    ConsumerMemberReplaced,
    MemberGone,
    ConsumerMemberLeft,
    ConsumerMemberExpired,
    Assignment,
    ConsumerAssignment,
    TargetAssignment,
    Rebalance,
    ConsumerRebalance,
    GroupRestored,
    ConsumerGroupRestored,
    RestoreGap,
    ProtocolSwitch,
    IgnoredEvent,
    DeadLetter,
    OffsetCommitRecord,
    GroupMetadataRecord,
    ConsumerGroupRecord,
]
Outputs = list[Output]


class LogEnd(TypedDict):
    """A ``log_end`` event passed on as it came (validated; ``ts`` as the job trusts it), so that the views and
    replays measure lag (streaming/coordinator/lag.py) from the same samples as the job."""

    type: str
    group_id: str
    ts: int
    topic: str
    partition: int
    offset: int


def log_end(event: Mapping) -> LogEnd:
    """A validated ``log_end`` event as its output (both models and a group without a model pass it on)."""
    return {
        "type": LOG_END,
        "group_id": event["group_id"],
        "ts": event.get("ts") or 0,
        "topic": event["topic"],
        "partition": event["partition"],
        "offset": event["offset"],
    }


def client_report(event: Mapping) -> dict:
    """A validated ``client_report`` event as its output (both models and a group without a model pass it on): the
    fields it carried, nulls left out."""
    return {
        "type": CLIENT_REPORT,
        "ts": event.get("ts") or 0,
        **{k: v for k, v in event.items() if k not in ("type", "ts") and v is not None},
    }
