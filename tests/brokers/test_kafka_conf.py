"""Kafka client settings: Kafka's names to kafka-python's arguments, secrets never shown, and every command and API
that talks to Kafka hands them to its clients."""

from __future__ import annotations

import kafka
import pytest

from streaming.kafka_client import kafka_conf
from streaming.kafka_client.kafka_conf import describe, for_client, read_properties, to_kwargs

SECRET = "s3cr3t-9137"


def test_kafka_names_become_typed_kafka_python_arguments():
    assert to_kwargs(
        {
            "api.version": "0.9",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.plain.username": "alice",
            "sasl.plain.password": "12345",
            "ssl.cafile": "/ca.pem",
            "client.id": "007",
            "request.timeout.ms": "5000",
            "enable.auto.commit": "FALSE",
            "acks": "all",
            "receive.buffer.bytes": "65536",
            "retries": "3",
        }
    ) == {
        "api_version": (0, 9),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "12345",  # typed by the setting, not the text
        "ssl_cafile": "/ca.pem",
        "client_id": "007",
        "request_timeout_ms": 5000,
        "enable_auto_commit": False,
        "acks": "all",
        "receive_buffer_bytes": 65536,
        "retries": 3,
    }
    assert to_kwargs({"api.version": "0.9.0"}) == {"api_version": (0, 9, 0)}
    assert to_kwargs({"api.version": "auto"}) == {"api_version": None}
    assert to_kwargs({"api_version": [0, 9]}) == {"api_version": (0, 9)}  # already kafka-python's (e.g. JSON)


