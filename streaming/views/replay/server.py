"""``rebalance-tracker replay``: "would another assignor have saved us?" — one recorded feed, every assignor.

A recorded feed mixes what happened *to* the consumers (they start, crash, leave, restart, topics grow) with how
the consumers *reacted* to their coordinator (rejoin on REBALANCE_IN_PROGRESS, SyncGroup after JoinGroup). Under
another assignor the coordinator answers differently, so the replay keeps the stimuli and re-plays the reactions:

* kept: joins of new members (and the KIP-394 second join), leaves, heartbeats (they are what keeps a member
  alive — a crashed consumer simply has none), commits, topic metadata, group deletion. Every join's protocol
  list becomes the one assignor under test; heartbeats and commits carry the generation the *replayed*
  coordinator gave that member, as a real client would.
* replaced: recorded rejoins of known members and recorded SyncGroups. Instead each simulated client sends
  SyncGroup ``REACTION_MS`` after its JoinGroup response, rejoins ``REACTION_MS`` after a REBALANCE_IN_PROGRESS,
  and — cooperative protocol only — rejoins after a round that revoked some of its partitions, with the
  partitions it still owns (KIP-429). Eager clients name no owned partitions; the coordinator then remembers
  their last assignment for the sticky assignor, as the client's user data would.

Server-side assignors (KIP-848), named ``server:uniform`` and ``server:range`` (``range`` alone is the client-side
RangeAssignor), replay the same recorded classic feed under the consumer protocol, through a
:class:`ConsumerGroupCoordinator` -- one per group, so that each group has its own
``group.consumer.session.timeout.ms``: the ``session_timeout_ms`` of the group's first recorded join (the heartbeat
interval is a third of it, at most Kafka's 5 s). The same stimuli, the consumer protocol's reactions:

* the join of a new member becomes its first ``ConsumerGroupHeartbeat`` (epoch 0, its subscription, its rebalance
  timeout, the assignor under test); a static member restarting (a join with its instance id and no member id)
  first leaves with epoch -2 if its previous incarnation is still in the group -- as a closing consumer-protocol
  client does -- and joins with the member id the recorded broker gave it. A rejoin with other topics is a
  subscription change.
* recorded heartbeats become heartbeats with the epoch the *replayed* coordinator gave that member and the partitions
  it owns. A consumer-protocol client also heartbeats on its own every heartbeat interval, including through the
  recorded join rounds where a classic client sends none: a member that has sent nothing for an interval heartbeats
  when it was alive then -- between two of its recorded requests (join, sync, heartbeat or commit) less than a
  session timeout apart, or waiting for the answer to a recorded join (a slow join round). Rejoins, SyncGroups and
  commits are not sent (the first two do not exist in this protocol; commits are not modelled in it). A leave is
  epoch -1. A crash leaves no requests: the heartbeats stop at the last one, and the session expires.
* simulated reactions: a client acknowledges an assignment ``REACTION_MS`` after it: the revoked partitions are given
  up then and the new ones taken (a member still waiting for partitions others release learns of them at its next
  heartbeat, as in Kafka); fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), it gives up everything and rejoins with
  epoch 0 ``REACTION_MS`` later. A member the coordinator expired rejoins with its next heartbeat, if it sends one
  (the replay skips the UNKNOWN_MEMBER_ID round trip a real client would make first).

Consumer-protocol feeds (KIP-848: ``consumer_heartbeat`` events, as ``simulate --group-protocol consumer`` writes
them, or the cluster feed from a 4.x broker's records) are replayed under every assignor too. A group with consumer
heartbeats is a consumer-protocol group; a feed with both kinds (``--group-protocol mixed``) has each kind replayed
on its own -- groups do not interact -- and the outputs merged in time order. Per member, the stimuli
(:func:`consumer_stimuli`) are:

* its first heartbeat (epoch 0; or its first after it left): the member starts -- its subscription (topic names, or
  a regex resolved against the feed's topic metadata), rebalance timeout, instance id, rack;
* a heartbeat naming another subscription: a subscription change; so is a topic starting or stopping to match a
  member's regex, for the classic replay (a classic client rejoins for it; the consumer protocol's coordinator
  resolves regexes itself);
* epoch -1: a leave; epoch -2: a static member's temporary leave (the process closed, its session runs on);
* its other heartbeats: it is alive and heartbeating -- a crashed member simply stops, and the session expires it.
  Each client also heartbeats on its own once it has sent nothing for the group's heartbeat interval while the
  recording shows it alive (see below);
* topic metadata and group deletion, as recorded.

The reactions, which the replay makes its own:

* a heartbeat acknowledging an assignment (its owned partitions differ from the member's previous ones): it
  acknowledged what the *recorded* broker assigned. Dropped -- unless it is the member's last sign of life before a
  session of silence, then it is a plain heartbeat, so that the member's session runs out when it did;
* a heartbeat with epoch 0 from a member still in the group (a rejoin after FENCED_MEMBER_EPOCH or
  UNKNOWN_MEMBER_ID, a static member retrying after UNRELEASED_INSTANCE_ID): replayed as a heartbeat -- the client
  is alive and talking to its coordinator -- which is a join again only if the *replayed* coordinator left it at
  epoch 0.

A simulated client reacts only while the recording shows it alive (:meth:`ConsumerFeedStimuli.alive`: at its
requests, or between two less than a session apart or followed by a heartbeat with an epoch > 0; not after its last
one, nor in a silence that ends in its leave or rejoin): a crashed client acknowledges, syncs and rejoins nothing.
The group's ``group.consumer.session.timeout.ms`` and heartbeat interval (Kafka's 45 s and 5 s; the feed does not
carry them, ``--coordinator-config group.consumer.*`` does) are every member's session and heartbeat timer. A feed
made from a broker's records (the cluster feed) has only the heartbeats that changed something and reports a
session expiry as a leave: replay it with the broker's own session timeout (not the tracker's infinite one the
cluster feed suggests): a silent member then heartbeats on its own timer if it is next heard with an epoch > 0, and
is taken for crashed if it is next heard leaving -- its expiry comes a little early (its heartbeats after its last
record are unknown).

* ``server:uniform``, ``server:range``: one :class:`ConsumerGroupCoordinator` per group with those settings and
  the reactions of the classic feed's server replay above: the stimuli are heartbeats again, a join naming the
  assignor under test, the others with the epoch and owned partitions of the *replayed* group; an assignment is
  acknowledged ``REACTION_MS`` after it, a fence answered by a rejoin ``REACTION_MS`` later. Under the assignor the
  group used, the replayed target assignments are the recorded ones, epoch for epoch; what differs is the clients'
  reaction time (the recorded ones took their own, e.g. 10-300 ms to revoke in the simulator): when a partition
  reaches its next owner -- so which member holds it in between, and the moves -- and, by that much, the expiry of a
  member whose last request before it closed (-2) acknowledged an assignment.
* client-side assignors: the classic coordinator, with the group's session timeout (kept within
  group.min/max.session.timeout.ms) for every member. A join is a JoinGroup without member id and, ``REACTION_MS``
  later, the KIP-394 second one with the id it got (part of the member's join: sent even by a member that crashes
  right after); heartbeats carry the replayed generation (none while the member's JoinGroup waits); a subscription
  change is a rejoin with the new topics; -1 is a LeaveGroup, -2 nothing (a static classic member closes without
  one, KIP-345). A member the replayed coordinator removed while the recording shows it alive joins again, as a new
  member, at its next heartbeat. SyncGroup and the rejoins are the classic replay's reactions above.

Offset commits of consumer-protocol groups are not replayed (they only count as signs of life).

Everything runs on event time through the pure coordinators, so a replay is deterministic.
"""
from __future__ import annotations

