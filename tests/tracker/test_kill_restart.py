"""SIGKILL at random points (issue #13): ``rebalance-tracker run`` in its own process over a recorded feed, killed
with SIGKILL (driver and JVM at once) at several points chosen by a seeded random plan, and restarted each time on
the same checkpoint. The kill points:

- ``batch``: a micro-batch is planned (in the offset log) and running, the sink has not applied it to the store;
- ``sink``: the store has the batch, the outputs topic does not have all of it (the sink's marker is behind);
- ``commit``: the store and the outputs topic have the batch, Spark has not written it to its commit log;
- ``outputs``: the outputs topic has the whole batch, the sink's marker does not -- so the restart sends the batch
  again. This window is microseconds wide, so the job kills itself there (its ``REBALANCE_TRACKER_CRASH_AFTER_OUTPUTS``
  crash point), and the topic then really holds duplicates for the readers' rule to drop.

Each kill lands at a random micro-batch a few batches after the previous one, so the kills spread over the feed. The
first three windows are hit without any hook in the job: the test polls the checkpoint, the sink's marker and the store;
when the wanted window shows, it freezes the job's whole process group (SIGSTOP), checks again on the frozen job, and
SIGKILLs it there (or lets it go on and waits for the next batch). At the end the store and the outputs topic,
deduplicated by the ``batch_id``/``seq`` headers as docs/outputs.md tells readers to, must be the pure model's,
record for record, and the dead-letter topic must hold the one bad record once.

The first start is also a loaded machine's: Spark gives the Python worker that runs the Kafka source a fixed 10 s to
connect back, and a worker that misses it kills the query before it plans anything ("Python worker failed to
connect back"); ``rebalance-tracker run`` starts such a query again. There, the job's Python is a wrapper that sleeps
12 s before the first start of Spark's streaming-source runner.

``KILL_SEED=N`` replays a plan; the seed is printed either way.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import sys
import time

import pytest

from streaming.feeds.publish import encode_event
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.kafka_client.topics import ensure_topics
from streaming.spark.kafka_source import SOURCE_RUNNER as RUNNER
from streaming.spark.sinks import CRASH_AFTER_OUTPUTS_ENV
from tests.job_process import JobDirs, JobProcess, deduplicate, model_run, stored_bytes, wait_for
from tests.tracker.test_tracker_kafka import events_log_end, produce, read_all
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group(OWN_PROCESSES)]

START = 1_700_000_000_000
WATERMARK_DELAY_MS = 10_000
PHASES = ("batch", "sink", "commit", "outputs")


def long_feed() -> list[dict]:
    """Three groups over four simulated minutes with churn: crashes, leaves, static restarts, topic growth."""
    return Simulator(
        SimulationSettings(
            groups=3, seed=13, churn_interval_ms=10_000, assignors=("range", "cooperative-sticky", "sticky")
        ),
        start_ms=START,
    ).run_until(START + 240_000)


def job_args(bootstrap: str, topic: str, dirs: JobDirs) -> list[str]:
    return [
        "--bootstrap",
        bootstrap,
        "--events-topic",
        topic,
        "--assignments-topic",
        f"{topic}-out",
        "--dlq-topic",
        f"{topic}.dlq",
        "--store",
        f"sqlite:{dirs.store}",
        "--checkpoint",
        str(dirs.checkpoint),
        "--trigger",
        "200ms",
        "--time-mode",
        "event",
        "--watermark-delay",
        f"{WATERMARK_DELAY_MS // 1000} seconds",
        # Many small micro-batches, so that a kill lands in the middle of the feed.
        "--max-offsets-per-trigger",
        "40",
    ]


def in_window(phase: str, dirs: JobDirs, first: int) -> int | None:
    """The batch id when the job is in the phase's window for a batch at or after ``first``, else None."""
    planned, committed = dirs.planned(), dirs.committed()
    if planned <= committed or planned < first:
        return None
    stored = dirs.stored()
    if phase == "batch":
        return planned if stored < planned else None
    if stored != planned:
        return None
    marker = dirs.marker()
    if phase == "sink":
        return planned if marker < planned else None
    return planned if marker == planned else None  # commit


def kill_in(phase: str, first: int, job: JobProcess, dirs: JobDirs, end: dict, timeout_s: float = 180) -> str:
    """Wait for the phase's window in a batch at or after ``first``, SIGKILL the job in it; returns what was hit."""
    deadline = time.monotonic() + timeout_s
    checked = time.monotonic()
    while time.monotonic() < deadline:
        assert job.alive(), f"the job exited ({job.proc.returncode}):\n{job.tail()}"
        if time.monotonic() - checked > 1:
            checked = time.monotonic()
            assert dirs.position() != end, f"the feed was done before a '{phase}' window from batch {first} on"
        if in_window(phase, dirs, first) is None:
            time.sleep(0.002)
            continue
        job.signal_group(signal.SIGSTOP)  # freeze it; on the frozen job, is it still in the window?
        batch = in_window(phase, dirs, first)
        if batch is not None:
            hit = (
                f"{phase} (batch {batch}: stored {dirs.stored()}, marker {dirs.marker()}, committed {dirs.committed()})"
            )
            job.kill()
            return hit
        job.signal_group(signal.SIGCONT)  # it moved on: catch the next batch
    raise AssertionError(f"no '{phase}' window from batch {first} on within {timeout_s:.0f} s:\n{job.tail()}")


