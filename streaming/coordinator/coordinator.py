"""Kafka's classic group coordinator as a pure, deterministic state machine.

Requests come in as feed events (``handle``), time moves only when the caller says so (``advance`` or an event's
``ts``), and everything the broker would answer or write comes out as the outputs ``outputs.py`` declares. Replaying
the same events gives byte-identical outputs; the state serialises to bytes between Spark micro-batches.

An event's way through: ``handle`` fires the timers due before it, then looks its type up in ``HANDLERS`` (one
handler per request, after Kafka's ``GroupMetadataManager.classicGroupJoin`` / ``classicGroupSync`` / ...) -- or,
in observe mode, hands it to the ``BrokerObserver`` (``observe.py``), which applies the broker's reported answers and
leaves the rest to the same handlers. Every handler, and every step it takes, returns the outputs it produced, in
order, as Kafka's handlers return a ``CoordinatorResult`` (response and records). Where the tracker has to act for
a client (computing the leader's assignment, reacting to metadata changes) it says so.
"""

from __future__ import annotations

import base64
import itertools
import json
import uuid
import zlib
from typing import Callable, Iterable

import msgspec

from streaming.coordinator import offsets as O
from streaming.coordinator import outputs
from streaming.coordinator.config import CoordinatorConfig
from streaming.coordinator.figures import Ledger, rebalance_fields
from streaming.coordinator.group import Group, RebalanceInProgress, is_cooperative
from streaming.coordinator.offsets import CommittedOffset
from streaming.coordinator.member import Member, Partition, Protocol
from streaming.coordinator.observe import BrokerObserver, note_cause
from streaming.coordinator.outputs import Output, Outputs
from streaming.coordinator.restored import Restored, window_end
from streaming.coordinator.state import GroupState
from streaming.coordinator.timers import Timers

