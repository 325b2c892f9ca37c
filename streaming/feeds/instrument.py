"""Live instrumentation: make real kafka-python consumers publish their group protocol to the tracker's feed.

``instrument(consumer, producer, feed_topic)`` (or ``GroupEventMirror(producer, feed_topic).attach(consumer)``) hooks
the consumer's request path to its group coordinator and publishes feed events (contracts.md "Event feed schema"),
keyed by group id (UTF-8) so the producer's default partitioner keeps each group's events in one partition, in order.
Each event reports what the broker really did, taken from the request and, where it matters, the broker's answer:

* ``join``: published when the JoinGroup request is sent, with the member's broker-given id. A new member's first
  request carries no id (KIP-394: the broker answers MEMBER_ID_REQUIRED and the client asks again with the id); that
  request is not published, unless the broker accepted it directly (static members, brokers before 2.2), in which
  case the join is published on the answer with the id, ``generation`` and ``leader`` it gave. So there is one join
  per member per round, never an "" id.
* ``sync``: published on a successful SyncGroup answer, with the generation; the leader's event carries the group's
  ``assignments`` (they travel in its request). Extra field ``assigned`` = [[topic, p], ...]: the partitions the broker
  delivered to this member (decoded from the answer) - the tracker takes it as the client's word.
* ``commit``: published on the OffsetCommit answer (``commit`` and ``commit_async`` alike, auto-commit too), with only
  the partitions the broker accepted; nothing when it accepted none.
* ``heartbeat``: at most one per member every ``heartbeat_every_ms`` (0 = every heartbeat).
* ``leave``: published on the LeaveGroup answer, for the members the broker removed (none when it no longer knew
  them: a consumer back from a long pause leaves a group that already dropped it).

Run the tracker with ``tracker.adopt.unknown.members=true``: member ids and generations come from the broker.
This relies on kafka-python 3 internals (``consumer._coordinator._manager.send``); it never changes what is sent.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any, Callable

from offsets_store.codec import CodecError, decode_assignment, decode_subscription

log = logging.getLogger(__name__)

NO_ERROR = 0


def _host() -> str:
    try:
        return "/" + socket.gethostbyname(socket.gethostname())
    except OSError:
        return "/127.0.0.1"


def _field(obj: Any, name: str, default: Any = None) -> Any:
    return getattr(obj, name, default)


def _as_bytes(data: Any) -> bytes:
    """Protocol metadata as its version-prefixed wire bytes (kafka-python may hand us its ApiData objects)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return bytes(data.encode())


def _subscription(metadata: Any) -> dict:
    try:
        sub = decode_subscription(_as_bytes(metadata))
    except CodecError:  # not the consumer protocol: the tracker still sees the join, without topics
        return {"topics": [], "owned_partitions": None, "generation": -1, "user_data": None, "rack": None}
    sub.pop("version", None)
    return sub


def _partitions(data: Any) -> list[list]:
    if data is None or not _as_bytes(data):
        return []  # an empty assignment may come as zero bytes
    try:
        return sorted([t, int(p)] for t, p in decode_assignment(_as_bytes(data))["partitions"])
    except CodecError:
        return []


# ------------------------------------------------------------------ requests (and answers) -> feed events
def join_event(request: Any, member_id: str, client_id: str, host: str, now_ms: int) -> dict:
    protocols = []
    for p in _field(request, "protocols", []) or []:
        name, metadata = (p.name, p.metadata) if hasattr(p, "name") else p
        protocols.append({"name": name, **_subscription(metadata)})
    event = {
        "type": "join",
        "group_id": request.group_id,
        "ts": now_ms,
        "member_id": member_id,
        "group_instance_id": _field(request, "group_instance_id"),
        "client_id": client_id,
        "client_host": host,
        "session_timeout_ms": request.session_timeout_ms,
        "rebalance_timeout_ms": _field(request, "rebalance_timeout_ms", request.session_timeout_ms),
        "protocol_type": request.protocol_type,
        "protocols": protocols,
    }
    if _field(request, "reason"):
        event["reason"] = request.reason
    return event


def sync_event(request: Any, response: Any, now_ms: int) -> dict:
    event = {
        "type": "sync",
        "group_id": request.group_id,
        "ts": now_ms,
        "member_id": request.member_id,
        "group_instance_id": _field(request, "group_instance_id"),
        "generation": request.generation_id,
        "protocol_type": _field(request, "protocol_type") or _field(response, "protocol_type"),
        "protocol_name": _field(request, "protocol_name") or _field(response, "protocol_name"),
    }
    assignments = {}
    for a in _field(request, "assignments", []) or []:
        member, data = (a.member_id, a.assignment) if hasattr(a, "member_id") else a
        assignments[member] = _partitions(data)
    if assignments:
        event["assignments"] = assignments
    event["assigned"] = _partitions(_field(response, "assignment"))
    return event


def heartbeat_event(request: Any, now_ms: int) -> dict:
    return {
        "type": "heartbeat",
        "group_id": request.group_id,
        "ts": now_ms,
        "member_id": request.member_id,
        "group_instance_id": _field(request, "group_instance_id"),
        "generation": request.generation_id,
    }


