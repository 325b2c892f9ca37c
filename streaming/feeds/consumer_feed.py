"""The KIP-848 half of the cluster feed: a consumer-protocol group's ``__consumer_offsets`` records (types 3-8 and
16, as ``offsets_store.codec`` decodes them) become the ``consumer_heartbeat`` events (plus ``topic_metadata`` and
``delete_group``) that, fed to the consumer model (``streaming/coordinator/consumer``), make it write those same
records -- as the classic feed turns GroupMetadata snapshots into the joins and syncs that make the classic model
reach the same generations.

Kafka's coordinator writes the records of one request (or timer) as one batch, in a fixed order
(``GroupMetadataManager#consumerGroupHeartbeat``): the member's metadata if it changed, the subscription metadata and
the group epoch if they changed, the target assignment delta and its epoch if the group epoch moved past it, the
member's current assignment if reconciling moved it. A leave or an expiry writes the member's three tombstones and a
new group epoch; a static member's temporary leave only its current assignment at epoch -2; a static member's
restart the old id's tombstones and the new id's records. So each batch names the member whose request wrote it and
what it changed, and its previous state (the records before) says what the request carried: the member epoch it
had, its subscription, and which partitions it still owned (a member whose partitions pending revocation are gone
reported it no longer owns them).

The feed keeps, per group, a *shadow* consumer model fed exactly the events it emits. For the records at the head
of a group's log it builds the few requests that can have written them, runs each on a copy of the shadow, and
emits the one whose records are the broker's (same records, same order; the members' target records of one batch
may come in any order, as Kafka writes them from a hash map). So every emitted event is checked: fed to the model,
the events reproduce the broker's records. Records no request explains are counted (``unexplained``) and applied to
the shadow as they are, so the feed goes on; the tracker misses that step.

Time: an event's ``ts`` is its batch's record timestamp (the coordinator's clock when it wrote them; Kafka stamps
all records of one write with the same time, so a record with another time starts another batch). With Kafka
4.3+'s ``group.consumer.assignment.interval.ms`` (the feed's config must have the broker's) whether a request
computed a target turns on the broker's clock when it handled it, read a little before it stamped the batch: a
request that computed one runs at the target's ``assignmentTimestamp``, and one that did not, stamped just after
the interval ran out, just before it (``_request_times``). A target deferred so is written by a later heartbeat of
any member, often one that writes nothing else: a batch of target records alone is that member's heartbeat.

Groups with members of both protocols (Kafka 4.x's online migration, ``consumer/classic_members.py``): the cluster
feed hands over a classic group (``classic_groups``, its last GroupMetadata as ``migration.snapshot_view``) when the
batch that deletes its record goes on with consumer-group records; that batch is explained as the joining member's
heartbeat after the model's own upgrade of that group (the records compared without the protocols the GroupMetadata
did not keep). A classic member's records are its JoinGroups (a metadata record carrying ``classicMemberMetadata``, or
its current assignment alone: a rejoin with the protocols it had) and its LeaveGroup. A group's tombstones while it
has members are the downgrade: the leave of its last consumer-protocol member, after which ``take_downgrade`` says so
(the GroupMetadata of that batch is the classic group the leave made).

Offset commits: an OffsetCommit record of a group the feed follows (``commit_events``) is a write of its own, so the
group's records before it are whole batches and are explained first; then it becomes a ``commit`` event. The record
does not say who committed, so the event names the member that owns the partition in the shadow (assigned or still
revoking) at its current epoch -- the epoch the broker must have checked it against; a partition nobody owns is
committed by the first member (by member id) with an epoch; an Empty group's commit is an admin commit (epoch -1).
The shadow takes the commit too, so its offsets and cleanup timers are the tracker's. Offset tombstones are not
events: the model expires and deletes offsets itself, and a DeleteGroups shows as the group's own tombstones.

What cannot be inferred:
  - heartbeats that changed nothing write no record, so a member's liveness between records is unknown: the shadow
    (and the tracker) must not expire sessions on their own (``CONSUMER_OBSERVER_SETTINGS``); a member's removal
    is reported as a leave (epoch -1) whether it left or its session expired -- the records are the same, and a
    member that heartbeats without changing anything writes nothing for as long as it likes, so no gap between its
    last record and its removal tells an expiry (a gap shorter than a session rules one out; the feed does not know
    the session). The exception: a static member away at epoch -2 (its static leave) sends nothing more, so its
    removal without a successor is the broker's session timer (a ``session_expired`` event: the model fences it
    as the timer does) -- or an administrator's removal by instance id, which writes the same records. A member
    removed while still revoking, exactly when its rebalance timeout ran out, is the model's own rebalance-timeout
    fence (the timeout is in the member's record, the times are the broker's): no event, the tracker's timer does
    it when its clock passes that time;
  - the owned partitions a member reported are what its records imply (everything it had, or, when its revocation
    completed, all but the revoked ones), not the request's;
  - topics come from ConsumerGroupPartitionMetadata (brokers before 4.1): a topic's creation or growth is emitted
    just before the request that saw it; a deleted topic cannot be told from an unsubscribed one; brokers 4.1+ write
    no such record, so the feed takes the cluster's topics from ``topics`` (name -> topic id and partition count,
    e.g. from a metadata request: ``broker_topics.BrokerTopics``) and emits each subscribed topic the shadow does
    not know as it is there, before the request that subscribed to it or saw it change (a topic grown or recreated:
    Kafka 4.1+ shows that only as a new ``metadataHash`` and group epoch). The topics are as they are when asked:
    following the log as it is written, that is when the broker wrote it; reading an old log, a topic that has
    changed since cannot be told as it was (its batches are unexplained). The
    model writes Kafka 4.0's records, subscription metadata included; with ``topics`` those are not looked for in
    the log (the model's epoch bumps on changed subscription metadata are 4.1+'s on a changed metadata hash);
  - a classic member's Heartbeats and SyncGroups write nothing, so its liveness is unknown too (the tracker's classic
    members of consumer groups never time out: ``classic.member.timeouts=false``); the protocols of its JoinGroup
    other than the group's are unknown until it writes metadata of its own (the GroupMetadata the upgrade converts
    keeps only the group's);
  - a broker whose assignor differs from the model's (a custom one, or another ``group.consumer.assignors``) or a
    regular expression resolved differently (the record's image version) gives records the model does not write;
  - which request asked for a regex refresh that changed nothing else: Kafka resolves a member's new regex, and
    refreshes the group's (at most every 10 s, on a heartbeat, once topics were created), after the request,
    asynchronously, and writes the result as a write of its own (the regex's record and a new group epoch), other
    requests perhaps between. So a batch of regex records is a ``regex_resolved`` event (the model, told to wait
    for them: ``regex.resolution.events``, resolves then what was asked), after the heartbeat of a member that
    changed nothing when no request asked for it (a refresh due; the shadow's first such member);
  - who committed an offset, and at which epoch (see above); the broker's offsets cleanup runs on its own clock
    (``offsets.retention.check.interval.ms`` from its load), the model's at exact expiry times, so an Empty group's
    deletion can come a little earlier in the tracker than in the log (a later ``delete_group`` finds it gone).
"""

