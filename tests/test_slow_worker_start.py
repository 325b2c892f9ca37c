"""A loaded machine at the job's start: Spark gives the Python worker that runs the Kafka source a fixed 10 s to
connect back, and a worker that misses it kills the query before it plans anything ("Python worker failed to connect
back"), which made the Spark tests flaky under load. ``rebalance-tracker run`` starts such a query again. Here the
first such worker really is that slow: the job's Python is a wrapper that sleeps 12 s before the first start of
Spark's streaming-source runner."""
from __future__ import annotations

import stat
import sys

import pytest

from streaming.cli.run import ensure_topics
from streaming.feeds.publish import encode_event
from tests.job_process import JobDirs, JobProcess, wait_for
from tests.test_kill_restart import job_args, long_feed
from tests.test_tracker_kafka import events_log_end, produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def test_a_source_worker_too_slow_to_start_is_started_again(kafka_bootstrap, topic_name, tmp_path):
    slow = tmp_path / "slow-python"
    marker = tmp_path / "slowed"
    slow.write_text(f"""#!/bin/sh
if [ "$2" = "{RUNNER}" ] && [ ! -e "{marker}" ]; then touch "{marker}"; sleep 12; fi
exec "{sys.executable}" "$@"
""")
    slow.chmod(slow.stat().st_mode | stat.S_IXUSR)

    feed = long_feed()[:200]
    ensure_topics(kafka_bootstrap, {topic_name: 2})
    produce(kafka_bootstrap, topic_name, [encode_event(e) for e in feed])
    end = events_log_end(kafka_bootstrap, topic_name)
    dirs = JobDirs(tmp_path / "checkpoint", tmp_path / "offsets.db")
    job = JobProcess(job_args(kafka_bootstrap, topic_name, dirs), tmp_path, tmp_path / "job.log",
                     env={"PYSPARK_PYTHON": str(slow)})
    try:
        wait_for(lambda: dirs.position() == end, 240, "the job to read the feed", job, interval_s=0.2)
        assert job.interrupt() == 0, job.tail()
    finally:
        if job.alive():
            job.kill()
    log = job.log.read_text(errors="replace")
    assert marker.exists() and "failed to connect back" in log and "starting the query again (2/3)" in log, \
        log[-4000:]
