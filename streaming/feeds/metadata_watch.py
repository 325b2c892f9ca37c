"""Keep the tracked groups' topic sizes in step with the broker, like a consumer leader's metadata refresh.

The job learns partition counts from ``topic_metadata`` events. This driver-side watcher looks up the topics the
groups use (periodically, and at once for topics a rebalance could not size) and, when a count is new or changed,
appends a global ``topic_metadata`` event to the events topic. The job then hands it to every group, and a group whose
subscribed topic changed size rebalances — as Kafka's leader would after its metadata refresh.
"""

from __future__ import annotations

import time

from streaming.feeds.periodic import PeriodicPublisher


class TopicMetadataWatcher(PeriodicPublisher):
    name = "topic-metadata-watcher"
    client_id = "rebalance-tracker-metadata"
    what = "topic metadata refresh"

    def __init__(self, bootstrap: str, events_topic: str, interval_s: float = 30.0, client: dict | None = None) -> None:
        super().__init__(bootstrap, events_topic, interval_s, client)
        self.watched: set[str] = set()
        self.published: dict[str, int] = {}

    # -- fed by the sink ----------------------------------------------------------------------------------------
    def observe(self, outputs: list[dict]) -> None:
        with self._lock:
            for o in outputs:
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
        now = int(time.time() * 1000)
        events = [
            {"type": "topic_metadata", "topic": topic, "partitions": n, "ts": now} for topic, n in changed.items()
        ]
        self.publish(events, key_of=lambda event: b"")  # a global event: every group's
        self.published.update(changed)
        return changed
