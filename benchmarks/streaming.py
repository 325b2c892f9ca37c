"""End-to-end figures of the tracker on local Spark with the bundled broker.

    python benchmarks/streaming.py [--groups 300] [--minutes 10] [--session-ms 6000] [--feed FILE]
                                   [--rate 5000] [--members 3] [--live-seconds 60]
                                   [--state-key group|coordinator-partition|both] [--broker kafka4|bundled]
                                   [--sources builtin,confluent] [--only throughput,live,expiry,memory]
                                   [--conf KEY=VALUE ...]

1. Throughput: a recorded simulator feed (recorded once into ~/.cache/rebalance-tracker, or --feed) is produced to
   the events topic first, then the tracker (event-time mode) processes all of it. Prints events/s (SparkSession
   start excluded), the pure core's single-process rate on the same feed in the same run and the ratio of the two,
   the Kafka reader's own rate, and where the time went per stage (CPU seconds of the Python work inside the tasks:
   parse/validate, stateful incl. state decode/encode, the sink on the driver). Targets: >= 20k events/s, ratio >= 1.
   Twice: cold (the first query of the SparkSession) and warm (a second query of the same session, on its own topic).
   With several ``--sources`` (what reads Kafka: Spark's connector ``builtin``, or the Python source's ``confluent`` /
   ``kafka-python`` client), the first runs cold and each runs warm, side by side in one session; a table at the end
   sets them next to each other with the targets: warm >= 1.0x the pure core's rate, pipeline CPU an event <= 1.5x
   the core's, cold >= 0.6x warm. The live feed and the expiry latency run once with each source too.
2. Live feed: 5k events/s produced steadily for a while against a 1 s trigger, from groups of ``--members``;
   prints micro-batch durations (target: below the trigger) with Spark's parts of a batch, and the expiry latency
   of a member that goes silent under that load.
3. Expiry latency on an idle tracker: a live group whose only member stops heartbeating; prints the time from its
   last heartbeat to member_expired. Target: <= session + trigger + 1 s.
With ``--state-key`` the job keys its state by group id (the default), by the group's __consumer_offsets partition,
or runs the throughput and live figures once with each.
4. Memory: the coordinator state of 10k groups x 20 members (bytes a group, bytes a member, old vs new format).

The broker is Apache Kafka 4 from Maven Central (``--broker kafka4``, the default) or the bundled Tansu
(``--broker bundled``), which only the Python source reads correctly (its ListOffsets answer hides a partition's last
records from Spark's connector). The broker runs in its own process: its CPU is not the pipeline's.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.views import terminal  # noqa: E402
from streaming.local.broker import start_bundled_broker  # noqa: E402
from streaming.feeds.simulator import SimulationSettings, Simulator  # noqa: E402
from streaming.views.live_view import LiveView  # noqa: E402
from streaming.kafka_client.topics import ensure_topics  # noqa: E402
from streaming.tracker import TrackerConfig, start_tracker  # noqa: E402
from streaming.coordinator import CoordinatorConfig, parse_event  # noqa: E402
from streaming.spark.group_step import step_group  # noqa: E402
from streaming.gc_pause import gc_paused  # noqa: E402
from streaming.spark.session import build_spark_session, parse_conf  # noqa: E402
from streaming.spark.stage_times import stage_times  # noqa: E402

TARGET_EVENTS_PER_S = 20_000


def produce(bootstrap: str, topic: str, records) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024, acks=1)
    n = 0
    with terminal.progress("producing", unit="records") as task:
        for key, value in records:
            producer.send(topic, key=key, value=value)
            n += 1
            task.advance()
        producer.flush()
    producer.close()
    return n


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def recorded_feed(groups: int, minutes: int, path: str | None) -> list[bytes]:
    """The feed as the JSON record values a producer would send; simulated once, then read from the cache file
    (simulating 300 groups for 10 minutes takes minutes on its own)."""
    if path is None:
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rebalance-tracker"
        cache.mkdir(parents=True, exist_ok=True)
        path = str(cache / f"bench-feed-{groups}g-{minutes}m-seed1.jsonl")
    if not Path(path).exists():
        start = 1_700_000_000_000
        feed = Simulator(SimulationSettings(groups=groups, seed=1), start_ms=start).run_until(start + minutes * 60_000)
        tmp = Path(path + ".tmp")
        tmp.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in feed))
        os.replace(tmp, path)
    return [line.encode() for line in Path(path).read_text().splitlines() if line]


def pure_core_rate(values: list[bytes]) -> tuple[float, dict[str, float]]:
    """The pure core alone, one process: validate every record, then each group's events through the coordinator
    (one step per group, as the job does for a one-batch backlog). Returns events/s and CPU us an event per part."""
    started = time.process_time()
    with gc_paused():  # as the job's parse stage does for each Arrow batch
        events = [parse_event(v)[0] for v in values]
    validated = time.process_time()
    by_group: dict[str, list[dict]] = {}
    for e in events:
        by_group.setdefault(e["group_id"], []).append(e)
    config = CoordinatorConfig()
    for group_events in by_group.values():
        step_group(None, group_events, None, config)
    done = time.process_time()
    n = len(values)
    return n / (done - started), {
        "validate": (validated - started) / n * 1e6,
        "coordinator incl. state encode": (done - validated) / n * 1e6,
    }


def kafka_read_rate(bootstrap: str, topic: str, client: str) -> float:
    """The source's executor-side reader alone, in this process: every partition read through, records/s."""
    from kafka import KafkaConsumer, TopicPartition

    from streaming.kafka_client.log_end import log_end_offsets
    from streaming.spark.kafka_source import KafkaRange, KafkaStreamReader

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    ends = log_end_offsets(consumer, tps)
    consumer.close()
    reader = KafkaStreamReader({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafkaclient": client})
    n, started = 0, time.perf_counter()
    for tp in tps:
        for batch in reader.read(KafkaRange(topic, tp.partition, 0, ends[tp])):
            n += batch.num_rows
    return n / (time.perf_counter() - started)


def tree_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a process and its live descendants, split into the JVM and Python workers."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        children.setdefault(int(rest[1]), []).append(int(entry))
        stats[int(entry)] = (name, (int(rest[11]) + int(rest[12])) / ticks)
    out = {"jvm": 0.0, "python workers": 0.0}
    todo = [pid]
    while todo:
        p = todo.pop()
        if p in stats:
            out["jvm" if stats[p][0] == "java" else "python workers"] += stats[p][1]
        todo += children.get(p, [])
    return out


THROUGHPUT_RUNS = {
    "cold": "the first query of a fresh SparkSession: the JVM's JIT and the Python workers warm up inside it",
    "warm": "the same backlog again, in a new query, topic, store and checkpoint of the same SparkSession: what a "
    "long-running job runs at once its first batches are behind it",
}


def throughput(
    spark,
    bootstrap: str,
    values: list[bytes],
    workdir: Path,
    source: str,
    run: str,
    state_key: str,
    read_rates: bool = False,
) -> dict:
    """One run over the backlog; returns its figures for the summary table."""
    print(f"-- {run} run, {source} source, state keyed by {state_key}: {THROUGHPUT_RUNS[run]}")
    name = f"{run}-{source}-{state_key}"
    topic = f"bench-events-{name}"
    ensure_topics(bootstrap, {topic: 4})
    keys = [json.loads(v)["group_id"].encode() for v in values]
    n = produce(bootstrap, topic, zip(keys, values))
    load = os.getloadavg()[0]
    pure, parts = pure_core_rate(values)
    read = {c: kafka_read_rate(bootstrap, topic, c) for c in ("kafka-python", "confluent")} if read_rates else {}
    times = stage_times(spark)
    config = TrackerConfig(
        bootstrap=bootstrap,
        events_topic=topic,
        outputs_topic=f"bench-outputs-{name}",
        store=f"sqlite:{workdir / f'offsets-{name}.db'}",
        checkpoint=str(workdir / f"cp-throughput-{name}"),
        trigger="500 milliseconds",
        time_mode="event",
        watermark_delay="30 seconds",
        kafka_source=source,
        stage_times=times,
        state_key=state_key,
    )
    jvm_pid = spark.sparkContext._gateway.proc.pid
    cpu_before, driver_before = tree_cpu_seconds(jvm_pid), time.process_time()
    started, started_at = time.perf_counter(), time.time()
    tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
    assert tracker.source == source, tracker.source_reason
    try:
        tracker.query.processAllAvailable()
        elapsed = time.perf_counter() - started
        progress = tracker.query.recentProgress
        batches = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress if p.get("numInputRows")]
        # Starting the query (its Python source's workers, planning) happens once in a job's life.
        query_start = (
            datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp() - started_at
            if progress
            else float("nan")
        )
    finally:
        tracker.stop()
    cpu_after, driver_cpu = tree_cpu_seconds(jvm_pid), time.process_time() - driver_before
    rate = n / elapsed
    print(f"load average at the start: {load:.1f} (2 cores; figures are noisy above ~2)")
    print(
        f"pure core, one process: {pure:,.0f} events/s CPU; per event "
        + ", ".join(f"{k} {v:.1f} us" for k, v in parts.items())
    )
    if read:
        print(
            "Python source's Kafka reader alone, one process: "
            + ", ".join(f"{c} {r:,.0f} records/s" for c, r in read.items())
        )
    print(
        f"throughput, {run} ({source} source): {n:,} events in {elapsed:.1f} s = {rate:,.0f} events/s "
        f"({rate / TARGET_EVENTS_PER_S:.2f}x the {TARGET_EVENTS_PER_S:,}/s target; SparkSession start excluded)"
    )
    print(f"pipeline / pure core single-process rate: {rate / pure:.2f} (target >= 1.0)")
    print(
        f"  of the {elapsed:.1f} s: tracker and query start {query_start:.1f} s, micro-batches with input "
        f"{sum(batches):.1f} s ({n / max(sum(batches), 1e-9):,.0f} events/s once started)"
    )
    print_stage_times(times.value)
    used = {k: cpu_after[k] - cpu_before[k] for k in cpu_after} | {"driver (Python)": driver_cpu}
    cpu_ratio = sum(used.values()) / n * pure
    print(
        "  CPU used in the run: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in used.items())
        + f"; {sum(used.values()) / elapsed:.2f} cores busy on average over {elapsed:.1f} s; "
        f"{sum(used.values()) / n * 1e6:.1f} us an event = {cpu_ratio:.2f}x the pure core's {1e6 / pure:.1f} us "
        f"(target <= 1.5)"
    )
    if batches:
        print(
            f"micro-batches with input: {len(batches)}; duration p50 {percentile(batches, 0.5):.2f} s, "
            f"p90 {percentile(batches, 0.9):.2f} s, max {max(batches):.2f} s"
        )
    return {
        "run": run,
        "source": source,
        "state_key": state_key,
        "rate": rate,
        "ratio": rate / pure,
        "cpu_ratio": cpu_ratio,
        "load": load,
    }


def print_summary(figures: list[dict]) -> None:
    """The runs side by side, with the targets: warm >= 1.0x the pure core's rate, CPU an event <= 1.5x, cold >= 0.6x
    warm (the cold run's source against its own warm run)."""
    if not figures:
        return
    print("-- summary (ratios are to the pure core measured in the same run)")
    print(
        f"  {'run':<5} {'source':<12} {'state key':<22} {'events/s':>9} {'x core rate':>11} {'x core CPU':>10} "
        f"{'cold/warm':>9} {'load':>5}"
    )
    warm = {(f["source"], f["state_key"]): f["rate"] for f in figures if f["run"] == "warm"}
    for f in figures:
        cold = (
            f"{f['rate'] / warm[(f['source'], f['state_key'])]:.2f}"
            if f["run"] == "cold" and (f["source"], f["state_key"]) in warm
            else ""
        )
        print(
            f"  {f['run']:<5} {f['source']:<12} {f['state_key']:<22} {f['rate']:>9,.0f} {f['ratio']:>11.2f} "
            f"{f['cpu_ratio']:>10.2f} {cold:>9} {f['load']:>5.1f}"
        )
    print("  targets: warm >= 1.0x the core's rate; CPU an event <= 1.5x the core's; cold >= 0.6x warm")


def print_stage_times(times: dict) -> None:
    """Rows are records (parse), events (stateful) and outputs (sink); a call is an Arrow batch, a group's step in
    one micro-batch, a micro-batch."""
    for stage, (seconds, rows, calls) in sorted(times.items()):
        print(
            f"  stage {stage:>16}: {seconds:6.1f} s CPU in tasks, {rows:,} rows in {calls:,} calls, "
            f"{seconds / max(rows, 1) * 1e6:6.1f} us a row, {seconds / max(calls, 1) * 1e6:7.1f} us a call"
        )


def expiry_latency(spark, bootstrap: str, session_ms: int, workdir: Path, source: str) -> None:
    from kafka import KafkaProducer

    topic = f"bench-live-{source}"
    ensure_topics(bootstrap, {topic: 1})
    expired_at: dict[str, float] = {}

    class Watch(LiveView):
        def update(self, batch_id, outputs):
            for o in outputs:
                if o["type"] == "member_expired":
                    expired_at.setdefault(o["member_id"], time.time())
            super().update(batch_id, outputs)

    config = TrackerConfig(
        bootstrap=bootstrap,
        events_topic=topic,
        outputs_topic=None,
        store=None,
        checkpoint=str(workdir / f"cp-{topic}"),
        trigger="1 second",
        time_mode="processing",
        starting_offsets="latest",
        kafka_source=source,
        coordinator={"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": min(6_000, session_ms)},
    )
    tracker = start_tracker(spark, config, Watch(out=io.StringIO(), redraw=False))
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        time.sleep(3)  # let the query start at the current end of the topic
        simulator = Simulator(
            SimulationSettings(
                groups=1,
                members_per_group=1,
                churn_interval_ms=10**9,
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=1_000,
                static_fraction=0.0,
            ),
            start_ms=int(time.time() * 1000),
        )
        stop = threading.Event()
        last_sent = {"t": 0.0}

        def play():
            while not stop.is_set():
                for event in simulator.run_until(int(time.time() * 1000)):
                    producer.send(topic, key=event["group_id"].encode(), value=json.dumps(event).encode())
                    last_sent["t"] = time.time()
                producer.flush()
                stop.wait(0.05)

        feeder = threading.Thread(target=play, daemon=True)
        feeder.start()
        time.sleep(8)  # joined, synced, heartbeating
        stop.set()  # the member goes silent: no more heartbeats
        feeder.join()
        silent_since = last_sent["t"]
        deadline = time.time() + session_ms / 1000 + 30
        while not expired_at and time.time() < deadline:
            time.sleep(0.1)
    finally:
        producer.close()
        tracker.stop()
    if not expired_at:
        print("expiry latency: the member was not expired within the wait (a bug)")
        return
    latency = min(expired_at.values()) - silent_since
    bound = session_ms / 1000 + 1 + 1
    print(
        f"expiry latency ({source} source): {latency:.2f} s from the last heartbeat to member_expired "
        f"(session {session_ms / 1000:.0f} s, trigger 1 s; bound {bound:.0f} s -> "
        f"{'within' if latency <= bound else 'OVER'} the target)"
    )


def events_per_group_second(members: int) -> float:
    """The simulator's steady rate for groups of ``members`` (heartbeats, commits, churn), once past the joins."""
    feed = Simulator(SimulationSettings(groups=20, members_per_group=members, seed=2), start_ms=0).run_until(90_000)
    return sum(1 for e in feed if e["ts"] >= 30_000) / 60 / 20


def live_feed(
    spark,
    bootstrap: str,
    rate: int,
    members: int,
    seconds: int,
    session_ms: int,
    workdir: Path,
    state_key: str,
    source: str,
) -> None:
    """A steady live feed of about ``rate`` events/s from groups of ``members`` against a 1 s trigger (processing
    time), with one member that goes silent half way: micro-batch durations against the trigger, and that member's
    expiry latency. The same rate from fewer, larger groups is a different load: Spark's applyInPandasWithState
    costs about as much a group as the events in it, so the batch time follows the groups touched a batch.

    The feed is simulated ahead, for a start a little in the future (the simulator cannot make thousands of events
    a second in real time next to the job on two cores; member ids depend on the group's clock, so the times must
    be the real ones), then played against the wall clock, produced with confluent-kafka to keep the feeder's own
    CPU small."""
    from confluent_kafka import Producer

    groups = max(1, round(rate / events_per_group_second(members)))
    settings = SimulationSettings(groups=groups, members_per_group=members, seed=2)
    topic = f"bench-steady-{state_key}-{source}"
    ensure_topics(bootstrap, {topic: 4})
    expired_at: list[float] = []
    times = stage_times(spark)

    class Watch(LiveView):
        def update(self, batch_id, outputs):
            if any(o["type"] == "member_expired" and o["group_id"] == "silent" for o in outputs) and not expired_at:
                expired_at.append(time.time())
            super().update(batch_id, outputs)

    config = TrackerConfig(
        bootstrap=bootstrap,
        events_topic=topic,
        outputs_topic=f"{topic}-out",
        store=f"sqlite:{workdir / f'{topic}.db'}",
        checkpoint=str(workdir / f"cp-{topic}"),
        trigger="1 second",
        time_mode="processing",
        starting_offsets="latest",
        kafka_source=source,
        stage_times=times,
        state_key=state_key,
        coordinator={"group.min.session.timeout.ms": min(6_000, session_ms)},
    )
    tracker = start_tracker(spark, config, Watch(out=io.StringIO(), redraw=False))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        deadline = time.time() + 120
        while tracker.query.lastProgress is None and time.time() < deadline:  # started at the topic's end
            time.sleep(0.1)
        probe = time.process_time()
        Simulator(settings, start_ms=0).run_until(2_000)
        lead_ms = int((time.process_time() - probe) / 2 * seconds * 1000 * 1.5) + 5_000
        start_ms = int(time.time() * 1000) + lead_ms
        feed = Simulator(settings, start_ms=start_ms).run_until(start_ms + seconds * 1000)
        silent = silent_member(start_ms, start_ms + seconds * 500, session_ms)
        records = [
            (e["ts"], e["group_id"].encode(), json.dumps(e).encode())
            for e in sorted(feed + silent, key=lambda e: e["ts"])
        ]
        last_silent_ms = max(e["ts"] for e in silent)
        while time.time() * 1000 < start_ms:
            time.sleep(0.01)
        started, i, silent_since = time.time(), 0, None
        while i < len(records):
            now_ms = time.time() * 1000
            while i < len(records) and records[i][0] <= now_ms:
                producer.produce(topic, value=records[i][2], key=records[i][1])
                i += 1
            producer.poll(0)
            if silent_since is None and now_ms >= last_silent_ms:
                producer.flush()
                silent_since = time.time()
            time.sleep(0.01)
        producer.flush()
        feed_rate = len(records) / (time.time() - started)
        wait_until = time.time() + session_ms / 1000 + 15
        while not expired_at and time.time() < wait_until:
            time.sleep(0.1)
        progress = [p for p in tracker.query.recentProgress if p.get("numInputRows")]
    finally:
        tracker.stop()
    batches = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress]
    print(
        f"live feed, {source} source, state keyed by {state_key}: {feed_rate:,.0f} events/s for {seconds} s "
        f"({groups} groups of "
        f"{members}), trigger 1 s: "
        f"{len(batches)} batches with input, duration p50 {percentile(batches, 0.5):.2f} s, "
        f"p90 {percentile(batches, 0.9):.2f} s, max {max(batches, default=float('nan')):.2f} s "
        f"({'below' if batches and percentile(batches, 0.9) < 1 else 'NOT below'} the trigger at p90)"
    )
    parts = sorted({k for p in progress for k in p["durationMs"]} - {"triggerExecution"})
    print(
        "  a batch's parts, p50 (Spark's durationMs): "
        + ", ".join(f"{k} {percentile([p['durationMs'].get(k, 0) / 1000 for p in progress], 0.5):.2f} s" for k in parts)
    )
    operators = [p["stateOperators"][0] for p in progress if p.get("stateOperators")]
    if operators:
        print(
            "  the state store, p50 a batch (Spark's stateOperators): "
            + ", ".join(
                f"{k} {percentile([o.get(k, 0) for o in operators], 0.5):,.0f}"
                for k in ("numRowsTotal", "numRowsUpdated", "allUpdatesTimeMs", "commitTimeMs", "memoryUsedBytes")
            )
        )
    print_stage_times(times.value)
    if expired_at and silent_since is not None:
        latency = expired_at[0] - silent_since
        bound = session_ms / 1000 + 1 + 1
        print(
            f"  expiry under load: {latency:.2f} s from the silent member's last heartbeat (session "
            f"{session_ms / 1000:.0f} s; bound {bound:.0f} s -> {'within' if latency <= bound else 'OVER'})"
        )
    else:
        print("  expiry under load: the silent member was not expired within the wait")


