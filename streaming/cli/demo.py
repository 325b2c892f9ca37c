"""``rebalance-tracker demo``: broker + simulated consumer groups + the tracker + a live table, until Ctrl-C.

Everything runs locally: the bundled broker (or ``$KAFKA_BOOTSTRAP``; or, with ``--broker apache-kafka-4``, Apache
Kafka 4 in KRaft mode from Maven jars), a seeded simulation publishing protocol
events in real time, and the Structured Streaming tracker reading them back, with its offsets store and checkpoint
in a fresh directory under ``data/demo-*``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time

from streaming.cli.run import add_spark_arguments, parse_trigger, quiet_ctrl_c, quiet_logging
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.tracker import TrackerConfig, start_tracker, stop_on_signals, watch


def _broker(value: str) -> str:
    if value == "bundled" or (value.startswith("apache-kafka-") and value != "apache-kafka-0.9"):
        return value
    raise argparse.ArgumentTypeError("bundled, apache-kafka-4, apache-kafka-3.9 or apache-kafka-VERSION (3.9 on)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rebalance-tracker demo", description=__doc__.splitlines()[0])
    p.add_argument(
        "--broker",
        type=_broker,
        default="bundled",
        metavar="BROKER",
        help="bundled (the default: Tansu, or $KAFKA_BOOTSTRAP when set); apache-kafka-4 (4.4.0), "
        "apache-kafka-3.9 (3.9.2) or apache-kafka-VERSION: Apache Kafka in KRaft mode on loopback, "
        "its jars fetched from Maven Central with mvn on first use",
    )
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--churn-interval-ms",
        type=int,
        default=15_000,
        help="mean time between disruptions (crash, leave, scale-out, restart, topic growth) per group",
    )
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl-C)")
    p.add_argument("--trigger", default=TrackerConfig.trigger, help="micro-batch interval (default: %(default)s)")
    p.add_argument("--data-dir", default="data", help="where the demo's store and checkpoint go")
    add_spark_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    return quiet_ctrl_c(_demo, argv)


def _demo(argv: list[str] | None) -> int:
    from streaming.local.broker import kafka_broker
    from streaming.feeds.publish import kafka_sender, play
    from streaming.spark.session import build_spark_session, parse_conf

    args = build_parser().parse_args(argv)
    quiet_logging()
    os.makedirs(args.data_dir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="demo-", dir=args.data_dir)
    events_topic = TrackerConfig.events_topic
    with contextlib.ExitStack() as stack:
        print("starting the broker…", flush=True)
        if args.broker == "bundled":
            bootstrap, source = stack.enter_context(kafka_broker(prefer="external"))  # $KAFKA_BOOTSTRAP or bundled
        else:
            from streaming.local.apache_kafka_kraft import start_kraft_kafka

            kafka = start_kraft_kafka(args.broker.removeprefix("apache-kafka-"))
            stack.callback(kafka.stop)
            bootstrap, source = kafka.bootstrap, f"Apache Kafka {kafka.version}"
        print(f"broker: {source} at {bootstrap}", flush=True)
        print("starting Spark (the first start takes a few seconds)…", flush=True)
        spark = build_spark_session("rebalance-tracker-demo", master=args.master, conf=parse_conf(args.conf))
        interrupted = stop_on_signals()  # now: PySpark's context has just replaced SIGINT's handler with its own
        config = TrackerConfig(
            bootstrap=bootstrap,
            events_topic=events_topic,
            store=f"sqlite:{os.path.join(workdir, 'offsets.db')}",
            checkpoint=os.path.join(workdir, "checkpoint"),
            trigger=parse_trigger(args.trigger),
        )
        tracker = start_tracker(spark, config)
        stack.callback(tracker.stop)

        settings = SimulationSettings(
            groups=args.groups, members_per_group=args.members, seed=args.seed, churn_interval_ms=args.churn_interval_ms
        )
        simulator = Simulator(settings, start_ms=int(time.time() * 1000))
        send, producer = kafka_sender(bootstrap, events_topic)
        stop = threading.Event()
        feeder = threading.Thread(
            target=play, args=(simulator, send), kwargs={"stop": stop}, daemon=True, name="simulator"
        )
        feeder.start()
        stack.callback(producer.close)
        stack.callback(feeder.join, 5)
        stack.callback(stop.set)
        print(
            f"simulating {args.groups} groups into '{events_topic}'; store and checkpoint in {workdir}; Ctrl-C stops",
            flush=True,
        )
        watch(tracker, args.duration, stop=interrupted)
        if interrupted.is_set():
            print("\nstopping…", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
