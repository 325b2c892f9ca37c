"""Where a micro-batch's time goes: seconds, rows and calls per stage, summed over every task through a Spark
accumulator.

The job's Python functions add to it when ``JobOptions.stage_times`` is set (the benchmark sets it; a normal run
pays nothing). Times are the CPU time of each stage's Python work in its own thread (so a busy machine does not
inflate them), not Spark's plumbing around it (Arrow transfer, shuffle, scheduling, the JVM).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from pyspark.accumulators import AccumulatorParam


class _Sums(AccumulatorParam):
    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        for stage, (seconds, rows, calls) in b.items():
            s, r, c = a.get(stage, (0.0, 0, 0))
            a[stage] = (s + seconds, r + rows, c + calls)
        return a


def stage_times(spark):
    """A fresh accumulator of {stage: (seconds, rows, calls)}; read ``.value`` on the driver. A call is one timed
    block: a group's step in the stateful stage, an Arrow batch in the parse stage, a micro-batch in the sink."""
    return spark.sparkContext.accumulator({}, _Sums())


class Tally:
    """What a timed block counted; set ``rows`` inside the block when it is known only there."""

    def __init__(self, rows: int):
        self.rows = rows


@contextmanager
def timed(accumulator, stage: str, rows: int = 0):
    """Add the block's duration, ``rows`` (or what the block set on the tally) and one call to ``stage`` (a no-op
    without an accumulator)."""
    tally = Tally(rows)
    if accumulator is None:
        yield tally
        return
    started = time.thread_time()
    try:
        yield tally
    finally:
        accumulator.add({stage: (time.thread_time() - started, tally.rows, 1)})
