"""Drive a real consumer group on a real broker through a history, and keep what the consumers were given.

The history of issue #11: two consumers start, a third is added, one closes cleanly, one is killed without leaving,
one more is added, then the rest close. Each consumer is its own process (``tests/real_consumer.py``) with its own
instrumentation producer, so the feed is ordered per client only, as in production. ``Truth`` reads back what each
consumer recorded; the tests hold the tracker's story against it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def followed(pairs: list[tuple]) -> list:
    """``__consumer_offsets`` pairs (key, value, log time) as a following cluster-feed reader hands them over:
    caught up after each write (a batch: one log time)."""
    from streaming.feeds.cluster_feed import CAUGHT_UP

    out = []
    for i, pair in enumerate(pairs):
        out.append(pair)
        if i + 1 == len(pairs) or pairs[i + 1][2] != pair[2]:
            out.append(CAUGHT_UP)
    return out


def wait_until(predicate, timeout_s: float = 60, what: str = "", every_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


@dataclass
class Generation:
    generation: int
    leader: str | None
    members: dict[str, list]  # member id -> partitions the broker delivered
    clients: dict[str, str]  # member id -> client id


@dataclass
class Truth:
    """What the consumers recorded, read from their truth file."""

    facts: list[dict]

    @classmethod
    def read(cls, path: Path) -> "Truth":
        if not path.exists():
            return cls([])
        return cls([json.loads(line) for line in path.read_text().splitlines() if line.strip()])

    def generations(self, current: bool = False) -> dict[int, Generation]:
        """Each generation as the broker formed it: who was given what. A static member restarted within its
        session takes its old place in the same generation under a new member id (KIP-345, no rebalance): the
        generation as formed keeps the old id, ``current`` shows the new one."""
        out: dict[int, Generation] = {}
        for f in self.facts:
            if f["fact"] != "assigned":
                continue
            g = out.setdefault(f["generation"], Generation(f["generation"], None, {}, {}))
            before = next((m for m, c in g.clients.items() if c == f["client"] and m != f["member_id"]), None)
            if before is not None:
                if not current:
                    continue
                del g.members[before], g.clients[before]
                if g.leader == before:
                    g.leader = f["member_id"]
            g.members[f["member_id"]] = f["partitions"]
            g.clients[f["member_id"]] = f["client"]
            if f["leader"]:
                g.leader = f["member_id"]
        return dict(sorted(out.items()))

    def replacements(self) -> list[tuple[int, str, str, str]]:
        """(generation, client, old member id, new member id): static members that took their old place."""
        seen: dict[tuple[int, str], str] = {}
        out = []
        for f in self.facts:
            if f["fact"] != "assigned":
                continue
            old = seen.setdefault((f["generation"], f["client"]), f["member_id"])
            if old != f["member_id"] and (f["generation"], f["client"], old, f["member_id"]) not in out:
                out.append((f["generation"], f["client"], old, f["member_id"]))
                seen[(f["generation"], f["client"])] = f["member_id"]
        return out

    def member_ids(self, client: str) -> set[str]:
        return {f["member_id"] for f in self.facts if f["fact"] == "assigned" and f["client"] == client}

    def incarnations(self, client: str) -> list[str]:
        """The member ids ``client`` was given, in order (a restarted or re-joining consumer gets a new one)."""
        return list(
            dict.fromkeys(f["member_id"] for f in self.facts if f["fact"] == "assigned" and f["client"] == client)
        )

    def accepted_commits(self) -> set[tuple[str, int, int]]:
        """(topic, partition, offset) of every commit the broker may have accepted: each one a consumer saw accepted,
        and a consumer's last one sent if it was killed before the answer came (the broker may have taken it, and
        the feed's event for it is published on the answer, before the consumer could write it down)."""
        out: set[tuple[str, int, int]] = set()
        unanswered: dict[str, list] = {}
        for f in self.facts:
            if f["fact"] == "committing":
                unanswered[f["client"]] = f["offsets"]
            elif f["fact"] in ("committed", "commit_failed"):
                unanswered.pop(f["client"], None)
                if f["fact"] == "committed":
                    out.update(map(tuple, f["offsets"]))
        for offsets in unanswered.values():
            out.update(map(tuple, offsets))
        return out

    def committed(self) -> dict[tuple[str, int], int]:
        """The last offset each partition's commits reached, in the order the broker accepted them."""
        out: dict[tuple[str, int], int] = {}
        for f in sorted((f for f in self.facts if f["fact"] == "committed"), key=lambda f: f["ts"]):
            for topic, partition, offset in f["offsets"]:
                out[(topic, partition)] = offset
        return out


