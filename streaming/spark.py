"""SparkSession factory: fast local defaults, every one overridable for a real cluster.

Local defaults matter on a small machine: 200 shuffle partitions make each micro-batch ~20 s, and without a larger
thread stack ``query.stop()`` can overflow it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Mapping

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss16m",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # State for applyInPandasWithState is small per group; the default RocksDB-less provider is fine.
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}


class JavaNotFound(RuntimeError):
    pass


def check_java() -> str:
    """Return ``java -version`` output, or raise with a message a newcomer can act on."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaNotFound(
            "Spark needs Java 17 or 21, and no 'java' was found on PATH"
            + (f" nor in JAVA_HOME={java_home}" if java_home else "")
            + ". Install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless; macOS: brew install "
              "openjdk@17) or set JAVA_HOME."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    return (out.stderr or out.stdout).strip()


def parse_conf(pairs: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (from ``--conf k=v``) to a dict, with a clear error on a malformed pair."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf expects key=value, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf


def build_spark_session(app_name: str = "rebalance-tracker", master: str | None = None,
                        conf: Mapping[str, str] | None = None, quiet: bool = True):
    """Create (or reuse) the SparkSession.

    ``master`` defaults to ``local[2]`` unless one is already set (e.g. by ``spark-submit``); the local defaults apply
    only to a local master, and ``conf`` always wins.
    """
    check_java()
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SPARK_MASTER") or None
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: it owns master and conf
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.master(master or "local[2]")
    is_local = (master or "local").startswith("local") and not submitted
    if is_local:
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
        # Python workers must run this interpreter (the venv with pandas/pyarrow), not whatever python3 is on PATH;
        # PySpark reads only the environment variable for that.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("WARN")
    return spark
