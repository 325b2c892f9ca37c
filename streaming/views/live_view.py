"""A live table of the groups the job tracks, redrawn after every micro-batch.

People watching a long-running job want the current picture (which groups, what state, which generation, who is in
them, when the last rebalance happened and how long it took) rather than a scrolling log. On a terminal the table is
redrawn in place (streaming/views/terminal.py); into a pipe or a log each batch appends the same picture as plain text.

LAG is the group's worst partition at the last log-end sample (streaming/coordinator/lag.py, docs/lag.md): its lag
in records and in seconds, and which partition it is; each rebalance's lag cost goes to the recent events when its
new owners have committed.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from streaming.coordinator.lag import PARTITION_LAG, REBALANCE_LAG, LagBook
from streaming.coordinator.outputs import (
    ASSIGNMENT,
    DEAD_LETTER,
    GROUP_METADATA,
    GROUP_RESTORED,
    MEMBER_EXPIRED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REPLACED,
    OFFSET_COMMIT,
    PROTOCOL_SWITCH,
    REBALANCE,
    RESTORE_GAP,
    STATE_CHANGE,
    TARGET_ASSIGNMENT,
)
from streaming.dead_letters import is_step_failure
from streaming.views import terminal


def clock(ts_ms: int | None = None) -> str:
    """HH:MM:SS of an epoch-ms time (None: now), on the local clock like the rest of the job's lines."""
    return time.strftime("%H:%M:%S", time.localtime(None if ts_ms is None else ts_ms / 1000))


def _members(n: int) -> str:
    return f"{n} member" if n == 1 else f"{n} members"


@dataclass
class GroupView:
    group_id: str
    state: str = "?"
    generation: int = 0
    protocol: str = ""
    members: int = 0
    leader: str = ""
    rebalances: int = 0
    last_rebalance_ts: int | None = None
    last_trigger: str = ""
    last_duration_ms: int | None = None
    last_moved: int | None = None
    expired: int = 0
    committed: dict = field(default_factory=dict)  # (topic, partition) -> offset
    # Consumer-protocol (KIP-848) groups: ``generation`` holds the group epoch.
    consumer: bool = False
    assignment_epoch: int = 0
    member_states: dict = field(default_factory=dict)  # member id -> (member epoch, state)
    restored_committed: int = 0  # partitions committed when the group was rebuilt from the store
    worst_lag: dict | None = None  # the partition_lag of its partition furthest behind (seconds, then records)

    @property
    def reconciling(self) -> int:
        return sum(
            1
            for epoch, state in self.member_states.values()
            if epoch >= 0 and (state != "STABLE" or epoch < self.assignment_epoch)
        )


def _lag_cell(figure: dict | None) -> str:
    """The worst partition's ``records/seconds topic-partition``; '-' before a sample with a committed offset."""
    if figure is None:
        return "-"
    return f"{figure['lag_records']}/{figure['lag_seconds']:.1f}s {figure['topic']}-{figure['partition']}"