@dataclass
class GroupHistory:
    bootstrap: str
    topic: str
    group: str
    workdir: Path
    feed_topic: str | None = None
    feed_bootstrap: str | None = None  # where the feed topic lives (default: the group's cluster)
    partitions: int = 6
    client: dict = field(default_factory=dict)  # kafka-python settings, e.g. {"api_version": [0, 9]}
    session_timeout_ms: int = 10_000  # 0.9 also bounds a join round by it: generous for a loaded machine
    heartbeat_interval_ms: int = 1_000
    consumer: dict = field(default_factory=dict)  # more real_consumer settings for every member (e.g. assignors)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    steps: list[tuple[str, int]] = field(default_factory=list)  # (what happened, generation it led to)

    @property
    def truth_path(self) -> Path:
        return self.workdir / "truth.jsonl"

    def truth(self) -> Truth:
        return Truth.read(self.truth_path)

    def start(self, name: str, **settings) -> None:
        """Start consumer ``name``; ``settings`` override the group's (e.g. ``group_instance_id``)."""
        config = {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "group": self.group,
            "name": name,
            "truth": str(self.truth_path),
            "client": self.client,
            "feed_topic": self.feed_topic,
            "feed_bootstrap": self.feed_bootstrap,
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            **self.consumer,
            **settings,
        }
        log = open(self.workdir / f"{name}.log", "ab")  # a restarted consumer appends to its log
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.real_consumer", json.dumps(config)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        log.close()

    def close(self, name: str) -> None:
        """A clean close(): LeaveGroup, then exit."""
        proc = self.processes.pop(name)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    def kill(self, name: str) -> None:
        """A crash: no LeaveGroup; the broker finds out when the session times out."""
        proc = self.processes.pop(name)
        proc.kill()
        proc.wait(10)

    def freeze(self, name: str) -> None:
        """A process that stops dead and comes back (SIGSTOP; a long GC pause): no heartbeats, no LeaveGroup."""
        self.processes[name].send_signal(signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGCONT)

    def zombie_commit(self, name: str) -> None:
        """Make ``name`` commit under the generation before its own (tests/real_consumer.py, SIGUSR1)."""
        self.processes[name].send_signal(signal.SIGUSR1)

    def wait_for(self, what: str, predicate, timeout_s: float = 60):
        """Wait until ``predicate(truth)`` holds; the step is recorded with the newest generation then."""
        with self._explained():
            value = wait_until(lambda: predicate(self.truth()), timeout_s, what, every_s=0.2)
        self.steps.append((what, max(self.truth().generations())))
        return value

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.thaw(name)  # a frozen process hears no SIGTERM
            try:
                self.close(name)
            except subprocess.TimeoutExpired:
                self.kill(name)

    def settled(self, step: str, timeout_s: float = 90, absent: tuple[str, ...] = ()) -> Generation:
        """Wait until the running consumers (but those ``absent``, e.g. frozen) all hold the same newest generation
        and share every partition."""

        def done():
            gens = self.truth().generations(current=True)
            if not gens:
                return None
            g = gens[max(gens)]
            clients = set(g.clients.values())
            parts = [tp for p in g.members.values() for tp in p]
            if (
                clients == set(self.processes) - set(absent)
                and len(parts) == len(set(map(tuple, parts))) == self.partitions
            ):
                return g
            return None

        with self._explained():
            g = wait_until(
                done, timeout_s, f"the group to settle after: {step} (running: {sorted(self.processes)})", every_s=0.2
            )
        self.steps.append((step, g.generation))
        return g

    @contextlib.contextmanager
    def _explained(self):
        """A wait that times out says what the broker did meanwhile: the last generations and the client logs."""
        try:
            yield
        except AssertionError as exc:
            for proc in self.processes.values():  # each consumer writes its threads' stacks into its log
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGUSR2)
            time.sleep(0.5)
            gens = self.truth().generations(current=True)
            seen = [
                (n, sorted(gens[n].clients.values()), sum(map(len, gens[n].members.values())))
                for n in sorted(gens)[-5:]
            ]
            logs = {name: (self.workdir / f"{name}.log").read_text(errors="replace")[-4000:] for name in self.processes}
            raise AssertionError(
                f"{exc}\nlast generations (number, clients, partitions): {seen}\n"
                + "\n".join(f"--- {name}.log\n{text}" for name, text in logs.items())
            ) from None


class Producing(threading.Thread):
    """Keeps a trickle of records flowing into the data topic, so every generation has something to commit."""

    def __init__(self, bootstrap: str, topic: str, client: dict, per_second: int = 20) -> None:
        super().__init__(daemon=True)
        from kafka import KafkaProducer

        settings = {k: tuple(v) if k == "api_version" else v for k, v in client.items()}
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, **settings)
        self.topic, self.every_s = topic, 1 / per_second
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            self.producer.send(self.topic, key=str(i).encode(), value=b"x")
            i += 1
            self.halt.wait(self.every_s)
        self.producer.flush(10)
        self.producer.close()


