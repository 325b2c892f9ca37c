"""A scripted KIP-848 consumer group history run on the pure consumer model, playing Kafka's client side: each
live member heartbeats every second with the partitions it owns, revokes what it is asked to (after its own delay),
and rejoins when fenced; with ``commit_interval_ms`` it also commits the partitions it owns at its epoch, that often
and before it revokes any. What the model writes is what a Kafka 4.0 broker would write to ``__consumer_offsets``."""

from __future__ import annotations

from dataclasses import dataclass, field

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator

START = 1_700_000_000_000
SECOND = 1_000


@dataclass
class Client:
    group_id: str
    member_id: str
    topics: list[str]
    instance_id: str | None = None
    revoke_delay_ms: int = 0
    epoch: int = 0
    owned: dict = field(default_factory=dict)  # topic -> set of partitions
    revoking: dict = field(default_factory=dict)  # topic -> partitions to drop, at revoke_at
    revoke_at: int | None = None
    alive: bool = True
    last_commit: int = 0

    def owned_list(self) -> list[dict]:
        return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(self.owned.items()) if ps]


class History:
    def __init__(self, config: ConsumerGroupConfig | None = None, commit_interval_ms: int | None = None):
        self.model = ConsumerGroupCoordinator(config or ConsumerGroupConfig())
        self.commit_interval_ms = commit_interval_ms
        self.now = START
        self.clients: dict[str, Client] = {}
        self.outputs: list[dict] = []
        self.events: list[dict] = []

    def send(self, **event) -> list[dict]:
        event.setdefault("ts", self.now)
        parsed, error = parse_event(event)
        assert error is None, error
        self.events.append(parsed)
        out = self.model.handle(parsed)
        self.outputs += out
        return out

    def topic(self, name: str, partitions: int) -> None:
        self.send(type="topic_metadata", topic=name, partitions=partitions)

    def join(self, client: Client) -> None:
        self.clients[client.member_id] = client
        client.epoch, client.owned, client.alive = 0, {}, True
        self._heartbeat(client, full=True)

    def _heartbeat(self, c: Client, full: bool = False) -> None:
        fields = dict(
            type="consumer_heartbeat",
            group_id=c.group_id,
            member_id=c.member_id,
            member_epoch=c.epoch,
            instance_id=c.instance_id,
            client_id=f"client-{c.instance_id or c.member_id}",
            client_host="/10.0.0.1",
        )
        if full or c.epoch == 0:
            fields.update(rebalance_timeout_ms=30_000, subscribed_topic_names=c.topics, topic_partitions=[])
        else:
            fields.update(topic_partitions=c.owned_list())
        out = self.send(**fields)
        (answer,) = [o for o in out if o["type"] == "consumer_heartbeat_response"]
        if answer["error"] in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
            c.epoch, c.owned = 0, {}
            return self._heartbeat(c, full=True)
        assert answer["error"] == "NONE", answer
        c.epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            given = {a["topic"]: set(a["partitions"]) for a in answer["assignment"]}
            drop = {t: ps - given.get(t, set()) for t, ps in c.owned.items() if ps - given.get(t, set())}
            for t, ps in given.items():
                c.owned.setdefault(t, set()).update(ps)
            if drop:
                c.revoking, c.revoke_at = drop, self.now + c.revoke_delay_ms
            self._maybe_revoke(c)

    def commit(self, c: Client) -> None:
        offsets = [
            {"topic": t, "partition": p, "offset": (self.now - START) // 100}
            for t, ps in sorted(c.owned.items())
            for p in sorted(ps)
        ]
        if offsets and c.epoch > 0:
            c.last_commit = self.now
            out = self.send(
                type="commit", group_id=c.group_id, member_id=c.member_id, generation=c.epoch, offsets=offsets
            )
            assert [o["error"] for o in out if o["type"] == "commit_response"] == ["NONE"], out

    def _maybe_revoke(self, c: Client) -> None:
        if c.revoke_at is not None and self.now >= c.revoke_at:
            if self.commit_interval_ms is not None:
                self.commit(c)  # auto-commit before the revocation
            for t, ps in c.revoking.items():
                c.owned[t] = c.owned.get(t, set()) - ps
            c.revoking, c.revoke_at = {}, None

    def leave(self, c: Client, static_temporary: bool = False) -> None:
        c.alive = False
        self.send(
            type="consumer_heartbeat",
            group_id=c.group_id,
            member_id=c.member_id,
            member_epoch=-2 if static_temporary else -1,
            instance_id=c.instance_id,
            client_id=f"client-{c.instance_id or c.member_id}",
            client_host="/10.0.0.1",
        )

    def crash(self, c: Client) -> None:
        c.alive = False  # no more heartbeats: its session expires on the coordinator

    def run_until(self, until: int, step: int = SECOND) -> None:
        while self.now + step <= until:
            self.now += step
            self.outputs += self.model.advance(self.now - 1)
            for c in list(self.clients.values()):
                if c.alive:
                    self._maybe_revoke(c)
                    self._heartbeat(c)
                    if self.commit_interval_ms is not None and self.now - c.last_commit >= self.commit_interval_ms:
                        self.commit(c)


def scripted_history(
    group_id: str = "orders-app", topic: str = "orders", commit_interval_ms: int | None = None
) -> History:
    """Two members join; a third joins and one of the first two is slow to give up its partitions (a revocation
    lasting 3 s); a static member joins; one member crashes (its session expires); one leaves; the static member
    restarts under a new member id (leave with -2, join again with its instance id); the topic grows."""
    h = History(commit_interval_ms=commit_interval_ms)
    h.topic(topic, 6)
    a = Client(group_id, "member-a", [topic], revoke_delay_ms=3 * SECOND)
    b = Client(group_id, "member-b", [topic])
    c = Client(group_id, "member-c", [topic])
    s = Client(group_id, "member-s1", [topic], instance_id="static-1")
    h.now += SECOND
    h.join(a)
    h.run_until(h.now + 2 * SECOND)
    h.join(b)
    h.run_until(h.now + 10 * SECOND)
    h.join(c)  # a new member: a and b revoke (a slowly)
    h.run_until(h.now + 10 * SECOND)
    h.join(s)
    h.run_until(h.now + 10 * SECOND)
    h.crash(b)  # expires 45 s after its last heartbeat
    h.run_until(h.now + 60 * SECOND)
    h.leave(c)
    h.run_until(h.now + 10 * SECOND)
    h.leave(s, static_temporary=True)  # the static member restarts...
    h.run_until(h.now + 3 * SECOND)
    h.clients.pop(s.member_id)
    s2 = Client(group_id, "member-s2", [topic], instance_id="static-1")
    h.join(s2)  # ... and takes its place back under a new member id
    h.run_until(h.now + 10 * SECOND)
    h.topic(topic, 8)  # the topic grows: the next heartbeat refreshes the metadata
    h.run_until(h.now + 10 * SECOND)
    return h


def random_history(seed: int, groups: int = 2, steps: int = 40, config: ConsumerGroupConfig | None = None) -> History:
    """Seeded churn on a few groups: members (some static, some slow to revoke, some slower than their rebalance
    timeout) join, crash, leave, restart; topics grow. ``config``: the broker's settings."""
    import random

    rng = random.Random(seed)
    h = History(config)
    topics = {"orders": 4, "payments": 3}
    for name, n in topics.items():
        h.topic(name, n)
    serial = 0
    for _ in range(steps):
        h.run_until(h.now + rng.choice([1, 2, 5]) * SECOND)
        alive = [c for c in h.clients.values() if c.alive]
        roll = rng.random()
        if roll < 0.35 or not alive:
            serial += 1
            static = rng.random() < 0.3
            h.join(
                Client(
                    f"g{rng.randrange(groups)}",
                    f"m{serial}",
                    rng.choice([["orders"], ["payments"], ["orders", "payments"]]),
                    instance_id=f"i{serial}" if static else None,
                    revoke_delay_ms=rng.choice([0, 0, 2 * SECOND, 40 * SECOND]),
                )
            )
        elif roll < 0.5:
            h.crash(rng.choice(alive))
        elif roll < 0.65:
            h.leave(rng.choice(alive))
        elif roll < 0.75:
            statics = [c for c in alive if c.instance_id is not None]
            if statics:
                old = rng.choice(statics)
                h.leave(old, static_temporary=True)
                h.run_until(h.now + SECOND)
                h.clients.pop(old.member_id)
                serial += 1
                h.join(Client(old.group_id, f"m{serial}", old.topics, instance_id=old.instance_id))
        elif roll < 0.8:
            name = rng.choice(sorted(topics))
            topics[name] += 1
            h.topic(name, topics[name])
    h.run_until(h.now + 60 * SECOND)
    return h