class LiveView:
    def __init__(
        self,
        out: TextIO | None = None,
        max_rows: int = 30,
        redraw: bool | None = None,
        width: int | None = None,
        console=None,
    ):
        """``out``: where to draw (stdout); ``redraw``: redraw in place (default: when ``out`` is a terminal), else
        append plain text; ``width``: the terminal's width when forced; ``console``: a ``rich`` console to draw
        on instead (its terminal-ness decides ``redraw``)."""
        self._console = console
        self.out = console.file if console is not None and out is None else (out or sys.stdout)
        self.max_rows = max_rows
        self.width = width
        if redraw is None:
            redraw = console.is_terminal if console is not None else terminal.is_terminal(self.out)
        self.redraw = redraw
        self._screen: terminal.LiveScreen | None = None
        self.groups: dict[str, GroupView] = {}
        self.batches = 0
        self.last_batch_id: int | None = None
        self.dead_letters = 0
        self.step_failures = 0  # steps of a group that raised (its events dead-lettered; the rest went on)
        self.restored = 0  # groups rebuilt from the store after a lost checkpoint
        self.restore_gaps = 0  # of those, the ones whose feed showed what the store did not hold
        self.recent: list[str] = []
        self.waiting: str | None = None  # why the job is not moving (its broker gone), shown above the table
        self.lag = LagBook()
        self._lock = threading.Lock()

    # -- folding outputs into the picture ------------------------------------------------------------------------
    def update(self, batch_id: int, outputs: list[dict]) -> None:
        with self._lock:
            self.batches += 1
            self.last_batch_id = batch_id
            restored = self.restored
            for o in outputs:
                self._apply(o)
            failed = {o.get("group_id") or "": o["exception"]["type"] for o in outputs if is_step_failure(o)}
            for gid, error in sorted(failed.items()):
                self.step_failures += 1
                self._note(f"{gid}: its step failed ({error}); its events were dead-lettered, it kept its state")
            if self.restored > restored:
                self._note(f"{self.restored - restored} groups rebuilt from the store (the checkpoint was lost)")

    def _group(self, group_id: str) -> GroupView:
        view = self.groups.get(group_id)
        if view is None:
            view = self.groups[group_id] = GroupView(group_id)
        return view

    def _apply(self, o: dict) -> None:
        kind, gid = o.get("type"), o.get("group_id") or ""
        if kind == DEAD_LETTER:
            self.dead_letters += 1
            if not is_step_failure(o):
                self._note(f"dead letter ({o.get('reason')})", o.get("ts"))
            return
        if not gid:
            return
        for derived in self.lag.add(o):
            self._lag(derived)
        if kind in (PARTITION_LAG, "log_end"):
            return
        g = self._group(gid)
        if kind == GROUP_RESTORED:
            self.restored += 1
            g.consumer = "group_epoch" in o
            g.state, g.generation = o["state"], int(o.get("group_epoch", o.get("generation", 0)))
            g.assignment_epoch = int(o.get("assignment_epoch") or 0)
            g.protocol = o.get("protocol") or ""
            g.members = len(o.get("members") or [])
            if g.consumer:
                g.member_states = {m: (g.generation, "STABLE") for m in o.get("members") or []}
            g.restored_committed = int(o.get("committed_partitions") or 0)
            return
        if kind == RESTORE_GAP:
            self.restore_gaps += 1
            self._note(f"{gid}: the store did not hold all (restore gap): {o.get('reason')}")
            return
        if kind == PROTOCOL_SWITCH:  # an Empty group replaced by one of the other protocol: start afresh
            # ... but with its committed offsets, which Kafka keeps for the new group (and so does the tracker).
            self.groups[gid] = GroupView(gid, consumer=o.get("to") == "consumer", committed=g.committed)
            self._note(f"{gid}: now a {o.get('to')}-protocol group", o.get("ts"))
            return
        # Which protocol the group speaks, from the output itself (a group may switch when Empty).
        if "group_epoch" in o or "member_epoch" in o or "instance_id" in o or kind == TARGET_ASSIGNMENT:
            g.consumer = True
        elif "generation" in o:
            g.consumer = False
        if kind == STATE_CHANGE:
            g.state = o.get("to") or o.get("state") or g.state
            if o.get("generation") is not None:
                g.generation = int(o["generation"])
            elif o.get("group_epoch") is not None:
                g.generation = int(o["group_epoch"])
                g.assignment_epoch = int(o.get("assignment_epoch") or g.assignment_epoch)
        elif (
            g.consumer
            and kind in (ASSIGNMENT, TARGET_ASSIGNMENT, MEMBER_JOINED, MEMBER_LEFT, MEMBER_REPLACED)
            or (g.consumer and kind == REBALANCE)
        ):
            self._consumer(g, kind, o)
        elif kind == REBALANCE:
            g.rebalances += 1
            g.generation = int(o.get("generation", g.generation))
            g.protocol = o.get("protocol") or ""
            g.leader = o.get("leader") or ""
            members = o.get("members") or []
            g.members = len(members)
            g.last_rebalance_ts = o.get("completed_ts") or o.get("ts")
            g.last_trigger = o.get("trigger") or ""
            g.last_duration_ms = o.get("duration_ms")
            moved = o.get("partitions_moved")
            g.last_moved = len(moved) if isinstance(moved, list) else moved
            self._note(
                f"{gid}: generation {g.generation} ({g.last_trigger}), {_members(g.members)}", g.last_rebalance_ts
            )
        elif kind == MEMBER_EXPIRED:
            g.expired += 1
            g.member_states.pop(o.get("member_id"), None)
            if g.consumer:
                g.members = len(g.member_states)
            self._note(f"{gid}: member {o.get('member_id')} expired", o.get("ts"))
        elif kind == OFFSET_COMMIT:
            key = (o.get("topic"), o.get("partition"))
            if o.get("tombstone"):
                g.committed.pop(key, None)
            else:
                g.committed[key] = o.get("offset")
        elif kind == GROUP_METADATA and o.get("tombstone"):
            g.state = "Dead"

    def _lag(self, d: dict) -> None:
        g = self._group(d["group_id"])
        if d["type"] == PARTITION_LAG:
            known = [f for f in self.lag.current(g.group_id) if f["lag_records"] is not None]
            g.worst_lag = max(known, key=lambda f: (f["lag_seconds"], f["lag_records"]), default=None)
        elif d["type"] == REBALANCE_LAG:
            cost = (
                "?"
                if d["lag_records"] is None
                else f"{d['lag_records']} records, {d['lag_seconds']:.1f} s ({d['lag_seconds_method']})"
            )
            if d.get("no_members_lag_records"):  # apart, as in the report (docs/figures.md)
                cost += (
                    f", and {d['no_members_lag_records']} records, {d['no_members_lag_seconds']:.1f} s with no member"
                )
            self._note(f"{g.group_id}: the rebalance of {clock(d['rebalance_ts'])} cost {cost} of lag", d["ts"])

    def _consumer(self, g: GroupView, kind: str, o: dict) -> None:
        """A consumer-protocol group: members and their reconciliation from the per-member outputs."""
        if kind == ASSIGNMENT:
            g.member_states[o["member_id"]] = (int(o["member_epoch"]), o.get("state") or "STABLE")
        elif kind == TARGET_ASSIGNMENT:
            g.assignment_epoch = int(o["assignment_epoch"])
        elif kind == MEMBER_JOINED:
            g.member_states.setdefault(o["member_id"], (0, "STABLE"))
        elif kind == MEMBER_LEFT:
            if o.get("temporary"):
                g.member_states[o["member_id"]] = (-2, "STABLE")
            else:
                g.member_states.pop(o["member_id"], None)
        elif kind == MEMBER_REPLACED:
            g.member_states.pop(o.get("previous_member_id"), None)
            g.member_states.setdefault(o["member_id"], (0, "STABLE"))
        elif kind == REBALANCE:
            g.rebalances += 1
            g.generation = int(o.get("group_epoch", g.generation))
            g.protocol = f"consumer/{o.get('assignor') or '?'}"
            g.last_rebalance_ts = o.get("completed_ts") or o.get("ts")
            g.last_trigger = o.get("trigger") or ""
            g.last_duration_ms = o.get("duration_ms")
            g.last_moved = o.get("partitions_moved")
            members = len(o.get("members") or [])
            self._note(
                f"{o['group_id']}: epoch {g.generation} {'stable' if members else 'empty'} "
                f"({g.last_trigger}), {_members(members)}",
                g.last_rebalance_ts,
            )
        g.members = len(g.member_states)

    def set_waiting(self, text: str | None, resolved: str | None = None) -> None:
        """Say what the job waits for (None: nothing any more; ``resolved`` goes to the recent events)."""
        with self._lock:
            if text is None and self.waiting is not None and resolved:
                self._note(resolved)
            self.waiting = text

    def _note(self, text: str, ts: int | None = None) -> None:
        """A line of the recent events, dated by the output's own time (``ts``, as LAST REBALANCE is: in event
        time the wall clock says nothing of when it happened), else now (what the job itself noticed)."""
        self.recent.append(f"{clock(ts)} {text}")
        del self.recent[:-8]

    # -- drawing -------------------------------------------------------------------------------------------------
    HEADER = (
        "GROUP",
        "STATE",
        "GEN/EPOCH",
        "PROTOCOL",
        "MEMBERS",
        "REBALANCES",
        "LAST REBALANCE",
        "TRIGGER",
        "TOOK",
        "MOVED",
        "EXPIRED",
        "COMMITTED",
        "LAG",
    )
    NUMERIC = (2, 4, 5, 8, 9, 10, 11)

    def _picture(self, progress: dict | None) -> tuple[str, list[tuple[str, ...]], str | None, list[str]]:
        """(status line, table rows, "... more groups" line, recent events) — what both renderings show."""
        with self._lock:
            rows = []
            for g in sorted(self.groups.values(), key=lambda v: v.group_id)[: self.max_rows]:
                when = clock(g.last_rebalance_ts) if g.last_rebalance_ts else "-"
                # "-": no rebalance yet; "?": the outputs could not know how long it took (docs/figures.md).
                took = (
                    "-"
                    if not g.rebalances
                    else "?"
                    if g.last_duration_ms is None
                    else f"{g.last_duration_ms / 1000:.1f}s"
                )
                members = (
                    f"{g.members} ({g.reconciling} reconciling)" if g.consumer and g.reconciling else str(g.members)
                )
                rows.append(
                    (
                        g.group_id,
                        g.state,
                        f"e{g.generation}" if g.consumer else str(g.generation),
                        g.protocol or ("consumer" if g.consumer else "-"),
                        members,
                        str(g.rebalances),
                        when,
                        g.last_trigger or "-",
                        took,
                        "-" if not g.rebalances else "?" if g.last_moved is None else str(g.last_moved),
                        str(g.expired),
                        str(len(g.committed) or g.restored_committed),
                        _lag_cell(g.worst_lag),
                    )
                )
            more = (
                f"... and {len(self.groups) - self.max_rows} more groups" if len(self.groups) > self.max_rows else None
            )
            status = f"batch {self.last_batch_id}  groups {len(self.groups)}  dead letters {self.dead_letters}"
            if self.step_failures:
                status += f"  GROUP STEP FAILURES {self.step_failures}"
            if self.restored:
                status += f"  restored {self.restored} (gaps {self.restore_gaps})"
            if progress:
                status += (
                    f"  input {progress.get('inputRowsPerSecond', 0):.0f} ev/s"
                    f"  processed {progress.get('processedRowsPerSecond', 0):.0f} ev/s"
                    f"  batch took {progress.get('durationMs', {}).get('triggerExecution', 0)} ms"
                )
            if self.waiting:
                status = f"WAITING: {self.waiting}\n{status}"
            return status, rows, more, list(self.recent)

    def render(self, progress: dict | None = None) -> str:
        """The picture as plain text: what goes to a pipe or a log."""
        status, rows, more, recent = self._picture(progress)
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(self.HEADER)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(self.HEADER, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        if more:
            lines.append(more)
        lines = [status, ""] + lines
        if recent:
            lines += ["", "recent:"] + [f"  {r}" for r in recent]
        return "\n".join(lines)

    def renderable(self, progress: dict | None = None):
        """The picture for a terminal: a table between the status line and the recent events."""
        status, rows, more, recent = self._picture(progress)
        return terminal.stack(
            terminal.lines(status, style="bold"),
            terminal.table(self.HEADER, rows, right=self.NUMERIC, caption=more),
            terminal.lines("recent:", *(f"  {r}" for r in recent), style="dim") if recent else None,
        )

    def draw(self, progress: dict | None = None) -> None:
        """On a terminal: redraw the table in place. Elsewhere: append the picture as plain lines."""
        if self.redraw:
            if self._screen is None:
                self._screen = terminal.LiveScreen(self.out, width=self.width, con=self._console)
            self._screen.show(self.renderable(progress))
        else:
            self.out.write(self.render(progress) + "\n\n")
            self.out.flush()

    def close(self) -> None:
        """Leave the last picture on the screen and give the terminal back (cursor, stdout)."""
        if self._screen is not None:
            self._screen.close()
            self._screen = None