def crash_after_outputs(first: int, job: JobProcess, dirs: JobDirs, timeout_s: float = 180) -> str:
    """The job runs with its crash point at batch ``first``: wait for it to kill itself there."""
    wait_for(lambda: not job.alive(), timeout_s, f"the job to crash after the outputs of batch {first} or later")
    log = job.log.read_text(errors="replace")
    assert f"{CRASH_AFTER_OUTPUTS_ENV}={first}: killing the job" in log, job.tail()
    return f"outputs (batch {dirs.marker() + 1}: marker {dirs.marker()}, committed {dirs.committed()})"


def slow_python(tmp_path) -> tuple[dict[str, str], object]:
    """A PYSPARK_PYTHON that starts the first streaming-source worker 12 s late, and the file saying it did."""
    slow, slowed = tmp_path / "slow-python", tmp_path / "slowed"
    slow.write_text(f"""#!/bin/sh
if [ "$2" = "{RUNNER}" ] && [ ! -e "{slowed}" ]; then touch "{slowed}"; sleep 12; fi
exec "{sys.executable}" "$@"
""")
    slow.chmod(slow.stat().st_mode | stat.S_IXUSR)
    return {"PYSPARK_PYTHON": str(slow)}, slowed


def test_sigkill_at_random_points_then_restart(kafka_bootstrap, topic_name, tmp_path):
    seed = int(os.environ.get("KILL_SEED", random.randrange(2**31)))
    rng = random.Random(seed)
    plan = list(PHASES)
    rng.shuffle(plan)
    print(f"KILL_SEED={seed}: kills in {plan}", flush=True)

    feed = long_feed()
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    records = [encode_event(e) for e in feed]
    records.insert(rng.randrange(len(records)), (b"group-1", b"not json"))
    produce(kafka_bootstrap, topic_name, records)
    end = events_log_end(kafka_bootstrap, topic_name)

    dirs = JobDirs(tmp_path / "checkpoint", tmp_path / "offsets.db")
    args = job_args(kafka_bootstrap, topic_name, dirs)
    log = tmp_path / "job.log"
    hits = []
    slow_env, slowed = slow_python(tmp_path)
    for i, phase in enumerate(plan):
        first = max(dirs.planned(), 0) + rng.randint(1, 3)
        env = (slow_env if i == 0 else {}) | ({CRASH_AFTER_OUTPUTS_ENV: str(first)} if phase == "outputs" else {})
        job = JobProcess(args, tmp_path, log, env=env)
        started = time.monotonic()
        try:
            hits.append(
                crash_after_outputs(first, job, dirs) if phase == "outputs" else kill_in(phase, first, job, dirs, end)
            )
            print(f"  killed: {hits[-1]}, {time.monotonic() - started:.0f} s after the start", flush=True)
        finally:
            if job.alive():
                job.kill()
        assert dirs.position() != end, f"the feed was done before the '{phase}' kill; make it longer ({hits})"
        if i == 0:
            text = log.read_text(errors="replace")
            assert slowed.exists() and "failed to connect back" in text and "starting the query again (2/3)" in text, (
                "the first start's slow source worker was not started again:\n" + text[-4000:]
            )

    # The last run goes to the end of the feed, then is stopped with Ctrl-C.
    max_ts = max(e["ts"] for e in feed)
    want_outputs, want_store = model_run(feed, max_ts - WATERMARK_DELAY_MS)
    # No more kills: the rest of the feed in large micro-batches.
    limit = args.index("--max-offsets-per-trigger") + 1
    job = JobProcess(args[:limit] + ["1000"] + args[limit + 1 :], tmp_path, log)
    started = time.monotonic()
    try:
        wait_for(lambda: dirs.position() == end, 120, "the job to read the whole feed", job, interval_s=0.2)
        # Then the no-data batch that runs the timers up to the final watermark.
        wait_for(
            lambda: stored_bytes(dirs.store) == want_store and dirs.committed() == dirs.planned(),
            30,
            "the store to hold the model's records",
            job,
            interval_s=0.2,
        )
        assert job.interrupt() == 0, job.tail()
        print(f"  the last run read the rest and stopped in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        if job.alive():
            job.kill()

    context = f"KILL_SEED={seed}, kills: {hits}"
    # The outputs topic, read as docs/outputs.md tells readers to: the model's outputs, record for record, once.
    raw = read_all(kafka_bootstrap, f"{topic_name}-out")
    got: dict[str, list[dict]] = {}
    for r in deduplicate(raw):
        o = json.loads(r.value)
        assert r.key.decode() == o["group_id"], context
        got.setdefault(o["group_id"], []).append(o)
    assert got.keys() == want_outputs.keys(), context
    for group_id, outputs in want_outputs.items():
        assert got[group_id] == outputs, f"{group_id}: {context}"
    # The store: the model's compacted records, byte for byte, and the job's position at the feed's end.
    assert stored_bytes(dirs.store) == want_store, context
    assert dirs.position() == end, context
    # The dead-letter topic: the bad record, once.
    dead = [json.loads(r.value) for r in deduplicate(read_all(kafka_bootstrap, f"{topic_name}.dlq"))]
    assert len(dead) == 1 and "not valid JSON" in dead[0]["reason"], (dead, context)
    kept = sum(map(len, got.values()))
    print(f"  {len(raw)} output records read, {kept} after deduplication", flush=True)
    assert len(raw) > kept, f"the crash after a batch's outputs left no duplicate to drop: {context}"
