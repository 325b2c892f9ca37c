"""Every command against a secured Kafka 4.x listener: SASL (SCRAM-SHA-512 and PLAIN) over TLS, certificates made by
the test (``tests/brokers/secured_kafka.py``), the client settings in a ``--command-config`` file as Kafka's own tools
take them (a JAAS line, a PEM trust store) or under kafka-python's names. ``simulate`` publishes a feed, a real consumer
group commits, ``run`` (one Spark start) tracks the feed into the outputs topic and a Kafka store, ``offsets`` reads
that store, ``cluster-feed`` reads the broker's ``__consumer_offsets``: all through the secured listener. Wrong
credentials, or a CA that did not sign the broker's certificate, give one clear line and exit 2; no password appears in
what the commands print, in what they write to Kafka, in the checkpoint or its settings file.
"""

from __future__ import annotations

import json
import shutil
import uuid
from types import SimpleNamespace

import pytest

from streaming.kafka_client import kafka_conf
from streaming.cli import main as cli
from tests.brokers.secured_kafka import SCRAM_USER, client_properties, start_secured_kafka

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """One Kafka 4 broker with a SASL_SSL listener, and the client files the tests hand to the commands."""
    pytest.importorskip("cryptography", reason="the test makes its certificates with the cryptography package")
    from streaming.local.apache_kafka_kraft import kafka_jars
    from streaming.local.broker import BrokerError

    if shutil.which("java") is None:
        pytest.skip("Apache Kafka needs Java and no 'java' is on PATH")
    try:
        kafka_jars()
    except BrokerError as exc:
        pytest.skip(f"Apache Kafka 4 is not available here: {exc}")
    directory = tmp_path_factory.mktemp("secured-kafka")
    broker = start_secured_kafka(directory)
    try:
        files = SimpleNamespace(
            scram=client_properties(broker, directory / "scram.properties"),  # Java's names
            plain=client_properties(broker, directory / "plain.properties", "PLAIN", style="python"),
            wrong=client_properties(broker, directory / "wrong.properties", password="not-the-password"),
            untrusted=directory / "untrusted.properties",
        )
        files.untrusted.write_text(
            files.plain.read_text().replace(str(broker.ca_file), "/etc/ssl/certs/ca-certificates.crt")
        )
        yield SimpleNamespace(
            broker=broker, bootstrap=broker.bootstrap, files=files, secrets=list(broker.secrets.values())
        )
    finally:
        broker.stop()


def python_client(secured, path) -> dict:
    return kafka_conf.to_kwargs(kafka_conf.read_properties(str(path)))


def assert_no_secret(secured, *texts) -> None:
    for text in texts:
        for secret in secured.secrets:
            assert secret not in text


def read_topic(secured, topic: str) -> list:
    from tests.broker_history import read_feed

    return read_feed(secured.bootstrap, topic, python_client(secured, secured.files.scram))


@pytest.mark.parametrize("command", ["simulate", "cluster-feed", "offsets", "run"])
def test_a_refused_client_gets_one_clear_line(secured, command, capfd, tmp_path):
    args = {
        "simulate": ["--bootstrap", secured.bootstrap, "--topic", "never", "--duration", "1"],
        "cluster-feed": ["--bootstrap", secured.bootstrap, "--events-topic", "never"],
        "offsets": ["--store", f"kafka:{secured.bootstrap}/never"],
        "run": ["--bootstrap", secured.bootstrap, "--store", "", "--checkpoint", str(tmp_path / "checkpoint")],
    }
    # (A refused SASL attempt may end as a bare disconnect before the broker's answer is read: then that is said.)
    for config, says in (
        (
            secured.files.wrong,
            (
                f"refused the credentials of user '{SCRAM_USER}' (SASL_SSL, SCRAM-SHA-512)",
                f"closed the connection while authenticating user '{SCRAM_USER}' (SASL_SSL, SCRAM-SHA-512)",
            ),
        ),
        (secured.files.untrusted, ("the TLS handshake with",)),
    ):
        assert cli.main([command, *args[command], "--command-config", str(config)]) == 2
        out, err = capfd.readouterr()
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"{command}: ") and any(s in lines[0] for s in says), err
        assert_no_secret(secured, out, err)
    assert not (tmp_path / "checkpoint").exists()  # refused before anything started


