"""Throughput of the pure coordinator model: heartbeats/s and a full simulated feed replay, single core.

    python benchmarks/coordinator.py [--members 1000] [--heartbeats 500000]

Target (issue 4): >= 200k heartbeats/s. Prints figures and the ratio to the target.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event  # noqa: E402
from streaming.feeds.simulator import SimulationSettings, Simulator  # noqa: E402

TARGET_HEARTBEATS_PER_S = 200_000


def stable_group(coordinator: GroupCoordinator, members: int, now: int) -> tuple[list[str], int]:
    ids = []
    for i in range(members):
        e, _ = parse_event(
            {
                "type": "join",
                "group_id": "bench",
                "member_id": "",
                "client_id": f"c{i}",
                "ts": now,
                "protocols": [{"name": "range", "topics": ["t"]}],
            }
        )
        ids.append(coordinator.handle(e)[-1]["member_id"])
    for m in ids:
        e, _ = parse_event(
            {
                "type": "join",
                "group_id": "bench",
                "member_id": m,
                "client_id": "c",
                "ts": now,
                "protocols": [{"name": "range", "topics": ["t"]}],
            }
        )
        coordinator.handle(e)
    now += 3_001
    coordinator.advance(now)
    generation = coordinator.groups["bench"].generation
    for m in ids:
        e, _ = parse_event({"type": "sync", "group_id": "bench", "member_id": m, "generation": generation, "ts": now})
        coordinator.handle(e)
    return ids, now


def bench_heartbeats(members: int, count: int) -> float:
    coordinator = GroupCoordinator(CoordinatorConfig(assignment_mode="leader", group_initial_rebalance_delay_ms=0))
    ids, now = stable_group(coordinator, members, 1_000)
    generation = coordinator.groups["bench"].generation
    # Pre-validated events, as the streaming job hands them over; time moves 1 ms every `members` heartbeats.
    events = [
        {
            "type": "heartbeat",
            "group_id": "bench",
            "member_id": ids[i % members],
            "group_instance_id": None,
            "generation": generation,
            "ts": now + i // members,
        }
        for i in range(count)
    ]
    started = time.perf_counter()
    for e in events:
        coordinator.handle(e)
    elapsed = time.perf_counter() - started
    assert coordinator.groups["bench"].state.value == "Stable"
    return count / elapsed


def bench_feed(minutes: int) -> tuple[int, float]:
    events = Simulator(SimulationSettings(groups=20, seed=1), start_ms=0).run_until(minutes * 60_000)
    coordinator = GroupCoordinator(CoordinatorConfig())
    started = time.perf_counter()
    for e in events:
        coordinator.handle(e)
    return len(events), len(events) / (time.perf_counter() - started)


def bench_join_storm(members: int) -> float:
    """A group of ``members`` consumers starting at once (two-step KIP-394 joins), to the round's completion."""
    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=3_000))
    started = time.perf_counter()
    stable_group(coordinator, members, 1_000)
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--members", type=int, default=1_000)
    p.add_argument("--heartbeats", type=int, default=500_000)
    p.add_argument("--feed-minutes", type=int, default=30)
    p.add_argument("--storm", type=int, default=10_000, help="members of the join-storm group")
    args = p.parse_args()
    rate = bench_heartbeats(args.members, args.heartbeats)
    print(
        f"heartbeats: {rate:,.0f}/s with {args.members} members in one group "
        f"({rate / TARGET_HEARTBEATS_PER_S:.2f}x the {TARGET_HEARTBEATS_PER_S:,}/s target)"
    )
    storm = bench_join_storm(args.storm)
    print(
        f"join storm: {args.storm:,} members join one group at once and sync in {storm:.1f} s "
        f"({2 * args.storm / storm:,.0f} JoinGroups/s)"
    )
    n, feed_rate = bench_feed(args.feed_minutes)
    print(f"simulated feed: {n:,} events (20 groups, {args.feed_minutes} min) replayed at {feed_rate:,.0f} events/s")


if __name__ == "__main__":
    main()
