"""The tracker's streaming query: Kafka events → validate → per-group coordinator state → outputs.

Only wiring lives here. Validation is ``streaming.coordinator.events.parse_event``, the per-group step is
``streaming.spark.group_step.step_group``; both are pure and tested without Spark.
"""
from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import msgspec
import numpy as np
import pandas as pd

from offsets_store.store import compact
from streaming.coordinator.routing import Configs
from streaming.coordinator.events import parse_event
from streaming.gc_pause import gc_paused
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES, step_group
from streaming.spark.restore import RESTORE_TOPIC, RESTORE_TYPE, decode_restore
from streaming.spark.stage_times import timed

# What the parse stage hands to the stateful stage: per group and Kafka partition, the run of validated events of one
# Arrow batch, or one bad record, as a MessagePack ``[source partition, first offset, events, dead letter]`` (events
# None for a bad record, dead letter None for a run). One row per run, not per event, and as few columns as can be:
# Spark's per-row and per-column work (shuffle, Arrow conversions, the pandas frames applyInPandasWithState builds
# for every group and column) was most of the job's cost. event_time is the run's latest event time, which moves the
# watermark exactly as its events would; events behind the watermark are dropped in the stateful stage instead.
PARSED_SCHEMA = "group_id string, run binary, event_time timestamp"
# One row per coordinator output (and per dead letter). payload is the output record as JSON.
OUTPUT_SCHEMA = "group_id string, type string, ts long, seq int, payload string"
STATE_SCHEMA = "version int, data binary"
STATE_VERSION = 1

# Global topic metadata (no group id) is fanned out to every group by the driver; it travels under this key. Not "":
# the empty group id is a group of its own (Kafka keeps offset commits working for it).
BROADCAST_KEY = None


@dataclass(frozen=True)
class JobOptions:
    time_mode: str = "processing"           # "processing" (live feeds) or "event" (deterministic replays)
    watermark_delay: str = "10 seconds"     # event-time mode: how late an event may arrive
    # Processing-time mode: timers run this far behind the wall clock, because events reach the job some time after
    # they happened; without it a micro-batch that lags would expire members whose heartbeats are still in flight.
    timeout_grace_ms: int = 500
    # An event stamped this far ahead of its Kafka record's timestamp is dead-lettered: one event from the year 9999
    # would otherwise move its group's clock (and, in event-time mode, the watermark) and expire every member.
    max_event_ahead_ms: int = 3_600_000
    coordinator: dict = field(default_factory=dict)  # Kafka-named coordinator settings
    output_types: frozenset[str] | None = DEFAULT_OUTPUT_TYPES  # None keeps every output, responses included
    stage_times: Any = None                 # a streaming.spark.stage_times accumulator (benchmarks), or None


_ENCODER, _DECODER = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
_JSON = msgspec.json.Encoder(order="sorted")


# Functions, not the bound methods: the state function's closure is pickled, and msgspec's coders cannot be.
def _pack(event: dict) -> bytes:
    return _ENCODER.encode(event)


def _unpack(data: bytes) -> dict:
    return _DECODER.decode(data)


def _to_json(output: dict) -> bytes:
    """Canonical JSON (sorted keys, no spaces): what json.dumps(sort_keys=True) wrote, at a tenth of the cost."""
    return _JSON.encode(output)


def parse_rows(batches: Iterator[pd.DataFrame], max_ahead_ms: int = JobOptions.max_event_ahead_ms,
               stage_times=None) -> Iterator[pd.DataFrame]:
    """Validate raw Kafka rows. Bad rows are kept, with their reason, for the dead-letter sink."""
    for pdf in batches:
        with timed(stage_times, "parse/validate", len(pdf)), gc_paused():
            frame = _parse_frame(pdf, max_ahead_ms)
        yield frame


