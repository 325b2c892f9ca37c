"""A broker outage in the middle of a run (issue #13): ``rebalance-tracker run`` in its own process over a recorded
feed on a broker that keeps its log across a restart (the bundled Tansu on S3 storage, a moto S3 server on loopback:
tests/persistent_broker.py). After a few micro-batches the broker goes away for ``OUTAGE_S`` seconds (30 by default,
as in the issue) and comes back on the same port. Meanwhile the job must stay up and say in its live table that it
waits for the broker -- no stack trace -- then go on: the outputs topic (deduplicated by the ``batch_id``/``seq``
headers as docs/outputs.md tells readers to) and the store must be the pure model's, record for record, the bad record
dead-lettered once."""

from __future__ import annotations

import json
import os
import time

import pytest

from streaming.kafka_client.topics import ensure_topics
from streaming.feeds.publish import encode_event
from tests.job_process import JobDirs, JobProcess, deduplicate, model_run, stored_bytes, wait_for
from tests.tracker.test_kill_restart import WATERMARK_DELAY_MS, job_args, long_feed
from tests.tracker.test_tracker_kafka import events_log_end, produce, read_all
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group(OWN_PROCESSES)]

OUTAGE_S = float(os.environ.get("OUTAGE_S", "30"))
WAITING = "WAITING: the broker at"


def test_the_job_waits_out_a_broker_outage(persistent_broker, tmp_path):
    bootstrap, topic = persistent_broker.bootstrap, "events"
    feed = long_feed()
    ensure_topics(bootstrap, {topic: 2})
    records = [encode_event(e) for e in feed]
    records.insert(len(records) // 3, (b"group-1", b"not json"))
    produce(bootstrap, topic, records)
    end = events_log_end(bootstrap, topic)

    dirs = JobDirs(tmp_path / "checkpoint", tmp_path / "offsets.db")
    job = JobProcess(job_args(bootstrap, topic, dirs), tmp_path, tmp_path / "job.log")
    max_ts = max(e["ts"] for e in feed)
    want_outputs, want_store = model_run(feed, max_ts - WATERMARK_DELAY_MS)
    try:
        wait_for(lambda: dirs.committed() >= 2, 180, "two micro-batches before the outage", job)
        before = dirs.committed()
        persistent_broker.stop()
        lost = time.monotonic()
        # The job stays up and says what it waits for.
        wait_for(
            lambda: WAITING in job.log.read_text(errors="replace"),
            OUTAGE_S + 15,
            "the live table to say the job waits for the broker",
            job,
        )
        assert dirs.position() != end, "the feed was done before the outage"
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - lost)))  # the outage itself lasts OUTAGE_S
        assert job.alive(), job.tail()
        persistent_broker.start()
        wait_for(
            lambda: dirs.position() == end, 240, "the job to read the whole feed after the outage", job, interval_s=0.2
        )
        wait_for(
            lambda: stored_bytes(dirs.store) == want_store and dirs.committed() == dirs.planned(),
            60,
            "the store to hold the model's records",
            job,
            interval_s=0.2,
        )
        assert job.interrupt() == 0, job.tail()
    finally:
        if job.alive():
            job.kill()

    log = job.log.read_text(errors="replace")
    assert "is back after" in log and dirs.committed() > before
    assert "Traceback" not in log and "Exception" not in log, log[-6000:]
    raw = read_all(bootstrap, f"{topic}-out")
    got: dict[str, list[dict]] = {}
    for r in deduplicate(raw):
        o = json.loads(r.value)
        got.setdefault(o["group_id"], []).append(o)
    assert got == want_outputs
    assert stored_bytes(dirs.store) == want_store and dirs.position() == end
    dead = [json.loads(r.value) for r in deduplicate(read_all(bootstrap, f"{topic}.dlq"))]
    assert len(dead) == 1 and "not valid JSON" in dead[0]["reason"], dead
    print(
        f"outage of {OUTAGE_S:.0f} s after batch {before}; {len(raw)} output records, "
        f"{sum(map(len, got.values()))} after deduplication",
        flush=True,
    )
