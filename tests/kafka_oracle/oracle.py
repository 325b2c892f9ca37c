"""Kafka's assignors (compiled against Kafka's jars by ``build.py``) answering the same inputs as ours.

One JVM per oracle, fed line by line (``java/ClientOracle.java``, ``java/ServerOracle.java``). Partition racks are
given to Kafka as replicas on nodes with those racks (a partition on no rack: one replica without a rack).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from assignors import Subscription, TopicPartition
from assignors.server import MemberSubscription


class KafkaError(Exception):
    """Kafka's assignor threw (its class and message)."""


# Kafka's classes log (a sticky assignor's warnings about conflicting claims...) through log4j 2, whose default
# configuration writes to stdout, where the answers go: no logging.
JAVA = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dlog4j2.level=OFF"]


class _Jvm:
    def __init__(self, classpath: str, main: str):
        self.process = subprocess.Popen(
            [*JAVA, "-cp", classpath, main],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def ask(self, lines: list[str]) -> list[str]:
        self.process.stdin.write("\n".join(lines) + "\n")
        self.process.stdin.flush()
        answer = []
        while (line := self.process.stdout.readline().rstrip("\n")) != "end":
            if not line and self.process.poll() is not None:
                raise RuntimeError("the oracle's JVM exited")
            answer.append(line)
        if answer and answer[0].startswith("error "):
            raise KafkaError(answer[0][len("error ") :])
        return answer

    def ask_members(self, lines: list[str], parse) -> dict:
        """One answer line a member, ``MEMBER PARTS`` (``-`` for none): member -> ``parse(PARTS)``."""
        answer = {}
        for line in self.ask(lines):
            member, parts = line.split(" ", 1)
            answer[member] = parse("" if parts == "-" else parts)
        return answer

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)


class ClientOracle(_Jvm):
    """Kafka's RangeAssignor, RoundRobinAssignor and CooperativeStickyAssignor (``clients``)."""

    def __init__(self, classpath: str):
        super().__init__(classpath, "ClientOracle")

    def assign(
        self,
        name: str,
        topics: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: Mapping[TopicPartition, frozenset[str]] | None = None,
    ) -> dict[str, list]:
        lines = ["case", *(f"topic {t} {n}" for t, n in topics.items())]
        for tp, racks in (partition_racks or {}).items():
            lines.append(f"racks {tp.topic} {tp.partition} {','.join(sorted(racks)) or '-'}")
        for member, s in subscriptions.items():
            owned = ",".join(f"{tp.topic}:{tp.partition}" for tp in s.owned_partitions) or "-"
            generation = "-" if s.generation is None or s.generation < 0 else str(s.generation)
            lines.append(
                f"member {member} {generation} {s.rack or '-'} {','.join(s.topics)} {owned} "
                f"{s.group_instance_id or '-'}"
            )
        lines.append(f"assign {name}")
        return self.ask_members(
            lines,
            lambda parts: [
                TopicPartition(topic, int(p)) for topic, p in (tp.rsplit(":", 1) for tp in parts.split(",") if tp)
            ],
        )


class ServerOracle(_Jvm):
    """Kafka's group coordinator's UniformAssignor and RangeAssignor (``group-coordinator``)."""

    def __init__(self, classpath: str):
        super().__init__(classpath, "ServerOracle")

    def assign(
        self, name: str, topics: Mapping[str, int], members: Mapping[str, MemberSubscription], subscription_type: str
    ) -> dict[str, dict[str, frozenset[int]]]:
        lines = ["gcase", *(f"gtopic {t} {n}" for t, n in topics.items())]
        for member, s in members.items():
            current = ",".join(f"{t}:{';'.join(map(str, ps))}" for t, ps in s.assignment.items()) or "-"
            lines.append(
                f"gmember {member} {s.rack or '-'} {s.instance_id or '-'} {','.join(s.topic_ids) or '-'} {current}"
            )
        lines.append(f"gassign {name} {subscription_type}")
        return self.ask_members(
            lines,
            lambda parts: {
                t: frozenset(int(p) for p in ps.split(";")) for t, ps in (x.split(":") for x in parts.split(",") if x)
            },
        )
