"""The columns of the side-by-side answer: one :class:`Score` per assignor, from the replayed groups' histories."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from streaming.coordinator import CoordinatorConfig
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.views import terminal
from streaming.views.history import build_histories
from streaming.views.replay.dispatch import replay_outputs


@dataclass
class Score:
    assignor: str
    rebalances: int
    partitions_moved: int
    worst_balance: int            # max − min partitions per member, worst generation of any group
    final_balance: int            # the same, after each group's last settled generation (nothing left revoked)
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
    # A cooperative round that revoked partitions is half a rebalance: a feed that ends before its follow-up round
    # says nothing of where the assignor settles, so the final balance is the last settled generation's.
    finals = [next((g.balance for g in reversed(h.generations) if g.owners and not g.revoked_unassigned),
                   next((g.balance for g in reversed(h.generations) if g.owners), None)) for h in classic]
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
