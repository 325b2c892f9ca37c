"""A member's reconciliation state, as Kafka's ``MemberState`` (the byte is what the records store)."""
from __future__ import annotations

from enum import IntEnum


class MemberState(IntEnum):
    STABLE = 0                  # fully reconciled with its target assignment
    UNREVOKED_PARTITIONS = 1    # must revoke partitions before it may move to the next epoch
    UNRELEASED_PARTITIONS = 2   # at the target epoch, waiting for partitions other members still own
    UNKNOWN = 127               # a state a newer broker wrote that this one does not know

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN
