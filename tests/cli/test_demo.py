"""`rebalance-tracker demo` as a newcomer runs it: live table within a minute, and nothing left behind when it is
interrupted (Ctrl-C) or killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.groups import OWN_PROCESSES

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.xdist_group(OWN_PROCESSES)]


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def start_demo(tmp_path) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "demo.out"
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}  # the demo's own bundled broker
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streaming",
            "demo",
            "--data-dir",
            str(tmp_path / "data"),
            "--churn-interval-ms",
            "8000",
        ],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env=env,
        cwd=os.getcwd(),
    )
    return proc, log


def wait_for_table(proc, log: Path, timeout_s: float = 300) -> str:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        text = log.read_text(errors="replace")
        if "GROUP" in text and "Stable" in text:
            return text
        assert proc.poll() is None, f"demo exited early:\n{text[-3000:]}"
        time.sleep(1)
    raise AssertionError(f"no live table within {timeout_s} s:\n{log.read_text(errors='replace')[-3000:]}")


def test_demo_shows_the_table_and_ctrl_c_leaves_nothing_behind(tmp_path):
    proc, log = start_demo(tmp_path)
    try:
        text = wait_for_table(proc, log)
        assert "broker: bundled" in text and "group-0" in text and "cooperative-sticky" in text
        family = descendants(proc.pid)
        assert family, "the broker and the JVM run as children of the demo"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.time() + 60
    while alive(family) and time.time() < deadline:
        time.sleep(0.5)
    assert not alive(family), f"left behind: {alive(family)}"


def test_killed_demo_leaves_no_broker_or_jvm(tmp_path):
    proc, log = start_demo(tmp_path)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and "simulating" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        family = descendants(proc.pid)
        assert family
    finally:
        proc.kill()
        proc.wait(30)
    # Each child notices at once that its parent is gone (the source runner used to sit out a 30 s Kafka request).
    deadline = time.time() + 20
    while alive(family) and time.time() < deadline:
        time.sleep(0.5)
    assert not alive(family), f"left behind 20 s after SIGKILL: {alive(family)}"