from __future__ import annotations

import base64
import collections
from typing import Callable, Iterable, Mapping

from offsets_store.codec import CONSUMER_GROUP_TYPES, CodecError, decode_subscription
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, classic_members
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.group import IllegalGroupState
from streaming.coordinator.events import parse_event
from streaming.coordinator.figures import Ledger

# The tracker's consumer model for this feed: no session expiry of its own (the feed sees no plain heartbeats).
CONSUMER_OBSERVER_SETTINGS = {
    "group.consumer.session.timeout.ms": str(2**31 - 1),
    "classic.member.timeouts": "false",
    "regex.resolution.events": "true",
}
# How long before its batch's time a request that wrote no target can have read the broker's clock (see
# ``ConsumerGroupFeed._request_times``): the time the request took, generously.
REQUEST_CLOCK_SLACK_MS = 1_000

_MEMBER_TYPES = (
    "consumer_group_member_metadata",
    "consumer_group_target_assignment_member",
    "consumer_group_current_member_assignment",
)


def is_consumer_group_record(record: dict) -> bool:
    return record.get("type") in CONSUMER_GROUP_TYPES


def _parts(topic_partitions) -> tuple:
    merged: dict[str, set] = {}
    for tp in topic_partitions or []:
        merged.setdefault(tp["topicId"], set()).update(int(p) for p in tp["partitions"])
    return tuple(sorted((t, tuple(sorted(ps))) for t, ps in merged.items() if ps))


def normalise(r: dict) -> tuple:
    """What the model and a broker must agree on for a record: its key and the value fields the model writes, lists
    in a canonical order (Kafka fills them from hash sets). Kafka 4.1+ fields (metadataHash, creationTimeMs,
    assignmentTimestamp), unknown tagged fields and a regex's image version and timestamp are left out."""
    kind = r["type"]
    key = (kind, r["group_id"], r.get("member_id"), r.get("regular_expression"))
    if r.get("tombstone"):
        return key + (None,)
    if kind == "consumer_group_metadata":
        value = (r["epoch"],)
    elif kind == "consumer_group_partition_metadata":
        value = tuple(sorted((t["topicId"], t["topicName"], t["numPartitions"]) for t in r["topics"]))
    elif kind == "consumer_group_member_metadata":
        value = (
            r.get("instanceId"),
            r.get("rackId"),
            r.get("clientId"),
            r.get("clientHost"),
            tuple(sorted(r.get("subscribedTopicNames") or [])),
            r.get("subscribedTopicRegex") or "",
            r.get("rebalanceTimeoutMs", -1),
            r.get("serverAssignor"),
            _classic(r.get("classicMemberMetadata")),
        )
    elif kind == "consumer_group_target_assignment_metadata":
        value = (r["assignmentEpoch"],)
    elif kind == "consumer_group_target_assignment_member":
        value = _parts(r["topicPartitions"])
    elif kind == "consumer_group_current_member_assignment":
        value = (
            r["memberEpoch"],
            r["previousMemberEpoch"],
            r["state"],
            _parts(r["assignedPartitions"]),
            _parts(r["partitionsPendingRevocation"]),
        )
    else:
        value = tuple(sorted(r["topics"]))
    return key + (value,)


def _classic(value: dict | None) -> tuple | None:
    """A classic member's metadata: its session timeout and its protocols, (name, metadata) in order."""
    if value is None or not value.get("supportedProtocols"):  # null, or the empty struct of a record without it
        return None
    return (value["sessionTimeoutMs"], tuple((p["name"], p.get("metadata") or "") for p in value["supportedProtocols"]))


def _seen_protocols(want: list[tuple], known: list[tuple[str, str | None, set[str]]]) -> list[tuple]:
    """The broker's records with each classic member's protocols cut to those the model can know of it (``known``:
    member id, instance id, protocol names). An online upgrade converts the classic group's GroupMetadata record,
    which kept only the group's protocol of each member: the JoinGroup's others reach no classic record, so neither
    the feed nor the tracker can know them, though the broker's consumer-group records carry them from then on. A
    static member replacing a classic one takes its predecessor's metadata, protocols too: cut alike (by instance
    id). A record naming protocols the model does not have is left as it is (a JoinGroup that changed them)."""
    by_member = {member_id: names for member_id, _, names in known}
    by_instance = {instance: names for _, instance, names in known if instance}
    out = []
    for r in want:
        if r[0] == "consumer_group_member_metadata" and r[-1] is not None and r[-1][-1] is not None:
            names = by_member.get(r[2]) or by_instance.get(r[-1][0])
            session, protocols = r[-1][-1]
            if names is not None and names <= {p[0] for p in protocols}:
                r = r[:-1] + (r[-1][:-1] + ((session, tuple(p for p in protocols if p[0] in names)),),)
        out.append(r)
    return out


