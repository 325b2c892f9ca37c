"""A Spark standalone cluster on loopback: one master and N workers, from the installed pyspark's ``bin/spark-class``.

For tests and for trying the tracker on a real (if small) cluster on one machine::

    rebalance-tracker spark-cluster --workers 2        # prints the master URL, runs until Ctrl-C
    rebalance-tracker run --master spark://127.0.0.1:PORT

Each daemon is tied to this process (``PR_SET_PDEATHSIG``, as the bundled broker is), so a killed test run leaves no
master or worker behind; a worker stopping takes its executors with it.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from streaming.local.broker import _die_with_parent, free_port

_MASTER_UP = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"


class SparkClusterError(RuntimeError):
    """The cluster could not be started."""


def spark_home() -> Path:
    """``$SPARK_HOME`` when it has ``bin/spark-class``, else the pyspark package folder (pip's pyspark ships the
    launcher scripts and every jar)."""
    candidates = [os.environ.get("SPARK_HOME")]
    try:
        import pyspark

        candidates.append(os.path.dirname(pyspark.__file__))
    except ImportError:  # pragma: no cover - dependency declared in pyproject
        pass
    for home in filter(None, candidates):
        if (Path(home) / "bin" / "spark-class").is_file():
            return Path(home)
    raise SparkClusterError("no Spark installation with bin/spark-class found (set SPARK_HOME or pip install pyspark)")


@dataclass
class SparkCluster:
    """A running standalone master and its workers on 127.0.0.1."""

    master_url: str
    workdir: Path
    master: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)
    remove_workdir: bool = False  # a temporary work dir is removed on stop

    def worker_dir(self, index: int) -> Path:
        """Worker ``index``'s work dir: ``app-*/<executor id>/`` holds each executor's files and logs."""
        return self.workdir / f"worker-{index}"

    def executor_dirs(self) -> list[Path]:
        return sorted(p for i in range(len(self.workers)) for p in self.worker_dir(i).glob("app-*/*") if p.is_dir())

    def logs(self, limit: int = 3000) -> str:
        """The tail of each daemon's log, for an error message."""
        parts = []
        for path in sorted(self.workdir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-limit:]}")
        return "\n".join(parts)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Workers first (each stops its executors), then the master."""
        for group in (self.workers, [self.master]):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            for proc in group:
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.remove_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def daemon_env(home: Path, memory: str = "256m") -> dict[str, str]:
    """Environment for the master and worker JVMs: loopback only, small heaps, quick JIT (they are daemons that
    mostly wait), no REST submission server."""
    # Executors inherit their worker's environment, and their Python workers its PYTHONPATH: start the daemons
    # without ours, so what executors import comes from the application (its PYSPARK_PYTHON, its shipped code).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYSPARK_")}
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY=memory,
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto",
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    return env


def _start(home: Path, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,
        )


def _wait_for(cluster: SparkCluster, ready, what: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if ready():
            return
        dead = [p for p in [cluster.master, *cluster.workers] if p.poll() is not None]
        if dead:
            raise SparkClusterError(
                f"a Spark daemon exited (code {dead[0].returncode}) before {what}:\n{cluster.logs()}"
            )
        time.sleep(0.1)
    raise SparkClusterError(f"timed out waiting for {what}:\n{cluster.logs()}")


def start_spark_cluster(
    workers: int = 2, cores: int = 1, memory: str = "1g", workdir: str | None = None, timeout_s: float = 90.0
) -> SparkCluster:
    """Start a master and ``workers`` workers (``cores`` cores and ``memory`` for executors each) on loopback and
    wait until every worker has registered. ``workdir`` (default: a new temporary directory) holds the daemons' logs
    and the workers' work dirs; a temporary one is removed on ``stop``. Raises :class:`SparkClusterError`."""
    home = spark_home()
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SparkClusterError("Spark needs Java and no 'java' is on PATH (nor JAVA_HOME set)")
    root = Path(workdir or tempfile.mkdtemp(prefix="spark-cluster-"))
    root.mkdir(parents=True, exist_ok=True)
    env = daemon_env(home)
    deadline = time.monotonic() + timeout_s
    master_log = root / "master.log"
    master = _start(
        home,
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--webui-port",
            str(free_port()),
        ],
        env,
        master_log,
    )
    cluster = SparkCluster("", root, master, remove_workdir=workdir is None)
    atexit.register(cluster.stop)
    try:
        found: list[str] = []

        def master_up() -> bool:
            match = _MASTER_UP.search(master_log.read_text(errors="replace"))
            if match:
                found.append(match.group(1))
            return bool(match)

        _wait_for(cluster, master_up, "the master to start", deadline)
        cluster.master_url = found[0]
        for i in range(workers):
            cluster.worker_dir(i).mkdir(exist_ok=True)
            cluster.workers.append(
                _start(
                    home,
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(cluster.worker_dir(i)),
                        cluster.master_url,
                    ],
                    env,
                    root / f"worker-{i}.log",
                )
            )
        _wait_for(
            cluster,
            lambda: all(_REGISTERED in (root / f"worker-{i}.log").read_text(errors="replace") for i in range(workers)),
            f"{workers} workers to register",
            deadline,
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="rebalance-tracker spark-cluster",
        description="Run a Spark standalone master and workers on 127.0.0.1 until Ctrl-C.",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    p.add_argument("--memory", default="1g", help="memory each worker offers to executors")
    p.add_argument("--workdir", default=None, help="logs and work dirs (default: a temporary directory)")
    args = p.parse_args(argv)
    try:
        cluster = start_spark_cluster(args.workers, args.cores, args.memory, args.workdir)
    except SparkClusterError as exc:
        print(f"spark-cluster: {exc}", file=sys.stderr)
        return 1
    print(
        f"Spark master at {cluster.master_url} with {args.workers} workers (logs: {cluster.workdir}); Ctrl-C stops",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while cluster.master.poll() is None and not stop.wait(1):
            pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
