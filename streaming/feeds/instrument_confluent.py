"""Instrument confluent-kafka (librdkafka) consumers: what the client tells its application, as ``client_report``
events on the tracker's feed.

librdkafka speaks the group protocol itself, in C: there is no request path to hook (as ``instrument.py`` does for
kafka-python), so the requests (joins, heartbeats, the member epoch) stay with the cluster feed
(``cluster_feed.py``, from ``__consumer_offsets``). What the client does expose, and the broker's log cannot show:

* its rebalance callbacks: ``assigned`` / ``revoked`` / ``lost`` with the partitions, when the application got or
  gave them up (incremental with the consumer protocol and cooperative assignors, the whole assignment with eager
  ones), under the member id the client had then;
* its commit callback (asynchronous commits, auto-commits) and, through ``reporter.commit(...)``, its synchronous
  commits: ``committed`` with the offsets the broker accepted, ``commit_failed`` with the error and the offsets
  refused -- a refused commit writes nothing to ``__consumer_offsets``;
* its statistics (``statistics.interval.ms``), the ``cgrp`` part: ``state``, ``join_state``, ``rebalance_cnt``,
  ``rebalance_reason`` (why the client's last rebalance started, e.g. a topic's metadata changed) and
  ``assignment_size`` -- published only when one of them changed, so a quiet group costs nothing.

Usage::

    reporter = ClientReporter(producer, "rebalance-events")          # a confluent_kafka.Producer
    consumer = Consumer(reporter.settings({"group.id": "orders", ...}))   # adds on_commit, stats_cb
    reporter.attach(consumer)
    consumer.subscribe(topics, **reporter.callbacks(on_assign=mine))     # yours still run, after the report
    reporter.commit(offsets=..., asynchronous=False)                     # a synchronous commit, reported

Events are keyed by group id, as the tracker's other feeds. The callbacks run inside ``poll``/``consume``/``close``
on the application's thread; publishing is the producer's asynchronous ``produce``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

STATS = ("state", "join_state", "rebalance_cnt", "rebalance_reason", "assignment_size")


class ClientReporter:
    def __init__(
        self,
        producer: Any,
        feed_topic: str,
        statistics_interval_ms: int = 1_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.producer, self.feed_topic, self.statistics_interval_ms = producer, feed_topic, statistics_interval_ms
        self.clock = clock
        self.consumer: Any = None
        self.group_id = self.client_id = self.instance_id = None
        self.last_stats: dict | None = None
        self.published = 0

    def settings(self, settings: dict) -> dict:
        """The consumer's settings with the commit and statistics callbacks added (yours, if given, still run)."""
        self.group_id = settings["group.id"]
        self.client_id = settings.get("client.id")
        self.instance_id = settings.get("group.instance.id")
        theirs_commit, theirs_stats = settings.get("on_commit"), settings.get("stats_cb")

        def on_commit(err, partitions) -> None:
            self._commit(err, partitions)
            if theirs_commit is not None:
                theirs_commit(err, partitions)

        def stats_cb(text: str) -> None:
            self._stats(text)
            if theirs_stats is not None:
                theirs_stats(text)

        return {
            "statistics.interval.ms": self.statistics_interval_ms,
            **settings,
            "on_commit": on_commit,
            "stats_cb": stats_cb,
        }

    def attach(self, consumer: Any) -> "ClientReporter":
        self.consumer = consumer  # for its member id (memberid()) when a callback runs
        return self

    def callbacks(self, on_assign=None, on_revoke=None, on_lost=None) -> dict:
        """``subscribe`` keyword arguments: each rebalance callback reported, then yours."""

        def wrap(report: str, theirs):
            def callback(consumer, partitions) -> None:
                self._publish(report, partitions=sorted([tp.topic, tp.partition] for tp in partitions))
                if theirs is not None:
                    theirs(consumer, partitions)

            return callback

        return {
            "on_assign": wrap("assigned", on_assign),
            "on_revoke": wrap("revoked", on_revoke),
            "on_lost": wrap("lost", on_lost),
        }

    def commit(self, *args, **kwargs):
        """``consumer.commit(...)``, reported: librdkafka calls ``on_commit`` for asynchronous commits (and
        auto-commits) only; a synchronous one answers the caller, so its answer is reported here."""
        from confluent_kafka import KafkaException

        try:
            answer = self.consumer.commit(*args, **kwargs)
        except KafkaException as exc:
            self._publish("commit_failed", offsets=[], error=str(exc)[:500])
            raise
        if kwargs.get("asynchronous") is False and answer is not None:
            self._commit(None, answer)
        return answer

    # ------------------------------------------------------------------------------------------------------------
    def _commit(self, err, partitions) -> None:
        accepted = sorted([tp.topic, tp.partition, tp.offset] for tp in partitions or [] if tp.error is None)
        refused = sorted([tp.topic, tp.partition, tp.offset] for tp in partitions or [] if tp.error is not None)
        if err is not None or refused:
            why = str(err) if err is not None else str(next(tp.error for tp in partitions if tp.error is not None))
            self._publish("commit_failed", offsets=refused or accepted, error=why[:500])
        elif accepted:
            self._publish("committed", offsets=accepted)

    def _stats(self, text: str) -> None:
        try:
            cgrp = json.loads(text).get("cgrp") or {}
        except ValueError:
            return
        now = {name: cgrp.get(name) for name in STATS}
        if cgrp and now != self.last_stats:
            self.last_stats = now
            self._publish("stats", **{k: v for k, v in now.items() if v is not None})

    def _member_id(self) -> str:
        from confluent_kafka import KafkaException

        try:
            return (self.consumer.memberid() or "") if self.consumer is not None else ""
        except (RuntimeError, KafkaException):  # the consumer is closed
            return ""

    def _publish(self, report: str, **fields) -> None:
        event = {
            "type": "client_report",
            "group_id": self.group_id,
            "ts": int(self.clock() * 1000),
            "report": report,
            "member_id": self._member_id(),
            "client_id": self.client_id,
            "instance_id": self.instance_id,
            **fields,
        }
        self.producer.produce(
            self.feed_topic,
            key=self.group_id.encode("utf-8"),
            value=json.dumps(event, separators=(",", ":")).encode("utf-8"),
        )
        self.producer.poll(0)
        self.published += 1
