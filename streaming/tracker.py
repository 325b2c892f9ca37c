"""The tracker as a library: its settings (``TrackerConfig``), what must hold before Spark starts (``preflight``),
starting the streaming query (``start_tracker``, returning a ``RunningTracker``) and watching it (``watch``).

The ``run`` and ``demo`` commands (``streaming/cli/``), the tests and the benchmarks start the tracker through this
module. Every default is written once: the job's in ``streaming.spark.options.JobOptions``, the tracker's own in
``TrackerConfig``, and the ``run`` command shows them from there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from streaming.kafka_client import kafka_conf
from streaming.kafka_client.topics import TopicsMissing, ensure_topics
from offsets_store.factory import DEFAULT_STORE
from streaming.feeds.log_end_sampler import LOG_END_SAMPLE_S, LogEndSampler
from streaming.feeds.metadata_watch import TopicMetadataWatcher
from streaming.spark.options import JobOptions
from streaming.spark.sinks import TrackerSink
from streaming.views.live_view import LiveView

__all__ = [
    "TrackerConfig",
    "RunningTracker",
    "TopicsMissing",
    "QueryFailed",
    "ensure_topics",
    "preflight",
    "check_checkpoint",
    "start_tracker",
    "stop_on_signals",
    "watch",
]

log = logging.getLogger(__name__)


@dataclass
class TrackerConfig:
    """Everything the tracker is started with. Each default here is the one place it is written: the ``run`` command
    and the other commands that name the tracker's topics or store take theirs from this class; the job's settings
    default to those of ``JobOptions``."""

    bootstrap: str
    events_topic: str = "rebalance-events"
    outputs_topic: str | None = "rebalance-assignments"  # assignments, rebalances and state changes; None: none
    dlq_topic: str | None = None  # default: "<events_topic>.dlq"
    store: str | None = DEFAULT_STORE  # sqlite:PATH or kafka:BOOTSTRAP/TOPIC; None: none
    checkpoint: str = "data/checkpoint"
    trigger: str = "1 second"  # the micro-batch interval, as Spark reads it
    time_mode: str = JobOptions.time_mode  # streaming.spark.options.TIME_MODES
    watermark_delay: str = JobOptions.watermark_delay  # event mode: how late an event may arrive
    timeout_grace_ms: int = JobOptions.timeout_grace_ms  # processing mode: how far timers run behind the clock
    state_key: str = JobOptions.state_key  # streaming.spark.options.STATE_KEYS
    max_event_ahead_ms: int = JobOptions.max_event_ahead_ms  # events stamped further ahead are dead-lettered
    # What reads the events (streaming.spark.kafka_source.SOURCES). auto: Spark's connector where it is loaded and the
    # broker can be read by it, which took ~25% less CPU an event than the Python source in benchmarks/streaming.py.
    kafka_source: str = "auto"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    coordinator: dict = field(default_factory=dict)  # coordinator settings under Kafka's names
    events_partitions: int = 4  # the events topic's partitions, when the tracker creates it
    metadata_refresh_s: float = 30.0  # how often topic sizes are checked against the broker
    # How often the groups' log ends are sampled for lag (docs/lag.md), in seconds; 0: never; None: the default,
    # see log_end_interval_s.
    log_end_sample_s: float | None = None
    metrics_port: int | None = None  # serve Prometheus metrics on this port (0 = any free port)
    kafka: dict = field(default_factory=dict)  # Kafka client settings under Kafka's names (kafka_client.kafka_conf)
    broker_version: tuple | None = None  # the clients' API version with the broker (None: found by preflight)
    stage_times: object = None  # a streaming.spark.stage_times accumulator (benchmarks)

    def log_end_interval_s(self) -> float | None:
        """How often the sampler runs (None: it does not). By default every ``LOG_END_SAMPLE_S`` in processing time,
        and never in event time: a sample carries the wall clock, which is not a replayed feed's time, and in event
        time it would move the watermark past the feed and expire its members. Asked for, it runs in either."""
        if self.log_end_sample_s is None:
            return LOG_END_SAMPLE_S if self.time_mode == "processing" else None
        return self.log_end_sample_s or None


@dataclass
class RunningTracker:
    query: object
    sink: TrackerSink
    view: LiveView
    store: object
    watcher: TopicMetadataWatcher | None = None
    metrics_server: object = None
    metrics_url: str | None = None
    sampler: LogEndSampler | None = None
    source: str = ""  # what reads the events (kafka_source.SOURCES, auto resolved)
    source_reason: str = ""  # why, in words

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop between micro-batches when possible: interrupting one mid-flight only spills stack traces (its
        outputs would be redone on restart anyway)."""
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(Exception):
            from pyspark import SparkContext

            context = SparkContext._active_spark_context
            context.setLogLevel("ERROR")  # Spark warns about the jobs it cancels
            # When the JVM goes (it follows the driver out), PySpark's accumulator server may still be reading
            # from it and print an EOFError traceback; on the way out that is no error.
            context._accumulatorServer.handle_error = lambda request, client_address: None
        with contextlib.suppress(Exception):
            while self.query.isActive and self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.05)
            self.query.stop()
        if self.watcher is not None:
            self.watcher.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        self.sink.close()
        if self.store is not None:
            self.store.close()


