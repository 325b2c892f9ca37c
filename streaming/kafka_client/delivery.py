"""Sending records to Kafka until every one is acknowledged.

kafka-python's ``flush()`` returns without saying whether the records it waited for were written: a record the broker
refused (or one too large for the producer, refused before it is even sent) only shows in its future. Writers that
vouch for what they sent (the store's batch marker, the sink's checkpoint marker) check every future. A broker that is
gone is waited for and the whole lot sent again -- a repeat is harmless to a compacted topic (same key, same value)
and readers drop repeated outputs by their headers; any other failure is raised, naming what was being written.
"""

from __future__ import annotations

import gc
import logging
import socket
import time
from typing import Callable

log = logging.getLogger(__name__)

RETRY_S = 1.0  # how often a call that found the broker gone is tried again


class DeliveryError(RuntimeError):
    """Kafka refused records for a reason that waiting will not fix (too large, not authorised, ...)."""


def broker_reachable(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """Does any bootstrap address accept a TCP connection? (A broker that went away refuses it.)"""
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout_s).close()
            return True
        except (OSError, ValueError):
            continue
    return False


def unreachable(exc: BaseException, bootstrap: str) -> bool:
    """A Kafka client call failed because the broker is gone (not because of what was asked)."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    return isinstance(exc, (KafkaConnectionError, KafkaTimeoutError, OSError)) or not broker_reachable(bootstrap)


def close_quietly(producer) -> None:
    """Close a producer without waiting: one that lost its broker may fail to close, and is dropped either way."""
    if producer is not None:
        try:
            producer.close(timeout=0)
        except Exception:
            pass


def send_until_delivered(
    send: Callable[[], list], bootstrap: str, what: str, reset: Callable[[], None], retry_s: float = RETRY_S
) -> None:
    """Call ``send`` (it sends, flushes and returns the sends' futures) until every future succeeded.

    While the broker is gone or answers with a retriable error, ``reset`` drops the producer (its buffer may hold
    records it will never deliver) and the whole lot is sent again after ``retry_s``."""
    warned = False
    while True:
        try:
            for future in send():
                future.get(timeout=0)  # raises what the delivery failed with
            if warned:
                log.warning("%s: the broker is back; delivered", what)
            return
        except Exception as exc:
            if not (getattr(exc, "retriable", False) or unreachable(exc, bootstrap)):
                raise DeliveryError(f"{what}: Kafka refused it: {exc!r}") from exc
            if not warned:
                # repr, not the exception: a handler that keeps records would keep its traceback and frames alive
                log.warning("%s: the broker is unreachable (%s); waiting for it to send again", what, repr(exc))
                warned = True
            reset()
        # The dropped producer and the failed attempt's futures and traceback hold reference cycles, and the caller may
        # have paused the collector (the sink does, for its whole batch): free them (out of the except block, where the
        # traceback is gone) before the next attempt, so a long outage does not pile them up.
        gc.collect()
        time.sleep(retry_s)
