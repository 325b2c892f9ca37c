"""The tracker's streaming query: Kafka events → validate → per-group coordinator state → outputs.

Only wiring lives here. Validation is ``streaming.coordinator.events.parse_event``, the per-group step is
``streaming.spark.group_step.step_group``; both are pure and tested without Spark.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import Iterator

import msgspec
import numpy as np
import pandas as pd

from offsets_store.partitioning import partition_for
from offsets_store.store import compact
from streaming.coordinator.routing import Configs
from streaming.coordinator.events import parse_event
from streaming.dead_letters import dead_letter, step_failure_letters
from streaming.gc_pause import gc_paused
from streaming.spark.group_step import StepResult, step_group
from streaming.spark.memory_probe import probe
from streaming.spark.options import STATE_KEYS, JobOptions
from streaming.spark.restore import RESTORE_TOPIC, RESTORE_TYPE, decode_restore
from streaming.spark.stage_times import timed

# What the parse stage hands to the stateful stage: per group and Kafka partition, the run of validated events of one
# Arrow batch, or one bad record, as a MessagePack ``Run``. One row per run, not per event, and as few columns as
# can be: Spark's per-row and per-column work (shuffle, Arrow conversions, the pandas frames applyInPandasWithState
# builds for every group and column) was most of the job's cost. event_time is the run's latest event time, which
# moves the watermark exactly as its events would; events behind the watermark are dropped in the stateful stage
# instead.
PARSED_SCHEMA = "group_id string, run binary, event_time timestamp"
# The same, keyed by the group's __consumer_offsets partition (STATE_KEYS); a run names its group inside.
PARTITION_KEYED_SCHEMA = "coordinator_partition int, run binary, event_time timestamp"
# One row per coordinator output (and per dead letter). payload is the output record as JSON.
OUTPUT_SCHEMA = "group_id string, type string, ts long, seq int, payload string"
STATE_SCHEMA = "version int, data binary"
STATE_VERSION = 1  # data: one group's coordinator state
PARTITION_STATE_VERSION = 2  # data: a partition's groups, MessagePack {group id: [state, next deadline or None]}

# Global topic metadata (no group id) is fanned out to every group by the driver; it travels under this key. Not "":
# the empty group id is a group of its own (Kafka keeps offset commits working for it).
BROADCAST_KEY = None


class Run(msgspec.Struct, array_like=True):
    """A group's validated events from one Kafka partition of one Arrow batch, in offset order, or one bad record."""

    topic: str
    partition: int
    first_offset: int
    group_id: str | None
    events: list[dict] | None = None  # None for a bad record
    offsets: list[int] = []  # each event's offset (a group's records need not be adjacent)
    dead_letter: dict | None = None  # the bad record's dead letter


_ENCODER, _DECODER = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
_RUN_DECODER = msgspec.msgpack.Decoder(Run)
_JSON = msgspec.json.Encoder(order="sorted")


# Functions, not the bound methods: the state function's closure is pickled, and msgspec's coders cannot be.
def _pack(event: dict) -> bytes:
    return _ENCODER.encode(event)


def _unpack(data: bytes) -> dict:
    return _DECODER.decode(data)


def _unpack_run(data: bytes) -> Run:
    return _RUN_DECODER.decode(data)


def _to_json(output: dict) -> bytes:
    """Canonical JSON (sorted keys, no spaces): what json.dumps(sort_keys=True) wrote, at a tenth of the cost."""
    return _JSON.encode(output)


def parse_rows(
    batches: Iterator[pd.DataFrame],
    max_ahead_ms: int = JobOptions.max_event_ahead_ms,
    stage_times=None,
    coordinator_partitions: int | None = None,
) -> Iterator[pd.DataFrame]:
    """Validate raw Kafka rows. Bad rows are kept, with their reason, for the dead-letter sink. With
    ``coordinator_partitions``, rows are keyed by the group's __consumer_offsets partition (PARTITION_KEYED_SCHEMA)."""
    for pdf in batches:
        probe("parse")
        with timed(stage_times, "parse/validate", len(pdf)), gc_paused():
            frame = _parse_frame(pdf, max_ahead_ms)
            if coordinator_partitions is not None:
                frame = _keyed_by_partition(frame, coordinator_partitions)
        yield frame


@functools.lru_cache(maxsize=65_536)
def _coordinator_partition(group_id: str | None, partitions: int) -> int:
    return -1 if group_id is BROADCAST_KEY else partition_for(group_id, partitions)


def _keyed_by_partition(frame: pd.DataFrame, partitions: int) -> pd.DataFrame:
    keys = np.fromiter(
        (_coordinator_partition(g, partitions) for g in frame["group_id"].tolist()), dtype="int32", count=len(frame)
    )
    return pd.DataFrame({"coordinator_partition": keys, "run": frame["run"], "event_time": frame["event_time"]})


