"""The five states of a classic consumer group and the only transitions Kafka allows between them."""
from __future__ import annotations

from enum import Enum


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def can_follow(self, previous: "GroupState") -> bool:
        return previous in VALID_PREVIOUS[self]


# target state -> states it may be entered from (Kafka's ClassicGroupState).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                                GroupState.EMPTY, GroupState.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A bug in the model, never bad input: input errors become Kafka error codes instead."""


class IllegalGroupState(RuntimeError):
    """An operation the group's state does not allow (Kafka's IllegalStateException): a bug in the model, too."""
