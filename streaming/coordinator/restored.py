"""A group rebuilt from the store after a lost checkpoint, and the signs in its feed of what the store did not hold.

Kafka's coordinator failover is the rule (``GroupMetadataManager#onLoaded``): the next coordinator loads each group
from its last records -- a classic group at the generation of its last GroupMetadata record, Stable with its members
(Empty without), a consumer-protocol group from all its records -- and restarts every member's session at load time.
What the old coordinator held only in memory is gone: a classic round in progress (who had rejoined, who had left,
new members and the member ids it had handed out), session deadlines, and what the tracker adds (topic sizes, the
round's start and cause, its figures). Live clients repair that themselves: one mid-round is answered NOT_COORDINATOR,
then UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS by the new coordinator, and rejoins.

The tracker rebuilds the same way (``streaming/spark/restore.py``) and says so: each restored group's first step
emits ``group_restored`` (the generation or group epoch it was loaded at). Then, for as long as anything the store
did not hold can still show (the window: the restored members' longest session plus rebalance timeout), the feed
is watched for it, and the first sign is a ``restore_gap`` output:

* classic, normal mode (the tracker is the coordinator): a request stamped with a generation the group has not
  reached (only a coordinator that went on past the store could have given it), or from a member id the group does
  not know (one that joined, or was handed its id, after the last record). The group answers as Kafka's new
  coordinator would, but a recorded feed's clients never hear those answers and never rejoin: the group's story
  from there is the tracker's own, not the lost one's (``follows: false``).
* classic, observe mode (the broker is the coordinator): a restored member whose first report since the load is
  already stamped with a later generation (it had rejoined before the restore), a member reporting one whose join
  the tracker never saw (it joined before), or a restored member the broker's next generation leaves out unheard
  since the load (it left or went quiet before the restore). The broker's word wins: the model follows it
  (``follows: true``); what it cannot know is marked unknown -- the round's start and figures, why such a member
  went (``reason: unknown``, unless it has been silent for half a session since the load: a session timeout).
* both modes: a restored member that expires on the session the load restarted, never heard from since (it left
  or went quiet before the restore, up to a session sooner: ``reason: unknown``).
* consumer protocol (both modes): a member's heartbeat or commit stamped with an epoch the member does not have
  yet, or from a member the group does not know with an epoch above 0. The records are all in the store, so only
  timers can differ: a member whose session ran out before the restore expires later in the rebuilt group, and the
  others' heartbeats show the lost checkpoint's new epoch.

Committed offsets are records: what the store holds is every offset the lost checkpoint's batches committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Restored:
    """A group's restore, kept in its state until the window ends."""

    generation: int  # the classic generation, or the consumer group epoch, the store held
    loaded_ts: int
    until: int  # the end of the window
    unheard: set[str] = field(default_factory=set)  # restored members not heard from since the load
    announced: bool = False  # group_restored is out
    reported: bool = False  # a restore_gap is out

    def to_row(self) -> list:
        return [self.generation, self.loaded_ts, self.until, sorted(self.unheard), self.announced, self.reported]

    @classmethod
    def from_row(cls, row: list | None) -> "Restored | None":
        if row is None:
            return None
        generation, loaded_ts, until, unheard, announced, reported = row
        return cls(generation, loaded_ts, until, set(unheard), announced, reported)


def window_end(loaded_ts: int, timeouts: list[tuple[int, int]], default_ms: int) -> int:
    """The end of what a lost checkpoint can still change: a round it had open ends within the longest rebalance
    timeout, a session it had running within the longest session (``timeouts``: the members' (session, rebalance)
    timeouts; ``default_ms`` for a group without members)."""
    return loaded_ts + max((s + r for s, r in timeouts), default=default_ms)
