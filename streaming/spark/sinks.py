"""``foreachBatch`` sink: routes each micro-batch's outputs to the store, Kafka topics and the live view.

Idempotency per batch id: the offsets store remembers the last batch it applied (a replayed batch changes nothing);
the Kafka outputs remember theirs in a marker file under the checkpoint, written after the producer flushed. A crash
between flush and marker re-sends that one batch; every record carries ``batch_id`` and ``seq`` headers so readers
can drop the repeat (the same contract as Spark's own at-least-once Kafka sink, made detectable). A broker without
record headers (before Kafka 0.11, or a client told ``api.version`` below it) gets the same two numbers as fields of
the record's JSON value instead (``record_headers=False``); the global topic metadata fanned out to the events topic
then goes without them (the job reads no headers).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable

import msgspec

from streaming.kafka_client.delivery import close_quietly, send_until_delivered
from streaming.kafka_client.kafka_conf import for_client
from offsets_store.store import STORE_TYPES
from streaming.gc_pause import gc_paused
from streaming.spark.restore import POSITION_GROUP, batch_end_offsets, position_records

log = logging.getLogger(__name__)


class BatchMarker:
    """Last batch id a non-transactional sink completed, kept in a file next to the checkpoint."""

    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def last(self) -> int:
        try:
            return int(self.path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return -1

    def set(self, batch_id: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(str(batch_id))
        os.replace(tmp, self.path)


# The recovery tests' crash point: with this set to a batch id, the job kills its whole process group (driver and JVM)
# in the first batch at or after it that has outputs, right after they were delivered and before the sink's marker
# records it -- the window in which a restart sends a batch again, too narrow to hit with a signal from outside.
CRASH_AFTER_OUTPUTS_ENV = "REBALANCE_TRACKER_CRASH_AFTER_OUTPUTS"


def _crash_point(batch_id: int, outputs: list[dict]) -> None:
    at = os.environ.get(CRASH_AFTER_OUTPUTS_ENV)
    if at and batch_id >= int(at) and any(o["type"] not in STORE_TYPES for o in outputs):
        log.warning("%s=%s: killing the job after batch %d's outputs", CRASH_AFTER_OUTPUTS_ENV, at, batch_id)
        os.killpg(os.getpgrp(), signal.SIGKILL)


class TrackerSink:
    def __init__(
        self,
        *,
        store=None,
        bootstrap: str | None = None,
        events_topic: str | None = None,
        outputs_topic: str | None = None,
        dlq_topic: str | None = None,
        checkpoint: str | None = None,
        on_outputs: Callable[[int, list[dict]], None] | None = None,
        producer_config: dict | None = None,
        producer_client: str = "kafka-python",
        record_headers: bool = True,
    ):
        self.store = store
        self.record_headers = record_headers
        self.bootstrap = bootstrap
        self.events_topic = events_topic
        self.outputs_topic = outputs_topic
        self.dlq_topic = dlq_topic
        self.on_outputs = on_outputs
        self.producer_config = producer_config or {}
        if producer_client not in ("kafka-python", "confluent"):
            raise ValueError(f"the sink's Kafka client is 'kafka-python' or 'confluent', not {producer_client!r}")
        self.producer_client = producer_client
        self._producer = None
        self.marker = BatchMarker(Path(checkpoint) / "sinks" / "kafka-outputs.batch") if checkpoint else None
        self.query_checkpoint = str(Path(checkpoint) / "query") if checkpoint else None
        # Groups global topic metadata is fanned out to; after a restart the store remembers them. Never "": a
        # topic_metadata for the empty group id means every group, so fanning out to it would come back for ever.
        self.known_groups: set[str] = (
            {g for g in store.groups() if g and g != POSITION_GROUP} if store is not None else set()
        )
        self.dead_letters = 0

    # -- Kafka -------------------------------------------------------------------------------------------------
    @property
    def producer(self):
        if self._producer is None and self.producer_client == "confluent":
            from streaming.spark.confluent_producer import ConfluentProducer

            self._producer = ConfluentProducer(self.bootstrap, self.producer_config, client_id="rebalance-tracker-sink")
        elif self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                **for_client(
                    KafkaProducer,
                    self.producer_config,
                    bootstrap_servers=self.bootstrap,
                    acks="all",
                    linger_ms=5,
                    client_id="rebalance-tracker-sink",
                    reconnect_backoff_max_ms=1000,
                )
            )
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush()
            self._producer.close()
            self._producer = None

    def _send(self, topic: str, key: str, record: dict, batch_id: int, seq: int, bookkeeping: bool = True):
        """``bookkeeping``: the record carries its batch id and place, as headers or, where the broker has none, as
        fields of its JSON value."""
        if self.record_headers:
            headers = [("batch_id", str(batch_id).encode()), ("seq", str(seq).encode())]
            return self.producer.send(topic, key=key.encode("utf-8"), value=_json(record), headers=headers)
        if bookkeeping:
            record = dict(record, batch_id=batch_id, seq=seq)
        return self.producer.send(topic, key=key.encode("utf-8"), value=_json(record))

    # -- the batch ---------------------------------------------------------------------------------------------
    def __call__(self, batch_df, batch_id: int) -> None:
        # Arrow to the driver: far cheaper than Row objects for large batches.
        table = batch_df.select("group_id", "seq", "payload").toArrow()
        # The collector paused for the whole batch, as everything here builds small containers that live until it
        # ends: decoding 61k outputs took ~1 s with it running, ~0.15 s without; handling them (store, producer
        # futures, live view) ~1.0 s and ~0.5 s.
        with gc_paused():
            # Broadcasts (a null group id) first, then each group, the empty group id included, in its own order.
            rows = sorted(
                zip(
                    table.column("group_id").to_pylist(),
                    table.column("seq").to_pylist(),
                    table.column("payload").to_pylist(),
                ),
                key=lambda r: (r[0] is not None, r[0] or "", r[1]),
            )
            decode = msgspec.json.Decoder().decode
            outputs = [decode(payload) for _, _, payload in rows]
            self.handle(outputs, batch_id)

    def handle(self, outputs: list[dict], batch_id: int) -> None:
        for o in outputs:
            if o.get("group_id"):  # not "" (see known_groups)
                self.known_groups.add(o["group_id"])
        if self.store is not None:
            records = [o for o in outputs if o["type"] in STORE_TYPES]
            if self.query_checkpoint and self.events_topic:  # where a checkpoint-less restart picks up the feed
                end = batch_end_offsets(self.query_checkpoint, batch_id, self.events_topic)
                records += position_records(self.events_topic, end, int(time.time() * 1000)) if end else []
            self.store.write(records, batch_id=batch_id)
        if self.bootstrap and (self.marker is None or batch_id > self.marker.last()):
            self._produce_until_delivered(outputs, batch_id)
            _crash_point(batch_id, outputs)
            if self.marker is not None:
                self.marker.set(batch_id)
        self.dead_letters += sum(1 for o in outputs if o["type"] == "dead_letter")
        if self.on_outputs is not None:
            self.on_outputs(batch_id, outputs)

    def _produce_until_delivered(self, outputs: list[dict], batch_id: int) -> None:
        """Send the batch and check every record was acknowledged; while the broker is gone, wait for it and send the
        whole batch again (readers drop the repeats by the headers)."""
        send_until_delivered(
            lambda: self._produce(outputs, batch_id),
            self.bootstrap,
            f"batch {batch_id}: writing the outputs to Kafka",
            self._drop_producer,
        )

    def _drop_producer(self) -> None:
        close_quietly(self._producer)
        self._producer = None

    def _produce(self, outputs: list[dict], batch_id: int) -> list:
        futures = []
        for seq, o in enumerate(outputs):
            kind = o["type"]
            if kind == "dead_letter":
                if self.dlq_topic:
                    futures.append(self._send(self.dlq_topic, o.get("group_id") or "", o, batch_id, seq))
            elif kind == "broadcast_event":
                # Global topic metadata: one copy per known group, appended to that group's own event stream.
                if self.events_topic:
                    for group in sorted(self.known_groups):
                        event = dict(o["event"], group_id=group)
                        futures.append(self._send(self.events_topic, group, event, batch_id, seq, bookkeeping=False))
            elif self.outputs_topic and kind not in STORE_TYPES:
                # Offsets and group metadata are the store's; the topic carries the rebalance story.
                futures.append(self._send(self.outputs_topic, o["group_id"], o, batch_id, seq))
        if futures:
            self.producer.flush()
        return futures


_json = msgspec.json.Encoder(order="sorted").encode  # compact, sorted keys: json.dumps(sort_keys=True)'s shape
