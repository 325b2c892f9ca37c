"""Memory and state size per group, per member and per partition in the pure model and the job's state encoding.

    python benchmarks/resource_bounds.py

Python heap (tracemalloc) of a coordinator holding the group, the group's state bytes as Spark keeps them
(``GroupCoordinator.to_bytes``: compressed JSON) and the time of one micro-batch step for the group (``step_group``:
state in, a heartbeat, state out), for: many small groups, a group of 10k members (2 partitions each, committed by
1000 of them) and one member owning 10k partitions (all committed).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.coordinator import CoordinatorConfig  # noqa: E402
from streaming.spark.group_step import step_group  # noqa: E402
from tests.core.big_groups import commit_all, new_coordinator, stable_group  # noqa: E402


def measure(build) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    result = build()
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return result, used


def step_time(coordinator, group: str, member_id: str, now: int) -> tuple[int, float]:
    state = coordinator.to_bytes()
    event = {
        "type": "heartbeat",
        "group_id": group,
        "member_id": member_id,
        "group_instance_id": None,
        "generation": coordinator.groups[group].generation,
        "ts": now + 1,
    }
    started = time.perf_counter()
    step_group(state, [event], now + 1, CoordinatorConfig())
    return len(state), time.perf_counter() - started


def main() -> None:
    def small_groups():
        coordinator = new_coordinator()
        for i in range(300):
            ids, now = stable_group(coordinator, f"g{i}", 3, 6)
            for m in ids:
                commit_all(coordinator, f"g{i}", m, now + 1)
        return coordinator

    coordinator, used = measure(small_groups)
    single = new_coordinator()
    ids, now = stable_group(single, "g", 3, 6)
    for m in ids:
        commit_all(single, "g", m, now + 1)
    size, took = step_time(single, "g", ids[0], now)
    print(
        f"small group (3 members, 6 partitions committed): {used / 300 / 1024:.1f} KiB heap each, "
        f"state {size} B, step {took * 1000:.1f} ms"
    )

    def big():
        coordinator = new_coordinator()
        ids, now = stable_group(coordinator, "big", 10_000, 20_000)
        for m in ids[:1000]:
            commit_all(coordinator, "big", m, now + 1)
        return coordinator, ids, now

    started = time.perf_counter()
    (coordinator, ids, now), used = measure(big)
    built = time.perf_counter() - started
    size, took = step_time(coordinator, "big", ids[0], now)
    print(
        f"group of 10k members (2 partitions each, 2000 committed): {used / 2**20:.1f} MiB heap, "
        f"{used / 10_000 / 1024:.2f} KiB per member; state {size / 2**20:.2f} MiB ({size / 10_000:.0f} B per "
        f"member); built in {built:.1f} s (under tracemalloc); step {took:.2f} s"
    )
    del coordinator

    def wide():
        coordinator = new_coordinator()
        (member,), now = stable_group(coordinator, "wide", 1, 10_000)
        commit_all(coordinator, "wide", member, now + 1)
        return coordinator, member, now

    (coordinator, member, now), used = measure(wide)
    size, took = step_time(coordinator, "wide", member, now)
    print(
        f"member with 10k partitions (all committed): {used / 2**20:.1f} MiB heap, {used / 10_000:.0f} B per "
        f"partition; state {size / 1024:.0f} KiB ({size / 10_000:.1f} B per partition); step {took:.2f} s"
    )


if __name__ == "__main__":
    main()