def _parse_frame(pdf: pd.DataFrame, max_ahead_ms: int) -> pd.DataFrame:
    runs: dict[tuple, list] = {}   # (group id, topic, partition) -> [first offset, latest ts, events]
    rows: list[tuple] = []         # (group id, event time or None, run)
    # Record timestamps in epoch ms, for the whole batch at once (a pd.Timestamp per row is slow).
    record_times = pd.to_datetime(pdf["timestamp"], utc=True).dt.as_unit("ms").astype("int64").tolist()
    for key, value, topic, partition, offset, record_ms in zip(
            pdf["key"].tolist(), pdf["value"].tolist(), pdf["topic"].tolist(), pdf["partition"].tolist(),
            pdf["offset"].tolist(), record_times):
        raw = bytes(value) if value is not None else b""
        if topic == RESTORE_TOPIC:   # a group's state rebuilt from the store (streaming/spark/restore.py)
            group_id, event, ts = bytes(key).decode("utf-8"), json.loads(raw), record_ms
        else:
            event, error = parse_event(raw)
            if event is not None and event["ts"] is not None and event["ts"] - record_ms > max_ahead_ms:
                ahead_s = (event["ts"] - record_ms) // 1000
                event, error = None, (f"ts {event['ts']} is {ahead_s} s ahead of its record's timestamp "
                                      f"{record_ms} (the bound is {max_ahead_ms // 1000} s)")
            if event is not None:
                group_id = event["group_id"]
                if event["type"] == "topic_metadata" and not group_id:
                    group_id = BROADCAST_KEY   # the coordinator reads an empty group id here as "every group" too
                if event["ts"] is None:  # live feeds may leave time to the broker's record timestamp
                    event["ts"] = record_ms
                ts = event["ts"]
            else:
                # Keep bad input under the record's key so it is dead-lettered next to its group's events; no event
                # time, so it neither moves the watermark nor is dropped by it.
                group_id = bytes(key).decode("utf-8", "replace") if key is not None else ""
                dead = _dead_letter(group_id, record_ms, error, raw, topic, partition, offset)
                rows.append((group_id, None, _pack([partition, offset, None, dead])))
                continue
        run = runs.get((group_id, topic, partition))
        if run is None:
            runs[(group_id, topic, partition)] = [offset, ts, [event]]
        else:
            run[1] = max(run[1], ts)
            run[2].append(event)
    rows += [(group_id, ts, _pack([partition, first, events, None]))
             for (group_id, topic, partition), (first, ts, events) in runs.items()]
    group_ids, stamps, packed = zip(*rows) if rows else ((), (), ())
    return pd.DataFrame({
        "group_id": np.array(group_ids, dtype=object), "run": np.array(packed, dtype=object),
        "event_time": pd.to_datetime(pd.Series(stamps, dtype="float64"), unit="ms")})


def _dead_letter(group_id, ts: int, reason: str, raw, topic: str, partition: int, offset: int) -> dict:
    return {"type": "dead_letter", "group_id": group_id, "ts": int(ts), "reason": reason,
            "raw_base64": base64.b64encode(bytes(raw) if raw is not None else b"").decode("ascii"),
            "source": {"topic": topic, "partition": int(partition), "offset": int(offset)}}


def _feed_position(run: list) -> tuple[int, int]:
    return run[0], run[1]


def _output_frame(outputs: list[dict], group_id) -> pd.DataFrame:
    # Typed arrays: pandas infers nothing, which makes a group's frame ~5x cheaper than from lists.
    n = len(outputs)
    group_ids = np.empty(n, dtype=object)
    group_ids[:] = [group_id] * n
    return pd.DataFrame({
        "group_id": group_ids,
        "type": np.array([o["type"] for o in outputs], dtype=object),
        "ts": np.fromiter((int(o.get("ts") or 0) for o in outputs), dtype="int64", count=n),
        "seq": np.arange(n, dtype="int32"),
        "payload": np.array([_to_json(o).decode("utf-8") for o in outputs], dtype=object),
    }, copy=False)


