"""Apache Kafka 4.x (or 3.9) in KRaft mode on loopback, from Maven Central's jars: what users run today.

``kafka_jars(version)`` fetches ``org.apache.kafka:kafka_2.13`` with its runtime dependencies and a logging binding
(Kafka logs through slf4j 1.7 and its POM names no binding: ``log4j-slf4j-impl`` + ``log4j-core``) into the project's
cache once (``streaming/local/maven.py``; ~45 MB, a few seconds). ``start_kraft_kafka`` formats a scratch directory
(``kafka.tools.StorageTool format --standalone``) and starts ``kafka.Kafka`` as one combined broker and controller;
it is ready when an admin client answers (~3 s). The scratch directory, the process and its log go with it.

Settings beyond Kafka's defaults, for one node and for group tests that finish in seconds (``broker_settings``
overrides any of them):

- replication factor 1 and min ISR 1 for the internal topics;
- ``group.initial.rebalance.delay.ms=0`` (default 3 s: the first classic join of an empty group waits that long);
- classic protocol: ``group.min.session.timeout.ms=1000`` (default 6 s), so tests may use short sessions;
- consumer protocol (KIP-848; the broker owns these, clients cannot set them): session 10 s (default 45 s), minimum
  1 s (default 45 s), heartbeat interval 1 s (default 5 s), minimum 100 ms (default 5 s). Kafka refuses to start
  unless min <= value <= max and heartbeat < session.

Kafka's other group settings keep their defaults: e.g. on 4.3+ ``group.consumer.assignment.interval.ms=1000`` (new
target assignments are computed at most once a second) and ``group.consumer.assignor.offload.enable=true``.

Versions: ``DEFAULT_VERSION`` (4.x) and ``3.9`` (``VERSIONS``) are the tested ones; any other ``kafka_2.13`` version
from 3.9 on should start too. On 3.9 the group coordinator is the old Scala one (classic protocol only unless
``group.coordinator.rebalance.protocols=classic,consumer``) and there are no share groups; format and settings are
otherwise the same.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import os
import subprocess
import sys
import time

from streaming.local.broker import BrokerError, free_port, wait_for_leaders, wait_until_ready
from streaming.local.jvm import JVM_FLAGS, JavaServices, ScratchDir, java, write_properties

DEFAULT_VERSION = "4.4.0"
VERSIONS = {"4": DEFAULT_VERSION, "3.9": "3.9.2", "3": "3.9.2"}  # short names -> the Maven version they mean
LOG4J_VERSION = "2.25.5"  # what kafka_2.13 4.4.0 depends on


def resolve_version(version: str | None) -> str:
    """``4`` -> the newest 4.x tested here, ``3.9`` -> the newest 3.9.x; an exact version stays as it is."""
    version = version or DEFAULT_VERSION
    version = VERSIONS.get(version, version)
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) < (3, 9):
        raise BrokerError(
            f"Apache Kafka {version}: KRaft as started here needs 3.9 or newer "
            f"(Kafka 0.9.0.1 is streaming/local/apache_kafka.py)"
        )
    return version


def kafka_jars(version: str | None = None):
    """The folder of jars for Kafka ``version`` (``kafka_2.13`` and its runtime dependencies, log4j 2 as slf4j's
    binding), fetched from Maven Central into the cache on first use."""
    from streaming.local.maven import MavenError, fetch_jars

    version = resolve_version(version)
    try:
        return fetch_jars(
            f"apache-kafka-{version}-log4j-{LOG4J_VERSION}",
            [
                f"org.apache.kafka:kafka_2.13:{version}",
                f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
                f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}",
            ],
        )
    except MavenError as exc:
        raise BrokerError(f"Apache Kafka {version} comes from Maven Central: {exc}") from None


def cluster_id() -> str:
    """What ``StorageTool random-uuid`` prints: a random Kafka Uuid (16 bytes, URL-safe base64 without padding),
    never starting with '-' (it would read as a command-line flag)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def default_settings(version: str, port: int, controller_port: int, log_dir: str) -> dict:
    """server.properties of a one-node cluster on loopback (see the module's doc for why each group setting)."""
    listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
    settings = {
        "process.roles": "broker,controller",
        "node.id": 1,
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "log.dirs": log_dir,
        "num.partitions": 1,
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 50,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,  # default 128 MB of a 512 MB heap
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 1000,
        "group.consumer.session.timeout.ms": 10000,
        "group.consumer.min.session.timeout.ms": 1000,
        "group.consumer.heartbeat.interval.ms": 1000,
        "group.consumer.min.heartbeat.interval.ms": 100,
    }
    if int(version.split(".")[0]) >= 4:
        settings.update(
            {"share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1}
        )
    return settings


# WARN and up, and the group coordinator's INFO lines (joins, generations, expiries): the tail a failed test prints.
LOG4J2 = {
    "status": "warn",
    "shutdownHook": "disable",
    "appender.out.type": "Console",
    "appender.out.name": "out",
    "appender.out.layout.type": "PatternLayout",
    "appender.out.layout.pattern": "[%d] %p %m (%c)%n",
    "rootLogger.level": "WARN",
    "rootLogger.appenderRef.out.ref": "out",
    "logger.coordinator.name": "org.apache.kafka.coordinator.group",
    "logger.coordinator.level": "INFO",
    "logger.scala-coordinator.name": "kafka.coordinator.group",
    "logger.scala-coordinator.level": "INFO",  # 3.x
    "logger.server.name": "kafka.server.KafkaRaftServer",
    "logger.server.level": "INFO",  # "Kafka Server started"
}


class KraftKafka(JavaServices):
    """One combined broker + controller in a scratch directory that goes with it."""

    def __init__(self, version: str, port: int, controller_port: int, scratch: ScratchDir):
        super().__init__(scratch)
        self.version, self.port, self.controller_port = version, port, controller_port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def settings(self) -> dict[str, str]:
        """The server.properties it runs with."""
        lines = (self.workdir / "server.properties").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics (name -> partitions, replication factor 1) with CreateTopics; returns once every partition
        has a leader. A topic that exists already is an error, as on the 0.9 broker."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="rebalance-tracker-admin")
        try:
            admin.create_topics([NewTopic(name, n, 1) for name, n in topics.items()])
        except KafkaError as exc:
            raise BrokerError(f"could not create topics {sorted(topics)}: {exc!r}") from None
        finally:
            admin.close()
        wait_for_leaders(self.bootstrap, topics)


def start_kraft_kafka(
    version: str | None = None,
    broker_settings: dict | None = None,
    timeout_s: float = 60.0,
    format_args: list[str] | None = None,
    ports: tuple[int, int] | None = None,
) -> KraftKafka:
    """Start Apache Kafka ``version`` (default ``DEFAULT_VERSION``; ``"4"``, ``"3.9"`` or an exact Maven version) as
    one KRaft node on free loopback ports; returns once it answers. ``broker_settings`` override server.properties
    (e.g. ``{"group.consumer.session.timeout.ms": 6000}``); ``format_args`` go to ``StorageTool format`` (e.g.
    ``["--add-scram", "SCRAM-SHA-512=[name=alice,password=...]"]``: SCRAM users exist from the start); ``ports``:
    (PLAINTEXT, controller) instead of free ones, for settings that name them (another listener beside them)."""
    version = resolve_version(version)
    classpath = str(kafka_jars(version) / "*")
    port, controller_port = ports or (free_port(), free_port())
    kafka = KraftKafka(version, port, controller_port, ScratchDir(f"apache-kafka-{version}-"))
    atexit.register(kafka.stop)
    workdir = kafka.workdir
    settings = {
        **default_settings(version, kafka.port, kafka.controller_port, str(workdir / "data")),
        **(broker_settings or {}),
    }
    server_props = write_properties(workdir / "server.properties", settings)
    logging = {"log4j2.configurationFile": write_properties(workdir / "log4j2.properties", LOG4J2)}
    try:
        # --standalone: this node is the whole controller quorum (its host:port goes into the storage).
        done = subprocess.run(
            [
                java(),
                "-Xmx256m",
                *JVM_FLAGS,
                *(f"-D{k}={v}" for k, v in logging.items()),
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                cluster_id(),
                "-c",
                str(server_props),
                *(format_args or []),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise BrokerError(f"formatting its storage failed: {(done.stdout + done.stderr).strip()[-2000:]}")
        kafka.start_java("kafka", classpath, "kafka.Kafka", [str(server_props)], "512m", logging)
        wait_until_ready(kafka.bootstrap, timeout_s, alive=kafka.running)
    except (BrokerError, subprocess.TimeoutExpired) as exc:
        tail = kafka.log_tail()
        kafka.stop()
        raise BrokerError(f"Apache Kafka {version} did not start: {exc}\n{tail}") from None
    return kafka


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rebalance-tracker broker --apache-kafka 4", description="Run Apache Kafka (KRaft, one node) on loopback."
    )
    parser.add_argument(
        "version",
        nargs="?",
        default=DEFAULT_VERSION,
        help=f"4 (= {DEFAULT_VERSION}), 3.9 (= {VERSIONS['3.9']}) or an exact kafka_2.13 version",
    )
    args = parser.parse_args(argv)
    kafka = start_kraft_kafka(args.version)
    try:
        print(
            f"Apache Kafka {kafka.version} (KRaft, one broker+controller) listening: bootstrap={kafka.bootstrap}; "
            f"Ctrl-C stops it\nTopics: create them with any admin client (e.g. kafka-topics.sh --bootstrap-server "
            f"{kafka.bootstrap} --create --topic my-topic --partitions 6), or producers create them with 1 "
            f"partition.\nGroup settings for quick tests: classic sessions from 1 s; consumer protocol: session "
            f"10 s, heartbeat 1 s (scratch dir {kafka.workdir})",
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
