"""``rebalance-tracker report``: one group's rebalance history as a self-contained HTML page (and a PNG).

The page has no external resources: an inline SVG timeline — members as lanes, generations as bands, rebalances
shaded, partition moves as arrows between lanes, expiries and leaves marked — followed by tables. The PNG is the
same page photographed by headless Chromium.

A consumer-protocol (KIP-848) group gets the same page with group epochs in place of generations (a band per return
to Stable), each member's reconciling time shaded on its lane with its epoch written where it changes, and tables of
what only that protocol has: the target assignments (trigger, changed partitions, how long until every member was on
them), target against current assignment at the end, per-member epochs and reconciliation times, revocations and
how long each member took to give partitions up, and every span in which a partition had no owner.

Under the timeline, on the same time axis, the group's lag when the feed has log-end samples (docs/lag.md): its
worst partition in seconds (a line) and in records (a second, lighter line, on its own scale), with every rebalance
shaded and its lag cost written at its end; a table lists each rebalance's cost.

A group that changed protocol (Kafka 4.x's online upgrade and downgrade, or an Empty group replaced) is one page:
each switch a dashed line across the timeline, named under it, and a row of the protocol switches table; classic
generations are labelled ``gen`` and consumer epochs ``epoch``; each member says which protocol it speaks.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Iterable

from streaming.coordinator.figures import max_known, shown, sum_known
from streaming.views import terminal
from streaming.views.history import Generation, GroupHistory, UnownedSpan, build_history, coordinator_outputs

CHROMIUM = "/usr/bin/chromium"
PAGE_WIDTH = 1280
# Timeline geometry (px).
LABEL_W, RIGHT_PAD, AXIS_H, LANE_H, BOTTOM_PAD = 230, 30, 46, 34, 30
# Colours are fixed so a picture can be checked for them (the expiry red in particular).
EXPIRY_RED = "#e00000"
LEAVE_GREY = "#555555"
GAIN_GREEN = "#1a9a3a"
BAND_FILLS = ("#eef3fb", "#f7f7f7")
REBALANCE_FILL = {"eager": "#ffb84d", "cooperative": "#8fc7ff", "consumer": "#c3b2f2"}
LANE_FILL = "#c9d3df"
SWITCH_INK = "#1b2a4a"  # a protocol switch's line
RECONCILING_FILL = "#8a63d2"  # a consumer-protocol member not yet Stable on its target
LAG_SECONDS_BLUE = "#1f5fbf"
LAG_RECORDS_TEAL = "#2aa198"
LAG_H = 150  # the lag panel's height (px)


# ==================================================================== inputs
def read_jsonl(path: str | Path) -> Iterable[dict | str]:
    """Records of a JSON-lines file; lines that are not JSON come back as text (the validator rejects them)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    yield line