def record_times_ms(column: pd.Series) -> list[int]:
    """A frame's ``timestamp_ms`` column (the record timestamps as epoch ms, taken in the JVM: pandas cannot hold
    every timestamp Kafka can, 9999-12-31 included) as ints, -1 where the record has none (null, -1 from brokers
    before 0.10, or a time Spark could not hold)."""
    return column.fillna(-1).astype("int64").tolist()


def trusted_time(event: dict, record_ms: int, now_ms: int, max_ahead_ms: int) -> tuple[int | None, str | None]:
    """The time an event happened: its ``ts``, else its Kafka record's timestamp; (None, reason) when there is none
    to trust. Either may be wrong (a clock gone wrong, or an attempt to move the watermark): a time further than
    ``max_ahead_ms`` ahead of its record's timestamp, or of the clock where that is earlier or missing, would move
    its group's clock (and the watermark) and expire every member."""
    has_record_time = record_ms >= 0
    bound = min(record_ms, now_ms) if has_record_time else now_ms
    if event["ts"] is None:
        if not has_record_time:
            return None, (
                "no time: the event has no ts and its record no timestamp (brokers before 0.10 keep "
                "none); give the event a ts"
            )
        if record_ms - now_ms > max_ahead_ms:
            return None, (
                f"no trustworthy time: the event has no ts and its record's timestamp {record_ms} is "
                f"{(record_ms - now_ms) // 1000} s ahead of the clock (the bound is "
                f"{max_ahead_ms // 1000} s)"
            )
        return record_ms, None
    if event["ts"] - bound > max_ahead_ms:
        against = (
            f"its record's timestamp {record_ms}"
            if bound == record_ms
            else f"the clock ({now_ms}; its record's timestamp is {record_ms})"
        )
        return None, (
            f"ts {event['ts']} is {(event['ts'] - bound) // 1000} s ahead of {against} (the bound is "
            f"{max_ahead_ms // 1000} s)"
        )
    return event["ts"], None


def _parse_frame(pdf: pd.DataFrame, max_ahead_ms: int) -> pd.DataFrame:
    runs: dict[tuple, tuple[Run, list]] = {}  # (group id, topic, partition) -> (its run, [latest ts])
    rows: list[tuple] = []  # (group id, event time or None, run)
    now_ms = int(time.time() * 1000)
    for key, value, topic, partition, offset, record_ms in zip(
        pdf["key"].tolist(),
        pdf["value"].tolist(),
        pdf["topic"].tolist(),
        pdf["partition"].tolist(),
        pdf["offset"].tolist(),
        record_times_ms(pdf["timestamp_ms"]),
    ):
        raw = bytes(value) if value is not None else None  # a null value: "empty record value"
        if topic == RESTORE_TOPIC:  # a group's state rebuilt from the store (streaming/spark/restore.py)
            group_id, event, ts = bytes(key).decode("utf-8"), json.loads(raw), record_ms
        else:
            event, error = parse_event(raw)
            if event is not None:
                event["ts"], error = trusted_time(event, record_ms, now_ms, max_ahead_ms)
                if error is not None:
                    event = None
            if event is not None:
                group_id = event["group_id"]
                if event["type"] == "topic_metadata" and not group_id:
                    group_id = BROADCAST_KEY  # the coordinator reads an empty group id here as "every group" too
                ts = event["ts"]
            else:
                # Keep bad input under the record's key so it is dead-lettered next to its group's events; no event
                # time, so it neither moves the watermark nor is dropped by it.
                group_id = bytes(key).decode("utf-8", "replace") if key is not None else ""
                dead = dead_letter(group_id, record_ms, error, raw, topic, partition, offset)
                rows.append((group_id, None, _pack(Run(topic, partition, offset, group_id, dead_letter=dead))))
                continue
        entry = runs.get((group_id, topic, partition))
        if entry is None:
            runs[(group_id, topic, partition)] = (Run(topic, partition, offset, group_id, [event], [offset]), [ts])
        else:
            entry[1][0] = max(entry[1][0], ts)
            entry[0].events.append(event)
            entry[0].offsets.append(offset)
    rows += [(run.group_id, latest, _pack(run)) for run, (latest,) in runs.values()]
    group_ids, stamps, packed = zip(*rows) if rows else ((), (), ())
    return pd.DataFrame(
        {
            "group_id": np.array(group_ids, dtype=object),
            "run": np.array(packed, dtype=object),
            "event_time": pd.to_datetime(pd.Series(stamps, dtype="float64"), unit="ms"),
        }
    )


def _feed_position(run: Run) -> tuple[int, int]:
    return run.partition, run.first_offset


def _row(output: dict) -> tuple[str, int, str]:
    """An output as its OUTPUT_SCHEMA columns (type, ts, payload)."""
    return output["type"], int(output.get("ts") or 0), _to_json(output).decode("utf-8")