S = GroupState
# State format: 2 = MessagePack, members as rows (a group's state costs about what its members' fields take; ~4x
# faster to write and read than 1 = zlib-compressed JSON with member dicts, which is still read).
FORMAT_VERSION = 2
_MEMBER_ID_NAMESPACE = uuid.UUID("6f1a7c9e-3d2b-4e8a-9c41-5b0d2e7f8a13")
# Timer kinds, in the order timers due at the same millisecond fire.
_JOIN, _SYNC, _SESSION, _PENDING, _RETENTION = range(5)
# Group management needs a group id: Kafka answers an empty one with INVALID_GROUP_ID before anything else
# (OffsetCommit and DeleteGroups keep accepting it, for backwards compatibility).
_GROUP_ID_REQUIRED = frozenset({"join", "sync", "heartbeat", "leave"})


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig | None = None) -> None:
        self.config = config or CoordinatorConfig()
        self.groups: dict[str, Group] = {}
        self.default_topics: dict[str, int] = {}  # sizes from topic_metadata events that named no group
        self.pending_topics: dict[str, dict[str, int]] = {}  # sizes named for a group that does not exist yet
        self.topic_ids: dict[str, str] = {}  # topic ids events gave (a consumer group's, should this group become one)
        # The id the next new member gets, if free, once (a replay gives its members the ids the recorded broker
        # drew at random, so that assignors ordering members by id break ties alike); never serialised.
        self.member_id_hint: str | None = None
        # Observe mode (tracker.adopt.unknown.members): the broker is the coordinator, its reported answers win.
        self.observer = BrokerObserver(self, self.config) if self.config.adopt_unknown_members else None
        self._timers = Timers(self._timer_deadline)
        self._unannounced: set[str] = set()  # groups rebuilt from the store whose first step is still to come
        self._unseen_start: str | None = None  # the group whose round being opened began unseen (restored.py)

    # ================================================================ public API
    def handle(self, event: dict) -> Outputs:
        """Apply one validated feed event (see ``events.py``).

        Timers due strictly before the event's ``ts`` fire first; at the same millisecond the request wins, as a
        heartbeat that arrives on the deadline still keeps its member."""
        out = self.advance(event["ts"] - 1) if event.get("ts") is not None else self.announcements()
        kind = event["type"]
        if kind == "log_end":  # not a request: passed on, after the timers due before it, for the lag views
            return out + [outputs.log_end(event)]
        if kind == "client_report":  # the client's word, not a request: passed on likewise
            return out + [outputs.client_report(event)]
        if kind in ("session_expired", "regex_resolved"):  # the consumer model's: no classic group has them
            reason = {
                "session_expired": "a consumer-protocol member's session expiry: not a classic group's",
                "regex_resolved": "a consumer group's regex resolution: not a classic group's",
            }[kind]
            return out + [outputs.ignored_event(event["group_id"], event.get("ts") or 0, kind, reason)]
        if kind in _GROUP_ID_REQUIRED and not event["group_id"]:
            out.append(outputs.request_refused(event, event.get("ts") or 0, "INVALID_GROUP_ID"))
            return out
        if kind == "topic_metadata" and not event.get("group_id"):
            self.default_topics[event["topic"]] = event["partitions"]
            for group in list(self.groups.values()):
                self._tick(group, event.get("ts"))
                out += self._topic_metadata(group, event)
            return out
        group = self.groups.get(event["group_id"])
        if group is not None:
            self._tick(group, event.get("ts"))
        if (
            self.observer is not None
            and group is not None
            and kind != "leave"
            and not (kind == "join" and event.get("generation") is not None)
        ):  # an answered join: observe.py
            self._adopt_static_member_id(group, event)
        if group is not None and group.restored is not None:
            out += self._watch_restored(group, event)
        out += self.observer.handle(group, event) if self.observer is not None else self.apply_kafka_rules(group, event)
        self._unseen_start = None
        group = self.groups.get(event.get("group_id"))  # as the event left it: it may have made or ended the group
        if group is not None and kind != "heartbeat":
            self._refresh_retention(group)
        return out

    def apply_kafka_rules(self, group: Group | None, e: dict) -> Outputs:
        """Answer a request as Kafka's handler for its type does."""
        return self.HANDLERS[e["type"]](self, group, e)

    def advance(self, now_ms: int) -> Outputs:
        """Fire every timer due at or before ``now_ms``, in deadline order; outputs carry the deadline as ``ts``."""
        out = self.announcements()
        for deadline, (group_id, kind, key) in self._timers.due(now_ms):
            group = self.groups[group_id]
            self._tick(group, deadline)
            out += self._fire(group, kind, key)
            if group_id in self.groups:
                self._refresh_retention(self.groups[group_id])
        return out

    def next_deadline(self, group_id: str | None = None) -> int | None:
        if group_id is not None:
            return min(self._all_deadlines(self.groups[group_id]), default=None)
        # Every group: the timer heap's first live entry instead of a scan of every member of every group -- the
        # simulator asks before each step.
        return self._timers.next_deadline()

    def group_ids(self) -> list[str]:
        return list(self.groups)

    def is_blank(self) -> bool:
        """Nothing worth keeping: no group and no remembered topic sizes."""
        return not self.groups and not self.default_topics and not self.pending_topics

    def fetch_offsets(self, group_id: str) -> dict[Partition, outputs.OffsetFetchEntry]:
        """OffsetFetch: the committed offsets of a group (empty when the group is unknown)."""
        group = self.groups.get(group_id)
        return {} if group is None else O.fetch(group.offsets)

    def describe_group(self, group_id: str) -> outputs.GroupDescription:
        """DescribeGroups: state, protocol and members with their assignment."""
        group = self.groups.get(group_id)
        if group is None:
            return {"group_id": group_id, "state": S.DEAD.value, "members": []}
        return {
            "group_id": group_id,
            "state": group.state.value,
            "generation": group.generation,
            "protocol_type": group.protocol_type or "",
            "protocol": group.protocol_name or "",
            "leader": group.leader_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [list(tp) for tp in m.assignment],
                }
                for m in group.members_in_kafka_order()
            ],
        }

    # --- serialisation -------------------------------------------------------------------------------------------
    def export_group(self, group_id: str) -> bytes:
        return _pack({"v": FORMAT_VERSION, "groups": [_group_to_dict(self.groups[group_id])]})

    def import_group(self, data: bytes) -> None:
        for d in _unpack(data)["groups"]:
            self._adopt(_group_from_dict(d))

    def to_bytes(self) -> bytes:
        return _pack(
            {
                "v": FORMAT_VERSION,
                "default_topics": self.default_topics,
                "pending_topics": self.pending_topics,
                **({"topic_ids": self.topic_ids} if self.topic_ids else {}),
                "groups": [_group_to_dict(g) for g in self.groups.values()],
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, config: CoordinatorConfig | None = None) -> "GroupCoordinator":
        coordinator = cls(config)
        payload = _unpack(data)
        coordinator.default_topics = dict(payload.get("default_topics", {}))
        coordinator.pending_topics = {g: dict(t) for g, t in payload.get("pending_topics", {}).items()}
        coordinator.topic_ids = dict(payload.get("topic_ids", {}))
        for d in payload["groups"]:
            coordinator._adopt(_group_from_dict(d))
        return coordinator

    def adopt_offsets(self, group_id: str, offsets: dict[Partition, CommittedOffset]) -> None:
        """Offsets the group held under the other protocol's model (Kafka keeps them across a protocol switch)."""
        group = self.groups[group_id]
        for tp, o in offsets.items():
            group.offsets.setdefault(tp, o)
        self._refresh_retention(group)

    def load_records(self, records: Iterable[dict], now_ms: int) -> None:
        """Rebuild groups and offsets from ``__consumer_offsets``-style records (latest value per key wins), as a
        broker does when it becomes coordinator: groups with members come back Stable, their sessions restarted."""
        records = list(records)
        metadata: dict[str, dict | None] = {}
        for r in records:
            if r["type"] == outputs.GROUP_METADATA:
                metadata[r["group_id"]] = None if r.get("tombstone") else r
        offsets = O.latest(records)
        for group_id in list(metadata) + [g for g in offsets if g not in metadata]:
            record = metadata.get(group_id)
            group_offsets = {tp: o for tp, o in offsets.get(group_id, {}).items() if o is not None}
            if record is None and not group_offsets:
                self.groups.pop(group_id, None)
                continue
            group = Group(group_id, state_timestamp=now_ms, clock=now_ms)
            if record is not None:
                _restore_metadata(group, record, now_ms)
            group.offsets.update(group_offsets)
            group.topics.update(self.default_topics)  # what the broker's metadata said wins over the guess
            self._adopt(group)
            self._refresh_retention(group)
            if len(group.members) > self.config.group_max_size:
                # Kafka's onLoaded: group.max.size may have been lowered since; the rebalance trims the group. A
                # load reports nothing, so its outputs are dropped.
                self.prepare_rebalance(
                    group,
                    "load",
                    f"freshly loaded group {group_id} (size "
                    f"{len(group.members)}) is over capacity {self.config.group_max_size}",
                )

    # --- after a lost checkpoint (restored.py) ----------------------------------------------------------------
    def note_restored(self, now_ms: int) -> None:
        """Every group here was just rebuilt from the store (``load_records``) for a job whose checkpoint was lost:
        its first step says so, and its feed is watched for what the store did not hold."""
        for group in self.groups.values():
            timeouts = [(m.session_timeout_ms, m.rebalance_timeout_ms) for m in group.members.values()]
            group.restored = Restored(
                group.generation,
                now_ms,
                window_end(now_ms, timeouts, self.config.new_member_join_timeout_ms),
                set(group.members),
            )
            self._unannounced.add(group.group_id)

    def announcements(self) -> Outputs:
        """``group_restored`` for each group rebuilt from the store not yet announced (``handle`` and ``advance``
        start with them)."""
        if not self._unannounced:
            return []
        out: Outputs = []
        for group_id in sorted(self._unannounced):
            group = self.groups.get(group_id)
            if group is not None and group.restored is not None and not group.restored.announced:
                group.restored.announced = True
                # Kafka's classic coordinator has no topic sizes (the leader reads the cluster's): these are the
                # partitions the stored assignment names, until the feed says more.
                out.append(
                    outputs.group_restored(
                        group_id,
                        group.restored.loaded_ts,
                        group.generation,
                        group.state.value,
                        group.protocol_type,
                        group.protocol_name,
                        group.leader_id,
                        [m.member_id for m in group.members_in_kafka_order()],
                        len(group.offsets),
                        dict(sorted(group.topics.items())),
                    )
                )
        self._unannounced.clear()
        return out

    def _watch_restored(self, group: Group, e: dict) -> Outputs:
        """Signs in a restored group's feed of what the store did not hold (restored.py); the first is reported."""
        r = group.restored
        if group.clock > r.until:
            group.restored = None  # whatever the lost checkpoint held would have shown by now
            return []
        member_id, generation = e.get("member_id") or "", e.get("generation")
        if not member_id or e["type"] not in ("join", "sync", "heartbeat", "commit", "leave"):
            return []
        first_word = member_id in r.unheard
        r.unheard.discard(member_id)
        if self.observer is not None:
            # An answer the broker gave in a later generation is normal here; not so from a member whose way into
            # that generation the tracker never saw since the restore.
            member = group.members.get(member_id)
            if generation is None or generation <= r.generation or e["type"] == "join":
                return []
            if first_word:
                return self.restore_gap(
                    group,
                    e,
                    f"member {member_id} reports generation {generation} in its first "
                    f"word since the store's generation {r.generation}: it rejoined "
                    f"before the restore, in a round the store did not hold",
                    follows=True,
                )
            if member is None or member.stand_in:
                return self.restore_gap(
                    group,
                    e,
                    f"member {member_id} reports generation {generation}, its join "
                    f"unseen since the store's generation {r.generation}: it joined "
                    f"before the restore, in a round the store did not hold",
                    follows=True,
                )
        elif generation is not None and generation > group.generation:
            return self.restore_gap(
                group,
                e,
                f"generation {generation} is newer than the group's {group.generation}: "
                f"the lost checkpoint went on past the store",
                follows=False,
            )
        elif (
            member_id not in group.members
            and member_id not in group.pending_members
            and e.get("group_instance_id") not in group.static_members
            and (generation is None or generation >= r.generation)
        ):
            return self.restore_gap(
                group,
                e,
                f"member {member_id} is not in the group the store held: it joined, or "
                f"was given its id, after the last record",
                follows=False,
            )
        return []

    def restore_gap(self, group: Group, e: dict, reason: str, follows: bool) -> Outputs:
        """The first sign of what the store did not hold is reported. ``follows``: the model follows the feed into
        a round that began before the restore, whose start (and so its figures) it cannot know."""
        r = group.restored
        out: Outputs = []
        if not r.reported:
            r.reported = True
            out.append(outputs.restore_gap(group.group_id, group.clock, r, e, reason, follows))
        if follows:
            if group.rebalance is not None:
                group.rebalance.start_seen = False
            else:
                self._unseen_start = group.group_id
        return out

    # ================================================================ time and timers
    def _tick(self, group: Group, ts: int | None) -> None:
        if ts is not None and ts > group.clock:
            group.clock = ts

    def _arm(self, group: Group, kind: int, key: str, deadline: int | None) -> None:
        self._timers.arm((group.group_id, kind, key), deadline)

    def set_join_deadline(self, group: Group, deadline: int | None) -> None:
        group.join_deadline = deadline
        self._arm(group, _JOIN, "", deadline)

    def set_sync_deadline(self, group: Group, deadline: int | None) -> None:
        group.sync_deadline = deadline
        self._arm(group, _SYNC, "", deadline)

    def _timer_deadline(self, timer: tuple) -> int | None:
        group_id, kind, key = timer
        group = self.groups.get(group_id)
        return self._deadline(group, kind, key) if group is not None else None

    def _deadline(self, group: Group, kind: int, key: str) -> int | None:
        if kind == _JOIN:
            return group.join_deadline
        if kind == _SYNC:
            return group.sync_deadline
        if kind == _SESSION:
            member = group.members.get(key)
            return member.session_deadline if member is not None else None
        if kind == _PENDING:
            return group.pending_members.get(key)
        return group.retention_deadline

    def _all_deadlines(self, group: Group) -> list[int]:
        ds = [group.join_deadline, group.sync_deadline, group.retention_deadline]
        ds += [m.session_deadline for m in group.members.values()]
        ds += list(group.pending_members.values())
        return [d for d in ds if d is not None]

    def _adopt(self, group: Group) -> None:
        self.groups[group.group_id] = group
        if group.restored is not None and not group.restored.announced:
            self._unannounced.add(group.group_id)
        self._arm(group, _JOIN, "", group.join_deadline)
        self._arm(group, _SYNC, "", group.sync_deadline)
        self._arm(group, _RETENTION, "", group.retention_deadline)
        for m in group.members.values():
            self._arm(group, _SESSION, m.member_id, m.session_deadline)
        for member_id, deadline in group.pending_members.items():
            self._arm(group, _PENDING, member_id, deadline)

    def _fire(self, group: Group, kind: int, key: str) -> Outputs:
        if kind == _JOIN:
            return self._on_join_deadline(group)
        if kind == _SYNC:
            return self._on_sync_deadline(group)
        if kind == _SESSION:
            return self._on_session_expired(group, group.members[key])
        if kind == _PENDING:
            del group.pending_members[key]
            return self._try_complete_join(group, expiry=True)
        return self._expire_offsets(group)

    def schedule_session(
        self, group: Group, member: Member, timeout_ms: int | None = None, heard_ms: int | None = None
    ) -> None:
        """(Re)start the member's session from ``heard_ms``, when its request was sent (default: the group's time),
        or from its latest request if that was later. A request that reached the feed late, after other clients'
        later ones, started the broker's timer when it was sent, not when the feed's clock had moved on: a member
        that fell silent is gone when the broker had it gone (the clients' clocks must agree, as Kafka's own
        timestamps assume)."""
        heard = max(group.clock if heard_ms is None else heard_ms, member.last_heartbeat_ts)
        member.last_heartbeat_ts = heard
        if not self.config.expire_members:
            member.session_deadline = None
            return
        member.session_deadline = heard + (timeout_ms if timeout_ms is not None else member.session_timeout_ms)
        self._arm(group, _SESSION, member.member_id, member.session_deadline)

    def _heartbeat_timer_reset(self, group: Group, member: Member, heard_ms: int | None) -> None:
        """A heartbeat or a commit: Kafka restarts the member's session (rescheduleClassicGroupMemberHeartbeat). One
        waiting in a round is kept alive by the round anyway (its deadline is None here; hasSatisfiedHeartbeat in
        Kafka), except a new member: this trades its join timeout for a session timeout."""
        if member.awaiting_join and member.is_new:
            self.schedule_session(group, member, heard_ms=heard_ms)
        elif not member.awaiting_join:
            self.extend_session(group, member, heard_ms)

    def extend_session(self, group: Group, member: Member, heard_ms: int | None = None) -> None:
        """A heartbeat (or commit) from a live member, sent at ``heard_ms`` (default: the group's time); never
        shortens the session a later request gave. Extending needs no new timer: the armed one re-arms itself when
        it pops before the new deadline."""
        heard = max(group.clock if heard_ms is None else heard_ms, member.last_heartbeat_ts)
        member.last_heartbeat_ts = heard
        if self.config.expire_members and member.session_deadline is not None:
            member.session_deadline = max(member.session_deadline, heard + member.session_timeout_ms)

    # ================================================================ outputs
    @staticmethod
    def _refused(group: Group | None, e: dict, error: str) -> Output:
        """Kafka's answer to request ``e`` refused with ``error``: at the group's time, or the request's."""
        return outputs.request_refused(e, group.clock if group is not None else e.get("ts") or 0, error)

    def change_state(self, group: Group, target: GroupState, reason: str) -> Output:
        previous = group.transition(target, group.clock)
        return outputs.state_change(group.group_id, group.clock, previous.value, target.value, group.generation, reason)

    # ================================================================ JoinGroup
    def _join(self, group: Group | None, e: dict) -> Outputs:
        if group is not None:
            return self._join_group(group, e)
        if e["member_id"] and not self.config.adopt_unknown_members:
            return [self._refused(None, e, "UNKNOWN_MEMBER_ID")]
        group = self._new_group(e)
        out = self._join_group(group, e)
        # Only a join that brought a member in keeps the group it created: Kafka refuses a bad session timeout
        # before creating the group, and an Empty group without offsets goes at its next cleanup anyway.
        if group.members or group.pending_members:
            self._keep(group)
        return out

    def _join_group(self, group: Group, e: dict) -> Outputs:
        member_id = e["member_id"]
        c = self.config
        if not c.group_min_session_timeout_ms <= e["session_timeout_ms"] <= c.group_max_session_timeout_ms:
            return [self._refused(group, e, "INVALID_SESSION_TIMEOUT")]
        if group.is_(S.DEAD):
            return [self._refused(group, e, "COORDINATOR_NOT_AVAILABLE")]
        if not self._accept_joining_member(group, member_id):
            out: Outputs = []
            if member_id in group.members:  # only removed: the round goes on until its next join or its timeout
                out += self.remove_member(
                    group,
                    group.members[member_id],
                    "group-max-size",
                    f"member {member_id} removed: group is over group.max.size",
                    update_group=False,
                )
            group.pending_members.pop(member_id, None)
            return out + [self._refused(group, e, "GROUP_MAX_SIZE_REACHED")]
        if not group.supports_protocols(e["protocol_type"], [p["name"] for p in e["protocols"]]):
            return [self._refused(group, e, "INCONSISTENT_GROUP_PROTOCOL")]
        if not member_id:
            return self._join_new_member(group, e)
        return self._join_known_member(group, e)

    def _new_group(self, e: dict) -> Group:
        """The group a request creates, with the topic sizes remembered for it; it exists once ``_keep`` says so."""
        topics = {**self.default_topics, **self.pending_topics.get(e["group_id"], {})}
        now = e.get("ts") or 0
        return Group(e["group_id"], state_timestamp=now, clock=now, topics=topics)  # Empty since its creation

    def _keep(self, group: Group) -> None:
        self.groups[group.group_id] = group
        self.pending_topics.pop(group.group_id, None)

    def create_group(self, e: dict, start_seen: bool = True) -> Group:
        """A group a request brings into being at once. ``start_seen`` False: its first round began before the
        feed shows it, so when it began, and what it cost, are unknown."""
        group = self._new_group(e)
        self._keep(group)
        if not start_seen:
            self._unseen_start = group.group_id
        return group

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _new_member_id(self, group: Group, client_id: str, instance_id: str | None = None) -> str:
        """Kafka's ``clientId-<uuid>`` (``groupInstanceId-<uuid>`` for a static member), with a UUID derived from the
        request (group, client, time) rather than random, so replays give the same ids, and from nothing but the
        request and the members, so a group rebuilt from the store after a lost checkpoint hands out the ids the lost
        state would have."""
        group.member_seq += 1
        hint, self.member_id_hint = self.member_id_hint, None
        if hint and hint not in group.members and hint not in group.pending_members:
            return hint
        prefix = client_id if instance_id is None else instance_id
        for n in itertools.count():
            name = f"{group.group_id}/{client_id}/{group.clock}/{n}"
            candidate = f"{prefix}-{uuid.uuid5(_MEMBER_ID_NAMESPACE, name)}"
            if candidate not in group.members and candidate not in group.pending_members:
                return candidate

    def _join_new_member(self, group: Group, e: dict) -> Outputs:
        instance_id = e["group_instance_id"]
        if instance_id is None and self.config.adopt_unknown_members:
            # Observing a real broker: it hands out the id; the member's next JoinGroup carries it.
            return [self._refused(group, e, "MEMBER_ID_REQUIRED")]
        new_id = self._new_member_id(group, e["client_id"], instance_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                return self._replace_static_member(group, old_id, new_id, e)
            return self._add_member_and_rebalance(group, Member.from_join(new_id, e), e)
        # KIP-394: a dynamic member first gets its id and must come back with it.
        group.pending_members[new_id] = group.clock + e["session_timeout_ms"]
        self._arm(group, _PENDING, new_id, group.pending_members[new_id])
        return [
            outputs.join_answer(
                group.group_id, group.clock, new_id, None, "MEMBER_ID_REQUIRED", -1, None, None, None, []
            )
        ]

    def _join_known_member(self, group: Group, e: dict) -> Outputs:
        member_id, instance_id = e["member_id"], e["group_instance_id"]
        error = self._static_identity_error(group, instance_id, member_id)
        if error is not None:
            return [self._refused(group, e, error)]
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, Member.from_join(member_id, e), e)
        member = group.members.get(member_id)
        if member is None:
            if self.config.adopt_unknown_members and group.state is not S.DEAD:
                return self._add_member_and_rebalance(group, Member.from_join(member_id, e), e)
            return [self._refused(group, e, "UNKNOWN_MEMBER_ID")]
        protocols = [Protocol.from_event(p) for p in e["protocols"]]
        if group.is_(S.PREPARING_REBALANCE):
            return self.update_member_and_rebalance(group, member, e, protocols)
        if group.is_(S.COMPLETING_REBALANCE):
            if member.same_protocols(protocols):
                # The member missed its JoinGroup response; answer again with the current generation.
                return [group.join_answer(member)]
            return self.update_member_and_rebalance(group, member, e, protocols)
        if group.is_(S.STABLE):
            if member.member_id == group.leader_id or not member.same_protocols(protocols):
                # A leader rejoining in Stable asks for a new assignment (e.g. its metadata changed).
                return self.update_member_and_rebalance(group, member, e, protocols)
            return [group.join_answer(member)]
        return [self._refused(group, e, "UNKNOWN_MEMBER_ID")]

    def _static_identity_error(self, group: Group, instance_id: str | None, member_id: str) -> str | None:
        """Kafka's ClassicGroup.validateMember for a request that names a group.instance.id: the instance must be
        known (else UNKNOWN_MEMBER_ID) and be this member (else FENCED_INSTANCE_ID, a zombie of a restarted one)."""
        if instance_id is None:
            return None
        current = group.static_members.get(instance_id)
        if current is None:
            # Observing a broker, a static member whose join we never saw is adopted instead.
            return None if self.config.adopt_unknown_members else "UNKNOWN_MEMBER_ID"
        return None if current == member_id else "FENCED_INSTANCE_ID"

    def _add_member_and_rebalance(self, group: Group, member: Member, e: dict) -> Outputs:
        member.awaiting_join = True
        member.is_new = True
        group.add(member)
        # A brand-new member only gets new.member.join.timeout to complete its first round.
        self.schedule_session(group, member, self.config.new_member_join_timeout_ms)
        if group.is_(S.PREPARING_REBALANCE) and group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        out = [group.member_joined(member)]
        reason = f"adding new member {member.member_id}"
        if member.group_instance_id is not None:
            reason += f" with group instance id {member.group_instance_id}"
        if e.get("reason"):
            reason += f"; client reason: {e['reason']}"
        note_cause(group, "join", reason, group.clock)
        return out + self._maybe_prepare_rebalance(group, "join", reason)

    def update_member_and_rebalance(
        self, group: Group, member: Member, e: dict, protocols: list[Protocol], trigger: str = "join"
    ) -> Outputs:
        group.set_protocols(member, protocols)
        # Kafka's updateMember: protocols and timeouts; the client id and host stay those of the member's first join.
        member.session_timeout_ms, member.rebalance_timeout_ms = e["session_timeout_ms"], e["rebalance_timeout_ms"]
        member.awaiting_join = True
        if not member.is_new:  # a new member's join timeout runs on (a client retrying its first JoinGroup)
            member.session_deadline = None  # the join round's timeout governs a member waiting in it
        self._stops_consuming(group, member)
        reason = f"updating metadata for member {member.member_id}"
        if e.get("reason"):
            reason += f"; client reason: {e['reason']}"
        return self._maybe_prepare_rebalance(group, trigger, reason)

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, e: dict) -> Outputs:
        """KIP-345: a known group.instance.id joins with no member id — the same consumer restarted."""
        old = group.members[old_id]
        out: Outputs = []
        if old.awaiting_join or old.awaiting_sync:
            out.append(
                outputs.fenced_by_restart(
                    outputs.JOIN_RESPONSE if old.awaiting_join else outputs.SYNC_RESPONSE,
                    group.group_id,
                    group.clock,
                    old_id,
                    old.group_instance_id,
                )
            )
        old.awaiting_sync = False  # the restarted consumer has sent no SyncGroup: nothing waits to be answered
        old_protocol = group.protocol_name
        member = group.replace_static(old_id, new_id)
        group.set_protocols(member, [Protocol.from_event(p) for p in e["protocols"]])
        # Kafka restarts the session before it takes the join's timeouts: the old member's session timeout runs
        # until the first heartbeat. The restarted consumer keeps the old client id and host (replaceStaticMember).
        self.schedule_session(group, member)
        member.session_timeout_ms, member.rebalance_timeout_ms = e["session_timeout_ms"], e["rebalance_timeout_ms"]
        out.append(outputs.member_replaced(group.group_id, group.clock, new_id, old_id, member.group_instance_id))
        if group.is_(S.STABLE) and group.select_protocol() == old_protocol:
            # Same protocol: no rebalance. The restarted consumer takes over the old assignment.
            member.awaiting_join = False
            return out + [group.metadata_record(), group.join_answer(member)]
        member.awaiting_join = True
        member.session_deadline = None
        if group.is_(S.STABLE):
            return out + self.prepare_rebalance(
                group, "static-replace", f"static member {member.group_instance_id} rejoined with other protocols"
            )
        if group.is_(S.COMPLETING_REBALANCE):
            return out + self.prepare_rebalance(
                group, "static-replace", f"static member {member.group_instance_id} rejoined during CompletingRebalance"
            )
        return out + self._try_complete_join(group)  # PreparingRebalance: it simply takes part in the running round

    # ================================================================ rebalance rounds
    def _maybe_prepare_rebalance(self, group: Group, trigger: str, detail: str) -> Outputs:
        if S.PREPARING_REBALANCE.can_follow(group.state):
            return self.prepare_rebalance(group, trigger, detail)
        if group.is_(S.PREPARING_REBALANCE):
            return self._try_complete_join(group)
        return []

    def prepare_rebalance(self, group: Group, trigger: str, detail: str) -> Outputs:
        out: Outputs = []
        if group.is_(S.COMPLETING_REBALANCE):
            # Members waiting for their assignment learn the round restarts.
            for m in group.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    out.append(
                        outputs.sync_refused(
                            group.group_id,
                            group.clock,
                            m.member_id,
                            m.group_instance_id,
                            "REBALANCE_IN_PROGRESS",
                            group.generation,
                        )
                    )
                    if not m.awaiting_join:  # its wait is over: heartbeats are due again (unless it rejoined)
                        self.schedule_session(group, m)
        group.pending_sync = []
        group.sync_deadline = None
        if group.is_(S.EMPTY) and not self.config.adopt_unknown_members:
            # The initial delayed join lets a starting application's consumers arrive before the first round.
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self.set_join_deadline(group, group.clock + delay)
        else:
            group.initial_delay_remaining_ms = None
            # Following __consumer_offsets, the records say how a round ended: the model keeps no join timeout (it
            # sees no rejoins, so it would remove everyone).
            self.set_join_deadline(
                group, None if self.config.records_only else group.clock + group.max_rebalance_timeout_ms()
            )
        if group.rebalance is None:
            group.rebalance = RebalanceInProgress(
                group.clock,
                trigger,
                detail,
                start_seen=not self.config.records_only and self._unseen_start != group.group_id,
                not_before=group.generation_ts,
            )
            if self._unseen_start == group.group_id:
                self._unseen_start = None
        if self.observer is not None:
            self.observer.take_noted_rejoins(group)
        out.append(self.change_state(group, S.PREPARING_REBALANCE, detail))
        return out + self._try_complete_join(group)

    def _try_complete_join(self, group: Group, expiry: bool = False) -> Outputs:
        """Complete the join round if every member is in. ``expiry``: a member or pending member just expired --
        Kafka then completes the round even during the initial rebalance delay (removeMemberAndUpdateClassicGroup,
        removePendingMemberAndUpdateClassicGroup), where a join or a leave waits for the delay."""
        if self.config.adopt_unknown_members and group.members:
            return []  # observing a real broker: its round ends when its members' SyncGroups show it (or on timeout)
        if (
            group.is_(S.PREPARING_REBALANCE)
            and (expiry or group.initial_delay_remaining_ms is None)
            and group.has_all_members_joined()
        ):
            return self._complete_join(group)
        return []

    def _on_join_deadline(self, group: Group) -> Outputs:
        group.join_deadline = None
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            # More consumers are still arriving: wait another delay, bounded by the rebalance timeout.
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            group.new_member_added = False
            self.set_join_deadline(group, group.clock + delay)
            return []
        group.initial_delay_remaining_ms = None
        return self._complete_join(group)

    def _complete_join(self, group: Group) -> Outputs:
        group.join_deadline = None
        group.initial_delay_remaining_ms = None
        out: Outputs = []
        for m in group.not_yet_rejoined():
            if not m.is_static:  # static members keep their place; only their session timeout removes them
                out += self.remove_member(
                    group,
                    m,
                    "expiry",
                    f"member {m.member_id} did not rejoin in time",
                    update_group=False,
                    reason="rebalance timeout",
                )
        if not group.elect_joined_leader() and group.members:
            # Nobody rejoined: wait another round for sessions to expire the silent members.
            self.set_join_deadline(group, group.clock + group.max_rebalance_timeout_ms())
            return out
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            out.append(self.change_state(group, S.EMPTY, "all members left"))
            return out + [group.metadata_record(), self._rebalance_record(group)]
        group.protocol_name = group.select_protocol()
        return out + self._open_generation(group, "all members joined or the join timeout passed")

    def _open_generation(self, group: Group, reason: str) -> Outputs:
        """CompletingRebalance: answer the joined members and wait for the leader's SyncGroup."""
        group.generation_ts = group.clock
        out = [self.change_state(group, S.COMPLETING_REBALANCE, reason)]
        if group.rebalance is not None:
            group.rebalance.join_completed_ts = group.clock
        group.pending_sync = list(group.members)
        self.set_sync_deadline(group, group.clock + group.max_rebalance_timeout_ms())
        for m in group.members.values():
            if m.awaiting_join:
                m.awaiting_join = False
                out.append(group.join_answer(m))
            # Every session restarts with the new generation, a static member's that missed the round included.
            m.is_new = False
            self.schedule_session(group, m)
        return out

    def _on_sync_deadline(self, group: Group) -> Outputs:
        group.sync_deadline = None
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return []
        missing = list(group.pending_sync)
        group.pending_sync = []
        out: Outputs = []
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                out += self.remove_member(group, member, "sync-timeout", "", update_group=False, reason="sync timeout")
        out += self.prepare_rebalance(group, "sync-timeout", f"members {', '.join(missing)} never sent SyncGroup")
        if group.deferred and self.observer is not None:  # observe mode: what waited for this generation's end
            out += self.observer.release_deferred(group)
        return out

    # ================================================================ SyncGroup
    def _sync(self, group: Group | None, e: dict) -> Outputs:
        error = self._validate_member_request(group, e)
        if error is None and e.get("protocol_type") is not None and e["protocol_type"] != group.protocol_type:
            error = "INCONSISTENT_GROUP_PROTOCOL"
        if error is None and e.get("protocol_name") is not None and e["protocol_name"] != group.protocol_name:
            error = "INCONSISTENT_GROUP_PROTOCOL"
        if error is None and group.is_(S.EMPTY):
            error = "UNKNOWN_MEMBER_ID"
        if error is None and group.is_(S.PREPARING_REBALANCE):
            error = "REBALANCE_IN_PROGRESS"
        if error is not None:
            return [self._refused(group, e, error)]
        member = group.members[e["member_id"]]
        if member.member_id in group.pending_sync:
            group.pending_sync.remove(member.member_id)
            if not group.pending_sync:
                group.sync_deadline = None
        # A SyncGroup does not extend the session (Kafka reschedules it only when it answers a waiting member): a
        # member waiting for the leader's assignment is not expired -- the sync timeout bounds that wait.
        out: Outputs = []
        if group.is_(S.COMPLETING_REBALANCE):
            member.awaiting_sync = True
            member.session_deadline = None
            if member.member_id == group.leader_id:
                out = self.complete_sync(group, e.get("assignments"))
        else:  # Stable: the member asks again (or after the leader) — give it its assignment
            out.append(self.answer_sync(group, member))
        if e.get("assigned") is not None:
            out += self.observe_delivery(group, member, e["assigned"])
        return out

    def _adopt_static_member_id(self, group: Group, e: dict) -> None:
        """Observing a real broker: a static member's id is the one the broker gave it, which we only learn from
        its next request."""
        instance_id, member_id = e.get("group_instance_id"), e.get("member_id")
        if instance_id is None or not member_id or member_id in group.members:
            return
        old_id = group.static_members.get(instance_id)
        if old_id is not None and old_id != member_id:
            group.replace_static(old_id, member_id)
            # The same incarnation under its real id (not a restart): whatever it owed, it owes under this one.
            group.pending_sync = [member_id if m == old_id else m for m in group.pending_sync]
            member = group.members[member_id]
            self._arm(group, _SESSION, member_id, member.session_deadline)

    def answer_sync(self, group: Group, member: Member) -> Output:
        """The member's SyncGroup answered with its assignment (now, or when the assignment it waited for came)."""
        member.awaiting_sync = False
        return group.sync_answer(member)

    def complete_sync(self, group: Group, given: dict[str, list] | None) -> Outputs:
        """The leader's SyncGroup: the generation's assignment (``given``, or the tracker's own for the leader),
        its GroupMetadata record, Stable, and the answers of those waiting."""
        unknown_topics: list[str] = []
        assignor_missing = False
        if given:
            assignment = {mid: [(t, int(p)) for t, p in parts] for mid, parts in given.items()}
        elif self.config.assignment_mode == "tracker":
            assignment, unknown_topics, assignor_missing = self._compute_assignment(group)
        else:
            assignment = {}
        previous = {m.member_id: list(m.assignment) for m in group.members.values()}
        for m in group.members.values():
            m.assignment = sorted(set(assignment.get(m.member_id, [])))
            m.assignment_generation = group.generation
        out: Outputs = [group.metadata_record()]
        # Kafka fixes these when the generation begins; its members cannot change before it is Stable without a new
        # round, so they are taken here, once for both modes (observed: the members the leader's assignment names).
        group.generation_topics = self._subscribed_now(group)
        out.append(self.change_state(group, S.STABLE, f"leader {group.leader_id} sent the assignment"))
        for m in group.members.values():
            out.append(_assignment(group, m, previous[m.member_id], m.assignment))
        for m in group.members.values():
            if m.awaiting_sync:
                out.append(self.answer_sync(group, m))
                self.schedule_session(group, m)
        out.append(self._rebalance_record(group, unknown_topics, assignor_missing))
        return out

    def _compute_assignment(self, group: Group) -> tuple[dict[str, list[Partition]], list[str], bool]:
        """Act for the leader: run the chosen protocol's assignor over what the members asked for."""
        from assignors import Subscription, TopicPartition, get_assignor

        try:
            assignor = get_assignor(group.protocol_name)
        except (LookupError, ValueError):  # a client-side custom assignor the tracker does not have
            return {}, [], True
        subscriptions, wanted = {}, set()
        for m in group.members.values():
            p = m.protocol(group.protocol_name)
            topics = list(p.topics) if p else []
            wanted.update(topics)
            if p is not None and p.owned_partitions is not None:
                owned, generation = p.owned_partitions, p.generation
            else:  # the client did not say; the tracker knows what it last gave this member
                owned, generation = m.assignment, m.assignment_generation
            subscriptions[m.member_id] = Subscription(
                topics,
                owned_partitions=[TopicPartition(t, n) for t, n in owned],
                generation=None if generation is None or generation < 0 else generation,
                group_instance_id=m.group_instance_id,
                rack=p.rack if p else None,
                user_data=base64.b64decode(p.user_data) if p and p.user_data else None,
            )
        counts = {t: group.topics[t] for t in sorted(wanted) if t in group.topics}
        # A partition a member owns exists. The leader Kafka relies on has the cluster's current metadata; the
        # tracker's topic sizes can lag behind (a group rebuilt from the store knows only the partitions its stored
        # assignment names), and a sticky assignor handed fewer partitions than are owned fails.
        for sub in subscriptions.values():
            for tp in sub.owned_partitions:
                if tp.topic in counts and tp.partition >= counts[tp.topic]:
                    counts[tp.topic] = group.topics[tp.topic] = tp.partition + 1
        result = assignor.assign(counts, subscriptions)
        assignment = {mid: [(tp[0], int(tp[1])) for tp in parts] for mid, parts in result.items()}
        return assignment, sorted(wanted - set(counts)), False

    def _rebalance_record(
        self, group: Group, unknown_topics: list[str] | None = None, assignor_missing: bool = False
    ) -> Output:
        """One line of rebalance history: what started the round, what it cost, what moved (figures.py)."""
        rb = group.rebalance or RebalanceInProgress(group.clock, "unknown", "", start_seen=False)
        group.rebalance = None
        group.recorded_generation = group.generation
        cooperative = is_cooperative(group.protocol_name)
        now, ledger = group.clock, group.figures
        if not rb.start_seen and not cooperative:
            # Eager owners gave everything up when told of the round, at times this feed does not show.
            for owner in list(ledger.held):
                ledger.release(owner, None)
        topics = group.generation_topics or frozenset()
        settled = ledger.settle(
            {m.group_instance_id or m.member_id: m.assignment for m in group.members.values()},
            now,
            wanted=lambda tp: tp[0] in topics and tp[1] < group.topics.get(tp[0], tp[1] + 1),
            known=not self.config.records_only,
        )
        return outputs.rebalance(
            group.group_id,
            now,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            "cooperative" if cooperative else "eager",
            group.leader_id,
            [
                outputs.rebalance_member(m.member_id, m.group_instance_id, m.client_id, m.client_host)
                for m in group.members.values()
            ],
            {m.member_id: [list(tp) for tp in m.assignment] for m in group.members.values()},
            rb.trigger,
            rb.detail,
            rb.join_completed_ts,
            rebalance_fields(settled, rb.started_ts if rb.start_seen else None, now),
            unknown_topics or [],
            assignor_missing,
        )

    def _release_time(self, group: Group) -> int | None:
        return None if self.config.records_only else group.clock

    def _stops_consuming(self, group: Group, member: Member) -> None:
        """``member`` learns of the round (REBALANCE_IN_PROGRESS, or it rejoins on its own): an eager consumer gives
        up all its partitions before it rejoins; a cooperative one keeps them until the assignment says otherwise."""
        if not is_cooperative(group.protocol_name):
            group.figures.release(member.group_instance_id or member.member_id, self._release_time(group))

    def observe_delivery(self, group: Group, member: Member, assigned: list) -> Outputs:
        """An instrumented client reported what it really received; the client's word wins over our computation."""
        observed = sorted({(t, int(p)) for t, p in assigned})
        if observed == member.assignment:
            return []
        previous, member.assignment = member.assignment, observed
        return [_assignment(group, member, previous, observed, observed=True)]

    # ================================================================ Heartbeat / LeaveGroup / expiry
    def _validate_member_request(self, group: Group | None, e: dict, check_generation: bool = True) -> str | None:
        if group is None:
            return "UNKNOWN_MEMBER_ID"
        if group.is_(S.DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        error = self._static_identity_error(group, e.get("group_instance_id"), e["member_id"])
        if error is not None:
            return error
        if e["member_id"] not in group.members:
            return "UNKNOWN_MEMBER_ID"
        if check_generation and e.get("generation") != group.generation:
            return "ILLEGAL_GENERATION"
        return None

    def _heartbeat(self, group: Group | None, e: dict) -> Outputs:
        error = self._validate_member_request(group, e)
        if error is None and group.is_(S.EMPTY):
            error = "UNKNOWN_MEMBER_ID"
        if error is not None:
            return [self._refused(group, e, error)]
        member = group.members[e["member_id"]]
        self._heartbeat_timer_reset(group, member, e.get("ts"))
        error = "REBALANCE_IN_PROGRESS" if group.is_(S.PREPARING_REBALANCE) else "NONE"
        if error != "NONE":
            self._stops_consuming(group, member)
        return [outputs.heartbeat_response(e, group.clock, error)]

    def _leave(self, group: Group | None, e: dict) -> Outputs:
        member_id, instance_id = e["member_id"], e["group_instance_id"]
        if group is None:
            return [self._refused(None, e, "UNKNOWN_MEMBER_ID")]
        if group.is_(S.DEAD):
            return [self._refused(group, e, "COORDINATOR_NOT_AVAILABLE")]
        if not member_id and instance_id is not None:
            # KIP-345 admin removal (kafka-consumer-groups --delete-members / removeMembersFromConsumerGroup).
            member_id = group.static_members.get(instance_id, "")
            if not member_id:
                return [self._refused(group, e, "UNKNOWN_MEMBER_ID")]
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            out = [outputs.leave_response(e, group.clock, "NONE")]
            # Kafka counts it among the members that left: a Stable group rebalances, a joining round may end.
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                return out + self.prepare_rebalance(
                    group, "leave", f"pending member {member_id} left through an explicit LeaveGroup"
                )
            return out + self._try_complete_join(group)
        else:
            error = self._static_identity_error(group, instance_id, member_id)
            if error is not None:
                return [self._refused(group, e, error)]
        member = group.members.get(member_id)
        if member is None:
            return [self._refused(group, e, "UNKNOWN_MEMBER_ID")]
        reason = f"removing member {member_id} on LeaveGroup"
        if e.get("reason"):
            reason += f"; client reason: {e['reason']}"
        return [outputs.leave_response(e, group.clock, "NONE")] + self.remove_member(
            group, member, "leave", reason, reason="leave"
        )

    def _on_session_expired(self, group: Group, member: Member) -> Outputs:
        why = "new member join timeout" if member.is_new else "session timeout"
        if group.restored is not None and member.member_id in group.restored.unheard:
            # Silent since the restore, on the session the load restarted: it left, or its session ran out, before.
            out = self.restore_gap(
                group,
                {"type": "expiry", "member_id": member.member_id},
                f"member {member.member_id}, not heard from since the restore, expired on the "
                f"session the load restarted: it left, or went quiet, before the restore (up to a "
                f"session sooner)",
                follows=True,
            )
            return out + self.remove_member(
                group,
                member,
                "unknown",
                f"member {member.member_id} left, or its session ran out, before the group was restored from the store",
                reason="unknown",
            )
        return self.remove_member(
            group, member, "expiry", f"removing member {member.member_id} on heartbeat expiration", reason=why
        )

    def remove_member(
        self, group: Group, member: Member, trigger: str, detail: str, update_group: bool = True, reason: str = ""
    ) -> Outputs:
        """Remove ``member`` (``reason`` "leave": it left, else it expired), and, with ``update_group``, rebalance
        what remains (Kafka's removeMemberAndUpdateClassicGroup)."""
        out: Outputs = []
        if member.awaiting_join:
            # Its JoinGroup is still waiting (a new member's join timeout, a leave): Kafka answers it before removing
            # the member, so a client that is still alive starts over.
            out.append(
                outputs.join_refused(
                    group.group_id, group.clock, member.member_id, member.group_instance_id, "UNKNOWN_MEMBER_ID"
                )
            )
        group.remove(member.member_id)
        group.figures.release(member.group_instance_id or member.member_id, self._release_time(group))
        out.append(
            outputs.member_gone(
                group.group_id,
                group.clock,
                member.member_id,
                member.group_instance_id,
                member.client_id,
                reason,
                member.last_heartbeat_ts,
                group.generation,
            )
        )
        note_cause(group, trigger, detail, group.clock)
        if not update_group:
            return out
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            return out + self.prepare_rebalance(group, trigger, detail)
        if group.is_(S.PREPARING_REBALANCE):
            return out + self._try_complete_join(group, expiry=trigger == "expiry")
        return out

    # ================================================================ OffsetCommit / retention / deletion
    def _commit(self, group: Group | None, e: dict) -> Outputs:
        if group is None:
            if e["generation"] >= 0:
                return [outputs.request_refused(e, e.get("ts") or 0, O.unknown_group_error(e))]
            # A group that only stores offsets (no group management) comes into being on its first commit.
            group = self.create_group(e)
        error = self._commit_error(group, e)
        if error is not None:
            return [self._refused(group, e, error)]
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            # A member's commit counts as a heartbeat (the checks above proved the member exists).
            self._heartbeat_timer_reset(group, group.members[e["member_id"]], e.get("ts"))
        refused = [O.too_large(o, self.config.offset_metadata_max_bytes) for o in e["offsets"]]
        out: Outputs = O.store(
            group.offsets,
            group.group_id,
            [o for o, no in zip(e["offsets"], refused) if not no],
            group.clock,
            e["retention_ms"],
            now=group.clock,
        )
        out.append(
            outputs.commit_response(
                e,
                group.clock,
                "NONE",
                [
                    [o["topic"], o["partition"], "OFFSET_METADATA_TOO_LARGE" if no else "NONE"]
                    for o, no in zip(e["offsets"], refused)
                ],
            )
        )
        return out

    def _commit_error(self, group: Group, e: dict) -> str | None:
        """Kafka's validateOffsetCommit, in its order: the member and its generation first, and only a valid member
        of the new generation learns that the group is still CompletingRebalance."""
        generation, member_id, instance_id = e["generation"], e["member_id"], e["group_instance_id"]
        if group.is_(S.DEAD):
            return "COORDINATOR_NOT_AVAILABLE"
        if generation < 0 and group.is_(S.EMPTY):
            return None  # the admin client, or a consumer without group management: fine while nobody is a member
        if generation < 0 and not member_id and instance_id is None:
            return "UNKNOWN_MEMBER_ID"  # an anonymous commit, but the group has members: only they may commit
        error = self._member_error(group, member_id, instance_id)
        if error is None and generation != group.generation:
            error = "ILLEGAL_GENERATION"
        if error is None and group.is_(S.COMPLETING_REBALANCE):
            error = "REBALANCE_IN_PROGRESS"
        return error

    @staticmethod
    def _member_error(group: Group, member_id: str, instance_id: str | None) -> str | None:
        """Kafka's validateMember: a named instance must exist and belong to this member, and the member must exist."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return "UNKNOWN_MEMBER_ID"
            if current != member_id:
                return "FENCED_INSTANCE_ID"
        return None if member_id in group.members else "UNKNOWN_MEMBER_ID"

    @staticmethod
    def _subscribed_now(group: Group) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics: a consumer group's members' topics (none when it has no members)."""
        if group.protocol_type != "consumer":
            return None
        return frozenset(group.subscribed_topics() or ()) if group.members else frozenset()

    def _retention_base(self, group: Group) -> tuple[str, set[str]] | None:
        """Kafka's KIP-211 rule: which timestamp an offset's retention counts from, and which topics are exempt."""
        if group.protocol_type is None:
            return "commit", set()  # offsets-only group: from each commit
        if group.is_(S.EMPTY):
            return "state", set()  # consumers gone: from when the group became Empty
        if group.protocol_type == "consumer" and group.is_(S.STABLE):
            # Only topics nobody subscribed to when the generation began.
            return "commit", set(group.generation_topics or ())
        return None

    def _expiry_time(self, group: Group, o: CommittedOffset, base: str) -> int:
        start = group.state_timestamp if base == "state" and group.state_timestamp != -1 else o.commit_timestamp
        return O.expiry_time(o, start, self.config.offsets_retention_ms)

    def _refresh_retention(self, group: Group) -> None:
        rule = self._retention_base(group)
        deadline = None
        if rule is not None:
            base, exempt = rule
            times = [self._expiry_time(group, o, base) for tp, o in group.offsets.items() if tp[0] not in exempt]
            deadline = min(times, default=None)
            if deadline is None and group.is_(S.EMPTY):
                # An Empty group without offsets goes at the broker's next cleanup pass, members pending or not
                # (their next JoinGroup finds no group: UNKNOWN_MEMBER_ID).
                deadline = max(group.state_timestamp, 0) + self.config.offsets_retention_check_interval_ms
        if deadline != group.retention_deadline:
            group.retention_deadline = deadline
            self._arm(group, _RETENTION, "", deadline)

    def _expire_offsets(self, group: Group) -> Outputs:
        group.retention_deadline = None
        rule = self._retention_base(group)
        if rule is None:
            return []
        base, exempt = rule
        expired = [
            tp
            for tp, o in sorted(group.offsets.items())
            if tp[0] not in exempt and group.clock >= self._expiry_time(group, o, base)
        ]
        out: Outputs = []
        for tp in expired:
            del group.offsets[tp]
            out.append(O.tombstone(group.group_id, group.clock, tp, "retention"))
        if group.is_(S.EMPTY) and not group.offsets:
            out.append(self.change_state(group, S.DEAD, "empty group without offsets"))
            out += self._group_tombstone(group)
            del self.groups[group.group_id]
        return out

    @staticmethod
    def _group_tombstone(group: Group) -> Outputs:
        # Offsets-only groups (generation 0) never had group metadata written, so Kafka writes no tombstone.
        return [outputs.group_metadata_tombstone(group.group_id, group.clock)] if group.generation > 0 else []

    def _delete_group(self, group: Group | None, e: dict) -> Outputs:
        # DeleteGroups names no member: its answer has the consumer model's shape, whichever model holds the group.
        ts = group.clock if group is not None else e.get("ts") or 0
        if group is None or group.is_(S.DEAD):
            return [outputs.delete_group_response(e["group_id"], ts, "GROUP_ID_NOT_FOUND")]
        if not group.is_(S.EMPTY):
            return [outputs.delete_group_response(e["group_id"], ts, "NON_EMPTY_GROUP")]
        out: Outputs = [O.tombstone(group.group_id, group.clock, tp, "group deleted") for tp in sorted(group.offsets)]
        group.offsets.clear()
        out.append(self.change_state(group, S.DEAD, "group deleted"))
        out += self._group_tombstone(group)
        del self.groups[group.group_id]
        out.append(outputs.delete_group_response(group.group_id, group.clock, "NONE"))
        return out

    # ================================================================ topic metadata
    def _topic_metadata(self, group: Group | None, e: dict) -> Outputs:
        if e.get("topic_id"):  # kept for a consumer group this group may become (routing.py)
            self.topic_ids[e["topic"]] = e["topic_id"]
        if group is None:  # remembered until the group's first member arrives
            self.pending_topics.setdefault(e["group_id"], {})[e["topic"]] = e["partitions"]
            return []
        topic, count = e["topic"], e["partitions"]
        before = group.topics.get(topic)
        group.topics[topic] = count
        if before == count or self.config.assignment_mode != "tracker":
            return []
        if before is None and e.get("topic_id"):
            # A KIP-848 feed's topic, sent ahead of the ConsumerGroupHeartbeat that upgrades this group: learnt,
            # not a change the members' metadata refresh would act on.
            return []
        subscribed = group.subscribed_topics() or set()
        if topic in subscribed and group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            # The leader's metadata refresh would see this and rejoin; the tracker acts for it.
            return self.prepare_rebalance(
                group,
                "metadata",
                f"partitions of {topic} changed from {before if before is not None else 'unknown'} to {count}",
            )
        return []

    # Event type -> its handler (Kafka's rules for the request; topic metadata is the tracker's own). Every request
    # ``handle`` answers goes through this table.
    HANDLERS: dict[str, Callable[["GroupCoordinator", Group | None, dict], Outputs]] = {
        "join": _join,
        "sync": _sync,
        "heartbeat": _heartbeat,
        "leave": _leave,
        "commit": _commit,
        "delete_group": _delete_group,
        "topic_metadata": _topic_metadata,
    }


def _assignment(
    group: Group, member: Member, previous: list[Partition], current: list[Partition], observed: bool = False
) -> Output:
    """A member's ``assignment`` output: its partitions for the generation, and what changed since ``previous``."""
    old, new = set(previous), set(current)
    return outputs.assignment(
        group.group_id,
        group.clock,
        member.member_id,
        member.group_instance_id,
        group.generation,
        group.protocol_name,
        [list(tp) for tp in current],
        [list(tp) for tp in sorted(new - old)],
        [list(tp) for tp in sorted(old - new)],
        observed,
    )


# ==================================================================== serialisation helpers
_encode_state = msgspec.msgpack.Encoder().encode
_decode_state = msgspec.msgpack.Decoder().decode


def _pack(payload: dict) -> bytes:
    return bytes([FORMAT_VERSION]) + _encode_state(payload)


def _unpack(data: bytes) -> dict:
    if data and data[0] == FORMAT_VERSION:
        return _decode_state(memoryview(data)[1:])
    if data and data[0] == 1:
        return json.loads(zlib.decompress(bytes(data[1:])))
    raise ValueError(f"unsupported coordinator state version {data[:1]!r}")


def _tp_key(tp: Partition) -> list:
    return [tp[0], tp[1]]


def _group_to_dict(g: Group) -> dict:
    rb = g.rebalance
    return {
        "group_id": g.group_id,
        "state": g.state.value,
        "state_timestamp": g.state_timestamp,
        "protocol_type": g.protocol_type,
        "protocol_name": g.protocol_name,
        "generation": g.generation,
        "leader_id": g.leader_id,
        "members": [m.to_row() for m in g.members.values()],
        "pending_members": g.pending_members,
        "pending_sync": g.pending_sync,
        "offsets": O.to_rows(g.offsets),
        "topics": g.topics,
        "clock": g.clock,
        "member_seq": g.member_seq,
        "join_deadline": g.join_deadline,
        "initial_delay_remaining_ms": g.initial_delay_remaining_ms,
        "new_member_added": g.new_member_added,
        "sync_deadline": g.sync_deadline,
        "retention_deadline": g.retention_deadline,
        "generation_ts": g.generation_ts,
        "deferred": g.deferred,
        "recorded_generation": g.recorded_generation,
        "rebalance": None
        if rb is None
        else [rb.started_ts, rb.trigger, rb.detail, rb.join_completed_ts, rb.start_seen, rb.not_before],
        "figures": g.figures.to_dict(),
        "generation_topics": None if g.generation_topics is None else sorted(g.generation_topics),
        "restored": None if g.restored is None else g.restored.to_row(),
    }


def _group_from_dict(d: dict) -> Group:
    g = Group(
        d["group_id"],
        GroupState(d["state"]),
        d["state_timestamp"],
        d["protocol_type"],
        d["protocol_name"],
        d["generation"],
        d["leader_id"],
    )
    for md in d["members"]:
        member = Member.from_row(md) if isinstance(md, list) else Member.from_dict(md)
        g.members[member.member_id] = member
        g.protocol_counts.update(member.protocol_names())
        if member.group_instance_id is not None:
            g.static_members[member.group_instance_id] = member.member_id
    g.pending_members = dict(d["pending_members"])
    g.pending_sync = list(d["pending_sync"])
    g.offsets = O.from_rows(d["offsets"])
    g.topics = dict(d["topics"])
    g.clock, g.member_seq = d["clock"], d["member_seq"]
    g.join_deadline, g.initial_delay_remaining_ms = d["join_deadline"], d["initial_delay_remaining_ms"]
    g.new_member_added, g.sync_deadline = d["new_member_added"], d["sync_deadline"]
    g.retention_deadline = d["retention_deadline"]
    g.generation_ts = d.get("generation_ts", g.state_timestamp)
    g.deferred = list(d.get("deferred", []))
    g.recorded_generation = d.get("recorded_generation", g.generation)
    g.restored = Restored.from_row(d.get("restored"))
    g.rebalance = None if d["rebalance"] is None else RebalanceInProgress(*d["rebalance"])
    if "figures" in d:
        g.figures = Ledger.from_dict(d["figures"])
    else:  # a state from before the figures' ledger: owners at the last Stable, cooperative revocations
        g.figures = _ledger_of_members(g)
        g.figures.owners = {(t, p): owner for t, p, owner in d.get("stable_owners", [])}
        g.figures.released = {(t, p): (ts, 0) for t, p, ts in d.get("revoked_at", [])}
    if "generation_topics" in d:
        g.generation_topics = None if d["generation_topics"] is None else frozenset(d["generation_topics"])
    else:  # a state from before they were kept: the members' topics now
        g.generation_topics = GroupCoordinator._subscribed_now(g)
    return g


def _restore_metadata(group: Group, record: dict, now_ms: int) -> None:
    group.protocol_type = record.get("protocol_type") or None
    group.protocol_name = record.get("protocol")
    group.generation = int(record.get("generation", 0))
    group.state_timestamp = int(record.get("current_state_timestamp", -1))
    # When the generation's answers began: about when it was recorded Stable, if the record says (v2+); a request
    # sent later is for the next round (observe.py).
    group.generation_ts = group.state_timestamp if 0 <= group.state_timestamp <= now_ms else now_ms
    for md in record.get("members") or []:
        sub = md.get("subscription") or {}
        owned = sub.get("owned_partitions")
        protocol = Protocol(
            group.protocol_name or "",
            list(sub.get("topics") or []),
            None if owned is None else [(t, int(p)) for t, p in owned],
            int(sub.get("generation", -1)),
            sub.get("user_data"),
            sub.get("rack"),
        )
        session_timeout = int(md.get("session_timeout", 10_000))
        # No rebalance timeout (GroupMetadataValue v0, or -1): Kafka's loader takes the session timeout.
        rebalance_timeout = int(md.get("rebalance_timeout", -1))
        member = Member(
            md["member_id"],
            md.get("group_instance_id"),
            md.get("client_id", ""),
            md.get("client_host", ""),
            session_timeout,
            rebalance_timeout if rebalance_timeout >= 0 else session_timeout,
            group.protocol_type or "",
            [protocol],
            assignment=[(t, int(p)) for t, p in (md.get("assignment") or {}).get("partitions", [])],
            assignment_generation=group.generation,
        )
        member.last_heartbeat_ts = now_ms
        member.session_deadline = now_ms + member.session_timeout_ms
        group.add(member)
    # Partition counts are not in the records: until metadata says otherwise, a topic has at least the partitions
    # the stored assignment names (all of them, for a Stable eager group), so the tracker can assign again.
    for m in group.members.values():
        for topic, partition in m.assignment:
            group.topics[topic] = max(group.topics.get(topic, 0), partition + 1)
    group.generation_topics = GroupCoordinator._subscribed_now(group)  # as Kafka's loader computes them
    group.leader_id = record.get("leader") if group.members else None
    if group.members:
        group.state = S.STABLE
        group.figures = _ledger_of_members(group)
    else:
        group.state = S.EMPTY


def _ledger_of_members(group: Group) -> Ledger:
    """The figures' ledger of a group whose members hold their assignments (loaded or restored Stable)."""
    ledger = Ledger()
    for m in group.members.values():
        ledger.take(m.group_instance_id or m.member_id, m.assignment, group.clock)
    ledger.owners = dict(ledger.holder)
    return ledger
