"""``rebalance-tracker run``: the long-running tracker job (also the entry point for ``spark-submit``).

This module only reads the command line and calls the tracker's API (``streaming/tracker.py``), whose classes hold
every default the options show.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from streaming.kafka_client import kafka_conf
from streaming.spark.kafka_source import SOURCES
from streaming.spark.options import STATE_KEYS, TIME_MODES
from streaming.tracker import (
    QueryFailed,
    TopicsMissing,
    TrackerConfig,
    check_checkpoint,
    preflight,
    start_tracker,
    stop_on_signals,
    watch,
)


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default=None, help="Spark master URL (default local[2], or spark-submit's)")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting; repeat for several"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rebalance-tracker run", description="Track consumer-group rebalances from an event topic."
    )
    p.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP, else start the bundled broker)",
    )
    p.add_argument(
        "--events-topic",
        default=TrackerConfig.events_topic,
        help="the topic of protocol events to track (default: %(default)s)",
    )
    p.add_argument(
        "--assignments-topic",
        default=TrackerConfig.outputs_topic,
        help="topic for assignments, rebalances and state changes ('' to disable; default: %(default)s)",
    )
    p.add_argument(
        "--dlq-topic", default=TrackerConfig.dlq_topic, help="dead-letter topic (default: <events-topic>.dlq)"
    )
    p.add_argument(
        "--store",
        default=TrackerConfig.store,
        help="offsets store: sqlite:PATH or kafka:BOOTSTRAP/TOPIC ('' to disable; default: %(default)s)",
    )
    p.add_argument(
        "--checkpoint", default=TrackerConfig.checkpoint, help="Spark's checkpoint directory (default: %(default)s)"
    )
    p.add_argument(
        "--trigger",
        default=TrackerConfig.trigger,
        help="micro-batch interval, e.g. 500ms, 1s, 5s (default: %(default)s)",
    )
    p.add_argument(
        "--time-mode",
        choices=TIME_MODES,
        default=TrackerConfig.time_mode,
        help="processing: timeouts on the wall clock (live feeds); event: on the watermark (replays) "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--watermark-delay",
        default=TrackerConfig.watermark_delay,
        help="event mode: how far behind the newest event time the watermark (and the timers) run "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--timeout-grace-ms",
        type=int,
        default=TrackerConfig.timeout_grace_ms,
        help="processing mode: how far behind the wall clock timers run, so events still in flight "
        "to the job are not expired early (default: %(default)s)",
    )
    p.add_argument(
        "--max-event-ahead",
        type=float,
        default=TrackerConfig.max_event_ahead_ms / 1000,
        metavar="SECONDS",
        help="dead-letter events whose ts is further ahead of their Kafka record's timestamp (a clock "
        "gone wrong, or hostile input, would otherwise expire every member; default: %(default)g)",
    )
    p.add_argument(
        "--kafka-source",
        choices=SOURCES,
        default=TrackerConfig.kafka_source,
        help="python: the bundled Python source with its default client (kafka-python); kafka-python or "
        "confluent: the bundled source reading with that client (confluent also writes the "
        "outputs); builtin: Spark's kafka connector (the outputs are written with confluent-kafka); "
        "auto: builtin where Spark has it, the broker is Kafka 0.10 or later and the connection "
        "plaintext, else python "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--state-key",
        choices=STATE_KEYS,
        default=TrackerConfig.state_key,
        help="what the job keys its state by: each group id, or the group's __consumer_offsets partition "
        "as Kafka shards its coordinators (much faster for thousands of small busy groups; every "
        "micro-batch rewrites the state of each partition it touches). A checkpoint keeps the keying "
        "it started with: to change it, start on a new checkpoint (default: %(default)s)",
    )
    p.add_argument(
        "--starting-offsets",
        default=TrackerConfig.starting_offsets,
        help="where a new checkpoint starts reading the events topic (default: %(default)s)",
    )
    p.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=TrackerConfig.max_offsets_per_trigger,
        help="at most this many events a micro-batch (default: no limit)",
    )
    p.add_argument(
        "--coordinator-conf",
        "--coordinator-config",
        dest="coordinator_conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="coordinator setting with Kafka's name, e.g. group.initial.rebalance.delay.ms=0",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=TrackerConfig.metrics_port,
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0 = a free port)",
    )
    p.add_argument(
        "--lag-sample-s",
        type=float,
        default=TrackerConfig.log_end_sample_s,
        help="sample the groups' log ends every this many seconds, for lag in records and seconds "
        "(docs/lag.md; e.g. 5; default: never)",
    )
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    kafka_conf.add_arguments(p)
    add_spark_arguments(p)
    return p


def parse_trigger(text: str) -> str:
    """'500ms' / '1s' / '2 seconds' -> Spark's interval text."""
    t = text.strip().lower().replace(" ", "")
    for suffix, unit in (("ms", "milliseconds"), ("s", "seconds"), ("m", "minutes")):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).isdigit():
            return f"{t[: -len(suffix)]} {unit}"
    return text