def parse_since(text: str | None) -> int | None:
    """``--since``: epoch milliseconds, or an ISO-8601 time (UTC when it names no zone)."""
    if text is None or text == "":
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since must be epoch milliseconds or an ISO-8601 time, not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def iso(ts: int | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ==================================================================== the timeline
class _Scale:
    def __init__(self, t0: int, t1: int, x0: float, x1: float) -> None:
        self.t0, self.t1 = t0, max(t1, t0 + 1)
        self.x0, self.x1 = x0, x1

    def __call__(self, ts: int) -> float:
        ts = min(max(ts, self.t0), self.t1)
        return round(self.x0 + (ts - self.t0) * (self.x1 - self.x0) / (self.t1 - self.t0), 1)


def _ticks(span_ms: int) -> int:
    """A tick step (ms) giving roughly 6–12 ticks."""
    for step in (
        100,
        200,
        500,
        1_000,
        2_000,
        5_000,
        10_000,
        15_000,
        30_000,
        60_000,
        120_000,
        300_000,
        600_000,
        900_000,
        1_800_000,
        3_600_000,
        7_200_000,
        21_600_000,
        43_200_000,
        86_400_000,
    ):
        if span_ms / step <= 12:
            return step
    return 86_400_000 * max(1, span_ms // (86_400_000 * 12))


def _fmt_offset(ms: int) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:g}s"
    if s < 7_200:
        return f"{s / 60:g}m"
    return f"{s / 3600:g}h"


def render_svg(h: GroupHistory, width: int = PAGE_WIDTH - 40) -> str:
    lanes = list(h.lanes.values())
    t0 = h.first_ts or 0
    t1 = max(h.last_ts or t0, t0 + 1)
    x = _Scale(t0, t1, LABEL_W, width - RIGHT_PAD)
    height = AXIS_H + max(len(lanes), 1) * LANE_H + BOTTOM_PAD
    lane_y = {lane.key: AXIS_H + i * LANE_H for i, lane in enumerate(lanes)}
    bottom = AXIS_H + max(len(lanes), 1) * LANE_H
    el: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11" role="img" aria-label="rebalance timeline of {escape(h.group_id)}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{GAIN_GREEN}"/></marker></defs>',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]

    # Generation bands: from a generation's completion to the start of the next rebalance.
    gens = h.generations
    for i, g in enumerate(gens):
        word = "epoch" if g.rebalance_protocol == "consumer" else "gen"
        end = gens[i + 1].shown_start_ts if i + 1 < len(gens) else t1
        x_a, x_b = x(g.completed_ts), x(end)
        el.append(
            f'<rect class="generation" data-generation="{g.generation}" x="{x_a}" y="{AXIS_H - 14}" '
            f'width="{max(x_b - x_a, 0.5)}" height="{bottom - AXIS_H + 14}" fill="{BAND_FILLS[i % 2]}"/>'
        )
        if x_b - x_a > 24:
            el.append(
                f'<text x="{(x_a + x_b) / 2}" y="{AXIS_H - 4}" text-anchor="middle" fill="#334">'
                f"{word} {g.generation}</text>"
            )
    # Rebalances: PreparingRebalance..Stable, coloured by protocol.
    for g in gens:
        x_a, x_b = x(g.shown_start_ts), x(g.completed_ts)
        fill = REBALANCE_FILL.get(g.rebalance_protocol, REBALANCE_FILL["eager"])
        el.append(
            f'<rect class="rebalance" data-generation="{g.generation}" x="{x_a}" y="{AXIS_H}" '
            f'width="{max(x_b - x_a, 2)}" height="{bottom - AXIS_H}" fill="{fill}" fill-opacity="0.55">'
            f"<title>{'group epoch' if g.rebalance_protocol == 'consumer' else 'generation'} {g.generation}: "
            f"{escape(g.trigger)} — {shown(g.duration_ms, 'unknown')} ms, "
            f"{shown(g.partitions_moved, 'unknown')} partitions moved</title></rect>"
        )
    open_since = h.rebalance_in_progress_since if h.protocols[-1] == "classic" else _consumer_open_since(h)
    if open_since is not None:
        el.append(
            f'<rect class="rebalance open" x="{x(open_since)}" y="{AXIS_H}" '
            f'width="{max(x(t1) - x(open_since), 2)}" height="{bottom - AXIS_H}" fill="#ffb84d" '
            f'fill-opacity="0.3" stroke="#ff8c00" stroke-dasharray="4 3"/>'
        )

    # Time axis.
    step = _ticks(t1 - t0)
    el.append(f'<line x1="{LABEL_W}" y1="{AXIS_H - 16}" x2="{width - RIGHT_PAD}" y2="{AXIS_H - 16}" stroke="#889"/>')
    tick = 0
    while t0 + tick <= t1:
        tx = x(t0 + tick)
        el.append(
            f'<line x1="{tx}" y1="{AXIS_H - 20}" x2="{tx}" y2="{bottom}" stroke="#dde" stroke-width="0.6"/>'
            f'<text x="{tx}" y="{AXIS_H - 24}" text-anchor="middle" fill="#556">+{_fmt_offset(tick)}</text>'
        )
        tick += step

    # Lanes: presence bars with the partition count each generation left the member.
    for lane in lanes:
        y = lane_y[lane.key]
        label = lane.label if len(lane.label) <= 32 else "…" + lane.label[-31:]
        if h.mixed and lane.protocols:
            label = f"{label} ({' → '.join(lane.protocols)})"
        style = ' font-style="italic"' if lane.static else ""  # static members: one lane across restarts
        el.append(
            f'<text x="{LABEL_W - 8}" y="{y + LANE_H / 2 + 4}" text-anchor="end" fill="#223"{style}>'
            f"{escape(label)}<title>{escape(', '.join(lane.member_ids))}</title></text>"
        )
        el.append(
            f'<line x1="{LABEL_W}" y1="{y + LANE_H}" x2="{width - RIGHT_PAD}" y2="{y + LANE_H}" stroke="#e4e8ee"/>'
        )
        for start, end in lane.spans:
            x_a, x_b = x(start), x(end if end is not None else t1)
            el.append(
                f'<rect class="lane" x="{x_a}" y="{y + 9}" width="{max(x_b - x_a, 1)}" height="{LANE_H - 18}" '
                f'rx="3" fill="{LANE_FILL}"/>'
            )
        for start, end, epoch in _reconciling_spans(h, lane.key, t1):
            x_a, x_b = x(start), x(end)
            el.append(
                f'<rect class="reconciling" x="{x_a}" y="{y + LANE_H - 11}" width="{max(x_b - x_a, 1.5)}" '
                f'height="4" fill="{RECONCILING_FILL}"><title>reconciling towards epoch {epoch}: '
                f"{end - start} ms</title></rect>"
            )
        last_x = None
        for ts, epoch, _state in h.member_epochs.get(lane.key, []):
            ex = x(ts)
            if epoch > 0 and (last_x is None or ex - last_x > 26):
                el.append(
                    f'<text class="member-epoch" x="{ex + 2}" y="{y + 8}" font-size="9" fill="#5b3fa0">e{epoch}</text>'
                )
                last_x = ex
        for i, g in enumerate(gens):
            if g.rebalance_protocol == "consumer":
                continue  # the epoch marks say it better than the partition counts
            if lane.key not in g.owners:
                continue
            end = gens[i + 1].shown_start_ts if i + 1 < len(gens) else t1
            x_a, x_b = x(g.completed_ts), x(end)
            if x_b - x_a > 18:
                el.append(f'<text x="{x_a + 4}" y="{y + LANE_H / 2 + 4}" fill="#123">{len(g.owners[lane.key])}p</text>')

    # Consumer groups: a partition without an owner is a dotted line on the lane that released it, up to the moment
    # another member took it.
    for u in h.unowned if h.is_consumer else []:
        if u.from_lane in lane_y and u.from_ts is not None:
            yu = lane_y[u.from_lane] + LANE_H - 4
            end = u.to_ts if u.to_ts is not None else t1
            el.append(
                f'<line class="unowned" x1="{x(u.from_ts)}" y1="{yu}" x2="{max(x(end), x(u.from_ts) + 1)}" '
                f'y2="{yu}" stroke="#b36b00" stroke-width="2" stroke-dasharray="2 2"><title>'
                f"{escape(u.partition[0])}-{u.partition[1]} without an owner for "
                f"{'' if u.duration_ms is None else u.duration_ms} ms</title></line>"
            )
    # Ownership changes: one arrow per (from, to) pair at the generation's completion; gains without a previous
    # owner (new partitions, cooperative second round) and revocations without a new owner get a tick mark.
    for g in gens:
        gx = x(g.completed_ts)
        pairs = {k: len(v) for k, v in _grouped_changes(g).items()}
        for (src, dst), n in sorted(pairs.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
            if src in lane_y and dst in lane_y:
                y_a, y_b = lane_y[src] + LANE_H / 2, lane_y[dst] + LANE_H / 2
                el.append(
                    f'<line class="move" data-generation="{g.generation}" x1="{gx}" y1="{y_a}" x2="{gx}" '
                    f'y2="{y_b + (-6 if y_b > y_a else 6)}" stroke="{GAIN_GREEN}" stroke-width="2" '
                    f'marker-end="url(#arrow)"><title>{n} partition(s) moved</title></line>'
                )
                el.append(f'<text x="{gx + 4}" y="{(y_a + y_b) / 2}" fill="{GAIN_GREEN}">{n}</text>')
            elif dst in lane_y:
                yb = lane_y[dst]
                el.append(f'<text class="gain" x="{gx + 3}" y="{yb + 11}" fill="{GAIN_GREEN}">+{n}</text>')
            elif src in lane_y:
                ya = lane_y[src]
                el.append(f'<text class="revoke" x="{gx + 3}" y="{ya + LANE_H - 2}" fill="#b36b00">−{n}</text>')

    # Departures: a red cross on expiry (dotted from the last heartbeat: the silent time), a grey bar on leave.
    for d in h.departures:
        if d.lane not in lane_y:
            continue
        y = lane_y[d.lane] + LANE_H / 2
        dx = x(d.ts)
        if d.kind == "expired":
            if d.last_heartbeat_ts is not None and d.last_heartbeat_ts < d.ts:
                el.append(
                    f'<line x1="{x(d.last_heartbeat_ts)}" y1="{y}" x2="{dx}" y2="{y}" stroke="{EXPIRY_RED}" '
                    f'stroke-width="2" stroke-dasharray="3 3"/>'
                )
            el.append(
                f'<g class="expiry" stroke="{EXPIRY_RED}" stroke-width="4">'
                f'<line x1="{dx - 7}" y1="{y - 7}" x2="{dx + 7}" y2="{y + 7}"/>'
                f'<line x1="{dx - 7}" y1="{y + 7}" x2="{dx + 7}" y2="{y - 7}"/>'
                f"<title>expired ({escape(d.reason)}) at {iso(d.ts)}</title></g>"
            )
        else:
            el.append(
                f'<rect class="leave" x="{dx - 2}" y="{y - 9}" width="4" height="18" fill="{LEAVE_GREY}">'
                f"<title>left ({escape(d.reason)}) at {iso(d.ts)}</title></rect>"
            )
    # Protocol switches: a dashed line across the lanes, named under them.
    for s in h.switches:
        sx = x(s.ts)
        name = f"{s.kind} to {s.to_protocol}" if s.online else f"now {s.to_protocol}"
        el.append(
            f'<g class="protocol-switch" data-to="{escape(s.to_protocol)}"><line x1="{sx}" y1="{AXIS_H - 14}" '
            f'x2="{sx}" y2="{bottom + 4}" stroke="{SWITCH_INK}" stroke-width="2" stroke-dasharray="6 3"/>'
            f'<text x="{sx}" y="{bottom + 16}" text-anchor="middle" fill="{SWITCH_INK}" font-weight="bold">'
            f"{escape(name)}</text><title>{escape(s.reason)} at {iso(s.ts)}</title></g>"
        )
    if not lanes:
        el.append(
            f'<text x="{width / 2}" y="{AXIS_H + 20}" text-anchor="middle" fill="#667">no members in this period</text>'
        )
    el.append("</svg>")
    return "\n".join(el)


# ==================================================================== tables
def render_lag_svg(h: GroupHistory, width: int = PAGE_WIDTH - 40) -> str:
    """The group's lag over time under the timeline (same time axis): the worst partition's seconds and records at
    each log-end sample, rebalances shaded and marked with their lag cost. Empty without samples."""
    points = [p for p in h.lag if p[1] is not None]
    if not points:
        return ""
    t0 = h.first_ts or 0
    t1 = max(h.last_ts or t0, t0 + 1)
    x = _Scale(t0, t1, LABEL_W, width - RIGHT_PAD)
    top, bottom = 22, LAG_H - 22
    max_s = max((p[2] or 0.0) for p in points) or 1.0
    max_r = max(p[1] for p in points) or 1

    def y(value: float, top_value: float) -> float:
        return round(bottom - (bottom - top) * value / top_value, 1)

    el = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{LAG_H}" viewBox="0 0 {width} {LAG_H}" '
        f'font-family="sans-serif" font-size="11" role="img" aria-label="lag of {escape(h.group_id)}">',
        f'<rect x="0" y="0" width="{width}" height="{LAG_H}" fill="#ffffff"/>',
    ]
    for g in h.generations:
        x_a, x_b = x(g.shown_start_ts), x(g.completed_ts)
        fill = REBALANCE_FILL.get(g.rebalance_protocol, REBALANCE_FILL["eager"])
        el.append(
            f'<rect class="lag-rebalance" data-generation="{g.generation}" x="{x_a}" y="{top}" '
            f'width="{max(x_b - x_a, 2)}" height="{bottom - top}" fill="{fill}" fill-opacity="0.55"/>'
            f'<line x1="{x_b}" y1="{top - 6}" x2="{x_b}" y2="{bottom}" stroke="#b36b00" '
            f'stroke-dasharray="3 2"/>'
        )
        cost = g.lag_cost
        if cost is not None and cost["lag_records"] is not None:
            near_end = x_b > width - RIGHT_PAD - 120  # written leftwards there, so it stays on the picture
            el.append(
                f'<text class="lag-cost" x="{x_b - 3 if near_end else x_b + 3}" y="{top - 8}" '
                f'text-anchor="{"end" if near_end else "start"}" fill="#8a4b00">+{cost["lag_records"]} '
                f"rec / {cost['lag_seconds']:.1f}s<title>lag cost of "
                f"{'epoch' if g.rebalance_protocol == 'consumer' else 'gen'} {g.generation}: "
                "built from release to the first commit of its new owner</title></text>"
            )
    el.append(f'<line x1="{LABEL_W}" y1="{bottom}" x2="{width - RIGHT_PAD}" y2="{bottom}" stroke="#889"/>')
    seconds = " ".join(f"{x(t)},{y(s or 0.0, max_s)}" for t, _, s in points)
    records = " ".join(f"{x(t)},{y(r, max_r)}" for t, r, _ in points)
    el.append(
        f'<polyline class="lag-records" points="{records}" fill="none" stroke="{LAG_RECORDS_TEAL}" '
        f'stroke-width="1.5" stroke-dasharray="5 3"/>'
    )
    el.append(
        f'<polyline class="lag-seconds" points="{seconds}" fill="none" stroke="{LAG_SECONDS_BLUE}" stroke-width="2"/>'
    )
    el.append(
        f'<text x="8" y="{top + 10}" fill="#223" font-weight="bold">lag, worst partition</text>'
        f'<text x="8" y="{top + 30}" fill="{LAG_SECONDS_BLUE}">seconds (max {max_s:.1f})</text>'
        f'<text x="8" y="{top + 48}" fill="{LAG_RECORDS_TEAL}">records (max {max_r})</text>'
        f'<text x="8" y="{bottom - 4}" fill="#667">interpolated from log-end samples</text>'
    )
    el.append("</svg>")
    return "\n".join(el)


def _lag_rows(h: GroupHistory) -> list[list[object]]:
    return [
        [
            g.generation,
            iso(g.completed_ts),
            len(g.lag_cost["partitions"]),
            shown(g.lag_cost["lag_records"]),
            shown(g.lag_cost["lag_seconds"]),
            g.lag_cost["lag_seconds_method"] or "",
            shown(g.lag_cost.get("no_members_lag_records")),
            shown(g.lag_cost.get("no_members_lag_seconds")),
            iso(g.lag_cost["ts"]),
        ]
        for g in h.generations
        if g.lag_cost is not None
    ]


def _table(caption: str, headers: list[str], rows: list[list[object]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="none">none</td></tr>'
    return f'<h2>{escape(caption)}</h2><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _label(h: GroupHistory, key: str | None) -> str:
    if key is None:
        return "—"
    lane = h.lanes.get(key)
    return lane.label if lane is not None else key


def _grouped_changes(g: Generation) -> dict[tuple[str | None, str | None], list[tuple[str, int]]]:
    pairs: dict[tuple[str | None, str | None], list[tuple[str, int]]] = {}
    for c in g.changes:
        pairs.setdefault((c.from_lane, c.to_lane), []).append(c.partition)
    return pairs


def _reconciling_spans(h: GroupHistory, lane: str, t1: int) -> list[tuple[int, int, int]]:
    """(start, end, target epoch) of each time the member was not Stable, from its epoch timeline."""
    spans, start = [], None
    points = h.member_epochs.get(lane, [])
    for ts, epoch, state in points:
        if state != "STABLE" and start is None:
            start = ts
        elif state == "STABLE" and start is not None:
            spans.append((start, ts, epoch))
            start = None
    if start is not None:
        lane_spans = h.lanes[lane].spans if lane in h.lanes else []
        end = lane_spans[-1][1] if lane_spans and lane_spans[-1][1] is not None else t1
        spans.append((start, max(end, start), points[-1][1]))
    return spans


def _consumer_open_since(h: GroupHistory) -> int | None:
    """A consumer group still Assigning or Reconciling at the end of its history: since when."""
    if not h.states or h.states[-1].state not in ("Assigning", "Reconciling"):
        return None
    start = h.states[-1].start_ts
    for s in reversed(h.states):
        if s.state not in ("Assigning", "Reconciling"):
            break
        start = s.start_ts
    return start


def _partitions(parts: list[tuple[str, int]]) -> str:
    """``t-a: 0,1,2; t-b: 5`` — compact enough for a table cell."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(parts):
        by_topic.setdefault(topic, []).append(p)
    return "; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in by_topic.items())


def _per_partition_rows(h: GroupHistory) -> list[list[object]]:
    """Per partition, over the spans the rebalances closed: how often it had no owner, for how long in all and at
    most while the group had members, and how long on top the group had no member at all."""
    by: dict[tuple[str, int], list[UnownedSpan]] = {}
    for g in h.generations:
        for u in g.spans:
            by.setdefault(u.partition, []).append(u)
    return [
        [
            f"{tp[0]}-{tp[1]}",
            len(us),
            shown(sum_known(u.unavailable_ms for u in us)),
            shown(max_known(u.unavailable_ms for u in us)),
            shown(sum_known(u.no_members_ms for u in us)),
        ]
        for tp, us in sorted(by.items())
    ]


def _member_label(h: GroupHistory, member_id: str | None) -> str:
    """The lane label of a member id (the leader is named by member id)."""
    if member_id is None:
        return "—"
    return next((lane.label for lane in h.lanes.values() if member_id in lane.member_ids), member_id)


def _phase_ms(g: Generation) -> tuple[object, object]:
    if g.join_completed_ts is None:
        return "", ""
    return shown(
        None if g.started_ts is None else g.join_completed_ts - g.started_ts
    ), g.completed_ts - g.join_completed_ts


def figures_summary(h: GroupHistory) -> dict[str, object]:
    """The figures of docs/figures.md over a group's rebalances, the same for both protocols ("unknown": the
    outputs could not know it)."""
    gens, spans = h.generations, [u for g in h.generations for u in g.spans]
    unavailable = sum_known(u.unavailable_ms for u in spans)
    ownerless = sum_known(u.duration_ms for u in spans)
    return {
        "rebalances": len(gens),
        "time rebalancing (ms)": shown(sum_known(g.duration_ms for g in gens), "unknown"),
        "longest rebalance (ms)": shown(max_known(g.duration_ms for g in gens), "unknown"),
        "partitions moved": shown(sum_known(g.partitions_moved for g in gens), "unknown"),
        "max partition unavailability (ms)": shown(max_known(u.unavailable_ms for u in spans), "unknown"),
        "partition unavailability (partition·s)": shown(
            None if unavailable is None else round(unavailable / 1000, 1), "unknown"
        ),
        "max without owner, incl. no members (ms)": shown(max_known(u.duration_ms for u in spans), "unknown"),
        "without owner, incl. no members (partition·s)": shown(
            None if ownerless is None else round(ownerless / 1000, 1), "unknown"
        ),
    }


def summary(h: GroupHistory) -> dict[str, object]:
    if h.is_consumer:
        return consumer_summary(h)
    gens = h.generations
    triggers: dict[str, int] = {}
    for g in gens:
        triggers[g.trigger] = triggers.get(g.trigger, 0) + 1
    figures = figures_summary(h)
    return {
        "group": h.group_id,
        "from": iso(h.first_ts),
        "to": iso(h.last_ts),
        "state at end": h.state or "unknown",
        "rebalances": figures.pop("rebalances"),
        "by trigger": ", ".join(f"{k} {v}" for k, v in sorted(triggers.items())) or "—",
        **figures,
        "members expired": sum(1 for d in h.departures if d.kind == "expired"),
        "members left": sum(1 for d in h.departures if d.kind == "left"),
        "static member restarts": len(h.replacements),
    }


def _ms_stats(values: list[int]) -> str:
    """``median / max`` of some durations in ms (``—`` for none)."""
    if not values:
        return "—"
    ordered = sorted(values)
    return f"{ordered[(len(ordered) - 1) // 2]} / {ordered[-1]}"


def consumer_summary(h: GroupHistory) -> dict[str, object]:
    """The summary table of a consumer-protocol group: epochs instead of generations, and reconciliation."""
    gens = h.generations
    triggers: dict[str, int] = {}
    for t in h.targets:
        if t.changed:
            triggers[t.trigger] = triggers.get(t.trigger, 0) + 1
    figures = figures_summary(h)
    if h.protocols[-1] == "classic":  # downgraded: a classic group's generation
        at_end = ("generation at end", gens[-1].generation if gens else 0)
    else:
        at_end = (
            "group epoch at end",
            h.group_epochs[-1][1] if h.group_epochs else (gens[-1].generation if gens else 0),
        )
    rebalances = "rebalances (generations and epoch bumps to Stable or Empty)" if h.mixed else None
    return {
        "group": h.group_id,
        "protocol": _protocol_path(h),
        "from": iso(h.first_ts),
        "to": iso(h.last_ts),
        "state at end": h.state or "unknown",
        at_end[0]: at_end[1],
        "target assignments": len(h.targets),
        "target assignments that changed it": sum(1 for t in h.targets if t.changed),
        "changed by trigger": ", ".join(f"{k} {v}" for k, v in sorted(triggers.items())) or "—",
        rebalances or "rebalances (epoch bumps to Stable or Empty)": figures.pop("rebalances"),
        **figures,
        "reconciliation per member, median / max (ms)": _ms_stats(
            [r.duration_ms for r in h.reconciliations if r.duration_ms is not None]
        ),
        "revocation latency, median / max (ms)": _ms_stats(
            [r.latency_ms for r in h.revocations if r.latency_ms is not None]
        ),
        "members expired": sum(1 for d in h.departures if d.kind == "expired"),
        "members left": sum(1 for d in h.departures if d.kind == "left"),
        "static member restarts": len(h.replacements),
    }


def _protocol_path(h: GroupHistory) -> str:
    """``consumer (KIP-848)``, or the protocols a group went through and when: ``classic → consumer (upgrade at
    T) → classic (downgrade at T)``."""
    if not h.switches:
        return "consumer (KIP-848)"
    steps = [h.switches[0].from_protocol] + [f"{s.to_protocol} ({s.kind} at {iso(s.ts)})" for s in h.switches]
    return " → ".join(steps)


def _switch_rows(h: GroupHistory) -> list[list[object]]:
    return [
        [iso(s.ts), s.from_protocol, s.to_protocol, s.kind, ", ".join(_label(h, k) for k in s.members), s.reason]
        for s in h.switches
    ]


def _consumer_tables(h: GroupHistory) -> str:
    """The tables only a consumer-protocol group has."""

    def label(key: str | None) -> str:
        return _label(h, key)

    target_rows = [
        [
            t.epoch,
            iso(t.ts),
            t.trigger,
            t.assignor or "",
            len(t.target),
            len(t.changes),
            "" if t.reconciliation_ms is None else t.reconciliation_ms,
            t.balance,
            "; ".join(f"{label(k)}: {len(v)}" for k, v in t.target.items()),
        ]
        for t in h.targets
    ]
    last_target = h.targets[-1].target if h.targets else {}
    lanes = list(dict.fromkeys([*last_target, *h.current]))
    versus_rows = [
        [
            label(k),
            _partitions(last_target.get(k, [])),
            _partitions(h.current.get(k, [])),
            _partitions(h.pending_revocation.get(k, [])),
            "yes"
            if sorted(last_target.get(k, [])) == sorted(h.current.get(k, [])) and not h.pending_revocation.get(k)
            else "no",
        ]
        for k in lanes
    ]
    member_rows = []
    for key, points in h.member_epochs.items():
        recs = [r.duration_ms for r in h.reconciliations if r.lane == key and r.duration_ms is not None]
        revs = [r.latency_ms for r in h.revocations if r.lane == key and r.latency_ms is not None]
        epochs = [str(e) for _, e, _ in points]
        epoch_path = " → ".join(dict.fromkeys(epochs))
        member_rows.append([label(key), epoch_path, len(recs), _ms_stats(recs), len(revs), _ms_stats(revs)])
    revocations: dict[tuple[str, int], list] = {}
    for r in h.revocations:
        revocations.setdefault((r.lane, r.started_ts), []).append(r)
    revocation_rows = [
        [
            label(lane),
            rs[0].member_epoch,
            iso(ts),
            _partitions([r.partition for r in rs]),
            iso(rs[0].acked_ts) if rs[0].acked_ts is not None else "never (gone)",
            "" if rs[0].latency_ms is None else rs[0].latency_ms,
        ]
        for (lane, ts), rs in revocations.items()
    ]
    unowned_rows = [
        [
            f"{u.partition[0]}-{u.partition[1]}",
            label(u.from_lane),
            iso(u.from_ts) or "unknown",
            label(u.to_lane) if u.to_ts is not None else "(awaiting)",
            iso(u.to_ts),
            "" if u.to_ts is None else shown(u.unavailable_ms),
            "" if u.to_ts is None else shown(u.no_members_ms),
        ]
        for u in h.unowned
    ]
    return "\n".join(
        [
            _table(
                "Target assignments",
                [
                    "epoch",
                    "computed",
                    "trigger",
                    "assignor",
                    "members",
                    "partitions changed",
                    "reconciled after ms",
                    "balance (max−min)",
                    "partitions per member",
                ],
                target_rows,
                "targets",
            ),
            _table(
                "Target vs current assignment (end)",
                ["member", "target", "current", "pending revocation", "reconciled"],
                versus_rows,
                "versus",
            )
            if h.protocols[-1] == "consumer"
            else "",
            _table(
                "Member epochs and reconciliation",
                [
                    "member",
                    "epochs",
                    "reconciliations",
                    "median / max ms",
                    "revocations acked",
                    "revocation median / max ms",
                ],
                member_rows,
                "member-epochs",
            ),
            _table(
                "Revocations",
                ["member", "member epoch", "asked", "partitions", "acknowledged", "latency ms"],
                revocation_rows,
                "revocations",
            ),
            _table(
                "Partitions without an owner",
                ["partition", "released by", "at", "taken by", "at", "unavailable ms", "+ no members ms"],
                unowned_rows,
                "unowned",
            ),
        ]
    )


def render_html(h: GroupHistory, title: str | None = None) -> str:
    title = title or f"Rebalance history of {h.group_id}"
    gens = h.generations
    gen_rows = [
        [
            g.generation,
            g.trigger,
            g.trigger_detail,
            g.protocol or "",
            g.rebalance_protocol,
            _member_label(h, g.leader),
            len(g.members),
            iso(g.started_ts) or "unknown",
            shown(g.duration_ms),
            *_phase_ms(g),
            shown(g.partitions_moved),
            shown(g.max_partition_unavailable_ms),
            g.partition_count,
            g.balance,
        ]
        for g in gens
    ]
    move_rows = [
        [g.generation, iso(g.completed_ts), _label(h, src), _label(h, dst), len(parts), _partitions(parts)]
        for g in gens
        for (src, dst), parts in _grouped_changes(g).items()
    ]
    departure_rows = [
        [
            iso(d.ts),
            _label(h, d.lane),
            d.member_id,
            d.kind,
            d.reason,
            iso(d.last_heartbeat_ts),
            "" if d.last_heartbeat_ts is None else d.ts - d.last_heartbeat_ts,
            "" if d.generation is None else d.generation,
        ]
        for d in h.departures
    ]
    mixed = h.mixed
    member_rows = [
        [
            lane.label,
            *([" → ".join(lane.protocols)] if mixed else []),
            "static" if lane.static else "dynamic",
            " ".join(lane.member_ids),
            iso(lane.spans[0][0]) if lane.spans else "",
            "present" if lane.spans and lane.spans[-1][1] is None else iso(lane.spans[-1][1]) if lane.spans else "",
        ]
        for lane in h.lanes.values()
    ]
    facts = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in summary(h).items())
    consumer = h.is_consumer
    if consumer:
        gen_rows = [
            [
                g.generation,
                *([g.rebalance_protocol] if mixed else []),
                g.trigger,
                g.trigger_detail,
                g.protocol or "",
                len(g.members),
                iso(g.started_ts) or "unknown",
                shown(g.duration_ms),
                shown(g.partitions_moved),
                shown(g.max_partition_unavailable_ms),
                g.partition_count,
                g.balance,
            ]
            for g in gens
        ]
        gen_table = _table(
            "Rebalances (classic generations; group epoch bumped until Stable or Empty)"
            if mixed
            else "Rebalances (group epoch bumped until Stable or Empty)",
            [
                *(["generation / epoch", "protocol"] if mixed else ["epoch"]),
                "trigger",
                "detail",
                "assignor",
                "members",
                "started",
                "duration ms",
                "partitions moved",
                "max unavailable ms",
                "partitions",
                "balance (max−min)",
            ],
            gen_rows,
            "generations",
        )
    else:
        gen_table = _table(
            "Generations",
            [
                "generation",
                "trigger",
                "detail",
                "assignor",
                "protocol",
                "leader",
                "members",
                "started",
                "duration ms",
                "join ms",
                "sync ms",
                "partitions moved",
                "max unavailable ms",
                "partitions",
                "balance (max−min)",
            ],
            gen_rows,
            "generations",
        )
    legend = (
        f'<p class="legend"><span style="background:{REBALANCE_FILL["eager"]}">&nbsp;&nbsp;&nbsp;</span> '
        f'eager rebalance (stop-the-world) <span style="background:{REBALANCE_FILL["cooperative"]}">'
        f'&nbsp;&nbsp;&nbsp;</span> cooperative rebalance <span style="color:{GAIN_GREEN}">&#8595;</span> '
        f'partitions moved between members <span style="color:{EXPIRY_RED}">&#10006;</span> session expiry '
        f'(dotted: silent since last heartbeat) <span style="color:{LEAVE_GREY}">&#9646;</span> LeaveGroup</p>'
    )
    if consumer:
        legend = (
            f'<p class="legend"><span style="background:{REBALANCE_FILL["consumer"]}">&nbsp;&nbsp;&nbsp;'
            f'</span> group epoch bumped until Stable again <span style="background:{RECONCILING_FILL}">'
            f"&nbsp;&nbsp;&nbsp;</span> member reconciling (e<i>N</i>: its epoch) "
            f'<span style="color:#b36b00">&#8943;</span> partition released, no owner yet '
            f'<span style="color:{GAIN_GREEN}">&#8595;</span> partitions moved between members '
            f'<span style="color:{EXPIRY_RED}">&#10006;</span> session expiry '
            f'<span style="color:{LEAVE_GREY}">&#9646;</span> leave (epoch -1, or -2 for a static member)</p>'
        )
    if h.switches:
        legend = legend.replace(
            "</p>",
            f' <span style="background:{REBALANCE_FILL["eager"]}">&nbsp;&nbsp;&nbsp;</span> classic rebalance '
            f'<span style="color:{SWITCH_INK}">&#9478;</span> protocol switch</p>',
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 20px; color: #222; background: #fff; width: {PAGE_WIDTH - 40}px; }}
h1 {{ font-size: 20px; margin: 0 0 8px; }} h2 {{ font-size: 15px; margin: 22px 0 6px; }}
table {{ border-collapse: collapse; font-size: 12px; margin-bottom: 8px; }}
th, td {{ border: 1px solid #ccd; padding: 3px 6px; text-align: left; vertical-align: top; }}
thead th {{ background: #eef1f6; }} td.none {{ color: #889; font-style: italic; }}
table.summary th {{ background: #f5f7fa; font-weight: normal; }} .legend {{ font-size: 12px; color: #445; }}
</style></head><body>
<h1>{escape(title)}</h1>
<table class="summary">{facts}</table>
{legend}
<div class="timeline">{render_svg(h)}</div>
<div class="lag">{render_lag_svg(h)}</div>
{gen_table}
{
        _table(
            "Protocol switches",
            ["at", "from", "to", "kind", "members it kept", "reason"],
            _switch_rows(h),
            "switches",
        )
        if h.switches
        else ""
    }
{
        _table(
            "Lag cost of each rebalance (from each partition's release to its new owner's first commit)",
            [
                ("generation / epoch" if mixed else "epoch") if consumer else "generation",
                "completed",
                "partitions",
                "records",
                "seconds (the worst)",
                "seconds from",
                "+ no members records",
                "+ no members s",
                "known at",
            ],
            _lag_rows(h),
            "lag-cost",
        )
        if any(g.lag_cost for g in gens)
        else ""
    }
{
        _table(
            "Unavailability per partition",
            [
                "partition",
                "times without an owner",
                "unavailable ms, total",
                "unavailable ms, max",
                "+ no members ms, total",
            ],
            _per_partition_rows(h),
            "per-partition",
        )
    }
{_consumer_tables(h) if consumer else ""}
{
        _table(
            "Partition ownership changes",
            [
                ("generation / epoch" if mixed else "epoch") if consumer else "generation",
                "at",
                "from",
                "to",
                "count",
                "partitions",
            ],
            move_rows,
            "moves",
        )
    }
{
        _table(
            "Members that left or expired",
            [
                "at",
                "member",
                "member id",
                "kind",
                "reason",
                "last heartbeat",
                "silent ms",
                ("generation / epoch" if mixed else "group epoch") if consumer else "generation",
            ],
            departure_rows,
            "departures",
        )
    }
{
        _table(
            "Members",
            ["member", *(["protocol"] if mixed else []), "kind", "member ids", "first seen", "until"],
            member_rows,
            "members",
        )
    }
</body></html>
"""


def page_height(h: GroupHistory) -> int:
    """Height (px) that shows the whole page in a screenshot, estimated from the row counts."""
    svg = AXIS_H + max(len(h.lanes), 1) * LANE_H + BOTTOM_PAD + (LAG_H if h.lag else 0)
    rows = (
        len(h.generations) * 2
        + sum(len(_grouped_changes(g)) for g in h.generations)
        + len(h.departures)
        + len(h.lanes)
        + len({u.partition for g in h.generations for u in g.spans})
    )
    if h.is_consumer:
        revocations = len({(r.lane, r.started_ts) for r in h.revocations})
        rows += len(h.targets) + len(h.current) + len(h.member_epochs) + revocations + len(h.unowned) + 8
        return 160 + 20 * 24 + svg + 10 * 70 + rows * 22
    return 160 + 15 * 24 + svg + 5 * 70 + rows * 22


# ==================================================================== PNG via headless Chromium
class ChromiumMissing(RuntimeError):
    pass


def chromium_path() -> str | None:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(
    html_path: str | Path, png_path: str | Path, width: int = PAGE_WIDTH, height: int = 900, timeout_s: float = 60.0
) -> Path:
    """Photograph a local HTML file with headless Chromium (a throwaway profile, no network services)."""
    browser = chromium_path()
    if browser is None:
        raise ChromiumMissing(
            "PNG export needs Chromium at /usr/bin/chromium (Debian/Ubuntu: "
            "apt-get install -y chromium); the HTML report was still written"
        )
    png = Path(png_path).resolve()
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rt-chromium-") as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            Path(html_path).resolve().as_uri(),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if not png.exists() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {result.returncode}): {result.stderr.strip()[-800:]}")
    return png


# ==================================================================== CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rebalance-tracker report", description="Write a group's rebalance history as a self-contained HTML page."
    )
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--since", default=None, help="start at this time: epoch ms or ISO-8601 (UTC by default)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--feed", help="JSON-lines event feed (e.g. from 'rebalance-tracker simulate --out')")
    source.add_argument("--outputs", help="JSON-lines coordinator output records (the tracker's output topic)")
    p.add_argument("--out", required=True, help="HTML file to write")
    p.add_argument("--png", default=None, help="also write a PNG screenshot (needs headless Chromium)")
    add_coordinator_option(p)
    return p