def preflight(config: "TrackerConfig") -> tuple[int, ...]:
    """What must hold before Spark starts: a broker that answers, the tracker's topics there (created if missing and
    the broker can), a Kafka store on a broker that can keep it. Returns the API version the clients use with the
    broker (record headers need 0.11). Raises ``BrokerUnavailable`` or ``TopicsMissing``, each one line."""
    from streaming.kafka_client import broker_features

    client = kafka_conf.to_kwargs(config.kafka)
    version = broker_features.api_version(config.bootstrap, client)
    ensure_topics(
        config.bootstrap,
        {
            config.events_topic: config.events_partitions,
            config.outputs_topic or "": 1,
            config.dlq_topic or f"{config.events_topic}.dlq": 1,
        },
        client,
        can_create=broker_features.can_create_topics(version),
    )
    if config.store and config.store.startswith("kafka:"):
        store_bootstrap = config.store[len("kafka:") :].partition("?")[0].rpartition("/")[0]
        store_version = broker_features.api_version(store_bootstrap, client)
        if not broker_features.can_create_topics(store_version):
            raise TopicsMissing(
                f"the Kafka store needs a broker from Kafka 0.10.1 on (its admin client); the one at "
                f"{store_bootstrap} speaks {broker_features.version_text(store_version)}: "
                f"keep the store on another cluster, or use --store sqlite:PATH"
            )
    return version


