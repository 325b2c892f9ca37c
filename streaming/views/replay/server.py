"""The server-side (KIP-848) replay of a classic feed: its stimuli as consumer-protocol heartbeats, through one
:class:`ConsumerGroupCoordinator` per group, with the simulated clients' acknowledgements and rejoins (the package's
docstring, "Server-side assignors"). The consumer-feed replay under those assignors builds on it."""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field, replace
from typing import Callable

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.coordinator.outputs import CONSUMER_HEARTBEAT_RESPONSE, MEMBER_EXPIRED, MEMBER_JOINED, MEMBER_REPLACED
from streaming.views.replay.settings import REACTION_MS

KAFKA_HEARTBEAT_INTERVAL_MS = 5_000


@dataclass
class _ConsumerClient:
    """A consumer-protocol client during a replay: what it sends and what it owns."""

    member_id: str
    instance_id: str | None
    topics: list[str]
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    regex: str | None = None  # a subscription by regular expression (consumer feeds)
    rack: str | None = None
    epoch: int = 0  # 0: (re)joining
    owned: list[tuple[str, int]] = field(default_factory=list)
    pending: list[tuple[str, int]] | None = None  # an assignment received, acknowledged REACTION_MS later
    last_sent: int | None = None


class _ConsumerReplayer:
    def __init__(self, assignor: str, config: CoordinatorConfig | None) -> None:
        self.assignor = assignor
        self.shadow = GroupCoordinator(config)  # the feed as recorded: which member id a static join got
        self.coordinators: dict[str, ConsumerGroupCoordinator] = {}
        self.intervals: dict[str, int] = {}
        self.sessions: dict[str, int] = {}
        self.topics: list[dict] = []
        self.clients: dict[tuple[str, str], _ConsumerClient] = {}
        self.outputs: list[dict] = []
        self.errors: list[dict] = []  # error answers the replayed clients got
        self._reactions: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.now = 0

    # ------------------------------------------------------------------ driving
    def run(self, events: list[dict], on_progress: Callable[[int], None] | None = None) -> list[dict]:
        # Each member's recorded requests: when it was alive.
        self.requests: dict[tuple[str, str], tuple[list[int], list[str]]] = {}
        for e in events:
            if e["type"] in ("join", "sync", "heartbeat", "commit") and e.get("member_id"):
                times, kinds = self.requests.setdefault((e.get("group_id") or "", e["member_id"]), ([], []))
                times.append(e["ts"])
                kinds.append(e["type"])
        return self._drive(events, self._recorded, max((e["ts"] for e in events), default=None), on_progress)

    def _drive(
        self,
        events: list[dict],
        recorded: Callable[[dict], None],
        horizon: int | None,
        on_progress: Callable[[int], None] | None,
    ) -> list[dict]:
        """The recorded ``events`` (in time order, each handed to ``recorded``), the simulated clients' reactions and
        the coordinators' timers, in time order, up to ``horizon`` (the recording's end)."""
        i = 0
        while i < len(events) or self._reactions:
            if i == len(events) and (horizon is None or self._reactions[0][0] > horizon):
                break  # nothing happens after the recording ends
            recorded_ts = events[i]["ts"] if i < len(events) else None
            reaction_ts = self._reactions[0][0] if self._reactions else None
            t = min(x for x in (recorded_ts, reaction_ts) if x is not None)
            deadline = min(
                (d for c in self.coordinators.values() if (d := c.next_deadline()) is not None), default=None
            )
            if deadline is not None and deadline < t:
                self._advance(deadline)
                continue
            if reaction_ts is not None and reaction_ts <= t and (recorded_ts is None or reaction_ts < recorded_ts):
                self.now = reaction_ts
                heapq.heappop(self._reactions)[2]()
            else:
                self.now = recorded_ts
                recorded(events[i])
                i += 1
                if on_progress is not None and not i & 1023:
                    on_progress(i)
        if horizon is not None:
            self._advance(horizon)
        if on_progress is not None:
            on_progress(len(events))
        return self.outputs

    def _advance(self, ts: int) -> None:
        for c in self.coordinators.values():
            self._observe(c.advance(ts))

    def _later(self, action: Callable[[], None], delay: int = REACTION_MS) -> None:
        self._seq += 1
        heapq.heappush(self._reactions, (self.now + delay, self._seq, action))

    def _coordinator(
        self, group_id: str, session_timeout_ms: int | None = None, group_config: ConsumerGroupConfig | None = None
    ) -> ConsumerGroupCoordinator | None:
        """The group's coordinator, made on its first join: with ``group_config`` (a consumer feed's group.consumer.*
        settings) or else the session timeout of a classic feed's first join (the interval a third of it, at most
        Kafka's 5 s)."""
        c = self.coordinators.get(group_id)
        if c is None and (session_timeout_ms is not None or group_config is not None):
            if group_config is None:
                session = max(session_timeout_ms, 2)
                group_config = ConsumerGroupConfig(
                    group_consumer_session_timeout_ms=session,
                    group_consumer_heartbeat_interval_ms=min(KAFKA_HEARTBEAT_INTERVAL_MS, max(1, session // 3)),
                )
            group_config = replace(group_config, group_consumer_assignors=(self.assignor,))
            c = self.coordinators[group_id] = ConsumerGroupCoordinator(group_config)
            self.intervals[group_id] = group_config.group_consumer_heartbeat_interval_ms
            self.sessions[group_id] = group_config.group_consumer_session_timeout_ms
            for e in self.topics:
                if not e.get("group_id") or e["group_id"] == group_id:
                    c.handle(e)
        return c

    def _send(self, group_id: str, client: _ConsumerClient, epoch: int, **fields) -> None:
        c = self.coordinators[group_id]
        event, error = parse_event(
            {
                "type": "consumer_heartbeat",
                "group_id": group_id,
                "ts": self.now,
                "member_id": client.member_id,
                "member_epoch": epoch,
                "instance_id": client.instance_id,
                "client_id": client.client_id,
                "client_host": client.client_host,
                **fields,
            }
        )
        assert error is None, error  # the replay only sends well-formed requests
        client.last_sent = self.now
        self._observe(c.handle(event))
        if epoch >= 0:
            self._later(lambda: self._tick(group_id, client), self.intervals[group_id])

    def _tick(self, group_id: str, client: _ConsumerClient) -> None:
        """The client's own heartbeat timer: due when it sent nothing for an interval and is still alive."""
        key = (group_id, client.member_id)
        if self.clients.get(key) is not client or not self._alive(key, self.sessions[group_id]):
            return
        if client.last_sent is None or self.now - client.last_sent >= self.intervals[group_id]:
            self._heartbeat(group_id, client)

    def _alive(self, key: tuple[str, str], session_ms: int) -> bool:
        times, kinds = self.requests.get(key, ([], []))
        after = bisect.bisect_right(times, self.now)
        if after == 0 or after == len(times):
            return False  # before its first or after its last request
        return kinds[after - 1] == "join" or times[after] - times[after - 1] < session_ms

    def _join(self, group_id: str, client: _ConsumerClient) -> None:
        client.epoch, client.owned, client.pending = 0, [], None
        self._send(
            group_id,
            client,
            0,
            rebalance_timeout_ms=client.rebalance_timeout_ms,
            subscribed_topic_names=list(client.topics),
            subscribed_topic_regex=client.regex,
            rack_id=client.rack,
            server_assignor=self.assignor,
            topic_partitions=[],
        )

    def _heartbeat(self, group_id: str, client: _ConsumerClient, **fields) -> None:
        if client.epoch <= 0:
            return self._join(group_id, client)
        self._send(group_id, client, client.epoch, topic_partitions=[list(tp) for tp in client.owned], **fields)

    # ------------------------------------------------------------------ the recorded stimuli
    def _recorded(self, e: dict) -> None:
        kind, group_id = e["type"], e.get("group_id") or ""
        shadow = self.shadow.handle(e) if kind != "consumer_heartbeat" else []
        if kind in ("topic_metadata", "delete_group", "regex_resolved"):
            return self._group_event(e)
        member_id = e.get("member_id") or ""
        client = self.clients.get((group_id, member_id))
        if kind == "join":
            topics = sorted(e["protocols"][0].get("topics", [])) if e["protocols"] else []
            instance = e.get("group_instance_id")
            if not member_id:
                if instance is None:
                    return  # the KIP-394 round trip: the member id comes next
                member_id = next(
                    (
                        o["member_id"]
                        for o in shadow
                        if o["type"] in (MEMBER_JOINED, MEMBER_REPLACED) and o.get("group_instance_id") == instance
                    ),
                    "",
                )
                if not member_id:
                    return  # the recorded broker refused it
                times, kinds = self.requests.setdefault((group_id, member_id), ([], []))
                times.insert(0, self.now)  # its join, now that its id is known
                kinds.insert(0, "join")
                self._static_restart(group_id, instance)
                client = None
            if client is None:
                self._coordinator(group_id, e["session_timeout_ms"])  # made on the group's first join
                client = self.clients[(group_id, member_id)] = _ConsumerClient(
                    member_id, instance, topics, e["rebalance_timeout_ms"], e["client_id"], e["client_host"]
                )
                return self._join(group_id, client)
            if topics != client.topics:
                client.topics = topics
                return self._heartbeat(group_id, client, subscribed_topic_names=topics)
            return
        if client is None:
            return
        if kind == "heartbeat":
            self._heartbeat(group_id, client)
        elif kind == "leave":
            if client.epoch > 0:
                self._send(group_id, client, -1)
            self.clients.pop((group_id, member_id), None)

    def _group_event(self, e: dict) -> None:
        """Topic metadata (to every coordinator it concerns; kept for groups that start later), a group's deletion,
        or the broker's resolution of its regexes (a recorded cluster feed's)."""
        group_id = e.get("group_id") or ""
        if e["type"] == "topic_metadata":
            self.topics.append(e)
            for gid, c in self.coordinators.items():
                if not group_id or gid == group_id:
                    self._observe(c.handle(e))
            return
        c = self.coordinators.get(group_id)
        if c is not None:
            self._observe(c.handle(e))

    def _static_restart(self, group_id: str, instance: str) -> None:
        """The instance's previous process closed: a consumer-protocol client says so with epoch -2."""
        for key, old in list(self.clients.items()):
            if key[0] == group_id and old.instance_id == instance:
                if old.epoch > 0:
                    self._send(group_id, old, -2)
                del self.clients[key]

    # ------------------------------------------------------------------ the simulated reactions
    def _observe(self, outputs: list[dict]) -> None:
        self.outputs.extend(outputs)
        for o in outputs:
            if o["type"] == MEMBER_EXPIRED:
                client = self.clients.get((o["group_id"], o["member_id"]))
                if client is not None:  # fenced: its next heartbeat would hear UNKNOWN_MEMBER_ID and rejoin
                    client.epoch, client.owned, client.pending = 0, [], None
                continue
            if o["type"] != CONSUMER_HEARTBEAT_RESPONSE:
                continue
            key = (o["group_id"], o["member_id"])
            client = self.clients.get(key)
            if client is None:
                continue
            if o["error"] != "NONE":
                self.errors.append(o)
                if o["error"] in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
                    client.epoch, client.owned, client.pending = 0, [], None
                    self._later(lambda g=key[0], c=client: self._rejoin(g, c))
                continue
            if o["member_epoch"] < 0:
                continue
            client.epoch = o["member_epoch"]
            if o["assignment"] is None:
                continue
            new = sorted((a["topic"], p) for a in o["assignment"] for p in a["partitions"])
            if new == (client.pending if client.pending is not None else client.owned):
                continue
            scheduled = client.pending is not None
            client.pending = new
            if not set(client.owned) - set(new):
                client.owned = new  # nothing to give up: the new partitions are taken now
            if not scheduled:
                self._later(lambda g=key[0], c=client: self._acknowledge(g, c))

    def _acknowledge(self, group_id: str, client: _ConsumerClient) -> None:
        if client.pending is None or self.clients.get((group_id, client.member_id)) is not client:
            return
        client.owned, client.pending = client.pending, None
        self._heartbeat(group_id, client)

    def _rejoin(self, group_id: str, client: _ConsumerClient) -> None:
        if self.clients.get((group_id, client.member_id)) is client and client.epoch == 0:
            self._join(group_id, client)
