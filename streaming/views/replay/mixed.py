"""The replay of a group with members of both protocols (Kafka 4.x's online migration: classic requests beside
consumer heartbeats; the package's docstring, "Groups with members of both protocols").

Both kinds of members' stimuli go to one :class:`GroupModel` per group -- the tracker's routing, which runs the
classic group, upgrades it when a consumer-protocol member joins, keeps classic members inside the consumer group and
downgrades it when the last consumer-protocol member goes. The consumer-protocol members are those of
:func:`consumer_stimuli` with the reactions of the consumer-feed replay; the classic members' stimuli
(:func:`classic_stimuli`) are derived from their recorded requests as the classic replays do, with a classic client's
reactions (SyncGroup after its JoinGroup's answer, a rejoin after REBALANCE_IN_PROGRESS).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Callable

from streaming.coordinator import parse_event
from streaming.coordinator.outputs import (
    HEARTBEAT_RESPONSE,
    JOIN_RESPONSE,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REPLACED,
    SYNC_RESPONSE,
)
from streaming.coordinator.routing import Configs, GroupModel
from streaming.views.replay.consumer_feed import _by_recorded, _ConsumerFeedServerReplayer
from streaming.views.replay.settings import REACTION_MS
from streaming.views.replay.stimuli import ConsumerFeedStimuli

HEARTBEAT_INTERVAL_MS = 3_000  # a classic client's heartbeat.interval.ms default (at most a third of its session)
_JOIN_FIELDS = ("group_instance_id", "client_id", "client_host", "session_timeout_ms", "rebalance_timeout_ms")


@dataclass
class ClassicMembers:
    """The classic members' stimuli of a feed's mixed groups (dicts in time order, each with ``ts``, ``n``,
    ``kind``, ``group_id`` and ``key``: the member as recorded):

    * ``classic_join``: the member starts (``join``: its JoinGroup's fields, ``protocols``: their names, ``topics``);
    * ``classic_heartbeat``: it talks to its coordinator -- a recorded heartbeat, or (a reaction to the recorded
      broker, so ``REACTION_MS`` after it, when a newcomer's KIP-394 second JoinGroup has reached the replayed one)
      a recorded rejoin or SyncGroup, or its own heartbeat timer while the recording shows it alive;
    * ``classic_subscribe``: it rejoins with other topics (``topics``);
    * ``classic_leave``: a LeaveGroup;
    * ``event``: a topic's size as the leaders' assignments show it (a feed from a broker's records has none for a
      classic group).

    ``until``: each member's last moment alive (its leave, or its last sign of life when it crashed; for a member
    alive at the recording's end, the reactions its last requests started: the replay runs on that long)."""

    stimuli: list[dict]
    until: dict[tuple[str, str], int]

    @property
    def end(self) -> int | None:
        return max(self.until.values(), default=None)


def classic_stimuli(events: list[dict]) -> ClassicMembers:
    """The stimuli of the classic members of ``events`` (mixed groups' events in time order, numbered as
    :func:`consumer_stimuli` numbers them: ``n`` is the position from 1).

    A member's first JoinGroup (with its member id; a static member's, by instance id) is its start; its later ones
    are reactions unless they name other topics. A leader's assignment (a feed from a broker's records: the
    GroupMetadata's) that leaves out a started member ends it: a LeaveGroup then if it was heard from less than a
    session before (an expiry would take a session), else a crash at its last sign of life."""
    consumer_members = {(e.get("group_id") or "", e["member_id"]) for e in events if e["type"] == "consumer_heartbeat"}
    out: list[dict] = []
    members: dict[tuple[str, str], dict] = {}  # started member -> its join stimulus (topics kept current)
    ids: dict[tuple[str, str], str] = {}  # -> its member id now
    by_instance: dict[tuple[str, str], tuple[str, str]] = {}
    last_sign: dict[tuple[str, str], int] = {}
    last_join: dict[tuple[str, str], int] = {}
    ended: dict[tuple[str, str], int] = {}
    sizes: dict[tuple[str, str], int] = {}
    first_n: dict[tuple[str, int], int] = {}  # (group, ts) -> the first event's n then

    def stimulus(kind: str, key: tuple[str, str], ts: int, n: float, **fields) -> None:
        out.append({"ts": ts, "n": n, "kind": kind, "group_id": key[0], "key": key, **fields})

    for n, e in enumerate(events, 1):
        kind, gid, ts = e["type"], e.get("group_id") or "", e["ts"]
        first_n.setdefault((gid, ts), n)
        before = first_n[(gid, ts)] - 0.5  # ahead of the moment's recorded requests
        if kind == "sync" and e.get("assignments") is not None:  # a leader's: the topics' sizes, who is gone
            current = set(e["assignments"])
            for key in [k for k in members if k[0] == gid and k not in ended and ids.get(k) not in current]:
                if ts - last_sign[key] < members[key]["join"]["session_timeout_ms"]:
                    ended[key] = ts
                    stimulus("classic_leave", key, ts, before)
                else:
                    ended[key] = last_sign[key]
            for topic, partitions in _sizes(e["assignments"]).items():
                if partitions > sizes.get((gid, topic), 0):
                    sizes[(gid, topic)] = partitions
                    grown, error = parse_event(
                        {"type": "topic_metadata", "group_id": gid, "topic": topic, "partitions": partitions, "ts": ts}
                    )
                    assert error is None, error
                    out.append({"ts": ts, "n": before, "kind": "event", "group_id": gid, "event": grown})
        if kind not in ("join", "sync", "heartbeat", "leave", "commit"):
            continue
        member_id, instance = e.get("member_id") or "", e.get("group_instance_id")
        if instance is not None:
            key = by_instance.setdefault((gid, instance), (gid, member_id or f"instance {instance}"))
        elif member_id:
            key = (gid, member_id)
        else:
            continue  # KIP-394: a new dynamic member's first JoinGroup; it joins again with its id
        if key in consumer_members:
            continue  # a consumer-protocol member's commit
        if member_id:
            ids[key] = member_id
        started = key in members and key not in ended
        if kind == "join":
            topics = sorted(e["protocols"][0].get("topics") or []) if e["protocols"] else []
            if not started:
                ended.pop(key, None)
                join = {k: e.get(k) for k in _JOIN_FIELDS}
                members[key] = {"join": join, "topics": topics}
                names = [p["name"] for p in e["protocols"]]
                stimulus("classic_join", key, ts, n, join=join, protocols=names, topics=topics, member_id=member_id)
            elif topics != members[key]["topics"]:
                members[key]["topics"] = topics
                stimulus("classic_subscribe", key, ts, n, topics=topics)
            else:
                stimulus("classic_heartbeat", key, ts + 2 * REACTION_MS, n)
            last_sign[key] = last_join[key] = ts
        elif not started:
            continue
        elif kind == "leave":
            if ts == last_join.get(key):
                # Dated at its JoinGroup of the same moment (a cluster feed dates an Empty generation's departures at
                # their last sign of life; they went later, by up to the record's time): after that join's round.
                ended[key] = ts + 5 * REACTION_MS  # its heartbeat, JoinGroup, SyncGroup, then the LeaveGroup
                stimulus("classic_leave", key, ts + 2 * REACTION_MS, n, after_round=True)
            else:
                ended[key] = ts
                stimulus("classic_leave", key, ts, n)
        elif kind == "commit":
            last_sign[key] = max(ts, last_sign[key])
        else:
            delay = 0 if kind == "heartbeat" else 2 * REACTION_MS
            stimulus("classic_heartbeat", key, ts + delay, n)
            last_sign[key] = max(ts, last_sign[key])
    end = events[-1]["ts"] if events else 0
    # A member alive at the recording's end finishes what its last requests started (a reaction heartbeat, its
    # JoinGroup, its SyncGroup).
    until = {key: ended.get(key, end + 4 * REACTION_MS) for key in members}
    out += _own_heartbeats(out, members, until)
    out.sort(key=lambda s: (s["ts"], s["n"]))
    return ClassicMembers(out, until)


def _sizes(assignments: dict) -> dict[str, int]:
    seen: dict[str, int] = {}
    for partitions in assignments.values():
        for topic, partition in partitions:
            seen[topic] = max(seen.get(topic, 0), partition + 1)
    return seen


def _own_heartbeats(stimuli: list[dict], members: dict, until: dict) -> list[dict]:
    """A classic client's heartbeat thread: a heartbeat once it has sent nothing for an interval (a third of its
    session, at most 3 s), while alive."""
    sends: dict[tuple[str, str], list[int]] = {}
    for s in stimuli:
        if s["kind"] in ("classic_join", "classic_heartbeat", "classic_subscribe"):
            sends.setdefault(s["key"], []).append(s["ts"])
    extra = []
    for key, times in sends.items():
        times.sort()
        interval = min(members[key]["join"]["session_timeout_ms"] // 3, HEARTBEAT_INTERVAL_MS)
        for sent, following in zip(times, times[1:] + [None]):
            t = sent + interval
            while (following is None or t < following) and t <= until[key]:
                extra.append({"ts": t, "n": 0, "kind": "classic_heartbeat", "group_id": key[0], "key": key})
                t += interval
    recorded = sorted((s["ts"], s["n"]) for s in stimuli)
    for s in extra:  # progress: an added heartbeat counts as the recorded event before it
        at = bisect.bisect_right(recorded, (s["ts"], float("inf")))
        s["n"] = recorded[at - 1][1] if at else 0
    return extra


@dataclass
class _ClassicClient:
    """A classic client of a mixed group during a replay."""

    key: tuple[str, str]
    join: dict
    protocols: list[str]
    topics: list[str]
    cooperative: bool
    recorded_id: str  # the id the recorded broker gave it: the replayed coordinator is asked to give the same
    member_id: str = ""
    generation: int = -1
    assignment: list[tuple[str, int]] = field(default_factory=list)
    in_group: bool = False
    awaiting_join: bool = False
    awaiting_sync: bool = False
    leaving: bool = False  # its LeaveGroup waits for the end of the round it is in


class _MixedReplayer(_ConsumerFeedServerReplayer):
    """Mixed groups under one assignor, through one :class:`GroupModel` per group: a server-side assignor is the
    consumer group's (its members' heartbeats name it), a client-side one the classic members' (their JoinGroups
    name it alone); the other side keeps what it used -- the classic members their recorded protocols, the consumer
    group its configured assignors."""

    def __init__(
        self, assignor: str, server: bool, configs: Configs, feed: ConsumerFeedStimuli, classic: ClassicMembers
    ) -> None:
        group_config = configs.consumer
        if server:
            group_config = replace(group_config, group_consumer_assignors=(assignor,))
        super().__init__(assignor if server else None, feed, group_config)
        self.configs = replace(configs, consumer=group_config)
        self.server = server
        self.client_assignor = assignor
        self.classic = classic
        self.classic_clients: dict[tuple[str, str], _ClassicClient] = {}  # by recorded key
        self.by_id: dict[tuple[str, str], _ClassicClient] = {}  # by replayed member id

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[dict]:  # type: ignore[override]
        stimuli = sorted(self.feed.stimuli + self.classic.stimuli, key=lambda s: (s["ts"], s["n"]))
        ends = [t for t in (self.feed.end, self.classic.end) if t is not None]
        return self._drive(stimuli, self._stimulus, max(ends, default=None), _by_recorded(stimuli, on_progress))

    def _coordinator(self, group_id: str, session_timeout_ms=None, group_config=None):  # type: ignore[override]
        c = self.coordinators.get(group_id)
        if c is None:
            c = self.coordinators[group_id] = GroupModel(self.configs)
            self.intervals[group_id] = self.group_config.group_consumer_heartbeat_interval_ms
            self.sessions[group_id] = self.group_config.group_consumer_session_timeout_ms
            for e in self.topics:
                if not e.get("group_id") or e["group_id"] == group_id:
                    c.handle(e)
        return c

    def _stimulus(self, s: dict) -> None:
        if s["group_id"] or s["kind"] != "event":
            self._coordinator(s["group_id"])  # made at the group's first stimulus: it sees its topics in order
        if s["kind"].startswith("classic_"):
            return self._classic(s)
        return super()._stimulus(s)

    # ------------------------------------------------------------------ the classic members
    def _classic(self, s: dict) -> None:
        kind, key = s["kind"], s["key"]
        client = self.classic_clients.get(key)
        if kind == "classic_join":
            if client is not None:
                self._forget(client)
            protocols = list(s["protocols"]) if self.server else [self.client_assignor]
            cooperative = bool(protocols) and _cooperative(protocols[0])
            client = self.classic_clients[key] = _ClassicClient(
                key, s["join"], protocols, s["topics"], cooperative, s["member_id"]
            )
            return self._send_join(client)
        if client is None:
            return
        if kind == "classic_leave":
            if s.get("after_round") and (client.awaiting_join or client.awaiting_sync):
                client.leaving = True
                return
            return self._leave(client)
        if kind == "classic_subscribe":
            client.topics = s["topics"]
            return self._send_join(client) if client.in_group else None
        if not client.in_group and not client.awaiting_join:
            # Gone from the replayed group (expired, or refused) while the recording shows it alive: a classic
            # client told UNKNOWN_MEMBER_ID joins again, as a new member.
            return self._send_join(client)
        if not client.awaiting_join and not client.awaiting_sync:
            self._send_classic(client, "heartbeat", generation=client.generation)

    def _classic_alive(self, client: _ClassicClient) -> bool:
        if self.classic_clients.get(client.key) is not client:
            return False
        return client.leaving or self.now <= self.classic.until.get(client.key, 0)

    def _leave(self, client: _ClassicClient) -> None:
        self._forget(client)
        if client.in_group:
            self._send_classic(client, "leave", reason="the consumer is being closed")

    def _forget(self, client: _ClassicClient) -> None:
        self.classic_clients.pop(client.key, None)
        if client.member_id:
            self.by_id.pop((client.key[0], client.member_id), None)

    def _protocol(self, client: _ClassicClient, name: str) -> dict:
        protocol = {"name": name, "topics": list(client.topics)}
        if client.cooperative:  # KIP-429: what it still owns, and since which generation
            protocol["owned_partitions"] = [list(tp) for tp in client.assignment]
            protocol["generation"] = client.generation
        return protocol

    def _send_join(self, client: _ClassicClient) -> None:
        client.awaiting_join, client.awaiting_sync = True, False
        if not client.cooperative:
            client.assignment = []  # eager: everything is revoked before rejoining
        self._send_classic(
            client,
            "join",
            protocol_type="consumer",
            protocols=[self._protocol(client, name) for name in client.protocols],
            **{k: v for k, v in client.join.items() if k != "group_instance_id"},
        )

    def _send_classic(self, client: _ClassicClient, kind: str, **fields) -> None:
        gid = client.key[0]
        event, error = parse_event(
            {
                "type": kind,
                "group_id": gid,
                "ts": self.now,
                "member_id": client.member_id,
                "group_instance_id": client.join["group_instance_id"],
                **fields,
            }
        )
        assert error is None, error  # the replay only sends well-formed requests
        group = self.coordinators[gid]
        if not client.member_id and group.model is not None:
            group.model.member_id_hint = client.recorded_id or None
        out = group.handle(event)
        if group.model is not None:
            group.model.member_id_hint = None
        if not client.member_id:  # its id: KIP-394's answer, or a static member's, as the group took it in
            for o in out:
                instance = o.get("group_instance_id", o.get("instance_id"))
                if (o["type"] == JOIN_RESPONSE and o.get("error") == "MEMBER_ID_REQUIRED") or (
                    o["type"] in (MEMBER_JOINED, MEMBER_REPLACED)
                    and instance is not None
                    and instance == client.join["group_instance_id"]
                ):
                    client.member_id = o["member_id"]
                    self.by_id[(gid, client.member_id)] = client
                    break
        self._observe(out)

    def _observe(self, outputs: list[dict]) -> None:
        super()._observe(outputs)
        for o in outputs:
            client = self.by_id.get((o["group_id"], o.get("member_id") or ""))
            if client is None:
                continue
            kind, error = o["type"], o.get("error")
            if kind == JOIN_RESPONSE:
                client.awaiting_join = False
                if error == "NONE":
                    client.in_group, client.awaiting_sync, client.generation = True, True, o["generation"]
                    self._later(lambda c=client: self._sync(c))
                elif error == "MEMBER_ID_REQUIRED":
                    client.awaiting_join = True
                    self._later(lambda c=client: self._send_join(c) if self._classic_alive(c) else None)
                elif error == "REBALANCE_IN_PROGRESS":
                    self._classic_rejoin(client)
                else:
                    self._out(client)
            elif kind == SYNC_RESPONSE:
                client.awaiting_sync = False
                if error == "NONE":
                    new = [tuple(tp) for tp in o["assignment"]]
                    revoked = set(client.assignment) - set(new)
                    client.assignment = new
                    if client.cooperative and revoked:
                        self._classic_rejoin(client)  # the follow-up round hands the revoked partitions on
                elif error in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
                    self._classic_rejoin(client)
                else:
                    self._out(client)
            elif kind == HEARTBEAT_RESPONSE:
                if error in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
                    self._classic_rejoin(client)
                elif error not in ("NONE", None):
                    self._out(client)
            elif kind in (MEMBER_EXPIRED, MEMBER_LEFT):
                self._out(client)
            if client.leaving and not client.awaiting_join and not client.awaiting_sync:
                client.leaving = False
                self._later(lambda c=client: self._leave(c))

    def _out(self, client: _ClassicClient) -> None:
        """No longer in the replayed group: its next heartbeat joins again."""
        client.in_group = client.awaiting_join = client.awaiting_sync = False
        client.generation, client.assignment = -1, []
        if client.member_id:  # a client told UNKNOWN_MEMBER_ID forgets its id, a static one too
            self.by_id.pop((client.key[0], client.member_id), None)
            client.member_id = ""

    def _sync(self, client: _ClassicClient) -> None:
        if not self._classic_alive(client) or not client.awaiting_sync:
            client.awaiting_sync = False
            return
        self._send_classic(client, "sync", generation=client.generation)

    def _classic_rejoin(self, client: _ClassicClient) -> None:
        if client.awaiting_join:
            return
        client.awaiting_join = True
        self._later(lambda c=client: self._send_join(c) if self._classic_alive(c) else self._stop(c))

    @staticmethod
    def _stop(client: _ClassicClient) -> None:
        client.awaiting_join = False  # a crashed client sends no JoinGroup: its session runs out


def _cooperative(name: str) -> bool:
    from assignors import get_assignor

    try:
        return "cooperative" in get_assignor(name).supported_protocols
    except KeyError:
        return False