def silent_member(start_ms: int, until_ms: int, session_ms: int) -> list[dict]:
    """Group "silent": one member joins (KIP-394's two joins), syncs and heartbeats every second until ``until_ms``,
    then goes silent. Its member id comes from a coordinator like the tracker's, so the tracker accepts it."""
    from streaming.coordinator import GroupCoordinator

    local = GroupCoordinator(CoordinatorConfig())
    join = {
        "type": "join",
        "group_id": "silent",
        "member_id": "",
        "session_timeout_ms": session_ms,
        "protocols": [{"name": "range", "topics": ["t"]}],
        "ts": start_ms,
    }
    member = local.handle(parse_event(join)[0])[-1]["member_id"]
    events = [join, dict(join, member_id=member)]
    local.handle(parse_event(events[-1])[0])
    ts = start_ms + CoordinatorConfig().group_initial_rebalance_delay_ms + 1
    local.advance(ts)
    events.append(
        {
            "type": "sync",
            "group_id": "silent",
            "member_id": member,
            "ts": ts,
            "generation": local.groups["silent"].generation,
        }
    )
    while ts + 1_000 <= until_ms:
        ts += 1_000
        events.append(
            {
                "type": "heartbeat",
                "group_id": "silent",
                "member_id": member,
                "ts": ts,
                "generation": local.groups["silent"].generation,
            }
        )
    return events


