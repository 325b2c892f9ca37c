"""Play a simulation in real time into a Kafka topic (or a JSON-lines file): ``rebalance-tracker simulate``."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, TextIO

from streaming.kafka_client import kafka_conf
from streaming.views import terminal
from streaming.feeds.simulator import SimulationSettings, Simulator


@dataclass
class PublishStats:
    events: int = 0
    virtual_ms: int = 0


def encode_event(event: dict) -> tuple[bytes, bytes]:
    """(key, value) of a feed record: key = group id, so one group's events stay ordered in one partition."""
    key = (event.get("group_id") or "").encode("utf-8")
    return key, json.dumps(event, separators=(",", ":")).encode("utf-8")


def play(
    simulator: Simulator,
    send: Callable[[dict], None],
    *,
    speed: float = 1.0,
    duration_s: float | None = None,
    stop: threading.Event | None = None,
    tick_s: float = 0.05,
    on_tick: Callable[[PublishStats], None] | None = None,
) -> PublishStats:
    """Run the simulation against the wall clock (``speed`` virtual seconds per real second) and ``send`` each
    event as its virtual time comes. Events carry virtual time, which at speed 1 is the wall clock."""
    stop = stop or threading.Event()
    stats = PublishStats()
    started = time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - started
        if duration_s is not None and elapsed >= duration_s:
            break
        target = simulator.start_ms + int(elapsed * speed * 1000)
        for event in simulator.run_until(target):
            send(event)
            stats.events += 1
        stats.virtual_ms = target - simulator.start_ms
        if on_tick is not None:
            on_tick(stats)
        stop.wait(tick_s)
    return stats


def kafka_sender(bootstrap: str, topic: str, client: dict | None = None):
    """A ``send`` function producing to ``topic`` with kafka-python's default (murmur2) partitioner; ``client``:
    kafka-python settings (see ``streaming.kafka_client.kafka_conf``)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        **kafka_conf.for_client(
            KafkaProducer,
            client,
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=10,
            client_id="rebalance-simulator",
        )
    )

    def send(event: dict) -> None:
        key, value = encode_event(event)
        producer.send(topic, key=key, value=value)

    return send, producer


def file_sender(out: TextIO):
    def send(event: dict) -> None:
        out.write(json.dumps(event, separators=(",", ":")) + "\n")

    return send


def build_parser() -> argparse.ArgumentParser:
    from streaming.tracker import TrackerConfig

    p = argparse.ArgumentParser(
        prog="rebalance-tracker simulate", description="Simulate consumer groups and publish their protocol events."
    )
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP)")
    p.add_argument(
        "--topic", default=TrackerConfig.events_topic, help="the tracker's events topic (default: %(default)s)"
    )
    p.add_argument("--out", default=None, help="write JSON lines to this file instead of Kafka ('-' = stdout)")
    p.add_argument("--groups", type=int, default=3)
    p.add_argument("--members", type=int, default=3, help="initial members per group")
    p.add_argument("--partitions", type=int, default=6, help="partitions per topic")
    p.add_argument(
        "--assignors", default="range,roundrobin,sticky,cooperative-sticky", help="protocols, one per group in turn"
    )
    p.add_argument(
        "--group-protocol",
        choices=("classic", "consumer", "mixed"),
        default="classic",
        help="classic: JoinGroup/SyncGroup; consumer: KIP-848 ConsumerGroupHeartbeat; mixed: every other "
        "group speaks the consumer protocol (default: %(default)s)",
    )
    p.add_argument(
        "--server-assignors",
        default="uniform,range",
        help="consumer-protocol groups: the server-side assignor the members ask for, one per group in turn",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=10_000,
        help="classic groups' session timeout (consumer-protocol groups use the coordinator's, 45 s)",
    )
    p.add_argument("--heartbeat-interval-ms", type=int, default=3_000)
    p.add_argument("--churn-interval-ms", type=int, default=20_000, help="mean time between disruptions per group")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0, help="virtual seconds per real second")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds to run (default: until Ctrl-C; to a file: 60, and the file gets duration x speed "
        "simulated seconds at once)",
    )
    p.add_argument("--start-ms", type=int, default=None, help="virtual start time (default: now)")
    kafka_conf.add_arguments(p)
    return p


def settings_from_args(args) -> SimulationSettings:
    return SimulationSettings(
        groups=args.groups,
        members_per_group=args.members,
        partitions_per_topic=args.partitions,
        assignors=tuple(a.strip() for a in args.assignors.split(",") if a.strip()),
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        churn_interval_ms=args.churn_interval_ms,
        seed=args.seed,
        group_protocol=args.group_protocol,
        server_assignors=tuple(a.strip() for a in args.server_assignors.split(",") if a.strip()),
    )


def main(argv: list[str] | None = None) -> int:
    import os

    args = build_parser().parse_args(argv)
    start = args.start_ms if args.start_ms is not None else int(time.time() * 1000)
    settings = settings_from_args(args)
    simulator = Simulator(settings, start_ms=start)
    if settings.group_protocol != "classic":  # the feed does not carry the broker's settings: say them
        assumed = " ".join(f"{k}={v}" for k, v in settings.broker_settings().items())
        print(
            f"simulate: the consumer-protocol groups assume a broker with {assumed}; replay them with the same "
            "(--coordinator-config KEY=VALUE)",
            file=sys.stderr,
        )
    producer = None
    if args.out:
        out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
        send = file_sender(out)
        if args.duration is None and args.out != "-":
            args.duration = 60.0
    else:
        bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
        if not bootstrap:
            print("simulate: give --bootstrap HOST:PORT (or set KAFKA_BOOTSTRAP), or --out FILE", file=sys.stderr)
            return 2
        try:
            client = kafka_conf.to_kwargs(kafka_conf.from_args(args))
        except (OSError, ValueError) as exc:
            print(f"simulate: {exc}", file=sys.stderr)
            return 2
        refused = kafka_conf.access_error(bootstrap, client)
        if refused:
            print(f"simulate: {refused}", file=sys.stderr)
            return 2
        send, producer = kafka_sender(bootstrap, args.topic, client)
        out = None

    # Progress in simulated seconds, on stderr (stdout may be the feed itself).
    span_s = args.duration * args.speed if args.duration is not None and args.speed > 0 else None
    try:
        with terminal.progress("simulating", total=span_s, unit="simulated s") as task:
            if args.out and args.out != "-" and args.speed > 0 and args.duration is not None:
                # Writing a file needs no wall clock: generate the span as fast as it goes, a simulated minute
                # at a time.
                end, events = start + int(args.duration * args.speed * 1000), 0
                for until in range(start + 60_000, end + 60_000, 60_000):
                    for event in simulator.run_until(min(until, end)):
                        send(event)
                        events += 1
                    task.update(completed=(min(until, end) - start) // 1000, note=f"{events:,} events")
            else:

                def on_tick(stats: PublishStats) -> None:
                    task.update(completed=stats.virtual_ms // 1000, note=f"{stats.events:,} events")

                play(simulator, send, speed=args.speed, duration_s=args.duration, on_tick=on_tick)
    except KeyboardInterrupt:
        pass
    finally:
        if producer is not None:
            producer.flush()
            producer.close()
        if out not in (None, sys.stdout):
            out.close()
    return 0
