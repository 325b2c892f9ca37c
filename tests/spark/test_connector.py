"""Spark's Kafka connector: the version pyspark is pinned to is the one whose connector Maven Central serves, the
session loads it, and only the connector's own jars join Spark's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import streaming
from streaming.spark.connector import (
    CONNECTOR,
    ConnectorUnavailable,
    artifact_id,
    connector_jars,
    spark_jars_dir,
    spark_version,
    with_connector,
)

PYPROJECT = Path(streaming.__file__).resolve().parent.parent / "pyproject.toml"


def fetched_jars() -> list[Path]:
    try:
        return connector_jars()
    except ConnectorUnavailable as exc:
        pytest.skip(str(exc))


def test_pyspark_is_pinned_to_the_connectors_version():
    """The connector is built against Spark's internals: pyspark is pinned to one exact version, the installed one,
    and the connector fetched is that version's."""
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if d.startswith("pyspark")]
    match = re.fullmatch(r"pyspark(\[[\w,]+\])?==(\d+\.\d+\.\d+)", pin)
    assert match, f"pyspark must be pinned to one version, not {pin!r}"
    assert match.group(2) == spark_version()
    names = {j.name for j in fetched_jars()}
    assert f"{CONNECTOR}_2.13-{spark_version()}.jar" in names


def test_only_the_connectors_own_jars_are_added():
    names = {artifact_id(j.name) for j in fetched_jars()}
    shipped = {artifact_id(j.name) for j in spark_jars_dir().glob("*.jar")}
    assert names == {f"{CONNECTOR}_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2"}
    assert not names & shipped


def test_jar_names_and_spark_jars():
    assert artifact_id("scala-library-2.13.18.jar") == "scala-library"
    assert artifact_id("spark-tags_2.13-4.2.0.jar") == "spark-tags_2.13"
    assert artifact_id("zstd-jni-1.5.7-7.jar") == "zstd-jni"
    assert artifact_id("log4j-slf4j2-impl-2.25.4.jar") == "log4j-slf4j2-impl"
    assert artifact_id("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    jars = [Path("/c/a.jar"), Path("/c/b.jar")]
    assert with_connector({}, jars) == {"spark.jars": "/c/a.jar,/c/b.jar"}
    assert with_connector({"spark.jars": "/u/mine.jar", "x": "1"}, jars) == {
        "spark.jars": "/u/mine.jar,/c/a.jar,/c/b.jar",
        "x": "1",
    }


@pytest.mark.spark
def test_the_session_runs_the_connector_of_its_own_spark_version(spark):
    fetched = fetched_jars()
    jvm = spark.sparkContext._jvm
    provider = jvm.org.apache.spark.util.Utils.classForName(
        "org.apache.spark.sql.kafka010.KafkaSourceProvider", False, False
    )
    location = Path(provider.getProtectionDomain().getCodeSource().getLocation().getPath())
    assert location in fetched and location.name == f"{CONNECTOR}_2.13-{spark.version}.jar"
    assert spark.version == spark_version()
