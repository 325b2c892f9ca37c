"""Where a partition really ends.

ListOffsets(latest) should be the answer, but some Kafka-compatible brokers (the bundled Tansu among them) report
the start of the last batch + 1, hiding the rest of a multi-record batch. A fetch response's high-water mark is
right, so the end is the larger of the two. Not with a client that speaks Kafka before 0.10.1 (Fetch before v3):
a fetch that gets only part of a record (one appended since the listing, when the caller fetches as little as it can)
fails with RecordTooLargeError there, and ListOffsets is Kafka's own answer.
"""

from __future__ import annotations

import time


def log_end_offsets(consumer, partitions, timeout_s: float = 2.0) -> dict:
    """``{TopicPartition: end offset}`` using a kafka-python consumer that this call may reassign and seek."""
    tps = list(partitions)
    if not tps:
        return {}
    listed = consumer.end_offsets(tps)
    if tuple(consumer.config.get("api_version") or ()) < (0, 10, 1):
        return dict(listed)
    consumer.unsubscribe()  # forget the high-water marks of an earlier call: only a fresh fetch answer counts
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, listed[tp])
    # The fetch answers carry the high-water marks (the records are not used): poll in short steps and stop at the
    # first answer for every partition, rather than for a fixed time.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(consumer.highwater(tp) is None for tp in tps):
        consumer.poll(timeout_ms=10)
    return {tp: max(listed[tp], consumer.highwater(tp) or 0) for tp in tps}
