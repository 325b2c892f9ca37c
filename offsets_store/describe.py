"""``rebalance-tracker offsets``: a group's committed offsets and lag, like ``kafka-consumer-groups.sh --describe``;
``--members``: its members with their epochs, like ``--describe --members --verbose``. Classic groups show their
generation as every member's epoch; consumer-protocol (KIP-848) groups show each member's epoch, the target
assignment's epoch and the member's state. Their partitions are named from ConsumerGroupPartitionMetadata when the
store has it (brokers before 4.1 wrote it); otherwise a partition's topic shows as its topic id.

LAG-SECONDS (after kafka-consumer-groups' columns, so theirs keep their places): how old the oldest unconsumed
record is, read from that record itself -- now minus the timestamp of the record at the committed offset
(CreateTime or LogAppendTime, as the topic keeps it) -- where the running tracker interpolates it from log-end
samples (docs/lag.md); 0 when caught up."""

from __future__ import annotations

import argparse
import os
import sys

from streaming.kafka_client import kafka_conf, log_end
from offsets_store.factory import DEFAULT_STORE, open_store, store_bootstrap

HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
    "LAG-SECONDS",
)
LAG_SECONDS_NOTE = "LAG-SECONDS: now - the timestamp of the record at the committed offset (the oldest unconsumed)"
MEMBERS_HEADER = (
    "GROUP",
    "CONSUMER-ID",
    "GROUP-INSTANCE-ID",
    "HOST",
    "CLIENT-ID",
    "#PARTITIONS",
    "EPOCH",
    "TARGET-EPOCH",
    "STATE",
)
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"}


def _consumer_members(state: dict | None) -> list[dict]:
    """A consumer-protocol group's members in the classic member shape describe_rows reads (owned partitions by
    topic name where known)."""
    members = []
    for member_id, m in sorted(((state or {}).get("members") or {}).items()):
        meta, current = m["metadata"] or {}, m["current_assignment"] or {}
        partitions = [
            (state["topic_names"].get(tp["topicId"], tp["topicId"]), p)
            for tp in current.get("assignedPartitions", [])
            for p in tp["partitions"]
        ]
        members.append(
            {
                "member_id": member_id,
                "group_instance_id": meta.get("instanceId"),
                "client_host": meta.get("clientHost", "-"),
                "client_id": meta.get("clientId", "-"),
                "assignment": {"partitions": partitions},
                "epoch": current.get("memberEpoch"),
                "target_epoch": state["assignment_epoch"],
                "state": MEMBER_STATES.get(current.get("state"), current.get("state")),
            }
        )
    return members


def _members(store, group_id: str) -> list[dict]:
    metadata = store.group(group_id)
    members = [dict(m, epoch=metadata["generation"]) for m in (metadata or {}).get("members", [])]
    return members + _consumer_members(store.consumer_group(group_id))


def member_rows(store, group_id: str) -> list[tuple]:
    return [
        (
            group_id,
            m["member_id"],
            _dash(m.get("group_instance_id")),
            m["client_host"],
            m["client_id"],
            len(m["assignment"]["partitions"]),
            _dash(m.get("epoch")),
            _dash(m.get("target_epoch")),
            _dash(m.get("state")),
        )
        for m in _members(store, group_id)
    ]


def describe_rows(
    store,
    group_id: str,
    log_end: dict[tuple[str, int], int] | None = None,
    ages: dict[tuple[str, int], float] | None = None,
) -> list[tuple]:
    """``ages``: per partition, the seconds since its oldest unconsumed record was written (``record_ages``)."""
    owners = {}
    for m in _members(store, group_id):
        for topic, partition in (m.get("assignment") or {}).get("partitions", []):
            owners[(topic, partition)] = m
    committed = {(r["topic"], r["partition"]): r["offset"] for r in store.offsets(group_id)}
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        current = committed.get(tp)
        end = (log_end or {}).get(tp)
        lag = max(end - current, 0) if end is not None and current is not None else None
        age = 0.0 if lag == 0 else (ages or {}).get(tp)
        m = owners.get(tp)
        rows.append(
            (
                group_id,
                tp[0],
                tp[1],
                _dash(current),
                _dash(end),
                _dash(lag),
                m["member_id"] if m else "-",
                m["client_host"] if m else "-",
                m["client_id"] if m else "-",
                "-" if age is None else f"{age:.1f}",
            )
        )
    return rows


def _dash(v) -> str:
    return "-" if v is None else str(v)


