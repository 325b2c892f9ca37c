"""The job pauses the cyclic garbage collector around bulk work (streaming/gc_pause.py; what it saves is a figure of
benchmarks/streaming.py). A long-running job must never be left with it off: the coordinator's steps leave reference
cycles only the collector frees."""
from __future__ import annotations

import gc

import pytest

from streaming.gc_pause import gc_paused


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