def run_issue_history(history: GroupHistory) -> Truth:
    """Two start, one added, one closes, one is killed, one added, the rest close."""
    producing = Producing(history.bootstrap, history.topic, history.client)
    producing.start()
    try:
        issue_steps(history)
        time.sleep(1.5)  # a few commits in the last generation
    finally:
        history.stop_all()
        producing.halt.set()
        producing.join(15)
    return history.truth()


def issue_steps(history: GroupHistory) -> None:
    history.start("c0")
    history.start("c1")
    history.settled("c0 and c1 started")
    history.start("c2")
    history.settled("c2 added")
    history.close("c1")
    history.settled("c1 closed")
    history.kill("c0")
    history.settled("c0 killed")
    history.start("c3")
    history.settled("c3 added")


def story(outputs: list[dict], group: str | None = None) -> dict:
    """What the tracker says happened (to ``group``, else to the outputs' only group): each generation that reached
    Stable (leader and who got what), who left, who expired and why, which static members were replaced, and any
    commit the tracker refused."""
    outputs = [o for o in outputs if group is None or o["group_id"] == group]
    generations = {}
    for o in outputs:
        if o["type"] == "rebalance" and o["members"]:
            generations[o["generation"]] = (o["leader"], {m: sorted(map(list, p)) for m, p in o["assignment"].items()})
    return {
        "generations": generations,
        "left": sorted(o["member_id"] for o in outputs if o["type"] == "member_left"),
        "expired": sorted((o["member_id"], o["reason"]) for o in outputs if o["type"] == "member_expired"),
        "replaced": [(o["previous_member_id"], o["member_id"]) for o in outputs if o["type"] == "member_replaced"],
        "refused_commits": [o for o in outputs if o["type"] == "commit_response" and o["error"] != "NONE"],
    }


def read_feed(bootstrap: str, topic: str, client: dict) -> list[dict]:
    """Every event of the feed topic, partition by partition in offset order."""
    from kafka import KafkaConsumer, TopicPartition

    settings = {k: tuple(v) if k == "api_version" else v for k, v in client.items()}
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3_000, **settings
    )
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        by_partition = collections.defaultdict(list)
        for r in consumer:
            by_partition[r.partition].append(r)
        return [json.loads(r.value) for p in sorted(by_partition) for r in by_partition[p]]
    finally:
        consumer.close()


def timeline(truth: Truth, feed: list[dict], outputs: list[dict]) -> str:
    """One line per fact, feed event and tracker output (commits and heartbeats left out), in wall-clock order:
    what a failed comparison needs, printed with it, as a CI machine's files are gone afterwards. ``feed`` and
    ``outputs`` carry their Kafka record's timestamp as ``kafka_ts``: when a client's report reached the broker, when
    the job's sink wrote an output."""

    def who(member_id: str | None) -> str:
        return (member_id or "").split("-")[0]

    def output(o: dict) -> str:
        if o["type"] == "rebalance":
            return f"gen {o['generation']} {sorted(map(who, o['assignment']))} ({o['trigger']})"
        if o["type"] == "state_change":
            return f"{o['from']} -> {o['to']} gen {o['generation']} ({o['reason'][:70]})"
        return f"{who(o.get('member_id'))} {o.get('reason', '')}"

    lines = []
    for f in truth.facts:
        if f["fact"] == "assigned":
            lines.append(
                (
                    f["ts"],
                    f"truth  {f['client']} assigned in gen {f['generation']}"
                    f"{' as leader' if f['leader'] else ''}: {len(f['partitions'])} partitions",
                )
            )
        elif f["fact"] not in ("committed", "committing"):
            lines.append((f["ts"], f"truth  {f['client']} {f['fact']}"))
    for e in feed:
        if e["type"] not in ("heartbeat", "commit"):
            named = f" naming {sorted(map(who, e['assignments']))}" if e.get("assignments") else ""
            lines.append(
                (
                    e["kafka_ts"],
                    f"feed   {who(e.get('member_id'))} {e['type']} gen {e.get('generation')}"
                    f"{named} (sent {e['kafka_ts'] - e['ts']} ms before)",
                )
            )
    for o in outputs:
        if o["type"] in ("rebalance", "member_expired", "member_left", "member_joined", "state_change"):
            lines.append((o["kafka_ts"], f"output {o['type']} {output(o)} (clock {o['ts'] - o['kafka_ts']} ms)"))
    start = min((ts for ts, _ in lines), default=0)
    return "\n".join(f"{(ts - start) / 1000:8.2f}s {text}" for ts, text in sorted(lines, key=lambda x: x[0]))
