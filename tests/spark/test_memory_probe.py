"""The workers' memory probe (streaming/spark/memory_probe.py): what it records when on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

SCRIPT = """
from streaming.spark.memory_probe import probe
probe("parse")
held = [[bytes(1000)] for _ in range(20_000)]   # ~20 MB in 20k lists that the second record must show
probe("stateful")
"""


def run(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=os.environ | env, capture_output=True, text=True, timeout=60, check=True
    )


def test_records_each_workers_heap_and_compares_snapshots(tmp_path):
    run(
        {
            "REBALANCE_TRACKER_MEMORY_PROBE": str(tmp_path),
            "REBALANCE_TRACKER_MEMORY_PROBE_EVERY_S": "0",
            "REBALANCE_TRACKER_MEMORY_PROBE_FRAMES": "5",
        }
    )
    (log,) = tmp_path.glob("worker-*.jsonl")
    first, second = [json.loads(line) for line in log.read_text().splitlines()]
    assert (first["stage"], second["stage"]) == ("parse", "stateful")
    assert second["malloc_in_use"] - first["malloc_in_use"] > 15 * 2**20  # glibc saw the 20 MB
    assert second["rss"] > first["rss"] and second["gc_objects"] - first["gc_objects"] > 19_000
    assert len(list(tmp_path.glob("*.snapshot"))) == 2
    report = subprocess.run(
        [sys.executable, "-m", "streaming.spark.memory_probe", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    grown = float(re.search(r"^\s+\+([\d.]+) MiB", report, re.M).group(1))  # the largest growth comes first
    assert "2 snapshots" in report and 19 < grown < 25 and 'File "<string>", line 4' in report, report
