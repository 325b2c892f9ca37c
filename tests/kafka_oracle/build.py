"""Compile Kafka's own assignors from a Kafka source tree, to check ours against them (``tests/kafka_oracle``).

    python -m tests.kafka_oracle.build KAFKA_SOURCE SLF4J_API_JAR OUT_DIR

``KAFKA_SOURCE`` is a Kafka checkout (work tree) or a bare git repository (its ``HEAD`` is used). Only the assignors
and the few classes they need are compiled -- not the clients module, whose generated message classes need Kafka's
Gradle build. Two of Kafka's files are cut down on the way, in a scratch directory: ``ConsumerPartitionAssignor``
loses ``getAssignorInstances`` (class loading through Kafka's ``Utils``), and ``CooperativeStickyAssignor`` loses its
user-data schema (the generation travels in ``Subscription.generationId`` here, as in ConsumerProtocol v2+). Two of
our own small classes stand in for Kafka's ``Utils`` and ``ConsumerGroupMetadata`` (``java/shim``).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLIENTS = "clients/src/main/java/org/apache/kafka/"
GROUP = "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/"
GROUP_API = "group-coordinator/group-coordinator-api/src/main/java/org/apache/kafka/coordinator/group/api/assignor/"
FILES = [
    *(CLIENTS + f"clients/consumer/{c}.java" for c in (
        "ConsumerPartitionAssignor", "CooperativeStickyAssignor", "RangeAssignor", "RoundRobinAssignor")),
    *(CLIENTS + f"clients/consumer/internals/{c}.java" for c in (
        "AbstractStickyAssignor", "AbstractPartitionAssignor", "Utils")),
    *(CLIENTS + f"common/{c}.java" for c in (
        "Cluster", "ClusterResource", "Configurable", "KafkaException", "Node", "PartitionInfo", "TopicIdPartition",
        "TopicPartition", "Uuid", "annotation/InterfaceStability", "errors/ApiException", "utils/CollectionUtils",
        "utils/CircularIterator")),
    GROUP + "modern/MemberAssignmentImpl.java",
    "server-common/src/main/java/org/apache/kafka/server/common/TopicIdPartition.java",
]
DIRECTORIES = [GROUP + "assignor/", GROUP_API]   # every file in them


class KafkaSource:
    """Reads files from a work tree or from a bare repository's HEAD."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.work_tree = (self.root / "clients").is_dir()

    def read(self, path: str) -> str:
        if self.work_tree:
            return (self.root / path).read_text()
        return subprocess.run(["git", "--git-dir", str(self.root), "show", f"HEAD:{path}"], check=True,
                              capture_output=True, text=True).stdout

    def list(self, directory: str) -> list[str]:
        if self.work_tree:
            return [str(p.relative_to(self.root)) for p in sorted((self.root / directory).glob("*.java"))]
        out = subprocess.run(["git", "--git-dir", str(self.root), "ls-tree", "--name-only", "HEAD", directory],
                             check=True, capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line.endswith(".java")]


def _cut_block(text: str, start: int) -> tuple[int, int]:
    """Span of the brace block opening at or after ``start``."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return i, j + 1
    raise ValueError("unbalanced braces")


def _patch_assignor_interface(text: str) -> str:
    signature = text.index("static List<ConsumerPartitionAssignor> getAssignorInstances")
    _, end = _cut_block(text, signature)
    head = text.rindex("/**", 0, signature)   # its javadoc goes too
    return text[:head] + text[end:].lstrip("\n")


def _patch_cooperative_sticky(text: str) -> str:
    text = re.sub(r"import org\.apache\.kafka\.common\.protocol\.types\.\w+;\n", "", text)
    text = re.sub(r"private static final Schema COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0 = new Schema\([^;]*;", "",
                  text)
    start, end = _cut_block(text, text.index("public ByteBuffer subscriptionUserData"))
    text = text[:start] + "{\n        return null;\n    }" + text[end:]
    decode = text.index("try {", text.index("protected MemberData memberData"))
    _, try_end = _cut_block(text, decode)
    _, catch_end = _cut_block(text, try_end)
    return text[:decode] + "encodedGeneration = Optional.of(DEFAULT_GENERATION);" + text[catch_end:]


PATCHES = {"ConsumerPartitionAssignor.java": _patch_assignor_interface,
           "CooperativeStickyAssignor.java": _patch_cooperative_sticky}


def build(kafka_source: str | Path, slf4j_jar: str | Path, out: str | Path) -> Path:
    """Compile into ``out``; returns the class path to run ``ClientOracle`` and ``ServerOracle`` with."""
    source = KafkaSource(kafka_source)
    out = Path(out)
    with tempfile.TemporaryDirectory() as scratch:
        src = Path(scratch)
        shutil.copytree(HERE / "java" / "shim", src, dirs_exist_ok=True)
        paths = FILES + [p for d in DIRECTORIES for p in source.list(d)]
        for path in paths:
            relative = path.split("/src/main/java/", 1)[1]
            text = source.read(path)
            patch = PATCHES.get(Path(path).name)
            target = src / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():   # our stand-ins win
                target.write_text(patch(text) if patch else text)
        out.mkdir(parents=True, exist_ok=True)
        mains = [str(HERE / "java" / "ClientOracle.java"), str(HERE / "java" / "ServerOracle.java")]
        subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", str(slf4j_jar), "-sourcepath", str(src), *mains],
                       check=True)
    return Path(f"{out}:{slf4j_jar}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print(build(*sys.argv[1:]))