import argparse
import bisect
import heapq
import json
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterable

from streaming.views import terminal
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.views.history import build_histories

DEFAULT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Also compared by default when the feed has consumer-protocol groups: their own protocol's assignors.
SERVER_ASSIGNORS = ("server:uniform", "server:range")
REACTION_MS = 5          # how long a simulated client takes to answer the coordinator
SERVER_PREFIX = "server:"   # server:uniform, server:range -- the KIP-848 assignors, replayed under that protocol
KAFKA_HEARTBEAT_INTERVAL_MS = 5_000


def is_server_assignor(name: str) -> bool:
    return name.startswith(SERVER_PREFIX)


def check_assignor(name: str) -> None:
    """LookupError for a name ``replay`` cannot run (with a hint when a server-side name lacks its prefix)."""
    from assignors import get_assignor
    from assignors.server import get_server_assignor

    if is_server_assignor(name):
        get_server_assignor(name[len(SERVER_PREFIX):])
        return
    try:
        get_assignor(name)
    except KeyError:
        try:
            get_server_assignor(name)
        except KeyError:
            raise
        raise KeyError(f"{name!r} is a server-side (KIP-848) assignor: name it {SERVER_PREFIX}{name}") from None


@dataclass
class _Client:
    """What one consumer knows about itself during a replay."""
    join: dict                       # its last join event (client id, timeouts, instance id, topics ...)
    topics: list[str]
    generation: int = -1
    assignment: list[list] = field(default_factory=list)
    awaiting_join: bool = False


class _Replayer:
    def __init__(self, assignor: str, cooperative: bool, config: CoordinatorConfig | None) -> None:
        self.assignor = assignor
        self.cooperative = cooperative
        self.coordinator = GroupCoordinator(config)
        self.clients: dict[tuple[str, str], _Client] = {}
        self.outputs: list[dict] = []
        self._reactions: list[tuple[int, int, dict]] = []
        self._seq = 0
        self._static_joins: dict[tuple[str, str], tuple[dict, list[str]]] = {}

    # ------------------------------------------------------------------ driving
    def run(self, events: list[dict], on_progress: Callable[[int], None] | None = None,
            until: int | None = None) -> list[dict]:
        """Replay ``events`` (the recorded stimuli, in time order); the coordinator's timers then run to the last
        one's time, or to ``until`` when the recording goes on longer."""
        i = 0
        while i < len(events) or self._reactions:
            recorded_ts = events[i]["ts"] if i < len(events) else None
            reaction_ts = self._reactions[0][0] if self._reactions else None
            t = min(x for x in (recorded_ts, reaction_ts) if x is not None)
            deadline = self.coordinator.next_deadline()
            if deadline is not None and deadline < t:
                # Timers first: what they produce (e.g. a completed join round) may need an answer before t.
                self._observe(self.coordinator.advance(deadline))
                continue
            if reaction_ts is not None and reaction_ts <= t and (recorded_ts is None or reaction_ts < recorded_ts):
                self._send(heapq.heappop(self._reactions)[2])
            else:
                event = self._rewrite(events[i])
                i += 1
                if on_progress is not None and not i & 1023:
                    on_progress(i)
                if event is not None:
                    self._send(event)
        last = max([e["ts"] for e in events] + ([until] if until is not None else []), default=None)
        if last is not None:
            self._observe(self.coordinator.advance(last))
        if on_progress is not None:
            on_progress(len(events))
        return self.outputs

    def _send(self, event: dict) -> None:
        self._observe(self.coordinator.handle(event))

    def _later(self, ts: int, event: dict) -> None:
        event, error = parse_event(dict(event, ts=ts + REACTION_MS))
        assert error is None, error                       # the replay only sends well-formed requests
        self._seq += 1
        heapq.heappush(self._reactions, (event["ts"], self._seq, event))

    # ------------------------------------------------------------------ the recorded stimuli
    def _rewrite(self, e: dict) -> dict | None:
        kind = e["type"]
        key = (e.get("group_id") or "", e.get("member_id") or "")
        client = self.clients.get(key)
        if kind == "sync":
            return None                                   # clients sync when *this* coordinator says so
        if kind == "join":
            topics = list(e["protocols"][0].get("topics", [])) if e["protocols"] else []
            group = self.coordinator.groups.get(key[0])
            if key[1] and group is not None and key[1] in group.members and client is not None:
                if sorted(topics) == sorted(client.topics):
                    return None                           # a recorded reaction: replaced by our own
            e = dict(e, protocols=[self._protocol(topics, client)])
            if key[1]:
                self.clients[key] = _Client(_join_fields(e), topics, awaiting_join=True,
                                            generation=client.generation if client else -1,
                                            assignment=client.assignment if client else [])
            elif e.get("group_instance_id") is not None:  # a static member (re)starting: its id comes back
                self._static_joins[(key[0], e["group_instance_id"])] = (_join_fields(e), topics)
            return e
        if kind in ("heartbeat", "commit") and client is not None and e.get("generation", -1) >= 0:
            return dict(e, generation=client.generation)
        return e

    def _protocol(self, topics: list[str], client: _Client | None) -> dict:
        protocol = {"name": self.assignor, "topics": topics}
        if self.cooperative:  # KIP-429: say what you still own and since which generation
            protocol["owned_partitions"] = [list(tp) for tp in (client.assignment if client else [])]
            protocol["generation"] = client.generation if client else -1
        return protocol

    # ------------------------------------------------------------------ the simulated reactions
    def _rejoin(self, key: tuple[str, str], ts: int) -> None:
        client = self.clients.get(key)
        if client is None or client.awaiting_join:
            return
        client.awaiting_join = True
        if not self.cooperative:
            client.assignment = []                        # eager: everything is revoked before rejoining
        event = dict(client.join, member_id=key[1], protocols=[self._protocol(client.topics, client)], reason=None)
        self._later(ts, event)

    def _observe(self, outputs: list[dict]) -> None:
        self.outputs.extend(outputs)
        for o in outputs:
            kind = o["type"]
            key = (o["group_id"], o.get("member_id") or "")
            if kind in ("member_joined", "member_replaced") and o.get("group_instance_id") is not None:
                known = self._static_joins.get((o["group_id"], o["group_instance_id"]))
                if known is not None and key not in self.clients:
                    self.clients[key] = _Client(known[0], known[1], awaiting_join=True)
                if kind == "member_replaced":
                    self.clients.pop((o["group_id"], o["previous_member_id"]), None)
                continue
            client = self.clients.get(key)
            if client is None:
                continue
            error = o.get("error")
            if kind == "join_response" and error == "NONE":
                client.awaiting_join = False
                client.generation = o["generation"]
                self._later(o["ts"], {"type": "sync", "group_id": key[0], "member_id": key[1],
                                      "group_instance_id": o.get("group_instance_id"),
                                      "generation": o["generation"]})
            elif kind == "join_response" and error not in (None, "MEMBER_ID_REQUIRED"):
                client.awaiting_join = False
            elif kind in ("heartbeat_response", "sync_response") and error == "REBALANCE_IN_PROGRESS":
                self._rejoin(key, o["ts"])
            elif kind == "sync_response" and error == "NONE":
                new = [list(tp) for tp in o["assignment"]]
                revoked = {tuple(tp) for tp in client.assignment} - {tuple(tp) for tp in new}
                client.assignment = new
                if self.cooperative and revoked:
                    self._rejoin(key, o["ts"])            # the follow-up round hands the revoked partitions on
            elif kind in ("member_expired", "member_left"):
                self.clients.pop(key, None)


