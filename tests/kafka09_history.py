"""Issue #11's history on Apache Kafka 0.9.0.1, run for both feeds' tests (``tests/brokers/test_real_broker.py``: the
instrumentation; ``tests/feeds/test_cluster_feed_kafka.py``: the broker's own ``__consumer_offsets``), so each run
serves both.

The runs share one group and one data topic, as a redeploy would: 0.9 drops a group its last member left (a
tombstone, no Empty record; the offsets stay), so a later run numbers its generations from 1 again and its consumers
start from the offsets the earlier one committed. Each run has its own feed topic, so the instrumentation feed holds
that run only, while ``__consumer_offsets`` holds every run so far.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.broker_history import GroupHistory, Truth, read_feed, run_issue_history, wait_until
from tests.kafka4_history import committed_on

CLIENT = {"api_version": [0, 9]}
PARTITIONS = 6


@dataclass
class Kafka09Run:
    """What one run left: what the consumers were given and the steps taken; its instrumentation feed; what the
    broker holds as committed once it ended; ``__consumer_offsets`` once this run's tombstone is in it."""

    group: str
    topic: str
    truth: Truth
    steps: list[tuple[str, int]]
    events: list[dict]
    committed: dict[tuple[str, int], int]
    pairs: list[tuple[bytes, bytes | None]]
    workdir: Path


class Kafka09Histories:
    """``histories(n)``: the ``n``-th run (0-based) on the shared group, running it and any before it first."""

    def __init__(self, kafka, workdirs) -> None:
        self.kafka, self.workdirs = kafka, workdirs  # workdirs(name) -> a fresh directory
        suffix = uuid.uuid4().hex[:8]
        self.group, self.topic = f"issue-11-{suffix}", f"data-issue-11-{suffix}"
        self.runs: list[Kafka09Run] = []

    def __call__(self, n: int) -> Kafka09Run:
        while len(self.runs) <= n:
            self.runs.append(self._run(len(self.runs)))
        return self.runs[n]

    def _run(self, n: int) -> Kafka09Run:
        from streaming.feeds.cluster_feed import read_offsets_topic

        bootstrap = self.kafka.bootstrap
        feed_topic = f"feed-{uuid.uuid4().hex[:8]}"
        self.kafka.create_topics({feed_topic: 3, **({self.topic: PARTITIONS} if n == 0 else {})})
        history = GroupHistory(
            bootstrap, self.topic, self.group, self.workdirs(f"history-09-{n}"), feed_topic=feed_topic, client=CLIENT
        )
        truth = run_issue_history(history)
        committed = committed_on(bootstrap, self.group, self.topic, PARTITIONS, {"api_version": (0, 9)})
        events = read_feed(bootstrap, feed_topic, CLIENT)
        (history.workdir / "feed.json").write_text(json.dumps(events))  # beside truth.jsonl, for after a failure

        # The last LeaveGroup's tombstone is appended as the group dies: wait until this run's is there.
        def with_tombstones():
            pairs = list(read_offsets_topic(bootstrap, client={"api_version": (0, 9)}))
            return pairs if group_tombstones(pairs, self.group) == n + 1 else None

        pairs = wait_until(with_tombstones, 120, "the group's tombstone")
        return Kafka09Run(self.group, self.topic, truth, history.steps, events, committed, pairs, history.workdir)


def group_tombstones(pairs, group: str) -> int:
    from offsets_store import decode_record

    return sum(
        1
        for k, v in pairs
        if v is None and decode_record(k, v) == {"type": "group_metadata", "group_id": group, "tombstone": True}
    )
