"""Server-side (KIP-848) assignors, in the shapes of Kafka's jmh ServerSideAssignorBenchmark.

    python benchmarks/server_assignors.py            # headline case, growth with members and with partitions
    python benchmarks/server_assignors.py --quick    # smaller growth series

Shapes, as in Kafka's benchmark: topics ``topic-0..``, ``members x ratio / topics`` partitions each; members
``member0..`` (rack ``rack{i % 3}`` when racks are on -- Kafka's server-side assignors ignore racks, so it is there
to show they cost nothing); homogeneous = everyone on every topic, heterogeneous = members and topics cut into 5
buckets, each bucket of members on its bucket of topics (``createHeterogeneousBucketedMembers``).  FULL = first
assignment of all members; INCREMENTAL = the group minus one member is assigned, then ``newMember`` joins and the
group is reassigned from that target assignment (only this second call is timed).  Each figure is the best of a
few runs, in milliseconds; the growth columns give how much the time grew against the previous row and the
exponent ``log(time ratio) / log(size ratio)`` (1.0 = linear).
"""

from __future__ import annotations

import argparse
import base64
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignors.server import (  # noqa: E402
    HETEROGENEOUS,
    HOMOGENEOUS,
    GroupSpec,
    MemberSubscription,
    SubscribedTopicDescriber,
    TopicMetadata,
    get_server_assignor,
)

BUCKETS = 5
RACKS = 3


def topic_ids(count: int, seed: int = 848) -> list[str]:
    rng = random.Random(seed)
    return [
        base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=") for _ in range(count)
    ]


def build(members: int, ratio: int, topics: int, kind: str, racks: bool):
    ids = topic_ids(topics)
    per_topic = members * ratio // topics
    describer = SubscribedTopicDescriber(
        [
            TopicMetadata(
                t,
                f"topic-{i}",
                per_topic,
                {p: {f"rack{p % RACKS}", f"rack{(p + 1) % RACKS}"} for p in range(per_topic)} if racks else {},
            )
            for i, t in enumerate(ids)
        ]
    )
    subscriptions: dict[str, tuple[str, ...]] = {}
    if kind == HOMOGENEOUS:
        for i in range(members):
            subscriptions[f"member{i}"] = tuple(ids)
    else:
        buckets = min(BUCKETS, members)
        topics_per_bucket = math.ceil(len(ids) / buckets)
        members_per_bucket = math.ceil(members / buckets)
        for b in range(buckets):
            mine = tuple(ids[b * topics_per_bucket : (b + 1) * topics_per_bucket])
            for i in range(b * members_per_bucket, min((b + 1) * members_per_bucket, members)):
                subscriptions[f"member{i}"] = mine
    rack_of = (lambda i: f"rack{i % RACKS}") if racks else (lambda i: None)
    return describer, subscriptions, rack_of, per_topic * topics


def run(
    assignor_name: str,
    members: int,
    ratio: int,
    topics: int,
    kind: str,
    incremental: bool,
    racks: bool = False,
    repeat: int = 3,
) -> tuple[float, int]:
    assignor = get_server_assignor(assignor_name)
    describer, subscriptions, rack_of, total = build(members, ratio, topics, kind, racks)
    names = list(subscriptions)
    if incremental:
        first = {m: MemberSubscription(subscriptions[m], rack=rack_of(i)) for i, m in enumerate(names[:-1])}
        initial = assignor.assign(GroupSpec(first, subscription_type=kind), describer)
        group = {
            m: MemberSubscription(s.topic_ids, rack=s.rack, assignment=initial.get(m, {})) for m, s in first.items()
        }
        group["newMember"] = MemberSubscription(
            subscriptions[names[-2]] if kind == HETEROGENEOUS else subscriptions[names[-1]], rack=rack_of(members - 1)
        )
    else:
        group = {m: MemberSubscription(subscriptions[m], rack=rack_of(i)) for i, m in enumerate(names)}
    spec = GroupSpec(group, subscription_type=kind)
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        assignor.assign(spec, describer)
        best = min(best, time.perf_counter() - start)
    return best * 1000, total


def growth_table(title: str, rows: list[tuple[int, int, int]], size_of, repeat: int) -> None:
    print(f"\n== {title} ==")
    header = f"{'assignor':<9}{'subscription':<15}{'type':<13}{'members':>8}{'partitions':>11}{'ms':>10}"
    print(header + f"{'x prev':>8}{'exponent':>10}")
    for assignor_name in ("uniform", "range"):
        for kind in (HOMOGENEOUS, HETEROGENEOUS):
            for incremental in (False, True):
                prev = None
                for members, ratio, topics in rows:
                    ms, total = run(assignor_name, members, ratio, topics, kind, incremental, repeat=repeat)
                    size = size_of(members, total)
                    grow = exp = ""
                    if prev is not None and prev[0] > 0:
                        grow = f"{ms / prev[0]:.1f}x"
                        exp = f"{math.log(ms / prev[0]) / math.log(size / prev[1]):.2f}" if size != prev[1] else ""
                    prev = (ms, size)
                    print(
                        f"{assignor_name:<9}{kind:<15}{'INCREMENTAL' if incremental else 'FULL':<13}"
                        f"{members:>8}{total:>11,}{ms:>10.1f}{grow:>8}{exp:>10}"
                    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller growth series")
    args = parser.parse_args(argv)

    print("== headline: 1,000 members, 10,000 partitions (100 topics x 100), as in ServerSideAssignorBenchmark ==")
    print(f"{'assignor':<9}{'subscription':<15}{'type':<13}{'racks':<7}{'ms':>10}")
    for assignor_name in ("uniform", "range"):
        for kind in (HOMOGENEOUS, HETEROGENEOUS):
            for incremental in (False, True):
                for racks in (False, True):
                    ms, _ = run(assignor_name, 1000, 10, 100, kind, incremental, racks)
                    print(
                        f"{assignor_name:<9}{kind:<15}{'INCREMENTAL' if incremental else 'FULL':<13}"
                        f"{'yes' if racks else 'no':<7}{ms:>10.1f}"
                    )

    members_series = [100, 500, 1000, 5000] if args.quick else [100, 500, 1000, 5000, 10000]
    growth_table(
        "growth with members (10 partitions per member, 100 topics)",
        [(m, 10, 100) for m in members_series],
        lambda members, total: members,
        repeat=2,
    )
    ratios = [5, 10, 50]
    growth_table(
        "growth with partitions (1,000 members, 100 topics, 5/10/50 partitions per member)",
        [(1000, r, 100) for r in ratios],
        lambda members, total: total,
        repeat=2,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