def log_end_offsets(
    bootstrap: str, partitions: list[tuple[str, int]], timeout_ms: int = 3_000, client: dict | None = None
) -> dict[tuple[str, int], int]:
    """End offsets from the broker; empty when it cannot be reached within ``timeout_ms`` (the table shows '-')."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(
            **kafka_conf.for_client(
                KafkaConsumer,
                client,
                bootstrap_servers=bootstrap,
                request_timeout_ms=5_000,
                bootstrap_timeout_ms=timeout_ms,
                client_id="rebalance-tracker-describe",
            )
        )
    except KafkaError:  # no broker: the committed offsets are still worth showing
        return {}
    try:
        known = consumer.topics()
        tps = [TopicPartition(t, p) for t, p in partitions if t in known]
        return {(tp.topic, tp.partition): o for tp, o in log_end.log_end_offsets(consumer, tps).items()}
    except KafkaError:
        return {}
    finally:
        consumer.close()


def record_ages(
    bootstrap: str,
    committed: dict[tuple[str, int], int],
    timeout_ms: int = 3_000,
    client: dict | None = None,
    now_ms: int | None = None,
) -> dict[tuple[str, int], float]:
    """Seconds since the record at each committed offset was written (its timestamp), for partitions with lag; a
    partition whose record does not come within ``timeout_ms`` (or that retention removed: the oldest kept record
    is read instead) is left out or answered from what came."""
    import time

    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    if not committed:
        return {}
    try:
        consumer = KafkaConsumer(
            **kafka_conf.for_client(
                KafkaConsumer,
                client,
                bootstrap_servers=bootstrap,
                request_timeout_ms=5_000,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_poll_records=500,
                bootstrap_timeout_ms=timeout_ms,
                client_id="rebalance-tracker-describe",
            )
        )
    except KafkaError:
        return {}
    try:
        tps = {TopicPartition(t, p): o for (t, p), o in committed.items()}
        consumer.assign(list(tps))
        for tp, offset in tps.items():
            consumer.seek(tp, offset)
        stamps: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout_ms / 1000
        while len(stamps) < len(tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=100).items():
                if records and (tp.topic, tp.partition) not in stamps:
                    stamps[(tp.topic, tp.partition)] = records[0].timestamp
                    consumer.pause(tp)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return {tp: max(now - ts, 0) / 1000 for tp, ts in stamps.items() if ts is not None and ts >= 0}
    except KafkaError:
        return {}
    finally:
        consumer.close()


def default_bootstrap(store_url: str) -> str | None:
    """$KAFKA_BOOTSTRAP, else the broker of a ``kafka:`` store: the data topics usually live on the same cluster."""
    return os.environ.get("KAFKA_BOOTSTRAP") or store_bootstrap(store_url)


def format_table(rows: list[tuple], header: tuple = HEADER) -> str:
    cells = [header] + [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rebalance-tracker offsets", description=__doc__)
    p.add_argument("--group", action="append", default=None, help="group id (repeat; default: every group)")
    p.add_argument("--store", default=DEFAULT_STORE, help="sqlite:PATH or kafka:BOOTSTRAP/TOPIC (default: %(default)s)")
    p.add_argument(
        "--bootstrap",
        default=None,
        help="broker for log-end offsets and lag (default: $KAFKA_BOOTSTRAP, else a kafka: store's "
        "broker; '' or unreachable: LOG-END-OFFSET and LAG show '-')",
    )
    p.add_argument("--members", action="store_true", help="list the members with their epochs instead of offsets")
    kafka_conf.add_arguments(p)
    args = p.parse_args(argv)
    try:
        client = kafka_conf.to_kwargs(kafka_conf.from_args(args))
    except (OSError, ValueError) as exc:
        print(f"offsets: {exc}", file=sys.stderr)
        return 2
    if args.bootstrap is None:
        args.bootstrap = default_bootstrap(args.store)
    refused = kafka_conf.refusal([store_bootstrap(args.store), args.bootstrap], client)
    if refused:
        print(f"offsets: {refused}", file=sys.stderr)
        return 2
    store = open_store(args.store, client)
    if args.members:
        try:
            rows = [row for g in args.group or store.groups() for row in member_rows(store, g)]
        finally:
            store.close()
        if not rows:
            print(f"no members for {', '.join(args.group or ['any group'])} in {args.store}", file=sys.stderr)
            return 1
        print(format_table(rows, MEMBERS_HEADER))
        return 0
    try:
        groups = args.group or store.groups()
        rows = [row for g in groups for row in describe_rows(store, g)]
        if args.bootstrap and rows:
            ends = log_end_offsets(args.bootstrap, [(r[1], r[2]) for r in rows], client=client)
            behind = {(r[1], r[2]): int(r[3]) for r in rows if r[3] != "-" and ends.get((r[1], r[2]), 0) > int(r[3])}
            ages = record_ages(args.bootstrap, behind, client=client)
            rows = [row for g in groups for row in describe_rows(store, g, ends, ages)]
            print(LAG_SECONDS_NOTE, file=sys.stderr)
    finally:
        store.close()
    if not rows:
        print(
            f"no committed offsets or members for {', '.join(args.group or ['any group'])} in {args.store}",
            file=sys.stderr,
        )
        return 1
    print(format_table(rows))
    return 0