def test_java_client_settings_are_read_where_kafka_python_has_them():
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="{SECRET}\\"x";'
    assert to_kwargs({"sasl.jaas.config": jaas, "ssl.endpoint.identification.algorithm": ""}) == {
        "sasl_plain_username": "bob",
        "sasl_plain_password": f'{SECRET}"x',
        "ssl_check_hostname": False,
    }
    with pytest.raises(ValueError, match="PEM"):
        to_kwargs({"ssl.truststore.location": "/x.jks"})
    with pytest.raises(ValueError, match="PEM"):
        to_kwargs({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/me.p12"})
    # Java's PEM stores are the files kafka-python reads: one file serves both (Spark's own connector included).
    assert to_kwargs(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.password": "",
            "ssl.keystore.type": "pem",
            "ssl.keystore.location": "/me.pem",
            "ssl.key.password": SECRET,
        }
    ) == {"ssl_cafile": "/ca.pem", "ssl_certfile": "/me.pem", "ssl_password": SECRET}
    assert "****" in describe({"ssl.key.password": SECRET}) and SECRET not in describe({"ssl.key.password": SECRET})


@pytest.mark.parametrize(
    "props,match",
    [
        ({"request.timeout.msec": "1"}, "unknown Kafka client setting"),
        ({"enable.auto.commit": "yes"}, "true or false"),
        ({"request.timeout.ms": "soon"}, "number"),
        ({"api.version": "zero.nine"}, "version"),
        ({"partition.assignment.strategy": "range"}, "unknown"),
    ],
)
def test_settings_kafka_python_cannot_take_are_refused_clearly(props, match):
    with pytest.raises(ValueError, match=match):
        to_kwargs(props)


def test_secrets_are_never_shown():
    shown = describe(
        {
            "api.version": (0, 9),
            "sasl.plain.password": SECRET,
            "ssl.password": SECRET,
            "sasl.jaas.config": SECRET,
            "sasl.oauth.token": SECRET,
            "client.id": "me",
        }
    )
    assert SECRET not in shown and "api.version=0.9" in shown and "client.id=me" in shown
    with pytest.raises(ValueError) as caught:
        kafka_conf.parse_pairs([SECRET])
    assert SECRET not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        to_kwargs({"sasl.plain.password.x": SECRET})
    assert SECRET not in str(caught.value)


def test_a_properties_file_like_kafkas_command_config(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "# a Kafka tool's --command-config\n! also a comment\n\nsecurity.protocol = SASL_PLAINTEXT\n"
        "sasl.mechanism:PLAIN\nclient.id rebalance\nsasl.jaas.config=org.apache.kafka.common.security."
        'plain.PlainLoginModule required \\\n    username="alice" password="pw";\n'
    )
    props = read_properties(str(path))
    assert props["security.protocol"] == "SASL_PLAINTEXT" and props["sasl.mechanism"] == "PLAIN"
    assert props["client.id"] == "rebalance"
    assert to_kwargs(props)["sasl_plain_username"] == "alice"
    parser = __import__("argparse").ArgumentParser()
    kafka_conf.add_arguments(parser)
    args = parser.parse_args(["--command-config", str(path), "--kafka-conf", "client.id=cli"])
    assert kafka_conf.from_args(args)["client.id"] == "cli"  # --kafka-conf wins over the file


def test_each_client_gets_the_settings_it_takes():
    client = {
        "api_version": (0, 9),
        "fetch_max_wait_ms": 10,
        "linger_ms": 7,
        "client_id": "mine",
        "bootstrap_servers": "elsewhere:9092",
    }
    consumer = for_client(kafka.KafkaConsumer, client, bootstrap_servers="here:9092", client_id="ours")
    assert consumer == {
        "bootstrap_servers": "here:9092",
        "client_id": "mine",
        "api_version": (0, 9),
        "fetch_max_wait_ms": 10,
    }
    assert "fetch_max_wait_ms" not in for_client(kafka.KafkaProducer, client)
    assert kafka_conf.spark_options({"api.version": "0.9", "security.protocol": "SSL"}) == {
        "kafka.api.version": "0.9",
        "kafka.security.protocol": "SSL",
    }


# ---------------------------------------------------------------- settings reach the clients
class Stop(Exception):
    pass


@pytest.fixture
def clients(monkeypatch):
    """kafka-python's clients replaced by recorders that stop the caller at construction."""
    made: dict[str, list[dict]] = {"KafkaConsumer": [], "KafkaProducer": [], "KafkaAdminClient": []}

    def recorder(name: str):
        class Recorder:
            DEFAULT_CONFIG = getattr(kafka, name).DEFAULT_CONFIG

            def __init__(self, **kwargs):
                made[name].append(kwargs)
                raise Stop

        return Recorder

    for name in made:
        monkeypatch.setattr(kafka, name, recorder(name))
    return made


SETTINGS = [
    "--kafka-conf",
    "api.version=0.9",
    "--kafka-conf",
    "security.protocol=SASL_PLAINTEXT",
    "--kafka-conf",
    "sasl.mechanism=PLAIN",
    "--kafka-conf",
    "sasl.plain.username=alice",
    "--kafka-conf",
    f"sasl.plain.password={SECRET}",
]
EXPECTED = {
    "api_version": (0, 9),
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "alice",
    "sasl_plain_password": SECRET,
}
CLIENT = dict(EXPECTED)


def reached(made: dict, kind: str) -> bool:
    return any(all(kw.get(k) == v for k, v in EXPECTED.items()) for kw in made[kind])


def test_cluster_feed_reader_and_command(clients, capsys):
    from streaming.feeds import cluster_feed

    with pytest.raises(Stop):
        next(cluster_feed.read_offsets_topic("h:1", client=CLIENT))
    assert reached(clients, "KafkaConsumer")
    with pytest.raises(Stop):
        cluster_feed.main(["--bootstrap", "h:1"] + SETTINGS)
    assert reached(clients, "KafkaProducer")
    err = capsys.readouterr().err
    assert "api.version=0.9" in err and SECRET not in err


def test_cluster_feed_events_topic_on_another_cluster_takes_its_own_settings(clients):
    from streaming.feeds import cluster_feed

    with pytest.raises(Stop):
        cluster_feed.main(
            [
                "--bootstrap",
                "h:1",
                "--feed-bootstrap",
                "f:1",
                "--kafka-conf",
                "api.version=0.9",
                "--feed-kafka-conf",
                "api.version=3.7",
            ]
        )
    (producer,) = clients["KafkaProducer"]
    assert producer["bootstrap_servers"] == "f:1" and producer["api_version"] == (3, 7)


def test_the_observed_clusters_settings_never_reach_another_clusters_events_topic(clients, capsys):
    """Issue #34: a 0.9 cluster's api.version=0.9 handed to the feed broker's producer made it write nothing."""
    from streaming.feeds import cluster_feed

    with pytest.raises(Stop):
        cluster_feed.main(["--bootstrap", "h:1", "--feed-bootstrap", "f:1"] + SETTINGS)
    (producer,) = clients["KafkaProducer"]
    assert producer["bootstrap_servers"] == "f:1" and not set(EXPECTED) & set(producer)
    assert "events topic on f:1, with no client settings" in capsys.readouterr().err
    with pytest.raises(Stop):  # the same cluster named twice is one cluster: its settings
        cluster_feed.main(["--bootstrap", "h:1", "--feed-bootstrap", "h:1"] + SETTINGS)
    assert reached({"KafkaProducer": clients["KafkaProducer"][1:]}, "KafkaProducer")


def test_simulate(clients):
    from streaming.feeds import publish

    with pytest.raises(Stop):
        publish.main(["--bootstrap", "h:1", "--duration", "0"] + SETTINGS)
    assert reached(clients, "KafkaProducer")


def test_offsets_command_and_kafka_store(clients):
    from offsets_store import describe

    with pytest.raises(Stop):
        describe.main(["--store", "kafka:h:1/offsets"] + SETTINGS)
    assert reached(clients, "KafkaAdminClient")
    with pytest.raises(Stop):
        describe.log_end_offsets("h:1", [("t", 0)], client=CLIENT)
    assert reached(clients, "KafkaConsumer")


def test_kafka_store_clients(clients, monkeypatch):
    from offsets_store.kafka_store import KafkaStore

    monkeypatch.setattr(KafkaStore, "_ensure_topic", lambda self, rf: None)
    store = KafkaStore("h:1", "offsets", client=CLIENT)
    with pytest.raises(Stop):
        _ = store.producer
    with pytest.raises(Stop):
        store._read_all()
    assert reached(clients, "KafkaProducer") and reached(clients, "KafkaConsumer")


def test_sink_watcher_and_topic_creation(clients):
    from streaming.feeds.log_end_sampler import LogEndSampler
    from streaming.feeds.metadata_watch import TopicMetadataWatcher
    from streaming.kafka_client.topics import ensure_topics
    from streaming.spark.sinks import TrackerSink

    with pytest.raises(Stop):
        _ = TrackerSink(bootstrap="h:1", producer_config=CLIENT).producer
    watcher = TopicMetadataWatcher("h:1", "events", client=CLIENT)
    watcher.watched.add("t")
    with pytest.raises(Stop):
        watcher.poll_once()
    sampler = LogEndSampler("h:1", "events", client=CLIENT)
    sampler.observe([{"type": "offset_commit", "group_id": "g", "topic": "t"}])
    with pytest.raises(Stop):
        sampler.sample_once()
    with pytest.raises(Stop):  # its metadata look-up first, ...
        ensure_topics("h:1", {"t": 1}, CLIENT)

    class NoTopics:  # ... then, as no topic exists, the admin client that creates them
        DEFAULT_CONFIG = kafka.KafkaConsumer.DEFAULT_CONFIG

        def __init__(self, **kwargs):
            clients["KafkaConsumer"].append(kwargs)

        def topics(self):
            return set()

        def close(self):
            pass

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka, "KafkaConsumer", NoTopics)
        with pytest.raises(Stop):
            ensure_topics("h:1", {"t": 1}, CLIENT)
    assert all(reached(clients, kind) for kind in clients)


