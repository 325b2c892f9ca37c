"""Kafka's consumer group protocol (KIP-848, ``group.protocol=consumer``) as a pure, deterministic state machine.

The request handling follows Kafka 4.0's ``GroupMetadataManager`` (``consumerGroupHeartbeat``,
``consumerGroupLeave``, the session and rebalance timers, ``onNewMetadataImage``) step by step. Like Kafka, a
request is first turned into records, and the records are then replayed onto the group -- the very path a group
rebuilt from ``__consumer_offsets`` takes (``load_records``). The API mirrors the classic ``GroupCoordinator``:
``handle(event)``, ``advance(now_ms)``, ``next_deadline()``, ``to_bytes()``/``from_bytes()``, ``is_blank()``. With
``group.consumer.assignment.interval.ms`` (Kafka 4.3+, KIP-1263) a new target assignment waits for the first
heartbeat once the interval since the last one has run out, as Kafka 4.3 and 4.4 do: no timer, no other thread.

Committed offsets follow Kafka 4.0's ``OffsetMetadataManager`` and ``ConsumerGroup``: an OffsetCommit is checked
against the member's epoch (``validateOffsetCommit``), writes the same ``offset_commit`` records as a classic group's
(``streaming.coordinator.offsets``) and does not keep the member's session alive; an offset expires
``offsets.retention.minutes`` after its commit unless the group is subscribed to its topic, and an Empty group
whose offsets are all gone is deleted with all its tombstones (the broker's cleanup pass, ``cleanupGroupMetadata``).
The broker runs that pass every ``offsets.retention.check.interval.ms`` from when it loaded the partition; the model
cannot know that phase, so, as the classic model does, it expires an offset at its exact expiry time and deletes an
Empty group without offsets one interval after it became Empty (or was loaded).

Time comes only from events' ``ts`` and ``advance``; nothing reads a clock or draws a random number. As in the
classic coordinator, ``handle`` looks the event's type up in ``HANDLERS``, and every handler and every step returns
the outputs it produced (``outputs.py`` declares them), in order.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from assignors.java import timeline_hash_order
from assignors.server import PartitionAssignorError, get_server_assignor
from streaming.coordinator import offsets as O
from streaming.coordinator import outputs
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer import classic_members
from streaming.coordinator.consumer.config import ConsumerGroupConfig
from streaming.coordinator.consumer.errors import HeartbeatError
from streaming.coordinator.consumer.group import STABLE, ConsumerGroup
from streaming.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    is_subset,
)
from streaming.coordinator.consumer.member_state import MemberState
from streaming.coordinator.consumer.reconcile import reconcile
from streaming.coordinator.consumer.regex import regex_error, resolve
from streaming.coordinator.consumer.target import build_target_assignment, can_compute_next_target_assignment
from streaming.coordinator.consumer.topics import TopicImage
from streaming.coordinator.figures import Ledger, rebalance_fields
from streaming.coordinator.offsets import CommittedOffset, Partition
from streaming.coordinator.outputs import Output, Outputs
from streaming.coordinator.restored import Restored, window_end
from streaming.coordinator.timers import Timers

FORMAT_VERSION = 1
# First byte of the serialised state: the classic coordinator's state starts with its format version (1), so a
# caller holding a group's bytes can tell which model they belong to (``is_consumer_state``).
STATE_MAGIC = 0x43
REGEX_BATCH_REFRESH_INTERVAL_MS = 10_000
_SESSION, _REBALANCE, _RETENTION, _JOIN, _SYNC = 0, 1, 2, 3, 4  # join, sync: classic members' (classic_members.py)
# A consumer-protocol member must commit with OffsetCommit v9 or later (KIP-848).
OFFSET_COMMIT_MIN_VERSION = 9
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))  # what String.trim() strips


def is_consumer_state(data: bytes | None) -> bool:
    """Whether serialised group state is this model's (and not the classic coordinator's)."""
    return bool(data) and data[0] == STATE_MAGIC


@dataclass
class _Soft:
    """What Kafka keeps in memory only (timers, refresh flags) plus the tracker's rebalance bookkeeping."""

    sessions: dict[str, int] = field(default_factory=dict)  # member -> session deadline
    rebalance: dict[str, list[int]] = field(default_factory=dict)  # member -> [deadline, member epoch]
    last_heartbeat: dict[str, int] = field(default_factory=dict)
    refresh_metadata: bool = True  # Kafka: metadataRefreshDeadline expired (new or loaded group, topic change)
    # [ts (None: unknown), trigger, detail] of the first epoch bump since the group last settled (Stable or Empty)
    rebalance_started: list | None = None
    assignor: str | None = None  # the assignor of the last target assignment
    figures: Ledger = field(default_factory=Ledger)  # owners over time, by (topic id, partition) (figures.py)
    retention: int | None = None  # the offsets cleanup's next work: an offset expiring, an Empty group going
    empty_since: int | None = None  # when the group last became Empty (or was loaded Empty)
    restored: Restored | None = None  # rebuilt from the store after a lost checkpoint (restored.py)
    # Classic members' join and sync timeouts (member -> deadline): Kafka's consumerGroupJoinKey/SyncKey timers
    joins: dict[str, int] = field(default_factory=dict)
    syncs: dict[str, int] = field(default_factory=dict)
    # The regexes a request asked the broker to resolve, until a regex_resolved event says it did (Kafka's scheduled
    # "<group>-regex" task; config regex.resolution.events)
    regexes_asked: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {
            "sessions": self.sessions,
            "rebalance": self.rebalance,
            "last_heartbeat": self.last_heartbeat,
            "refresh_metadata": self.refresh_metadata,
            "rebalance_started": self.rebalance_started,
            "assignor": self.assignor,
            "figures": self.figures.to_dict(),
        }
        if self.retention is not None:
            d["retention"] = self.retention
        if self.empty_since is not None:
            d["empty_since"] = self.empty_since
        if self.restored is not None:
            d["restored"] = self.restored.to_row()
        if self.joins:
            d["joins"] = self.joins
        if self.syncs:
            d["syncs"] = self.syncs
        if self.regexes_asked:
            d["regexes_asked"] = self.regexes_asked
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "_Soft":
        if "figures" in d:
            figures = Ledger.from_dict(d["figures"])
        else:  # a state from before the figures' ledger: only the owners at the last Stable ("topic_id:p" keys)
            figures = Ledger()
            figures.owners = {
                (key.rsplit(":", 1)[0], int(key.rsplit(":", 1)[1])): owner
                for key, owner in d.get("stable_owners", {}).items()
            }
        return cls(
            dict(d["sessions"]),
            {k: list(v) for k, v in d["rebalance"].items()},
            dict(d["last_heartbeat"]),
            d["refresh_metadata"],
            d["rebalance_started"],
            d["assignor"],
            figures,
            d.get("retention"),
            d.get("empty_since"),
            Restored.from_row(d.get("restored")),
            dict(d.get("joins", {})),
            dict(d.get("syncs", {})),
            list(d.get("regexes_asked", [])),
        )


