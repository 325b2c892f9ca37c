"""Assignor speed: ours against kafka-python's own assignors on the same input, in one run.

    python benchmarks/assignors.py            # full: includes Kafka's 1,000,000-partition / 2000-member case
    python benchmarks/assignors.py --quick    # smaller large case (50,000 partitions / 500 members)

Each case runs a first assignment (nobody owns anything), then removes one member and reassigns with every
survivor reporting what it owns (generation 1) -- Kafka's testLargeAssignmentAndGroupWithUniformSubscription.
kafka-python's sticky is only run on the 10k-partition case: on the large case it would take hours.

The rack case (KIP-881) runs Sticky and CooperativeSticky on the same group with and without racks: three racks,
members spread over them, every partition with replicas on two of the three (so racks matter and the rack-aware
path is taken).  It prints wall and CPU seconds per round (CPU time is the steadier figure on a shared machine),
the racks/no-racks ratio, and how many partitions ended on a member outside their replicas' racks.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import namedtuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.coordinator.assignors.range import RangePartitionAssignor  # noqa: E402
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor  # noqa: E402
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor  # noqa: E402
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription  # noqa: E402

from assignors import Subscription, TopicPartition, get_assignor  # noqa: E402

Member = namedtuple("Member", "member_id group_instance_id metadata")


class Cluster:
    """The one method kafka-python's assignors call on ClusterMetadata."""

    def __init__(self, topics: dict[str, int]) -> None:
        self._partitions = {t: set(range(n)) for t, n in topics.items()}

    def partitions_for_topic(self, topic: str):
        return self._partitions.get(topic)

    def topics(self, exclude_internal_topics: bool = True):
        return set(self._partitions)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def kp_members(subs: dict[str, Subscription], sticky: bool) -> list[Member]:
    out = []
    for member_id, sub in subs.items():
        if sticky:
            meta = StickyPartitionAssignor._metadata(
                sub.topics, list(sub.owned_partitions) if sub.owned_partitions else None, sub.generation or -1
            )
        else:
            meta = ConsumerProtocolSubscription(0, list(sub.topics), b"")
        out.append(Member(member_id, sub.group_instance_id, meta))
    return out


def kp_to_plain(assignment) -> dict[str, set]:
    return {m: {(t, p) for t, ps in a.assigned_partitions for p in ps} for m, a in assignment.items()}


def run_case(label: str, num_topics: int, parts: int, num_members: int, compare: list[str]) -> None:
    topics = {f"topic-{i}": parts for i in range(num_topics)}
    every = list(topics)
    total = num_topics * parts
    print(f"\n== {label}: {num_topics} topics x {parts} partitions = {total:,} partitions, {num_members} members ==")
    cluster = Cluster(topics)
    subs1 = {f"consumer-{i:05d}": Subscription(every) for i in range(num_members)}
    kp_classes = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    print(f"{'assignor':<20}{'round':<8}{'ours (s)':>10}{'kafka-python (s)':>18}{'speed-up':>10}")
    for name in ["range", "roundrobin", "sticky", "cooperative-sticky"]:
        ours = get_assignor(name)
        t1, r1 = timed(lambda: ours.assign(topics, subs1))
        # round 2: one member leaves, survivors report what they own
        gone = next(iter(subs1))
        subs2 = {m: Subscription(every, r1[m], 1) for m in subs1 if m != gone}
        t2, r2 = timed(lambda: ours.assign(topics, subs2))
        sizes = [len(v) for v in r2.values()]
        kept = sum(len(set(r1[m]) & set(r2[m])) for m in subs2)
        for rnd, ours_t, sub in (("1", t1, subs1), ("2", t2, subs2)):
            kp_name = name if name in kp_classes else None
            if kp_name and kp_name in compare:
                cls = kp_classes[kp_name]
                members = kp_members(sub, sticky=(kp_name == "sticky"))
                kp_t, kp_result = timed(lambda: cls().assign(cluster, members))
                if kp_name in ("range", "roundrobin"):
                    ours_plain = {m: set(v) for m, v in (r1 if rnd == "1" else r2).items()}
                    same = "same result" if kp_to_plain(kp_result) == ours_plain else "DIFFERENT result"
                else:
                    same = ""
                print(f"{name:<20}{rnd:<8}{ours_t:>10.3f}{kp_t:>18.3f}{kp_t / ours_t:>9.1f}x  {same}")
            else:
                print(f"{name:<20}{rnd:<8}{ours_t:>10.3f}{'-':>18}{'-':>10}")
        print(
            f"{'':<20}round 2: sizes {min(sizes)}..{max(sizes)}, kept {kept:,} of {total - len(r1[gone]):,} "
            f"owned partitions"
        )