def test_run_gives_them_to_the_python_clients_and_to_the_spark_source(clients, monkeypatch):
    import streaming.spark.kafka_source as kafka_source
    import streaming.tracker as run

    seen = {}

    def read_kafka_stream(spark, bootstrap, topics, **kw):
        seen.update(kw["extra_options"])
        raise Stop

    from streaming.kafka_client import broker_features

    monkeypatch.setattr(
        broker_features,
        "api_version",
        lambda bootstrap, client=None, **kw: seen.update(version_client=client) or (0, 9),
    )
    monkeypatch.setattr(
        run, "ensure_topics", lambda bootstrap, topics, client, can_create=None: seen.update(client=client)
    )
    monkeypatch.setattr(run, "TopicMetadataWatcher", lambda *a, **kw: type("W", (), {"start": lambda self: self})())
    monkeypatch.setattr(run, "LogEndSampler", lambda *a: type("S", (), {"start": lambda self: self})())
    monkeypatch.setattr(kafka_source, "read_kafka_stream", read_kafka_stream)
    props = kafka_conf.parse_pairs([s for s in SETTINGS if s != "--kafka-conf"])
    with pytest.raises(Stop):
        run.start_tracker(None, run.TrackerConfig(bootstrap="h:1", store=None, kafka=props))
    assert seen["client"] == seen["version_client"] == EXPECTED
    assert seen["kafka.api.version"] == "0.9" and seen["kafka.sasl.plain.password"] == SECRET
    # ... and the bundled Python source turns the kafka.* options back into the same arguments.
    options = {k: v for k, v in seen.items() if k.startswith("kafka.")} | {"kafka.bootstrap.servers": "h:1"}
    # plus the source's own reconnect backoff (it waits out a broker outage, reconnecting within a second)
    assert kafka_source.client_config(options) == {"reconnect_backoff_max_ms": 1000} | EXPECTED | {
        "bootstrap_servers": "h:1"
    }
