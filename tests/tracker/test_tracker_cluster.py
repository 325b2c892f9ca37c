"""The tracker on a Spark standalone cluster (a master and two workers on loopback, the ``spark_cluster`` fixture),
run as a user runs it, in its own processes: the recorded feed's first half through ``rebalance-tracker run --master
spark://...``, stopped with Ctrl-C, the second half through ``spark-submit`` on the same checkpoint. It must leave
what the local run of ``test_tracker_kafka`` leaves -- the pure model's outputs, the bad record dead-lettered, the
store's offsets and position -- and neither process is told which Python the executors run nor where the code is."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import streaming
from streaming.local.broker import _die_with_parent
from streaming.spark.restore import POSITION_GROUP
from streaming.spark.session import code_archive
from streaming.local.spark_cluster import spark_home
from tests.groups import OWN_PROCESSES
from tests.tracker.test_tracker_kafka import (
    check_tracker_run,
    events_log_end,
    first_half,
    recorded_feed,
    second_half,
    tracker_config,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.spark_cluster, pytest.mark.xdist_group(OWN_PROCESSES)]

REPO = Path(streaming.__file__).resolve().parent.parent  # this checkout


def user_env() -> dict[str, str]:
    """A user's shell with the environment activated: its bin first on PATH (spark-submit starts the driver with
    ``python3``), no PYSPARK_* (this test process set PYSPARK_PYTHON for its own local session), and this checkout
    importable by the driver (the environment's installed copy may be another checkout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver listens on loopback, where the cluster is
    return env


# Quick JVMs for a short job on a small machine (C1 only, serial GC; the larger stack the local defaults give the
# driver), no web UI, two shuffle partitions as locally. A test's choice, not something the job needs.
QUICK = [
    f"--conf={key}={value}"
    for key, value in {
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss16m",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.sql.shuffle.partitions": "2",
    }.items()
]


def job_args(config) -> list[str]:
    return [
        "--bootstrap",
        config.bootstrap,
        "--events-topic",
        config.events_topic,
        "--assignments-topic",
        config.outputs_topic,
        "--dlq-topic",
        config.dlq_topic,
        "--store",
        config.store,
        "--checkpoint",
        config.checkpoint,
        "--trigger",
        "200ms",
        "--time-mode",
        "event",
        "--watermark-delay",
        "1 second",
    ]


def store_progress(path: str) -> tuple[dict[tuple[str, int], int], int]:
    """The tracker's position on the events topic and the last batch id in the SQLite store, read beside the
    running job."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            position = {
                (t, p): o
                for t, p, o in db.execute(
                    "SELECT topic, partition, \"offset\" FROM records WHERE group_id = ? AND type = 'offset_commit'",
                    (POSITION_GROUP,),
                )
            }
            row = db.execute("SELECT value FROM progress WHERE name = 'batch_id'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:  # not created yet
        return {}, -1
    return position, -1 if row is None else row[0]


def tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:]


def run_until_caught_up(
    cmd: list[str], config, cwd: Path, log: Path, settle_s: float = 0.0, timeout_s: float = 150.0
) -> int:
    """Start the job, wait until its position in the store is the events topic's end and no batch has completed
    for ``settle_s`` (time for a no-data batch to fire the last timers), then press Ctrl-C (SIGINT to its process
    group); returns its exit code."""
    store = config.store[len("sqlite:") :]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=user_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + timeout_s
        end = events_log_end(config.bootstrap, config.events_topic)
        last_batch, since = -1, time.monotonic()
        while True:
            assert proc.poll() is None, f"{cmd[0]} exited with {proc.returncode}:\n{tail(log)}"
            assert time.monotonic() < deadline, f"not caught up after {timeout_s:.0f} s:\n{tail(log)}"
            position, batch = store_progress(store)
            if batch != last_batch:
                last_batch, since = batch, time.monotonic()
            elif position == end and time.monotonic() - since >= settle_s:
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def new_executor_dirs(cluster, before: set[Path]) -> list[Path]:
    return [d for d in cluster.executor_dirs() if d not in before]


def test_tracker_on_a_standalone_cluster_with_a_restart(spark_cluster, kafka_bootstrap, topic_name, tmp_path):
    feed = recorded_feed()
    config = tracker_config(kafka_bootstrap, topic_name, tmp_path)
    shipped = code_archive(tmp_path).name  # what the executors must be given: this checkout's code
    first_half(kafka_bootstrap, config, feed)

    # First half: the tracker's own command, pointed at the cluster.
    command = Path(sys.executable).with_name("rebalance-tracker")
    run = [str(command)] if command.exists() else [sys.executable, "-m", "streaming.cli.main"]
    before = set(spark_cluster.executor_dirs())
    code = run_until_caught_up(
        [*run, "run", "--master", spark_cluster.master_url, *QUICK, *job_args(config)],
        config,
        tmp_path,
        tmp_path / "run.log",
    )
    assert code == 0, tail(tmp_path / "run.log")  # stopped between micro-batches, as Ctrl-C does
    first_executors = new_executor_dirs(spark_cluster, before)

    # Second half: the same job through spark-submit, restarting from the first run's checkpoint. (Ctrl-C stops
    # spark-submit's JVM at once, under the Python driver: fine once everything is processed, as here.)
    second_half(kafka_bootstrap, config, feed)
    before = set(spark_cluster.executor_dirs())
    run_until_caught_up(
        [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            spark_cluster.master_url,
            *QUICK,
            str(REPO / "streaming" / "cli" / "run.py"),
            *job_args(config),
        ],
        config,
        tmp_path,
        tmp_path / "spark-submit.log",
        settle_s=1.5,
    )
    second_executors = new_executor_dirs(spark_cluster, before)

    # Both applications ran executors on both workers, each given the driver's code.
    for executors in (first_executors, second_executors):
        assert {d.parent.parent.name for d in executors if (d / shipped).is_file()} == {"worker-0", "worker-1"}, [
            (d, sorted(p.name for p in d.iterdir())) for d in executors
        ]

    # The same outputs topic, dead letters and store as the local run (test_tracker_kafka): the pure model's.
    check_tracker_run(kafka_bootstrap, config, feed)


def test_builtin_source_on_a_standalone_cluster_with_a_restart(spark_cluster, apache_kafka4, topic_name, tmp_path):
    """Spark's Kafka connector on the cluster's executors: ``run --master`` serves the jars the session loaded
    (``spark.jars``), ``spark-submit`` is given them with ``--jars "$(rebalance-tracker kafka-connector)"``; the
    restart from the first run's checkpoint leaves what the Python source leaves (``check_tracker_run``). On Apache
    Kafka 4: the bundled Tansu's ListOffsets answer hides a partition's last records from the connector."""
    from streaming.spark.connector import CONNECTOR, ConnectorUnavailable, connector_jars

    try:
        jars = connector_jars()
    except ConnectorUnavailable as exc:
        pytest.skip(str(exc))
    connector_jar = next(j.name for j in jars if j.name.startswith(CONNECTOR))
    bootstrap = apache_kafka4.bootstrap
    feed = recorded_feed()
    config = tracker_config(bootstrap, topic_name, tmp_path)
    args = [*job_args(config), "--kafka-source", "builtin"]
    first_half(bootstrap, config, feed)

    command = Path(sys.executable).with_name("rebalance-tracker")
    run = [str(command)] if command.exists() else [sys.executable, "-m", "streaming.cli.main"]
    before = set(spark_cluster.executor_dirs())
    code = run_until_caught_up(
        [*run, "run", "--master", spark_cluster.master_url, *QUICK, *args], config, tmp_path, tmp_path / "run.log"
    )
    assert code == 0, tail(tmp_path / "run.log")
    assert "reading Kafka with the builtin source" in (tmp_path / "run.log").read_text(errors="replace")
    first_executors = new_executor_dirs(spark_cluster, before)

    second_half(bootstrap, config, feed)
    listed = subprocess.run([*run, "kafka-connector"], capture_output=True, text=True, env=user_env(), timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.strip().split(",")) == sorted(str(j) for j in jars)
    before = set(spark_cluster.executor_dirs())
    run_until_caught_up(
        [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            spark_cluster.master_url,
            *QUICK,
            "--jars",
            listed.stdout.strip(),
            str(REPO / "streaming" / "cli" / "run.py"),
            *args,
        ],
        config,
        tmp_path,
        tmp_path / "spark-submit.log",
        settle_s=1.5,
    )
    second_executors = new_executor_dirs(spark_cluster, before)

    # Both applications' executors, on both workers, were given the connector (and read with it: without its
    # classes on an executor the micro-batch fails).
    for executors in (first_executors, second_executors):
        assert {d.parent.parent.name for d in executors if (d / connector_jar).is_file()} == {"worker-0", "worker-1"}, [
            (d, sorted(p.name for p in d.iterdir())) for d in executors
        ]

    check_tracker_run(bootstrap, config, feed)