def start_tracker(spark, config: TrackerConfig, view: LiveView | None = None) -> RunningTracker:
    """Start the streaming query; returns handles to stop it and to read what it produced."""
    from streaming.spark.job import build_tracker_stream
    from streaming.spark.kafka_source import builtin_kafka_available, choose_source, cluster_id, read_kafka_stream

    from streaming.kafka_client.broker_features import has_headers

    check_checkpoint(config)  # first, before anything starts
    query_checkpoint = os.path.join(config.checkpoint, "query")
    dlq_topic = config.dlq_topic or f"{config.events_topic}.dlq"
    client = kafka_conf.to_kwargs(config.kafka)  # the Python clients' view of the same settings
    version = config.broker_version or preflight(config)
    source, source_reason = choose_source(
        config.kafka_source,
        config.kafka_source == "auto" and builtin_kafka_available(spark),
        lambda: cluster_id(config.bootstrap, client),
        version,
        secured=str(client.get("security_protocol") or "PLAINTEXT").upper() != "PLAINTEXT",
    )
    store = None
    if config.store:
        from offsets_store import open_store

        if config.store.startswith("sqlite:"):
            os.makedirs(os.path.dirname(os.path.abspath(config.store[len("sqlite:") :])), exist_ok=True)
        store = open_store(config.store, client)
    view = view or LiveView()
    watcher = TopicMetadataWatcher(
        config.bootstrap, config.events_topic, config.metadata_refresh_s, client, event_time=config.time_mode == "event"
    ).start()
    sample_s = config.log_end_interval_s()
    sampler = LogEndSampler(config.bootstrap, config.events_topic, sample_s, client).start() if sample_s else None

    metrics_server = metrics_url = None
    if config.metrics_port is not None:
        from streaming.views.metrics import serve

        metrics_server, metrics_url = serve(config.metrics_port)
    running: list = []  # the query, once started: its last progress feeds the batch-duration metric

    def on_outputs(batch_id: int, outputs: list[dict]) -> None:
        # Nothing here may stop the job: the watcher, the sampler and the views only read the outputs; one that
        # cannot read one says so and the job carries on (the outputs are already written).
        try:
            watcher.observe(outputs)
            if sampler is not None:
                sampler.observe(outputs)
            view.update(batch_id, outputs)
            if metrics_server is not None:
                metrics_server.metrics.update(batch_id, outputs, running[0].lastProgress if running else None)
        except Exception:
            log.exception("the watchers, live table or metrics could not take batch %s; the job goes on", batch_id)

    sink = TrackerSink(
        store=store,
        bootstrap=config.bootstrap,
        events_topic=config.events_topic,
        outputs_topic=config.outputs_topic,
        dlq_topic=dlq_topic,
        checkpoint=config.checkpoint,
        on_outputs=on_outputs,
        producer_config=client,
        # librdkafka writes when it reads, and beside Spark's connector (whose brokers are 0.10 and
        # later, which librdkafka speaks): kafka-python's send was most of the sink's time.
        producer_client="confluent" if source in ("confluent", "builtin") else "kafka-python",
        record_headers=has_headers(version),
    )
    if config.stage_times is not None:
        _time_sink(sink, config.stage_times)
    restore, starting_offsets = _prepare_restore(spark, config, store, query_checkpoint)
    raw = read_kafka_stream(
        spark,
        config.bootstrap,
        [config.events_topic],
        starting_offsets=starting_offsets,
        max_offsets_per_trigger=config.max_offsets_per_trigger,
        source=source,
        extra_options=kafka_conf.spark_options(config.kafka),
    )
    options = JobOptions(
        time_mode=config.time_mode,
        watermark_delay=config.watermark_delay,
        timeout_grace_ms=config.timeout_grace_ms,
        coordinator=config.coordinator,
        max_event_ahead_ms=config.max_event_ahead_ms,
        stage_times=config.stage_times,
        state_key=config.state_key,
    )
    outputs = build_tracker_stream(raw, options, restore)
    writer = (
        outputs.writeStream.queryName("rebalance-tracker")
        .option("checkpointLocation", query_checkpoint)
        .trigger(processingTime=config.trigger)
        .foreachBatch(sink)
    )
    query = _start_query(writer)
    running.append(query)
    return RunningTracker(
        query, sink, view, store, watcher, metrics_server, metrics_url, sampler, source, source_reason
    )


def check_checkpoint(config: TrackerConfig) -> None:
    """Refuse to restart a checkpoint under settings its state was not built with (another keying would lose every
    group's state); record them on its first start. Raises ``CheckpointSettingsChanged``."""
    from streaming.coordinator.routing import Configs
    from streaming.spark.checkpoint_settings import check_and_record, job_settings
    from streaming.spark.restore import is_fresh

    partitions = Configs.from_properties(config.coordinator).classic.offsets_topic_num_partitions
    check_and_record(
        config.checkpoint,
        is_fresh(os.path.join(config.checkpoint, "query")),
        job_settings(config.state_key, config.time_mode, partitions),
    )


STARTS = 3  # tries to get a query past its start (see _start_query)


