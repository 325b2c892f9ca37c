"""A soak run: the tracker with its defaults on a live feed for a long while, and whether its memory stays flat.

    python benchmarks/soak.py [--minutes 10] [--interval 30] [--warmup 5] [--groups 300] [--cohort 30]
                              [--turnover 60] [--detail FILE] [--probe DIR] [--conf KEY=VALUE ...]

The job runs as ``rebalance-tracker run`` would with its defaults (processing time, 1 s trigger, state keyed by
group, the Python Kafka source, the outputs topic, a SQLite offsets store) on the bundled broker, fed live by a
separate process: ``--groups`` simulated consumer groups (~1.3-1.6 events/s each with the simulator's defaults,
~370-450/s for 300: a group's rate falls as it ages and its members churn), members joining, leaving, crashing and
restarting all the time, and groups coming and going: every ``--turnover`` seconds the oldest cohort of ``--cohort``
groups goes silent (its members expire) and is deleted (DeleteGroups, as ``kafka-consumer-groups --delete`` does), and a
new cohort of new group ids starts.

Every ``--interval`` seconds it prints one row: the driver's resident memory (this process), the JVM's (and its
heap: in use, and the old generation after the last collection, which is what a leak on the heap moves), Spark's
Python workers' (all of them: the worker daemon, the workers it forked, the streaming source's runner), the state
store (rows and Spark's memoryUsedBytes) and the micro-batch durations of the interval (p50/p90). At the end: each
one's slope after the warm-up (least squares, MB a minute) and the verdict against the target: memory flat (slope
< 1 MB/min for every process) and batch times flat. ``--detail`` keeps every sample (each process on its own) as
JSON lines; ``--probe DIR`` turns on streaming/spark/memory_probe.py in the workers.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MB_PER_MIN = 1.0
FLAT_BATCH_CHANGE = 0.25  # batch times are flat if the fitted p50 moves less than this share over the run
TOPIC = "soak-events"


# ---------------------------------------------------------------------------------------------------- the feed
def feed(bootstrap: str, topic: str, groups: int, cohort: int, turnover_s: float, seed: int) -> None:
    """Play cohorts of simulated groups in real time until killed (runs in its own process)."""
    from confluent_kafka import Producer

    from streaming.feeds.simulator import SimulationSettings, Simulator

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    live: collections.deque = collections.deque()  # (prefix, simulator), oldest first
    deletes: list[tuple[float, list[str]]] = []  # (when, group ids) of retired cohorts
    made = 0

    def now_ms() -> int:
        return int(time.time() * 1000)

    def start_cohort() -> None:
        nonlocal made
        made += 1
        live.append((f"c{made}", Simulator(SimulationSettings(groups=cohort, seed=seed + made), start_ms=now_ms())))

    def send(event: dict) -> None:
        producer.produce(
            topic, key=(event.get("group_id") or "").encode(), value=json.dumps(event, separators=(",", ":")).encode()
        )

    for _ in range(max(1, groups // cohort)):
        start_cohort()
    next_turnover = time.monotonic() + turnover_s
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    while running[0]:
        now = now_ms()
        for prefix, simulator in live:
            for event in simulator.run_until(now):
                # Copies: the simulator's own coordinator may hold on to the events it handled.
                send(dict(event, group_id=f"{prefix}-{event['group_id']}") if event.get("group_id") else event)
        if time.monotonic() >= next_turnover:
            prefix, _ = live.popleft()  # its consumers stop: no heartbeat, no leave; the sessions expire
            ids = [f"{prefix}-group-{i}" for i in range(cohort)]
            # Deleted once its members are gone (session 10 s, rebalance up to 30 s); again later for a group that
            # was still rebalancing the first time (a delete of a deleted group is GROUP_ID_NOT_FOUND, no state).
            deletes += [(time.monotonic() + 45, ids), (time.monotonic() + 90, ids)]
            start_cohort()
            next_turnover += turnover_s
        due = [d for d in deletes if d[0] <= time.monotonic()]
        for entry in due:
            deletes.remove(entry)
            for group_id in entry[1]:
                send({"type": "delete_group", "group_id": group_id, "ts": now_ms()})
        producer.poll(0)
        time.sleep(0.05)
    producer.flush(5)


# ---------------------------------------------------------------------------------------------------- sampling
def _proc_tree() -> dict[int, list[int]]:
    children: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children[int(stat[stat.rindex(")") + 2 :].split()[1])].append(int(entry))
    return children


def _memory(pid: int) -> dict[str, int] | None:
    """Resident and proportional (shared pages split between the processes sharing them) bytes of one process."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in rollup[1:] if line.split()[1:2]}
    return {"rss": fields.get("Rss", 0), "pss": fields.get("Pss", 0), "cmd": cmdline.strip()}


