"""The coordinator's view of the cluster's topics (Kafka's metadata image, reduced to what groups need).

A topic has a name, a topic id (Kafka's ``Uuid`` in its URL-safe base64 form), a partition count and optionally
the racks of each partition's replicas. Events name topics by name; when an event gives no id the id is derived
from the name (a name-based UUID), so a replay, or another tracker, derives the same one.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Mapping

_TOPIC_ID_NAMESPACE = uuid.UUID("0c5b4d0e-8f7e-4c43-9a0b-1d6f3e8a2b71")


def derived_topic_id(name: str) -> str:
    raw = uuid.uuid5(_TOPIC_ID_NAMESPACE, name).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Topic:
    topic_id: str
    name: str
    partitions: int
    racks: Mapping[int, tuple] = field(default_factory=dict)  # partition -> replica racks (not used by Kafka 4.0)

    def to_dict(self) -> dict:
        return {
            "topic_id": self.topic_id,
            "name": self.name,
            "partitions": self.partitions,
            "racks": {str(p): list(r) for p, r in sorted(self.racks.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "Topic":
        return cls(d["topic_id"], d["name"], d["partitions"], {int(p): tuple(r) for p, r in d["racks"].items()})


class TopicImage:
    """Topics by name, plus a version that moves whenever a topic is created (what regexes are resolved against)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Topic] = {}
        self.known_ids: dict[str, str] = {}  # name -> id, kept after deletion to read old reports
        self.version = 0  # bumped on every change (Kafka: the image's offset)
        self.new_topics_version = 0  # the version of the last change that created a topic
        self._names: dict[str, str] = {}

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def id_for(self, name: str) -> str | None:
        topic = self.by_name.get(name)
        return topic.topic_id if topic is not None else self.known_ids.get(name)

    def name_for(self, topic_id: str) -> str | None:
        if len(self._names) != len(self.known_ids):
            self._names = {i: n for n, i in self.known_ids.items()}
        return self._names.get(topic_id)

    def apply(
        self, name: str, partitions: int, topic_id: str | None = None, racks: Mapping[int, tuple] | None = None
    ) -> bool:
        """Create, resize or (``partitions`` 0) delete a topic; True when something changed."""
        before = self.by_name.get(name)
        if partitions <= 0:
            if before is None:
                return False
            del self.by_name[name]
            self.version += 1
            return True
        if topic_id is None:
            topic_id = before.topic_id if before is not None else self.known_ids.get(name) or derived_topic_id(name)
        topic = Topic(
            topic_id,
            name,
            partitions,
            dict(racks or {})
            if racks is not None
            else (dict(before.racks) if before is not None and before.topic_id == topic_id else {}),
        )
        if topic == before:
            return False
        self.by_name[name] = topic
        if self.known_ids.get(name) != topic_id:
            self.known_ids[name] = topic_id
            self._names = {}
        self.version += 1
        if before is None or before.topic_id != topic_id:
            self.new_topics_version = self.version
        return True

    def to_dict(self) -> dict:
        return {
            "topics": [t.to_dict() for t in self.by_name.values()],
            "known_ids": self.known_ids,
            "version": self.version,
            "new_topics_version": self.new_topics_version,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "TopicImage":
        image = cls()
        image.by_name = {t["name"]: Topic.from_dict(t) for t in d["topics"]}
        image.known_ids = dict(d["known_ids"])
        image.version, image.new_topics_version = d["version"], d["new_topics_version"]
        return image