def _start_query(writer):
    """Start the query and wait until its sources are up. Spark gives the Python worker that runs a Python source
    a fixed 10 s to connect back; on a loaded machine it can miss that and the query dies before planning anything:
    start it again then (nothing was read or written yet, so this is safe)."""
    for attempt in range(1, STARTS + 1):
        query = writer.start()
        deadline = time.monotonic() + 120  # a bound: on an idle machine the sources are up in ~1 s
        while (
            query.isActive
            and str(query.status.get("message", "")).startswith("Initializing")
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        error = None if query.isActive else query.exception()
        if error is None or "failed to connect back" not in str(error) or attempt == STARTS:
            return query
        log.warning(
            "Spark's Python worker for the Kafka source did not start in time (a loaded machine?); "
            "starting the query again (%d/%d)",
            attempt + 1,
            STARTS,
        )
    return query


def _time_sink(sink: TrackerSink, stage_times) -> None:
    """Time the sink's own work (store, producer, live view), not the batch's computation its toArrow() runs."""
    from streaming.spark.stage_times import timed

    handle = sink.handle

    def timed_handle(outputs: list[dict], batch_id: int) -> None:
        with timed(stage_times, "sink (driver)", len(outputs)):
            handle(outputs, batch_id)

    sink.handle = timed_handle


def _prepare_restore(spark, config: TrackerConfig, store, query_checkpoint: str) -> tuple[object, str]:
    """On a fresh checkpoint: a new batch lineage for the sinks, the store's groups rebuilt for the job and the feed
    read from where the lost checkpoint stopped (streaming/spark/restore.py). What that skips is said, with counts: a
    fresh checkpoint on an existing store does not read the feed from its start. Returns the restore source (kept on
    later restarts, so the query's plan stays the same) and where reading starts."""
    starting_offsets = config.starting_offsets
    import shutil

    from streaming.coordinator.routing import Configs
    from streaming.spark.restore import (
        feed_time,
        group_states,
        is_fresh,
        load_time,
        restore_dir,
        restore_stream,
        stored_position,
        write_restore_rows,
    )

    directory = restore_dir(config.checkpoint)
    if is_fresh(query_checkpoint):
        shutil.rmtree(directory, ignore_errors=True)  # a start that never got going
        (Path(config.checkpoint) / "sinks" / "kafka-outputs.batch").unlink(missing_ok=True)
        if store is not None:
            store.start_new_lineage()
            records = store.load_records()
            position = stored_position(records, config.events_topic)
            if position is not None:  # carry on where the lost checkpoint stopped, not from the feed's start
                starting_offsets = position
            if records:
                event_time = config.time_mode == "event"
                feed_ms = (
                    feed_time(
                        config.bootstrap,
                        config.events_topic,
                        json.loads(position)[config.events_topic],
                        kafka_conf.to_kwargs(config.kafka),
                    )
                    if event_time and position is not None
                    else None
                )
                ts = load_time(records, event_time, int(time.time() * 1000), feed_ms)
                states = group_states(records, ts, Configs.from_properties(config.coordinator))
                count = write_restore_rows(directory, states, ts)
                print(f"fresh checkpoint: {count} groups rebuilt from the store {config.store}", flush=True)
                print(_skip_notice(config, position, count), flush=True)
    return (restore_stream(spark, directory) if directory.is_dir() else None), starting_offsets


def _skip_notice(config: TrackerConfig, position: str | None, groups: int) -> str:
    """What a fresh checkpoint on a store that holds groups does with the feed, with counts."""
    extent = feed_extent(config.bootstrap, config.events_topic, kafka_conf.to_kwargs(config.kafka))
    total = sum(end - start for start, end in extent.values())
    if position is None:
        return (
            f"  the store holds no position on {config.events_topic}: reading its {total} events from "
            f"{config.starting_offsets} on top of the {groups} rebuilt groups (events the store already holds "
            f"are applied again)"
        )
    offsets = {int(p): o for p, o in json.loads(position)[config.events_topic].items()}
    skipped = sum(max(o - extent.get(p, (0, 0))[0], 0) for p, o in offsets.items())
    at = ", ".join(f"partition {p} at {o}" for p, o in sorted(offsets.items()))
    return (
        f"  skipping {skipped} of the {total} events on {config.events_topic}: the store already holds the "
        f"feed up to {at}, where an earlier run on another checkpoint stopped (its outputs are not written "
        f"again); to track the feed from its start, give a new --store"
    )


def feed_extent(bootstrap: str, topic: str, client: dict | None = None) -> dict[int, tuple[int, int]]:
    """partition -> (first offset, end offset) of a topic; empty when it cannot be read."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    from streaming.kafka_client.log_end import log_end_offsets

    try:
        consumer = KafkaConsumer(
            **kafka_conf.for_client(
                KafkaConsumer,
                client,
                bootstrap_servers=bootstrap,
                enable_auto_commit=False,
                client_id="rebalance-tracker-admin",
            )
        )
    except KafkaError:
        return {}
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        if not tps:
            return {}
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        starts = {tp.partition: consumer.position(tp) for tp in tps}
        ends = log_end_offsets(consumer, tps)
        return {tp.partition: (starts[tp.partition], ends[tp]) for tp in tps}
    except KafkaError:
        return {}
    finally:
        consumer.close()


def stop_on_signals() -> threading.Event:
    """Ctrl-C / SIGTERM set an event instead of raising inside whatever py4j call is running (PySpark's own SIGINT
    handler calls into the JVM re-entrantly and spills tracebacks); ``watch`` sees the event and returns."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def watch(
    tracker: RunningTracker,
    duration_s: float | None = None,
    refresh_s: float = 1.0,
    stop: threading.Event | None = None,
) -> None:
    """Redraw the live table until ``stop`` is set (Ctrl-C), the duration ends, or the query fails."""
    started = time.monotonic()
    drawn_batch = None
    moved = time.monotonic()  # when a micro-batch last completed
    lost_since = None  # wall time the broker was found gone
    drawn_at = 0.0
    try:
        while tracker.query.isActive and not (stop is not None and stop.is_set()):
            if duration_s is not None and time.monotonic() - started >= duration_s:
                break
            try:
                tracker.query.awaitTermination(refresh_s)
            except Exception:  # the query stopped with an error: said below, from query.exception()
                if tracker.query.isActive:
                    raise
                break
            redraw = tracker.view.last_batch_id != drawn_batch
            if redraw:
                drawn_batch, moved = tracker.view.last_batch_id, time.monotonic()
            if tracker.sink.bootstrap and (lost_since is not None or time.monotonic() - moved > STALL_S):
                lost_since, changed = _check_broker(tracker, lost_since)
                # While waiting: a terminal's table counts the seconds; a log gets the picture every 10 s.
                redraw = (
                    redraw
                    or changed
                    or (lost_since is not None and (tracker.view.redraw or time.monotonic() - drawn_at >= 10))
                )
            # A terminal is repainted every tick, so log lines written between batches do not stay on it.
            if redraw or tracker.view.redraw:
                tracker.view.draw(tracker.query.lastProgress)
                drawn_at = time.monotonic()
    finally:
        tracker.view.close()  # the last table stays on the screen; the terminal gets its cursor back
    if tracker.query.exception() is not None:
        raise QueryFailed(f"the tracker query failed: {_cause(tracker.query.exception())}")