def _segments(records: list[tuple]) -> list[tuple[bool, list]]:
    """Runs of members' target assignment records (Kafka writes them from a hash map: any order, so sorted here)
    and the records between them (in order)."""
    out: list[tuple[bool, list]] = []
    for r in records:
        run = r[0] == "consumer_group_target_assignment_member"
        if not out or out[-1][0] != run:
            out.append((run, []))
        out[-1][1].append(r)
    return [(run, sorted(items, key=repr) if run else items) for run, items in out]


def _same(got: list[tuple], want: list[tuple]) -> bool:
    return _segments(got) == _segments(want)


# ---------------------------------------------------------------- the feed
class ConsumerGroupFeed:
    """Per group: the records not yet explained, and the shadow model fed every event emitted so far."""

    def __init__(
        self, config: ConsumerGroupConfig | None = None, topics: Callable[[str], tuple[str, int] | None] | None = None
    ) -> None:
        self.config = config or ConsumerGroupConfig.from_properties(CONSUMER_OBSERVER_SETTINGS)
        # brokers 4.1+: a topic name -> (topic id, partitions) in the cluster, None if it has none (module docstring)
        self.topics = topics
        self.shadows: dict[str, ConsumerGroupCoordinator] = {}
        self.pending: dict[str, list[dict]] = {}
        self.last_ts: dict[str, int] = {}
        self.counts: collections.Counter = collections.Counter()
        # A classic group (migration.snapshot_view of its last GroupMetadata) the next batch upgrades: the cluster
        # feed tells (it read the classic group's tombstone in that batch).
        self.classic_groups: dict[str, dict] = {}

    def events_for(self, record: dict, ts: int | None) -> list[dict]:
        """Events for one decoded KIP-848 record at its log timestamp ``ts``; a group's records are held until a
        record of another time (or ``flush``) says their batches are complete."""
        group_id = record["group_id"]
        if ts is None or ts < 0:
            ts = self.last_ts.get(group_id, 0)
            self.counts["records without a timestamp"] += 1
        self.last_ts[group_id] = max(ts, self.last_ts.get(group_id, 0))
        self.pending.setdefault(group_id, []).append({**record, "ts": ts})
        self.counts["consumer group records"] += 1
        return self._drain(group_id, final=False)

    def flush(self) -> list[dict]:
        return [e for group_id in list(self.pending) for e in self._drain(group_id, final=True)]

    def explain(self, group_id: str) -> list[dict]:
        """The events for the group's records read so far (their batch is complete: the cluster feed read a record
        of that batch that is not ours)."""
        return self._drain(group_id, final=True)

    def downgraded(self, group_id: str) -> bool:
        """Whether a request explained downgraded the group (its GroupMetadata not read yet)."""
        shadow = self.shadows.get(group_id)
        return shadow is not None and group_id in shadow.downgraded

    def take_downgrade(self, group_id: str) -> bool:
        """Whether the last request explained downgraded the group to a classic group (its last consumer-protocol
        member went): the GroupMetadata in the same batch is the classic group's, written by that request."""
        shadow = self.shadows.get(group_id)
        return shadow is not None and shadow.downgraded.pop(group_id, None) is not None

    def holds(self, group_id: str) -> bool:
        """Whether the group is a consumer-protocol group this feed follows (records pending, or in the shadow)."""
        shadow = self.shadows.get(group_id)
        return bool(self.pending.get(group_id)) or (shadow is not None and group_id in shadow.groups)

    def commit_events(self, record: dict) -> list[dict]:
        """The events for an OffsetCommit record of a group this feed follows: its explained records first, then
        the commit, from the member that owns the partition at its epoch (see the module's docstring)."""
        group_id, ts = record["group_id"], record["commit_timestamp"]
        out = self._drain(group_id, final=True)
        shadow = self.shadows.get(group_id) or ConsumerGroupCoordinator(self.config)
        event = {
            "type": "commit",
            "group_id": group_id,
            "ts": ts,
            "member_id": "",
            "group_instance_id": None,
            "generation": -1,
            "offsets": [
                {
                    "topic": record["topic"],
                    "partition": record["partition"],
                    "offset": record["offset"],
                    "leader_epoch": record.get("leader_epoch", -1),
                    "metadata": record.get("metadata") or "",
                }
            ],
        }
        expire = record.get("expire_timestamp", -1)
        if expire not in (None, -1):
            event["retention_ms"] = max(expire - ts, 0)
        group = shadow.groups.get(group_id)
        committer = self._committer(shadow, group, record) if group is not None else None
        if committer is not None:
            event.update(
                member_id=committer.member_id,
                group_instance_id=committer.instance_id,
                generation=committer.member_epoch,
            )
            self.counts[
                "commits by " + ("the partition's owner" if self._owns(shadow, committer, record) else "another member")
            ] += 1
        else:
            self.counts["admin commits"] += 1
        parsed, error = parse_event(event)
        if error is None:
            answer = shadow.handle(parsed)
            if any(o["type"] == "commit_response" and o["error"] != "NONE" for o in answer):
                self.counts["commits the model refuses"] += 1
        self.shadows[group_id] = shadow
        self.last_ts[group_id] = max(ts, self.last_ts.get(group_id, 0))
        return out + [event]

    @staticmethod
    def _owns(shadow: ConsumerGroupCoordinator, m, record: dict) -> bool:
        topic_id = shadow.image.id_for(record["topic"])
        return any(
            record["partition"] in a.get(topic_id, ()) for a in (m.assigned_partitions, m.partitions_pending_revocation)
        )

    def _committer(self, shadow: ConsumerGroupCoordinator, group, record: dict):
        """Who the broker accepted the commit from: the partition's owner, else the first member with an epoch
        (by member id), else any member; None for an Empty group (an admin commit)."""
        members = sorted(group.members.values(), key=lambda m: m.member_id)
        return (
            next((m for m in members if self._owns(shadow, m, record)), None)
            or next((m for m in members if m.member_epoch >= 0), None)
            or next(iter(members), None)
        )

    # ------------------------------------------------------------ matching requests to records
    def _drain(self, group_id: str, final: bool) -> list[dict]:
        pending = self.pending.get(group_id) or []
        shadow = self.shadows.get(group_id) or ConsumerGroupCoordinator(self.config)
        out: list[dict] = []
        while pending:
            # Kafka stamps every record of a batch with the time of the write: a new time is a new batch.
            size = next((i for i, r in enumerate(pending) if r["ts"] != pending[0]["ts"]), len(pending))
            if size == len(pending) and not final:
                break  # the batch may go on: wait for a record of another time (or the reader catching up)
            want = [normalise(r) for r in pending[:size]]
            self._ask_for_new_subscriptions(shadow, pending[:size])
            best = self._explain(shadow, pending, want)
            if (
                best is None
                and getattr(self.topics, "refresh", None) is not None
                and self.topics.refresh(since_ms=pending[0]["ts"])
            ):
                best = self._explain(shadow, pending, want)  # the cluster's topics changed since last asked
            if best is None:
                self._apply_unexplained(shadow, pending.pop(0))
                continue
            n, events, shadow = best
            if group_id in shadow.groups:
                self.classic_groups.pop(group_id, None)
            del pending[:n]
            out += events
            self.counts["events"] += len(events)
        self.shadows[group_id] = shadow
        if not pending:
            self.pending.pop(group_id, None)
        return out

    def _ask_for_new_subscriptions(self, shadow: ConsumerGroupCoordinator, batch: list[dict]) -> None:
        """A batch subscribing to a topic neither the shadow nor the cluster's last answer has: ask the cluster
        again first (if its answer is older than the batch). A request that bumps the group epoch and writes no
        target (Kafka 4.3+'s assignment interval) reads the same with the topic or without it: the feed must know
        the topic before it explains the batch, not find out from failing to."""
        refresh = getattr(self.topics, "refresh", None)
        if refresh is None:
            return
        names = {
            name
            for r in batch
            if r["type"] == "consumer_group_member_metadata" and not r.get("tombstone")
            for name in r.get("subscribedTopicNames") or []
        } | _regex_topics(batch)
        if any(shadow.image.get(name) is None and self.topics(name) is None for name in sorted(names)):
            refresh(since_ms=batch[0]["ts"])

    def _explain(self, shadow: ConsumerGroupCoordinator, pending: list[dict], want: list[tuple]):
        """(records explained, the events, the shadow after them) of the request that writes the most of the
        batch at the head of ``pending``; None if none writes any."""
        best = None
        group_id = pending[0]["group_id"]
        view = self.classic_groups.get(group_id) if group_id not in shadow.groups else None
        if view is not None:
            want = _seen_protocols(
                want, [(m["member_id"], m.get("instance_id"), {n for n, _ in m["protocols"]}) for m in view["members"]]
            )
        elif group_id in shadow.groups:
            known = [
                (member_id, m.instance_id, {n for n, _ in m.classic.protocols})
                for member_id, m in shadow.groups[group_id].members.items()
                if m.classic is not None
            ]
            want = _seen_protocols(want, known) if known else want
        for events in self._candidates(shadow, pending):
            parsed = [parse_event(e) for e in events]
            if any(error is not None for _, error in parsed):
                continue
            copy = ConsumerGroupCoordinator.from_dict(shadow.to_dict(), self.config)
            if events:
                outputs = []
                for e, _ in parsed:
                    if view is not None and e["type"] == "consumer_heartbeat" and group_id not in copy.groups:
                        # the heartbeat that upgrades the classic group (routing.py does the same for the tracker)
                        copy.advance(e["ts"])
                        if classic_members.upgrade_error(copy, view) is None:
                            outputs += classic_members.upgrade(copy, view)
                    outputs += copy.handle(e)
            else:  # no request: the model's own timers, up to the batch's time
                outputs = copy.advance(pending[0]["ts"])
            got = [
                normalise(o)
                for o in outputs
                if is_consumer_group_record(o)
                # brokers 4.1+ write no subscription metadata, but its tombstone with a group's others
                and not (
                    self.topics is not None and o["type"] == "consumer_group_partition_metadata" and not o["tombstone"]
                )
            ]
            n = len(got)
            if not n:
                continue
            if n <= len(want) and _same(got, want[:n]) and (best is None or n > best[0]):
                best = (n, events, copy)  # the request writing the most of this time's records
        return best

    def _apply_unexplained(self, shadow: ConsumerGroupCoordinator, record: dict) -> None:
        """No request writes this record: apply it to the shadow as it is, as Kafka's loader would."""
        self.counts["unexplained records"] += 1
        group_id = record["group_id"]
        group = shadow.groups.get(group_id)
        try:
            if group is None:
                if record.get("tombstone"):
                    return
                shadow.load_records([record], record["ts"])
                return
            group.replay(record)
            if group.deleted:
                del shadow.groups[group_id]
                shadow.soft.pop(group_id, None)
        except (IllegalGroupState, KeyError, ValueError):
            shadow.groups.pop(group_id, None)
            shadow.soft.pop(group_id, None)

    def _candidates(self, shadow: ConsumerGroupCoordinator, pending: list[dict]) -> Iterable[list[dict]]:
        """The requests that can have written the batch at the head of ``pending``, likeliest first, each as the
        list of events to emit (topic changes it saw first), at each time the request can have had."""
        for ts in self._request_times(shadow, pending):
            yield from self._candidates_at(shadow, pending, ts)

    def _request_times(self, shadow: ConsumerGroupCoordinator, pending: list[dict]) -> list[int]:
        """When the request that wrote the batch at the head of ``pending`` can have run, likeliest first. The
        batch's time, but with ``group.consumer.assignment.interval.ms`` (Kafka 4.3+) the broker's decision to
        compute a target turns on its clock when it handled the request, which it reads before it stamps the batch
        (GroupMetadataManager, then CoordinatorRuntime's append): a target written in the batch was computed at its
        ``assignmentTimestamp``, the request's time; a batch without one, stamped just after the interval ran out,
        came from a request read just before."""
        ts = pending[0]["ts"]
        interval = self.config.group_consumer_assignment_interval_ms
        if interval <= 0:
            return [ts]
        stamped = next(
            (
                r["assignmentTimestamp"]
                for r in pending
                if r["ts"] == ts
                and r["type"] == "consumer_group_target_assignment_metadata"
                and not r.get("tombstone")
                and r.get("assignmentTimestamp")
            ),
            None,
        )
        if stamped is not None:
            return [stamped, ts] if shadow.now <= stamped < ts else [ts]
        group = shadow.groups.get(pending[0]["group_id"])
        due = group.assignment_timestamp + interval if group is not None and group.assignment_timestamp else None
        if due is not None and due <= ts < due + REQUEST_CLOCK_SLACK_MS and shadow.now < due:
            return [ts, due - 1]
        return [ts]

    def _candidates_at(self, shadow: ConsumerGroupCoordinator, pending: list[dict], ts: int) -> Iterable[list[dict]]:
        head = pending[0]
        kind, group_id = head["type"], head["group_id"]
        group = shadow.groups.get(group_id)
        members = group.members if group is not None else {}
        topics = [{**e, "ts": ts} for e in self._topic_events(shadow, pending)]
        # the topics it subscribed to that the shadow does not know, first: a request that bumps the group epoch and
        # writes no target (Kafka 4.3+'s assignment interval) reads the same with or without them, and a topic the
        # cluster has was there for the broker, likeliest; then without the changes to those it knew: the cluster
        # as the feed asks it may be ahead of the batch (a topic grown since)
        new = [e for e in topics if shadow.image.get(e["topic"]) is None]
        topic_variants = ([new] if new else []) + [[]]
        if topics and topics not in topic_variants:
            topic_variants.append(topics)

        def heartbeats(requests: list[dict]):
            for topics_first in topic_variants:
                for request in requests:
                    yield topics_first + [request]

        if group is None and group_id in self.classic_groups:
            # The online upgrade: the consumer group's records, then those of the heartbeat that made it.
            joiner = next(
                (
                    r
                    for r in pending
                    if r["ts"] == ts
                    and r["type"] == "consumer_group_member_metadata"
                    and not r.get("tombstone")
                    and _classic(r.get("classicMemberMetadata")) is None
                ),
                None,
            )
            if joiner is not None:
                yield from heartbeats([self._join(joiner, ts)])
                return
        if kind == "consumer_group_regular_expression" and not head.get("tombstone"):
            # Kafka's resolution of the group's regexes, a write of its own: asked for by an earlier request, or by
            # a heartbeat that changed nothing else (a refresh due) and so wrote nothing
            resolved = {"type": "regex_resolved", "group_id": group_id, "ts": ts, "started_ms": head.get("timestamp")}
            soft = shadow.soft.get(group_id)
            for topics_first in topic_variants:
                if soft is not None and soft.regexes_asked:
                    yield topics_first + [resolved]
                for m in members.values():
                    if m.member_epoch >= 0 and m.classic is None:
                        for owned in _owned_variants(m):
                            yield topics_first + [self._heartbeat(group_id, m, m.member_epoch, ts, owned), resolved]
            return
        if head.get("tombstone"):
            batch = [r for r in pending if r["ts"] == ts]
            successor = _static_successor(pending, members)
            if successor is not None:
                # a static member restarted under a new id, of either protocol (a classic one may so downgrade
                # the group, its last consumer-protocol member replaced)
                if _classic(successor.get("classicMemberMetadata")) is not None:
                    yield from heartbeats([self._answered(self._classic_join(successor, ts), pending, successor)])
                else:
                    yield from heartbeats([self._join(successor, ts)])
            if members and any(r["type"] == "consumer_group_metadata" and r.get("tombstone") for r in batch):
                # The group's tombstones with members in it: the online downgrade, when its last consumer-protocol
                # member left (or its session ran out); a classic LeaveGroup may name a member of either protocol.
                for m in members.values():
                    if m.classic is None:
                        yield from heartbeats([self._heartbeat(group_id, m, -1, ts), self._leave(group_id, m, ts)])
                return
            if kind == "consumer_group_current_member_assignment" and head["member_id"] in members:
                m = members[head["member_id"]]
                if m.classic is not None:
                    yield [self._leave(group_id, m, ts)]  # left, or its session ran out
                    return
                if m.member_epoch == -2:
                    # away since its static leave, it sends nothing more: the broker's session timer removed it
                    expired = {"type": "session_expired", "group_id": group_id, "ts": ts, "member_id": m.member_id}
                    yield from heartbeats([expired])
                if m.partitions_pending_revocation:
                    yield []  # still revoking: its rebalance timeout may have run out (the model's own timer)
                yield from heartbeats([self._heartbeat(group_id, m, -1, ts)])  # left, or its session expired
            elif kind in (
                "consumer_group_target_assignment_metadata",
                "consumer_group_metadata",
                "consumer_group_partition_metadata",
                "consumer_group_regular_expression",
            ):
                yield [{"type": "delete_group", "group_id": group_id, "ts": ts}]
            return
        if kind == "consumer_group_member_metadata":
            m = members.get(head["member_id"])
            if _classic(head.get("classicMemberMetadata")) is not None:  # a JoinGroup of the classic protocol
                join = self._classic_join(head, ts)
                if m is None and head.get("instanceId"):  # a new static member's: reported as answered
                    join = self._answered(join, pending, head)
                yield from heartbeats([join])
                return
            if m is None:
                yield from heartbeats([self._join(head, ts)])
            else:
                yield from heartbeats(
                    [
                        self._heartbeat(group_id, m, m.member_epoch, ts, owned, metadata=head)
                        for owned in _owned_variants(m)
                    ]
                    + [self._join(head, ts)]
                )
            return
        if kind == "consumer_group_current_member_assignment" and head["member_id"] in members:
            m = members[head["member_id"]]
            if m.classic is not None:  # its JoinGroup, same protocols (no new metadata record)
                yield from heartbeats([self._classic_join(self._metadata_of(group_id, m), ts)])
                return
            if head["memberEpoch"] == -2 and m.instance_id is not None:
                yield [self._heartbeat(group_id, m, -2, ts)]  # a static member's temporary leave
                return
            yield from heartbeats(
                [self._heartbeat(group_id, m, m.member_epoch, ts, owned) for owned in _owned_variants(m)]
            )
            return
        # A batch starting with new topics, a new group epoch or a new target: a request of a member whose own
        # metadata did not change; the member whose current assignment the batch ends with, when it has one.
        sender = next(
            (
                r["member_id"]
                for r in pending
                if r["type"] == "consumer_group_current_member_assignment"
                and not r.get("tombstone")
                and r["member_id"] in members
            ),
            None,
        )
        order = ([members[sender]] if sender is not None else []) + [m for mid, m in members.items() if mid != sender]
        yield from heartbeats(
            [
                self._classic_join(self._metadata_of(group_id, m), ts)
                if m.classic is not None
                else self._heartbeat(group_id, m, m.member_epoch, ts, owned)
                for m in order
                if m.member_epoch >= 0
                for owned in (_owned_variants(m) if m.classic is None else [None])
            ]
        )

    def _topic_events(self, shadow: ConsumerGroupCoordinator, pending: list[dict]) -> list[dict]:
        """``topic_metadata`` for the topics the shadow does not know as they are (created, grown, or another id):
        those of the first subscription metadata record ahead, else (brokers 4.1+) those the batch's member
        metadata records subscribe to, from ``topics``."""
        record = next(
            (r for r in pending if r["type"] == "consumer_group_partition_metadata" and not r.get("tombstone")), None
        )
        if record is not None:
            described = [(t["topicName"], t["topicId"], t["numPartitions"]) for t in record["topics"]]
        elif self.topics is not None:
            # the batch's new subscriptions, and the group's (a topic grown or recreated: 4.1+ bumps the group
            # epoch on a member's next heartbeat, a batch with no metadata record)
            group = shadow.groups.get(pending[0]["group_id"])
            names = sorted(
                {
                    name
                    for r in pending
                    if r["ts"] == pending[0]["ts"]
                    and r["type"] == "consumer_group_member_metadata"
                    and not r.get("tombstone")
                    for name in r.get("subscribedTopicNames") or []
                }
                | {
                    name
                    for m in (group.members.values() if group is not None else ())
                    for name in m.subscribed_topic_names
                }
            )
            names = sorted(set(names) | _regex_topics(pending))  # and those a regex resolution names
            described = [(name, *found) for name in names if (found := self.topics(name)) is not None]
        else:
            return []
        events = []
        for name, topic_id, partitions in described:
            known = shadow.image.get(name)
            if known is None or (known.topic_id, known.partitions) != (topic_id, partitions):
                events.append(
                    {
                        "type": "topic_metadata",
                        "group_id": pending[0]["group_id"],
                        "ts": pending[0]["ts"],
                        "topic": name,
                        "partitions": partitions,
                        "topic_id": topic_id,
                    }
                )
        return events

    @staticmethod
    def _metadata_of(group_id: str, m) -> dict:
        """A member's metadata record as the shadow has it."""
        return R.member_subscription(group_id, m)

    @staticmethod
    def _classic_join(metadata: dict, ts: int) -> dict:
        """A JoinGroup of the classic protocol with the member's id (after its MEMBER_ID_REQUIRED), carrying what its
        metadata record holds: its protocols (the embedded subscription, decoded: topics, owned partitions), its
        session and rebalance timeouts."""
        classic = metadata["classicMemberMetadata"]
        protocols = []
        for p in classic["supportedProtocols"]:
            try:
                sub = decode_subscription(base64.b64decode(p.get("metadata") or ""))
            except (CodecError, ValueError):
                sub = {"topics": list(metadata.get("subscribedTopicNames") or [])}
            protocols.append({"name": p["name"], **{k: v for k, v in sub.items() if v is not None}})
        return {
            "type": "join",
            "group_id": metadata["group_id"],
            "ts": ts,
            "member_id": metadata["member_id"],
            "group_instance_id": metadata.get("instanceId"),
            "client_id": metadata.get("clientId", ""),
            "client_host": metadata.get("clientHost", ""),
            "session_timeout_ms": classic["sessionTimeoutMs"],
            "rebalance_timeout_ms": metadata.get("rebalanceTimeoutMs", -1),
            "protocol_type": "consumer",
            "protocols": protocols,
        }

    @staticmethod
    def _answered(join: dict, pending: list[dict], metadata: dict) -> dict:
        """A static member's classic JoinGroup as its answer reports it: it came without a member id, the broker drew
        the one its records name; its epoch (from the write's current assignment) as the generation."""
        current = _written_for(pending, metadata, "consumer_group_current_member_assignment")
        return {**join, "generation": current[-1]["memberEpoch"] if current else -1}

    @staticmethod
    def _leave(group_id: str, m, ts: int) -> dict:
        """A LeaveGroup (the classic protocol's) for ``m``."""
        return {
            "type": "leave",
            "group_id": group_id,
            "ts": ts,
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
        }

    @staticmethod
    def _join(metadata: dict, ts: int) -> dict:
        """A member's first request (epoch 0): everything its metadata record holds."""
        return {
            "type": "consumer_heartbeat",
            "group_id": metadata["group_id"],
            "ts": ts,
            "member_id": metadata["member_id"],
            "member_epoch": 0,
            "instance_id": metadata.get("instanceId"),
            "rack_id": metadata.get("rackId"),
            "rebalance_timeout_ms": metadata.get("rebalanceTimeoutMs", -1),
            "subscribed_topic_names": list(metadata.get("subscribedTopicNames") or []),
            "subscribed_topic_regex": metadata.get("subscribedTopicRegex") or None,
            "server_assignor": metadata.get("serverAssignor"),
            "topic_partitions": [],
            "client_id": metadata.get("clientId", ""),
            "client_host": metadata.get("clientHost", ""),
        }

    @staticmethod
    def _heartbeat(
        group_id: str, m, epoch: int, ts: int, owned: list[dict] | None = None, metadata: dict | None = None
    ) -> dict:
        """A request of a known member at its epoch (-1: leave, -2: static leave), reporting ``owned``; with
        ``metadata`` (its new metadata record) carrying the fields it changed."""
        event = {
            "type": "consumer_heartbeat",
            "group_id": group_id,
            "ts": ts,
            "member_id": m.member_id,
            "member_epoch": epoch,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
        }
        if owned is not None:
            event["topic_partitions"] = owned
        if metadata is not None:
            event.update(
                rack_id=metadata.get("rackId"),
                rebalance_timeout_ms=metadata.get("rebalanceTimeoutMs", -1),
                subscribed_topic_names=list(metadata.get("subscribedTopicNames") or []),
                subscribed_topic_regex=metadata.get("subscribedTopicRegex") or "",
                server_assignor=metadata.get("serverAssignor"),
                client_id=metadata.get("clientId", ""),
                client_host=metadata.get("clientHost", ""),
                instance_id=metadata.get("instanceId"),
            )
        return event


