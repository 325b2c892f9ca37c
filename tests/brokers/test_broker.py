"""The bundled broker starts, serves Kafka requests, and never outlives its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streaming.local.broker import kafka_broker, start_bundled_broker

pytestmark = pytest.mark.kafka  # starts bundled brokers of its own


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def _wait_dead(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_bundled_broker_round_trip_and_stop():
    broker = start_bundled_broker()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send("round-trip", key=b"k", value=b"v").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000)
        tp = TopicPartition("round-trip", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records = [(r.key, r.value) for r in consumer]
        consumer.close()
        assert records == [(b"k", b"v")]
    finally:
        broker.stop()
    assert _wait_dead(broker.process.pid)


def test_broker_dies_with_a_killed_owner(tmp_path):
    """Even a SIGKILLed owner (a test run killed hard) leaves no broker behind."""
    pid_file = tmp_path / "pid"
    script = textwrap.dedent(f"""
        import time
        from streaming.local.broker import start_bundled_broker
        b = start_bundled_broker()
        open({str(pid_file)!r}, "w").write(str(b.process.pid))
        time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=os.getcwd())
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "owner never started a broker"
        time.sleep(0.05)
    broker_pid = int(pid_file.read_text())
    assert _alive(broker_pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert _wait_dead(broker_pid), "broker outlived its SIGKILLed owner"


@pytest.mark.parametrize("signal_", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_scratch_dir_goes_with_its_processes_when_the_owner_is_killed(tmp_path, signal_):
    """The Java services' scratch directory (streaming/local/jvm.py) is removed even when its owner cannot do it:
    its process (here a stand-in, tied to the owner as a broker is) stops with the owner, then the directory goes."""
    info = tmp_path / "info"
    script = textwrap.dedent(f"""
        import subprocess, time
        from streaming.local.broker import _die_with_parent
        from streaming.local.jvm import ScratchDir
        scratch = ScratchDir("scratch-test-")
        (scratch.path / "data").write_text("x")
        child = subprocess.Popen(["sleep", "600"], preexec_fn=_die_with_parent)
        scratch.watch(child.pid)
        open({str(info)!r}, "w").write(f"{{scratch.path}} {{child.pid}}")
        time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=os.getcwd())
    deadline = time.monotonic() + 30
    while not info.exists() or not info.read_text():
        assert time.monotonic() < deadline, "owner never made its scratch dir"
        time.sleep(0.05)
    path, pid = info.read_text().split()
    assert os.path.isdir(path) and _alive(int(pid))
    owner.send_signal(signal_)
    owner.wait()
    assert _wait_dead(int(pid)), "the owner's process outlived it"
    deadline = time.monotonic() + 10
    while os.path.exists(path):
        assert time.monotonic() < deadline, "the scratch dir outlived its owner"
        time.sleep(0.05)


def test_kafka_broker_prefers_kafka_bootstrap(monkeypatch):
    with kafka_broker(prefer="bundled") as (bootstrap, source):
        assert source == "bundled"
        monkeypatch.setenv("KAFKA_BOOTSTRAP", bootstrap)
        with kafka_broker() as (again, again_source):
            assert (again, again_source) == (bootstrap, "KAFKA_BOOTSTRAP")


def test_broker_command_prints_bootstrap_and_stops_on_interrupt():
    # As in a terminal: Ctrl-C is not ignored. (A background job of a non-interactive shell -- a CI script, nohup --
    # inherits SIGINT ignored, and Python then keeps ignoring it, as Unix tools should.)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming", "broker"],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()
        assert "bootstrap=127.0.0.1:" in line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
