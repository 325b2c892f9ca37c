"""The job pauses the cyclic garbage collector around bulk decoding (streaming/gc_pause.py; what it saves is a figure
of benchmarks/streaming.py). A long-running job must never be left with it off. And a group's step leaves no reference
cycles: every coordinator used to (its timers held a bound method of it), so the collector walked each one."""

from __future__ import annotations

import gc

import pytest

from streaming.coordinator import CoordinatorConfig
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.gc_pause import gc_paused
from streaming.spark.group_step import step_group


def test_the_collector_is_off_inside_and_back_on_after_even_on_errors():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("boom")
    assert gc.isenabled()


def test_a_caller_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    try:
        with gc_paused():
            with gc_paused():
                pass
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_step_leaves_no_reference_cycles(protocol):
    feed = Simulator(
        SimulationSettings(groups=1, members_per_group=10, seed=3, group_protocol=protocol), start_ms=0
    ).run_until(90_000)
    gc.collect()
    gc.disable()
    try:
        state, outputs = None, 0
        for i in range(0, len(feed), 40):  # micro-batches of a live group: joins, syncs, commits, expiries
            result = step_group(state, feed[i : i + 40], feed[min(i + 40, len(feed)) - 1]["ts"], CoordinatorConfig())
            state, outputs = result.state, outputs + len(result.outputs)
        unreachable = gc.collect()
    finally:
        gc.enable()
    assert state is not None and outputs > 100
    assert unreachable == 0, f"{unreachable} objects in reference cycles after {len(feed)} events"


def test_waiting_out_an_outage_frees_each_attempts_cycles_with_the_collector_paused():
    """The sink pauses the collector for its whole batch, retries included: each failed attempt's cycles (a dropped
    producer, its futures, the traceback) must still go before the next one, or a long outage piles them up."""
    import weakref

    from streaming.kafka_client.delivery import send_until_delivered

    class Attempt:  # stands in for what an attempt leaves behind: objects in a reference cycle
        def __init__(self):
            self.me = self

    left_behind, failures = [], iter([True, True, False])

    def send():
        attempt = Attempt()
        left_behind.append(weakref.ref(attempt))
        if next(failures):
            raise ConnectionError("broker gone")  # unreachable: waited out
        return []

    with gc_paused():
        send_until_delivered(send, "127.0.0.1:1", "test batch", reset=lambda: None, retry_s=0)
        assert [ref() is None for ref in left_behind] == [True, True, False]