class QueryFailed(RuntimeError):
    """The streaming query stopped with an error (its cause in the message)."""


def _cause(error) -> str:
    """The line of a query's error that says what went wrong: Spark wraps a foreachBatch error in its own text and
    the Python traceback; the last exception line of that is the cause."""
    text = str(getattr(error, "desc", None) or error)
    causes = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith((" ", "\t")) and ("Error" in line or "Exception" in line)
    ]
    cause = next((c for c in reversed(causes) if not c.startswith(("org.apache.spark", "pyspark"))), None)
    return cause or text.strip().splitlines()[0]


STALL_S = 3.0  # no micro-batch completed for this long: is the broker still there?


def _check_broker(tracker: RunningTracker, lost_since: float | None) -> tuple[float | None, bool]:
    """While the job stands still, probe its broker; the live table says when it is gone and when it is back
    (every part of the job waits for it meanwhile). Returns (since when it is gone or None, whether that changed)."""
    from streaming.kafka_client.delivery import broker_reachable

    bootstrap = tracker.sink.bootstrap
    if broker_reachable(bootstrap):
        if lost_since is None:
            return None, False
        tracker.view.set_waiting(None, f"the broker at {bootstrap} is back after {time.time() - lost_since:.0f} s")
        return None, True
    since = lost_since if lost_since is not None else time.time()
    when = time.strftime("%H:%M:%S", time.localtime(since))
    tracker.view.set_waiting(
        f"the broker at {bootstrap} is unreachable since {when} ({time.time() - since:.0f} s); "
        f"the job waits for it and goes on where it stopped"
    )
    return since, lost_since is None
