"""Track a real cluster with no client changes: read its ``__consumer_offsets``, decode the records with our codec,
and turn them into tracker events (as Burrow does for lag).

The broker writes GroupMetadata when a group becomes Stable (or Empty) and OffsetCommit on every commit. Each new
GroupMetadata snapshot becomes: a ``join`` for every member present (with the broker's member id, its subscription
and timeouts), a ``leave`` for every member that is gone, followers' ``sync``s, and the leader's ``sync`` carrying the
stored assignment and the broker's generation (see ``events_for`` for the order); a snapshot with an unchanged generation is a static member taking its
old place. Commits are attributed to the member owning the partition.

What cannot be seen: rounds that never reached Stable leave no record, so the generation of an Empty group is ours
(the next Stable snapshot brings the broker's numbering back); and membership changes only at snapshots.

Run the tracker with ``tracker.adopt.unknown.members=true`` (ids and generations come from the broker) and
``tracker.expire.members=false`` (this feed sees no heartbeats; the broker's next snapshot says who left).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Iterable, Iterator

from offsets_store import kafka_conf
from offsets_store.codec import CodecError, decode_record

OBSERVER_SETTINGS = {"tracker.adopt.unknown.members": "true", "tracker.expire.members": "false"}


class ClusterFeed:
    def __init__(self) -> None:
        self.snapshots: dict[str, dict] = {}
        self.undecodable = 0

    def events_for_bytes(self, key: bytes, value: bytes | None) -> list[dict]:
        try:
            record = decode_record(key, value)
        except CodecError:
            self.undecodable += 1
            return []
        return self.events_for(record)

    def events_for(self, record: dict) -> list[dict]:
        kind, group_id = record["type"], record.get("group_id")
        if kind == "offset_commit":
            return self._commit(record)
        if kind != "group_metadata":
            return []            # KIP-848 / share-group records: not the classic protocol
        if record.get("tombstone"):
            self.snapshots.pop(group_id, None)
            return [{"type": "delete_group", "group_id": group_id}]
        previous = self.snapshots.get(group_id)
        self.snapshots[group_id] = record
        ts = record.get("current_state_timestamp", -1)
        ts = ts if ts and ts > 0 else int(time.time() * 1000)
        if previous is not None and previous["generation"] == record["generation"] and record["members"]:
            return self._static_replacements(previous, record, ts)
        # Replayed in an order that opens one round, as the broker saw it: newcomers join first (so a membership
        # that turned over completely never looks empty), the departed leave, then the previous leader rejoins (a
        # leader's JoinGroup in Stable starts a round even when nothing else changed) and the rest follow.
        before = {m["member_id"]: m for m in (previous or {}).get("members", [])}
        before_instances = {m.get("group_instance_id") for m in before.values()} - {None}
        current = {m["member_id"] for m in record["members"]}
        old_leader = before.get((previous or {}).get("leader"), {})

        def stays(m: dict) -> bool:   # a restarted static member keeps its place under a new member id
            return m["member_id"] in before or m.get("group_instance_id") in before_instances

        def was_leader(m: dict) -> bool:
            return m["member_id"] == old_leader.get("member_id") or (
                m.get("group_instance_id") is not None and m.get("group_instance_id") == old_leader.get(
                    "group_instance_id"))

        events = [self._join(record, m, ts) for m in record["members"] if not stays(m)]
        instances = {m.get("group_instance_id") for m in record["members"]} - {None}
        events += [{"type": "leave", "group_id": group_id, "ts": ts, "member_id": mid,
                    "group_instance_id": m.get("group_instance_id"), "reason": "gone from the group"}
                   for mid, m in before.items()
                   if mid not in current and m.get("group_instance_id") not in instances]  # restarted static: stays
        staying = sorted((m for m in record["members"] if stays(m)), key=lambda m: not was_leader(m))
        events += [self._join(record, m, ts) for m in staying]
        if not record["members"]:
            return events
        leader = record.get("leader") or record["members"][0]["member_id"]
        generation = record["generation"]
        for m in record["members"]:
            if m["member_id"] != leader:
                events.append(self._sync(group_id, ts, m, generation))
        leader_member = next(m for m in record["members"] if m["member_id"] == leader)
        events.append(self._sync(group_id, ts, leader_member, generation, assignments={
            m["member_id"]: (m.get("assignment") or {}).get("partitions", []) for m in record["members"]}))
        return events

    def _static_replacements(self, previous: dict, record: dict, ts: int) -> list[dict]:
        """Same generation, new snapshot: static members restarted and took their old places without a rebalance
        (KIP-345). Replay that: a JoinGroup with the instance id and no member id, then the new id's SyncGroup."""
        before = {m["member_id"] for m in previous["members"]}
        events = []
        for m in record["members"]:
            if m["member_id"] in before or m.get("group_instance_id") is None:
                continue
            join = self._join(record, m, ts)
            join["member_id"] = ""
            events += [join, self._sync(record["group_id"], ts, m, record["generation"])]
        return events

    def _join(self, record: dict, m: dict, ts: int) -> dict:
        sub = m.get("subscription") or {}
        return {"type": "join", "group_id": record["group_id"], "ts": ts, "member_id": m["member_id"],
                "group_instance_id": m.get("group_instance_id"), "client_id": m.get("client_id", ""),
                "client_host": m.get("client_host", ""), "session_timeout_ms": m["session_timeout"],
                "rebalance_timeout_ms": m.get("rebalance_timeout", m["session_timeout"]),
                "protocol_type": record.get("protocol_type") or "consumer",
                "protocols": [{"name": record.get("protocol") or "", "topics": sub.get("topics", []),
                               "owned_partitions": sub.get("owned_partitions") or [],
                               "generation": sub.get("generation", -1), "user_data": sub.get("user_data"),
                               "rack": sub.get("rack")}]}

    @staticmethod
    def _sync(group_id: str, ts: int, member: dict, generation: int, assignments: dict | None = None) -> dict:
        event = {"type": "sync", "group_id": group_id, "ts": ts, "member_id": member["member_id"],
                 "group_instance_id": member.get("group_instance_id"), "generation": generation}
        if assignments is not None:
            event["assignments"] = assignments
        return event

    def _commit(self, record: dict) -> list[dict]:
        if record.get("tombstone"):
            return []            # the tracker applies retention itself
        group_id, tp = record["group_id"], [record["topic"], record["partition"]]
        snapshot = self.snapshots.get(group_id)
        owner = next((m for m in (snapshot or {}).get("members", [])
                      if tp in (m.get("assignment") or {}).get("partitions", [])), None)
        offset = {"topic": record["topic"], "partition": record["partition"], "offset": record["offset"],
                  "leader_epoch": record.get("leader_epoch", -1), "metadata": record.get("metadata") or ""}
        event = {"type": "commit", "group_id": group_id, "ts": record["commit_timestamp"], "offsets": [offset],
                 "member_id": owner["member_id"] if owner else "",
                 "group_instance_id": owner.get("group_instance_id") if owner else None,
                 "generation": snapshot["generation"] if owner else -1}
        expire = record.get("expire_timestamp", -1)
        if expire not in (None, -1):
            event["retention_ms"] = max(expire - record["commit_timestamp"], 0)
        return [event]


