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
  commits are not sent (the first two do not exist in this protocol; a commit changes no assignment and, in this
  protocol, keeps no member alive, so it would change nothing the replay scores). A leave is epoch -1. A crash leaves no requests: the heartbeats stop at the last one, and the session expires.
* simulated reactions: a client acknowledges an assignment ``REACTION_MS`` after it: the revoked partitions are given
  up then and the new ones taken (a member still waiting for partitions others release learns of them at its next
  heartbeat, as in Kafka); fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), it gives up everything and rejoins with
  epoch 0 ``REACTION_MS`` later. A member the coordinator expired rejoins with its next heartbeat, if it sends one
  (the replay skips the UNKNOWN_MEMBER_ID round trip a real client would make first).

Everything runs on event time through the pure coordinators, so a replay is deterministic.
"""
from __future__ import annotations

import argparse
import bisect
import heapq
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from streaming.views import terminal
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.views.history import build_histories

DEFAULT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
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
    def run(self, events: list[dict], on_progress: Callable[[int], None] | None = None) -> list[dict]:
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
        last = max((e["ts"] for e in events), default=None)
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
        horizon = max((e["ts"] for e in events), default=0)
        i = 0
        while i < len(events) or self._reactions:
            if i == len(events) and self._reactions[0][0] > horizon:
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
                self._recorded(events[i])
                i += 1
                if on_progress is not None and not i & 1023:
                    on_progress(i)
        last = max((e["ts"] for e in events), default=None)
        if last is not None:
            self._advance(last)
        if on_progress is not None:
            on_progress(len(events))
        return self.outputs

    def _advance(self, ts: int) -> None:
        for c in self.coordinators.values():
            self._observe(c.advance(ts))

    def _later(self, action: Callable[[], None], delay: int = REACTION_MS) -> None:
        self._seq += 1
        heapq.heappush(self._reactions, (self.now + delay, self._seq, action))

    def _coordinator(self, group_id: str, session_timeout_ms: int | None = None) -> ConsumerGroupCoordinator | None:
        c = self.coordinators.get(group_id)
        if c is None and session_timeout_ms is not None:
            # The group's own session timeout (KIP-848 group config), from its first member's join.
            session = max(session_timeout_ms, 2)
            interval = min(KAFKA_HEARTBEAT_INTERVAL_MS, max(1, session // 3))
            c = self.coordinators[group_id] = ConsumerGroupCoordinator(ConsumerGroupConfig(
                group_consumer_session_timeout_ms=session, group_consumer_heartbeat_interval_ms=interval,
                group_consumer_assignors=(self.assignor,)))
            self.intervals[group_id], self.sessions[group_id] = interval, session
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
                   subscribed_topic_names=list(client.topics), server_assignor=self.assignor, topic_partitions=[])

    def _heartbeat(self, group_id: str, client: _ConsumerClient, **fields) -> None:
        if client.epoch <= 0:
            return self._join(group_id, client)
        self._send(group_id, client, client.epoch, topic_partitions=[list(tp) for tp in client.owned], **fields)

    # ------------------------------------------------------------------ the recorded stimuli
    def _recorded(self, e: dict) -> None:
        kind, group_id = e["type"], e.get("group_id") or ""
        shadow = self.shadow.handle(e) if kind != "consumer_heartbeat" else []
        if kind == "topic_metadata":
            self.topics.append(e)
            for gid, c in self.coordinators.items():
                if not group_id or gid == group_id:
                    self._observe(c.handle(e))
            return
        if kind == "delete_group":
            c = self.coordinators.get(group_id)
            if c is not None:
                self._observe(c.handle(e))
            return
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


def _join_fields(e: dict) -> dict:
    """A client's join request without its protocols: what a simulated rejoin repeats."""
    return {k: e[k] for k in ("type", "group_id", "group_instance_id", "client_id", "client_host",
                              "session_timeout_ms", "rebalance_timeout_ms", "protocol_type") if k in e}


def replay_outputs(events: Iterable[dict], assignor: str, config: CoordinatorConfig | None = None,
                   on_progress: Callable[[int], None] | None = None) -> list[dict]:
    """Coordinator outputs of ``events`` (validated feed events with ``ts``) replayed under ``assignor``;
    ``on_progress(n)`` hears how many recorded events have been replayed, now and then. A ``server:NAME`` assignor
    replays the feed under the consumer protocol (see the module's docstring)."""
    from assignors import get_assignor

    if is_server_assignor(assignor):
        from assignors.server import get_server_assignor

        name = get_server_assignor(assignor[len(SERVER_PREFIX):]).name
        feed = sorted((e for e in events if e["type"] != "consumer_heartbeat"), key=lambda e: e["ts"])
        return _ConsumerReplayer(name, config).run(feed, on_progress)
    chosen = get_assignor(assignor)
    # A cooperative-capable assignor is run the way Kafka's clients use it: with the cooperative protocol.
    cooperative = "cooperative" in chosen.supported_protocols
    feed = sorted(events, key=lambda e: e["ts"])        # stable: equal timestamps keep feed order
    return _Replayer(chosen.name, cooperative, config).run(feed, on_progress)


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
            group_id: str | None = None, show_progress: bool = False) -> list[Score]:
    """One score per assignor; ``show_progress``: a progress bar per assignor on stderr (plain lines off a
    terminal)."""
    if not show_progress:
        return [score(a, replay_outputs(events, a, config), group_id) for a in assignors]
    scores = []
    with terminal.Progress() as bars:
        for a in assignors:
            task = bars.task(f"replay {a}", total=len(events))
            outputs = replay_outputs(events, a, config, lambda n: task.update(completed=n))
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
    p.add_argument("--assignor", default=",".join(DEFAULT_ASSIGNORS),
                   help="comma-separated assignors to compare: client-side ones by protocol name, server-side "
                        "(KIP-848) ones as server:uniform, server:range -- the feed replayed under the consumer "
                        "protocol (default: %(default)s)")
    p.add_argument("--group", default=None, help="score only this group (default: all groups in the feed)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON instead of a table")
    from streaming.views.report import add_coordinator_option

    add_coordinator_option(p)
    return p


def main(argv: list[str] | None = None) -> int:
    from streaming.views.report import coordinator_config

    args = build_parser().parse_args(argv)
    names = [a.strip() for a in args.assignor.split(",") if a.strip()]
    try:
        config = coordinator_config(args.coordinator_config)
        for name in names:
            check_assignor(name)
    except (ValueError, LookupError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    events, dropped = read_feed(args.feed, show_progress=True)
    if dropped:
        print(f"replay: skipped {dropped} invalid or untimed feed records", file=sys.stderr)
    scores = compare(events, names, config, args.group, show_progress=True)
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
