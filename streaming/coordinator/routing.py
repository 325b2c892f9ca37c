"""Which model runs a group: the classic coordinator or the consumer-protocol (KIP-848) one, and the switch between
them.

A group is run by the model its state belongs to (``ConsumerGroupCoordinator`` state starts with 0x43, the classic
``GroupCoordinator``'s with its format version, 1 or 2) or, with no state yet, by its first event: a
``consumer_heartbeat``, or a ``topic_metadata`` with a topic id (a KIP-848 group's topics, as the cluster feed sends
them first), starts the consumer model, anything else the classic one. ``topic_metadata`` and ``delete_group``
go to whichever model holds the group.

A request of the other protocol gets Kafka's answer (``GroupMetadataManager``, Kafka 4.x; docs/kip848.md):

- ``consumer_heartbeat`` for a classic group: once the request is valid, an **Empty** classic group is replaced by
  a consumer group when the heartbeat joins (member epoch 0; ``maybeDeleteEmptyClassicGroup``: its group metadata
  tombstone, then the new group). A non-empty one is **upgraded** online (``convertToConsumerGroup``) when
  ``group.consumer.migration.policy`` allows it (``upgrade`` or ``bidirectional``, the default), the group uses the
  ``consumer`` protocol type, fits ``group.consumer.max.size`` and no assignment carries user data: its members
  waiting in a round are told REBALANCE_IN_PROGRESS, its GroupMetadata tombstone is written, then the consumer group
  with them as members of the classic protocol (``consumer.classic_members.upgrade``, from
  ``migration.classic_group_view``), then the heartbeat is the consumer model's. Otherwise ``GROUP_ID_NOT_FOUND``
  with Kafka's message ("Group g is not a consumer group." for a heartbeat that does not join).
- a classic ``join`` for a consumer group: an **Empty** consumer group is replaced by a classic group
  (``maybeDeleteEmptyConsumerGroup``: all its tombstones, then the classic join). Otherwise the ``join``, ``sync``,
  ``heartbeat`` and ``leave`` are the consumer model's: a member of the classic protocol in a consumer group
  (``consumer.classic_members``).
- the **downgrade**: when the last member of the consumer protocol leaves or is fenced and members of the classic
  protocol remain, the consumer model writes the group's tombstones and hands the classic group they form over
  (``ConsumerGroupCoordinator.downgraded``); this routing makes it the classic model's (``migration.downgrade_into``:
  its GroupMetadata, written right after the tombstones, as Kafka's one batch; then its rebalance). A timer due
  before an event may do it, so they fire first. So does a classic JoinGroup of a static member taking the place of
  the last member of the consumer protocol (``validateOnlineDowngradeWithReplacedMember``,
  ``classic_members.downgrade_replacing``): the JoinGroup's records, the tombstones with the new member in the old
  one's place, the classic group Stable at the group epoch, the new member with the old one's target -- rebalancing
  only if the target was stale -- then the JoinGroup's answer.

A ``commit`` (OffsetCommit) goes to whichever model holds the group: for a consumer group its ``generation`` is the
member epoch (Kafka's ``generationIdOrMemberEpoch``), checked by the consumer model (``UNKNOWN_MEMBER_ID``,
``STALE_MEMBER_EPOCH``; -1 is an admin commit, accepted while the group has no member). A commit to a group that
does not exist goes to the classic model, as before: with generation -1 it creates a simple classic group (Kafka
does the same), otherwise it is refused.

Each switch is a ``protocol_switch`` output (``from``, ``to``, ``reason``: "upgrade: ..." and "downgrade: ..." for the
online ones). Offsets the replaced group held stay in the store, as Kafka keeps them, and move to the new group's
model, which expires them by its own rule from then on. Topic sizes one model knew seed the other.

This is the only routing: the streaming job runs one ``GroupModel`` per group id (``streaming/spark/group_step.py``),
and the views run a whole recorded feed through ``GroupModels`` (``run_feed``), so both show the same outputs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, fields
from typing import Iterable, Mapping

from streaming.coordinator import outputs
from streaming.coordinator.config import CoordinatorConfig
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, is_consumer_state
from streaming.coordinator.consumer import classic_members
from streaming.coordinator.consumer.config import INT_MAX
from streaming.coordinator.coordinator import GroupCoordinator
from streaming.coordinator.events import parse_event
from streaming.coordinator.consumer import records as R
from streaming.coordinator.migration import classic_group_view, downgrade_into
from streaming.coordinator.outputs import Outputs
from streaming.coordinator.state import GroupState

CLASSIC, CONSUMER = "classic", "consumer"
# The broker's offsets settings: both models keep committed offsets (Kafka's one OffsetMetadataManager).
SHARED_FIELDS = ("offsets_retention_minutes", "offsets_retention_check_interval_ms", "offset_metadata_max_bytes")
_SHARED = set(SHARED_FIELDS) | {name.replace("_", ".") for name in SHARED_FIELDS}
_CONSUMER_FIELDS = {f.name for f in fields(ConsumerGroupConfig)} - set(SHARED_FIELDS)
_CONSUMER_FIELDS |= {name.replace("_", ".") for name in _CONSUMER_FIELDS}  # initial.group.epoch, as Kafka's are
_SESSION_KEYS = ("group.consumer.session.timeout.ms", "group_consumer_session_timeout_ms")


@dataclass(frozen=True)
class Configs:
    """Both models' settings. ``from_properties``: ``group.consumer.*`` keys are the consumer protocol's
    (``ConsumerGroupConfig``), the offsets settings (``offsets.retention.minutes``,
    ``offsets.retention.check.interval.ms``, ``offset.metadata.max.bytes``) both models', the rest the classic
    coordinator's (``CoordinatorConfig``)."""

    classic: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    consumer: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)

    @classmethod
    def from_properties(cls, props: Mapping[str, object] | None) -> "Configs":
        consumer = {
            k: v
            for k, v in (props or {}).items()
            if str(k).startswith("group.consumer.") or k in _CONSUMER_FIELDS or k in _SHARED
        }
        classic = CoordinatorConfig.from_properties(
            {k: v for k, v in (props or {}).items() if k not in consumer or k in _SHARED}
        )
        if not classic.expire_members and not any(k in _SESSION_KEYS for k in consumer):
            # tracker.expire.members=false (a feed with no heartbeats, e.g. the cluster feed) holds for both
            # protocols: a consumer-protocol member is removed only when the feed says so.
            consumer["group.consumer.session.timeout.ms"] = INT_MAX
        if not classic.expire_members and "classic.member.timeouts" not in consumer:
            consumer["classic.member.timeouts"] = "false"  # nor a classic member's session, join or sync timeout
        if not classic.expire_members and "regex.resolution.events" not in consumer:
            consumer["regex.resolution.events"] = "true"  # nor resolve a regex before the feed says the broker did
        return cls(classic, ConsumerGroupConfig.from_properties(consumer))

    @classmethod
    def of(cls, classic: CoordinatorConfig) -> "Configs":
        """The classic settings, and the consumer protocol's defaults with the same offsets settings."""
        return cls(classic, ConsumerGroupConfig(**{name: getattr(classic, name) for name in SHARED_FIELDS}))