def _static_successor(pending: list[dict], members: Mapping) -> dict | None:
    """The member metadata of a static member taking the place of the one whose tombstones head ``pending`` (its
    current assignment's, target's and metadata's, then its successor's records, in one write), as its request
    said it: the last of its metadata records in the write -- the first is its predecessor's metadata taken over
    (client id, classic protocols), when the request changed any of it. None if the batch is no such replacement."""
    head = pending[0]
    m = members.get(head["member_id"]) if head["type"] == "consumer_group_current_member_assignment" else None
    new = pending[3] if len(pending) > 3 else None
    if (
        m is None
        or m.instance_id is None
        or new is None
        or new.get("tombstone")
        or new["type"] != "consumer_group_member_metadata"
        or new.get("instanceId") != m.instance_id
    ):
        return None
    return _written_for(pending, new, "consumer_group_member_metadata")[-1]


def _written_for(pending: list[dict], record: dict, kind: str) -> list[dict]:
    """The records of ``kind`` (not tombstones) for ``record``'s member in the write ``record`` is part of."""
    return [
        r
        for r in pending
        if r["ts"] == record["ts"]
        and r["type"] == kind
        and r.get("member_id") == record["member_id"]
        and not r.get("tombstone")
    ]


def _regex_topics(pending: list[dict]) -> set[str]:
    """The topics the regex records of the batch at the head of ``pending`` resolve to (a resolution's batch)."""
    ts = pending[0]["ts"] if pending else None
    return {
        name
        for r in pending
        if r["ts"] == ts and r["type"] == "consumer_group_regular_expression" and not r.get("tombstone")
        for name in r.get("topics") or []
    }


