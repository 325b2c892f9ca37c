"""Track a real cluster with no client changes: read its ``__consumer_offsets``, decode the records with our codec,
and turn them into tracker events (as Burrow does for lag).

The broker writes GroupMetadata when a group's round completes (and, since 0.10.1, when it becomes Empty) and
OffsetCommit on every commit it accepts. A GroupMetadata snapshot is the broker's answer for its generation, so it
becomes what observe mode (``streaming/coordinator/observe.py``) takes as proof: a ``join`` for every member carrying
that ``generation`` and its ``leader`` (members already known first, then newcomers), the followers' ``sync``s, and
the leader's ``sync`` whose assignment names every member, so anyone it leaves out is gone. A snapshot with an
unchanged generation is a static member taking its old place (KIP-345): its join under the new id, in that
generation. Commits are attributed to the member owning the partition. An Empty snapshot, or a group tombstone after
a snapshot with members (Kafka 0.9 writes no Empty record first, and keeps the group's offsets until they expire),
means they are all gone; a tombstone after an Empty snapshot, that the group was deleted.

Time: a snapshot's time is its ``currentStateTimestamp`` (GroupMetadataValue v2+). A record without one (older
versions, tombstones) takes its log timestamp, the broker's time of the write. Kafka 0.9 stamps no record (-1): a
following reader that has caught up with the log dates it by its arrival (``ts_inferred: "arrival"``); otherwise the
time is inferred from the group's nearest commits in the log (a partition's records are in the order the broker
appended them): the last commit before the snapshot, else the first one after it. Such events carry ``ts_inferred``
(``"earlier commit"`` / ``"later commit"``, or ``"none"`` and no ``ts`` for a group that never committed; a
following reader gives up waiting for a group's first commit each time it has caught up with the log).

What cannot be seen: rounds that never reached Stable leave no record; membership changes only at snapshots. A
member missing from the next generation left or was expired: if it was committing less than half a session and
less than the members' rebalance timeout before that generation's record, no timeout can have removed it, so the
feed reports a leave; otherwise the tracker decides from how long it was silent (a session-timeout or a
rebalance-timeout expiry). When the group empties, the record comes only when the last member went: a static
member (it sends no LeaveGroup) went last, expired, and the others left; without one, the member heard from last went
last, expired if silent for its session by then (``_all_gone``).

Run the tracker with ``tracker.adopt.unknown.members=true`` (ids and generations come from the broker) and
``tracker.expire.members=false`` (this feed sees no heartbeats; the broker's next snapshot says who is gone).

KIP-848 consumer-group records (types 3-8 and 16) go to ``consumer_feed.ConsumerGroupFeed``: they become the
``consumer_heartbeat`` events that make the consumer model write the same records, timed by the records' log
timestamps (``read_offsets_topic(..., timestamps=True)``). So do the OffsetCommit records of a consumer group it
follows: a ``commit`` from the member owning the partition at its member epoch (or an admin commit to an Empty
group), as the consumer model accepts it.

Kafka 4.x's online migration between the protocols writes both kinds in one batch. An upgrade: the classic group's
GroupMetadata tombstone, then the consumer group's records; so a tombstone after a snapshot with members is held until
the group's next record: consumer-group records of the same time make it the upgrade, handed to the consumer feed
(which explains the batch as the heartbeat that made it; nobody is told gone), anything else its usual meaning. A
downgrade: the consumer group's tombstones, then a GroupMetadata in the same write: the consumer feed explains the
tombstones (the last consumer-protocol member's departure) and, when that made the classic group, the GroupMetadata is
taken as that group's first snapshot, without events of its own.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import sys
import time
from typing import Callable, Iterable, Iterator

from streaming.kafka_client import kafka_conf
from offsets_store.codec import CONSUMER_GROUP_TYPES, CodecError, decode_record
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.coordinator.migration import snapshot_view
from streaming.feeds.consumer_feed import CONSUMER_OBSERVER_SETTINGS, ConsumerGroupFeed
from streaming.feeds.log_end_sampler import LOG_END_SAMPLE_S, LogEndSampler, sample_interval
from streaming.views import terminal

OBSERVER_SETTINGS = {"tracker.adopt.unknown.members": "true", "tracker.expire.members": "false"}
CAUGHT_UP = object()  # yielded by a following reader when it has read everything there is (for now)


@dataclasses.dataclass(frozen=True)
class Polled:
    """Yielded by a following reader after each poll once it has caught up (a moment for other work), with how far
    it has read: partition -> the offset of the next record."""

    positions: dict[int, int]


class ClusterFeed:
    def __init__(self, consumer: ConsumerGroupFeed | None = None) -> None:
        self.consumer = consumer or ConsumerGroupFeed()  # KIP-848 records (streaming/feeds/consumer_feed.py)
        self.snapshots: dict[str, dict] = {}
        self.last_commit_ts: dict[str, int] = {}
        self.member_commit_ts: dict[tuple[str, str], int] = {}  # (group, member id) -> its latest commit
        self.snapshot_ts: dict[str, int | None] = {}  # group -> the time of its current snapshot
        self.held: dict[str, list[dict]] = {}  # a group's records waiting for a time (its first commit)
        # A group's GroupMetadata tombstone after a snapshot with members, held until the group's next record says
        # whether it is an online upgrade's (consumer-group records at its time follow) or the group's end.
        self.upgrading: dict[str, tuple[dict, int | None, int | None]] = {}
        self.undecodable = 0
        self.counts: collections.Counter = collections.Counter()

    def events_for_bytes(
        self, key: bytes, value: bytes | None, timestamp: int | None = None, arrival: int | None = None
    ) -> list[dict]:
        try:
            record = decode_record(key, value)
        except CodecError:
            self.undecodable += 1
            return []
        return self.events_for(record, timestamp, arrival)

    def events_for(self, record: dict, timestamp: int | None = None, arrival: int | None = None) -> list[dict]:
        """Events for one decoded record, in log order; a group's records may be held until their time is known.
        ``timestamp``: the record's log timestamp (the time of a KIP-848 record; a classic record without a time of
        its own, a tombstone or a snapshot before v2, takes it too: the broker's time of the write; Kafka 0.9 has
        none, -1). ``arrival``: when a following reader that had caught up with the log read it (within a poll of
        its write), the time of a record that has neither."""
        kind, group_id = record["type"], record.get("group_id")
        out: list[dict] = []
        if group_id in self.upgrading:
            tombstone, at, came = self.upgrading.pop(group_id)
            if kind in CONSUMER_GROUP_TYPES and timestamp is not None and timestamp == at:
                # The online upgrade (KIP-848): the classic group's record is deleted and the consumer group written
                # in one batch, by the ConsumerGroupHeartbeat that joined: the consumer feed explains it as that
                # request, the classic group's members becoming the consumer group's classic members.
                self.consumer.classic_groups[group_id] = snapshot_view(self.snapshots.pop(group_id))
                self.snapshot_ts.pop(group_id, None)
                self.counts["online upgrades"] += 1
            else:
                out = self._classic_record(tombstone, at, came, hold=False)
        elif (
            kind == "group_metadata"
            and not record.get("tombstone")
            and (self.consumer.pending.get(group_id) or self.consumer.downgraded(group_id))
        ):
            # A GroupMetadata in the batch of a consumer group's records: the online downgrade, when the request
            # that deleted the consumer group was its last consumer-protocol member's departure.
            out = self.consumer.explain(group_id)
            if self.consumer.take_downgrade(group_id):
                self.snapshots[group_id], self.snapshot_ts[group_id] = record, _own_time(record) or timestamp
                self.counts["online downgrades"] += 1
                return out
        return out + self._classic_record(record, timestamp, arrival)

    def _classic_record(
        self, record: dict, timestamp: int | None, arrival: int | None, hold: bool = True
    ) -> list[dict]:
        kind, group_id = record["type"], record.get("group_id")
        if kind in CONSUMER_GROUP_TYPES:
            return self.consumer.events_for(record, timestamp)
        if (
            kind == "group_metadata"
            and record.get("tombstone")
            and (self.snapshots.get(group_id) or {}).get("members")
            and hold
            and timestamp is not None
            and timestamp > 0
        ):
            self.upgrading[group_id] = (record, timestamp, arrival)
            return []
        if (
            kind == "offset_commit"
            and not record.get("tombstone")
            and self.consumer.holds(group_id)
            and group_id not in self.snapshots
            and group_id not in self.held
        ):
            return self.consumer.commit_events(record)  # a consumer-protocol group's commit
        if kind not in ("offset_commit", "group_metadata") or (kind == "offset_commit" and record.get("tombstone")):
            return []  # share/streams-group records; offset tombstones (the tracker applies retention itself)
        if kind == "group_metadata":
            self.counts["snapshots"] += 1
        own, source = _own_time(record), None
        if own is None and timestamp is not None and timestamp > 0:
            own = timestamp
        elif own is None and arrival is not None:
            own, source = arrival, "arrival"
        if group_id in self.held:
            if own is None:
                self.held[group_id].append(record)
                return []
            out = self._release(group_id, own, "later commit" if kind == "offset_commit" else "later snapshot")
            return out + self._events(record, own, source)
        if own is None and group_id not in self.last_commit_ts:
            self.held[group_id] = [record]  # no commit of this group yet: wait for the first
            return []
        return self._events(record, own, source)

    def flush(self) -> list[dict]:
        """Release every held record: their groups have no commit (yet), so their time is unknown; and explain the
        KIP-848 records read so far (a batch is whole once the reader has caught up)."""
        out = [
            e
            for group_id in list(self.upgrading)
            for e in self._classic_record(*self.upgrading.pop(group_id), hold=False)
        ]
        return (
            out
            + [e for group_id in list(self.held) for e in self._release(group_id, None, "none")]
            + self.consumer.flush()
        )

    def _release(self, group_id: str, ts: int | None, source: str) -> list[dict]:
        """The held records of a group (none had a time of its own), timed by ``ts`` from ``source``."""
        return [e for record in self.held.pop(group_id) for e in self._events(record, ts, source)]

    def _events(self, record: dict, ts: int | None, source: str | None = None) -> list[dict]:
        """``ts``: the record's own time, else the inferred one (``source`` says from where)."""
        if record["type"] == "offset_commit":
            self.last_commit_ts[record["group_id"]] = max(
                record["commit_timestamp"], self.last_commit_ts.get(record["group_id"], 0)
            )
            return [self._commit(record)]
        if ts is None and source is None:
            ts, source = self.last_commit_ts[record["group_id"]], "earlier commit"
        if source is not None:
            self.counts[f"time from {source}"] += 1
        events = self._snapshot(record, ts)
        for e in events:
            if ts is not None:
                e.setdefault("ts", ts)  # a departure may carry when its member was last seen
            if source is not None:
                e["ts_inferred"] = source
        return events

    # --- group metadata -------------------------------------------------------------------------------------
    def _snapshot(self, record: dict, ts: int | None) -> list[dict]:
        group_id = record["group_id"]
        previous = self.snapshots.pop(group_id, None)
        before = (previous or {}).get("members") or []
        seen_ts = self.snapshot_ts.pop(group_id, None)
        if record.get("tombstone"):
            if before:  # Kafka 0.9 removes a group its last members left, with no Empty record first
                return self._all_gone(group_id, before, seen_ts, ts, "the group's record was deleted")
            return [{"type": "delete_group", "group_id": group_id}] if previous is not None else []
        self.snapshots[group_id] = record
        self.snapshot_ts[group_id] = ts
        members = record["members"]
        if not members:  # Empty: whoever was there is gone
            return self._all_gone(group_id, before, seen_ts, ts, f"generation {record['generation']} is empty")
        if previous is not None and previous["generation"] == record["generation"]:
            return self._static_replacements(previous, record)
        known = {m["member_id"] for m in before}
        ordered = [m for m in members if m["member_id"] in known] + [m for m in members if m["member_id"] not in known]
        leaves = [
            _leave(group_id, m, "left: it was committing until this generation's round")
            for m in self._left(group_id, before, members, ts)
        ]
        joins = [self._join(record, m, answered=True) for m in ordered]
        # Departures first, as they reached the broker during the round -- unless they would leave nobody: then a
        # newcomer joined while the last member left (a rolling restart), so the group was never Empty, and the
        # joins go first.
        events = joins + leaves if len(leaves) == len(before) else leaves + joins
        leader = record.get("leader") or members[0]["member_id"]
        events += [_sync(record, m) for m in members if m["member_id"] != leader]
        events.append(
            _sync(
                record,
                next(m for m in members if m["member_id"] == leader),
                assignments={m["member_id"]: (m.get("assignment") or {}).get("partitions", []) for m in members},
            )
        )
        return events

    def _all_gone(self, group_id: str, before: list[dict], seen_ts: int | None, ts: int | None, why: str) -> list[dict]:
        """Everyone of the last snapshot is gone, and the broker wrote only when the last one went. A static member
        keeps its place until its session ends (it sends no LeaveGroup), so with one among them it went last and
        the dynamic ones left before; without, the one heard from last went last: silent for its whole session by
        then, it was expired. Each leave carries when its member was last seen, a bound on when it went (the
        tracker reads a member silent for its session at its leave as expired); the last to go, the record's time."""

        def last_seen(m: dict) -> int | None:
            times = [t for t in (seen_ts, self.member_commit_ts.get((group_id, m["member_id"]))) if t is not None]
            return max(times, default=None)

        static = [m for m in before if m.get("group_instance_id") is not None]
        expired = static
        if before and not static and ts is not None:
            latest = max(before, key=lambda m: last_seen(m) or 0)
            seen = last_seen(latest)
            expired = [latest] if seen is not None and ts - seen >= latest["session_timeout"] else []
        events = []
        for m in before:
            event = _leave(group_id, m, why)
            if m not in expired and last_seen(m) is not None:
                event["ts"] = last_seen(m)
            events.append(event)
        return events

    def _left(self, group_id: str, before: list[dict], members: list[dict], ts: int | None) -> list[dict]:
        """Members gone from the new generation that were active too recently to have been expired: committing less
        than half a session before its record (no session timeout), and less than the members' rebalance timeout
        before it (a member the round's join timeout removes is silent for that long: it was not rejoining)."""
        current = {m["member_id"] for m in members}
        instances = {m.get("group_instance_id") for m in members} - {None}
        gone = [m for m in before if m["member_id"] not in current and m.get("group_instance_id") not in instances]
        if not gone or ts is None:
            return []
        rebalance_timeout = max(m["rebalance_timeout"] for m in before)
        return [
            m
            for m in gone
            if (last := self.member_commit_ts.get((group_id, m["member_id"]))) is not None
            and ts - last < min(m["session_timeout"] // 2, rebalance_timeout)
        ]

    def _static_replacements(self, previous: dict, record: dict) -> list[dict]:
        """Same generation, new snapshot: static members restarted and took their old places without a rebalance
        (KIP-345). Replay the broker's answers: the instance's join under its new id in this generation, its sync."""
        before = {m["member_id"] for m in previous["members"]}
        return [
            e
            for m in record["members"]
            if m["member_id"] not in before and m.get("group_instance_id") is not None
            for e in (self._join(record, m, answered=True), _sync(record, m))
        ]

    @staticmethod
    def _join(record: dict, m: dict, answered: bool) -> dict:
        sub = m.get("subscription") or {}
        rebalance_timeout = m.get("rebalance_timeout", -1)
        event = {
            "type": "join",
            "group_id": record["group_id"],
            "member_id": m["member_id"],
            "group_instance_id": m.get("group_instance_id"),
            "client_id": m.get("client_id", ""),
            "client_host": m.get("client_host", ""),
            "session_timeout_ms": m["session_timeout"],
            "rebalance_timeout_ms": rebalance_timeout if rebalance_timeout >= 0 else m["session_timeout"],
            "protocol_type": record.get("protocol_type") or "consumer",
            "protocols": [
                {
                    "name": record.get("protocol") or "",
                    "topics": sub.get("topics", []),
                    "owned_partitions": sub.get("owned_partitions") or [],
                    "generation": sub.get("generation", -1),
                    "user_data": sub.get("user_data"),
                    "rack": sub.get("rack"),
                    "version": sub.get("version"),
                }
            ],
        }
        if answered:  # the snapshot is the broker's answer: this member is in that generation, under that leader
            event["generation"], event["leader"] = record["generation"], record.get("leader")
        return event

    # --- commits --------------------------------------------------------------------------------------------
    def _commit(self, record: dict) -> dict:
        group_id, tp = record["group_id"], [record["topic"], record["partition"]]
        snapshot = self.snapshots.get(group_id)
        owner = next(
            (m for m in (snapshot or {}).get("members", []) if tp in (m.get("assignment") or {}).get("partitions", [])),
            None,
        )
        offset = {
            "topic": record["topic"],
            "partition": record["partition"],
            "offset": record["offset"],
            "leader_epoch": record.get("leader_epoch", -1),
            "metadata": record.get("metadata") or "",
        }
        if owner is not None:
            key = (group_id, owner["member_id"])
            self.member_commit_ts[key] = max(record["commit_timestamp"], self.member_commit_ts.get(key, 0))
        event = {
            "type": "commit",
            "group_id": group_id,
            "ts": record["commit_timestamp"],
            "offsets": [offset],
            "member_id": owner["member_id"] if owner else "",
            "group_instance_id": owner.get("group_instance_id") if owner else None,
            "generation": snapshot["generation"] if owner else -1,
        }
        expire = record.get("expire_timestamp", -1)
        if expire not in (None, -1):
            event["retention_ms"] = max(expire - record["commit_timestamp"], 0)
        return event


def _own_time(record: dict) -> int | None:
    """The time a record carries: a commit's timestamp, a v2+ snapshot's state timestamp."""
    if record["type"] == "offset_commit":
        return record["commit_timestamp"]
    ts = record.get("current_state_timestamp", -1)
    return ts if ts is not None and ts > 0 else None


def _leave(group_id: str, m: dict, reason: str) -> dict:
    return {
        "type": "leave",
        "group_id": group_id,
        "member_id": m["member_id"],
        "group_instance_id": m.get("group_instance_id"),
        "reason": reason,
    }


def _sync(record: dict, member: dict, assignments: dict | None = None) -> dict:
    event = {
        "type": "sync",
        "group_id": record["group_id"],
        "member_id": member["member_id"],
        "group_instance_id": member.get("group_instance_id"),
        "generation": record["generation"],
    }
    if assignments is not None:
        event["assignments"] = assignments
    return event


def read_offsets_topic(
    bootstrap: str,
    topic: str = "__consumer_offsets",
    follow: bool = False,
    poll_ms: int = 500,
    client: dict | None = None,
    timestamps: bool = False,
) -> Iterator:
    """Key/value pairs (``timestamps``: key, value, log timestamp) of every partition, in each partition's order,
    from the beginning (to the end, or for ever with ``follow``, yielding ``CAUGHT_UP`` whenever it has read all
    there is, and ``Polled`` after every poll from the first time on; once it has, ``timestamps`` adds the reader's
    clock when it read the record: its arrival, within a poll of its write, the only time a Kafka 0.9 tombstone has).
    ``client``: kafka-python settings (see ``streaming.kafka_client.kafka_conf``), e.g. ``{"api_version": (0, 9)}``
    for a 0.9 broker."""
    from kafka import KafkaConsumer, TopicPartition

    from streaming.kafka_client.log_end import log_end_offsets

    consumer = KafkaConsumer(
        **kafka_conf.for_client(
            KafkaConsumer, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-cluster-feed"
        )
        | {"enable_auto_commit": False, "exclude_internal_topics": False}
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        caught_up = live = False
        while not tps:  # a cluster creates __consumer_offsets when a group first needs it
            live = True  # then every record is read as it is written
            if not follow:
                raise LookupError(f"topic {topic!r} not found on {bootstrap} (no group has used this cluster yet?)")
            yield CAUGHT_UP  # nothing to read yet: the follower is as caught up as it can be
            time.sleep(poll_ms / 1000)
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        ends = log_end_offsets(consumer, tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while True:
            batches = consumer.poll(timeout_ms=poll_ms)
            now = int(time.time() * 1000)
            for tp in sorted(batches):
                for r in batches[tp]:
                    if not timestamps:
                        yield r.key, r.value
                    else:
                        yield (r.key, r.value, r.timestamp, now) if live else (r.key, r.value, r.timestamp)
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                if not follow:
                    return
                if not batches and not caught_up:
                    live = True
                    yield CAUGHT_UP
                caught_up = not batches
            if live:  # every poll, records or not: a busy log never shows the end and a quiet one yields nothing
                yield Polled({tp.partition: consumer.position(tp) for tp in tps})
    finally:
        consumer.close()


def events_from(
    pairs: Iterable, feed: ClusterFeed | None = None, caught_up: Callable[[], None] | None = None
) -> Iterator[dict]:
    """``caught_up``: called when a following reader has read all there is, once the events that explains are out
    (a publisher settles then: the last events may otherwise wait for the next record)."""
    feed = feed or ClusterFeed()
    for pair in pairs:
        if pair is CAUGHT_UP:
            yield from feed.flush()
            if caught_up is not None:
                caught_up()
        elif isinstance(pair, Polled):
            continue
        else:
            yield from feed.events_for_bytes(*pair)
    yield from feed.flush()


def summary(feed: ClusterFeed, sent: int, topic: str) -> list[str]:
    lines = [f"published {sent} events to {topic} from {feed.counts['snapshots']} group records"]
    consumer = feed.consumer.counts
    if consumer["consumer group records"]:
        lines.append(
            f"{consumer['consumer group records']} KIP-848 consumer-group records became "
            f"{consumer['events']} consumer_heartbeat/topic_metadata/delete_group events that make the "
            "consumer model write the same records"
            + (
                f"; {consumer['unexplained records']} records no request explains (the tracker misses them)"
                if consumer["unexplained records"]
                else ""
            )
        )
    commits = {k[len("commits by ") :]: n for k, n in consumer.items() if k.startswith("commits by ")}
    if commits or consumer["admin commits"]:
        lines.append(
            "their offset commits became commit events: "
            + ", ".join(f"{n} from {who}" for who, n in sorted(commits.items()))
            + (
                f"{', ' if commits else ''}{consumer['admin commits']} admin commits to Empty groups"
                if consumer["admin commits"]
                else ""
            )
            + (
                f"; {consumer['commits the model refuses']} the model refuses"
                if consumer["commits the model refuses"]
                else ""
            )
        )
    inferred = {k[len("time from ") :]: n for k, n in feed.counts.items() if k.startswith("time from ")}
    if inferred:
        said = {
            "earlier commit": "the group's last commit before it",
            "later commit": "its first commit after it",
            "later snapshot": "the next snapshot's time",
            "arrival": "when the following reader read it",
            "none": "nowhere: the group never committed (no ts)",
        }
        lines.append(
            f"time inferred for {sum(inferred.values())} group records with no time of their own "
            f"(GroupMetadataValue before v2 or a tombstone, on a broker that stamps no log time: 0.9): "
            + ", ".join(f"{n} from {said.get(source, source)}" for source, n in sorted(inferred.items()))
            + " (events marked ts_inferred)"
        )
    if feed.undecodable:
        lines.append(f"skipped {feed.undecodable} records the codec could not decode")
    lines.append(
        "run the tracker with "
        + " ".join(f"--coordinator-conf {k}={v}" for k, v in tracker_settings(feed.consumer.config).items())
    )
    return lines


def tracker_settings(consumer: ConsumerGroupConfig) -> dict[str, str]:
    """What ``run`` needs to follow this feed: the observer settings (for both protocols), and how the brokers'
    consumer-group epochs differ from Kafka 4.0's, when they do."""
    extra = {"initial.group.epoch": str(consumer.initial_group_epoch)} if consumer.initial_group_epoch else {}
    if consumer.empty_group_assignment_epoch:
        extra["empty.group.assignment.epoch"] = "true"
    if consumer.upgrade_with_metadata:
        extra["upgrade.with.metadata"] = "true"
    if consumer.group_consumer_assignment_interval_ms:
        extra["group.consumer.assignment.interval.ms"] = str(consumer.group_consumer_assignment_interval_ms)
    return {**OBSERVER_SETTINGS, **extra}


def consumer_group_feed(bootstrap: str, client: dict, conf: dict[str, str]) -> tuple[ConsumerGroupFeed, str]:
    """The KIP-848 feed for this cluster, and a line saying what it found out: the epoch new groups start at, how
    often their targets are computed (the broker's default for its release) and where the topics come from (Kafka
    4.1+: the cluster's metadata), from the brokers' ApiVersions; ``conf`` (``--coordinator-conf``) wins. A broker
    told ``api.version`` below 4 (0.9) is not asked: it has no such groups."""
    from streaming.coordinator.routing import Configs
    from streaming.feeds.broker_topics import BrokerTopics
    from streaming.kafka_client import broker_features

    told = tuple(client.get("api_version") or ())
    if told and told < (4,):
        traits = {
            "initial_group_epoch": 0,
            "assignment_interval_ms": 0,
            "empty_group_assignment_epoch": False,
            "partition_metadata_records": True,
            "upgrade_with_metadata": False,
        }
        found = f"api.version={broker_features.version_text(told)}: no consumer-protocol groups to learn about"
    else:
        traits = broker_features.consumer_group_traits(broker_features.api_versions(bootstrap, client))
        found = (
            "consumer-protocol groups: "
            + (
                "Kafka 4.3+, new groups start at epoch 1"
                if traits["initial_group_epoch"]
                else "new groups start at epoch 0"
            )
            + (
                f"; targets computed at most every {traits['assignment_interval_ms']} ms (the broker's default "
                "group.consumer.assignment.interval.ms; give the broker's or group's own if set)"
                if traits["assignment_interval_ms"]
                else ""
            )
            + (
                "; Kafka 4.4+, an emptied group's assignment epoch follows its group epoch"
                if traits["empty_group_assignment_epoch"]
                else ""
            )
            + (
                "; topics from their ConsumerGroupPartitionMetadata records"
                if traits["partition_metadata_records"]
                else "; topics from the cluster's metadata, and an upgraded group keeps them (Kafka 4.1+)"
            )
        )
    props = {
        **CONSUMER_OBSERVER_SETTINGS,
        "initial.group.epoch": traits["initial_group_epoch"],
        "empty.group.assignment.epoch": str(traits["empty_group_assignment_epoch"]).lower(),
        "upgrade.with.metadata": str(traits["upgrade_with_metadata"]).lower(),
        "group.consumer.assignment.interval.ms": traits["assignment_interval_ms"],
        **conf,
    }
    config = Configs.from_properties(props).consumer
    given = [
        key
        for key in (
            "initial.group.epoch",
            "empty.group.assignment.epoch",
            "upgrade.with.metadata",
            "group.consumer.assignment.interval.ms",
        )
        if key in conf
    ]
    if given:
        found += " (as given: " + ", ".join(f"{key}={conf[key]}" for key in given) + ")"
    topics = None if traits["partition_metadata_records"] else BrokerTopics.of_cluster(bootstrap, client)
    return ConsumerGroupFeed(config, topics=topics), found


def main(argv: list[str] | None = None) -> int:
    from streaming.tracker import TrackerConfig

    p = argparse.ArgumentParser(prog="rebalance-tracker cluster-feed", description=__doc__.splitlines()[0])
    p.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP"),
        help="the cluster to observe (default: $KAFKA_BOOTSTRAP)",
    )
    p.add_argument("--offsets-topic", default="__consumer_offsets")
    p.add_argument("--feed-bootstrap", default=None, help="where the tracker's events topic lives (default: same)")
    p.add_argument(
        "--events-topic", default=TrackerConfig.events_topic, help="the tracker's events topic (default: %(default)s)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="write the events as JSON lines to this file instead ('-': stdout), for replay and report",
    )
    p.add_argument("--follow", action="store_true", help="keep reading new records until Ctrl-C")
    p.add_argument(
        "--lag-sample-s",
        type=sample_interval,
        default=None,
        metavar="SECONDS",
        help="publish log-end samples of the groups' topics, read from the observed cluster, every this "
        "many seconds once caught up (without --follow: once, at the end), for lag (docs/lag.md); "
        f"0: never. Default: {LOG_END_SAMPLE_S:g} (as run's sampler, which says why) when the events "
        "go to a file or another cluster; never when they go to the observed cluster, whose run "
        "samples the same log ends itself",
    )
    p.add_argument(
        "--coordinator-conf",
        dest="coordinator_conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the watched brokers' consumer-group settings, as run takes them (e.g. "
        "group.consumer.assignors=range; initial.group.epoch: 1 for Kafka 4.3+, found out by default; "
        "group.consumer.assignment.interval.ms: the broker's default for its release unless given)",
    )
    kafka_conf.add_arguments(p)
    kafka_conf.add_arguments(p, prefix="feed-")
    args = p.parse_args(argv)
    if not args.bootstrap:
        print("cluster-feed: give --bootstrap HOST:PORT or set KAFKA_BOOTSTRAP", file=sys.stderr)
        return 2
    feed_bootstrap = args.feed_bootstrap or args.bootstrap
    same_cluster = feed_bootstrap == args.bootstrap
    try:
        props = kafka_conf.from_args(args)
        feed_props = kafka_conf.from_args(args, prefix="feed-")
        client = kafka_conf.to_kwargs(props)
        # Settings belong to one cluster: the events topic's takes its own (--feed-kafka-conf), and the observed
        # cluster's only when it is the same cluster. (A 0.9 cluster's api.version=0.9 handed to a newer broker's
        # producer made it write nothing.)
        feed_client = kafka_conf.to_kwargs(feed_props) if feed_props or not same_cluster else client
    except (OSError, ValueError) as exc:
        print(f"cluster-feed: {exc}", file=sys.stderr)
        return 2
    refused = kafka_conf.access_error(args.bootstrap, client) or (
        kafka_conf.access_error(feed_bootstrap, feed_client) if not same_cluster and not args.out else None
    )
    if refused:
        print(f"cluster-feed: {refused}", file=sys.stderr)
        return 2
    from kafka.errors import KafkaError

    try:
        consumer_feed, told = consumer_group_feed(args.bootstrap, client, kafka_conf.parse_pairs(args.coordinator_conf))
    except ValueError as exc:
        print(f"cluster-feed: {exc}", file=sys.stderr)
        return 2
    except KafkaError as exc:
        from streaming.kafka_client.broker_features import unavailable

        print(f"cluster-feed: {unavailable(args.bootstrap, client, exc)}", file=sys.stderr)
        return 1
    print(told, file=sys.stderr)
    print(
        "run the tracker with "
        + " ".join(f"--coordinator-conf {k}={v}" for k, v in tracker_settings(consumer_feed.config).items()),
        file=sys.stderr,
    )
    from kafka import KafkaProducer

    if props:
        print(f"client settings: {kafka_conf.describe(props)}", file=sys.stderr)
    if not same_cluster and not args.out:
        print(
            f"events topic on {feed_bootstrap}, with "
            + (
                f"its own settings: {kafka_conf.describe(feed_props)}"
                if feed_props
                else "no client settings (--feed-kafka-conf gives some; the observed cluster's are not used there)"
            ),
            file=sys.stderr,
        )
    if args.out:
        producer = FileProducer(sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8"))
        target = "stdout" if args.out == "-" else args.out
    else:
        try:
            producer = KafkaProducer(
                **kafka_conf.for_client(
                    KafkaProducer,
                    feed_client,
                    bootstrap_servers=feed_bootstrap,
                    acks="all",
                    client_id="rebalance-tracker-cluster-feed",
                )
            )
        except KafkaError as exc:
            from streaming.kafka_client.broker_features import unavailable

            print(
                f"cluster-feed: cannot write to the events topic: {unavailable(feed_bootstrap, feed_client, exc)}",
                file=sys.stderr,
            )
            return 1
        target = args.events_topic
        # Created as run creates it (TrackerConfig.events_partitions), not by the broker on first use with its
        # default count.
        from streaming.kafka_client.topics import TopicsMissing, ensure_topics

        try:
            ensure_topics(feed_bootstrap, {target: TrackerConfig.events_partitions}, feed_client)
        except TopicsMissing:
            print(
                f"cluster-feed: {target} does not exist and {feed_bootstrap} cannot create topics over the "
                f"protocol: it is created on first use if the broker allows it (auto.create.topics.enable, with "
                f"its default partition count), else create it with Kafka's tool",
                file=sys.stderr,
            )
    feed, publisher = ClusterFeed(consumer_feed), Publisher(producer, args.events_topic)
    interval = (
        args.lag_sample_s
        if args.lag_sample_s is not None
        else LOG_END_SAMPLE_S
        if args.out or not same_cluster
        else 0.0
    )
    rounds = (
        LogEndRounds(LogEndSampler(args.bootstrap, args.events_topic, interval, client), publisher, args.offsets_topic)
        if interval
        else None
    )
    print(
        f"log-end samples of the groups' topics, for lag: every {interval:g} s once caught up"
        if interval and args.follow
        else "log-end samples of the groups' topics, for lag: once, at the end"
        if interval
        else "no log-end samples (--lag-sample-s): the tracker's run samples this cluster itself",
        file=sys.stderr,
    )
    try:
        with terminal.progress(f"reading {args.offsets_topic}", unit="records") as task:

            def counted(pairs: Iterable) -> Iterator:
                for pair in pairs:
                    if isinstance(pair, Polled):
                        if rounds is not None and rounds.polled(pair.positions):
                            yield CAUGHT_UP  # read past the held samples: the feed's events first, then them
                    elif pair is not CAUGHT_UP:
                        task.advance()
                    yield pair

            def caught_up() -> None:  # the events of every record read so far are out: the held samples follow
                if rounds is not None:
                    rounds.release()
                publisher.settle()

            # Closed here, whatever stops the loop: Ctrl-C may land between two records (in a log-end round), and a
            # reader left to the garbage collector at exit hung closing its consumer.
            with contextlib.closing(
                read_offsets_topic(args.bootstrap, args.offsets_topic, args.follow, client=client, timestamps=True)
            ) as pairs:
                # following: every event so far acknowledged (written out, with --out) before waiting for more
                for event in events_from(counted(pairs), feed, caught_up=caught_up):
                    publisher.send(event)
                    if rounds is not None:
                        rounds.learn(event)
                    task.note = f"{publisher.sent:,} events published to {target}"
            if rounds is not None and not args.follow:
                rounds.run()
        publisher.settle()
    except KeyboardInterrupt:
        try:
            publisher.settle()
        except Undelivered:
            pass
    except Undelivered:
        pass
    except LookupError as exc:
        print(f"cluster-feed: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        from streaming.kafka_client.broker_features import unavailable

        print(f"cluster-feed: {unavailable(args.bootstrap, client, exc)}", file=sys.stderr)
        return 1
    finally:
        producer.close(timeout=5)
        if rounds is not None:
            rounds.close()
        if consumer_feed.topics is not None:
            consumer_feed.topics.close()
    sent = publisher.delivered
    for line in summary(feed, sent, target):
        print(line, file=sys.stderr)
    if rounds is not None:
        print(
            f"log-end samples: {rounds.sent} in {rounds.rounds} rounds (among the events published)"
            + (f"; {rounds.failed} rounds failed: {rounds.error}" if rounds.failed else ""),
            file=sys.stderr,
        )
    if publisher.failed:
        print(
            f"cluster-feed: {publisher.failed} of {publisher.sent} events were not delivered to {args.events_topic} "
            f"on {feed_bootstrap}: {publisher.error}",
            file=sys.stderr,
        )
        return 1
    return 0


class LogEndRounds:
    """The feed's log-end samples: the sampler's rounds on the observed cluster, at most one per its interval, sent
    in line with the feed's own events (one thread, one publisher). It learns each group's topics from the events.

    Following, a round's samples are held until the reader has read past where ``__consumer_offsets`` ended right
    after them, and the feed's events of what it read are out (``release``): a sample carries the wall clock, and
    the tracker's models take it as time gone by, so it must come after the events of every record written before
    it -- records the reader had not read yet, or had read and the consumer feed still held (a batch may go on).
    Sent at once, a sample ahead of them moved a group's clock past their requests: with Kafka 4.3+'s assignment
    interval, the model then deferred a target the broker had computed."""

    def __init__(self, sampler: LogEndSampler, publisher: "Publisher", offsets_topic: str) -> None:
        self.sampler, self.publisher, self.offsets_topic = sampler, publisher, offsets_topic
        self.held: list[dict] = []
        self.marks: dict[int, int] = {}  # where __consumer_offsets ended once the held samples were taken
        self.next_round = 0.0
        self.rounds = self.sent = self.failed = 0
        self.error: str | None = None

    def learn(self, event: dict) -> None:
        if event["type"] == "commit":
            self.sampler.learn(event["group_id"], {o["topic"] for o in event["offsets"]})
        elif event["type"] == "sync" and event.get("assignments"):
            self.sampler.learn(event["group_id"], {tp[0] for parts in event["assignments"].values() for tp in parts})

    def polled(self, positions: dict[int, int]) -> bool:
        """Following, after a poll (``positions``: how far the reader has read): a round if one is due and none is
        held; whether the held samples may go (once the feed's events of what was read are out)."""
        if not self.held and time.monotonic() >= self.next_round:
            held = self._round()
            try:
                self.marks = self._offsets_ends()
            except Exception as exc:  # as a failed round: the next one tries again
                self.failed += 1
                self.error = repr(exc)
                held = []
            self.held = held
        return bool(self.held) and all(positions.get(p, 0) >= end for p, end in self.marks.items())

    def release(self) -> None:
        """The feed's events of every record read are out, and the reader has read past the held samples (or all
        there is): they follow."""
        held, self.held = self.held, []
        self._send(held)

    def _offsets_ends(self) -> dict[int, int]:
        from kafka import TopicPartition

        from streaming.kafka_client.log_end import log_end_offsets

        consumer = self.sampler.consumer()
        partitions = sorted(consumer.partitions_for_topic(self.offsets_topic) or ())
        ends = log_end_offsets(consumer, [TopicPartition(self.offsets_topic, p) for p in partitions])
        return {tp.partition: offset for tp, offset in ends.items()}

    def run(self) -> None:
        """A round sent at once (the log read to its end)."""
        self._send(self._round())

    def _round(self) -> list[dict]:
        self.next_round = time.monotonic() + self.sampler.interval_s
        try:
            events = self.sampler.samples()
        except Exception as exc:  # a failed look-up must not stop the feed: the next round tries again
            self.failed += 1
            self.error = repr(exc)
            return []
        self.rounds += bool(events)
        return events

    def _send(self, events: list[dict]) -> None:
        for event in events:
            self.publisher.send(event)
        self.sent += len(events)
        if events:
            self.publisher.settle()  # acknowledged (or in the file) now, not at the log's next record

    def close(self) -> None:
        self.sampler.stop()


class FileProducer:
    """``--out``: JSON lines to a file, with the producer calls ``Publisher`` makes (every line is delivered)."""

    class Written:
        is_done = True

        @staticmethod
        def succeeded() -> bool:
            return True

    def __init__(self, out) -> None:
        self.out = out

    def send(self, topic: str, key: bytes, value: bytes) -> "FileProducer.Written":
        self.out.write(value.decode("utf-8") + "\n")
        return self.Written()

    def flush(self, timeout: float | None = None) -> None:
        self.out.flush()

    def close(self, timeout: float | None = None) -> None:
        if self.out is not sys.stdout:
            self.out.close()


class Undelivered(RuntimeError):
    pass


class Publisher:
    """Sends events to the events topic, keyed by group id, and checks that the broker acknowledged each one:
    kafka-python's ``flush`` says nothing of records it refused or never answered."""

    def __init__(self, producer, topic: str, timeout_s: float = 60.0, every: int = 10_000) -> None:
        self.producer, self.topic, self.timeout_s, self.every = producer, topic, timeout_s, every
        self.pending: list = []
        self.sent = self.delivered = self.failed = 0
        self.error: str | None = None

    def send(self, event: dict) -> None:
        self.pending.append(
            self.producer.send(
                self.topic,
                key=event["group_id"].encode("utf-8"),
                value=json.dumps(event, separators=(",", ":")).encode("utf-8"),
            )
        )
        self.sent += 1
        if len(self.pending) >= self.every:
            self.settle()

    def settle(self) -> None:
        """Wait for every pending send; raises ``Undelivered`` if any failed (``failed``, ``error`` say how)."""
        from kafka.errors import KafkaTimeoutError

        try:
            self.producer.flush(timeout=self.timeout_s)
        except KafkaTimeoutError:
            pass
        for future in self.pending:
            if future.is_done and future.succeeded():
                self.delivered += 1
                continue
            self.failed += 1
            if self.error is None:
                self.error = (
                    repr(future.exception) if future.is_done else f"not acknowledged within {self.timeout_s:.0f} s"
                )
        self.pending = []
        if self.failed:
            raise Undelivered(self.error)
