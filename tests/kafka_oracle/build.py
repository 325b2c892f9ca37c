"""Compile the oracle programs (``java/*.java``) against Kafka's own jars, to check our code against Kafka's classes.

    python -m tests.kafka_oracle.build OUT_DIR [VERSION]

The jars are the Apache Kafka broker's (``streaming/local/apache_kafka_kraft.py``: ``kafka_2.13`` and its runtime
dependencies from Maven Central, in the project's cache): ``kafka-clients`` (the client assignors, ``Utils``,
``Uuid``, ``ConsumerProtocol``), ``kafka-group-coordinator`` and its ``-api`` (the coordinator's assignors, the
generated ``__consumer_offsets`` record classes and the helpers the coordinator writes them with). Needs ``javac``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from streaming.local.apache_kafka_kraft import kafka_jars, resolve_version

HERE = Path(__file__).resolve().parent


class OracleUnavailable(RuntimeError):
    """No JDK, or no Kafka jars (no mvn, Maven Central unreachable): the reason, for a skip."""


def build(out: str | Path, version: str | None = None, programs: list[str] | None = None) -> str:
    """Compile the oracles (``programs``: class names, default every one) against Kafka ``version`` (default the
    broker's) into ``out``; returns the class path to run them with."""
    from streaming.local.broker import BrokerError

    javac = shutil.which("javac")
    if javac is None or shutil.which("java") is None:
        raise OracleUnavailable("Kafka's classes answer through a JVM and no JDK (javac, java) is on PATH")
    try:
        jars = kafka_jars(resolve_version(version))
    except BrokerError as exc:
        raise OracleUnavailable(str(exc)) from None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    classpath = f"{out}:{jars}/*"
    sources = sorted(str(p) for p in (HERE / "java").glob("*.java") if programs is None or p.stem in programs)
    done = subprocess.run(
        [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", f"{jars}/*", *sources],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed on the oracles:\n{done.stdout}{done.stderr}")
    return classpath


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    print(build(*sys.argv[1:]))
