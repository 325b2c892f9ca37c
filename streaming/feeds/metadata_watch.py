"""Keep the tracked groups' topic sizes in step with the broker, like a consumer leader's metadata refresh.

The job learns partition counts from ``topic_metadata`` events. This driver-side watcher looks up the topics the
groups use (periodically, and at once for topics a rebalance could not size) and, when a count is new or changed,
appends a global ``topic_metadata`` event to the events topic. The job then hands it to every group, and a group whose
subscribed topic changed size rebalances — as Kafka's leader would after its metadata refresh.

Its events say when the size was seen. In processing time that is the wall clock; in event time it is the latest
time the outputs have shown (the feed's clock): a wall-clock stamp on a feed replayed from the past would move
every group's clock to now and expire its members.
"""

from __future__ import annotations

import time

from streaming.feeds.periodic import PeriodicPublisher


class TopicMetadataWatcher(PeriodicPublisher):
    name = "topic-metadata-watcher"
    client_id = "rebalance-tracker-metadata"
    what = "topic metadata refresh"

    def __init__(
        self,
        bootstrap: str,
        events_topic: str,
        interval_s: float = 30.0,
        client: dict | None = None,
        event_time: bool = False,
    ) -> None:
        super().__init__(bootstrap, events_topic, interval_s, client)
        self.watched: set[str] = set()
        self.published: dict[str, int] = {}
        self.event_time = event_time
        self.feed_ms: int | None = None  # the latest output time seen (event time's clock)

    # -- fed by the sink ----------------------------------------------------------------------------------------
    def observe(self, outputs: list[dict]) -> None:
        with self._lock:
            for o in outputs:
                ts = o.get("ts")
                if isinstance(ts, int) and (self.feed_ms is None or ts > self.feed_ms):
                    self.feed_ms = ts
                if o.get("type") == "group_restored" and o.get("topics"):
                    # Sizes rebuilt from the store are the stored assignment's: look them up now.
                    self.watched.update(o["topics"])
                    self.wake()
                if o.get("type") != "rebalance":
                    continue
                for parts in (o.get("assignment") or {}).values():
                    self.watched.update(tp[0] for tp in parts)
                if o.get("unknown_topics"):
                    self.watched.update(o["unknown_topics"])
                    self.wake()

    # -- a round ------------------------------------------------------------------------------------------------
    def round(self) -> dict[str, int]:
        return self.poll_once()

    def poll_once(self) -> dict[str, int]:
        """Look the watched topics up; publish the sizes that are new or changed. Returns what was published."""
        with self._lock:
            topics = sorted(self.watched)
        if not topics:
            return {}
        consumer = self.consumer()
        consumer.topics()  # forces a metadata refresh
        changed = {}
        for topic in topics:
            partitions = consumer.partitions_for_topic(topic)
            if partitions and self.published.get(topic) != len(partitions):
                changed[topic] = len(partitions)
        now = self.feed_ms if self.event_time else int(time.time() * 1000)
        if now is None:  # event time, and no output has told the feed's time yet: wait for one
            return {}
        events = [
            {"type": "topic_metadata", "topic": topic, "partitions": n, "ts": now} for topic, n in changed.items()
        ]
        self.publish(events, key_of=lambda event: b"")  # a global event: every group's
        self.published.update(changed)
        return changed
