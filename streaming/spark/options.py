"""The streaming job's settings and their defaults, in one place: ``TrackerConfig`` (``streaming/tracker.py``) and the
``run`` command take theirs from here. Kept apart from ``job.py`` so that reading them does not load pandas and
PySpark (``run --help``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES

# How the stateful stage runs its timers: on the wall clock (live feeds) or on the watermark (deterministic replays).
TIME_MODES = ("processing", "event")

# What the stateful stage keys its state by.
# - "group": one state per group id. A group's timeout is its own, and a quiet group costs nothing a micro-batch.
# - "coordinator-partition": one state per __consumer_offsets partition of the group id (offsets.topic.num.partitions),
#   the way Kafka shards its coordinators. Spark's applyInPandasWithState costs a fixed ~0.5-1 ms per key and
#   micro-batch (an Arrow slice and pandas frames in, a state row out, the state store); thousands of small groups
#   touched every second pay it thousands of times. Keyed by partition they pay it at most 50 times. The price:
#   each micro-batch rewrites the whole state of every partition it touches.
STATE_KEYS = ("group", "coordinator-partition")


@dataclass(frozen=True)
class JobOptions:
    time_mode: str = "processing"  # one of TIME_MODES
    watermark_delay: str = "10 seconds"  # event-time mode: how late an event may arrive
    # Processing-time mode: timers run this far behind the wall clock, because events reach the job some time after
    # they happened; without it a micro-batch that lags would expire members whose heartbeats are still in flight.
    timeout_grace_ms: int = 500
    # An event stamped this far ahead of its Kafka record's timestamp (or of the clock, where that is earlier or the
    # record has none) is dead-lettered: one event from the year 9999 would otherwise move its group's clock (and,
    # in event-time mode, the watermark) and expire every member. See trusted_time.
    max_event_ahead_ms: int = 3_600_000
    coordinator: dict = field(default_factory=dict)  # Kafka-named coordinator settings
    output_types: frozenset[str] | None = DEFAULT_OUTPUT_TYPES  # None keeps every output, responses included
    state_key: str = "group"  # one of STATE_KEYS
    stage_times: Any = None  # a streaming.spark.stage_times accumulator (benchmarks), or None
