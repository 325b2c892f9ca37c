"""The offsets store: a compacted map from ``__consumer_offsets`` key to value, with two backends.

``write`` is upsert-or-delete per key (compaction) and idempotent per micro-batch id; ``load_records`` returns the
surviving records in the coordinator's dict shape, which is all a restarted tracker needs to rebuild itself.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from offsets_store.codec import CONSUMER_GROUP_TYPES, record_identity
from offsets_store.consumer_groups import consumer_group_state

# The record types that belong in the store (and in __consumer_offsets); everything else the coordinator emits does
# not: the classic ones and the KIP-848 consumer-group ones (see codec for their dict shapes).
STORE_TYPES = ("offset_commit", "group_metadata") + tuple(CONSUMER_GROUP_TYPES)
_STORE_TYPE_SET = frozenset(STORE_TYPES)
log = logging.getLogger("offsets_store")


def compact(outputs: list[dict]) -> list[dict]:
    """``outputs`` with only the last record of each store key (tombstones included); every other output stays, in
    order. What log compaction leaves of the records, without writing what it would delete: a backlog commits each
    partition many times in one micro-batch (six of every seven outputs of the benchmark's feed)."""
    last: dict[tuple, int] = {}
    records = 0
    for i, o in enumerate(outputs):
        if o["type"] in _STORE_TYPE_SET:
            last[record_identity(o)] = i
            records += 1
    if len(last) == records:
        return outputs
    keep = set(last.values())
    return [o for i, o in enumerate(outputs) if i in keep or o["type"] not in _STORE_TYPE_SET]


def already_applied(batch_id: int | None, last_batch_id: int) -> bool:
    """True when the batch must be skipped. A restart replays the last batch (equal id); an id further back means
    the stream's checkpoint was reset while this store was kept, and every write would be dropped: say so."""
    if batch_id is None or batch_id > last_batch_id:
        return False
    if batch_id < last_batch_id:
        log.warning(
            "offsets store: skipping batch %d, batch %d was already applied (a new streaming checkpoint "
            "must call start_new_lineage first)",
            batch_id,
            last_batch_id,
        )
    return True


class Store(ABC):
    @abstractmethod
    def write(self, records: list[dict], batch_id: int | None = None) -> None:
        """Apply records of the STORE_TYPES (tombstones delete their key; others are skipped). A batch id already
        applied is a no-op."""

    @abstractmethod
    def start_new_lineage(self) -> None:
        """A job on a fresh checkpoint numbers its batches from 0 again: forget the last batch id, so that its
        batches are applied (replays of one checkpoint's batches stay no-ops)."""

    @abstractmethod
    def load_records(self) -> list[dict]:
        """Every live record (latest value per key), decoded."""

    def offsets(self, group_id: str) -> list[dict]:
        return sorted(
            (r for r in self.load_records() if r["type"] == "offset_commit" and r["group_id"] == group_id),
            key=lambda r: (r["topic"], r["partition"]),
        )

    def group(self, group_id: str) -> dict | None:
        return next(
            (r for r in self.load_records() if r["type"] == "group_metadata" and r["group_id"] == group_id), None
        )

    def consumer_group(self, group_id: str) -> dict | None:
        """A KIP-848 (consumer protocol) group's epochs, members and assignments, as ``consumer_groups`` shapes
        them; None when the store holds no consumer-group record for it."""
        return consumer_group_state(self.load_records(), group_id)

    def groups(self) -> list[str]:
        return sorted({r["group_id"] for r in self.load_records()})

    def close(self) -> None:  # noqa: B027 (optional: a store without resources keeps this)
        pass

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
