"""Helpers for the KIP-848 coordinator tests: a coordinator with a scripted assignor (Kafka's
MockPartitionAssignor), heartbeats as feed events, and groups seeded from records (Kafka's ConsumerGroupBuilder)."""

from __future__ import annotations

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, ConsumerGroupMember
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.member import assignment

CLIENT_ID, CLIENT_HOST = "client", "localhost/127.0.0.1"


class Scripted:
    """Answers the prepared assignment (members it does not name get nothing) and remembers the GroupSpec."""

    def __init__(self, answer=None):
        self.answer, self.spec, self.calls = answer or {}, None, 0

    def prepare(self, answer):
        self.answer = answer

    def assign(self, spec, describer):
        self.spec, self.calls = spec, self.calls + 1
        return {m: dict(assignment(a)) for m, a in self.answer.items() if m in spec.members}


class Harness:
    def __init__(self, topics=None, scripted=True, **config):
        self.assignor = Scripted() if scripted else None
        if scripted:
            config.setdefault("group_consumer_assignors", ("range",))
        self.c = ConsumerGroupCoordinator(
            ConsumerGroupConfig(**config), assignors={"range": self.assignor} if scripted else None
        )
        self.ts = 0
        for name, partitions in (topics or {}).items():
            self.topic(name, partitions)

    def event(self, **fields):
        fields.setdefault("ts", self.ts)
        event, error = parse_event(fields)
        assert error is None, error
        self.ts = max(self.ts, event["ts"])
        return self.c.handle(event)

    def topic(self, name, partitions, **fields):
        return self.event(type="topic_metadata", topic=name, partitions=partitions, **fields)

    def id(self, topic):
        return self.c.image.id_for(topic)

    def A(self, **topics):
        return assignment({self.id(t): ps for t, ps in topics.items()})

    def hb(self, member_id, epoch, group_id="fooup", **fields):
        """One heartbeat: (answer, records, all outputs)."""
        fields.setdefault("client_id", CLIENT_ID)
        fields.setdefault("client_host", CLIENT_HOST)
        out = self.event(
            type="consumer_heartbeat", group_id=group_id, member_id=member_id, member_epoch=epoch, **fields
        )
        answers = [o for o in out if o["type"] == "consumer_heartbeat_response"]
        assert len(answers) == 1, out
        return answers[0], records(out), out

    def join(self, member_id, topics, group_id="fooup", **fields):
        fields.setdefault("rebalance_timeout_ms", 5000)
        return self.hb(member_id, 0, group_id, subscribed_topic_names=topics, topic_partitions=[], **fields)

    def advance(self, ts):
        self.ts = ts
        return self.c.advance(ts)

    def member(self, member_id, group_id="fooup"):
        return self.c.groups[group_id].members.get(member_id)

    def group(self, group_id="fooup"):
        return self.c.groups[group_id]

    def seed(self, group_id, epoch, members, targets, assignment_epoch=None, topics=None, regexes=()):
        """Load a group from records, as Kafka's coordinator loads it (sessions start now)."""
        recs = [R.member_subscription(group_id, m) for m in members]
        names = set().union(*(m.subscribed_topic_names for m in members)) if topics is None else topics
        recs.append(
            R.partition_metadata(
                group_id,
                {n: (self.id(n), self.c.image.get(n).partitions) for n in names if self.c.image.get(n) is not None},
            )
        )
        recs.append(R.epoch(group_id, epoch))
        recs += [R.target_assignment(group_id, mid, a) for mid, a in targets.items()]
        recs.append(R.target_assignment_epoch(group_id, epoch if assignment_epoch is None else assignment_epoch))
        recs += [R.current_assignment(group_id, m) for m in members]
        recs += list(regexes)
        self.c.load_records(recs, self.ts)
        return recs


def member(member_id, **fields):
    fields.setdefault("client_id", CLIENT_ID)
    fields.setdefault("client_host", CLIENT_HOST)
    fields.setdefault("rebalance_timeout_ms", 5000)
    if "subscribed_topic_names" in fields:
        fields["subscribed_topic_names"] = frozenset(fields["subscribed_topic_names"])
    return ConsumerGroupMember(member_id, **fields)


def records(outputs):
    return [{k: v for k, v in o.items() if k != "ts"} for o in outputs if R.is_record(o)]


def names(recs):
    """Each record as (record name, member id or None, tombstone?)."""
    return [(R.KAFKA_NAMES[r["type"]][0], r.get("member_id"), r["tombstone"]) for r in recs]


def strip(recs):
    return [{k: v for k, v in r.items() if k != "ts"} for r in recs]