def read_offsets_topic(bootstrap: str, topic: str = "__consumer_offsets", follow: bool = False,
                       poll_ms: int = 500, client: dict | None = None) -> Iterator[tuple[bytes, bytes | None]]:
    """Key/value pairs of every partition, in each partition's order, from the beginning (to the end, or for ever
    with ``follow``). ``client``: kafka-python settings (see ``offsets_store.kafka_conf``), e.g.
    ``{"api_version": (0, 9)}`` for a 0.9 broker."""
    from kafka import KafkaConsumer, TopicPartition

    from offsets_store.log_end import log_end_offsets

    consumer = KafkaConsumer(**kafka_conf.for_client(KafkaConsumer, client, bootstrap_servers=bootstrap,
                                                     client_id="rebalance-tracker-cluster-feed")
                             | {"enable_auto_commit": False, "exclude_internal_topics": False})
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not tps:
            raise ValueError(f"topic {topic!r} not found on {bootstrap}")
        ends = log_end_offsets(consumer, tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while True:
            batches = consumer.poll(timeout_ms=poll_ms)
            for tp in sorted(batches):
                for r in batches[tp]:
                    yield r.key, r.value
            if not follow and all(consumer.position(tp) >= ends[tp] for tp in tps):
                return
    finally:
        consumer.close()


def events_from(pairs: Iterable[tuple[bytes, bytes | None]], feed: ClusterFeed | None = None) -> Iterator[dict]:
    feed = feed or ClusterFeed()
    for key, value in pairs:
        yield from feed.events_for_bytes(key, value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rebalance-tracker cluster-feed", description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP"),
                   help="the cluster to observe (default: $KAFKA_BOOTSTRAP)")
    p.add_argument("--offsets-topic", default="__consumer_offsets")
    p.add_argument("--feed-bootstrap", default=None, help="where the tracker's events topic lives (default: same)")
    p.add_argument("--events-topic", default="rebalance-events")
    p.add_argument("--follow", action="store_true", help="keep reading new records until Ctrl-C")
    kafka_conf.add_arguments(p)
    kafka_conf.add_arguments(p, prefix="feed-")
    args = p.parse_args(argv)
    if not args.bootstrap:
        print("cluster-feed: give --bootstrap HOST:PORT or set KAFKA_BOOTSTRAP", file=sys.stderr)
        return 2
    try:
        props = kafka_conf.from_args(args)
        feed_props = kafka_conf.from_args(args, prefix="feed-")
        client = kafka_conf.to_kwargs(props)
        # The events topic's cluster takes its own settings when given, else the observed cluster's.
        feed_client = kafka_conf.to_kwargs(feed_props) if feed_props else client
    except (OSError, ValueError) as exc:
        print(f"cluster-feed: {exc}", file=sys.stderr)
        return 2
    from kafka import KafkaProducer

    if props:
        print(f"client settings: {kafka_conf.describe(props)}", file=sys.stderr)
    producer = KafkaProducer(**kafka_conf.for_client(KafkaProducer, feed_client,
                                                     bootstrap_servers=args.feed_bootstrap or args.bootstrap,
                                                     acks="all", client_id="rebalance-tracker-cluster-feed"))
    sent = 0
    try:
        pairs = read_offsets_topic(args.bootstrap, args.offsets_topic, args.follow, client=client)
        for event in events_from(pairs):
            producer.send(args.events_topic, key=event["group_id"].encode("utf-8"),
                          value=json.dumps(event, separators=(",", ":")).encode("utf-8"))
            sent += 1
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush()
        producer.close()
    print(f"published {sent} events to {args.events_topic}; run the tracker with "
          + " ".join(f"--coordinator-conf {k}={v}" for k, v in OBSERVER_SETTINGS.items()), file=sys.stderr)
    return 0
