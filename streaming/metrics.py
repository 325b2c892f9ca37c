"""Prometheus metrics of the running tracker, folded from coordinator outputs, served in the text format.

Names follow Prometheus conventions (``rebalance_tracker_`` prefix, ``_total`` counters, base units: seconds) and
mirror Kafka's coordinator metrics where they overlap: ``rebalance_tracker_groups{state}`` is Kafka's
``NumGroups{state}`` (NumGroupsStable, NumGroupsPreparingRebalance, ...); ``rebalances_total`` and the duration
histogram cover ``group-completed-rebalance-count/rate`` and ``group-rebalance-*-time``. Rates come from
``rate()`` in Prometheus rather than from the exporter.

Nothing here needs a Prometheus client library: the exposition format is a few lines of text.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable

PREFIX = "rebalance_tracker"
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)   # per bucket, not cumulative
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = self.counts or [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: dict[str, str]) -> list[str]:
        out, running = [], 0
        for bound, n in zip(self.bounds, self.counts):
            running += n
            out.append(f"{name}_bucket{_labels({**labels, 'le': _number(bound)})} {running}")
        out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {self.count}")
        out.append(f"{name}_sum{_labels(labels)} {_number(self.total)}")
        out.append(f"{name}_count{_labels(labels)} {self.count}")
        return out


@dataclass
class _Group:
    state: str = "Empty"
    generation: int = 0
    members: set[str] = field(default_factory=set)
    rebalances: int = 0
    triggers: dict[str, int] = field(default_factory=dict)
    expired: int = 0
    moved: int = 0
    durations: Histogram = field(default_factory=lambda: Histogram(REBALANCE_BUCKETS))


class Metrics:
    """Thread-safe: the streaming job updates it once per micro-batch while the HTTP thread reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, _Group] = {}
        self._dead_letters = 0
        self._batches = 0
        self._last_batch_id: int | None = None
        self._input_rows = 0
        self._batch_durations = Histogram(BATCH_BUCKETS)

    # ------------------------------------------------------------------ folding
    def update(self, batch_id: int, outputs: Iterable[dict], progress: dict | None = None) -> None:
        """Fold one micro-batch's outputs; ``progress`` is Spark's query progress (``durationMs``,
        ``numInputRows``) when the caller has it."""
        with self._lock:
            self._batches += 1
            self._last_batch_id = batch_id
            for o in outputs:
                self._fold(o)
            if progress:
                duration = (progress.get("durationMs") or {}).get("triggerExecution")
                if duration is not None:
                    self._batch_durations.observe(duration / 1000)
                self._input_rows += int(progress.get("numInputRows") or 0)

    def _fold(self, o: dict) -> None:
        kind = o.get("type")
        if kind == "dead_letter":
            self._dead_letters += 1
            return
        group_id = o.get("group_id")
        if not group_id:
            return
        g = self._groups.get(group_id)
        if g is None:
            g = self._groups[group_id] = _Group()
        if kind == "state_change":
            g.state = o["to"]
            g.generation = o.get("generation", g.generation)
            if g.state == "Dead":
                g.members.clear()
        elif kind == "member_joined":
            g.members.add(o["member_id"])
        elif kind in ("member_left", "member_expired"):
            g.members.discard(o["member_id"])
            g.expired += kind == "member_expired"
        elif kind == "member_replaced":
            g.members.discard(o.get("previous_member_id"))
            g.members.add(o["member_id"])
        elif kind == "group_metadata":
            if o.get("tombstone"):
                g.members.clear()
            else:   # the stored record is the authority on who is in the group
                g.members = {m["member_id"] for m in o.get("members", [])}
                g.generation = o.get("generation", g.generation)
        elif kind == "rebalance":
            g.rebalances += 1
            trigger = o.get("trigger") or "unknown"
            g.triggers[trigger] = g.triggers.get(trigger, 0) + 1
            g.moved += int(o.get("partitions_moved") or 0)
            g.durations.observe(int(o.get("duration_ms") or 0) / 1000)
            g.generation = o.get("generation", g.generation)

    # ------------------------------------------------------------------ exposition
    def render(self) -> str:
        with self._lock:
            groups = sorted(self._groups.items())
            lines: list[str] = []

            def family(name: str, kind: str, help_: str, samples: list[str]) -> None:
                lines.append(f"# HELP {PREFIX}_{name} {help_}")
                lines.append(f"# TYPE {PREFIX}_{name} {kind}")
                lines.extend(samples)

            def per_group(name: str, value) -> list[str]:
                return [f"{PREFIX}_{name}{_labels({'group': gid})} {_number(value(g))}" for gid, g in groups]

            family("groups", "gauge", "Number of groups in each state (Kafka's NumGroups{state}).",
                   [f"{PREFIX}_groups{_labels({'state': s})} {sum(1 for _, g in groups if g.state == s)}"
                    for s in STATES])
            family("group_state", "gauge", "1 for the state the group is in, 0 for the others.",
                   [f"{PREFIX}_group_state{_labels({'group': gid, 'state': s})} {int(g.state == s)}"
                    for gid, g in groups for s in STATES])
            family("group_members", "gauge", "Members of the group.",
                   per_group("group_members", lambda g: len(g.members)))
            family("group_generation", "gauge", "Current generation id of the group.",
                   per_group("group_generation", lambda g: g.generation))
            family("group_rebalances_total", "counter",
                   "Completed rebalances (Kafka's group-completed-rebalance-count).",
                   per_group("group_rebalances_total", lambda g: g.rebalances))
            family("group_rebalance_triggers_total", "counter", "Completed rebalances by what started them.",
                   [f"{PREFIX}_group_rebalance_triggers_total{_labels({'group': gid, 'trigger': t})} {n}"
                    for gid, g in groups for t, n in sorted(g.triggers.items())])
            lines.append(f"# HELP {PREFIX}_group_rebalance_duration_seconds Time from PreparingRebalance to Stable.")
            lines.append(f"# TYPE {PREFIX}_group_rebalance_duration_seconds histogram")
            for gid, g in groups:
                lines.extend(g.durations.lines(f"{PREFIX}_group_rebalance_duration_seconds", {"group": gid}))
            family("group_expired_members_total", "counter", "Members removed because their session or join expired.",
                   per_group("group_expired_members_total", lambda g: g.expired))
            family("group_partitions_moved_total", "counter", "Partitions that changed owner in a rebalance.",
                   per_group("group_partitions_moved_total", lambda g: g.moved))
            family("dead_lettered_events_total", "counter", "Input events rejected as invalid.",
                   [f"{PREFIX}_dead_lettered_events_total {self._dead_letters}"])
            family("batches_total", "counter", "Micro-batches processed.", [f"{PREFIX}_batches_total {self._batches}"])
            family("input_rows_total", "counter", "Input rows read, as reported by the streaming query.",
                   [f"{PREFIX}_input_rows_total {self._input_rows}"])
            if self._last_batch_id is not None:
                family("last_batch_id", "gauge", "Id of the last micro-batch processed.",
                       [f"{PREFIX}_last_batch_id {self._last_batch_id}"])
            lines.append(f"# HELP {PREFIX}_batch_duration_seconds Wall time of a micro-batch (trigger execution).")
            lines.append(f"# TYPE {PREFIX}_batch_duration_seconds histogram")
            lines.extend(self._batch_durations.lines(f"{PREFIX}_batch_duration_seconds", {}))
            return "\n".join(lines) + "\n"

    def serve(self, port: int = 0, host: str = "127.0.0.1") -> tuple[ThreadingHTTPServer, str]:
        return serve(port, host, metrics=self)


def serve(port: int = 0, host: str = "127.0.0.1", metrics: Metrics | None = None
          ) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``GET /metrics`` from a daemon thread (port 0 picks a free port); stop with ``server.shutdown()``.

    The server keeps its :class:`Metrics` as ``server.metrics``."""
    metrics = metrics if metrics is not None else Metrics()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = metrics.render().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # scrapes every few seconds would flood the console
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.metrics = metrics  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host}:{bound_port}/metrics"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


def _escape(value: str) -> str:
    """Label values escape backslash, double quote and newline (exposition format)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(value)
