"""Embedded offsets store: commit upserts per second and reload time.

    python benchmarks/offsets_store.py [--records 1000000] [--batch 10000]

Targets (issue 5): >= 50k commits/s; loading 1M records < 10 s. Prints figures and ratios to the targets.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from offsets_store import open_store  # noqa: E402

TARGET_COMMITS_PER_S = 50_000
TARGET_LOAD_S = 10.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=1_000_000, help="distinct (group, topic, partition) keys")
    p.add_argument("--batch", type=int, default=10_000, help="records per micro-batch write")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:{tmp}/offsets.db")
        started = time.perf_counter()
        batch_id = 0
        for first in range(0, args.records, args.batch):
            records = [{"type": "offset_commit", "group_id": f"group-{i % 1000}", "topic": f"topic-{i % 37}",
                        "partition": i // 37000, "offset": i, "leader_epoch": 3, "metadata": "",
                        "commit_timestamp": 1_700_000_000_000 + i, "expire_timestamp": -1}
                       for i in range(first, min(first + args.batch, args.records))]
            store.write(records, batch_id=batch_id)
            batch_id += 1
            done = min(first + args.batch, args.records)
            rate = done / (time.perf_counter() - started)
            print(f"\rwriting: {done:,}/{args.records:,} ({rate:,.0f} commits/s)", end="", file=sys.stderr)
        write_s = time.perf_counter() - started
        print(file=sys.stderr)
        store.close()
        started = time.perf_counter()
        store = open_store(f"sqlite:{tmp}/offsets.db")
        loaded = store.load_records()
        load_s = time.perf_counter() - started
        store.close()
    rate = args.records / write_s
    print(f"upserts: {rate:,.0f} commits/s in batches of {args.batch:,} "
          f"({rate / TARGET_COMMITS_PER_S:.2f}x the {TARGET_COMMITS_PER_S:,}/s target)")
    print(f"load: {len(loaded):,} records in {load_s:.2f} s "
          f"({TARGET_LOAD_S / load_s * args.records / 1_000_000:.2f}x faster than the 1M-in-{TARGET_LOAD_S:.0f}s target)")


if __name__ == "__main__":
    main()
