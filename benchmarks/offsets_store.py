"""Embedded offsets store: commit upserts per second, reload time, and a per-group query.

    python benchmarks/offsets_store.py [--records 1000000] [--batch 10000] [--updates 200000] [--update-batch 1000]

Phase 1 writes ``--records`` distinct (group, topic, partition) keys; phase 2 re-commits existing keys (the steady
state of ``__consumer_offsets``: the same partitions committed again and again) in smaller micro-batches; then the
store is reopened and fully loaded, as a restarted tracker does. Targets (issue 5): >= 50k commits/s; loading 1M
records < 10 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offsets_store import open_store  # noqa: E402
from streaming.views import terminal  # noqa: E402

TARGET_COMMITS_PER_S = 50_000
TARGET_LOAD_S = 10.0
TOPICS, GROUPS = 37, 1000


def commit(i: int, offset: int) -> dict:
    return {
        "type": "offset_commit",
        "group_id": f"group-{i % GROUPS}",
        "topic": f"topic-{i % TOPICS}",
        "partition": i // (GROUPS * TOPICS),
        "offset": offset,
        "leader_epoch": 3,
        "metadata": "",
        "commit_timestamp": 1_700_000_000_000 + offset,
        "expire_timestamp": -1,
    }


def write_phase(store, label: str, keys, batch: int, first_batch_id: int, offset_base: int) -> tuple[float, int]:
    keys = list(keys)
    started, batch_id = time.perf_counter(), first_batch_id
    with terminal.progress(label, total=len(keys), unit="commits") as task:
        for first in range(0, len(keys), batch):
            store.write([commit(i, offset_base + i) for i in keys[first : first + batch]], batch_id=batch_id)
            batch_id += 1
            task.update(completed=min(first + batch, len(keys)))
    return len(keys) / (time.perf_counter() - started), batch_id


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=1_000_000, help="distinct (group, topic, partition) keys")
    p.add_argument("--batch", type=int, default=10_000, help="records per micro-batch in the insert phase")
    p.add_argument("--updates", type=int, default=200_000, help="re-commits of existing keys")
    p.add_argument("--update-batch", type=int, default=1_000, help="records per micro-batch in the update phase")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:{tmp}/offsets.db"
        store = open_store(url)
        insert_rate, next_batch = write_phase(store, "insert", range(args.records), args.batch, 0, 0)
        stride = max(1, args.records // max(1, args.updates))  # spread the re-commits over the whole key space
        update_keys = [(k * stride) % args.records for k in range(args.updates)]
        update_rate, _ = write_phase(store, "update", update_keys, args.update_batch, next_batch, args.records)
        store.close()
        size_mb = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 1e6

        started = time.perf_counter()
        store = open_store(url)
        loaded = store.load_records()
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        one_group = store.offsets("group-7")
        query_ms = (time.perf_counter() - started) * 1000
        store.close()
    assert len(loaded) == args.records, (len(loaded), args.records)
    print(
        f"insert: {insert_rate:,.0f} commits/s in batches of {args.batch:,} "
        f"({insert_rate / TARGET_COMMITS_PER_S:.2f}x the {TARGET_COMMITS_PER_S:,}/s target)"
    )
    print(
        f"update: {update_rate:,.0f} commits/s re-committing existing keys in batches of {args.update_batch:,} "
        f"({update_rate / TARGET_COMMITS_PER_S:.2f}x the target)"
    )
    print(
        f"load: {len(loaded):,} records in {load_s:.2f} s "
        f"(target: 1M in {TARGET_LOAD_S:.0f} s); store on disk {size_mb:,.0f} MB"
    )
    print(f"query: offsets of one group ({len(one_group):,} partitions) in {query_ms:.0f} ms")


if __name__ == "__main__":
    main()