def make_state_function(options: JobOptions):
    """Build the ``applyInPandasWithState`` function around :func:`step_group`."""
    config = Configs.from_properties(options.coordinator)   # group.consumer.* keys: the consumer protocol's
    event_time = options.time_mode == "event"

    def on_group(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        with timed(options.stage_times, "stateful") as tally, gc_paused():
            # Feed order (Kafka partition, then offset) is the order the coordinator would have seen the requests in.
            runs = sorted((_unpack(run) for pdf in batches for run in pdf["run"].tolist()), key=_feed_position)
            tally.rows = sum(len(events) if events is not None else 1 for _, _, events, _ in runs)
            frame = step(key[0], runs, state)
        if frame is not None:
            yield frame

    def step(group_id, runs: list[list], state) -> pd.DataFrame | None:
        outputs: list[dict] = []
        events: list[dict] = []
        dead: list[dict] = []
        restored = None
        # Spark's own late-data filter sees a run's latest event time only; the rest is ours (processing time drops
        # nothing).
        behind = state.getCurrentWatermarkMs() if event_time else 0
        for _, _, run_events, dead_letter in runs:
            if dead_letter is not None:   # bad input: a dead letter, next to its group's outputs
                dead.append(dead_letter)
                continue
            for event in run_events:
                if event["type"] == RESTORE_TYPE:
                    restored = decode_restore(event)
                elif event["ts"] < behind:
                    continue
                elif group_id is BROADCAST_KEY:
                    outputs.append({"type": "broadcast_event", "group_id": group_id, "ts": event["ts"],
                                    "event": event})
                else:
                    events.append(event)
        if group_id is not BROADCAST_KEY:
            # A fresh checkpoint's first batch brings the group's state rebuilt from the store.
            previous = state.get[1] if state.exists else restored
            if state.hasTimedOut or events or previous is not None:
                now = state.getCurrentWatermarkMs() if event_time \
                    else state.getCurrentProcessingTimeMs() - options.timeout_grace_ms
                if event_time and now <= 0:
                    now = None  # no watermark yet: only event timestamps move time
                result = step_group(previous, events, now, config, options.output_types)
                # The store is compacted: of the batch's records of one key only the last would survive there.
                outputs.extend(compact(result.outputs))
                if result.state is None:
                    if state.exists:
                        state.remove()
                else:
                    state.update((STATE_VERSION, result.state))
                    if result.next_deadline is not None:
                        if event_time:
                            watermark = state.getCurrentWatermarkMs()
                            state.setTimeoutTimestamp(max(int(result.next_deadline), watermark + 1))
                        else:
                            wait = int(result.next_deadline) + options.timeout_grace_ms \
                                - state.getCurrentProcessingTimeMs()
                            state.setTimeoutDuration(max(1, wait))
        outputs = dead + outputs
        return _output_frame(outputs, group_id) if outputs else None

    return on_group


def build_tracker_stream(raw_stream, options: JobOptions, restore_stream=None):
    """Turn a Kafka-shaped streaming DataFrame (key, value, topic, partition, offset, timestamp, …) into outputs:
    the coordinator's outputs per group, plus one ``dead_letter`` row per invalid input record (under its record's
    key, before that group's other outputs of the batch). ``restore_stream``
    (streaming/spark/restore.py) brings groups rebuilt from the store on a fresh checkpoint."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    columns = ("key", "value", "topic", "partition", "offset", "timestamp")
    raw_stream = raw_stream.select(*columns)
    if restore_stream is not None:
        raw_stream = raw_stream.unionByName(restore_stream.select(*columns))
    # One branch: bad rows go through the stateful stage too, under their record's key, and come out as dead
    # letters there. Their event_time is null, so the watermark neither moves for them nor drops them. (A second
    # branch for them made Spark read and parse every record twice.)
    parsed = raw_stream \
        .mapInPandas(functools.partial(parse_rows, max_ahead_ms=options.max_event_ahead_ms,
                                      stage_times=options.stage_times), PARSED_SCHEMA)
    if options.time_mode == "event":
        parsed = parsed.withWatermark("event_time", options.watermark_delay)
        timeout = GroupStateTimeout.EventTimeTimeout
    elif options.time_mode == "processing":
        # No watermark, so no event time either: every column costs a pandas conversion per group and batch.
        parsed = parsed.select("group_id", "run")
        timeout = GroupStateTimeout.ProcessingTimeTimeout
    else:
        raise ValueError(f"time mode must be 'processing' or 'event', not {options.time_mode!r}")
    return parsed.groupBy("group_id").applyInPandasWithState(
        make_state_function(options), OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout)
