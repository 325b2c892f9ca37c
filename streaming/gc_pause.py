"""Pause CPython's cyclic garbage collector around bulk work that builds many small containers.

Decoding a batch of events or outputs, and a group's coordinator step, allocate thousands of dicts and lists; every
700 of them the cyclic collector runs, and every so often it walks the whole heap again -- all the objects built so
far and everything the process imported (pandas, pyarrow, pyspark). Measured on the benchmark's feed: ~30% of the
pure core's time, ~85% of decoding a micro-batch's outputs on the driver. Reference counting still frees what it can
at once; the cycles made inside the block (a group's step leaves some) go at the first collection after it, which
walks only the young objects."""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    if not gc.isenabled():   # nested, or the caller manages the collector itself
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