def memory(groups: int = 10_000, members: int = 20) -> None:
    """Coordinator state of ``groups`` stable groups of ``members``: what Spark keeps per group between batches."""
    import zlib

    from streaming.coordinator import GroupCoordinator
    from streaming.coordinator import coordinator as core

    def stable(group_id: str) -> GroupCoordinator:
        c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
        ids = []
        for i in range(members):
            e = parse_event(
                {
                    "type": "join",
                    "group_id": group_id,
                    "member_id": "",
                    "client_id": f"c{i}",
                    "ts": 1,
                    "protocols": [{"name": "range", "topics": ["orders", "payments"]}],
                }
            )[0]
            ids.append(c.handle(e)[-1]["member_id"])
        for m in ids:
            c.handle(
                parse_event(
                    {
                        "type": "join",
                        "group_id": group_id,
                        "member_id": m,
                        "client_id": "c",
                        "ts": 2,
                        "protocols": [{"name": "range", "topics": ["orders", "payments"]}],
                    }
                )[0]
            )
        c.advance(5_000)
        for m in ids:
            c.handle(
                parse_event(
                    {
                        "type": "sync",
                        "group_id": group_id,
                        "member_id": m,
                        "ts": 5_001,
                        "generation": c.groups[group_id].generation,
                    }
                )[0]
            )
        return c

    sample = [stable(f"group-{i}") for i in range(50)]
    new = [len(c.to_bytes()) for c in sample]
    # The old format: zlib-compressed JSON, members as dicts.
    old = [
        1
        + len(
            zlib.compress(
                json.dumps(
                    {
                        "v": 1,
                        "groups": [dict(core._group_to_dict(g), members=[m.to_dict() for m in g.members.values()])],
                    },
                    separators=(",", ":"),
                ).encode(),
                6,
            )
        )
        for c in sample
        for g in c.groups.values()
    ]
    per_group = sum(new) / len(new)
    started = time.process_time()
    for c in sample:
        type(c).from_bytes(c.to_bytes())
    round_trip = (time.process_time() - started) / len(sample) * 1e6
    payloads = [
        {"v": 1, "groups": [dict(core._group_to_dict(g), members=[m.to_dict() for m in g.members.values()])]}
        for c in sample
        for g in c.groups.values()
    ]
    started = time.process_time()
    for payload in payloads:  # the old format's write and read, for comparison
        data = b"\x01" + zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 6)
        type(sample[0]).from_bytes(data)
    old_round_trip = (time.process_time() - started) / len(payloads) * 1e6
    print(
        f"memory: a stable group of {members} members keeps {per_group:,.0f} bytes of state "
        f"({per_group / members:,.0f} a member; decode + encode {round_trip:,.0f} us a group); {groups:,} such "
        f"groups: {per_group * groups / 2**20:,.1f} MiB in the state store (executors), none on the driver "
        f"(the driver keeps group ids only). Old format (zlib JSON): {sum(old) / len(old):,.0f} bytes a group, "
        f"decode + encode {old_round_trip:,.0f} us"
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--groups", type=int, default=300)
    p.add_argument("--minutes", type=int, default=10)
    p.add_argument("--session-ms", type=int, default=6_000)
    p.add_argument("--feed", default=None, help="a recorded feed (JSON lines); default: recorded once and cached")
    p.add_argument(
        "--sources",
        default="builtin,confluent",
        help="what reads Kafka, comma-separated (builtin: Spark's connector; confluent, kafka-python: the "
        "Python source with that client): the first runs cold, each runs warm and the live and "
        "expiry figures",
    )
    p.add_argument(
        "--broker",
        default="kafka4",
        choices=("kafka4", "bundled"),
        help="Apache Kafka 4 from Maven Central, or the bundled Tansu (Python sources only)",
    )
    p.add_argument("--rate", type=int, default=5_000, help="live feed: events/s")
    p.add_argument("--members", type=int, default=3, help="live feed: members a group (the rate sets the groups)")
    p.add_argument("--live-seconds", type=int, default=60)
    p.add_argument("--only", default="throughput,live,expiry,memory")
    p.add_argument(
        "--state-key",
        default="both",
        choices=("group", "coordinator-partition", "both"),
        help="what the job keys its state by (both: the throughput and live figures once with each)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the benchmark's session (repeatable), e.g. to compare JVM options",
    )
    args = p.parse_args()
    only = set(args.only.split(","))
    if "memory" in only:
        memory()
    if not only - {"memory"}:
        return
    sources = args.sources.split(",")
    if args.broker == "bundled" and "builtin" in sources:
        p.error(
            "Spark's connector cannot read the bundled broker (Tansu) correctly: --broker kafka4, or Python "
            "sources only"
        )
    values = recorded_feed(args.groups, args.minutes, args.feed) if "throughput" in only else []
    if args.broker == "kafka4":
        from streaming.local.apache_kafka_kraft import start_kraft_kafka

        broker = start_kraft_kafka()
    else:
        broker = start_bundled_broker()
    spark = build_spark_session("rebalance-tracker-bench", conf=parse_conf(args.conf))
    state_keys = ("group", "coordinator-partition") if args.state_key == "both" else (args.state_key,)
    figures: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        if "throughput" in only:
            for i, state_key in enumerate(state_keys):
                for run in THROUGHPUT_RUNS:
                    for j, source in enumerate(sources):
                        if run == "cold" and (i > 0 or j > 0):
                            print(
                                f"-- cold run, {source} source, state keyed by {state_key}: skipped, the session "
                                f"is warm now (run with --sources {source} --state-key {state_key} for it)"
                            )
                            continue
                        figures.append(
                            throughput(
                                spark,
                                broker.bootstrap,
                                values,
                                Path(tmp),
                                source,
                                run,
                                state_key,
                                read_rates=i == 0 and run == "cold",
                            )
                        )
            print_summary(figures)
        if "live" in only:
            for state_key in state_keys:
                for source in sources:
                    live_feed(
                        spark,
                        broker.bootstrap,
                        args.rate,
                        args.members,
                        args.live_seconds,
                        args.session_ms,
                        Path(tmp),
                        state_key,
                        source,
                    )
        if "expiry" in only:
            for source in sources:
                expiry_latency(spark, broker.bootstrap, args.session_ms, Path(tmp), source)
    spark.stop()
    broker.stop()


if __name__ == "__main__":
    main()
