"""Where a Python worker's memory goes: an opt-in probe for soak runs (benchmarks/soak.py).

Off unless ``REBALANCE_TRACKER_MEMORY_PROBE`` names a directory; then every Python worker that runs one of the job's
stages writes there, at most every ``REBALANCE_TRACKER_MEMORY_PROBE_EVERY_S`` seconds (default 60), one JSON line
of what it holds: resident memory, glibc's heap (in use vs free but kept: fragmentation), Arrow's memory pool, the
collector's object count and the most numerous object types. With ``REBALANCE_TRACKER_MEMORY_PROBE_FRAMES`` > 0 it
also traces Python allocations (tracemalloc, that many frames; slows the worker) and dumps a snapshot each time, for
``python -m streaming.spark.memory_probe DIR`` to compare a worker's first and last.
Off, a call costs one global lookup.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import sys
import time

_DIR = os.environ.get("REBALANCE_TRACKER_MEMORY_PROBE") or None
_EVERY_S = float(os.environ.get("REBALANCE_TRACKER_MEMORY_PROBE_EVERY_S", "60"))
_FRAMES = int(os.environ.get("REBALANCE_TRACKER_MEMORY_PROBE_FRAMES", "0"))
_last: dict[int, float] = {}  # pid -> when it last wrote (a forked worker starts with its parent's copy)
_snapshots = 0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def glibc_heap() -> dict[str, int]:
    """glibc's view of the heap (mallinfo2): bytes in use by malloc'd blocks, and free bytes it keeps (fragmented
    or not yet returned to the system); {} where there is no glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return {}
    info = libc.mallinfo2()
    return {
        "malloc_in_use": info.uordblks + info.hblkhd,
        "malloc_free_kept": info.fordblks,
        "malloc_arena": info.arena,
        "mmapped": info.hblkhd,
    }


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def probe(stage: str) -> None:
    """Record this worker's memory if the probe is on and its interval has passed (call at a stage's start)."""
    if _DIR is None:
        return
    pid, now = os.getpid(), time.monotonic()
    if now - _last.get(pid, -_EVERY_S) < _EVERY_S:
        return
    _last.clear()
    _last[pid] = now
    import tracemalloc

    if _FRAMES and not tracemalloc.is_tracing():
        tracemalloc.start(_FRAMES)
    objects = gc.get_objects()
    types = collections.Counter(type(o).__name__ for o in objects)
    record = {
        "pid": pid,
        "t": time.time(),
        "stage": stage,
        "rss": rss_bytes(),
        "gc_objects": len(objects),
        "gc_counts": gc.get_count(),
        "top_types": types.most_common(12),
    } | glibc_heap()
    del objects
    if "pyarrow" in sys.modules:
        record["arrow_allocated"] = sys.modules["pyarrow"].total_allocated_bytes()
    if tracemalloc.is_tracing():
        global _snapshots
        _snapshots += 1
        record["traced"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.take_snapshot().dump(os.path.join(_DIR, f"{pid}-{_snapshots}.snapshot"))
    with open(os.path.join(_DIR, f"worker-{pid}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")


def compare(directory: str, top: int = 15) -> None:
    """Print, for each worker with two snapshots or more, the allocation sites that grew most between its first
    and its last."""
    import tracemalloc

    by_pid: dict[str, list[str]] = collections.defaultdict(list)
    for name in sorted(
        os.listdir(directory),
        key=lambda n: (n.split("-")[0], int(n.split("-")[1].split(".")[0])) if n.endswith(".snapshot") else ("", 0),
    ):
        if name.endswith(".snapshot"):
            by_pid[name.split("-")[0]].append(os.path.join(directory, name))
    for pid, paths in by_pid.items():
        if len(paths) < 2:
            continue
        first, last = tracemalloc.Snapshot.load(paths[0]), tracemalloc.Snapshot.load(paths[-1])
        print(f"worker {pid}: {len(paths)} snapshots, {os.path.basename(paths[0])} -> {os.path.basename(paths[-1])}")
        for stat in last.compare_to(first, "traceback")[:top]:
            print(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+9,} blocks")
            for line in stat.traceback.format()[-6:]:
                print(f"      {line}")


if __name__ == "__main__":
    compare(sys.argv[1])