def _owned_variants(m) -> list[list[dict]]:
    """What the member can have reported owning: when it has partitions pending revocation, first without them
    (its revocation completed: the record that follows has them gone), then with them; else all it has."""

    def pairs(*assignments):
        merged: dict[str, set] = {}
        for a in assignments:
            for topic_id, parts in a.items():
                merged.setdefault(topic_id, set()).update(parts)
        return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(merged.items()) if ps]

    if m.partitions_pending_revocation:
        return [pairs(m.assigned_partitions), pairs(m.assigned_partitions, m.partitions_pending_revocation)]
    return [pairs(m.assigned_partitions)]


# ---------------------------------------------------------------- the timeline, read from records
def consumer_group_timeline(records: Iterable[dict]) -> list[dict]:
    """What a consumer-protocol group's records say happened, in order (each record needs its ``ts``; topic names
    from the subscription metadata when there is one, else topic ids):

    ``member_joined`` / ``member_left`` (a member's first metadata record / its tombstone; a static member that
    restarted under a new id is joined with ``replaces``: the id it left in the same batch), ``group_epoch``,
    ``target_assignment`` (assignment epoch and every member's target), ``member_epoch`` (a member's current
    assignment: epoch, previous epoch, state, assigned, pending revocation, and its target then),
    ``revocation`` (a member's partitions pending revocation, from the record that asked for them to the one where
    they are gone: ``latency_ms``; ``completed`` False when the member was removed first), ``partition_unowned``
    (a partition without an owner, as docs/figures.md defines it: from the record that took it from its member --
    asked to revoke it, or removed -- to the one that gave it to a member: ``unowned_ms``, of which
    ``no_members_ms`` with no member in the group; ``streaming.coordinator.figures`` counts it).
    """
    out: list[dict] = []
    names: dict[str, str] = {}
    members: dict[tuple, dict] = {}  # (group, member) -> {"assigned", "pending", "target"}
    targets: dict[tuple, dict] = {}
    revoking: dict[tuple, tuple] = {}  # (group, member) -> (ts, pending pairs)
    ledgers: dict[str, Ledger] = {}  # group -> who may consume what (figures.py)
    present: collections.Counter = collections.Counter()  # group -> members
    instances: dict[tuple, str] = {}  # (group, member) -> its instance id
    gone: dict[tuple, tuple] = {}  # (group, instance id) -> (member that left, when)

    def named(parts: tuple) -> list[list]:
        return sorted([names.get(t, t), p] for t, ps in parts for p in ps)

    def hold(group_id: str, member_id: str, assigned: tuple, ts: int) -> None:
        """``member_id`` may consume exactly ``assigned`` now (partitions pending revocation it was told to stop)."""
        ledger = ledgers.setdefault(group_id, Ledger())
        ledger.assign({member_id: {(t, p) for t, ps in assigned for p in ps}}, ts)
        for span in ledger.spans:
            if span.ownerless_ms:
                out.append(
                    {
                        "type": "partition_unowned",
                        "group_id": group_id,
                        "ts": ts,
                        "member_id": member_id,
                        "partition": [names.get(span.partition[0], span.partition[0]), span.partition[1]],
                        "since_ts": span.released_ts,
                        "unowned_ms": span.ownerless_ms,
                        "no_members_ms": span.no_members_ms,
                    }
                )
        ledger.spans.clear()

    def members_now(group_id: str, ts: int, change: int) -> None:
        present[group_id] += change
        ledgers.setdefault(group_id, Ledger()).presence(ts, present[group_id] > 0)

    for r in records:
        kind, group_id, ts = r["type"], r["group_id"], r.get("ts")
        member_id = r.get("member_id")
        mkey = (group_id, member_id)
        if kind == "consumer_group_partition_metadata" and not r.get("tombstone"):
            names.update((t["topicId"], t["topicName"]) for t in r["topics"])
        elif kind == "consumer_group_member_metadata":
            if r.get("tombstone"):
                if members.pop(mkey, None) is not None:
                    members_now(group_id, ts, -1)
                    out.append({"type": "member_left", "group_id": group_id, "ts": ts, "member_id": member_id})
                    if mkey in instances:
                        gone[(group_id, instances.pop(mkey))] = (member_id, ts)
            elif mkey not in members:
                members[mkey] = {}
                members_now(group_id, ts, +1)
                joined = {
                    "type": "member_joined",
                    "group_id": group_id,
                    "ts": ts,
                    "member_id": member_id,
                    "instance_id": r.get("instanceId"),
                    "subscribed_topic_names": sorted(r.get("subscribedTopicNames") or []),
                }
                if r.get("instanceId") is not None:
                    instances[mkey] = r["instanceId"]
                    left = gone.pop((group_id, r["instanceId"]), None)
                    if left is not None and left[1] == ts:  # the same batch: a static member restarted
                        joined["replaces"] = left[0]
                out.append(joined)
        elif kind == "consumer_group_metadata" and not r.get("tombstone"):
            out.append({"type": "group_epoch", "group_id": group_id, "ts": ts, "group_epoch": r["epoch"]})
        elif kind == "consumer_group_target_assignment_member":
            if r.get("tombstone"):
                targets.pop(mkey, None)
            else:
                targets[mkey] = _parts(r["topicPartitions"])
        elif kind == "consumer_group_target_assignment_metadata" and not r.get("tombstone"):
            out.append(
                {
                    "type": "target_assignment",
                    "group_id": group_id,
                    "ts": ts,
                    "assignment_epoch": r["assignmentEpoch"],
                    "assignment": {m: named(a) for (g, m), a in sorted(targets.items()) if g == group_id},
                }
            )
        elif kind == "consumer_group_current_member_assignment":
            if r.get("tombstone"):
                hold(group_id, member_id, (), ts)
                started = revoking.pop(mkey, None)
                if started is not None:
                    out.append(
                        {
                            "type": "revocation",
                            "group_id": group_id,
                            "ts": ts,
                            "member_id": member_id,
                            "partitions": started[1],
                            "started_ts": started[0],
                            "latency_ms": ts - started[0],
                            "completed": False,
                        }
                    )
                continue
            assigned, pending = _parts(r["assignedPartitions"]), _parts(r["partitionsPendingRevocation"])
            out.append(
                {
                    "type": "member_epoch",
                    "group_id": group_id,
                    "ts": ts,
                    "member_id": member_id,
                    "member_epoch": r["memberEpoch"],
                    "previous_member_epoch": r["previousMemberEpoch"],
                    "state": r["state"],
                    "assigned": named(assigned),
                    "pending_revocation": named(pending),
                    "target": named(targets.get(mkey, ())),
                }
            )
            started = revoking.get(mkey)
            if started is not None and not pending:
                del revoking[mkey]
                out.append(
                    {
                        "type": "revocation",
                        "group_id": group_id,
                        "ts": ts,
                        "member_id": member_id,
                        "partitions": started[1],
                        "started_ts": started[0],
                        "latency_ms": ts - started[0],
                        "completed": True,
                    }
                )
            elif started is None and pending:
                revoking[mkey] = (ts, named(pending))
            hold(group_id, member_id, assigned, ts)
    return out
