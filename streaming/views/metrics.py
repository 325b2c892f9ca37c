"""Prometheus metrics of the running tracker, folded from coordinator outputs, served with ``prometheus_client``.

Names follow Prometheus conventions (``rebalance_tracker_`` prefix, ``_total`` counters, base units: seconds) and
mirror Kafka's coordinator metrics where they overlap: ``rebalance_tracker_groups{state}`` is Kafka's
``NumGroups{state}`` (NumGroupsStable, NumGroupsPreparingRebalance, ...); ``rebalances_total`` and the duration
histogram cover ``group-completed-rebalance-count/rate`` and ``group-rebalance-*-time``. Rates come from
``rate()`` in Prometheus rather than from the exporter. The standard ``process_*``, ``python_*`` collectors are
served alongside.

Consumer-protocol (KIP-848) groups are counted in ``groups{state}`` under their own states (Empty, Assigning,
Reconciling, Stable, Dead) and have, instead of a generation, ``group_epoch``, ``group_assignment_epoch`` and
``group_reconciling_members`` (members not yet Stable on the current target assignment, Kafka's
``ConsumerGroupDescribe`` member states); a completed rebalance is a return to Stable (or to Empty). A group that
switches protocol (``protocol_switch``) takes the other protocol's series; through Kafka 4.x's online upgrade and
downgrade its members stay counted (the upgrade's GroupMetadata tombstone removes nobody).

The rebalance figures are the coordinator's, as its ``rebalance`` records carry them (docs/figures.md):
``group_rebalance_duration_seconds`` and ``group_partition_unavailability_seconds`` (each partition a rebalance
gave a new owner: how long it had none while the group had members). A figure the records leave unknown (a cluster
followed from its ``__consumer_offsets`` records) is not observed, so a histogram's ``_count`` may stay below
``group_rebalances_total``.

After a lost checkpoint, ``groups_restored_total`` counts the groups rebuilt from the store and
``restore_gaps_total`` those whose feed then showed what the store did not hold (``streaming/coordinator/restored.py``).

Lag (streaming/coordinator/lag.py, docs/lag.md), at the last log-end sample: per group its worst partition,
``group_lag_records`` and ``group_lag_seconds``; per partition ``partition_lag_records`` and
``partition_lag_seconds``, for at most ``max_partition_series`` partitions in all (the furthest behind in seconds,
then records), so that the series stay bounded however many partitions the groups hold. Each rebalance's lag cost,
once its new owners have committed: ``group_rebalance_lag_records_total`` and the histogram
``group_rebalance_lag_seconds``.

This module is the one place that knows ``prometheus_client``: the rest of the tracker calls
:meth:`Metrics.update` once per micro-batch and :func:`serve` once.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    start_http_server,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from streaming.coordinator.figures import spans_of
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
    PROTOCOL_SWITCH,
    REBALANCE,
    RESTORE_GAP,
    STATE_CHANGE,
    TARGET_ASSIGNMENT,
)
from streaming.dead_letters import is_step_failure

PREFIX = "rebalance_tracker"
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
ALL_STATES = tuple(dict.fromkeys(STATES + CONSUMER_STATES))
REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


@dataclass
class _Group:
    """What the fold needs to remember of a group between outputs (the counters live in the instruments)."""

    state: str = "Empty"
    generation: int = 0
    members: set[str] = field(default_factory=set)
    consumer: bool = False  # a consumer-protocol (KIP-848) group
    assignment_epoch: int = 0
    member_states: dict[str, tuple[int, str]] = field(default_factory=dict)  # member -> (epoch, state)
    upgrading: bool = False  # an online upgrade's classic tombstone is next: its members stay

    @property
    def reconciling(self) -> int:
        """Members still on their way to the target assignment (a static member away with epoch -2 is not)."""
        return sum(
            1
            for m in self.members
            if (st := self.member_states.get(m)) is not None
            and st[0] >= 0
            and (st[1] != "STABLE" or st[0] < self.assignment_epoch)
        )


class Metrics:
    """Thread-safe: the streaming job updates it once per micro-batch while the HTTP thread reads it. A scrape sees
    whole micro-batches: collection takes the same lock as :meth:`update`."""

    def __init__(self, max_partition_series: int = 500) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, _Group] = {}
        self._lag = LagBook()
        self.max_partition_series = max_partition_series
        self._last_batch_id: int | None = None

        def name(n: str) -> str:
            return f"{PREFIX}_{n}"

        # Instruments belong to no registry of their own: the registry below collects them under the lock.
        self.groups = Gauge(
            name("groups"), "Number of groups in each state (Kafka's NumGroups{state}).", ["state"], registry=None
        )
        self.group_state = Gauge(
            name("group_state"), "1 for the state the group is in, 0 for the others.", ["group", "state"], registry=None
        )
        self.group_members = Gauge(name("group_members"), "Members of the group.", ["group"], registry=None)
        self.group_generation = Gauge(
            name("group_generation"), "Current generation id of the group.", ["group"], registry=None
        )
        self.group_epoch = Gauge(
            name("group_epoch"), "Group epoch of a consumer-protocol (KIP-848) group.", ["group"], registry=None
        )
        self.group_assignment_epoch = Gauge(
            name("group_assignment_epoch"),
            "Epoch of the target assignment of a consumer-protocol group.",
            ["group"],
            registry=None,
        )
        self.group_reconciling = Gauge(
            name("group_reconciling_members"),
            "Members of a consumer-protocol group not yet Stable on its target assignment.",
            ["group"],
            registry=None,
        )
        self.rebalances = Counter(
            name("group_rebalances"),
            "Completed rebalances (Kafka's group-completed-rebalance-count).",
            ["group"],
            registry=None,
        )
        self.triggers = Counter(
            name("group_rebalance_triggers"),
            "Completed rebalances by what started them.",
            ["group", "trigger"],
            registry=None,
        )
        self.rebalance_duration = Histogram(
            name("group_rebalance_duration_seconds"),
            "Time from a rebalance's start to the group settled again (Stable or "
            "Empty); unknown durations are not observed.",
            ["group"],
            buckets=REBALANCE_BUCKETS,
            registry=None,
        )
        self.unavailability = Histogram(
            name("group_partition_unavailability_seconds"),
            "Per partition a rebalance gave a new owner: how long it had none while its "
            "group had members (docs/figures.md); unknown ones are not observed.",
            ["group"],
            buckets=REBALANCE_BUCKETS,
            registry=None,
        )
        self.expired = Counter(
            name("group_expired_members"),
            "Members removed because their session or join expired.",
            ["group"],
            registry=None,
        )
        self.moved = Counter(
            name("group_partitions_moved"), "Partitions that changed owner in a rebalance.", ["group"], registry=None
        )
        self.dead_letters = Counter(name("dead_lettered_events"), "Input events rejected as invalid.", registry=None)
        self.step_failures = Counter(
            name("group_step_failures"),
            "Micro-batch steps of a group that raised: its events were dead-lettered with "
            "the exception and the group kept its state (every other group went on).",
            ["group"],
            registry=None,
        )
        self.restored = Counter(
            name("groups_restored"), "Groups rebuilt from the store after a lost checkpoint.", registry=None
        )
        self.restore_gaps = Counter(
            name("restore_gaps"),
            "Restored groups whose feed showed what the store did not hold (restore_gap outputs).",
            registry=None,
        )
        self.group_lag_records = Gauge(
            name("group_lag_records"),
            "Lag in records of the group's partition furthest behind, at the last log-end sample.",
            ["group"],
            registry=None,
        )
        self.group_lag_seconds = Gauge(
            name("group_lag_seconds"),
            "Age of the oldest unconsumed record over the "
            "group's partitions, at the last log-end sample (interpolated from the "
            "samples).",
            ["group"],
            registry=None,
        )
        self.partition_lag_records = Gauge(
            name("partition_lag_records"),
            "Log end - committed offset, for the partitions furthest behind (bounded in number).",
            ["group", "topic", "partition"],
            registry=None,
        )
        self.partition_lag_seconds = Gauge(
            name("partition_lag_seconds"),
            "Age of the partition's oldest unconsumed record, for the partitions furthest behind (bounded in number).",
            ["group", "topic", "partition"],
            registry=None,
        )
        self.rebalance_lag_records = Counter(
            name("group_rebalance_lag_records"),
            "Records of lag built by rebalances, from each partition's release to its new owner's first commit.",
            ["group"],
            registry=None,
        )
        self.rebalance_lag_seconds = Histogram(
            name("group_rebalance_lag_seconds"),
            "Per rebalance, the most seconds of lag a partition it left without "
            "an owner built until its new owner's first commit.",
            ["group"],
            buckets=REBALANCE_BUCKETS,
            registry=None,
        )
        self.batches = Counter(name("batches"), "Micro-batches processed.", registry=None)
        self.input_rows = Counter(
            name("input_rows"), "Input rows read, as reported by the streaming query.", registry=None
        )
        self.last_batch_id = Gauge(name("last_batch_id"), "Id of the last micro-batch processed.", registry=None)
        self.batch_duration = Histogram(
            name("batch_duration_seconds"),
            "Wall time of a micro-batch (trigger execution).",
            buckets=BATCH_BUCKETS,
            registry=None,
        )

        self.registry = CollectorRegistry()
        self.registry.register(_Snapshot(self))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    # ------------------------------------------------------------------ folding
    def update(self, batch_id: int, outputs: Iterable[dict], progress: dict | None = None) -> None:
        """Fold one micro-batch's outputs; ``progress`` is Spark's query progress (``durationMs``,
        ``numInputRows``) when the caller has it."""
        with self._lock:
            self.batches.inc()
            self._last_batch_id = batch_id
            self.last_batch_id.set(batch_id)
            outputs = list(outputs)
            for o in outputs:
                self._fold(o)
            for group_id in sorted({o.get("group_id") or "" for o in outputs if is_step_failure(o)}):
                self.step_failures.labels(group_id).inc()  # one a group and batch, however many events it had
            if progress:
                duration = (progress.get("durationMs") or {}).get("triggerExecution")
                if duration is not None:
                    self.batch_duration.observe(duration / 1000)
                self.input_rows.inc(int(progress.get("numInputRows") or 0))
            self._set_gauges()

    def _group(self, group_id: str) -> _Group:
        g = self._groups.get(group_id)
        if g is None:
            g = self._groups[group_id] = _Group()
            for counter in (self.rebalances, self.expired, self.moved, self.rebalance_duration, self.unavailability):
                counter.labels(group_id)  # every group shows every per-group series, at 0 until it happens
        return g

    def _fold(self, o: dict) -> None:
        kind = o.get("type")
        if kind == DEAD_LETTER:
            self.dead_letters.inc()
            return
        group_id = o.get("group_id")
        if not group_id:
            return
        for derived in self._lag.add(o):
            if derived["type"] == REBALANCE_LAG:
                if derived["lag_records"] is not None:
                    self.rebalance_lag_records.labels(group_id).inc(derived["lag_records"])
                if derived["lag_seconds"] is not None:
                    self.rebalance_lag_seconds.labels(group_id).observe(derived["lag_seconds"])
        if kind in (PARTITION_LAG, "log_end"):
            return
        g = self._group(group_id)
        if kind.endswith("_response"):  # nothing counted here (and a consumer one may follow a downgrade)
            return
        if "group_epoch" in o or "instance_id" in o or kind == TARGET_ASSIGNMENT:
            g.consumer = True
        if kind == PROTOCOL_SWITCH:
            self._switch(group_id, g, o)
        elif kind == GROUP_RESTORED:
            self.restored.inc()
            g.state, g.generation = o["state"], o.get("generation", o.get("group_epoch", g.generation))
            g.assignment_epoch = o.get("assignment_epoch", g.assignment_epoch)
            g.members = set(o.get("members") or [])
            if g.consumer:
                g.member_states = {m: (g.generation, "STABLE") for m in g.members}
        elif kind == RESTORE_GAP:
            self.restore_gaps.inc()
        elif kind == STATE_CHANGE:
            g.state = o["to"]
            g.generation = o.get("generation", o.get("group_epoch", g.generation))
            g.assignment_epoch = o.get("assignment_epoch", g.assignment_epoch)
            if g.state == "Dead":
                g.members.clear()
        elif kind == ASSIGNMENT and "member_epoch" in o:
            g.member_states[o["member_id"]] = (int(o["member_epoch"]), o.get("state") or "STABLE")
        elif kind == TARGET_ASSIGNMENT:
            g.assignment_epoch = int(o["assignment_epoch"])
        elif kind == MEMBER_LEFT and o.get("temporary"):
            g.member_states[o["member_id"]] = (-2, "STABLE")  # away, holding its partitions
        elif kind == MEMBER_JOINED:
            g.members.add(o["member_id"])
        elif kind in (MEMBER_LEFT, MEMBER_EXPIRED):
            g.members.discard(o["member_id"])
            g.member_states.pop(o["member_id"], None)
            if kind == MEMBER_EXPIRED:
                self.expired.labels(group_id).inc()
        elif kind == MEMBER_REPLACED:
            g.members.discard(o.get("previous_member_id"))
            g.member_states.pop(o.get("previous_member_id"), None)
            g.members.add(o["member_id"])
        elif kind == GROUP_METADATA:
            if o.get("tombstone") and g.upgrading:
                g.upgrading = False
            elif o.get("tombstone"):
                g.members.clear()
            else:  # the stored record is the authority on who is in the group
                g.members = {m["member_id"] for m in o.get("members", [])}
                g.generation = o.get("generation", g.generation)
        elif kind == REBALANCE:
            self.rebalances.labels(group_id).inc()
            self.triggers.labels(group_id, o.get("trigger") or "unknown").inc()
            if o.get("partitions_moved") is not None:
                self.moved.labels(group_id).inc(int(o["partitions_moved"]))
            if o.get("duration_ms") is not None:
                self.rebalance_duration.labels(group_id).observe(int(o["duration_ms"]) / 1000)
            for span in spans_of(o):
                if span.unavailable_ms is not None:
                    self.unavailability.labels(group_id).observe(span.unavailable_ms / 1000)
            g.generation = o.get("generation", o.get("group_epoch", g.generation))
            if g.consumer:  # Stable again: the record names every member
                g.members = {m["member_id"] for m in o.get("members", [])}

    def _switch(self, group_id: str, g: _Group, o: dict) -> None:
        """The group now speaks the other protocol: its gauges are that protocol's (the other's series go)."""
        online = (o.get("reason") or "").startswith(("upgrade:", "downgrade:"))
        g.consumer, g.member_states = o.get("to") == "consumer", {}
        g.upgrading = online and g.consumer
        for gauge in (
            (self.group_generation,)
            if g.consumer
            else (self.group_epoch, self.group_assignment_epoch, self.group_reconciling)
        ):
            with contextlib.suppress(KeyError):
                gauge.remove(group_id)

    def _set_gauges(self) -> None:
        for state in ALL_STATES:
            self.groups.labels(state).set(sum(1 for g in self._groups.values() if g.state == state))
        for group_id, g in self._groups.items():
            for state in CONSUMER_STATES if g.consumer else STATES:
                self.group_state.labels(group_id, state).set(int(g.state == state))
            self.group_members.labels(group_id).set(len(g.members))
            if g.consumer:
                self.group_epoch.labels(group_id).set(g.generation)
                self.group_assignment_epoch.labels(group_id).set(g.assignment_epoch)
                self.group_reconciling.labels(group_id).set(g.reconciling)
            else:
                self.group_generation.labels(group_id).set(g.generation)
        self._set_lag_gauges()

    def _set_lag_gauges(self) -> None:
        figures = [
            f
            for group_id in sorted(self._lag.latest)
            for f in self._lag.current(group_id)
            if f["lag_records"] is not None
        ]
        for group_id in sorted({f["group_id"] for f in figures}):
            mine = [f for f in figures if f["group_id"] == group_id]
            self.group_lag_records.labels(group_id).set(max(f["lag_records"] for f in mine))
            self.group_lag_seconds.labels(group_id).set(max(f["lag_seconds"] for f in mine))
        self.partition_lag_records.clear()  # only the partitions furthest behind now: bounded series
        self.partition_lag_seconds.clear()
        worst = sorted(
            figures, key=lambda f: (-f["lag_seconds"], -f["lag_records"], f["group_id"], f["topic"], f["partition"])
        )[: self.max_partition_series]
        for f in worst:
            labels = (f["group_id"], f["topic"], str(f["partition"]))
            self.partition_lag_records.labels(*labels).set(f["lag_records"])
            self.partition_lag_seconds.labels(*labels).set(f["lag_seconds"])

    def _collect(self):
        with self._lock:
            instruments = [
                self.groups,
                self.group_state,
                self.group_members,
                self.group_generation,
                self.group_epoch,
                self.group_assignment_epoch,
                self.group_reconciling,
                self.rebalances,
                self.triggers,
                self.rebalance_duration,
                self.unavailability,
                self.expired,
                self.moved,
                self.group_lag_records,
                self.group_lag_seconds,
                self.partition_lag_records,
                self.partition_lag_seconds,
                self.rebalance_lag_records,
                self.rebalance_lag_seconds,
                self.dead_letters,
                self.step_failures,
                self.restored,
                self.restore_gaps,
                self.batches,
                self.input_rows,
                self.batch_duration,
            ]
            if self._last_batch_id is not None:
                instruments.append(self.last_batch_id)
            families = [family for instrument in instruments for family in instrument.collect()]
        for family in families:  # fresh objects per collect; the per-child *_created series would double each
            family.samples = [x for x in family.samples if not x.name.endswith("_created")]  # group's series
        return families

    # ------------------------------------------------------------------ exposition
    def render(self) -> str:
        """The scrape, in Prometheus' text format."""
        return generate_latest(self.registry).decode("utf-8")

    def serve(self, port: int = 0, host: str = "127.0.0.1"):
        return serve(port, host, metrics=self)


class _Snapshot:
    """A collector over the tracker's instruments that reads them all under the fold's lock."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self):
        return self._metrics._collect()


def serve(port: int = 0, host: str = "127.0.0.1", metrics: Metrics | None = None):
    """Serve the scrape (``GET /metrics``) from a daemon thread on loopback unless ``host`` says otherwise (port 0
    picks a free port). Returns ``(server, url)``; stop with ``server.shutdown()``; the server keeps its
    :class:`Metrics` as ``server.metrics``."""
    metrics = metrics if metrics is not None else Metrics()
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    server.metrics = metrics  # type: ignore[attr-defined]
    bound_host, bound_port = server.server_address[:2]
    url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    return server, f"http://{url_host}:{bound_port}/metrics"