def add_coordinator_option(p: argparse.ArgumentParser) -> None:
    """``--coordinator-conf`` as ``run`` spells it (``--coordinator-config``: the old spelling, still taken)."""
    p.add_argument(
        "--coordinator-conf",
        "--coordinator-config",
        dest="coordinator_conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="coordinator setting used to replay a feed, Kafka-style (e.g. "
        "group.initial.rebalance.delay.ms=0, or for consumer-protocol groups "
        "group.consumer.session.timeout.ms=10000); repeatable",
    )


def _pairs(pairs: list[str]) -> dict[str, str]:
    props = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--coordinator-conf wants KEY=VALUE, not {pair!r}")
        props[key.strip()] = value.strip()
    return props


def coordinator_config(pairs: list[str]):
    """``KEY=VALUE`` strings -> CoordinatorConfig (ValueError on unknown keys or bad values); the consumer
    protocol's ``group.consumer.*`` keys are left to :func:`consumer_config`. The split is the job's
    (``routing.Configs.from_properties``), so a feed replayed here gets the settings the job would give it."""
    from streaming.coordinator.routing import Configs

    return Configs.from_properties(_pairs(pairs)).classic


def consumer_config(pairs: list[str]):
    """The ``group.consumer.*`` keys among ``KEY=VALUE`` strings -> ConsumerGroupConfig (Kafka's defaults
    otherwise: a 45 s session, a 5 s heartbeat interval, assignors uniform and range), with the broker's offsets
    settings (``offsets.retention.minutes``, ...), which consumer groups share with classic ones as in the job."""
    from streaming.coordinator.routing import Configs

    return Configs.from_properties(_pairs(pairs)).consumer


def _absent(group: str, groups: collections.Counter, outputs: list[dict], config, observed: bool) -> str:
    """Why a group has no history: not in the input (the groups that are), or, in a feed, every request refused:
    Kafka's answers are counted, and a group whose joins carry a broker's answers (``observed``: a cluster feed, an
    instrumented client's) needs observe mode (issue #34)."""
    if not groups.get(group):
        named = sorted(str(g) for g in groups if g)
        return f"group {group!r} does not appear in the input" + (
            f"; its groups: {', '.join(named[:10])}{', ...' if len(named) > 10 else ''}"
            if named
            else " (no records with a group id)"
        )
    errors = collections.Counter(
        o["error"] for o in outputs if o.get("group_id") == group and o.get("error") not in (None, "NONE")
    )
    text = f"group {group!r} has {groups[group]} records in the input but no history"
    if errors:
        text += " (the coordinator answered " + ", ".join(f"{n} with {e}" for e, n in errors.most_common()) + ")"
    if observed and not config.adopt_unknown_members:
        from streaming.feeds.cluster_feed import OBSERVER_SETTINGS

        text += (
            "; its member ids were issued by a real broker (a cluster feed, or instrumented consumers), which "
            "the model follows only in observe mode: give --coordinator-conf tracker.adopt.unknown.members=true"
            f", and for a cluster feed also --coordinator-conf tracker.expire.members="
            f"{OBSERVER_SETTINGS['tracker.expire.members']} (it has no heartbeats)"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        since = parse_since(args.since)
        config = coordinator_config(args.coordinator_conf)
        consumer = consumer_config(args.coordinator_conf)
    except ValueError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    groups: collections.Counter = collections.Counter()  # records per group id in the input
    answered: set = set()  # groups whose joins carry a broker's answer: a member id and a generation

    def counted(records: Iterable) -> Iterable:
        for r in records:
            if isinstance(r, dict):
                groups[r.get("group_id")] += 1
                if r.get("type") == "join" and r.get("member_id") and r.get("generation") is not None:
                    answered.add(r.get("group_id"))
            yield r

    if args.feed:  # the coordinator runs over the whole feed: a progress bar on stderr (plain lines elsewhere)
        records = terminal.track(
            read_jsonl(args.feed), "running the feed", terminal.count_lines(args.feed), unit="records"
        )
        outputs, rejected = coordinator_outputs(counted(records), config, consumer)
        if rejected:
            print(f"report: skipped {rejected} invalid feed records", file=sys.stderr)
    else:
        records = terminal.track(
            read_jsonl(args.outputs), "reading the outputs", terminal.count_lines(args.outputs), unit="records"
        )
        outputs = [o for o in counted(records) if isinstance(o, dict)]
    history = build_history(outputs, args.group)
    if history.first_ts is None:
        print(f"report: {_absent(args.group, groups, outputs, config, args.group in answered)}", file=sys.stderr)
        return 1
    if since is not None:
        history = history.since(since)
    Path(args.out).write_text(render_html(history), encoding="utf-8")
    if history.is_consumer:
        print(
            f"wrote {args.out}: {len(history.targets)} target assignments, {len(history.generations)} "
            f"rebalances, {len(history.departures)} departures"
        )
    else:
        print(f"wrote {args.out}: {len(history.generations)} generations, {len(history.departures)} departures")
    if args.png:
        try:
            screenshot(args.out, args.png, height=page_height(history))
        except ChromiumMissing as exc:
            print(f"report: {exc}", file=sys.stderr)
            return 3
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