def leave_events(request: Any, response: Any, now_ms: int) -> list[dict]:
    """The members the answer says left (LeaveGroup v3+ answers per member; v0-2 for its one member, top level)."""
    if _field(response, "error_code", NO_ERROR) != NO_ERROR:
        return []
    members = _field(request, "members") or []
    identities = [(m.member_id, _field(m, "group_instance_id"), _field(m, "reason")) for m in members] or [
        (_field(request, "member_id"), None, None)
    ]
    refused = {
        (m.member_id, _field(m, "group_instance_id"))
        for m in _field(response, "members", None) or []
        if m.error_code != NO_ERROR
    }
    return [
        {
            "type": "leave",
            "group_id": request.group_id,
            "ts": now_ms,
            "member_id": member_id or "",
            "group_instance_id": instance_id,
            "reason": reason or "",
        }
        for member_id, instance_id, reason in identities
        if (member_id, instance_id) not in refused
    ]


def commit_event(request: Any, response: Any, now_ms: int) -> dict | None:
    accepted = {
        (t.name, p.partition_index)
        for t in _field(response, "topics", []) or []
        for p in t.partitions
        if p.error_code == NO_ERROR
    }
    offsets = []
    for t in request.topics:
        for p in t.partitions:
            if (t.name, p.partition_index) not in accepted:
                continue
            epoch = _field(p, "committed_leader_epoch", -1)
            offsets.append(
                {
                    "topic": t.name,
                    "partition": p.partition_index,
                    "offset": p.committed_offset,
                    "leader_epoch": -1 if epoch is None else epoch,
                    "metadata": _field(p, "committed_metadata", "") or "",
                }
            )
    if not offsets:
        return None
    generation = _field(request, "generation_id_or_member_epoch", _field(request, "generation_id", -1))
    retention = _field(request, "retention_time_ms", -1)
    return {
        "type": "commit",
        "group_id": request.group_id,
        "ts": now_ms,
        "member_id": request.member_id or "",
        "group_instance_id": _field(request, "group_instance_id"),
        "generation": -1 if generation is None else generation,
        "offsets": offsets,
        "retention_ms": -1 if retention is None else retention,
    }


# ------------------------------------------------------------------ the hook
class GroupEventMirror:
    """Publishes the group events of every consumer attached to it to ``feed_topic`` through ``producer``."""

    def __init__(
        self, producer: Any, feed_topic: str, heartbeat_every_ms: int = 1_000, clock: Callable[[], float] = time.time
    ) -> None:
        self.producer, self.feed_topic = producer, feed_topic
        self.heartbeat_every_ms, self.clock = heartbeat_every_ms, clock
        self._lock = threading.Lock()
        self._last_heartbeat: dict[tuple[str, str], int] = {}
        self.published = 0

    def attach(self, consumer: Any) -> "GroupEventMirror":
        """Mirror this consumer's group requests from now on (call before it first polls)."""
        manager = consumer._coordinator._manager
        original = manager.send
        client_id, host = consumer.config.get("client_id", "kafka-python"), _host()

        def send(request, *args, **kwargs):  # the client's own send: returns a Future its callers await
            self._safely(self._before, request, client_id, host)
            future = original(request, *args, **kwargs)
            # Registered before the caller awaits it, so the event is out before the consumer acts on the answer.
            future.add_callback(lambda response: self._safely(self._after, request, response, client_id, host))
            return future

        manager.send = send
        return self

    def publish(self, event: dict) -> None:
        with self._lock:
            self.producer.send(
                self.feed_topic,
                key=event["group_id"].encode("utf-8"),
                value=json.dumps(event, separators=(",", ":")).encode("utf-8"),
            )
            self.published += 1

    def flush(self, timeout: float | None = None) -> None:
        self.producer.flush(timeout)

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def _safely(self, step: Callable[..., None], *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:  # instrumentation must never break the consumer it watches
            log.warning("could not mirror %s: %s", type(args[0]).__name__, exc)

    def _before(self, request: Any, client_id: str, host: str) -> None:
        kind, now = type(request).__name__, self._now()
        if kind == "JoinGroupRequest" and request.member_id:
            self.publish(join_event(request, request.member_id, client_id, host, now))
        elif kind == "HeartbeatRequest" and self._heartbeat_due(request, now):
            self.publish(heartbeat_event(request, now))

    def _after(self, request: Any, response: Any, client_id: str, host: str) -> None:
        kind, now = type(request).__name__, self._now()
        error = _field(response, "error_code", NO_ERROR)
        if kind == "JoinGroupRequest" and not request.member_id and error == NO_ERROR:
            # Accepted at once (old brokers, static members): the answer says which generation it joined.
            event = join_event(request, response.member_id, client_id, host, now)
            event.update(generation=response.generation_id, leader=response.leader)
            self.publish(event)
        elif kind == "SyncGroupRequest" and error == NO_ERROR:
            self.publish(sync_event(request, response, now))
        elif kind == "OffsetCommitRequest":
            event = commit_event(request, response, now)
            if event is not None:
                self.publish(event)
        elif kind == "LeaveGroupRequest":
            for event in leave_events(request, response, now):
                self.publish(event)

    def _heartbeat_due(self, request: Any, now: int) -> bool:
        key = (request.group_id, request.member_id)
        with self._lock:
            last = self._last_heartbeat.get(key)
            if last is not None and now - last < self.heartbeat_every_ms:
                return False
            self._last_heartbeat[key] = now
            return True


def instrument(consumer: Any, producer: Any, feed_topic: str, heartbeat_every_ms: int = 1_000) -> GroupEventMirror:
    """Shorthand: one consumer, its own mirror."""
    return GroupEventMirror(producer, feed_topic, heartbeat_every_ms).attach(consumer)