class ConsumerGroupCoordinator:
    """Consumer groups of the new protocol. ``assignors`` (name -> object with ``assign(GroupSpec, describer)``)
    replaces the built-in server assignors, e.g. to script an assignment in a test."""

    def __init__(self, config: ConsumerGroupConfig | None = None, assignors: Mapping[str, object] | None = None):
        self.config = config or ConsumerGroupConfig()
        self._assignors = dict(assignors) if assignors is not None else None
        self.groups: dict[str, ConsumerGroup] = {}
        self.soft: dict[str, _Soft] = {}
        self.offsets: dict[str, dict[Partition, CommittedOffset]] = {}  # committed offsets of the groups held
        self.image = TopicImage()
        self.now = 0
        self._timers = Timers(self._timer_deadline)
        self._unannounced: set[str] = set()  # groups rebuilt from the store whose first step is still to come
        # The online downgrade (classic_members.downgrade_view): group id -> the classic group it becomes, for
        # routing.py to take at once (never serialised); and the classic model's group.max.size, which bounds it.
        self.downgraded: dict[str, dict] = {}
        self.classic_group_max_size = 2**31 - 1
        self.member_id_hint: str | None = None  # a classic member's next new id, as GroupCoordinator's

    # ================================================================ public API
    def handle(self, event: dict) -> Outputs:
        """Apply one validated event (``consumer_heartbeat``, ``commit``, ``topic_metadata`` or ``delete_group``; a
        classic member's ``join``, ``sync``, ``heartbeat`` or ``leave``: ``classic_members``).

        Timers due strictly before the event's ``ts`` fire first; a heartbeat arriving on its deadline wins."""
        ts = event.get("ts")
        out = self.advance(ts - 1) if ts is not None else self.announcements()
        self._tick(ts)
        kind = event["type"]
        if kind == "log_end":  # not a request: passed on, after the timers due before it, for the lag views
            return out + [outputs.log_end(event)]
        if kind == "client_report":  # the client's word, not a request: passed on likewise
            return out + [outputs.client_report(event)]
        if kind in ("consumer_heartbeat", "commit") and event.get("group_id") in self.soft:
            out += self._watch_restored(event)
        handler = self.HANDLERS.get(kind)
        if handler is None:
            out.append(
                outputs.ignored_event(
                    event.get("group_id") or "", self.now, kind, "not a request of the consumer group protocol"
                )
            )
            return out
        return out + handler(self, event)

    def advance(self, now_ms: int) -> Outputs:
        """Fire every session and rebalance timeout (and offsets cleanup) due at or before ``now_ms``, in deadline
        order."""
        out = self.announcements()
        for deadline, (kind, group_id, member_id) in self._timers.due(now_ms):
            self._tick(deadline)
            out += self._fire(kind, group_id, member_id)
        self._tick(now_ms)
        return out

    def next_deadline(self, group_id: str | None = None) -> int | None:
        softs = (
            [self.soft[group_id]]
            if group_id is not None and group_id in self.soft
            else ([] if group_id is not None else list(self.soft.values()))
        )
        deadlines = (
            [d for s in softs for d in s.sessions.values()]
            + [r[0] for s in softs for r in s.rebalance.values()]
            + [s.retention for s in softs if s.retention is not None]
            + [d for s in softs for d in (*s.joins.values(), *s.syncs.values())]
        )
        return min(deadlines, default=None)

    def group_ids(self) -> list[str]:
        return list(self.groups)

    def is_blank(self) -> bool:
        return not self.groups and not self.image.by_name and not self.image.known_ids

    def fetch_offsets(self, group_id: str) -> dict[Partition, outputs.OffsetFetchEntry]:
        """OffsetFetch (as the admin client asks it): the group's committed offsets; empty for an unknown group."""
        return O.fetch(self.offsets.get(group_id, {}))

    def describe_group(self, group_id: str) -> outputs.ConsumerGroupDescription:
        """ConsumerGroupDescribe: epochs, state, assignor and members with their current and target assignment."""
        group = self.groups.get(group_id)
        if group is None:
            return {"group_id": group_id, "state": "Dead", "members": []}
        return {
            "group_id": group_id,
            "state": group.state(),
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor": group.preferred_server_assignor() or self.config.group_consumer_assignors[0],
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "state": m.state.name,
                    "subscribed_topic_names": sorted(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.regex,
                    "server_assignor": m.server_assignor,
                    "assignment": self._pairs(m.assigned_partitions),
                    "pending_revocation": self._pairs(m.partitions_pending_revocation),
                    "target_assignment": self._pairs(group.target.get(m.member_id, {})),
                }
                for m in group.members.values()
            ],
        }

    # --- serialisation -------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        groups = []
        for gid, g in self.groups.items():
            entry = {"group": g.to_dict(), "soft": self.soft[gid].to_dict()}
            if self.offsets.get(gid):
                entry["offsets"] = O.to_rows(self.offsets[gid])  # [topic, partition, offset, ...] rows
            groups.append(entry)
        return {"v": FORMAT_VERSION, "now": self.now, "image": self.image.to_dict(), "groups": groups}

    @classmethod
    def from_dict(
        cls, d: Mapping, config: ConsumerGroupConfig | None = None, assignors: Mapping[str, object] | None = None
    ) -> "ConsumerGroupCoordinator":
        if d.get("v") != FORMAT_VERSION:
            raise ValueError(f"unsupported consumer coordinator state version {d.get('v')!r}")
        c = cls(config, assignors)
        c.now = d["now"]
        c.image = TopicImage.from_dict(d["image"])
        for entry in d["groups"]:
            group = ConsumerGroup.from_dict(entry["group"])
            c.groups[group.group_id] = group
            c.soft[group.group_id] = soft = _Soft.from_dict(entry["soft"])
            if soft.restored is not None and not soft.restored.announced:
                c._unannounced.add(group.group_id)
            if "figures" not in entry["soft"]:
                owners = soft.figures.owners
                soft.figures = _ledger_of_members(group, c.now)
                soft.figures.owners = owners
            if entry.get("offsets"):
                c.offsets[group.group_id] = O.from_rows(entry["offsets"])
            c._arm_all(group.group_id)
        return c

    def to_bytes(self) -> bytes:
        return bytes([STATE_MAGIC]) + zlib.compress(json.dumps(self.to_dict(), separators=(",", ":")).encode(), 6)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: ConsumerGroupConfig | None = None, assignors: Mapping[str, object] | None = None
    ) -> "ConsumerGroupCoordinator":
        if not is_consumer_state(data):
            raise ValueError(f"not a consumer group coordinator state (first byte {bytes(data[:1])!r})")
        return cls.from_dict(json.loads(zlib.decompress(bytes(data[1:]))), config, assignors)

    def load_records(self, records: Iterable[dict], now_ms: int) -> None:
        """Rebuild groups from their records (the offsets store's consumer-group record dicts, see ``records``, and
        the ``offset_commit`` records of those groups; other records are skipped -- offsets of a group without
        consumer-group records are a classic group's), as Kafka's coordinator loads ``__consumer_offsets``; then, as
        its ``onLoaded``, start every member's session (and the rebalance timeout of a member still revoking) at
        ``now_ms``, refresh each group's metadata on its next heartbeat, and schedule the offsets cleanup (an Empty
        group counts as Empty since ``now_ms``).

        Kafka's coordinator also has the cluster's metadata image; the tracker has only what the records say, so the
        topics of each group's subscription metadata seed the topic image where it does not know them (the next
        ``topic_metadata`` event wins). A Stable group's current owners are where the next rebalance counts moved
        partitions from."""
        self._tick(now_ms)
        records = list(records)
        for r in records:
            if not R.is_record(r):
                continue
            group = self.groups.get(r["group_id"])
            if group is None:
                if r.get("tombstone"):
                    continue
                group = self.groups[r["group_id"]] = ConsumerGroup(r["group_id"])
            group.replay(r)
            if group.deleted:
                del self.groups[group.group_id]
                self.offsets.pop(group.group_id, None)
        for group_id, committed in O.latest(records).items():
            if group_id not in self.groups:
                continue
            mine = self.offsets.setdefault(group_id, {})
            for tp, o in committed.items():
                if o is None:
                    mine.pop(tp, None)
                else:
                    mine[tp] = o
            if not mine:
                del self.offsets[group_id]
        for group_id, group in self.groups.items():
            for name, (topic_id, partitions) in sorted(group.subscription_metadata.items()):
                if self.image.get(name) is None and self.image.known_ids.get(name) in (None, topic_id):
                    self.image.apply(name, partitions, topic_id)
            soft = self.soft[group_id] = _Soft()
            for m in group.members.values():
                self._schedule_session(group_id, m.member_id)
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group_id, m)
            soft.refresh_metadata = True
            soft.figures = _ledger_of_members(group, now_ms)
            if group.state() not in (STABLE, "Empty"):
                soft.rebalance_started = [None, "unknown", "in progress when the group was loaded"]
            soft.empty_since = now_ms if not group.members else None
            self._refresh_retention(group_id)

    # --- after a lost checkpoint (restored.py) ----------------------------------------------------------------
    def note_restored(self, now_ms: int) -> None:
        """Every group here was just rebuilt from the store (``load_records``) for a job whose checkpoint was lost:
        its first step says so, and its feed is watched for what the store did not hold (only timers can differ:
        the records are all there)."""
        session = self.config.group_consumer_session_timeout_ms
        for group_id, group in self.groups.items():
            timeouts = [(session, max(m.rebalance_timeout_ms, 0)) for m in group.members.values()]
            self.soft[group_id].restored = Restored(
                group.group_epoch, now_ms, window_end(now_ms, timeouts, session), set(group.members)
            )
            self._unannounced.add(group_id)

    def announcements(self) -> Outputs:
        """``group_restored`` for each group rebuilt from the store not yet announced (``handle`` and ``advance``
        start with them)."""
        if not self._unannounced:
            return []
        out: Outputs = []
        for group_id in sorted(self._unannounced):
            r = self.soft[group_id].restored if group_id in self.soft else None
            if r is not None and not r.announced and group_id in self.groups:
                r.announced = True
                group = self.groups[group_id]
                out.append(
                    outputs.consumer_group_restored(
                        group_id,
                        r.loaded_ts,
                        group.group_epoch,
                        group.assignment_epoch,
                        group.state(),
                        sorted(group.members),
                        len(self.offsets.get(group_id, {})),
                        {n: p for n, (_, p) in sorted(group.subscription_metadata.items())},
                    )
                )
        self._unannounced.clear()
        return out

    def _watch_restored(self, e: dict) -> Outputs:
        """The first sign in a restored group's feed of what the store did not hold: a ``restore_gap``, once. A
        member epoch comes only from the coordinator, so one ahead of the member's is the lost checkpoint's."""
        soft, group = self.soft[e["group_id"]], self.groups.get(e["group_id"])
        r = soft.restored
        if r is None or group is None:
            return []
        if self.now > r.until:
            soft.restored = None
            return []
        member_id = e.get("member_id") or ""
        epoch = e.get("member_epoch") if e["type"] == "consumer_heartbeat" else e.get("generation")
        if not member_id or epoch is None:
            return []
        member = group.members.get(member_id)
        if member is not None and epoch > member.member_epoch:
            reason = (
                f"member {member_id} sends epoch {epoch}, ahead of its {member.member_epoch}: the lost "
                f"checkpoint went on past the store (a session there ended sooner)"
            )
        elif member is None and epoch > 0:
            reason = f"member {member_id} (epoch {epoch}) is not in the group the store held"
        else:
            return []
        soft.restored = None
        return [outputs.restore_gap(e["group_id"], self.now, r, e, reason, False, "group_epoch")]

    # ================================================================ time and timers
    def _tick(self, ts: int | None) -> None:
        if ts is not None and ts > self.now:
            self.now = ts

    def _deadline(self, kind: int, group_id: str, member_id: str) -> int | None:
        soft = self.soft.get(group_id)
        if soft is None:
            return None
        if kind == _SESSION:
            return soft.sessions.get(member_id)
        if kind == _RETENTION:
            return soft.retention
        if kind in (_JOIN, _SYNC):
            return (soft.joins if kind == _JOIN else soft.syncs).get(member_id)
        entry = soft.rebalance.get(member_id)
        return entry[0] if entry is not None else None

    def _timer_deadline(self, timer: tuple) -> int | None:
        return self._deadline(*timer)

    def _arm(self, kind: int, group_id: str, member_id: str, deadline: int) -> None:
        self._timers.arm((kind, group_id, member_id), deadline)

    def _arm_all(self, group_id: str) -> None:
        soft = self.soft[group_id]
        for member_id, deadline in soft.sessions.items():
            self._arm(_SESSION, group_id, member_id, deadline)
        for member_id, (deadline, _) in soft.rebalance.items():
            self._arm(_REBALANCE, group_id, member_id, deadline)
        if soft.retention is not None:
            self._arm(_RETENTION, group_id, "", soft.retention)
        for kind, timers in ((_JOIN, soft.joins), (_SYNC, soft.syncs)):
            for member_id, deadline in timers.items():
                self._arm(kind, group_id, member_id, deadline)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        """The member's session: the consumer protocol's timeout, or a classic member's own (its JoinGroup's)."""
        soft = self.soft[group_id]
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        soft.last_heartbeat[member_id] = self.now
        if member is not None and member.classic is not None:
            if not self.config.classic_member_timeouts:
                soft.sessions.pop(member_id, None)
                return
            soft.sessions[member_id] = self.now + member.classic.session_timeout_ms
        else:
            soft.sessions[member_id] = self.now + self.config.group_consumer_session_timeout_ms
        self._arm(_SESSION, group_id, member_id, soft.sessions[member_id])

    def schedule_classic_timer(
        self, kind: int, group_id: str, member_id: str, timeout_ms: int, if_absent: bool
    ) -> None:
        """A classic member's join (``if_absent``: Kafka's scheduleIfAbsent) or sync timeout."""
        if not self.config.classic_member_timeouts:
            return
        timers = self.soft[group_id].joins if kind == _JOIN else self.soft[group_id].syncs
        if if_absent and member_id in timers:
            return
        timers[member_id] = self.now + timeout_ms
        self._arm(kind, group_id, member_id, timers[member_id])

    def cancel_classic_timer(self, kind: int, group_id: str, member_id: str) -> None:
        soft = self.soft.get(group_id)
        if soft is not None:
            (soft.joins if kind == _JOIN else soft.syncs).pop(member_id, None)

    def _schedule_rebalance(self, group_id: str, member: ConsumerGroupMember) -> None:
        deadline = self.now + member.rebalance_timeout_ms
        self.soft[group_id].rebalance[member.member_id] = [deadline, member.member_epoch]
        self._arm(_REBALANCE, group_id, member.member_id, deadline)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        soft = self.soft.get(group_id)
        if soft is not None:
            soft.sessions.pop(member_id, None)
            soft.rebalance.pop(member_id, None)
            soft.last_heartbeat.pop(member_id, None)
            soft.joins.pop(member_id, None)
            soft.syncs.pop(member_id, None)

    def _fire(self, kind: int, group_id: str, member_id: str) -> Outputs:
        group = self.groups.get(group_id)
        if kind == _RETENTION:
            return self._expire_offsets(group_id)
        member = group.members.get(member_id) if group is not None else None
        if kind == _SESSION:
            self.soft[group_id].sessions.pop(member_id, None)
            if member is not None:
                return self._fence(group, [member], "session timeout", "the member session expired")
            return []
        if kind in (_JOIN, _SYNC):
            timers = self.soft[group_id].joins if kind == _JOIN else self.soft[group_id].syncs
            timers.pop(member_id, None)
            if member is None:
                return []
            if kind == _JOIN:
                return self._fence(
                    group, [member], "join timeout", "the classic member failed to join within the rebalance timeout"
                )
            return self._fence(group, [member], "sync timeout", "the member failed to sync within timeout")
        deadline, epoch = self.soft[group_id].rebalance.pop(member_id)
        if member is not None and member.member_epoch == epoch:
            return self._fence(
                group,
                [member],
                "rebalance timeout",
                f"it failed to transition from epoch {epoch} within {member.rebalance_timeout_ms}ms",
            )
        return []

    # ================================================================ outputs
    def _pairs(self, a: Assignment) -> list[list]:
        return sorted([self.image.name_for(t) or t, p] for t, ps in a.items() for p in ps)

    def _answer(
        self,
        e: dict,
        error: str = "NONE",
        message: str | None = None,
        member_id: str | None = None,
        member_epoch: int = 0,
        heartbeat_interval_ms: int = 0,
        assignment: Assignment | None = None,
    ) -> Output:
        """Kafka's ConsumerGroupHeartbeatResponse (an error answer carries only the error, as Kafka's does; the
        request's member id is repeated for the tracker's readers)."""
        return outputs.consumer_heartbeat_response(
            e,
            self.now,
            error,
            message,
            member_id,
            member_epoch,
            heartbeat_interval_ms,
            None
            if assignment is None
            else [
                {"topic_id": t, "topic": self.image.name_for(t), "partitions": sorted(assignment[t])}
                for t in sorted(assignment)
            ],
        )

    # ================================================================ applying records
    def _apply(
        self,
        group: ConsumerGroup,
        records: list[dict],
        trigger: str | None = None,
        detail: str = "",
        reason: str | None = None,
    ) -> Outputs:
        """Replay ``records`` onto ``group`` (registering a new group), emit them, and what changed for a reader
        (``reason``: why the group's state changed, when it says more than the records)."""
        gid = group.group_id
        if gid not in self.groups:
            self.groups[gid] = group
            self.soft.setdefault(gid, _Soft())
        soft = self.soft[gid]
        before_state, before_epoch, before_target = group.state(), group.group_epoch, group.assignment_epoch
        before = dict(group.members)
        out: Outputs = []
        for r in records:
            group.replay(r)
            out.append(R.written(r, self.now))
        for r in records:
            if r["type"] == R.CURRENT_MEMBER_ASSIGNMENT and not r["tombstone"]:
                out.append(self._assignment(group.members[r["member_id"]], before.get(r["member_id"]), gid))
        if group.group_epoch > before_epoch and soft.rebalance_started is None and trigger is not None:
            soft.rebalance_started = [self.now, trigger, detail]
        if not group.deleted:
            self._follow_owners(group, before, records)
        if group.assignment_epoch != before_target and group.assignment_epoch >= 0:
            out.append(
                outputs.target_assignment(
                    gid,
                    self.now,
                    group.assignment_epoch,
                    soft.assignor,
                    {mid: self._pairs(a) for mid, a in sorted(group.target.items())},
                )
            )
        if group.deleted:
            del self.groups[gid]
            self.soft.pop(gid, None)
            self.offsets.pop(gid, None)
        after_state = group.state()
        if after_state != before_state:
            out.append(
                outputs.consumer_state_change(
                    gid, self.now, before_state, after_state, group.group_epoch, group.assignment_epoch, reason
                )
            )
            if after_state == "Empty":
                soft.empty_since = self.now
        # A rebalance ends when the group is settled again: Stable (every member on the target), or Empty. An epoch
        # bump that leaves the group Stable (new partitions straight to their one member) starts and ends one here.
        if soft.rebalance_started is not None and after_state in (STABLE, "Empty") and not group.deleted:
            out.append(self._rebalance_record(group))
        if not group.deleted and any(r["type"] in (R.MEMBER_METADATA, R.REGULAR_EXPRESSION) for r in records):
            self._refresh_retention(gid)  # the members or their subscriptions changed
        return out

    def _assignment(self, m: ConsumerGroupMember, old: ConsumerGroupMember | None, group_id: str) -> Output:
        """A member's current assignment as an output, with what it gained and lost since ``old``."""
        old_parts = set(self._keys(old.assigned_partitions)) if old is not None else set()
        new_parts = set(self._keys(m.assigned_partitions))
        return outputs.consumer_assignment(
            group_id,
            self.now,
            m.member_id,
            m.instance_id,
            m.member_epoch,
            m.previous_member_epoch,
            m.state.name,
            self._pairs(m.assigned_partitions),
            self._pairs(m.partitions_pending_revocation),
            self._named(new_parts - old_parts),
            self._named(old_parts - new_parts),
        )

    @staticmethod
    def _keys(a: Assignment) -> list[tuple[str, int]]:
        return [(t, p) for t, ps in a.items() for p in ps]

    def _named(self, keys: Iterable[tuple[str, int]]) -> list[list]:
        return sorted([self.image.name_for(t) or t, p] for t, p in keys)

    def _follow_owners(self, group: ConsumerGroup, before: dict[str, ConsumerGroupMember], records: list[dict]) -> None:
        """The figures' ledger after ``records``: a member whose assignment lost partitions was told to stop
        consuming them (those pending revocation included: the client pauses them at once), one that gained some
        was told to start; a removed member gives up everything."""
        figures = self.soft[group.group_id].figures
        now_holding: dict[str, set] = {}
        for r in records:
            if r["type"] != R.CURRENT_MEMBER_ASSIGNMENT:
                continue
            member = group.members.get(r["member_id"]) or before.get(r["member_id"])
            if member is None:
                continue
            parts = now_holding.setdefault(member.instance_id or member.member_id, set())
            if member.member_id in group.members:
                parts.update(self._keys(member.assigned_partitions))
        if now_holding:
            figures.assign(now_holding, self.now)
        figures.presence(self.now, bool(group.members))

    def _rebalance_record(self, group: ConsumerGroup) -> Output:
        """One line of rebalance history when the group is settled again: Stable (every member reconciled to its
        target) or Empty."""
        soft = self.soft[group.group_id]
        started = soft.rebalance_started or [None, "unknown", ""]
        soft.rebalance_started = None
        target = {key for m in group.members.values() for key in self._keys(m.assigned_partitions)}
        settled = soft.figures.settle(
            {m.instance_id or m.member_id: self._keys(m.assigned_partitions) for m in group.members.values()},
            self.now,
            wanted=target.__contains__,
        )
        return outputs.consumer_rebalance(
            group.group_id,
            self.now,
            group.group_epoch,
            group.assignment_epoch,
            soft.assignor,
            started[1],
            started[2],
            rebalance_fields(settled, started[0], self.now, lambda t: self.image.name_for(t) or t),
            [
                outputs.consumer_rebalance_member(m.member_id, m.instance_id, m.client_id, m.client_host)
                for m in group.members.values()
            ],
            {m.member_id: self._pairs(m.assigned_partitions) for m in group.members.values()},
        )

    # ================================================================ ConsumerGroupHeartbeat
    def _validate(self, e: dict) -> tuple[str, str] | None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (ConsumerGroupHeartbeat v1+: the client makes its
        member id, KIP-1082)."""

        def empty(value: str | None) -> bool:
            return value is not None and not value.strip(_JAVA_WHITESPACE)

        epoch = e["member_epoch"]
        if empty(e["member_id"]):
            return "INVALID_REQUEST", "MemberId can't be empty."
        if empty(e["group_id"]):
            return "INVALID_REQUEST", "GroupId can't be empty."
        if empty(e["instance_id"]):
            return "INVALID_REQUEST", "InstanceId can't be empty."
        if empty(e["rack_id"]):
            return "INVALID_REQUEST", "RackId can't be empty."
        if epoch == 0:
            if e["rebalance_timeout_ms"] == -1:
                return "INVALID_REQUEST", "RebalanceTimeoutMs must be provided in first request."
            if e["topic_partitions"] is None or e["topic_partitions"]:
                return "INVALID_REQUEST", "TopicPartitions must be empty when (re-)joining."
            if e["subscribed_topic_names"] is None and e["subscribed_topic_regex"] is None:
                return "INVALID_REQUEST", (
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if e["instance_id"] is None:
                return "INVALID_REQUEST", "InstanceId can't be null."
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return "INVALID_REQUEST", "MemberEpoch is invalid."
        assignor = e["server_assignor"]
        if assignor is not None and assignor not in self.config.group_consumer_assignors:
            return "UNSUPPORTED_ASSIGNOR", (
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.group_consumer_assignors)}."
            )
        return None

    def _heartbeat(self, e: dict) -> Outputs:
        invalid = self._validate(e)
        if invalid is not None:
            return [self._answer(e, *invalid)]
        try:
            if e["member_epoch"] in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(e)
            return self._join_or_heartbeat(e)
        except HeartbeatError as exc:  # raised before anything changed: the answer is all there is
            return [self._answer(e, exc.error, exc.message)]

    def _owned(self, e: dict) -> dict[str, frozenset] | None:
        """The request's owned partitions by topic id (a name the image never knew keeps a name-only key)."""
        if e["topic_partitions"] is None:
            return None
        owned: dict[str, set] = {}
        for tp in e["topic_partitions"]:
            topic_id = tp.get("topic_id") or self.image.id_for(tp["topic"]) or f"?{tp['topic']}"
            owned.setdefault(topic_id, set()).update(tp["partitions"])
        return {t: frozenset(ps) for t, ps in owned.items()}

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid, with KAFKA-19233 (epoch 0 always means (re)join)."""
        if epoch == 0:
            return
        if epoch > member.member_epoch:
            raise HeartbeatError(
                "FENCED_MEMBER_EPOCH",
                f"The consumer group member has a greater member epoch "
                f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions)
        ):
            raise HeartbeatError(
                "FENCED_MEMBER_EPOCH",
                f"The consumer group member has a smaller member epoch "
                f"({epoch}) than the one known by the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )

    def _join_or_heartbeat(self, e: dict) -> Outputs:
        gid, member_id, epoch, instance_id = e["group_id"], e["member_id"], e["member_epoch"], e["instance_id"]
        create = epoch == 0
        group = self.groups.get(gid)
        if group is None:
            if not create:
                raise HeartbeatError("GROUP_ID_NOT_FOUND", f"Consumer group {gid} not found.")
            group = ConsumerGroup(gid, self.config.initial_group_epoch)
        soft = self.soft.get(gid) or _Soft()
        limit = self.config.group_consumer_max_size
        if len(group.members) >= limit and member_id not in group.members:
            raise HeartbeatError(
                "GROUP_MAX_SIZE_REACHED", f"The consumer group has reached its maximum capacity of {limit} members."
            )
        owned = self._owned(e)
        records: list[dict] = []
        replaced: ConsumerGroupMember | None = None
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of group {gid}.")
                member = ConsumerGroupMember(member_id)
            self._check_epoch(member, epoch, owned)
        else:
            existing = group.static_member(instance_id)
            if create:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                else:
                    # a member of the classic protocol under that instance id is replaced at once (it sends no
                    # leave of its own kind first)
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.classic is None:
                        raise HeartbeatError(
                            "UNRELEASED_INSTANCE_ID",
                            f"Static member {member_id} with instance id "
                            f"{instance_id} cannot join the group because the instance id is owned "
                            f"by {existing.member_id} member.",
                        )
                    # The restarted instance takes over the departed member: same assignment, epoch 0.
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
            else:
                if existing is None:
                    raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Instance id {instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise HeartbeatError(
                        "FENCED_INSTANCE_ID",
                        f"Static member {member_id} with instance id "
                        f"{instance_id} was fenced by member {existing.member_id}.",
                    )
                self._check_epoch(existing, epoch, owned)
                member = existing
        old_ref = replaced if replaced is not None else member  # whom the updated member stands in for

        # 1. The member and its subscription; a new group, new topic names or a new metadata bump the epoch.
        names, regex = e["subscribed_topic_names"], e["subscribed_topic_regex"]
        updated = member.with_(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=e["rack_id"] if e["rack_id"] is not None else member.rack_id,
            rebalance_timeout_ms=e["rebalance_timeout_ms"]
            if e["rebalance_timeout_ms"] != -1
            else member.rebalance_timeout_ms,
            server_assignor=e["server_assignor"] if e["server_assignor"] is not None else member.server_assignor,
            subscribed_topic_names=frozenset(names) if names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=regex if regex is not None else member.subscribed_topic_regex,
            client_id=e["client_id"],
            client_host=e["client_host"],
            classic=None,  # a ConsumerGroupHeartbeat is the consumer protocol's
        )
        bump = group.group_epoch == 0
        trigger = "join" if member_id not in group.members else "subscription"
        if updated != member:
            records.append(R.member_subscription(gid, updated))
            if updated.subscribed_topic_names != member.subscribed_topic_names:
                bump = True
        refresh, regex_bump = self._regex_update(group, member, updated, records)
        bump |= regex_bump

        group_epoch = group.group_epoch
        if bump or soft.refresh_metadata:
            names_count = group.subscribed_topic_names(old_ref, updated)
            metadata = ConsumerGroup.compute_subscription_metadata(names_count, self.image)
            subscription_type = ConsumerGroup.subscription_type(
                group.subscribed_regexes(old_ref, updated),
                names_count,
                len(list(group._members_with(old_ref, updated))),
            )
            if metadata != group.subscription_metadata:
                if not bump:
                    trigger = "metadata"
                bump = True
                records.append(R.partition_metadata(gid, metadata))
            if bump:
                group_epoch += 1
                records.append(R.epoch(gid, group_epoch))
        else:
            metadata = group.subscription_metadata
            subscription_type = ConsumerGroup.subscription_type(
                group.subscribed_regexes(), group.subscribed_topic_names(), len(group.members)
            )

        # 2 and 3. The target (a new one if due) and the member reconciled towards it.
        reconciled, assignor_name = self._target_and_reconcile(
            group, updated, old_ref, group_epoch, metadata, subscription_type, owned, records
        )
        rebalance_timer = None if reconciled == updated else reconciled.state is MemberState.UNREVOKED_PARTITIONS
        updated = reconciled

        # All checks passed: the records are written and applied.
        self.soft.setdefault(gid, soft)
        if assignor_name is not None:
            soft.assignor = assignor_name
        if bump or soft.refresh_metadata:
            soft.refresh_metadata = False
        out: Outputs = []
        if replaced is not None:
            self._cancel_timers(gid, replaced.member_id)
            out.append(outputs.consumer_member_replaced(gid, self.now, member_id, replaced.member_id, instance_id))
        elif member_id not in group.members:
            out.append(
                outputs.consumer_member_joined(
                    gid,
                    self.now,
                    member_id,
                    instance_id,
                    e["client_id"],
                    e["client_host"],
                    sorted(updated.subscribed_topic_names),
                    updated.regex,
                )
            )
        detail = {
            "join": f"member {member_id} joined",
            "subscription": f"member {member_id} changed its subscription",
            "metadata": "the subscribed topics' metadata changed",
        }[trigger]
        out += self._apply(group, records, trigger, detail)
        if rebalance_timer is True:
            self._schedule_rebalance(gid, updated)
        elif rebalance_timer is False:
            soft.rebalance.pop(updated.member_id, None)
        self._schedule_session(gid, member_id)

        full = e["rebalance_timeout_ms"] != -1 and (names is not None or regex is not None) and owned is not None
        changed = member.assigned_partitions != updated.assigned_partitions
        out.append(
            self._answer(
                e,
                member_id=updated.member_id,
                member_epoch=updated.member_epoch,
                heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
                assignment=updated.assigned_partitions if epoch == 0 or full or changed else None,
            )
        )
        if refresh:
            out += self._ask_to_resolve(group, refresh)
        return out

    def _target_and_reconcile(
        self,
        group: ConsumerGroup,
        updated: ConsumerGroupMember,
        old_ref: ConsumerGroupMember,
        group_epoch: int,
        metadata: dict,
        subscription_type,
        owned: dict | None,
        records: list[dict],
    ) -> tuple[ConsumerGroupMember, str | None]:
        """Steps 2 and 3 of a member's request, a ConsumerGroupHeartbeat's or a classic member's JoinGroup
        (``classic_members``), as Kafka shares them: a group epoch newer than the target's computes the new target
        -- unless the last one is younger than group.consumer.assignment.interval.ms (Kafka 4.3+), then the member
        reconciles to the last -- and the member is reconciled towards it (``owned``: what it says it owns). The
        records go to ``records``; returns the member reconciled and the assignor that computed a target, if one
        did. ``old_ref``: the member ``updated`` stands in for (a static member it replaced)."""
        gid, interval = group.group_id, self.config.group_consumer_assignment_interval_ms
        assignor_name = None
        if group_epoch > group.assignment_epoch and can_compute_next_target_assignment(
            group.assignment_timestamp, interval, self.now
        ):
            assignor_name = group.preferred_server_assignor(old_ref, updated) or self.config.group_consumer_assignors[0]
            updates: dict[str, ConsumerGroupMember | None] = {updated.member_id: updated}
            previous_id = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
            if previous_id is not None and previous_id != updated.member_id:
                updates[previous_id] = None
            try:
                result = build_target_assignment(
                    gid,
                    group_epoch,
                    self._assignor(assignor_name),
                    group.members,
                    group.static_members,
                    metadata,
                    subscription_type,
                    group.target,
                    group.resolved_regexes,
                    self.image,
                    updates,
                    group.member_slots,
                    # Its time, in the record as Kafka 4.3+ writes it, where an interval needs it; Kafka up to 4.2
                    # (the default interval, 0) writes the record without it.
                    self.now if interval else 0,
                )
            except (PartitionAssignorError, ValueError, KeyError) as exc:  # the assignor's refusal: the request's error
                raise HeartbeatError(
                    "UNKNOWN_SERVER_ERROR", f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}"
                ) from None
            records += result.records
            target_epoch, target = group_epoch, result.assignment.get(updated.member_id, {})
        else:
            target_epoch, target = group.assignment_epoch, group.target_for(updated.member_id, updated.instance_id)
        if updated.is_reconciled_to(target_epoch):
            return updated, assignor_name
        reconciled = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
        if reconciled != updated:
            records.append(R.current_assignment(gid, reconciled))
        return reconciled, assignor_name

    def _assignor(self, name: str):
        if self._assignors is not None and name in self._assignors:
            return self._assignors[name]
        return get_server_assignor(name)

    # ---------------------------------------------------------------- regular expressions
    def _regex_update(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, records: list[dict]
    ) -> tuple[set[str] | None, bool]:
        """Kafka's maybeUpdateRegularExpressions: (regexes to resolve now, whether to bump the epoch)."""
        old, new = member.regex, updated.regex
        bump = require_refresh = False
        if old != new:
            if old and group.num_subscribed_members(old) == 1:
                records.append(R.regular_expression(group.group_id, old, None))
            if new:
                if group.num_subscribed_members(new) == 0:
                    why = regex_error(new)
                    if why is not None:
                        raise HeartbeatError(
                            "INVALID_REGULAR_EXPRESSION",
                            f"SubscribedTopicRegex `{new}` is not a valid regular expression: {why}.",
                        )
                    require_refresh = True
                else:
                    bump = new in group.resolved_regexes
            else:  # the member cleared its regex: the regex's topics leave its subscription at once
                bump = True
        current = group.subscribed_regexes()
        if not require_refresh and not current:
            return None, bump
        soft = self.soft.get(group.group_id)
        if soft is not None and soft.regexes_asked:  # a resolution under way: the new regex waits for the next
            return None, bump
        if group.resolved_regexes:
            last = min(r.timestamp for r in group.resolved_regexes.values())
            if self.now <= last + REGEX_BATCH_REFRESH_INTERVAL_MS:
                return None, bump
        counts = dict(current)
        if old:
            counts[old] = counts.get(old, 0) - 1
        if new:
            counts[new] = counts.get(new, 0) + 1
        counts = {r: c for r, c in counts.items() if c > 0}
        require_refresh |= len(counts) != len(group.resolved_regexes)
        version = min((r.version for r in group.resolved_regexes.values()), default=0)
        require_refresh |= version < self.image.new_topics_version
        return (set(counts) if require_refresh and counts else None), bump

    def _ask_to_resolve(self, group: ConsumerGroup, regexes: set[str]) -> Outputs:
        """After a request that asked for it: the group's regexes resolved -- at once, or (regex.resolution.events)
        when a ``regex_resolved`` event says the broker wrote its resolution, as Kafka's asynchronous task does."""
        if not self.config.regex_resolution_events:
            return self._resolve_regexes(group, regexes)
        self.soft[group.group_id].regexes_asked = sorted(regexes)
        return []

    def _regex_resolved(self, e: dict) -> Outputs:
        """Not a request: an observer saw the broker write the resolution a request asked for
        (``events.RegexResolved``; Kafka's handleRegularExpressionsResult)."""
        gid = e["group_id"]
        group, soft = self.groups.get(gid), self.soft.get(gid)
        if group is None or soft is None or not soft.regexes_asked:
            return [outputs.ignored_event(gid, self.now, "regex_resolved", "no resolution was asked for")]
        regexes, soft.regexes_asked = set(soft.regexes_asked), []
        return self._resolve_regexes(group, regexes, e.get("started_ms"))

    def _resolve_regexes(self, group: ConsumerGroup, regexes: set[str], started: int | None = None) -> Outputs:
        """Kafka's asynchronous regex refresh (refreshRegularExpressions, then handleRegularExpressionsResult), run
        right after the request that asked for it or when told the broker's was written (``_ask_to_resolve``):
        ConsumerGroupRegularExpression records, and a new epoch when the topics (or their metadata) changed. Each
        record's time is when the resolution started (``started``, the broker's, when told; else now): the next
        refresh waits 10 s from it."""
        if group.group_id not in self.groups:
            return []
        gid = group.group_id
        names = {n: list(c) for n, c in group.subscribed_topic_names().items()}
        records, bump = [], False
        for regex in sorted(regexes):
            if group.num_subscribed_members(regex) == 0:
                continue
            topics = resolve(regex, self.image.by_name)
            old = group.resolved_regexes.get(regex)
            old_topics = old.topics if old is not None else frozenset()
            if old_topics != topics:
                bump = True
                for t in old_topics:
                    names.setdefault(t, [0, 0])[1] -= 1
                for t in topics:
                    names.setdefault(t, [0, 0])[1] += 1
            records.append(R.regular_expression(gid, regex, topics, self.image.version, started or self.now))
        metadata = ConsumerGroup.compute_subscription_metadata(
            [n for n, c in names.items() if c[0] > 0 or c[1] > 0], self.image
        )
        if metadata != group.subscription_metadata:
            bump = True
            records.append(R.partition_metadata(gid, metadata))
        if bump:
            records.append(R.epoch(gid, group.group_epoch + 1))
            self.soft[gid].refresh_metadata = False
        if records:
            return self._apply(group, records, "regex", f"regular expressions {', '.join(sorted(regexes))} resolved")
        return []

    # ---------------------------------------------------------------- leaving and fencing
    def _leave(self, e: dict) -> Outputs:
        gid, member_id, epoch, instance_id = e["group_id"], e["member_id"], e["member_epoch"], e["instance_id"]
        group = self.groups.get(gid)
        if group is None:
            raise HeartbeatError("GROUP_ID_NOT_FOUND", f"Consumer group {gid} not found.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of group {gid}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise HeartbeatError("UNKNOWN_MEMBER_ID", f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise HeartbeatError(
                    "FENCED_INSTANCE_ID",
                    f"Static member {member_id} with instance id "
                    f"{instance_id} was fenced by member {member.member_id}.",
                )
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # A temporary leave: the member keeps its assignment until it rejoins or its session expires.
                leaving = member.with_(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
                out = [outputs.consumer_member_left(gid, self.now, member_id, instance_id, "static leave", True)]
                out += self._apply(group, [R.current_assignment(gid, leaving)])
                return out + [self._answer(e, member_id=member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)]
        out = [outputs.consumer_member_left(gid, self.now, member_id, instance_id, "leave", False)]
        return out + self._fence(group, [member], None, "left the group", answer=e)

    def _fence(
        self,
        group: ConsumerGroup,
        members: list[ConsumerGroupMember],
        reason: str | None,
        why: str,
        answer: dict | None = None,
    ) -> Outputs:
        """Kafka's consumerGroupFenceMembers: remove the members' records, drop regexes nobody else uses, refresh
        the subscription metadata and bump the group epoch -- or, when only members of the classic protocol remain,
        downgrade the group to a classic group (classic_members.py)."""
        gid = group.group_id
        soft = self.soft[gid]
        if classic_members.downgrade_allowed(self, group, members):
            return classic_members.downgrade(self, group, members, reason, why, answer)
        records = []
        for m in members:
            records += [
                R.current_assignment_tombstone(gid, m.member_id),
                R.target_assignment(gid, m.member_id, None),
                R.member_subscription_tombstone(gid, m.member_id),
            ]
        counts: dict[str, int] = {}
        for m in members:
            if m.regex:
                counts[m.regex] = counts.get(m.regex, 0) + 1
        deleted = set()
        for regex, count in counts.items():
            if group.num_subscribed_members(regex) == count:
                records.append(R.regular_expression(gid, regex, None))
                deleted.add(regex)
        names = group.subscribed_topic_names(removed=members, removed_regexes=deleted)
        metadata = ConsumerGroup.compute_subscription_metadata(names, self.image)
        if metadata != group.subscription_metadata:
            records.append(R.partition_metadata(gid, metadata))
        records.append(R.epoch(gid, group.group_epoch + 1))
        if self.config.empty_group_assignment_epoch and len(members) == len(group.members):
            records.append(R.target_assignment_epoch(gid, group.group_epoch + 1))  # KAFKA-20442 (Kafka 4.4)
        out: Outputs = []
        for m in members:
            if reason is not None:
                out.append(
                    outputs.consumer_member_expired(
                        gid, self.now, m.member_id, m.instance_id, reason, why, soft.last_heartbeat.get(m.member_id)
                    )
                )
            self._cancel_timers(gid, m.member_id)
        trigger = "leave" if reason is None else "expiry"
        out += self._apply(
            group,
            records,
            trigger,
            f"member {', '.join(m.member_id for m in members)} {'left' if reason is None else 'fenced: ' + why}",
        )
        if answer is not None:
            out.append(self._answer(answer, member_id=answer["member_id"], member_epoch=answer["member_epoch"]))
        return out

    # ================================================================ topics and deletion
    def _topic_metadata(self, e: dict) -> Outputs:
        name = e["topic"]
        if not self.image.apply(name, e["partitions"], e.get("topic_id"), e.get("partition_racks")):
            return []
        # Kafka's onNewMetadataImage: every group subscribed to the topic refreshes its metadata on its next
        # heartbeat (regex groups also re-resolve when a topic was created; see _regex_update).
        for gid, group in self.groups.items():
            if name in group.subscribed_topic_names():
                self.soft[gid].refresh_metadata = True
        return []

    def _session_expired(self, e: dict) -> Outputs:
        """Not a request: an observer saw the broker's session timer fire for the member (``events.SessionExpired``);
        Kafka's timer fences it (consumerGroupFenceMemberOperation, "the member session expired")."""
        gid, member_id = e["group_id"], e["member_id"]
        group = self.groups.get(gid)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return [outputs.ignored_event(gid, self.now, "session_expired", f"no member {member_id} in the group")]
        return self._fence(group, [member], "session timeout", "the member session expired")

    def _delete_group(self, e: dict) -> Outputs:
        """DeleteGroups: only an Empty group goes; Kafka's tombstones for all its records, in Kafka's order."""
        gid = e["group_id"]
        group = self.groups.get(gid)
        if group is None:
            return [outputs.delete_group_response(gid, self.now, "GROUP_ID_NOT_FOUND")]
        if group.state() != "Empty":
            return [outputs.delete_group_response(gid, self.now, "NON_EMPTY_GROUP")]
        # GroupCoordinatorShard.deleteGroups: the offsets' tombstones (deleteAllOffsets), then the group's.
        out: Outputs = [O.tombstone(gid, self.now, tp, "group deleted") for tp in sorted(self.offsets.pop(gid, {}))]
        out += self._apply(group, self._tombstones(group), reason="group deleted")
        out.append(outputs.delete_group_response(gid, self.now, "NONE"))
        return out

    def _tombstones(self, group: ConsumerGroup) -> list[dict]:
        """ConsumerGroup.createGroupTombstoneRecords: the members in its member table's order."""
        gid = group.group_id
        members = timeline_hash_order(list(group.members), capacity=group.member_slots)
        records = [R.current_assignment_tombstone(gid, m) for m in members]
        records += [R.target_assignment(gid, m, None) for m in members]
        records.append(R.target_assignment_epoch(gid, None))
        records += [R.member_subscription_tombstone(gid, m) for m in members]
        records += [R.regular_expression(gid, r, None) for r in group.resolved_regexes]
        records += [R.partition_metadata(gid, None), R.epoch(gid, None)]
        return records

    # ================================================================ OffsetCommit and the offsets cleanup
    def _commit(self, e: dict) -> Outputs:
        """OffsetMetadataManager.commitOffset for a consumer group. A commit does not extend the member's session
        (Kafka reschedules the heartbeat only for classic groups)."""
        gid = e["group_id"]
        group = self.groups.get(gid)
        if group is None:
            if e["generation"] < 0:
                # Kafka creates a simple classic group for it; routing.GroupModel gives it to the classic model.
                return [
                    outputs.ignored_event(
                        gid,
                        self.now,
                        "commit",
                        "an OffsetCommit without a member epoch to a "
                        "group that does not exist creates a simple classic group, which is "
                        "the classic model's",
                    )
                ]
            return [self._commit_answer(e, O.unknown_group_error(e))]
        error = self._commit_error(group, e)
        if error is not None:
            return [self._commit_answer(e, error)]
        refused = [O.too_large(o, self.config.offset_metadata_max_bytes) for o in e["offsets"]]
        stored = self.offsets.setdefault(gid, {})
        out: Outputs = O.store(
            stored, gid, [o for o, no in zip(e["offsets"], refused) if not no], self.now, e["retention_ms"]
        )
        if not stored:
            del self.offsets[gid]
        out.append(self._commit_answer(e, "NONE", refused))
        self._refresh_retention(gid)
        return out

    @staticmethod
    def _commit_error(group: ConsumerGroup, e: dict) -> str | None:
        """ConsumerGroup.validateOffsetCommit (Kafka 4.0), for OffsetCommit (not TxnOffsetCommit): an epoch < 0 is
        the admin client's (or a consumer's without group management), fine while the group has no member; else
        the member must exist and commit at its current epoch. The instance id is not checked. A mismatch is
        STALE_MEMBER_EPOCH, ILLEGAL_GENERATION for a member of the classic protocol (which may commit with any
        OffsetCommit version)."""
        epoch, member_id = e["generation"], e["member_id"]
        if epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return "UNKNOWN_MEMBER_ID"
        version = e.get("api_version")
        if version is not None and version < OFFSET_COMMIT_MIN_VERSION and member.classic is None:
            return "UNSUPPORTED_VERSION"
        if epoch != member.member_epoch:
            return "ILLEGAL_GENERATION" if member.classic is not None else "STALE_MEMBER_EPOCH"
        return None

    def _commit_answer(self, e: dict, error: str, refused: list[bool] | None = None) -> Output:
        """OffsetCommitResponse, shaped as the classic model's ``commit_response``: a request-level error is every
        partition's error; ``refused``: which entries' metadata was too large."""
        if error != "NONE":
            return outputs.request_refused(e, self.now, error)
        refused = refused or [False] * len(e["offsets"])
        return outputs.commit_response(
            e,
            self.now,
            error,
            [
                [o["topic"], o["partition"], "OFFSET_METADATA_TOO_LARGE" if no else "NONE"]
                for o, no in zip(e["offsets"], refused)
            ],
        )

    @staticmethod
    def _retained(group: ConsumerGroup) -> set[str]:
        """Topics whose offsets never expire: those the group is subscribed to (ConsumerGroup.isSubscribedToTopic,
        by name or through a resolved regular expression)."""
        return set(group.subscribed_topic_names()) if group.members else set()

    def _refresh_retention(self, group_id: str) -> None:
        """When the cleanup pass next has work for the group: the first offset of a topic it is not subscribed to
        to expire (from its commit time, ConsumerGroup.offsetExpirationCondition), or, for an Empty group without
        offsets, its deletion."""
        group, soft = self.groups.get(group_id), self.soft.get(group_id)
        if group is None or soft is None:
            return
        offsets = self.offsets.get(group_id)
        deadline = None
        if offsets:
            kept, retention = self._retained(group), self.config.offsets_retention_ms
            deadline = min(
                (O.expiry_time(o, o.commit_timestamp, retention) for tp, o in offsets.items() if tp[0] not in kept),
                default=None,
            )
        elif not group.members:
            since = soft.empty_since if soft.empty_since is not None else self.now
            deadline = since + self.config.offsets_retention_check_interval_ms
        if deadline != soft.retention:
            soft.retention = deadline
            if deadline is not None:
                self._arm(_RETENTION, group_id, "", deadline)

    def _expire_offsets(self, group_id: str) -> Outputs:
        """GroupCoordinatorShard.cleanupGroupMetadata for one group: cleanupExpiredOffsets, then maybeDeleteGroup --
        an Empty group whose offsets are all gone is deleted (its tombstones, as DeleteGroups writes them)."""
        group, soft = self.groups[group_id], self.soft[group_id]
        soft.retention = None
        offsets = self.offsets.get(group_id, {})
        kept, retention = self._retained(group), self.config.offsets_retention_ms
        out: Outputs = []
        for tp in sorted(
            tp
            for tp, o in offsets.items()
            if tp[0] not in kept and self.now >= O.expiry_time(o, o.commit_timestamp, retention)
        ):
            del offsets[tp]
            out.append(O.tombstone(group_id, self.now, tp, "retention"))
        if not offsets:
            self.offsets.pop(group_id, None)
            if not group.members:
                return out + self._apply(group, self._tombstones(group), reason="empty group without offsets")
        self._refresh_retention(group_id)
        return out

    # ================================================================ for the protocol switch (routing.py)
    def heartbeat_error(self, e: dict) -> tuple[str, str] | None:
        """Kafka's request validation, which comes before the group is looked up: (error, message) or None."""
        return self._validate(e)

    def remove_empty_group(self, group_id: str, now_ms: int) -> Outputs:
        """Kafka's maybeDeleteEmptyConsumerGroup (a JoinGroup of the classic protocol for an Empty consumer group):
        the group's tombstones, as DeleteGroups writes them; the outputs. Its committed offsets stay (Kafka keeps
        them for the group that replaces it): take them from ``offsets`` first."""
        group = self.groups[group_id]
        if group.state() != "Empty":
            raise ValueError(f"group {group_id} is not empty")
        self._tick(now_ms)
        return self._apply(group, self._tombstones(group))

    def adopt_offsets(self, group_id: str, offsets: Mapping[Partition, CommittedOffset]) -> None:
        """Offsets the group held under the classic model (Kafka keeps them when a consumer group replaces an Empty
        classic group); from now on they expire by this model's rule."""
        if group_id not in self.groups or not offsets:
            return
        mine = self.offsets.setdefault(group_id, {})
        for tp, o in offsets.items():
            mine.setdefault(tp, o)
        self._refresh_retention(group_id)

    def seed_topics(self, sizes: Mapping[str, int], ids: Mapping[str, str] | None = None) -> None:
        """Topic sizes known before this model held the group (the classic coordinator keeps names and counts, and
        the ids events gave it)."""
        for name, partitions in sorted(sizes.items()):
            if partitions > 0 and self.image.get(name) is None:
                self.image.apply(name, partitions, (ids or {}).get(name))

    # Event type -> its handler (Kafka's rules for the request; topic metadata and an observed session expiry are the
    # tracker's own). Every request ``handle`` answers goes through this table; any other type is ignored, and says so.
    HANDLERS: dict[str, Callable[["ConsumerGroupCoordinator", dict], Outputs]] = {
        "consumer_heartbeat": _heartbeat,
        "commit": _commit,
        "topic_metadata": _topic_metadata,
        "delete_group": _delete_group,
        "session_expired": _session_expired,
        "regex_resolved": _regex_resolved,
        # a classic-protocol member's requests (classic_members.py); routing.py sends them only for a group held here
        "join": classic_members.join,
        "sync": classic_members.sync,
        "heartbeat": classic_members.heartbeat,
        "leave": classic_members.leave,
    }


def _ledger_of_members(group: ConsumerGroup, now: int) -> Ledger:
    """The figures' ledger of a loaded group: its members hold their assigned partitions, and those are where the
    next rebalance counts moved partitions from."""
    ledger = Ledger()
    for m in group.members.values():
        ledger.take(m.instance_id or m.member_id, [(t, p) for t, ps in m.assigned_partitions.items() for p in ps], now)
    ledger.owners = dict(ledger.holder)
    ledger.presence(now, bool(group.members))
    return ledger
