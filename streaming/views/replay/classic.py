"""The classic replay: a classic feed's recorded stimuli through the classic :class:`GroupCoordinator`, with the
simulated clients' SyncGroups and rejoins (the package's docstring, first part: what is kept, what replaced)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.outputs import (
    HEARTBEAT_RESPONSE,
    JOIN_RESPONSE,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REPLACED,
    SYNC_RESPONSE,
)
from streaming.views.replay.settings import REACTION_MS

_HEARTBEAT_INTERVAL_MS = 3_000  # Java's heartbeat.interval.ms default (at most a third of the session)


@dataclass
class _Client:
    """What one consumer knows about itself during a replay."""

    join: dict  # its last join event (client id, timeouts, instance id, topics ...)
    topics: list[str]
    generation: int = -1
    assignment: list[list] = field(default_factory=list)
    awaiting_join: bool = False
    # While its recorded self waits in a join round the replay does not have: heartbeat on its own until then.
    stand_in_until: int | None = None


class _Replayer:
    def __init__(
        self,
        assignor: str,
        cooperative: bool,
        config: CoordinatorConfig | None,
        observed: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        """``observed``: groups whose stimuli come from a cluster's records (``observed.py``): their members carry the
        broker's ids, which the replay maps to the ids its coordinator gives them."""
        self.observed = observed
        self._ids: dict[tuple[str, str], str] = {}  # (group, the broker's member id) -> the replay's
        self._recorded: dict[tuple[str, str], str] = {}  # (group, the replay's member id) -> the broker's
        self._awaiting_id: tuple[str, str] | None = None  # an observed member's first join, waiting for its id
        self._pending_join: dict | None = None  # ... and that join, as sent
        self.assignor = assignor
        self.cooperative = cooperative
        self.coordinator = GroupCoordinator(config)
        self.clients: dict[tuple[str, str], _Client] = {}
        self.outputs: list[dict] = []
        self._reactions: list[tuple[int, int, dict]] = []
        self._seq = 0
        self._stand_ins: set[int] = set()  # the sequence numbers of the stand-in heartbeats among _reactions
        self._end: int | None = None
        self._static_joins: dict[tuple[str, str], tuple[dict, list[str]]] = {}

    # ------------------------------------------------------------------ driving
    def run(
        self, events: list[dict], on_progress: Callable[[int], None] | None = None, until: int | None = None
    ) -> list[dict]:
        """Replay ``events`` (the recorded stimuli, in time order); the coordinator's timers then run to the last
        one's time, or to ``until`` when the recording goes on longer."""
        i = 0
        self._end = events[-1]["ts"] if events else None  # stand-in heartbeats do not outlive the recording
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
                _, seq, event = heapq.heappop(self._reactions)
                if seq in self._stand_ins:
                    self._stand_ins.discard(seq)
                    self._stand_in_heartbeat(event)
                else:
                    self._send(event)
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
        assert error is None, error  # the replay only sends well-formed requests
        self._seq += 1
        heapq.heappush(self._reactions, (event["ts"], self._seq, event))

    # ------------------------------------------------------------------ the recorded stimuli
    def _rewrite(self, e: dict) -> dict | None:
        if (e.get("group_id") or "") in self.observed:
            e = self._from_observed(e)
            if e is None:
                return None
        kind = e["type"]
        key = (e.get("group_id") or "", e.get("member_id") or "")
        client = self.clients.get(key)
        if kind == "sync":
            return None  # clients sync when *this* coordinator says so
        if kind in ("heartbeat", "commit", "leave") and client is not None:
            client.stand_in_until = None  # its recorded self speaks for itself again
        if kind == "join":
            topics = list(e["protocols"][0].get("topics", [])) if e["protocols"] else []
            group = self.coordinator.groups.get(key[0])
            if key[1] and group is not None and key[1] in group.members and client is not None:
                if sorted(topics) == sorted(client.topics):
                    # A recorded reaction: replaced by our own. Its recorded self now waits in that join round (no
                    # heartbeats) for up to its rebalance timeout; if the replayed one is not in a round, it is a
                    # live client and heartbeats meanwhile.
                    if not client.awaiting_join and client.stand_in_until is None:
                        client.stand_in_until = e["ts"] + e["rebalance_timeout_ms"]
                        self._schedule_stand_in(key, e["ts"])
                    return None
            e = dict(e, protocols=[self._protocol(topics, client)])
            if self._awaiting_id is not None and not key[1]:
                self._pending_join = e
            if key[1]:
                self.clients[key] = _Client(
                    _join_fields(e),
                    topics,
                    awaiting_join=True,
                    generation=client.generation if client else -1,
                    assignment=client.assignment if client else [],
                )
            elif e.get("group_instance_id") is not None:  # a static member (re)starting: its id comes back
                self._static_joins[(key[0], e["group_instance_id"])] = (_join_fields(e), topics)
            return e
        if kind in ("heartbeat", "commit") and client is not None and e.get("generation", -1) >= 0:
            return dict(e, generation=client.generation)
        return e

    def _from_observed(self, e: dict) -> dict | None:
        """An observed group's stimulus with the replay's member ids: a member's first join asks for an id (its
        answer, in ``_observe``, maps the broker's id to it and joins again with it); a heartbeat the module
        synthesised is not sent while its client waits in a JoinGroup, nor for a member the replay removed."""
        gid, recorded = e.get("group_id") or "", e.get("member_id") or ""
        if not recorded:
            return e
        replayed = self._ids.get((gid, recorded))
        if e["type"] == "join" and replayed is None:
            self._awaiting_id = (gid, recorded)
            return dict(e, member_id="")
        if replayed is None:
            return None if e.get("synthesized") else e
        client = self.clients.get((gid, replayed))
        if e.get("synthesized") and (client is None or client.awaiting_join):
            return None
        return dict(e, member_id=replayed)

    def _observed_answer(self, o: dict) -> None:
        """The coordinator's answer to an observed member's first join: a dynamic member gets an id to join again
        with (KIP-394), a static one is in at once (the classic branch of ``_observe`` takes it from there); either
        way the broker's id now means the replay's. Any other answer refused the join."""
        gid, recorded = self._awaiting_id
        kind, new_id = o["type"], o.get("member_id") or ""
        if kind == JOIN_RESPONSE and o.get("error") == "MEMBER_ID_REQUIRED":
            join = self._pending_join
            self.clients[(gid, new_id)] = _Client(_join_fields(join), list(join["protocols"][0].get("topics", [])))
            self._rejoin((gid, new_id), o["ts"])
        elif kind not in (MEMBER_JOINED, MEMBER_REPLACED):
            if kind == JOIN_RESPONSE:
                self._awaiting_id = None
            return
        self._awaiting_id = None
        self._ids[(gid, recorded)], self._recorded[(gid, new_id)] = new_id, recorded

    def _protocol(self, topics: list[str], client: _Client | None) -> dict:
        protocol = {"name": self.assignor, "topics": topics}
        if self.cooperative:  # KIP-429: say what you still own and since which generation
            protocol["owned_partitions"] = [list(tp) for tp in (client.assignment if client else [])]
            protocol["generation"] = client.generation if client else -1
        return protocol

    def _schedule_stand_in(self, key: tuple[str, str], ts: int) -> None:
        client = self.clients[key]
        interval = min(client.join["session_timeout_ms"] // 3, _HEARTBEAT_INTERVAL_MS)
        self._seq += 1
        self._stand_ins.add(self._seq)
        heapq.heappush(
            self._reactions, (ts + interval, self._seq, {"group_id": key[0], "member_id": key[1], "ts": ts + interval})
        )

    def _stand_in_heartbeat(self, due: dict) -> None:
        key = (due["group_id"], due["member_id"])
        client = self.clients.get(key)
        if (
            client is None
            or client.stand_in_until is None
            or due["ts"] > client.stand_in_until
            or self._end is None
            or due["ts"] > self._end
        ):
            if client is not None:
                client.stand_in_until = None
            return
        if not client.awaiting_join:
            event, error = parse_event(
                {
                    "type": "heartbeat",
                    "group_id": key[0],
                    "member_id": key[1],
                    "group_instance_id": client.join.get("group_instance_id"),
                    "generation": client.generation,
                    "ts": due["ts"],
                }
            )
            assert error is None, error
            self._send(event)
        if key in self.clients:
            self._schedule_stand_in(key, due["ts"])

    # ------------------------------------------------------------------ the simulated reactions
    def _rejoin(self, key: tuple[str, str], ts: int) -> None:
        client = self.clients.get(key)
        if client is None or client.awaiting_join:
            return
        client.awaiting_join = True
        if not self.cooperative:
            client.assignment = []  # eager: everything is revoked before rejoining
        event = dict(client.join, member_id=key[1], protocols=[self._protocol(client.topics, client)], reason=None)
        self._later(ts, event)

    def _observe(self, outputs: list[dict]) -> None:
        self.outputs.extend(outputs)
        for o in outputs:
            kind = o["type"]
            key = (o["group_id"], o.get("member_id") or "")
            if self._awaiting_id is not None and self._awaiting_id[0] == o["group_id"] and o.get("member_id"):
                self._observed_answer(o)
                if kind == JOIN_RESPONSE and o.get("error") == "MEMBER_ID_REQUIRED":
                    continue
            if kind in (MEMBER_JOINED, MEMBER_REPLACED) and o.get("group_instance_id") is not None:
                known = self._static_joins.get((o["group_id"], o["group_instance_id"]))
                if known is not None and key not in self.clients:
                    self.clients[key] = _Client(known[0], known[1], awaiting_join=True)
                if kind == MEMBER_REPLACED:
                    self.clients.pop((o["group_id"], o["previous_member_id"]), None)
                continue
            if kind in (MEMBER_EXPIRED, MEMBER_LEFT) and key in self._recorded:
                self._ids.pop((key[0], self._recorded.pop(key)), None)  # a later join of that id starts anew
            client = self.clients.get(key)
            if client is None:
                continue
            error = o.get("error")
            if kind == JOIN_RESPONSE and error == "NONE":
                client.awaiting_join = False
                client.generation = o["generation"]
                self._later(
                    o["ts"],
                    {
                        "type": "sync",
                        "group_id": key[0],
                        "member_id": key[1],
                        "group_instance_id": o.get("group_instance_id"),
                        "generation": o["generation"],
                    },
                )
            elif kind == JOIN_RESPONSE and error not in (None, "MEMBER_ID_REQUIRED"):
                client.awaiting_join = False
            elif kind in (HEARTBEAT_RESPONSE, SYNC_RESPONSE) and error == "REBALANCE_IN_PROGRESS":
                self._rejoin(key, o["ts"])
            elif kind == SYNC_RESPONSE and error == "NONE":
                new = [list(tp) for tp in o["assignment"]]
                revoked = {tuple(tp) for tp in client.assignment} - {tuple(tp) for tp in new}
                client.assignment = new
                if self.cooperative and revoked:
                    self._rejoin(key, o["ts"])  # the follow-up round hands the revoked partitions on
            elif kind in (MEMBER_EXPIRED, MEMBER_LEFT):
                self.clients.pop(key, None)


def _join_fields(e: dict) -> dict:
    """A client's join request without its protocols: what a simulated rejoin repeats."""
    return {
        k: e[k]
        for k in (
            "type",
            "group_id",
            "group_instance_id",
            "client_id",
            "client_host",
            "session_timeout_ms",
            "rebalance_timeout_ms",
            "protocol_type",
        )
        if k in e
    }
