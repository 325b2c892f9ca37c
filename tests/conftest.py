"""Session fixtures: one Kafka broker and one SparkSession per pytest run."""
from __future__ import annotations

import logging
import uuid

import pytest

log = logging.getLogger("rebalance_tracker.tests")


@pytest.fixture(scope="session")
def kafka_bootstrap(request):
    """A reachable Kafka: KAFKA_BOOTSTRAP, else testcontainers (if Docker answers), else the bundled broker."""
    from streaming.broker import kafka_broker

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
    from streaming.spark import build_spark_session

    session = build_spark_session(
        "rebalance-tracker-tests",
        conf={"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse"))},
    )
    yield session
    session.stop()