def test_every_command_works_through_the_secured_listener(secured, spark, capfd, tmp_path):
    from kafka import KafkaConsumer

    suffix = uuid.uuid4().hex[:8]
    events, outputs, store_topic, feed = f"events-{suffix}", f"out-{suffix}", f"store-{suffix}", f"cf-{suffix}"
    scram, plain = str(secured.files.scram), str(secured.files.plain)
    printed = []

    def command(*argv: str) -> int:
        code = cli.main(list(argv))
        printed.extend(capfd.readouterr())
        return code

    # simulate: a feed of classic groups (SCRAM, Java's names)
    assert (
        command(
            "simulate",
            "--bootstrap",
            secured.bootstrap,
            "--command-config",
            scram,
            "--topic",
            events,
            "--groups",
            "2",
            "--members",
            "2",
            "--speed",
            "20",
            "--duration",
            "3",
            "--seed",
            "7",
        )
        == 0
    )
    feed_events = read_topic(secured, events)
    assert {e["type"] for e in feed_events} >= {"join", "sync", "commit"}

    # a real group commits through the listener (PLAIN, kafka-python's names)
    group = f"secured-{suffix}"
    consumer = KafkaConsumer(
        events,
        bootstrap_servers=secured.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **python_client(secured, secured.files.plain),
    )
    try:
        assert consumer.poll(timeout_ms=10_000, max_records=5) and not consumer.commit()
    finally:
        consumer.close()

    # run: the tracker job (one Spark start), its outputs and a Kafka store on the secured broker
    checkpoint = tmp_path / "checkpoint"
    assert (
        command(
            "run",
            "--bootstrap",
            secured.bootstrap,
            "--command-config",
            scram,
            "--events-topic",
            events,
            "--assignments-topic",
            outputs,
            "--store",
            f"kafka:{secured.bootstrap}/{store_topic}",
            "--checkpoint",
            str(checkpoint),
            "--time-mode",
            "event",
            "--watermark-delay",
            "1 second",
            "--trigger",
            "500ms",
            "--duration",
            "15",
        )
        == 0
    )
    told = [o for o in read_topic(secured, outputs)]
    tracked = {o["group_id"] for o in told if o["type"] == "rebalance"}
    assert tracked == {e["group_id"] for e in feed_events if e["type"] == "join"}

    # offsets: the Kafka store, read through the listener (PLAIN)
    assert command("offsets", "--store", f"kafka:{secured.bootstrap}/{store_topic}", "--command-config", plain) == 0
    assert all(g in printed[-2] for g in tracked)

    # cluster-feed: the broker's own __consumer_offsets, the real group's records among them
    assert (
        command("cluster-feed", "--bootstrap", secured.bootstrap, "--command-config", plain, "--events-topic", feed)
        == 0
    )
    from_cluster = [e for e in read_topic(secured, feed) if e["group_id"] == group]
    assert {e["type"] for e in from_cluster} >= {"join", "sync", "commit"}

    # No secret anywhere: what the commands printed, what they wrote, the checkpoint and its settings file.
    assert (checkpoint / "tracker-settings.json").exists()
    written = [json.dumps(read_topic(secured, t)) for t in (events, outputs, feed)]
    stored = [p.read_bytes().decode("utf-8", "replace") for p in checkpoint.rglob("*") if p.is_file()]
    assert_no_secret(secured, *printed, *written, *stored)
    from offsets_store import open_store

    store = open_store(f"kafka:{secured.bootstrap}/{store_topic}", python_client(secured, secured.files.scram))
    try:
        records = store.load_records()
    finally:
        store.close()
    assert {r["group_id"] for r in records} >= tracked
    assert_no_secret(secured, json.dumps(records, default=str))
