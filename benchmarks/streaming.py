"""End-to-end figures of the tracker on local Spark with the bundled broker.

    python benchmarks/streaming.py [--groups 300] [--minutes 10] [--session-ms 6000]

1. Throughput: a recorded simulator feed is produced to the events topic first, then the tracker (event-time mode)
   processes all of it; prints events/s and micro-batch duration percentiles. Target: >= 20k events/s.
2. Expiry latency: a live group (processing-time mode, 1 s trigger) whose only member stops heartbeating; prints the
   time from its last heartbeat to the tracker emitting member_expired. Target: <= session + trigger + 1 s.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streaming.views import terminal  # noqa: E402
from streaming.local.broker import start_bundled_broker  # noqa: E402
from streaming.feeds.publish import encode_event  # noqa: E402
from streaming.feeds.simulator import SimulationSettings, Simulator  # noqa: E402
from streaming.views.live_view import LiveView  # noqa: E402
from streaming.cli.run import TrackerConfig, ensure_topics, start_tracker  # noqa: E402
from streaming.spark.session import build_spark_session  # noqa: E402

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


def throughput(spark, bootstrap: str, groups: int, minutes: int, workdir: Path) -> None:
    start = 1_700_000_000_000
    feed = Simulator(SimulationSettings(groups=groups, seed=1), start_ms=start).run_until(start + minutes * 60_000)
    ensure_topics(bootstrap, {"bench-events": 4})
    n = produce(bootstrap, "bench-events", (encode_event(e) for e in feed))
    config = TrackerConfig(bootstrap=bootstrap, events_topic="bench-events", outputs_topic="bench-outputs",
                           store=f"sqlite:{workdir / 'offsets.db'}", checkpoint=str(workdir / "cp-throughput"),
                           trigger="500 milliseconds", time_mode="event", watermark_delay="30 seconds")
    started = time.perf_counter()
    tracker = start_tracker(spark, config, LiveView(out=io.StringIO(), redraw=False))
    try:
        tracker.query.processAllAvailable()
        elapsed = time.perf_counter() - started
        batches = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in tracker.query.recentProgress
                   if p.get("numInputRows")]
    finally:
        tracker.stop()
    rate = n / elapsed
    print(f"throughput: {n:,} events ({groups} groups, {minutes} simulated min) in {elapsed:.1f} s = "
          f"{rate:,.0f} events/s ({rate / TARGET_EVENTS_PER_S:.2f}x the {TARGET_EVENTS_PER_S:,}/s target), "
          f"startup included")
    if batches:
        print(f"micro-batches with input: {len(batches)}; duration p50 {percentile(batches, 0.5):.2f} s, "
              f"p90 {percentile(batches, 0.9):.2f} s, max {max(batches):.2f} s")


def expiry_latency(spark, bootstrap: str, session_ms: int, workdir: Path) -> None:
    from kafka import KafkaProducer

    ensure_topics(bootstrap, {"bench-live": 1})
    expired_at: dict[str, float] = {}

    class Watch(LiveView):
        def update(self, batch_id, outputs):
            for o in outputs:
                if o["type"] == "member_expired":
                    expired_at.setdefault(o["member_id"], time.time())
            super().update(batch_id, outputs)

    config = TrackerConfig(bootstrap=bootstrap, events_topic="bench-live", outputs_topic=None,
                           store=None, checkpoint=str(workdir / "cp-live"), trigger="1 second",
                           time_mode="processing", starting_offsets="latest",
                           coordinator={"group.initial.rebalance.delay.ms": 0,
                                        "group.min.session.timeout.ms": min(6_000, session_ms)})
    tracker = start_tracker(spark, config, Watch(out=io.StringIO(), redraw=False))
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        time.sleep(3)  # let the query start at the current end of the topic
        simulator = Simulator(SimulationSettings(groups=1, members_per_group=1, churn_interval_ms=10**9,
                                                 session_timeout_ms=session_ms, heartbeat_interval_ms=1_000,
                                                 static_fraction=0.0), start_ms=int(time.time() * 1000))
        stop = threading.Event()
        last_sent = {"t": 0.0}

        def play():
            while not stop.is_set():
                for event in simulator.run_until(int(time.time() * 1000)):
                    producer.send("bench-live", key=event["group_id"].encode(), value=json.dumps(event).encode())
                    last_sent["t"] = time.time()
                producer.flush()
                stop.wait(0.05)

        feeder = threading.Thread(target=play, daemon=True)
        feeder.start()
        time.sleep(8)          # joined, synced, heartbeating
        stop.set()             # the member goes silent: no more heartbeats
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
    print(f"expiry latency: {latency:.2f} s from the last heartbeat to member_expired "
          f"(session {session_ms / 1000:.0f} s, trigger 1 s; bound {bound:.0f} s -> "
          f"{'within' if latency <= bound else 'OVER'} the target)")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--groups", type=int, default=300)
    p.add_argument("--minutes", type=int, default=10)
    p.add_argument("--session-ms", type=int, default=6_000)
    args = p.parse_args()
    broker = start_bundled_broker()
    spark = build_spark_session("rebalance-tracker-bench")
    with tempfile.TemporaryDirectory() as tmp:
        throughput(spark, broker.bootstrap, args.groups, args.minutes, Path(tmp))
        expiry_latency(spark, broker.bootstrap, args.session_ms, Path(tmp))
    spark.stop()
    broker.stop()


if __name__ == "__main__":
    main()