def protocol_of(state: bytes | None) -> str | None:
    if state is None:
        return None
    return CONSUMER if is_consumer_state(state) else CLASSIC


class GroupModel:
    """The model of one group (one key of the job): ``handle``, ``advance``, ``next_deadline``, ``to_bytes``."""

    def __init__(
        self,
        configs: Configs | None = None,
        model: GroupCoordinator | ConsumerGroupCoordinator | None = None,
        topics: "ClusterTopics | None" = None,
    ) -> None:
        self.configs = configs or Configs()
        self.model = model
        self.topics = topics  # GroupModels' topic metadata without a group id: every model made here starts from it

    @classmethod
    def from_bytes(cls, data: bytes | None, configs: Configs | None = None) -> "GroupModel":
        configs = configs or Configs()
        if data is None:
            return cls(configs)
        if is_consumer_state(data):
            consumer = ConsumerGroupCoordinator.from_bytes(data, configs.consumer)
            consumer.classic_group_max_size = configs.classic.group_max_size
            return cls(configs, consumer)
        return cls(configs, GroupCoordinator.from_bytes(data, configs.classic))

    @property
    def protocol(self) -> str | None:
        if self.model is None:
            return None
        return CONSUMER if isinstance(self.model, ConsumerGroupCoordinator) else CLASSIC

    def to_bytes(self) -> bytes | None:
        return None if self.is_blank() else self.model.to_bytes()

    def is_blank(self) -> bool:
        return self.model is None or self.model.is_blank()

    def next_deadline(self) -> int | None:
        return None if self.model is None else self.model.next_deadline()

    def advance(self, now_ms: int) -> Outputs:
        return [] if self.model is None else self._downgraded(self.model.advance(now_ms))

    def announcements(self) -> Outputs:
        """``group_restored`` for a group rebuilt from the store, in its first step (``restored.py``)."""
        return [] if self.model is None else self.model.announcements()

    def handle(self, event: dict) -> Outputs:
        kind = event["type"]
        if self.model is None:
            if kind == "log_end":  # a sample alone makes no group
                return [outputs.log_end(event)]
            if kind == "client_report":  # nor does a client's report
                return [outputs.client_report(event)]
            if kind == "regex_resolved":  # nor the broker's resolution of a group it does not hold
                reason = "no resolution was asked for"
                return [outputs.ignored_event(event["group_id"], event.get("ts") or 0, kind, reason)]
            if kind == "topic_metadata" and not event.get("group_id") and self.topics is not None:
                return []  # already in ``topics``, which the model copies when the group's request comes
            # A topic id is a consumer-protocol fact (the cluster feed's topics for a KIP-848 group): the consumer
            # model keeps it, where the classic one, and a switch's seeding, would keep the name and size only.
            consumer = kind == "consumer_heartbeat" or (kind == "topic_metadata" and event.get("topic_id"))
            self.model = self._new(CONSUMER if consumer else CLASSIC)
            return self.model.handle(event)
        out: Outputs = []
        if self.protocol == CONSUMER and event.get("ts") is not None:
            out = self.advance(event["ts"] - 1)  # a timer due first may downgrade the group
        if self.protocol == CLASSIC and kind == "consumer_heartbeat":
            return out + self._consumer_request_to_classic(event)
        if self.protocol == CONSUMER and kind in ("join", "sync", "heartbeat", "leave", "commit"):
            return out + self._downgraded(self._classic_request_to_consumer(event))
        return out + self._downgraded(self.model.handle(event))

    def _downgraded(self, out: Outputs) -> Outputs:
        """After the consumer model ran: the classic group its last consumer-protocol member's departure made
        (consumer/classic_members.py), now the classic model's -- its GroupMetadata record right after the
        consumer group's tombstones, as Kafka writes them in one batch, then its rebalance."""
        if self.protocol != CONSUMER or not self.model.downgraded:
            return out
        consumer: ConsumerGroupCoordinator = self.model
        gid, view = consumer.downgraded.popitem()  # this model's one group
        classic = self._new(CLASSIC)
        converted = downgrade_into(classic, view)
        self.model = classic
        last_record = max(
            (i for i, o in enumerate(out) if R.is_record(o) or o["type"] == "state_change"), default=len(out) - 1
        )
        policy = f"group.consumer.migration.policy={self.configs.consumer.group_consumer_migration_policy}"
        reason = (
            f"{view['switch']} ({policy})"
            if view.get("switch")
            else f"downgrade: the last member of the consumer protocol left; its {len(view['members'])} members of "
            f"the classic protocol form a classic group ({policy}), which rebalances"
        )
        switch = outputs.protocol_switch(gid, view["ts"], CONSUMER, CLASSIC, reason)
        return out[: last_record + 1] + [switch] + converted + out[last_record + 1 :]

    # ------------------------------------------------------------------------------------------------------------
    def _new(self, protocol: str):
        if self.topics is not None:
            model = self.topics.blank(protocol)
        else:
            model = (
                ConsumerGroupCoordinator(self.configs.consumer)
                if protocol == CONSUMER
                else GroupCoordinator(self.configs.classic)
            )
        if protocol == CONSUMER:
            model.classic_group_max_size = self.configs.classic.group_max_size
        return model

    @staticmethod
    def _switch(e: dict, frm: str, to: str, reason: str) -> outputs.ProtocolSwitch:
        return outputs.protocol_switch(e["group_id"], e.get("ts") or 0, frm, to, reason)

    def _consumer_request_to_classic(self, e: dict) -> Outputs:
        """Kafka's consumerGroupHeartbeat -> getOrMaybeCreateConsumerGroup for a group the classic model holds."""
        classic: GroupCoordinator = self.model
        gid, ts = e["group_id"], e.get("ts")
        out = classic.advance(ts - 1) if ts is not None else []  # what was due first (a last member's expiry)
        consumer = self._new(CONSUMER)
        group = classic.groups.get(gid)
        topics = {
            **classic.default_topics,
            **classic.pending_topics.get(gid, {}),
            **(group.topics if group is not None else {}),
        }
        consumer.seed_topics(topics, classic.topic_ids)
        if consumer.heartbeat_error(e) is not None or group is None:
            answer = consumer.handle(e)  # the request's own error, or a group that did not exist
            if consumer.groups:
                self.model = consumer
            return out + answer
        create = e["member_epoch"] == 0
        if create and group.is_(GroupState.EMPTY):
            out.append(
                self._switch(
                    e,
                    CLASSIC,
                    CONSUMER,
                    "an Empty classic group is replaced by a consumer group when a ConsumerGroupHeartbeat joins it",
                )
            )
            if group.generation > 0:  # offsets-only groups never had group metadata written
                out.append(outputs.group_metadata_tombstone(gid, ts or 0))
            answer = consumer.handle(e)
            consumer.adopt_offsets(gid, group.offsets)
            self.model = consumer
            return out + answer
        error, message = "GROUP_ID_NOT_FOUND", f"Group {gid} is not a consumer group."  # Kafka's words
        if create:
            view = classic_group_view(group)
            refusal = classic_members.upgrade_error(consumer, view)
            if refusal is None:
                return out + self._upgrade(consumer, group, view, e)
            error, message = refusal
        out.append(outputs.consumer_heartbeat_response(e, ts or 0, error, message))
        return out

    def _upgrade(self, consumer: ConsumerGroupCoordinator, group, view: dict, e: dict) -> Outputs:
        """Kafka's convertToConsumerGroup: the members waiting in a round are told REBALANCE_IN_PROGRESS, the classic
        group's record is deleted, the consumer group is written with them as classic members, then the heartbeat
        is handled by the consumer group."""
        gid, ts = e["group_id"], e.get("ts") or 0
        consumer.advance(ts)
        policy = self.configs.consumer.group_consumer_migration_policy
        out: Outputs = [
            self._switch(
                e,
                CLASSIC,
                CONSUMER,
                f"upgrade: member {e['member_id']} joined the {group.state.value} classic group with the consumer "
                f"protocol (group.consumer.migration.policy={policy}); its {len(group.members)} members stay, as "
                "members of the classic protocol",
            )
        ]
        for m in group.members.values():
            if m.awaiting_join:
                out.append(outputs.join_refused(gid, ts, m.member_id, m.group_instance_id, "REBALANCE_IN_PROGRESS"))
            elif m.awaiting_sync:
                out.append(outputs.sync_refused(gid, ts, m.member_id, m.group_instance_id, "REBALANCE_IN_PROGRESS", -1))
        out.append(outputs.group_metadata_tombstone(gid, ts))
        out += classic_members.upgrade(consumer, view)
        consumer.adopt_offsets(gid, group.offsets)
        self.model = consumer
        return out + consumer.handle(e)

    def _classic_request_to_consumer(self, e: dict) -> Outputs:
        """Kafka's classicGroupJoin / Sync / Heartbeat / Leave for a group the consumer model holds."""
        consumer: ConsumerGroupCoordinator = self.model
        gid, ts, kind = e["group_id"], e.get("ts"), e["type"]
        out = consumer.advance(ts - 1) if ts is not None else []
        group = consumer.groups.get(gid)
        if group is None or not gid:
            classic = self._classic_seeded(consumer, gid)
            answer = classic.handle(e)
            if classic.groups:
                self.model = classic
            return out + answer
        if kind == "join":
            if group.state() == "Empty":
                classic = self._classic_seeded(consumer, gid)
                answer = classic.handle(e)
                if gid not in classic.groups:  # the join was refused: nothing replaced the consumer group
                    return out + answer
                out.append(
                    self._switch(
                        e,
                        CONSUMER,
                        CLASSIC,
                        "an Empty consumer group is replaced by a classic group when a JoinGroup arrives",
                    )
                )
                offsets = dict(consumer.offsets.get(gid, {}))
                out += consumer.remove_empty_group(gid, ts or consumer.now)
                classic.adopt_offsets(gid, offsets)
                self.model = classic
                return out + answer
            c = self.configs.classic
            if not c.group_min_session_timeout_ms <= e["session_timeout_ms"] <= c.group_max_session_timeout_ms:
                return out + [outputs.request_refused(e, ts or 0, "INVALID_SESSION_TIMEOUT")]
        # A member of the classic protocol in a consumer group (consumer/classic_members.py); a commit as any.
        return out + consumer.handle(e)

    def _classic_seeded(self, consumer: ConsumerGroupCoordinator, group_id: str) -> GroupCoordinator:
        classic = self._new(CLASSIC)
        sizes = {name: topic.partitions for name, topic in consumer.image.by_name.items()}
        if sizes:
            classic.pending_topics[group_id] = sizes
        return classic


