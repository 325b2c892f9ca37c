"""Rebuild the tracker's groups from its store when the job starts on a fresh (or lost) checkpoint.

Kafka's coordinator survives a failover because the next coordinator replays ``__consumer_offsets``: groups come back
with their generation, protocol, leader, members (subscriptions, assignments) and committed offsets, sessions
restarted from load time. The tracker keeps the same records in its store, so a job without a checkpoint does the
same: the driver replays the store into one coordinator state per group and hands each group its state through a
second, one-off streaming source (parquet rows in ``<checkpoint>/restore``, unioned with the Kafka events). The
first micro-batch gives every stored group its state, including groups that never send another event, so their
silent members still expire. The restore rows carry a topic name Kafka cannot have, so feed records can never pose
as one. Each rebuilt group says so in that first step (``group_restored``), and reports the first sign in its feed
of what the store did not hold (``restore_gap``): the rule is in ``streaming/coordinator/restored.py``.

A fresh checkpoint must also know where in the feed the lost one stopped: with each micro-batch the sink commits
the batch's end offsets on the events topic to the store, as the consumer group ``rebalance-tracker`` (one
transaction with the batch's records in SQLite), and a job without a checkpoint starts reading there.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

RESTORE_TOPIC = "<restore>"  # '<' and '>' are not allowed in Kafka topic names
RESTORE_TYPE = "restore"
POSITION_GROUP = "rebalance-tracker"  # the tracker's own consumer group: its position on the events topic
KAFKA_ROW_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def restore_dir(checkpoint: str) -> Path:
    return Path(checkpoint) / "restore"


def is_fresh(query_checkpoint: str) -> bool:
    """No micro-batch was ever planned in this checkpoint."""
    offsets = Path(query_checkpoint) / "offsets"
    return not offsets.is_dir() or not any(offsets.iterdir())


def group_states(records: list[dict], now_ms: int, config) -> dict[str, bytes]:
    """Each stored group's coordinator state, as Kafka's loader rebuilds it at ``now_ms``: classic groups from their
    group metadata and offsets, consumer-protocol (KIP-848) groups from their consumer-group and offset records, each
    with its sessions restarted at ``now_ms`` and its topics seeded from its subscription metadata (the job keeps one
    topic image per group). A consumer group wins over the offsets-only classic group its offsets would make (Kafka
    replaces a simple classic group the same way). ``config``: ``routing.Configs`` or a ``CoordinatorConfig``."""
    from streaming.coordinator import ConsumerGroupCoordinator, GroupCoordinator
    from streaming.coordinator.consumer.records import is_record
    from streaming.coordinator.routing import Configs

    configs = config if isinstance(config, Configs) else Configs.of(config)
    records = [r for r in records if r["group_id"] != POSITION_GROUP]
    coordinator = GroupCoordinator(configs.classic)
    coordinator.load_records([r for r in records if not is_record(r)], now_ms)
    coordinator.note_restored(now_ms)
    states = {}
    for group_id in coordinator.group_ids():
        single = GroupCoordinator(configs.classic)
        single.import_group(coordinator.export_group(group_id))
        states[group_id] = single.to_bytes()
    by_group: dict[str, list[dict]] = {}
    for r in records:
        if is_record(r):
            by_group.setdefault(r["group_id"], []).append(r)
    for r in records:
        if r["type"] == "offset_commit" and r["group_id"] in by_group:
            by_group[r["group_id"]].append(r)  # a consumer group's offsets: the consumer model keeps them
    for group_id, group_records in by_group.items():
        consumer = ConsumerGroupCoordinator(configs.consumer)
        consumer.load_records(group_records, now_ms)
        consumer.note_restored(now_ms)
        if group_id in consumer.groups:
            states[group_id] = consumer.to_bytes()
    return states


def load_time(records: list[dict], event_time: bool, wall_ms: int, feed_ms: int | None = None) -> int:
    """Processing time: now. Event time: the newest time the store knows of, or ``feed_ms`` (the feed's time where
    the lost checkpoint stopped, ``feed_time``) when later, so that restored sessions run on the feed's clock, not
    the wall's. Consumer-protocol records carry no time of their own; their groups need ``feed_ms``."""
    if not event_time:
        return wall_ms
    records = [r for r in records if r["group_id"] != POSITION_GROUP]  # stamped with the wall clock
    stamps = [r.get("commit_timestamp", -1) for r in records] + [r.get("current_state_timestamp", -1) for r in records]
    stamps.append(feed_ms if feed_ms is not None else -1)
    return max((t for t in stamps if t is not None and t > 0), default=0)


