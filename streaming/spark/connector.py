"""Spark's own Kafka connector (``format("kafka")``), fetched from Maven Central at the running Spark's version.

``org.apache.spark:spark-sql-kafka-0-10_<scala>`` is built against Spark's internals: only the connector of the
exact Spark version works (pyproject pins pyspark to a version whose connector Maven Central serves). Its POM pulls
``spark-token-provider-kafka-0-10``, ``kafka-clients`` and ``commons-pool2``, and also jars every Spark distribution
ships (``hadoop-client-runtime``/``-api``, ``scala-library``, ``spark-tags``, ``slf4j-api``, ``lz4-java``...):
those are left out, so only the connector's own jars join Spark's class path and no second copy of a class Spark
has can shadow it. ``kafka-clients`` here is the connector's (3.9.x), apart from the local Kafka 4 broker's jars
(``streaming/local/apache_kafka_kraft.py``), which run in their own JVM.

The jars land in the project's cache (``$REBALANCE_TRACKER_CACHE`` or ``~/.cache/rebalance-tracker``) on first use
(``streaming/local/maven.py``; ~8 MB, a few seconds) and are loaded with ``spark.jars`` before the session starts;
the driver serves them to the executors of a cluster. Under ``spark-submit`` the JVM starts before this package runs:
``spark-submit --jars "$(rebalance-tracker kafka-connector)" ...`` gives it the same jars (or Spark's own
``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<version>``, which resolves them with Ivy).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

CONNECTOR = "spark-sql-kafka-0-10"
PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


class ConnectorUnavailable(RuntimeError):
    """The connector's jars could not be had here (no ``mvn``, no network, no connector for this Spark)."""


def spark_jars_dir() -> Path:
    """The installed Spark distribution's jars (pip's pyspark ships them in its package folder)."""
    from streaming.local.spark_cluster import spark_home

    return spark_home() / "jars"


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def artifact_id(jar_name: str) -> str:
    """``scala-library-2.13.18.jar`` -> ``scala-library``: the name up to its version, the first ``-`` followed by
    digits and a dot (``spark-sql-kafka-0-10_2.13-4.2.0.jar`` -> ``spark-sql-kafka-0-10_2.13``)."""
    match = re.match(r"(.+?)-\d+\.", jar_name)
    return match.group(1) if match else jar_name.removesuffix(".jar")


def scala_version(jars: Path) -> str:
    """Spark's Scala binary version, from its core jar's name (``spark-core_2.13-4.2.0.jar``)."""
    for jar in jars.glob("spark-core_*.jar"):
        return artifact_id(jar.name).partition("_")[2]
    raise ConnectorUnavailable(f"no spark-core jar in {jars}: not a Spark distribution")


def connector_jars(version: str | None = None) -> list[Path]:
    """The connector's own jars for Spark ``version`` (default: the installed pyspark's), fetched on first use."""
    from streaming.local.maven import MavenError, fetch_jars

    version = version or spark_version()
    jars = spark_jars_dir()
    scala = scala_version(jars)
    shipped = {artifact_id(j.name) for j in jars.glob("*.jar")}
    try:
        folder = fetch_jars(
            f"spark-kafka-connector-{version}_{scala}",
            [f"org.apache.spark:{CONNECTOR}_{scala}:{version}"],
            exclude=shipped,
        )
    except MavenError as exc:
        raise ConnectorUnavailable(f"Spark's Kafka connector {version} comes from Maven Central: {exc}") from None
    return sorted(folder.glob("*.jar"))


def with_connector(conf: dict[str, str], jars: list[Path]) -> dict[str, str]:
    """``conf`` with the connector's jars added to ``spark.jars`` (after any the user gave)."""
    given = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
    return conf | {"spark.jars": ",".join([*given, *(str(j) for j in jars if str(j) not in given)])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="rebalance-tracker kafka-connector",
        description="Print the jars of Spark's Kafka connector for the installed pyspark, "
        "comma-separated (fetched from Maven Central on first use), for "
        "spark-submit --jars.",
    )
    p.parse_args(argv)
    try:
        jars = connector_jars()
    except ConnectorUnavailable as exc:
        print(f"kafka-connector: {exc}", file=sys.stderr)
        return 1
    print(",".join(str(j) for j in jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
