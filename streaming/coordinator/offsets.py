"""Committed offsets, as both coordinators keep them (Kafka's ``OffsetMetadataManager`` serves classic and consumer
groups alike): what a commit stores, the ``offset_commit`` records it writes, when an offset expires, and the
compact rows the models' states carry.

A record is the offsets store's ``offset_commit`` dict (``offsets_store/codec.py``): ``topic``, ``partition``,
``offset``, ``leader_epoch``, ``metadata``, ``commit_timestamp``, ``expire_timestamp`` (-1: none), ``tombstone``;
a tombstone carries only its key and a ``reason``. Which offsets may expire, and from which time, is each group
type's own rule (``GroupCoordinator._retention_base``, ``ConsumerGroupCoordinator._refresh_retention``); the
arithmetic is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from streaming.coordinator.outputs import (
    OFFSET_COMMIT,
    OffsetCommitRecord,
    OffsetFetchEntry,
    offset_commit,
    offset_tombstone,
)

Partition = tuple[str, int]


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1: none given, the group-level retention rule applies


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character outside the BMP counts twice)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def too_large(offset: Mapping, max_bytes: int) -> bool:
    """Whether Kafka refuses this entry of a commit with OFFSET_METADATA_TOO_LARGE. Each entry is judged on its own
    (a partition named twice may be refused once and stored once). Kafka compares the metadata's ``String.length()``
    with ``offset.metadata.max.bytes`` (``OffsetMetadataManager.isMetadataInvalid``), so a non-ASCII character counts
    once (twice outside the BMP), not by its UTF-8 bytes."""
    return java_length(offset["metadata"] or "") > max_bytes


def unknown_group_error(commit: Mapping) -> str:
    """The answer to an OffsetCommit with a generation or member epoch (>= 0) for a group that does not exist (Kafka
    4.0's OffsetMetadataManager.validateOffsetCommit): GROUP_ID_NOT_FOUND from OffsetCommit v9, ILLEGAL_GENERATION
    before. A commit event that does not state its ``api_version`` gets the older answer (Kafka's before 4.0, and
    the classic model's ever since). With epoch -1 Kafka creates a simple classic group instead."""
    version = commit.get("api_version")
    return "GROUP_ID_NOT_FOUND" if version is not None and version >= 9 else "ILLEGAL_GENERATION"


def expire_timestamp(retention_ms: int, commit_ts: int) -> int:
    """The expiry a commit names (OffsetCommit v2-v4's retention time), or -1 for the broker's own rule.

    Only -1 means the broker's rule (``OffsetMetadataManager.expireTimestampMs``): any other retention, negative
    ones too, is added to the commit time as Java adds longs, wrapping past the int64 range (an expiry in the past:
    the offset goes at the next cleanup)."""
    if retention_ms == -1:
        return -1
    return (commit_ts + retention_ms + 2**63) % 2**64 - 2**63


def store(
    offsets: dict[Partition, CommittedOffset],
    group_id: str,
    requested: Iterable[Mapping],
    ts: int,
    retention_ms: int,
    now: int | None = None,
) -> list[OffsetCommitRecord]:
    """Kafka's commitOffset for the accepted partitions: each one stored at ``ts``, and its OffsetCommit record
    (written at ``now``, the group's clock, when that is past the commit: observe mode stores a commit at the time
    its client made it)."""
    expire = expire_timestamp(retention_ms, ts)
    written = ts if now is None else now
    records = []
    for o in requested:
        offsets[(o["topic"], o["partition"])] = CommittedOffset(
            o["offset"], o["leader_epoch"], o["metadata"], ts, expire
        )
        records.append(
            offset_commit(
                group_id, written, o["topic"], o["partition"], o["offset"], o["leader_epoch"], o["metadata"], ts, expire
            )
        )
    return records


def tombstone(group_id: str, ts: int, tp: Partition, reason: str) -> OffsetCommitRecord:
    return offset_tombstone(group_id, ts, tp[0], tp[1], reason)


def fetch(offsets: Mapping[Partition, CommittedOffset]) -> dict[Partition, OffsetFetchEntry]:
    """OffsetFetch (as the admin client asks it): the committed offsets, by partition."""
    return {
        tp: {"offset": o.offset, "leader_epoch": o.leader_epoch, "metadata": o.metadata}
        for tp, o in sorted(offsets.items())
    }


def expiry_time(o: CommittedOffset, base_ts: int, retention_ms: int) -> int:
    """Kafka's OffsetExpirationConditionImpl: an explicit expire timestamp wins (old clients' per-commit retention),
    otherwise ``offsets.retention.minutes`` from the group type's base time."""
    return o.expire_timestamp if o.expire_timestamp != -1 else base_ts + retention_ms


# ------------------------------------------------------------------------------------ state rows and store records
def to_rows(offsets: Mapping[Partition, CommittedOffset]) -> list[list]:
    return [
        [tp[0], tp[1], o.offset, o.leader_epoch, o.metadata, o.commit_timestamp, o.expire_timestamp]
        for tp, o in offsets.items()
    ]


def from_rows(rows: Iterable[list]) -> dict[Partition, CommittedOffset]:
    return {(t, p): CommittedOffset(o, e, m, c, x) for t, p, o, e, m, c, x in rows}


def from_record(r: Mapping) -> CommittedOffset:
    return CommittedOffset(
        int(r["offset"]),
        int(r.get("leader_epoch", -1)),
        r.get("metadata") or "",
        int(r["commit_timestamp"]),
        int(r.get("expire_timestamp", -1)),
    )


def latest(records: Iterable[Mapping]) -> dict[str, dict[Partition, CommittedOffset | None]]:
    """The ``offset_commit`` records' last word per group and partition (None: a tombstone), in log order."""
    out: dict[str, dict[Partition, CommittedOffset | None]] = {}
    for r in records:
        if r.get("type") == OFFSET_COMMIT:
            out.setdefault(r["group_id"], {})[(r["topic"], int(r["partition"]))] = (
                None if r.get("tombstone") else from_record(r)
            )
    return out
