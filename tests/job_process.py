"""The tracker as a user runs it -- ``rebalance-tracker run`` in its own process (a Python driver and its JVM, one
process group) -- and what the tests read beside it: the checkpoint's offset and commit logs, the sinks' batch
marker, the SQLite store's last batch, and the outputs topic deduplicated by its ``batch_id``/``seq`` headers
exactly as docs/outputs.md tells readers to."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import streaming
from offsets_store.codec import encode_record
from streaming.coordinator import CoordinatorConfig, GroupCoordinator
from streaming.local.broker import _die_with_parent
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES
from streaming.spark.restore import POSITION_GROUP
from streaming.spark.sinks import STORE_TYPES

REPO = Path(streaming.__file__).resolve().parent.parent  # this checkout


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A user's shell: this checkout importable, no PYSPARK_* left over from the test process (``extra`` on top)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PYTHONPATH"] = str(REPO)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env | (extra or {})


@dataclass
class JobDirs:
    checkpoint: Path
    store: Path

    @property
    def query(self) -> Path:
        return self.checkpoint / "query"

    def planned(self) -> int:
        """The newest micro-batch written to the offset log (-1: none)."""
        return _newest(self.query / "offsets")

    def committed(self) -> int:
        """The newest micro-batch in the commit log (-1: none)."""
        return _newest(self.query / "commits")

    def marker(self) -> int:
        """The last batch the sink finished producing to Kafka (sinks.BatchMarker)."""
        try:
            return int((self.checkpoint / "sinks" / "kafka-outputs.batch").read_text().strip())
        except (FileNotFoundError, ValueError):
            return -1

    def stored(self) -> int:
        """The last batch applied to the SQLite store (-1: none, or not readable at this moment)."""
        try:
            db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=1)
            try:
                row = db.execute("SELECT value FROM progress WHERE name = 'batch_id'").fetchone()
            finally:
                db.close()
        except sqlite3.Error:
            return -1
        return -1 if row is None else row[0]

    def position(self) -> dict[tuple[str, int], int]:
        """The job's own position on its events topic, from the store."""
        try:
            db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=1)
            try:
                return {
                    (t, p): o
                    for t, p, o in db.execute(
                        'SELECT topic, partition, "offset" FROM records '
                        "WHERE group_id = ? AND type = 'offset_commit'",
                        (POSITION_GROUP,),
                    )
                }
            finally:
                db.close()
        except sqlite3.Error:
            return {}


def _newest(directory: Path) -> int:
    try:
        return max((int(p.name) for p in directory.iterdir() if p.name.isdigit()), default=-1)
    except FileNotFoundError:
        return -1


class JobProcess:
    """``python -m streaming.cli.main run ARGS`` in its own process group (so its JVM goes with it)."""

    def __init__(self, args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None):
        self.log = log
        with open(log, "ab") as out:
            out.write(f"\n==== {' '.join(args)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streaming.cli.main", "run", *args],
                cwd=cwd,
                env=job_env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to the driver and its JVM at once, as the OOM killer or ``docker kill`` would."""
        self.signal_group(signal.SIGKILL)
        self.proc.wait()

    def interrupt(self, timeout_s: float = 60) -> int:
        """Ctrl-C: stops between micro-batches."""
        self.signal_group(signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.alive():
                self.kill()

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]


def wait_for(condition, timeout_s: float, what: str, job: JobProcess | None = None, interval_s: float = 0.1):
    """Poll ``condition`` until it returns something truthy; fail with ``what`` (and the job's log) after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if job is not None and not job.alive():
            raise AssertionError(f"the job exited ({job.proc.returncode}) while waiting for {what}:\n{job.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:.0f} s waiting for {what}"
                + (f":\n{job.tail()}" if job is not None else "")
            )
        time.sleep(interval_s)


# ------------------------------------------------------- reading the outputs as docs/outputs.md tells readers to
def header(record, name: str) -> int:
    return int(dict(record.headers)[name])


def deduplicate(records: list) -> list:
    """docs/outputs.md: a record whose ``batch_id`` is the previous record's and whose ``seq`` is not above the
    previous record's ``seq`` repeats a batch re-sent after a crash: drop it."""
    kept, last = [], None
    for r in records:
        batch, seq = header(r, "batch_id"), header(r, "seq")
        if last is not None and batch == last[0] and seq <= last[1]:
            continue
        kept.append(r)
        last = (batch, seq)
    return kept


# ------------------------------------------------------------------ what the pure model says
def model_run(feed: list[dict], watermark_ms: int) -> tuple[dict[str, list[dict]], dict[bytes, bytes]]:
    """The pure coordinator over the whole feed, its timers run as the event-time job runs them up to its final
    watermark (Spark times a group out once the watermark is past its deadline). Returns the outputs topic's
    records by group and the store's compacted key/value bytes."""
    coordinator = GroupCoordinator(CoordinatorConfig())
    outputs = [o for e in feed for o in coordinator.handle(e)] + coordinator.advance(watermark_ms - 1)
    by_group: dict[str, list[dict]] = {}
    store: dict[bytes, bytes] = {}
    for o in outputs:
        if o["type"] in STORE_TYPES:
            key, value = encode_record(o)
            if value is None:
                store.pop(key, None)
            else:
                store[key] = value
        elif o["type"] in DEFAULT_OUTPUT_TYPES:
            by_group.setdefault(o["group_id"], []).append(json.loads(json.dumps(o)))
    return by_group, store


def stored_bytes(store_path: Path) -> dict[bytes, bytes]:
    """The SQLite store's key/value bytes, the job's own position left out."""
    from offsets_store.codec import decode_record
    from offsets_store.sqlite_store import SqliteStore

    store = SqliteStore(str(store_path))
    try:
        raw = store.raw_records()
    finally:
        store.close()
    return {k: v for k, v in raw if decode_record(k, v)["group_id"] != POSITION_GROUP}
