"""Rebuild the tracker's groups from its store when the job starts on a fresh (or lost) checkpoint.

Kafka's coordinator survives a failover because the next coordinator replays ``__consumer_offsets``: groups come back
with their generation, protocol, leader, members (subscriptions, assignments) and committed offsets, sessions
restarted from load time. The tracker keeps the same records in its store, so a job without a checkpoint does the
same: the driver replays the store into one coordinator state per group and hands each group its state through a
second, one-off streaming source (parquet rows in ``<checkpoint>/restore``, unioned with the Kafka events). The
first micro-batch gives every stored group its state, including groups that never send another event, so their
silent members still expire. The restore rows carry a topic name Kafka cannot have, so feed records can never pose
as one.

A fresh checkpoint must also know where in the feed the lost one stopped: with each micro-batch the sink commits
the batch's end offsets on the events topic to the store, as the consumer group ``rebalance-tracker`` (one
transaction with the batch's records in SQLite), and a job without a checkpoint starts reading there.
"""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

RESTORE_TOPIC = "<restore>"     # '<' and '>' are not allowed in Kafka topic names
RESTORE_TYPE = "restore"
POSITION_GROUP = "rebalance-tracker"   # the tracker's own consumer group: its position on the events topic
KAFKA_ROW_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def restore_dir(checkpoint: str) -> Path:
    return Path(checkpoint) / "restore"


def is_fresh(query_checkpoint: str) -> bool:
    """No micro-batch was ever planned in this checkpoint."""
    offsets = Path(query_checkpoint) / "offsets"
    return not offsets.is_dir() or not any(offsets.iterdir())


def group_states(records: list[dict], now_ms: int, config) -> dict[str, bytes]:
    """Each stored group's coordinator state, as Kafka's loader rebuilds it at ``now_ms``."""
    from streaming.coordinator import GroupCoordinator

    coordinator = GroupCoordinator(config)
    coordinator.load_records([r for r in records if r["group_id"] != POSITION_GROUP], now_ms)
    states = {}
    for group_id in coordinator.group_ids():
        single = GroupCoordinator(config)
        single.import_group(coordinator.export_group(group_id))
        states[group_id] = single.to_bytes()
    return states


def load_time(records: list[dict], event_time: bool, wall_ms: int) -> int:
    """Processing time: now. Event time: the newest time the store knows of, so that restored sessions run on the
    feed's clock, not the wall's."""
    if not event_time:
        return wall_ms
    records = [r for r in records if r["group_id"] != POSITION_GROUP]   # stamped with the wall clock
    stamps = [r.get("commit_timestamp", -1) for r in records] + [r.get("current_state_timestamp", -1) for r in records]
    return max((t for t in stamps if t is not None and t > 0), default=0)


def write_restore_rows(directory: Path, states: dict[str, bytes], ts_ms: int) -> int:
    """One Kafka-shaped row per group; returns how many."""
    import pandas as pd

    directory.mkdir(parents=True, exist_ok=True)
    if not states:
        return 0
    values = [json.dumps({"type": RESTORE_TYPE, "group_id": g, "ts": ts_ms,
                          "state": base64.b64encode(state).decode("ascii")}).encode() for g, state in states.items()]
    frame = pd.DataFrame({"key": [g.encode("utf-8") for g in states], "value": values, "topic": RESTORE_TOPIC,
                          "partition": 0, "offset": range(len(values)),
                          "timestamp": pd.to_datetime([ts_ms] * len(values), unit="ms")})
    frame["partition"] = frame["partition"].astype("int32")
    tmp = directory / ".groups.parquet.tmp"
    frame.to_parquet(tmp, coerce_timestamps="us")
    os.replace(tmp, directory / "groups.parquet")   # the source must never see half a file
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
    return [{"type": "offset_commit", "group_id": POSITION_GROUP, "topic": topic, "partition": int(p), "offset": o,
             "leader_epoch": -1, "metadata": "", "commit_timestamp": now_ms, "expire_timestamp": -1}
            for p, o in sorted(offsets.items(), key=lambda kv: int(kv[0]))]


def stored_position(records: list[dict], topic: str) -> str | None:
    """``startingOffsets`` JSON for the events topic where the last checkpoint stopped, or None."""
    parts = {str(r["partition"]): r["offset"] for r in records
             if r["type"] == "offset_commit" and r["group_id"] == POSITION_GROUP and r.get("topic") == topic
             and not r.get("tombstone")}
    return json.dumps({topic: parts}) if parts else None


def restore_stream(spark, directory: Path):
    return spark.readStream.schema(KAFKA_ROW_SCHEMA).parquet(str(directory))


def decode_restore(event: dict) -> bytes:
    return base64.b64decode(event["state"])