def quiet_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # a broker outage is in the live table, not a log flood
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # py4j reports our own clean shutdown as errors


def quiet_ctrl_c(command, argv: list[str] | None) -> int:
    """Run a command; Ctrl-C before Spark is up (nothing to stop yet) exits 130 without a traceback."""
    try:
        return command(argv)
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    return quiet_ctrl_c(_run, argv)


def _run(argv: list[str] | None) -> int:
    from streaming.kafka_client.broker_features import BrokerUnavailable, has_headers, version_text
    from offsets_store.factory import store_bootstrap
    from streaming.local.broker import kafka_broker
    from streaming.spark.session import build_spark_session, parse_conf

    args = build_parser().parse_args(argv)
    quiet_logging()
    coordinator_conf = parse_conf(args.coordinator_conf)
    try:
        kafka = kafka_conf.from_args(args)
        kafka_conf.to_kwargs(kafka)  # refuse a bad setting before Spark starts
    except (OSError, ValueError) as exc:
        print(f"run: {exc}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
        if not bootstrap:
            bootstrap, _ = stack.enter_context(kafka_broker(prefer="bundled"))
            print(f"started the bundled broker at {bootstrap}", flush=True)
        refused = kafka_conf.refusal([bootstrap, store_bootstrap(args.store)], kafka_conf.to_kwargs(kafka))
        if refused:  # before Spark's start-up: a secured broker that will not take these settings says why
            print(f"run: {refused}", file=sys.stderr)
            return 2
        config = TrackerConfig(
            bootstrap=bootstrap,
            events_topic=args.events_topic,
            outputs_topic=args.assignments_topic or None,
            dlq_topic=args.dlq_topic,
            store=args.store or None,
            checkpoint=args.checkpoint,
            trigger=parse_trigger(args.trigger),
            time_mode=args.time_mode,
            watermark_delay=args.watermark_delay,
            timeout_grace_ms=args.timeout_grace_ms,
            max_event_ahead_ms=int(args.max_event_ahead * 1000),
            state_key=args.state_key,
            kafka_source=args.kafka_source,
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            coordinator=coordinator_conf,
            metrics_port=args.metrics_port,
            log_end_sample_s=args.lag_sample_s or None,
            kafka=kafka,
        )
        try:  # before Spark's start-up, which takes a while
            check_checkpoint(config)
            config.broker_version = preflight(config)
        except (ValueError, BrokerUnavailable, TopicsMissing) as exc:
            print(f"run: {exc}", file=sys.stderr)
            return 2
        if not has_headers(config.broker_version):
            print(
                f"the clients speak Kafka {version_text(config.broker_version)} with {bootstrap}, which has no "
                f"record headers (0.11): the outputs and dead letters carry batch_id and seq in their JSON values",
                flush=True,
            )
        spark = build_spark_session("rebalance-tracker", master=args.master, conf=parse_conf(args.conf))
        stop = stop_on_signals()  # now: PySpark's context has just replaced SIGINT's handler with its own
        tracker = start_tracker(spark, config)
        stack.callback(tracker.stop)
        print(
            f"tracking {config.events_topic} on {bootstrap}; outputs -> {config.outputs_topic}, "
            f"store -> {config.store}; Ctrl-C stops",
            flush=True,
        )
        print(f"reading Kafka with the {tracker.source} source ({tracker.source_reason})", flush=True)
        if tracker.metrics_url:
            print(f"metrics: {tracker.metrics_url}", flush=True)
        try:
            watch(tracker, args.duration, stop=stop)
        except QueryFailed as exc:
            print(f"run: {exc}", file=sys.stderr)
            return 1
        if stop.is_set():
            print("\nstopping…", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