def python_workers(jvm_pid: int) -> dict[int, dict]:
    """Every Python process below the JVM: the worker daemon and the workers it forked, the source's runner."""
    children, out, todo = _proc_tree(), {}, list(_proc_tree().get(jvm_pid, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        info = _memory(pid)
        if info is not None and "python" in info["cmd"]:
            info["kind"] = (
                "source runner"
                if "source_runner" in info["cmd"]
                else "daemon"
                if pid in children.get(jvm_pid, []) and "pyspark.daemon" in info["cmd"]
                else "worker"
                if "pyspark.daemon" in info["cmd"]
                else "other"
            )
            out[pid] = info
    return out


def jvm_heap(spark) -> dict[str, int]:
    """Heap in use now, and the old generation right after the last collection that covered it (what a leak moves;
    the rest is garbage not yet collected), the heap's limit and the JVM's non-heap (metaspace, code cache)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    memory = management.getMemoryMXBean()
    out = {
        "heap_used": memory.getHeapMemoryUsage().getUsed(),
        "heap_max": memory.getHeapMemoryUsage().getMax(),
        "non_heap_used": memory.getNonHeapMemoryUsage().getUsed(),
    }
    for pool in management.getMemoryPoolMXBeans():
        name = pool.getName()
        if pool.getType().toString() == "Heap memory" and ("Old" in name or "Tenured" in name):
            after_gc = pool.getCollectionUsage()
            out["old_after_gc"] = after_gc.getUsed() if after_gc is not None else 0
            out["old_used"] = pool.getUsage().getUsed()
    return out


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minute, value) points."""
    if len(points) < 2:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


MB = 2**20
COLUMNS = [  # (key, header, width)
    ("minute", "min", 5),
    ("events_s", "ev/s", 5),
    ("driver", "driver MB", 9),
    ("jvm", "JVM MB", 7),
    ("heap", "heap MB", 7),
    ("old_gc", "old@GC", 6),
    ("workers", "workers MB", 10),
    ("n_workers", "n", 2),
    ("state_rows", "state rows", 10),
    ("state_mb", "state MB", 8),
    ("p50", "p50 s", 5),
    ("p90", "p90 s", 5),
    ("load", "load", 4),
]
SLOPED = {
    "driver": "driver RSS",
    "jvm": "JVM RSS",
    "old_gc": "JVM old gen after GC",
    "heap": "JVM heap in use",
    "workers": "Python workers RSS (all)",
    "state_mb": "state store memory",
}


def print_row(row: dict) -> None:
    cells = []
    for key, _, width in COLUMNS:
        v = row.get(key)
        cells.append(
            f"{v:>{width}.1f}"
            if isinstance(v, float) and key in ("minute", "p50", "p90", "state_mb", "load")
            else f"{v:>{width},.0f}"
            if isinstance(v, (int, float))
            else f"{'-':>{width}}"
        )
    print("| " + " | ".join(cells) + " |", flush=True)


def sample(spark, query, jvm_pid: int, started: float, seen: dict) -> tuple[dict, dict]:
    """One row of the table and its detail."""
    workers = python_workers(jvm_pid)
    heap = jvm_heap(spark)
    progress = [p for p in query.recentProgress if p["batchId"] > seen["batch"]]
    if progress:
        seen["batch"] = max(p["batchId"] for p in progress)
    durations = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress if p.get("numInputRows")]
    rows = sum(p.get("numInputRows", 0) for p in progress)
    span = time.monotonic() - seen["at"]
    seen["at"] = time.monotonic()
    operators = next((p["stateOperators"][0] for p in reversed(progress) if p.get("stateOperators")), {})
    jvm = _memory(jvm_pid) or {"rss": 0, "pss": 0}
    row = {
        "minute": (time.monotonic() - started) / 60,
        "events_s": rows / span if span else 0,
        "driver": (_memory(os.getpid()) or {"rss": 0})["rss"] / MB,
        "jvm": jvm["rss"] / MB,
        "heap": heap["heap_used"] / MB,
        "old_gc": heap.get("old_after_gc", 0) / MB,
        "workers": sum(w["rss"] for w in workers.values()) / MB,
        "n_workers": len(workers),
        "state_rows": operators.get("numRowsTotal"),
        "state_mb": operators.get("memoryUsedBytes", 0) / MB,
        "p50": percentile(durations, 0.5),
        "p90": percentile(durations, 0.9),
        "load": os.getloadavg()[0],
    }  # the machine is shared: batch times follow its load
    detail = dict(
        row,
        batches=len(durations),
        heap_max=heap["heap_max"] / MB,
        old_used=heap["old_used"] / MB,
        non_heap=heap["non_heap_used"] / MB,
        workers_pss=sum(w["pss"] for w in workers.values()) / MB,
        state_metrics=operators.get("customMetrics", {}),
        processes={
            pid: {"kind": w["kind"], "rss": w["rss"] / MB, "pss": w["pss"] / MB} for pid, w in sorted(workers.items())
        },
    )
    return row, detail


def verdict(rows: list[dict], warmup_min: float) -> bool:
    after = [r for r in rows if r["minute"] >= warmup_min]
    print(f"\nslopes after a {warmup_min:g}-minute warm-up ({len(after)} samples, least squares):")
    ok = True
    for key, name in SLOPED.items():
        s = slope([(r["minute"], r[key]) for r in after])
        bounded = key in ("driver", "jvm", "old_gc", "workers")  # the heap in use swings with every collection
        if bounded:
            ok &= s < TARGET_MB_PER_MIN
        mark = ("ok" if s < TARGET_MB_PER_MIN else "GROWS") if bounded else "(information)"
        print(f"  {name:<26} {s:+7.2f} MB/min  {mark}")
    batches = [(r["minute"], r["p50"]) for r in after if r["p50"] == r["p50"]]
    s = slope(batches)
    mean = statistics.fmean(b[1] for b in batches) if batches else float("nan")
    span = (batches[-1][0] - batches[0][0]) if len(batches) > 1 else 0
    change = s * span / mean if mean else float("nan")
    flat = abs(change) < FLAT_BATCH_CHANGE
    ok &= flat
    loads = [r["load"] for r in after]
    print(
        f"  {'batch duration p50':<26} {s * 1000:+7.1f} ms/min  ({change:+.0%} over {span:.0f} min around "
        f"{mean:.2f} s: {'flat' if flat else 'NOT flat'}; load average {min(loads):.1f}-{max(loads):.1f})"
    )
    print(
        f"verdict: {'flat' if ok else 'NOT flat'} (target: every process < {TARGET_MB_PER_MIN:g} MB/min after "
        f"warm-up, batch times flat)"
    )
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--interval", type=float, default=30, help="seconds between samples")
    p.add_argument(
        "--warmup",
        type=float,
        default=5,
        help="minutes left out of the slopes: the workers' imports, the JIT, and the JVM's first periodic "
        "full collections (every 2 minutes, spark.cleaner.periodicGC.interval)",
    )
    p.add_argument("--groups", type=int, default=300)
    p.add_argument("--cohort", type=int, default=30, help="groups that come and go together")
    p.add_argument("--turnover", type=float, default=60, help="seconds between one cohort's end and the next's start")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--detail", default=None, help="write every sample, each process on its own, as JSON lines")
    p.add_argument("--probe", default=None, help="a directory: the workers' memory probe writes there")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument("--feed", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.feed:
        feed(*args.feed, args.groups, args.cohort, args.turnover, args.seed)
        return 0
    if args.probe:  # the workers inherit the driver's environment through the JVM
        os.makedirs(args.probe, exist_ok=True)
        os.environ["REBALANCE_TRACKER_MEMORY_PROBE"] = os.path.abspath(args.probe)

    from streaming.cli.run import TrackerConfig, start_tracker
    from streaming.local.broker import start_bundled_broker
    from streaming.spark.session import build_spark_session, parse_conf
    from streaming.views.live_view import LiveView

    broker = start_bundled_broker()
    spark = build_spark_session("rebalance-tracker-soak", conf=parse_conf(args.conf))
    spark.sparkContext.setLogLevel("ERROR")  # not a warning a batch that runs late: the table says it
    jvm_pid = spark.sparkContext._gateway.proc.pid
    detail = open(args.detail, "w") if args.detail else None
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, open(os.devnull, "w") as devnull:
        # The defaults of `rebalance-tracker run`, in a scratch directory; the live table drawn to nowhere.
        config = TrackerConfig(
            bootstrap=broker.bootstrap,
            events_topic=TOPIC,
            store=f"sqlite:{tmp}/offsets.db",
            checkpoint=f"{tmp}/checkpoint",
        )
        tracker = start_tracker(spark, config, LiveView(out=devnull, redraw=False))
        feeder = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--feed",
                broker.bootstrap,
                TOPIC,
                "--groups",
                str(args.groups),
                "--cohort",
                str(args.cohort),
                "--turnover",
                str(args.turnover),
                "--seed",
                str(args.seed),
            ]
        )
        print(
            f"soak: {args.minutes:g} min, {args.groups} groups live ({args.cohort} replaced every "
            f"{args.turnover:g} s), a sample every {args.interval:g} s; driver {os.getpid()}, JVM {jvm_pid}"
        )
        print("| " + " | ".join(f"{h:>{w}}" for _, h, w in COLUMNS) + " |")
        print("|" + "|".join("-" * (w + 2) for _, _, w in COLUMNS) + "|", flush=True)
        started = time.monotonic()
        seen = {"batch": -1, "at": started}
        try:
            while time.monotonic() - started < args.minutes * 60:
                time.sleep(max(0.0, args.interval - (time.monotonic() - started) % args.interval))
                if not tracker.query.isActive:
                    print(f"the query stopped: {tracker.query.exception()}")
                    break
                if feeder.poll() is not None:
                    print(f"the feed stopped (exit {feeder.returncode})")
                    break
                row, more = sample(spark, tracker.query, jvm_pid, started, seen)
                rows.append(row)
                print_row(row)
                if detail is not None:
                    detail.write(json.dumps(more) + "\n")
                    detail.flush()
        finally:
            feeder.terminate()
            feeder.wait(30)
            tracker.stop()
    spark.stop()
    broker.stop()
    ok = verdict(rows, args.warmup) if rows else False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
