"""A small deterministic feed of consumer-protocol (KIP-848) groups for the job's tests, played the way the simulator
plays classic groups: each client follows the protocol against a local model (the job's own per-group router), so
it sends what a real KafkaConsumer with ``group.protocol=consumer`` would send -- a join with epoch 0, heartbeats
every ``heartbeat_interval_ms`` with its epoch and, after a new assignment, the partitions it now owns -- and
auto-commits the partitions it owns every ``COMMIT_INTERVAL_MS`` at its member epoch.

Scripted per group: members join one after another, a topic grows, one member leaves (epoch -1), one crashes (its
session expires), a static member leaves for a moment (epoch -2) and comes back under a new member id, a member
joins late. With ``switch_to_classic`` the group's members all leave at the end and a classic consumer joins the
Empty group (JoinGroup, SyncGroup as leader, heartbeats): the group switches protocol.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from streaming.coordinator import parse_event
from streaming.coordinator.routing import Configs, GroupModels

COMMIT_INTERVAL_MS = 5_000


@dataclass
class _Client:
    group_id: str
    member_id: str
    topics: list[str]
    instance_id: str | None = None
    epoch: int = 0
    owned: dict = field(default_factory=dict)  # topic -> partitions
    alive: bool = True
    generation: int = -1  # classic clients only


class ConsumerFeed:
    def __init__(self, start_ms: int, configs: Configs | None = None) -> None:
        self.model = GroupModels(configs or Configs())
        self.now = start_ms
        self.events: list[dict] = []
        self._queue: list[tuple[int, int, object]] = []
        self._seq = 0
        self.clients: dict[str, _Client] = {}

    # ---------------------------------------------------------------------------------------------------------
    def at(self, ts: int, action) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (ts, self._seq, action))

    def run_until(self, end_ms: int) -> list[dict]:
        while self._queue and self._queue[0][0] <= end_ms:
            ts, _, action = heapq.heappop(self._queue)
            self.now = ts
            action()
        return self.events

    def send(self, **fields) -> list[dict]:
        fields["ts"] = self.now
        event, error = parse_event(fields)
        assert error is None, error
        self.events.append(fields)
        return self.model.handle(event)

    # --- consumer-protocol clients ---------------------------------------------------------------------------
    def join(self, group_id: str, name: str, topics: list[str], instance_id: str | None = None) -> None:
        client = _Client(group_id, f"{name}-{self.now}", topics, instance_id)
        self.clients[name] = client
        self._heartbeat(client, join=True)
        self.at(self.now + COMMIT_INTERVAL_MS, lambda: self._commit(client))

    def _commit(self, client: _Client) -> None:
        if not client.alive:
            return
        offsets = [
            {"topic": t, "partition": p, "offset": self.now // 1_000 % 100_000}
            for t, ps in sorted(client.owned.items())
            for p in sorted(ps)
        ]
        if offsets and client.epoch > 0:
            out = self.send(
                type="commit",
                group_id=client.group_id,
                member_id=client.member_id,
                generation=client.epoch,
                offsets=offsets,
            )
            assert next(o for o in out if o["type"] == "commit_response")["error"] == "NONE", out
        self.at(self.now + COMMIT_INTERVAL_MS, lambda: self._commit(client))

    def _heartbeat(self, client: _Client, join: bool = False) -> None:
        if not client.alive:
            return
        fields = dict(
            type="consumer_heartbeat",
            group_id=client.group_id,
            member_id=client.member_id,
            member_epoch=client.epoch,
            instance_id=client.instance_id,
            client_id=client.member_id,
        )
        if join or client.epoch == 0:
            client.epoch, client.owned = 0, {}
            fields.update(
                member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_names=client.topics, topic_partitions=[]
            )
        else:
            fields["topic_partitions"] = [
                {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(client.owned.items())
            ]
        answer = next(o for o in self.send(**fields) if o["type"] == "consumer_heartbeat_response")
        if answer["error"] != "NONE":  # fenced or unknown: abandon everything and rejoin
            client.epoch, client.owned = 0, {}
            self.at(self.now + 1_000, lambda: self._heartbeat(client, join=True))
            return
        client.epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            client.owned = {tp["topic"]: list(tp["partitions"]) for tp in answer["assignment"] if tp["partitions"]}
        self.at(self.now + answer["heartbeat_interval_ms"], lambda: self._heartbeat(client))

    def leave(self, name: str, static: bool = False) -> None:
        client = self.clients[name]
        client.alive = False
        self.send(
            type="consumer_heartbeat",
            group_id=client.group_id,
            member_id=client.member_id,
            member_epoch=-2 if static else -1,
            instance_id=client.instance_id,
            client_id=client.member_id,
        )

    def crash(self, name: str) -> None:
        self.clients[name].alive = False

    def topic(self, group_id: str, topic: str, partitions: int) -> None:
        self.send(type="topic_metadata", group_id=group_id, topic=topic, partitions=partitions)

    # --- a classic client, for the switch back --------------------------------------------------------------
    def classic_join(self, group_id: str, name: str, topics: list[str]) -> None:
        protocols = [{"name": "range", "topics": topics}]
        out = self.send(
            type="join", group_id=group_id, member_id="", client_id=name, session_timeout_ms=10_000, protocols=protocols
        )
        member_id = next(o for o in out if o["type"] == "join_response")["member_id"]
        client = self.clients[name] = _Client(group_id, member_id, topics)
        self.send(
            type="join",
            group_id=group_id,
            member_id=member_id,
            client_id=name,
            session_timeout_ms=10_000,
            protocols=protocols,
        )
        # The initial rebalance delay (3 s) passes, then the leader syncs (the tracker computes the assignment).
        self.at(self.now + 3_500, lambda: self._classic_sync(client))

    def _classic_sync(self, client: _Client) -> None:
        model = self.model.models[client.group_id]
        model.advance(self.now - 1)  # the join round completes (the model fires timers lazily otherwise)
        group = model.model.groups[client.group_id]
        client.generation = group.generation
        self.send(type="sync", group_id=client.group_id, member_id=client.member_id, generation=client.generation)
        self.at(self.now + 3_000, lambda: self._classic_heartbeat(client))

    def _classic_heartbeat(self, client: _Client) -> None:
        self.send(type="heartbeat", group_id=client.group_id, member_id=client.member_id, generation=client.generation)
        self.at(self.now + 3_000, lambda: self._classic_heartbeat(client))


def consumer_groups_feed(
    start_ms: int,
    groups: tuple[str, ...] = ("cgroup-0", "cgroup-1"),
    duration_ms: int = 120_000,
    switch_to_classic: str | None = "cgroup-1",
    configs: Configs | None = None,
) -> list[dict]:
    """The scripted history of each group, played out; events in time order."""
    feed = ConsumerFeed(start_ms, configs)
    for i, g in enumerate(groups):
        t0 = start_ms + 100 * i
        topics = [f"{g}-a", f"{g}-b"]
        feed.at(t0, lambda g=g, topics=topics: [feed.topic(g, t, 4) for t in topics])
        for j, name in enumerate(("m0", "m1", "m2")):
            feed.at(
                t0 + 500 + 700 * j,
                lambda g=g, n=f"{g}/{name}", j=j, topics=topics: feed.join(
                    g, n, topics, instance_id=f"{g}-static" if j == 2 else None
                ),
            )
        feed.at(t0 + 20_000, lambda g=g, topics=topics: feed.topic(g, topics[0], 6))
        feed.at(t0 + 30_000, lambda g=g: feed.leave(f"{g}/m0"))
        feed.at(t0 + 38_000, lambda g=g: feed.crash(f"{g}/m1"))
        feed.at(t0 + 45_000, lambda g=g: feed.leave(f"{g}/m2", static=True))
        feed.at(t0 + 48_000, lambda g=g, topics=topics: feed.join(g, f"{g}/m2", topics, instance_id=f"{g}-static"))
        feed.at(t0 + 55_000, lambda g=g, topics=topics: feed.join(g, f"{g}/m3", topics))
        if g == switch_to_classic:
            feed.at(t0 + 95_000, lambda g=g: [feed.leave(f"{g}/m2"), feed.leave(f"{g}/m3")])
            feed.at(t0 + 97_000, lambda g=g, topics=topics: feed.classic_join(g, f"{g}/classic", topics))
    return feed.run_until(start_ms + duration_ms)
