"""Live instrumentation: make real kafka-python consumers publish their group protocol to the tracker's feed.

``GroupEventMirror(producer, feed_topic).attach(consumer)`` wraps the consumer's request path so that every JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and OffsetCommit request it sends to the group coordinator is also published as a
feed event (key = group id), with the embedded consumer protocol decoded by our codec: the tracker sees the same
requests the broker sees, including the leader's real assignment. Run the tracker with
``tracker.adopt.unknown.members=true`` so it takes member ids from the broker rather than issuing its own.
"""
from __future__ import annotations

import json
import logging
import socket
import threading
import time

from offsets_store.codec import CodecError, decode_assignment, decode_subscription

log = logging.getLogger(__name__)


def _host() -> str:
    try:
        return "/" + socket.gethostbyname(socket.gethostname())
    except OSError:
        return "/127.0.0.1"


def _field(obj, name, default=None):
    return getattr(obj, name, default)


def _as_bytes(data) -> bytes:
    """Protocol metadata as its version-prefixed wire bytes (kafka-python may hand us its ApiData objects)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    return bytes(data.encode())


def _subscription(metadata) -> dict:
    try:
        sub = decode_subscription(_as_bytes(metadata))
    except CodecError:   # not the consumer protocol: the tracker still sees the join, without topics
        return {"topics": [], "owned_partitions": None, "generation": -1, "user_data": None, "rack": None}
    sub.pop("version", None)
    return sub


def _assignment(data) -> list:
    try:
        return decode_assignment(_as_bytes(data))["partitions"]
    except CodecError:
        return []


class GroupEventMirror:
    def __init__(self, producer, feed_topic: str) -> None:
        self.producer, self.feed_topic = producer, feed_topic
        self._lock = threading.Lock()
        self.published = 0

    def attach(self, consumer) -> "GroupEventMirror":
        """Mirror this consumer's group requests from now on (call before it first polls)."""
        coordinator = consumer._coordinator
        manager = coordinator._manager
        original = manager.send
        client_id, host = consumer.config.get("client_id", "kafka-python"), _host()

        def send(request, *args, **kwargs):   # the client's own send: returns a Future, awaited by its callers
            try:
                for event in self.events_for(request, client_id, host):
                    self.publish(event)
            except Exception as exc:  # instrumentation must never break the consumer it watches
                log.warning("could not mirror %s: %s", type(request).__name__, exc)
            return original(request, *args, **kwargs)

        manager.send = send
        return self

    def publish(self, event: dict) -> None:
        with self._lock:
            self.producer.send(self.feed_topic, key=event["group_id"].encode("utf-8"),
                               value=json.dumps(event, separators=(",", ":")).encode("utf-8"))
            self.published += 1

    def flush(self) -> None:
        self.producer.flush()

    @staticmethod
    def events_for(request, client_id: str, host: str) -> list[dict]:
        kind = type(request).__name__
        now = int(time.time() * 1000)
        group = _field(request, "group_id")
        if kind == "JoinGroupRequest":
            protocols = []
            for p in _field(request, "protocols", []) or []:
                name, metadata = (p.name, p.metadata) if hasattr(p, "name") else p
                protocols.append({"name": name, **_subscription(metadata)})
            return [{"type": "join", "group_id": group, "ts": now, "member_id": request.member_id or "",
                     "group_instance_id": _field(request, "group_instance_id"), "client_id": client_id,
                     "client_host": host, "session_timeout_ms": request.session_timeout_ms,
                     "rebalance_timeout_ms": _field(request, "rebalance_timeout_ms", request.session_timeout_ms),
                     "protocol_type": request.protocol_type, "protocols": protocols,
                     "reason": _field(request, "reason")}]
        if kind == "SyncGroupRequest":
            event = {"type": "sync", "group_id": group, "ts": now, "member_id": request.member_id,
                     "group_instance_id": _field(request, "group_instance_id"),
                     "generation": request.generation_id, "protocol_type": _field(request, "protocol_type"),
                     "protocol_name": _field(request, "protocol_name")}
            assignments = {}
            for a in _field(request, "assignments", []) or []:
                member, data = (a.member_id, a.assignment) if hasattr(a, "member_id") else a
                assignments[member] = _assignment(data)
            if assignments:
                event["assignments"] = assignments
            return [event]
        if kind == "HeartbeatRequest":
            return [{"type": "heartbeat", "group_id": group, "ts": now, "member_id": request.member_id,
                     "group_instance_id": _field(request, "group_instance_id"),
                     "generation": request.generation_id}]
        if kind == "LeaveGroupRequest":
            members = _field(request, "members") or [type("M", (), {"member_id": _field(request, "member_id"),
                                                                    "group_instance_id": None})()]
            return [{"type": "leave", "group_id": group, "ts": now, "member_id": m.member_id or "",
                     "group_instance_id": _field(m, "group_instance_id"), "reason": _field(m, "reason")}
                    for m in members]
        if kind == "OffsetCommitRequest":
            generation = _field(request, "generation_id_or_member_epoch", _field(request, "generation_id", -1))
            offsets = [{"topic": t.name, "partition": p.partition_index, "offset": p.committed_offset,
                        "leader_epoch": _field(p, "committed_leader_epoch", -1) if _field(
                            p, "committed_leader_epoch", -1) is not None else -1,
                        "metadata": _field(p, "committed_metadata", "") or ""}
                       for t in request.topics for p in t.partitions]
            return [{"type": "commit", "group_id": group, "ts": now, "member_id": request.member_id or "",
                     "group_instance_id": _field(request, "group_instance_id"), "generation": generation,
                     "offsets": offsets}]
        return []
