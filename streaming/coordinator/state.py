"""The five states of a classic group: what each one answers, how it is left, and the only transitions Kafka allows.

Kafka's ``ClassicGroupState`` writes the same contract down; where its comments and its handlers disagree (a
heartbeat in CompletingRebalance, a request to a Dead group) the model follows the handlers
(``GroupMetadataManager``), as the broker does. "Answers" names the error each request gets once the member checks
(unknown member, fenced instance, wrong generation) have passed. DeleteGroups removes an Empty group and answers
NON_EMPTY_GROUP in every other state.
"""

from __future__ import annotations

from enum import Enum


class GroupState(str, Enum):
    EMPTY = "Empty"
    """No members (a dynamic member between its two KIP-394 joins is pending, not a member); also a group that only
    stores offsets.

    Answers: JoinGroup from a new member starts a round; SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID (a
    pending member's LeaveGroup: NONE); OffsetCommit without a generation (the admin client, a consumer without
    group management) is stored, any other is refused.
    Leaves: to PreparingRebalance when a member joins (that round first waits ``group.initial.rebalance.delay.ms``
    for more consumers of a starting application); to Dead when its last offsets expire (counted from when it
    became Empty, KIP-211; without offsets at the next cleanup pass) or DeleteGroups removes it."""

    PREPARING_REBALANCE = "PreparingRebalance"
    """A join round is open: every member must rejoin within the rebalance timeout (the longest of the members').

    Answers: JoinGroup is held until every member has joined or the timeout passes; Heartbeat and SyncGroup
    REBALANCE_IN_PROGRESS (the member learns it must rejoin; an eager consumer gives up its partitions then);
    LeaveGroup removes the member (which may complete the round); OffsetCommit of the current (finishing) generation
    is stored and counts as a heartbeat.
    Leaves: to CompletingRebalance when every member has rejoined or the join timeout passed (the dynamic members
    that did not rejoin are removed; static ones keep their place until their session ends), with the next
    generation; to Empty when nobody is left."""

    COMPLETING_REBALANCE = "CompletingRebalance"
    """The join is complete and answered with the new generation; the group waits for the leader's SyncGroup (the
    assignment) within the rebalance timeout.

    Answers: SyncGroup is held until the leader's arrives (the leader's completes the generation); Heartbeat NONE
    (consumers heartbeat between their JoinGroup answer and their SyncGroup); OffsetCommit REBALANCE_IN_PROGRESS;
    a member's JoinGroup with unchanged protocols gets its join answer again.
    Leaves: to Stable with the leader's assignment; to PreparingRebalance when a member joins or changes its
    protocols, leaves or expires, or the sync timeout removes those that never sent SyncGroup."""

    STABLE = "Stable"
    """Every member has its assignment for the current generation.

    Answers: Heartbeat NONE; SyncGroup the member's assignment; a follower's JoinGroup with unchanged protocols the
    current generation (no round); OffsetCommit of the current generation is stored and counts as a heartbeat.
    Leaves: to PreparingRebalance when a member joins, the leader rejoins, a member changes its protocols, leaves
    or expires, the sync timeout removes members that never sent SyncGroup, or (the tracker acting for the leader)
    a subscribed topic's partition count changes."""

    DEAD = "Dead"
    """Removed: the coordinator forgets the group right after the transition (its tombstones are written), so a
    later request finds no group; a request reaching a Dead group gets COORDINATOR_NOT_AVAILABLE. No way out."""

    def can_follow(self, previous: "GroupState") -> bool:
        return previous in VALID_PREVIOUS[self]


# target state -> states it may be entered from (Kafka's ClassicGroupState).
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A bug in the model, never bad input: input errors become Kafka error codes instead."""


class IllegalGroupState(RuntimeError):
    """An operation the group's state does not allow (Kafka's IllegalStateException): a bug in the model, too."""