def _output_frame(rows: list[tuple[str, int, str]], group_ids: list) -> pd.DataFrame:
    # Typed arrays: pandas infers nothing, which makes a group's frame ~5x cheaper than from lists.
    n = len(rows)
    ids = np.empty(n, dtype=object)
    ids[:] = group_ids
    return pd.DataFrame(
        {
            "group_id": ids,
            "type": np.array([r[0] for r in rows], dtype=object),
            "ts": np.fromiter((r[1] for r in rows), dtype="int64", count=n),
            "seq": np.arange(n, dtype="int32"),
            "payload": np.array([r[2] for r in rows], dtype=object),
        },
        copy=False,
    )


@dataclass
class _Clock:
    """A micro-batch's time, as one key's call sees it."""

    now: int | None  # what timers fire up to (None: event time with no watermark yet)
    behind: int  # events stamped before this are late (event time) and dropped


def make_state_function(options: JobOptions):
    """Build the ``applyInPandasWithState`` function around :func:`step_group`, for ``options.state_key``."""
    config = Configs.from_properties(options.coordinator)  # group.consumer.* keys: the consumer protocol's
    event_time = options.time_mode == "event"
    if options.state_key not in STATE_KEYS:
        raise ValueError(f"state key must be one of {STATE_KEYS}, not {options.state_key!r}")
    by_partition = options.state_key == "coordinator-partition"

    def on_key(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        probe("stateful")
        with timed(options.stage_times, "stateful") as tally, gc_paused():
            # Feed order (Kafka partition, then offset) is the order the coordinator would have seen the requests in.
            runs = sorted((_unpack_run(run) for pdf in batches for run in pdf["run"].tolist()), key=_feed_position)
            tally.rows = sum(len(r.events) if r.events is not None else 1 for r in runs)
            clock = clock_of(state)
            frame = step_partition(runs, state, clock) if by_partition else step(key[0], runs, state, clock)
        if frame is not None:
            yield frame

    def clock_of(state) -> _Clock:
        if event_time:
            watermark = state.getCurrentWatermarkMs()
            return _Clock(watermark if watermark > 0 else None, watermark)  # no watermark yet: only events move time
        return _Clock(state.getCurrentProcessingTimeMs() - options.timeout_grace_ms, 0)

    def set_timeout(state, deadline: int) -> None:
        if event_time:
            state.setTimeoutTimestamp(max(int(deadline), state.getCurrentWatermarkMs() + 1))
        else:
            wait = int(deadline) + options.timeout_grace_ms - state.getCurrentProcessingTimeMs()
            state.setTimeoutDuration(max(1, wait))

    def step(group_id, runs: list[Run], state, clock: _Clock) -> pd.DataFrame | None:
        previous = state.get[1] if state.exists else None
        outputs, result = step_one(group_id, runs, previous, state.hasTimedOut, clock)
        if result is not None:
            if result.state is None:
                if state.exists:
                    state.remove()
            else:
                state.update((STATE_VERSION, result.state))
                if result.next_deadline is not None:
                    set_timeout(state, result.next_deadline)
        return _output_frame(outputs, [group_id] * len(outputs)) if outputs else None

    def step_partition(runs: list[Run], state, clock: _Clock) -> pd.DataFrame | None:
        """Every group of one __consumer_offsets partition: those with input, and those whose timers are due."""
        groups: dict = {}  # group id -> its runs, in feed order
        for run in runs:
            groups.setdefault(run.group_id, []).append(run)
        held: dict[str, list] = _unpack(state.get[1]) if state.exists else {}  # group id -> [state, deadline]
        if clock.now is not None:
            for group_id, (_, deadline) in held.items():
                if deadline is not None and deadline <= clock.now and group_id not in groups:
                    groups[group_id] = []
        outputs: list[dict] = []
        group_ids: list = []
        for group_id, group_runs in groups.items():
            previous, deadline = held.get(group_id, (None, None)) if group_id is not BROADCAST_KEY else (None, None)
            due = deadline is not None and clock.now is not None and deadline <= clock.now
            group_outputs, result = step_one(group_id, group_runs, previous, due, clock)
            if result is not None:
                if result.state is None:
                    held.pop(group_id, None)
                else:
                    held[group_id] = [result.state, result.next_deadline]
            outputs += group_outputs
            group_ids += [group_id] * len(group_outputs)
        if held:
            state.update((PARTITION_STATE_VERSION, _pack(held)))
            deadlines = [d for _, d in held.values() if d is not None]
            if deadlines:
                set_timeout(state, min(deadlines))
        elif state.exists:
            state.remove()
        return _output_frame(outputs, group_ids) if outputs else None

    def step_one(
        group_id, runs: list[Run], previous: bytes | None, timed_out: bool, clock: _Clock
    ) -> tuple[list[dict], StepResult | None]:
        """One group's runs and timers: (its outputs, dead letters first; its step, None if it was not stepped).

        Nothing a group brings may stop the query: if its step raises, its events become dead letters naming the
        exception (``step_failure_letters``) and it keeps its previous state."""
        dead = [run.dead_letter for run in runs if run.dead_letter is not None]  # bad input, next to its outputs
        try:
            outputs, result = step_events(group_id, runs, previous, timed_out, clock)
            return [_row(o) for o in dead + outputs], result  # JSON here: an output that cannot be written fails
        except Exception as error:  # noqa: BLE001 - the containment itself
            ts = (
                clock.now
                if clock.now is not None
                else max((e["ts"] for r in runs if r.events for e in r.events), default=0)
            )
            kept = None if previous is None else StepResult(previous, [], None)
            events = [
                (event, run.topic, run.partition, offset)
                for run in runs
                if run.events
                for event, offset in zip(run.events, run.offsets)
            ]
            return [_row(o) for o in dead + step_failure_letters(group_id, events, error, ts)], kept

    def step_events(
        group_id, runs: list[Run], previous: bytes | None, timed_out: bool, clock: _Clock
    ) -> tuple[list[dict], StepResult | None]:
        outputs: list[dict] = []
        events: list[dict] = []
        restored = None
        # Spark's own late-data filter sees a run's latest event time only; the rest is ours (processing time drops
        # nothing).
        for run in runs:
            if run.events is None:
                continue
            for event in run.events:
                if event["type"] == RESTORE_TYPE:
                    restored = decode_restore(event)
                elif event["ts"] < clock.behind:
                    continue
                elif group_id is BROADCAST_KEY:
                    outputs.append({"type": "broadcast_event", "group_id": group_id, "ts": event["ts"], "event": event})
                else:
                    events.append(event)
        result = None
        if group_id is not BROADCAST_KEY:
            # A fresh checkpoint's first batch brings the group's state rebuilt from the store.
            previous = previous if previous is not None else restored
            if timed_out or events or previous is not None:
                result = step_group(previous, events, clock.now, config, options.output_types)
                # The store is compacted: of the batch's records of one key only the last would survive there.
                outputs.extend(compact(result.outputs))
        return outputs, result

    return on_key


def build_tracker_stream(raw_stream, options: JobOptions, restore_stream=None):
    """Turn a Kafka-shaped streaming DataFrame (key, value, topic, partition, offset, timestamp, …) into outputs:
    the coordinator's outputs per group, plus one ``dead_letter`` row per invalid input record (under its record's
    key, before that group's other outputs of the batch). ``restore_stream``
    (streaming/spark/restore.py) brings groups rebuilt from the store on a fresh checkpoint."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from pyspark.sql import functions as F

    columns = ("key", "value", "topic", "partition", "offset", "timestamp")
    raw_stream = raw_stream.select(*columns)
    if restore_stream is not None:
        raw_stream = raw_stream.unionByName(restore_stream.select(*columns))
    # Record timestamps leave the JVM as epoch ms: Arrow's conversion to pandas (nanoseconds) fails the whole query
    # on a timestamp past 2262, which Kafka allows (a producer's CreateTime of 9999-12-31).
    raw_stream = raw_stream.select(*columns[:-1], F.unix_millis("timestamp").alias("timestamp_ms"))
    # One branch: bad rows go through the stateful stage too, under their record's key, and come out as dead
    # letters there. Their event_time is null, so the watermark neither moves for them nor drops them. (A second
    # branch for them made Spark read and parse every record twice.)
    function = make_state_function(options)  # refuses an unknown state key
    by_partition = options.state_key == "coordinator-partition"
    partitions = Configs.from_properties(options.coordinator).classic.offsets_topic_num_partitions
    key = "coordinator_partition" if by_partition else "group_id"
    parsed = raw_stream.mapInPandas(
        functools.partial(
            parse_rows,
            max_ahead_ms=options.max_event_ahead_ms,
            stage_times=options.stage_times,
            coordinator_partitions=partitions if by_partition else None,
        ),
        PARTITION_KEYED_SCHEMA if by_partition else PARSED_SCHEMA,
    )
    if options.time_mode == "event":
        parsed = parsed.withWatermark("event_time", options.watermark_delay)
        timeout = GroupStateTimeout.EventTimeTimeout
    elif options.time_mode == "processing":
        # No watermark, so no event time either: every column costs a pandas conversion per group and batch.
        parsed = parsed.select(key, "run")
        timeout = GroupStateTimeout.ProcessingTimeTimeout
    else:
        raise ValueError(f"time mode must be 'processing' or 'event', not {options.time_mode!r}")
    return parsed.groupBy(key).applyInPandasWithState(function, OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout)
