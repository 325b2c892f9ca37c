"""The columns of the side-by-side answer: one :class:`Score` per assignor, from the replayed groups' histories."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from streaming.coordinator import CoordinatorConfig
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.coordinator.figures import max_known, shown, sum_known
from streaming.views import terminal
from streaming.views.history import build_histories
from streaming.views.replay.dispatch import replay_outputs


@dataclass
class Score:
    """The figures of docs/figures.md over every group of one replay; None: unknown."""

    assignor: str
    rebalances: int
    partitions_moved: int | None
    worst_balance: int  # max − min partitions per member, worst settled rebalance of any group
    final_balance: int  # the same, after each group's last settled rebalance
    total_rebalance_ms: int | None
    max_rebalance_ms: int | None
    max_unavailable_ms: int | None  # the longest a partition had no owner while its group had members
    unavailable_partition_s: float | None  # those times summed over every partition
    max_ownerless_ms: int | None  # the same two with the time its group had no member at all included
    ownerless_partition_s: float | None
    members_expired: int

    ROWS = (
        ("rebalances", "rebalances"),
        ("partitions moved", "partitions_moved"),
        ("balance, worst (max−min)", "worst_balance"),
        ("balance, final (max−min)", "final_balance"),
        ("rebalance time total (ms)", "total_rebalance_ms"),
        ("rebalance time max (ms)", "max_rebalance_ms"),
        ("max partition unavailability (ms)", "max_unavailable_ms"),
        ("partition unavailability (partition·s)", "unavailable_partition_s"),
        ("max without owner, incl. no members (ms)", "max_ownerless_ms"),
        ("without owner, incl. no members (partition·s)", "ownerless_partition_s"),
        ("members expired", "members_expired"),
    )


def score(assignor: str, outputs: list[dict], group_id: str | None = None) -> Score:
    """The columns, from the groups' histories, the same way for both protocols (docs/figures.md): a rebalance is
    one ``rebalance`` record (classic: a generation, the empty one included; consumer protocol: from the first epoch
    bump to the group settled again); moves, rebalance times and the spans without an owner are the coordinator's;
    balance is that of the rebalances the group settles on (a cooperative first round is not one)."""
    histories = build_histories(o for o in outputs if group_id is None or o.get("group_id") == group_id)
    gens = [g for h in histories.values() for g in h.generations]
    settled = [g.balance for g in gens if g.settled]
    finals = [next((g.balance for g in reversed(h.generations) if g.settled), None) for h in histories.values()]
    spans = [u for g in gens for u in g.spans]
    durations = [g.duration_ms for g in gens]
    return Score(
        assignor=assignor,
        rebalances=len(gens),
        partitions_moved=sum_known(g.partitions_moved for g in gens),
        worst_balance=max(settled, default=0),
        final_balance=max((b for b in finals if b is not None), default=0),
        total_rebalance_ms=sum_known(durations),
        max_rebalance_ms=max_known(durations),
        max_unavailable_ms=max_known(u.unavailable_ms for u in spans),
        unavailable_partition_s=_seconds(sum_known(u.unavailable_ms for u in spans)),
        max_ownerless_ms=max_known(u.duration_ms for u in spans),
        ownerless_partition_s=_seconds(sum_known(u.duration_ms for u in spans)),
        members_expired=sum(1 for h in histories.values() for d in h.departures if d.kind == "expired"),
    )


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else round(ms / 1000, 1)


def compare(
    events: list[dict],
    assignors: Iterable[str],
    config: CoordinatorConfig | None = None,
    group_id: str | None = None,
    show_progress: bool = False,
    consumer_config: ConsumerGroupConfig | None = None,
) -> list[Score]:
    """One score per assignor; ``show_progress``: a progress bar per assignor on stderr (plain lines off a
    terminal); ``consumer_config``: the group.consumer.* settings of the feed's consumer-protocol groups."""
    if not show_progress:
        return [
            score(a, replay_outputs(events, a, config, consumer_config=consumer_config), group_id) for a in assignors
        ]
    scores = []
    with terminal.Progress() as bars:
        for a in assignors:
            task = bars.task(f"replay {a}", total=len(events))
            outputs = replay_outputs(events, a, config, lambda n, task=task: task.update(completed=n), consumer_config)
            bars.finish(task)
            scores.append(score(a, outputs, group_id))
    return scores


def _table(scores: list[Score]) -> tuple[list[str], list[list[str]]]:
    """Metrics as rows, assignors as columns: the side-by-side answer."""
    return ["", *(s.assignor for s in scores)], [
        [label, *(shown(getattr(s, attr)) for s in scores)] for label, attr in Score.ROWS
    ]


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
