"""SparkSession factory: fast local defaults, every one overridable for a real cluster.

Local defaults matter on a small machine: 200 shuffle partitions make each micro-batch ~20 s, and without a larger
thread stack ``query.stop()`` can overflow it.

On any master, Python workers run the driver's own interpreter unless ``PYSPARK_PYTHON`` or ``spark.pyspark.python``
says otherwise (PySpark's fallback is whatever ``python3`` is on PATH, which lacks pandas/pyarrow and this package).
On a master other than ``local[...]`` the driver also ships its own copy of the tracker's packages to the executors
(``addPyFile``), so executors run exactly the driver's code and need only the dependencies installed.

Spark's own Kafka connector (``streaming/spark/connector.py``) joins the session's ``spark.jars`` when its jars can be
had (fetched from Maven Central on first use); without them the session starts all the same and reads Kafka with the
Python source. Under ``spark-submit`` the JVM is up before this runs: give it the jars there (``--jars``).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

log = logging.getLogger(__name__)

# The packages executors import (pyproject's [tool.setuptools.packages.find]).
CODE_PACKAGES = ("streaming", "assignors", "offsets_store")

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
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
    # A long-running job's JVM: Spark keeps the last 1,000 jobs, stages and SQL executions for its UI and status
    # API even with the UI off, and a micro-batch a second adds ~1.5 of each: the live heap grew for the first
    # ~15 minutes (67 -> ~110 MB and on). 100 is the last minute or two.
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.sql.ui.retainedExecutions": "100",
    # What micro-batches leave on the heap for longer than a few young collections (~5 MB a minute: the retained
    # batches above, accumulators only weakly held) is promoted and piles up in the old generation until it is
    # full -- half an hour and more with the default heap, the JVM's resident memory climbing all the while. A full
    # collection every 2 minutes (Spark's ContextCleaner, which also frees what those weak references held; ~0.2 s
    # here) keeps the old generation at its live set plus 2 minutes of that.
    "spark.cleaner.periodicGC.interval": "2min",
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


def build_spark_session(
    app_name: str = "rebalance-tracker",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    quiet: bool = True,
    kafka_connector: bool = True,
):
    """Create (or reuse) the SparkSession.

    ``master`` defaults to ``local[2]`` unless one is already set (e.g. by ``spark-submit``); the local defaults apply
    only to a local master, and ``conf`` always wins. ``kafka_connector``: load Spark's Kafka connector where its
    jars can be had.
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
    os.environ["PYSPARK_PYTHON"] = worker_python(conf)
    if kafka_connector and not submitted:
        conf = connector_conf(dict(conf or {}))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("WARN")
    if not is_local_master(spark.sparkContext.master):
        ship_code(spark.sparkContext)
    return spark


def connector_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Spark's Kafka connector in ``spark.jars``; as it is, saying why, where the jars cannot be had."""
    from streaming.spark.connector import ConnectorUnavailable, connector_jars, with_connector

    try:
        return with_connector(conf, connector_jars())
    except ConnectorUnavailable as exc:
        log.warning("%s; reading Kafka with the Python source instead", exc)
        return conf


def worker_python(conf: Mapping[str, str] | None = None) -> str:
    """The Python that Spark's Python workers (executors', and the driver's own planner workers) run: the user's
    ``PYSPARK_PYTHON``, else ``spark.pyspark.python`` from ``conf``, else this interpreter -- the environment with
    pandas, pyarrow and this package. PySpark itself reads only the environment variable (spark-submit turns
    ``spark.pyspark.python`` into it), and falls back to ``python3`` on PATH."""
    return os.environ.get("PYSPARK_PYTHON") or (conf or {}).get("spark.pyspark.python") or sys.executable


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: Python workers are children of this driver's JVM.
    ``local-cluster[...]`` starts separate executor processes, like a real cluster."""
    return bool(re.fullmatch(r"local(\[[^\]]*\])?", master or ""))


def package_dirs(packages: tuple[str, ...] = CODE_PACKAGES) -> dict[str, Path]:
    """Where this process imports each package from (a checkout, an editable install or site-packages)."""
    dirs = {}
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"cannot find the package {name!r} to ship to the executors")
        dirs[name] = Path(list(spec.submodule_search_locations)[0])
    return dirs


def code_archive(directory: str | os.PathLike, packages: tuple[str, ...] = CODE_PACKAGES) -> Path:
    """A zip of the packages' ``.py`` files as this process imports them, named by its content (same code, same
    name, same bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, root in package_dirs(packages).items():
            for path in sorted(root.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                info = zipfile.ZipInfo(f"{name}/{path.relative_to(root).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    target = Path(directory) / f"rebalance-tracker-code-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return target


_shipped_dir: str | None = None


def ship_code(sc) -> str:
    """Add the driver's copy of the tracker's packages to the SparkContext (``addPyFile``): executors put it on
    their ``sys.path`` ahead of site-packages, so they import exactly the driver's code, whichever copy (if any) is
    installed where they run. Returns the archive's file name; shipping the same code again is a no-op."""
    global _shipped_dir
    if _shipped_dir is None:
        _shipped_dir = tempfile.mkdtemp(prefix="rebalance-tracker-code-")
        atexit.register(shutil.rmtree, _shipped_dir, True)
    archive = code_archive(_shipped_dir)
    if archive.name not in getattr(sc, "_python_includes", []):
        sc.addPyFile(str(archive))
    return archive.name
