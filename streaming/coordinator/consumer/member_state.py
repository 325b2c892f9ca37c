"""A member's reconciliation state, as Kafka's ``MemberState`` (the byte is what the records store)."""

from __future__ import annotations

from enum import IntEnum


class MemberState(IntEnum):
    """Where a member is on its way to the target assignment (``reconcile.py`` moves it, one heartbeat at a time).
    The group is Stable when every member is STABLE at the target epoch."""

    STABLE = 0  # holds its target assignment at its epoch; a new target epoch moves it on
    # Must stop consuming its partitions pending revocation and say so in a heartbeat before it moves to the next
    # epoch; the rebalance timeout bounds that wait (then it is fenced).
    UNREVOKED_PARTITIONS = 1
    # At the target epoch, waiting for partitions of its target that other members still own (they get them as the
    # owners revoke); nothing to do but heartbeat.
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127  # a newer broker's state: the member must give up everything and start afresh

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN
