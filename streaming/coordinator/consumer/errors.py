"""Kafka's answer to a request it refuses: an error code name and its message (never a Python failure)."""

from __future__ import annotations


class HeartbeatError(Exception):
    def __init__(self, error: str, message: str = "") -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message