def feed_time(
    bootstrap: str, topic: str, offsets: dict[str, int], client: dict | None = None, timeout_s: float = 10.0
) -> int | None:
    """The newest event time (its ``ts``, else its record's timestamp) among the last events before ``offsets``
    (partition -> the next offset to read) on the events topic: where the feed's clock stood when the lost
    checkpoint stopped. None when nothing can be read."""
    import time as _time

    from kafka import KafkaConsumer, TopicPartition

    from streaming.kafka_client.kafka_conf import for_client

    wanted = {TopicPartition(topic, int(p)): int(o) - 1 for p, o in offsets.items() if int(o) > 0}
    if not wanted:
        return None
    consumer = KafkaConsumer(
        **for_client(
            KafkaConsumer,
            client,
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            client_id="rebalance-tracker-restore",
        )
    )
    newest, pending = None, set(wanted)
    try:
        consumer.assign(list(wanted))
        for tp, offset in wanted.items():
            consumer.seek(tp, offset)
        deadline = _time.monotonic() + timeout_s
        while pending and _time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for m in messages:
                    if m.offset != wanted[tp]:
                        continue
                    pending.discard(tp)
                    ts = m.timestamp
                    try:
                        event = json.loads(m.value)
                        if isinstance(event, dict) and isinstance(event.get("ts"), int):
                            ts = event["ts"]
                    except (TypeError, ValueError):
                        pass
                    newest = ts if newest is None else max(newest, ts)
    finally:
        consumer.close()
    return newest


def write_restore_rows(directory: Path, states: dict[str, bytes], ts_ms: int) -> int:
    """One Kafka-shaped row per group; returns how many."""
    import pandas as pd

    directory.mkdir(parents=True, exist_ok=True)
    if not states:
        return 0
    values = [
        json.dumps(
            {"type": RESTORE_TYPE, "group_id": g, "ts": ts_ms, "state": base64.b64encode(state).decode("ascii")}
        ).encode()
        for g, state in states.items()
    ]
    frame = pd.DataFrame(
        {
            "key": [g.encode("utf-8") for g in states],
            "value": values,
            "topic": RESTORE_TOPIC,
            "partition": 0,
            "offset": range(len(values)),
            "timestamp": pd.to_datetime([ts_ms] * len(values), unit="ms"),
        }
    )
    frame["partition"] = frame["partition"].astype("int32")
    tmp = directory / ".groups.parquet.tmp"
    frame.to_parquet(tmp, coerce_timestamps="us")
    os.replace(tmp, directory / "groups.parquet")  # the source must never see half a file
    return len(values)


def batch_end_offsets(query_checkpoint: str, batch_id: int, topic: str) -> dict[str, int] | None:
    """The events topic's end offsets of a planned micro-batch, from Spark's offset log (``offsets/<batch>``: a
    version line, the batch metadata, then one line per source in plan order; the Kafka source comes first)."""
    path = Path(query_checkpoint) / "offsets" / str(batch_id)
    try:
        lines = path.read_text().splitlines()
        offsets = json.loads(lines[2])
    except (OSError, IndexError, ValueError):
        return None
    parts = offsets.get(topic) if isinstance(offsets, dict) else None
    return {str(p): int(o) for p, o in parts.items()} if isinstance(parts, dict) else None


def position_records(topic: str, offsets: dict[str, int], now_ms: int) -> list[dict]:
    return [
        {
            "type": "offset_commit",
            "group_id": POSITION_GROUP,
            "topic": topic,
            "partition": int(p),
            "offset": o,
            "leader_epoch": -1,
            "metadata": "",
            "commit_timestamp": now_ms,
            "expire_timestamp": -1,
        }
        for p, o in sorted(offsets.items(), key=lambda kv: int(kv[0]))
    ]


def stored_position(records: list[dict], topic: str) -> str | None:
    """``startingOffsets`` JSON for the events topic where the last checkpoint stopped, or None."""
    parts = {
        str(r["partition"]): r["offset"]
        for r in records
        if r["type"] == "offset_commit"
        and r["group_id"] == POSITION_GROUP
        and r.get("topic") == topic
        and not r.get("tombstone")
    }
    return json.dumps({topic: parts}) if parts else None


def restore_stream(spark, directory: Path):
    return spark.readStream.schema(KAFKA_ROW_SCHEMA).parquet(str(directory))


def decode_restore(event: dict) -> bytes:
    return base64.b64decode(event["state"])