RACKS = ["rack-a", "rack-b", "rack-c"]


def timed_cpu(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def run_rack_case(label: str, num_topics: int, parts: int, num_members: int) -> None:
    topics = {f"topic-{i}": parts for i in range(num_topics)}
    every = list(topics)
    total = num_topics * parts
    print(
        f"\n== racks, {label}: {num_topics} topics x {parts} partitions = {total:,} partitions, {num_members} members,"
        f" 3 racks, replicas on 2 of them =="
    )
    start = time.perf_counter()
    on_two = [frozenset({RACKS[k], RACKS[(k + 1) % 3]}) for k in range(3)]
    partition_racks = {}
    k = 0
    for topic in topics:
        for p in range(parts):
            partition_racks[TopicPartition(topic, p)] = on_two[k % 3]
            k += 1
    print(f"building the partition -> racks mapping (caller side): {time.perf_counter() - start:.2f} s")
    print(f"{'assignor':<20}{'racks':<7}{'round':<7}{'wall (s)':>9}{'cpu (s)':>9}{'cpu ratio':>11}{'off-rack':>10}")
    for name in ["sticky", "cooperative-sticky"]:
        plain_cpu = {}
        for with_racks in (False, True):
            pr = partition_racks if with_racks else None
            subs1 = {
                f"consumer-{i:05d}": Subscription(every, rack=RACKS[i % 3] if with_racks else None)
                for i in range(num_members)
            }
            ours = get_assignor(name)
            w1, c1, r1 = timed_cpu(lambda: ours.assign(topics, subs1, pr))
            gone = next(iter(subs1))
            subs2 = {m: Subscription(every, r1[m], 1, rack=s.rack) for m, s in subs1.items() if m != gone}
            w2, c2, r2 = timed_cpu(lambda: ours.assign(topics, subs2, pr))
            for rnd, wall, cpu, subs, result in (("1", w1, c1, subs1, r1), ("2", w2, c2, subs2, r2)):
                off = sum(
                    1 for m, ps in result.items() if subs[m].rack for p in ps if subs[m].rack not in partition_racks[p]
                )
                if with_racks:
                    ratio = f"{cpu / plain_cpu[rnd]:>10.2f}x"
                else:
                    plain_cpu[rnd] = cpu
                    ratio = f"{'-':>11}"
                print(
                    f"{name:<20}{'yes' if with_racks else 'no':<7}{rnd:<7}{wall:>9.3f}{cpu:>9.3f}{ratio}"
                    f"{off if with_racks else '-':>10}"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller large case")
    parser.add_argument("--racks-only", action="store_true", help="only the rack case (with and without racks)")
    args = parser.parse_args(argv)
    if not args.racks_only:
        run_case("10k / 100", 100, 100, 100, ["range", "roundrobin", "sticky"])
        if args.quick:
            run_case("large (quick)", 100, 500, 500, ["range", "roundrobin"])
        else:
            run_case("Kafka's large case", 500, 2000, 2000, ["range", "roundrobin"])
    if args.quick:
        run_rack_case("quick", 100, 500, 500)
    else:
        run_rack_case("Kafka's large case", 500, 2000, 2000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