class ClusterTopics:
    """Topic metadata without a group id (every group's topics, as Kafka's metadata image is the cluster's). A group's
    model starts with all of it, so a group that appears later knows those topics before its first request -- with
    the ids and racks the events gave, which a switch's seeding (names and sizes) would lose."""

    def __init__(self, configs: Configs) -> None:
        self.configs = configs
        self.events: list[dict] = []

    def apply(self, event: dict) -> None:
        self.events.append(event)

    def blank(self, protocol: str) -> GroupCoordinator | ConsumerGroupCoordinator:
        model = (
            ConsumerGroupCoordinator(self.configs.consumer)
            if protocol == CONSUMER
            else GroupCoordinator(self.configs.classic)
        )
        for event in self.events:
            model.handle(event)  # no group yet: nothing to answer
        return model


def _ts(output: dict) -> int:
    return output.get("ts") or 0


class GroupModels:
    """The pure job over a whole feed: one ``GroupModel`` per group id, as the streaming job keys its state. The views
    run recorded feeds through it (``run_feed``), so there is one routing of events to the two models.

    Topic metadata without a group id (or with an empty one) goes to every group's model, as the group-less event
    (the classic model keeps the sizes for any group it holds later, as Kafka's metadata is the cluster's), and is
    kept in ``topics`` for groups that appear later. The job does it through its sink (``broadcast_event``,
    ``streaming/spark/sinks.py``), with these differences: the copies come back through the events topic, so each
    group gets its copy a micro-batch later (at the event's own ``ts``, after whatever the group did meanwhile); a
    copy names the group, so the classic model files the sizes under that group only (forgotten if the group is
    deleted and made again); the sink only knows groups that have had an output or are in the store, so a group that
    appears later does not learn earlier group-less sizes; and the empty group id gets no copy.

    ``advance`` fires every group's timers due by then; it keeps each group's next deadline in a heap, so a feed of
    many groups costs no scan of all of them per event (a model changed behind ``handle``/``advance``, other than by
    firing its timers, must be put back through ``models``)."""

    def __init__(self, configs: Configs | None = None) -> None:
        self.configs = configs or Configs()
        self.topics = ClusterTopics(self.configs)
        self._models: dict[str, GroupModel] = {}
        self._due: list[tuple[int, str]] = []  # (deadline, group id); stale once _due_at says otherwise
        self._due_at: dict[str, int] = {}

    @property
    def models(self) -> dict[str, GroupModel]:
        return self._models

    @models.setter
    def models(self, models: dict[str, GroupModel]) -> None:
        self._models, self._due, self._due_at = models, [], {}
        for gid in models:
            self._schedule(gid)

    def handle(self, event: dict) -> Outputs:
        gid = event.get("group_id")
        if event["type"] == "topic_metadata" and not gid:
            return self._broadcast(event)
        if gid is None:
            return []
        model = self._models.get(gid)
        if model is None:
            model = self._models[gid] = GroupModel(self.configs, topics=self.topics)
        out = model.handle(event)
        self._schedule(gid)
        return out

    def advance(self, now_ms: int) -> Outputs:
        """Every group's timers due at or before ``now_ms``; the groups' outputs merged in time order (each group's
        own order kept, ties in group id order)."""
        due: list[str] = []
        while self._due and self._due[0][0] <= now_ms:
            deadline, gid = heapq.heappop(self._due)
            if self._due_at.get(gid) == deadline:
                del self._due_at[gid]
                due.append(gid)
        due.sort()
        outs = [self._models[gid].advance(now_ms) for gid in due]
        for gid in due:
            self._schedule(gid)
        return list(heapq.merge(*outs, key=_ts))

    def _broadcast(self, event: dict) -> Outputs:
        self.topics.apply(event)
        outs = []
        for gid in sorted(self._models):
            outs.append(self._models[gid].handle(event))
            self._schedule(gid)
        return list(heapq.merge(*outs, key=_ts))

    def _schedule(self, gid: str) -> None:
        deadline = self._models[gid].next_deadline()
        if deadline == self._due_at.get(gid):
            return
        if deadline is None:
            del self._due_at[gid]
        else:
            self._due_at[gid] = deadline
            heapq.heappush(self._due, (deadline, gid))


def run_feed(events: Iterable[dict], configs: Configs | None = None) -> tuple[Outputs, int]:
    """A recorded feed through fresh ``GroupModels``, in feed order: (outputs, events rejected as invalid).

    Before each event every group's timers due before it fire (the job fires them as its watermark or clock
    passes), so the outputs stay in time order across groups; at the end those due at the last event's time fire
    too, so a session that expired exactly then is not lost."""
    models = GroupModels(configs)
    out: Outputs = []
    rejected = 0
    last_ts: int | None = None
    for raw in events:
        event, error = parse_event(raw)
        if error is not None:
            rejected += 1
            continue
        ts = event.get("ts")
        if ts is not None:
            out.extend(models.advance(ts - 1))
            last_ts = ts if last_ts is None else max(last_ts, ts)
        out.extend(models.handle(event))
    if last_ts is not None:
        out.extend(models.advance(last_ts))
    return out, rejected
