"""Jars from Maven Central into the project's cache, with the machine's ``mvn``.

``fetch_jars(name, artifacts)`` writes a throw-away POM listing the artifacts and lets Maven's dependency plugin copy
them with their runtime dependencies into ``<cache>/<name>/`` (Maven's own ``~/.m2`` keeps the downloads, so a second
folder from the same artifacts costs no network), leaving out the artifact ids in ``exclude`` (jars the class path
they join has already). The folder appears in one step, complete or not at all: an
interrupted or concurrent fetch never leaves half a class path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterable
from xml.sax.saxutils import escape

from streaming.local.jvm import cache_dir

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class MavenError(RuntimeError):
    """The jars could not be fetched (no ``mvn``, no network, an unknown artifact)."""


def _pom(artifacts: list[str]) -> str:
    dependencies = []
    for coordinates in artifacts:
        group, artifact, version = coordinates.split(":")
        dependencies.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}"
            f"</artifactId><version>{escape(version)}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>rebalance-tracker</groupId><artifactId>jar-fetch</artifactId><version>0</version>"
        f"<dependencies>{''.join(dependencies)}</dependencies></project>\n"
    )


def fetch_jars(name: str, artifacts: list[str], timeout_s: float = 600.0, exclude: Iterable[str] = ()) -> Path:
    """The folder ``<cache>/<name>`` holding ``artifacts`` (``group:artifact:version``) and their runtime
    dependencies but those whose artifact id is in ``exclude``, fetched on first use. ``name`` must change whenever
    ``artifacts`` or ``exclude`` do."""
    target = cache_dir() / name
    if target.is_dir():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(f"{name} comes from Maven Central and no 'mvn' is on PATH (install Maven 3)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=target.parent) as scratch:
        pom = Path(scratch) / "pom.xml"
        pom.write_text(_pom(artifacts))
        jars = Path(scratch) / "jars"
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={jars}",
        ]
        if exclude:
            command.append(f"-DexcludeArtifactIds={','.join(sorted(exclude))}")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise MavenError(f"mvn did not fetch {name} within {timeout_s:.0f}s") from None
        if done.returncode != 0 or not jars.is_dir():
            output = (done.stdout + done.stderr).strip()[-1500:]
            raise MavenError(f"mvn could not fetch {', '.join(artifacts)}:\n{output}")
        try:
            os.rename(jars, target)  # one step; if a concurrent fetch got there first, its folder stands
        except OSError:
            if not target.is_dir():
                raise
    return target