# ==================================================================== server-side assignors: the consumer protocol
@dataclass
class _ConsumerClient:
    """A consumer-protocol client during a replay: what it sends and what it owns."""
    member_id: str
    instance_id: str | None
    topics: list[str]
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    regex: str | None = None                         # a subscription by regular expression (consumer feeds)
    rack: str | None = None
    epoch: int = 0                                   # 0: (re)joining
    owned: list[tuple[str, int]] = field(default_factory=list)
    pending: list[tuple[str, int]] | None = None     # an assignment received, acknowledged REACTION_MS later
    last_sent: int | None = None


class _ConsumerReplayer:
    def __init__(self, assignor: str, config: CoordinatorConfig | None) -> None:
        self.assignor = assignor
        self.shadow = GroupCoordinator(config)      # the feed as recorded: which member id a static join got
        self.coordinators: dict[str, ConsumerGroupCoordinator] = {}
        self.intervals: dict[str, int] = {}
        self.sessions: dict[str, int] = {}
        self.topics: list[dict] = []
        self.clients: dict[tuple[str, str], _ConsumerClient] = {}
        self.outputs: list[dict] = []
        self.errors: list[dict] = []                 # error answers the replayed clients got
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

    def _drive(self, events: list[dict], recorded: Callable[[dict], None], horizon: int | None,
               on_progress: Callable[[int], None] | None) -> list[dict]:
        """The recorded ``events`` (in time order, each handed to ``recorded``), the simulated clients' reactions and
        the coordinators' timers, in time order, up to ``horizon`` (the recording's end)."""
        i = 0
        while i < len(events) or self._reactions:
            if i == len(events) and (horizon is None or self._reactions[0][0] > horizon):
                break                                    # nothing happens after the recording ends
            recorded_ts = events[i]["ts"] if i < len(events) else None
            reaction_ts = self._reactions[0][0] if self._reactions else None
            t = min(x for x in (recorded_ts, reaction_ts) if x is not None)
            deadline = min((d for c in self.coordinators.values() if (d := c.next_deadline()) is not None),
                           default=None)
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

    def _coordinator(self, group_id: str, session_timeout_ms: int | None = None,
                     group_config: ConsumerGroupConfig | None = None) -> ConsumerGroupCoordinator | None:
        """The group's coordinator, made on its first join: with ``group_config`` (a consumer feed's group.consumer.*
        settings) or else the session timeout of a classic feed's first join (the interval a third of it, at most
        Kafka's 5 s)."""
        c = self.coordinators.get(group_id)
        if c is None and (session_timeout_ms is not None or group_config is not None):
            if group_config is None:
                session = max(session_timeout_ms, 2)
                group_config = ConsumerGroupConfig(
                    group_consumer_session_timeout_ms=session,
                    group_consumer_heartbeat_interval_ms=min(KAFKA_HEARTBEAT_INTERVAL_MS, max(1, session // 3)))
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
        event, error = parse_event({"type": "consumer_heartbeat", "group_id": group_id, "ts": self.now,
                                    "member_id": client.member_id, "member_epoch": epoch,
                                    "instance_id": client.instance_id, "client_id": client.client_id,
                                    "client_host": client.client_host, **fields})
        assert error is None, error                  # the replay only sends well-formed requests
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
            return False                                 # before its first or after its last request
        return kinds[after - 1] == "join" or times[after] - times[after - 1] < session_ms

    def _join(self, group_id: str, client: _ConsumerClient) -> None:
        client.epoch, client.owned, client.pending = 0, [], None
        self._send(group_id, client, 0, rebalance_timeout_ms=client.rebalance_timeout_ms,
                   subscribed_topic_names=list(client.topics), subscribed_topic_regex=client.regex,
                   rack_id=client.rack, server_assignor=self.assignor, topic_partitions=[])

    def _heartbeat(self, group_id: str, client: _ConsumerClient, **fields) -> None:
        if client.epoch <= 0:
            return self._join(group_id, client)
        self._send(group_id, client, client.epoch, topic_partitions=[list(tp) for tp in client.owned], **fields)

    # ------------------------------------------------------------------ the recorded stimuli
    def _recorded(self, e: dict) -> None:
        kind, group_id = e["type"], e.get("group_id") or ""
        shadow = self.shadow.handle(e) if kind != "consumer_heartbeat" else []
        if kind in ("topic_metadata", "delete_group"):
            return self._group_event(e)
        member_id = e.get("member_id") or ""
        client = self.clients.get((group_id, member_id))
        if kind == "join":
            topics = sorted(e["protocols"][0].get("topics", [])) if e["protocols"] else []
            instance = e.get("group_instance_id")
            if not member_id:
                if instance is None:
                    return                               # the KIP-394 round trip: the member id comes next
                member_id = next((o["member_id"] for o in shadow if o["type"] in ("member_joined", "member_replaced")
                                  and o.get("group_instance_id") == instance), "")
                if not member_id:
                    return                               # the recorded broker refused it
                times, kinds = self.requests.setdefault((group_id, member_id), ([], []))
                times.insert(0, self.now)                # its join, now that its id is known
                kinds.insert(0, "join")
                self._static_restart(group_id, instance)
                client = None
            if client is None:
                c = self._coordinator(group_id, e["session_timeout_ms"])
                client = self.clients[(group_id, member_id)] = _ConsumerClient(
                    member_id, instance, topics, e["rebalance_timeout_ms"], e["client_id"], e["client_host"])
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
        """Topic metadata (to every coordinator it concerns; kept for groups that start later) or a group's
        deletion."""
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
            if o["type"] == "member_expired":
                client = self.clients.get((o["group_id"], o["member_id"]))
                if client is not None:      # fenced: its next heartbeat would hear UNKNOWN_MEMBER_ID and rejoin
                    client.epoch, client.owned, client.pending = 0, [], None
                continue
            if o["type"] != "consumer_heartbeat_response":
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
                client.owned = new                       # nothing to give up: the new partitions are taken now
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


# ==================================================================== consumer-protocol feeds: the stimuli per member
@dataclass
class ConsumerFeedStimuli:
    """What happened to a feed's consumer-protocol groups, as stimuli (dicts in time order, each with ``ts``,
    ``kind`` and ``group_id``):

    * ``join``: a member starts (``member_id``, ``instance_id``, ``client_id``, ``client_host``, ``rack_id``,
      ``rebalance_timeout_ms``, ``names``/``regex`` as subscribed and ``topics``: what they name now);
    * ``heartbeat``: the member's own heartbeat (it is alive and talks to its coordinator);
    * ``subscribe``: it subscribes to other topics (``names``, ``regex``, ``topics``); ``resolved``: only its regex
      names other topics now, which a classic client has to tell its coordinator and a consumer-protocol one not;
    * ``leave``: it closes (``temporary``: a static member's epoch -2);
    * ``event``: a ``topic_metadata`` or ``delete_group`` event, as recorded.

    ``requests``: when each member was heard from (its recorded heartbeats: ``join`` with epoch 0, ``heartbeat``
    otherwise; its ``leave``), ``end``: the recording's last time."""
    stimuli: list[dict]
    requests: dict[tuple[str, str], tuple[list[int], list[str]]]
    end: int | None
    session_timeout_ms: int

    def alive(self, key: tuple[str, str], ts: int, strictly: bool = False) -> bool:
        """Whether the recording shows the member alive at ``ts``: at one of its requests (``strictly``: just past
        it, for its own heartbeat timer), or between two of them -- less than a session apart, or followed by a
        heartbeat with an epoch > 0 (a member silent for a session would have been fenced: it heartbeated,
        unrecorded, as in a feed from a broker's records, which has only the heartbeats that changed something).
        Not after its last request, nor in a silence that ends in its leave or rejoin (a crash; such a feed reports
        an expiry as a leave): a crashed client does nothing."""
        times, kinds = self.requests.get(key, ([], []))
        after = bisect.bisect_right(times, ts)
        if after == 0:
            return False
        if ts == times[after - 1] and not strictly:
            return True
        if after == len(times):
            return False
        return times[after] - times[after - 1] < self.session_timeout_ms or kinds[after] == "heartbeat"


@dataclass
class _Recorded:
    """One consumer-protocol member as the feed shows it (for telling its stimuli from its reactions)."""
    names: list[str] | None
    regex: str | None
    topics: list[str]
    owned: frozenset = frozenset()
    left: bool = False


def consumer_groups(events: Iterable[dict]) -> set[str]:
    """The groups of a feed that speak the consumer protocol (KIP-848): those with ``consumer_heartbeat`` events."""
    return {e.get("group_id") or "" for e in events if e["type"] == "consumer_heartbeat"}


def split_feed(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the classic groups' events, the consumer-protocol groups' events); topic metadata that names no group goes to
    both."""
    consumer = consumer_groups(events)
    if not consumer:
        return events, []
    classic, kip848 = [], []
    for e in events:
        gid = e.get("group_id")
        if e["type"] == "topic_metadata" and not gid:
            classic.append(e)
            kip848.append(e)
        elif (gid or "") in consumer:
            kip848.append(e)
        else:
            classic.append(e)
    return classic, kip848


def consumer_stimuli(events: list[dict], heartbeat_interval_ms: int, session_timeout_ms: int) -> ConsumerFeedStimuli:
    """The stimuli of a consumer-protocol feed (``events`` in time order; see the module's docstring for what is a
    stimulus and what a reaction). The group's heartbeat interval and session timeout drive the clients' own
    heartbeat timer: a member that has sent nothing for an interval heartbeats if the recording shows it alive then
    (:meth:`ConsumerFeedStimuli.alive`)."""
    from streaming.coordinator.consumer.regex import resolve

    stimuli: list[dict] = []
    requests: dict[tuple[str, str], tuple[list[int], list[str]]] = {}
    members: dict[tuple[str, str], _Recorded] = {}
    acks: list[dict] = []
    sizes: dict[str | None, dict[str, int]] = {}           # group (None: every group) -> topic -> partitions
    names_by_id: dict[str, str] = {}

    def topics_of(group_id: str, names: list[str] | None, regex: str | None) -> list[str]:
        found = set(names or ())
        if regex:
            known = {t for scope in (None, group_id) for t, n in sizes.get(scope, {}).items() if n > 0}
            found |= resolve(regex, known)
        return sorted(found)

    def owned_of(e: dict) -> frozenset | None:
        if e["topic_partitions"] is None:
            return None                                    # Kafka's clients leave it out when it did not change
        return frozenset((tp["topic"] or names_by_id.get(tp["topic_id"], tp["topic_id"]), p)
                         for tp in e["topic_partitions"] for p in tp["partitions"])

    for n, e in enumerate(events, 1):
        kind, gid, ts = e["type"], e.get("group_id") or "", e["ts"]
        if kind in ("topic_metadata", "delete_group"):
            stimuli.append({"ts": ts, "kind": "event", "group_id": gid, "event": e, "n": n})
            if kind == "topic_metadata":
                if e["topic_id"]:
                    names_by_id[e["topic_id"]] = e["topic"]
                sizes.setdefault(e.get("group_id") or None, {})[e["topic"]] = e["partitions"]
                for (g, member_id), r in members.items():   # a regex may name the topic now (or no longer)
                    if r.regex and not r.left and (not gid or g == gid):
                        topics = topics_of(g, r.names, r.regex)
                        if topics != r.topics:
                            r.topics = topics
                            stimuli.append({"ts": ts, "kind": "subscribe", "group_id": g, "member_id": member_id,
                                            "names": r.names, "regex": r.regex, "topics": topics,
                                            "resolved": True, "n": n})
            continue
        key = (gid, e.get("member_id") or "")
        r = members.get(key)
        if kind != "consumer_heartbeat":
            if r is not None and not r.left and kind in ("commit", "heartbeat", "join", "sync"):
                times, kinds = requests.setdefault(key, ([], []))   # it was alive (its offset commits, say)
                times.append(ts)
                kinds.append(kind)
            continue
        epoch = e["member_epoch"]
        names = sorted(set(e["subscribed_topic_names"])) if e["subscribed_topic_names"] is not None else None
        regex = e["subscribed_topic_regex"]
        member = {"ts": ts, "group_id": gid, "member_id": key[1], "n": n}
        if epoch < 0:
            if r is not None and not r.left:
                r.left = True
                stimuli.append(dict(member, kind="leave", temporary=epoch == -2))
                times, kinds = requests.setdefault(key, ([], []))
                times.append(ts)
                kinds.append("leave")
            continue
        if r is None or r.left:
            if epoch != 0 and names is None and not regex:
                continue     # a member already there when the recording started, its subscription unknown
            r = members[key] = _Recorded(names, regex or None, topics_of(gid, names, regex))
            stimuli.append(dict(member, kind="join", instance_id=e["instance_id"], client_id=e["client_id"],
                                client_host=e["client_host"], rack_id=e["rack_id"],
                                rebalance_timeout_ms=e["rebalance_timeout_ms"], names=r.names, regex=r.regex,
                                topics=r.topics))
        else:
            changed = (names is not None and names != r.names) or (regex is not None and (regex or None) != r.regex)
            owned = frozenset() if epoch == 0 else owned_of(e)
            if changed:
                r.names = names if names is not None else r.names
                r.regex = (regex or None) if regex is not None else r.regex
                r.topics = topics_of(gid, r.names, r.regex)
                stimuli.append(dict(member, kind="subscribe", names=r.names, regex=r.regex, topics=r.topics))
            elif epoch > 0 and owned is not None and owned != r.owned:
                # An acknowledgement: the replayed clients acknowledge their own assignments. Kept (as a heartbeat)
                # only if it is the member's last sign of life, so that its session runs out when it did.
                acks.append(dict(member, kind="heartbeat", last_sign_of_life=True))
            else:            # a heartbeat; a rejoin after being fenced is one too (see the module's docstring)
                stimuli.append(dict(member, kind="heartbeat"))
            if owned is not None:
                r.owned = owned
        times, kinds = requests.setdefault(key, ([], []))
        times.append(ts)
        kinds.append("join" if epoch == 0 else "heartbeat")
    for ack in acks:
        times = requests[(ack["group_id"], ack["member_id"])][0]
        after = bisect.bisect_right(times, ack["ts"])
        if after == len(times) or times[after] - ack["ts"] >= session_timeout_ms:
            stimuli.append(ack)
    feed = ConsumerFeedStimuli(stimuli, requests, events[-1]["ts"] if events else None, session_timeout_ms)
    stimuli += _own_heartbeats(feed, heartbeat_interval_ms)
    stimuli.sort(key=lambda s: (s["ts"], s["n"]))
    return feed


def _own_heartbeats(feed: ConsumerFeedStimuli, interval_ms: int) -> list[dict]:
    """The clients' own heartbeat timer: a heartbeat once a member has sent nothing for an interval, while the
    recording shows it alive (:meth:`ConsumerFeedStimuli.alive`)."""
    stimuli = feed.stimuli
    sends: dict[tuple[str, str], list[tuple[int, bool]]] = {}       # member -> (ts, whether it closed then)
    for s in stimuli:
        if s["kind"] in ("join", "heartbeat", "subscribe") and not s.get("resolved"):
            sends.setdefault((s["group_id"], s["member_id"]), []).append((s["ts"], False))
        elif s["kind"] == "leave":
            sends.setdefault((s["group_id"], s["member_id"]), []).append((s["ts"], True))
    extra = []
    for key, times in sends.items():
        for (sent, closed), following in zip(times, times[1:] + [None]):
            t = sent + interval_ms
            while not closed and (following is None or t < following[0]) and feed.alive(key, t, strictly=True):
                extra.append({"ts": t, "kind": "heartbeat", "group_id": key[0], "member_id": key[1], "own": True})
                t += interval_ms
    # Progress: an added heartbeat counts as the recorded event before it.
    recorded = sorted((s["ts"], s["n"]) for s in stimuli)
    for s in extra:
        at = bisect.bisect_right(recorded, (s["ts"], float("inf")))
        s["n"] = recorded[at - 1][1] if at else 0
    return extra


def _by_recorded(stimuli: list[dict], on_progress: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """A replayer's progress (stimuli done) as recorded events done."""
    if on_progress is None:
        return None
    return lambda i: on_progress(stimuli[i - 1]["n"] if i else 0)


def _event(**fields) -> dict:
    event, error = parse_event(fields)
    assert error is None, error                          # the replay only sends well-formed requests
    return event


class _ConsumerFeedServerReplayer(_ConsumerReplayer):
    """A consumer-protocol feed under a server-side assignor: each stimulus is a heartbeat again, with the epoch and
    the partitions of the *replayed* group; the reactions are :class:`_ConsumerReplayer`'s."""

    def __init__(self, assignor: str, feed: ConsumerFeedStimuli, group_config: ConsumerGroupConfig) -> None:
        super().__init__(assignor, None)
        self.feed, self.group_config = feed, group_config

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[dict]:   # type: ignore[override]
        return self._drive(self.feed.stimuli, self._stimulus, self.feed.end, _by_recorded(self.feed.stimuli,
                                                                                          on_progress))

    def _stimulus(self, s: dict) -> None:
        kind, group_id = s["kind"], s["group_id"]
        if kind == "event":
            return self._group_event(s["event"])
        key = (group_id, s["member_id"])
        client = self.clients.get(key)
        if kind == "join":
            self._coordinator(group_id, group_config=self.group_config)
            client = self.clients[key] = _ConsumerClient(
                s["member_id"], s["instance_id"], list(s["names"] or []), s["rebalance_timeout_ms"], s["client_id"],
                s["client_host"], regex=s["regex"], rack=s["rack_id"])
            return self._join(group_id, client)
        if client is None:
            return
        if kind == "heartbeat":
            self._heartbeat(group_id, client)
        elif kind == "subscribe" and not s.get("resolved"):     # the coordinator resolves regexes itself
            client.topics, client.regex = list(s["names"] or []), s["regex"]
            self._heartbeat(group_id, client, subscribed_topic_names=list(s["names"] or []),
                            subscribed_topic_regex=s["regex"] or "")
        elif kind == "leave":
            if client.epoch > 0:
                self._send(group_id, client, -2 if s["temporary"] else -1)
            del self.clients[key]

    def _alive(self, key: tuple[str, str], session_ms: int) -> bool:
        return self.feed.alive(key, self.now, strictly=True)     # the client's own heartbeat timer

    # A client reacts only while the recording shows it alive: a crashed one acknowledges and rejoins nothing.
    def _acknowledge(self, group_id: str, client: _ConsumerClient) -> None:
        if self.feed.alive((group_id, client.member_id), self.now):
            return super()._acknowledge(group_id, client)
        client.pending = None

    def _rejoin(self, group_id: str, client: _ConsumerClient) -> None:
        if self.feed.alive((group_id, client.member_id), self.now):
            super()._rejoin(group_id, client)


class _ConsumerFeedClassicReplayer(_Replayer):
    """A consumer-protocol feed under a client-side assignor, through the classic coordinator: each member joins
    (KIP-394: with no member id, then with the one the coordinator gives), heartbeats with the replayed generation
    and leaves as a classic client does; the reactions (SyncGroup, rejoins) are :class:`_Replayer`'s."""

    def __init__(self, assignor: str, cooperative: bool, config: CoordinatorConfig | None,
                 feed: ConsumerFeedStimuli, session_timeout_ms: int) -> None:
        super().__init__(assignor, cooperative, config)
        limits = self.coordinator.config
        self.feed = feed
        self.session_ms = min(max(session_timeout_ms, limits.group_min_session_timeout_ms),
                              limits.group_max_session_timeout_ms)
        self.members: dict[tuple[str, str], dict] = {}   # recorded member -> its join stimulus, topics kept current
        self.ids: dict[tuple[str, str], str] = {}        # recorded member -> its member id in the replayed group
        self.recorded_ids: dict[tuple[str, str], tuple[str, str]] = {}   # and back
        self._joining: tuple[tuple[str, str], dict] | None = None
        self._recorded_event: dict | None = None

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[dict]:   # type: ignore[override]
        return super().run(self.feed.stimuli, _by_recorded(self.feed.stimuli, on_progress), until=self.feed.end)

    def _rewrite(self, s: dict) -> dict | None:
        self._recorded_event = event = self._translate(s)
        return event

    def _translate(self, s: dict) -> dict | None:
        kind, group_id, ts = s["kind"], s["group_id"], s["ts"]
        if kind == "event":
            return s["event"]
        key = (group_id, s["member_id"])
        if kind == "join":
            self.members[key] = dict(s)
            self.ids.pop(key, None)
            return self._fresh_join(key, ts)
        member = self.members.get(key)
        if member is None:
            return None
        replayed = self.ids.get(key)
        client = self.clients.get((group_id, replayed)) if replayed is not None else None
        if kind == "leave":
            del self.members[key]
            self.ids.pop(key, None)
            if s["temporary"] or client is None:
                return None                               # KIP-345: a static member closes without LeaveGroup
            return _event(type="leave", group_id=group_id, ts=ts, member_id=replayed,
                          group_instance_id=member["instance_id"], reason="the consumer is being closed")
        if kind == "subscribe":
            member["topics"] = s["topics"]
        if client is None:
            # Gone from the replayed group (expired, or its join refused) while the recording shows it alive: a
            # classic client told UNKNOWN_MEMBER_ID joins again, as a new member.
            return self._fresh_join(key, ts)
        if kind == "subscribe":
            return super()._rewrite(self._join(key, ts, replayed))     # a rejoin with the new topics
        if client.awaiting_join:
            return None                                   # no heartbeats while its JoinGroup waits
        return super()._rewrite(_event(type="heartbeat", group_id=group_id, ts=ts, member_id=replayed,
                                       group_instance_id=member["instance_id"], generation=0))

    def _join(self, key: tuple[str, str], ts: int, member_id: str) -> dict:
        m = self.members[key]
        timeout = m["rebalance_timeout_ms"]
        return _event(type="join", group_id=key[0], ts=ts, member_id=member_id, group_instance_id=m["instance_id"],
                      client_id=m["client_id"], client_host=m["client_host"], session_timeout_ms=self.session_ms,
                      rebalance_timeout_ms=timeout if timeout > 0 else self.session_ms, protocol_type="consumer",
                      protocols=[{"name": self.assignor, "topics": m["topics"]}])

    def _fresh_join(self, key: tuple[str, str], ts: int) -> dict:
        event = super()._rewrite(self._join(key, ts, ""))
        self._joining = (key, event)
        return event

    def _send(self, event: dict) -> None:
        if event is not self._recorded_event and not self._reacts(event):
            return
        outputs = self.coordinator.handle(event)
        if self._joining is not None and self._joining[1] is event:
            self._adopt(self._joining[0], event, outputs)
            self._joining = None
        self._observe(outputs)

    def _reacts(self, event: dict) -> bool:
        """Whether a client sends this reaction (SyncGroup, a rejoin): only while the recording shows it alive -- a
        crashed client does nothing. The second JoinGroup of KIP-394 is sent whatever: it is half of the member's
        recorded join, not an answer to this coordinator's assignment."""
        group_id, member_id = event["group_id"], event["member_id"]
        key = self.recorded_ids.get((group_id, member_id))
        if key is None or self.feed.alive(key, event["ts"]):
            return True
        group = self.coordinator.groups.get(group_id)
        if event["type"] == "join" and group is not None and member_id in group.pending_members:
            return True
        client = self.clients.get((group_id, member_id))
        if client is not None and event["type"] == "join":
            client.awaiting_join = False                  # it sent no JoinGroup: it waits for none
        return False

    def _adopt(self, key: tuple[str, str], join: dict, outputs: list[dict]) -> None:
        """The member id the replayed coordinator gave a recorded member's join; a dynamic member comes back with it
        ``REACTION_MS`` later (KIP-394)."""
        instance = join["group_instance_id"]
        for o in outputs:
            if instance is None and o["type"] == "join_response" and o["error"] == "MEMBER_ID_REQUIRED":
                self.ids[key] = o["member_id"]
                self.recorded_ids[(key[0], o["member_id"])] = key
                topics = self.members[key]["topics"]
                self.clients[(key[0], o["member_id"])] = _Client(_join_fields(join), topics, awaiting_join=True)
                self._later(o["ts"], dict(_join_fields(join), member_id=o["member_id"],
                                          protocols=[self._protocol(topics, None)]))
            elif instance is not None and o["type"] in ("member_joined", "member_replaced") \
                    and o.get("group_instance_id") == instance:
                self.ids[key] = o["member_id"]
                self.recorded_ids[(key[0], o["member_id"])] = key


def _join_fields(e: dict) -> dict:
    """A client's join request without its protocols: what a simulated rejoin repeats."""
    return {k: e[k] for k in ("type", "group_id", "group_instance_id", "client_id", "client_host",
                              "session_timeout_ms", "rebalance_timeout_ms", "protocol_type") if k in e}


def replay_outputs(events: Iterable[dict], assignor: str, config: CoordinatorConfig | None = None,
                   on_progress: Callable[[int], None] | None = None,
                   consumer_config: ConsumerGroupConfig | None = None) -> list[dict]:
    """Coordinator outputs of ``events`` (validated feed events with ``ts``) replayed under ``assignor``;
    ``on_progress(n)`` hears how many recorded events have been replayed, now and then. A ``server:NAME`` assignor
    replays the feed under the consumer protocol (see the module's docstring). The feed's classic groups and its
    consumer-protocol groups (``consumer_config``: their group.consumer.* settings, Kafka's defaults otherwise) are
    replayed apart -- groups do not interact -- and their outputs merged in time order."""
    feed = sorted(events, key=lambda e: e["ts"])        # stable: equal timestamps keep feed order
    classic, kip848 = split_feed(feed)
    runs = []
    if not kip848 or any(e["type"] != "topic_metadata" for e in classic):
        runs.append(_replay_classic_feed(classic, assignor, config, on_progress))
    if kip848:
        shifted = None if on_progress is None else (lambda n, done=len(classic): on_progress(done + n))
        runs.append(_replay_consumer_feed(kip848, assignor, config, consumer_config or ConsumerGroupConfig(),
                                          shifted))
    if on_progress is not None:
        on_progress(len(feed))
    return runs[0] if len(runs) == 1 else list(heapq.merge(*runs, key=lambda o: o["ts"]))


def _chosen(assignor: str) -> tuple[str, bool]:
    """The assignor's own name and whether the replay runs it with the cooperative protocol (a server-side one:
    its name without the prefix)."""
    if is_server_assignor(assignor):
        from assignors.server import get_server_assignor

        return get_server_assignor(assignor[len(SERVER_PREFIX):]).name, False
    from assignors import get_assignor

    chosen = get_assignor(assignor)
    # A cooperative-capable assignor is run the way Kafka's clients use it: with the cooperative protocol.
    return chosen.name, "cooperative" in chosen.supported_protocols


def _replay_classic_feed(feed: list[dict], assignor: str, config: CoordinatorConfig | None,
                         on_progress: Callable[[int], None] | None) -> list[dict]:
    name, cooperative = _chosen(assignor)
    if is_server_assignor(assignor):
        return _ConsumerReplayer(name, config).run(feed, on_progress)
    return _Replayer(name, cooperative, config).run(feed, on_progress)


def _replay_consumer_feed(feed: list[dict], assignor: str, config: CoordinatorConfig | None,
                          group_config: ConsumerGroupConfig, on_progress: Callable[[int], None] | None) -> list[dict]:
    name, cooperative = _chosen(assignor)
    stimuli = consumer_stimuli(feed, group_config.group_consumer_heartbeat_interval_ms,
                               group_config.group_consumer_session_timeout_ms)
    if is_server_assignor(assignor):
        return _ConsumerFeedServerReplayer(name, stimuli, group_config).run(on_progress)
    return _ConsumerFeedClassicReplayer(name, cooperative, config, stimuli,
                                        group_config.group_consumer_session_timeout_ms).run(on_progress)


# ==================================================================== scoring
@dataclass
class Score:
    assignor: str
    rebalances: int
    partitions_moved: int
    worst_balance: int            # max − min partitions per member, worst generation of any group
    final_balance: int            # the same, after each group's last generation
    total_rebalance_ms: int
    max_rebalance_ms: int
    max_unavailable_ms: int       # the coordinator's max partition unavailability over all rebalances
    unavailable_partition_s: float  # summed owner-less time of all partitions (eager: stop-the-world)
    members_expired: int

    ROWS = (("rebalances", "rebalances"), ("partitions moved", "partitions_moved"),
            ("balance, worst (max−min)", "worst_balance"), ("balance, final (max−min)", "final_balance"),
            ("rebalance time total (ms)", "total_rebalance_ms"), ("rebalance time max (ms)", "max_rebalance_ms"),
            ("max partition unavailability (ms)", "max_unavailable_ms"),
            ("partition unavailability (partition·s)", "unavailable_partition_s"),
            ("members expired", "members_expired"))


def score(assignor: str, outputs: list[dict], group_id: str | None = None) -> Score:
    """The columns, from the groups' histories. Classic groups: a rebalance is a completed generation, moves and
    unavailability are the coordinator's per generation. Consumer-protocol groups: a rebalance is a group-epoch bump
    whose target assignment changed the previous one; balance is the target's; a move is a partition that ended up
    with another member; unavailability is the time partitions spent with no owner (from their release -- revocation
    acknowledged, or the member gone -- to their next owner taking them); rebalance time runs from a bump to Stable."""
    histories = build_histories(o for o in outputs if group_id is None or o.get("group_id") == group_id)
    classic = [h for h in histories.values() if not h.is_consumer]
    consumer = [h for h in histories.values() if h.is_consumer]
    gens = [g for h in classic for g in h.generations]
    staffed = [g.balance for g in gens if g.owners]
    finals = [next((g.balance for g in reversed(h.generations) if g.owners), None) for h in classic]
    targets = [t for h in consumer for t in h.targets]
    staffed += [t.balance for t in targets if t.target]
    finals += [next((t.balance for t in reversed(h.targets) if t.target), None) for h in consumer]
    spans = [u.duration_ms for h in consumer for u in h.unowned if u.duration_ms is not None]
    durations = [g.duration_ms for h in histories.values() for g in h.generations]
    return Score(
        assignor=assignor, rebalances=len(gens) + sum(1 for t in targets if t.changed),
        partitions_moved=sum(g.partitions_moved for g in gens) + sum(h.moves for h in consumer),
        worst_balance=max(staffed, default=0),
        final_balance=max((b for b in finals if b is not None), default=0),
        total_rebalance_ms=sum(durations), max_rebalance_ms=max(durations, default=0),
        max_unavailable_ms=max([g.max_partition_unavailable_ms for g in gens] + spans, default=0),
        unavailable_partition_s=round((sum(g.unavailable_partition_ms for g in gens) + sum(spans)) / 1000, 1),
        members_expired=sum(1 for h in histories.values() for d in h.departures if d.kind == "expired"))


def compare(events: list[dict], assignors: Iterable[str], config: CoordinatorConfig | None = None,
            group_id: str | None = None, show_progress: bool = False,
            consumer_config: ConsumerGroupConfig | None = None) -> list[Score]:
    """One score per assignor; ``show_progress``: a progress bar per assignor on stderr (plain lines off a
    terminal); ``consumer_config``: the group.consumer.* settings of the feed's consumer-protocol groups."""
    if not show_progress:
        return [score(a, replay_outputs(events, a, config, consumer_config=consumer_config), group_id)
                for a in assignors]
    scores = []
    with terminal.Progress() as bars:
        for a in assignors:
            task = bars.task(f"replay {a}", total=len(events))
            outputs = replay_outputs(events, a, config, lambda n: task.update(completed=n), consumer_config)
            bars.finish(task)
            scores.append(score(a, outputs, group_id))
    return scores


def _table(scores: list[Score]) -> tuple[list[str], list[list[str]]]:
    """Metrics as rows, assignors as columns: the side-by-side answer."""
    return ["", *(s.assignor for s in scores)], [[label, *(str(getattr(s, attr)) for s in scores)]
                                                  for label, attr in Score.ROWS]


def format_table(scores: list[Score]) -> str:
    header, body = _table(scores)
    rows = [header] + body
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ==================================================================== CLI
def read_feed(path: str, show_progress: bool = False) -> tuple[list[dict], int]:
    """Valid events of a JSON-lines feed (events without ``ts`` cannot be replayed) and how many were dropped;
    ``show_progress``: a progress bar on stderr (plain lines off a terminal)."""
    from streaming.views.report import read_jsonl

    events, dropped = [], 0
    records = read_jsonl(path)
    if show_progress:
        records = terminal.track(records, "reading the feed", terminal.count_lines(path), unit="records")
    for raw in records:
        event, error = parse_event(raw)
        if error is not None or event.get("ts") is None:
            dropped += 1
        else:
            events.append(event)
    return events, dropped


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rebalance-tracker replay",
                                description="Replay a recorded event feed under several assignors, side by side.")
    p.add_argument("--feed", required=True, help="JSON-lines event feed (e.g. from 'rebalance-tracker simulate')")
    p.add_argument("--assignor", default=None,
                   help="comma-separated assignors to compare: client-side ones by protocol name, server-side "
                        "(KIP-848) ones as server:uniform, server:range -- the feed replayed under the consumer "
                        f"protocol (default: {','.join(DEFAULT_ASSIGNORS)}, and {','.join(SERVER_ASSIGNORS)} too "
                        "when the feed has consumer-protocol groups)")
    p.add_argument("--group", default=None, help="score only this group (default: all groups in the feed)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON instead of a table")
    from streaming.views.report import add_coordinator_option

    add_coordinator_option(p)
    return p


def default_assignors(events: Iterable[dict]) -> list[str]:
    """The client-side assignors, and the server-side ones when the feed has consumer-protocol groups: what they
    used, next to what the classic protocol would have done."""
    return list(DEFAULT_ASSIGNORS) + (list(SERVER_ASSIGNORS) if consumer_groups(events) else [])


def main(argv: list[str] | None = None) -> int:
    from streaming.views.report import consumer_config, coordinator_config

    args = build_parser().parse_args(argv)
    names = [a.strip() for a in args.assignor.split(",") if a.strip()] if args.assignor is not None else []
    try:
        config = coordinator_config(args.coordinator_config)
        group_config = consumer_config(args.coordinator_config)
        for name in names:
            check_assignor(name)
    except (ValueError, LookupError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    events, dropped = read_feed(args.feed, show_progress=True)
    if dropped:
        print(f"replay: skipped {dropped} invalid or untimed feed records", file=sys.stderr)
    names = names or default_assignors(events)
    scores = compare(events, names, config, args.group, show_progress=True, consumer_config=group_config)
    if args.json:
        print(json.dumps([asdict(s) for s in scores], indent=2))
    elif terminal.is_terminal(sys.stdout):
        header, rows = _table(scores)
        terminal.console().print(terminal.table(header, rows, right=range(1, len(header))))
    else:
        print(format_table(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
