"""``rebalance-tracker outputs``: the tracker's outputs topic (or its dead letters) as JSON lines, every output once.

docs/outputs.md, "Reading the topics exactly once": the job writes each micro-batch once, except the batch it was
writing when it died, which the restarted job sends again, whole. Every record carries its batch id and its place in the
batch: headers ``batch_id`` and ``seq``, or, on a broker without record headers (before Kafka 0.11), fields of the same
names in its JSON value. Per partition, in offset order, a record whose ``batch_id`` is the previous record's and whose
``seq`` is not above the previous one's repeats that batch and is dropped. What is left is every output once, in the
order the job wrote it: the JSON-lines file ``report --outputs`` reads (the bookkeeping fields taken out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from streaming.kafka_client import kafka_conf
from streaming.views import terminal

BOOKKEEPING = ("batch_id", "seq")


@dataclass
class ExactlyOnce:
    """The reading rule, one partition at a time; ``counts`` says what it did."""

    last: dict = field(default_factory=dict)  # partition -> (batch_id, seq) of its last record kept
    counts: dict = field(default_factory=lambda: {"kept": 0, "repeated": 0, "unmarked": 0, "not json": 0})

    def take(self, partition: int, value: bytes | None, headers: Iterable[tuple[str, bytes]] = ()) -> dict | None:
        """The output a record carries, or None when it is a repeat (or no JSON object)."""
        try:
            output = json.loads(value) if value is not None else None
        except ValueError:
            output = None
        if not isinstance(output, dict):
            self.counts["not json"] += 1
            return None
        marks = {k: v for k, v in headers or () if k in BOOKKEEPING}
        try:
            if len(marks) == 2:
                mark = (int(marks["batch_id"]), int(marks["seq"]))
            elif all(isinstance(output.get(k), int) for k in BOOKKEEPING):  # a broker without headers
                mark = (output.pop("batch_id"), output.pop("seq"))
            else:
                mark = None
        except ValueError:
            mark = None
        if mark is None:
            self.counts["unmarked"] += 1
        else:
            last = self.last.get(partition)
            if last is not None and mark[0] == last[0] and mark[1] <= last[1]:
                self.counts["repeated"] += 1
                return None
            self.last[partition] = mark
        self.counts["kept"] += 1
        return output


def read_outputs(
    bootstrap: str,
    topic: str,
    client: dict | None = None,
    follow: bool = False,
    poll_ms: int = 500,
    rule: ExactlyOnce | None = None,
) -> Iterator[dict]:
    """Every output of ``topic`` once (the reading rule above), partition by partition in offset order, from the
    beginning to the end (``follow``: for ever)."""
    from kafka import KafkaConsumer, TopicPartition

    from streaming.kafka_client.log_end import log_end_offsets

    rule = rule or ExactlyOnce()
    consumer = KafkaConsumer(
        **kafka_conf.for_client(
            KafkaConsumer, client, bootstrap_servers=bootstrap, client_id="rebalance-tracker-outputs"
        )
        | {"enable_auto_commit": False}
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not tps:
            raise LookupError(f"topic {topic!r} not found on {bootstrap}")
        ends = log_end_offsets(consumer, tps)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while True:
            batches = consumer.poll(timeout_ms=poll_ms)
            for tp in sorted(batches):
                for r in batches[tp]:
                    output = rule.take(tp.partition, r.value, r.headers)
                    if output is not None:
                        yield output
            if not follow and all(consumer.position(tp) >= ends[tp] for tp in tps):
                return
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    from streaming.tracker import TrackerConfig

    p = argparse.ArgumentParser(prog="rebalance-tracker outputs", description=__doc__.splitlines()[0])
    p.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP"),
        help="the tracker's broker (default: $KAFKA_BOOTSTRAP)",
    )
    p.add_argument(
        "--topic",
        default=TrackerConfig.outputs_topic,
        help="the outputs topic (run's --assignments-topic), or the dead letters (<events-topic>.dlq) "
        "(default: %(default)s)",
    )
    p.add_argument("--group", action="append", default=None, help="only this group's outputs (repeat for several)")
    p.add_argument("--out", default="-", help="JSON-lines file to write ('-': stdout, the default)")
    p.add_argument("--follow", action="store_true", help="keep reading new outputs until Ctrl-C")
    kafka_conf.add_arguments(p)
    args = p.parse_args(argv)
    if not args.bootstrap:
        print("outputs: give --bootstrap HOST:PORT or set KAFKA_BOOTSTRAP", file=sys.stderr)
        return 2
    try:
        client = kafka_conf.to_kwargs(kafka_conf.from_args(args))
    except (OSError, ValueError) as exc:
        print(f"outputs: {exc}", file=sys.stderr)
        return 2
    from kafka.errors import KafkaError

    groups = set(args.group) if args.group else None
    rule, written = ExactlyOnce(), 0
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    try:
        with terminal.progress(f"reading {args.topic}", unit="outputs") as task:
            for output in read_outputs(args.bootstrap, args.topic, client, args.follow, rule=rule):
                task.advance()
                if groups is None or output.get("group_id") in groups:
                    out.write(json.dumps(output, separators=(",", ":")) + "\n")
                    written += 1
                    if args.follow:
                        out.flush()
    except LookupError as exc:
        print(f"outputs: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        from streaming.kafka_client.broker_features import unavailable

        print(f"outputs: {unavailable(args.bootstrap, client, exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()
    counts = rule.counts
    notes = [f"{counts['repeated']} records of a batch sent again dropped"]
    if counts["unmarked"]:
        notes.append(f"{counts['unmarked']} records without batch_id/seq kept as they are")
    if counts["not json"]:
        notes.append(f"{counts['not json']} records that are no JSON object skipped")
    where = "stdout" if args.out == "-" else args.out
    print(
        f"wrote {written} outputs of {args.topic} to {where}"
        + (f" (of {counts['kept']}, for {', '.join(sorted(groups))})" if groups else "")
        + f"; {'; '.join(notes)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
