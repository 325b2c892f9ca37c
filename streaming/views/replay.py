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

Everything runs on event time through the pure coordinator, so a replay is deterministic.
"""
from __future__ import annotations

import argparse
import heapq
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from streaming.views import terminal
from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.views.history import build_histories

DEFAULT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
REACTION_MS = 5          # how long a simulated client takes to answer the coordinator


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


def _join_fields(e: dict) -> dict:
    """A client's join request without its protocols: what a simulated rejoin repeats."""
    return {k: e[k] for k in ("type", "group_id", "group_instance_id", "client_id", "client_host",
                              "session_timeout_ms", "rebalance_timeout_ms", "protocol_type") if k in e}


def replay_outputs(events: Iterable[dict], assignor: str, config: CoordinatorConfig | None = None,
                   on_progress: Callable[[int], None] | None = None) -> list[dict]:
    """Coordinator outputs of ``events`` (validated feed events with ``ts``) replayed under ``assignor``;
    ``on_progress(n)`` hears how many recorded events have been replayed, now and then."""
    from assignors import get_assignor

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
    histories = build_histories(o for o in outputs if group_id is None or o.get("group_id") == group_id)
    gens = [g for h in histories.values() for g in h.generations]
    staffed = [g for g in gens if g.owners]
    finals = [next((g for g in reversed(h.generations) if g.owners), None) for h in histories.values()]
    return Score(
        assignor=assignor, rebalances=len(gens), partitions_moved=sum(g.partitions_moved for g in gens),
        worst_balance=max((g.balance for g in staffed), default=0),
        final_balance=max((g.balance for g in finals if g is not None), default=0),
        total_rebalance_ms=sum(g.duration_ms for g in gens), max_rebalance_ms=max((g.duration_ms for g in gens),
                                                                                    default=0),
        max_unavailable_ms=max((g.max_partition_unavailable_ms for g in gens), default=0),
        unavailable_partition_s=round(sum(g.unavailable_partition_ms for g in gens) / 1000, 1),
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
                   help="comma-separated assignors to compare (default: %(default)s)")
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
        from assignors import get_assignor

        for name in names:
            get_assignor(name)
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
