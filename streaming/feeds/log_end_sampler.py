"""Sample where the tracked groups' partitions end, and publish each sample as a ``log_end`` event.

Lag is measured against the log end (streaming/coordinator/lag.py). Reading it in the job would make lag depend on
when a micro-batch ran; as events on the events topic, the samples are replayed with everything else, so the job,
the replays and the report see the same numbers. This driver-side sampler runs next to the topic-metadata watcher:
it learns which topics each group consumes from the outputs (its rebalances' assignments, its offset commits),
reads the end offsets of those partitions with one batched ListOffsets per round (``log_end_offsets``), and appends
one ``log_end`` event per group and partition, keyed by the group id so it travels in the group's own order.

The rate is bounded twice: one round per ``interval_s``, and at most ``max_partitions`` partitions per round (the
rest wait for the next rounds, oldest-sampled first).
"""

from __future__ import annotations

import time

from streaming.coordinator.outputs import OFFSET_COMMIT, REBALANCE
from streaming.feeds.periodic import PeriodicPublisher
from streaming.kafka_client.log_end import log_end_offsets

Partition = tuple[str, int]

# The default interval, where the tracker samples by default (``TrackerConfig.log_end_interval_s``). A round costs
# one batched ListOffsets (and one fetch for the high-water marks) whatever the number of groups: little next to the
# consumers' own fetches. Finer rounds would add events (one per group and partition) without adding what can be
# seen: lag is seen through commits, which consumers make every 5 s by default (auto.commit.interval.ms). Coarser
# ones would blur lag in seconds, interpolated between the samples around the committed offset: the spacing bounds
# its error for an unsteady producer. LagBook's 32 samples a partition then reach 160 s back.
LOG_END_SAMPLE_S = 5.0


def sample_interval(text: str) -> float:
    """An interval option's seconds (``--lag-sample-s``): 0 or more, 0 meaning never."""
    import argparse

    value = float(text)
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def log_end_events(group_topics: dict[str, set[str]], ends: dict[Partition, int], ts: int) -> list[dict]:
    """One ``log_end`` event per group and partition of its topics whose end is known, in a fixed order."""
    return [
        {
            "type": "log_end",
            "group_id": group,
            "ts": ts,
            "topic": topic,
            "partition": partition,
            "offset": ends[(topic, partition)],
        }
        for group in sorted(group_topics)
        for (topic, partition) in sorted(ends)
        if topic in group_topics[group]
    ]


class LogEndSampler(PeriodicPublisher):
    name = "log-end-sampler"
    client_id = "rebalance-tracker-log-end"
    what = "log-end sampling"

    def __init__(
        self,
        bootstrap: str,
        events_topic: str,
        interval_s: float = LOG_END_SAMPLE_S,
        client: dict | None = None,
        max_partitions: int = 1000,
    ) -> None:
        super().__init__(bootstrap, events_topic, interval_s, client)
        self.max_partitions = max_partitions
        self.group_topics: dict[str, set[str]] = {}
        self._sampled: dict[Partition, float] = {}  # when each partition was last sampled (round robin)

    # -- fed by the sink ----------------------------------------------------------------------------------------
    def observe(self, outputs: list[dict]) -> None:
        with self._lock:
            for o in outputs:
                kind, group = o.get("type"), o.get("group_id")
                if not group:
                    continue
                if kind == REBALANCE:
                    for parts in (o.get("assignment") or {}).values():
                        self.group_topics.setdefault(group, set()).update(tp[0] for tp in parts)
                elif kind == OFFSET_COMMIT and not o.get("tombstone") and o.get("topic"):
                    self.group_topics.setdefault(group, set()).add(o["topic"])

    def learn(self, group: str, topics) -> None:
        """The group consumes ``topics`` (a feed that knows it from its own events: the cluster feed)."""
        with self._lock:
            self.group_topics.setdefault(group, set()).update(topics)

    # -- a round ------------------------------------------------------------------------------------------------
    def round(self) -> list[dict]:
        return self.sample_once()

    def sample_once(self) -> list[dict]:
        """Read the end offsets of (up to ``max_partitions`` of) the groups' partitions; publish them. Returns the
        events published."""
        events = self.samples()
        self.publish(events, key_of=lambda event: event["group_id"].encode("utf-8"))
        return events

    def samples(self) -> list[dict]:
        """One round: the ``log_end`` events of (up to ``max_partitions`` of) the groups' partitions, the longest
        unsampled first, read now from ``bootstrap``; not published."""
        from kafka import TopicPartition

        with self._lock:
            group_topics = {g: set(ts) for g, ts in self.group_topics.items()}
        topics = set().union(*group_topics.values()) if group_topics else set()
        if not topics:
            return []
        consumer = self.consumer()
        known = consumer.topics()
        partitions = [(t, p) for t in sorted(topics & known) for p in sorted(consumer.partitions_for_topic(t) or ())]
        partitions.sort(key=lambda tp: self._sampled.get(tp, 0.0))  # the longest unsampled first
        chosen = partitions[: self.max_partitions]
        if not chosen:
            return []
        ends = log_end_offsets(consumer, [TopicPartition(t, p) for t, p in chosen])
        now = time.time()
        for tp in chosen:
            self._sampled[tp] = now
        return log_end_events(group_topics, {(tp.topic, tp.partition): o for tp, o in ends.items()}, int(now * 1000))
