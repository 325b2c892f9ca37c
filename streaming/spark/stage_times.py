"""Where a micro-batch's time goes: seconds and rows per stage, summed over every task through a Spark accumulator.

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
        for stage, (seconds, rows) in b.items():
            s, r = a.get(stage, (0.0, 0))
            a[stage] = (s + seconds, r + rows)
        return a


def stage_times(spark):
    """A fresh accumulator of {stage: (seconds, rows)}; read ``.value`` on the driver."""
    return spark.sparkContext.accumulator({}, _Sums())


@contextmanager
def timed(accumulator, stage: str, rows: int = 0):
    """Add the block's duration to ``stage`` (a no-op without an accumulator)."""
    if accumulator is None:
        yield
        return
    started = time.thread_time()
    try:
        yield
    finally:
        accumulator.add({stage: (time.thread_time() - started, rows)})
