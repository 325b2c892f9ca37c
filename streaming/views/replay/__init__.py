"""``rebalance-tracker replay``: "would another assignor have saved us?" — one recorded feed, every assignor.

A recorded feed mixes what happened *to* the consumers (they start, crash, leave, restart, topics grow) with how
the consumers *reacted* to their coordinator (rejoin on REBALANCE_IN_PROGRESS, SyncGroup after JoinGroup). Under
another assignor the coordinator answers differently, so the replay keeps the stimuli and re-plays the reactions:

* kept: joins of new members (and the KIP-394 second join), leaves, heartbeats (they are what keeps a member
  alive — a crashed consumer simply has none), commits, topic metadata, group deletion. Every join's protocol
  list becomes the one assignor under test; heartbeats and commits carry the generation the *replayed*
  coordinator gave that member, as a real client would.
* replaced: recorded rejoins of known members and recorded SyncGroups. Instead each simulated client sends
  SyncGroup ``REACTION_MS`` after its JoinGroup response, rejoins ``REACTION_MS`` after a REBALANCE_IN_PROGRESS,
  and — cooperative protocol only — rejoins after a round that revoked some of its partitions, with the
  partitions it still owns (KIP-429). Eager clients name no owned partitions; the coordinator then remembers
  their last assignment for the sticky assignor, as the client's user data would. A client whose recorded rejoin
  was dropped (the replay had no such round) is a live client whose recorded self now waits in that round, sending
  nothing: it heartbeats on its own every heartbeat interval (a third of its session, at most 3 s) until its
  recorded self is heard from again, for at most its rebalance timeout.

Server-side assignors (KIP-848), named ``server:uniform`` and ``server:range`` (``range`` alone is the client-side
RangeAssignor), replay the same recorded classic feed under the consumer protocol, through a
:class:`ConsumerGroupCoordinator` -- one per group, so that each group has its own
``group.consumer.session.timeout.ms``: the ``session_timeout_ms`` of the group's first recorded join (the heartbeat
interval is a third of it, at most Kafka's 5 s). The same stimuli, the consumer protocol's reactions:

* the join of a new member becomes its first ``ConsumerGroupHeartbeat`` (epoch 0, its subscription, its rebalance
  timeout, the assignor under test); a static member restarting (a join with its instance id and no member id)
  first leaves with epoch -2 if its previous incarnation is still in the group -- as a closing consumer-protocol
  client does -- and joins with the member id the recorded broker gave it. A rejoin with other topics is a
  subscription change.
* recorded heartbeats become heartbeats with the epoch the *replayed* coordinator gave that member and the partitions
  it owns. A consumer-protocol client also heartbeats on its own every heartbeat interval, including through the
  recorded join rounds where a classic client sends none: a member that has sent nothing for an interval heartbeats
  when it was alive then -- between two of its recorded requests (join, sync, heartbeat or commit) less than a
  session timeout apart, or waiting for the answer to a recorded join (a slow join round). Rejoins, SyncGroups and
  commits are not sent (the first two do not exist in this protocol; a commit changes no assignment and, in this
  protocol, keeps no member alive, so it would change nothing the replay scores). A leave is epoch -1. A crash
  leaves no requests: the heartbeats stop at the last one, and the session expires.
* simulated reactions: a client acknowledges an assignment ``REACTION_MS`` after it: the revoked partitions are given
  up then and the new ones taken (a member still waiting for partitions others release learns of them at its next
  heartbeat, as in Kafka); fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID), it gives up everything and rejoins with
  epoch 0 ``REACTION_MS`` later. A member the coordinator expired rejoins with its next heartbeat, if it sends one
  (the replay skips the UNKNOWN_MEMBER_ID round trip a real client would make first).

Consumer-protocol feeds (KIP-848: ``consumer_heartbeat`` events, as ``simulate --group-protocol consumer`` writes
them, or the cluster feed from a 4.x broker's records) are replayed under every assignor too. A group with consumer
heartbeats is a consumer-protocol group; a feed with both kinds (``--group-protocol mixed``) has each kind replayed
on its own -- groups do not interact -- and the outputs merged in time order. Per member, the stimuli
(:func:`consumer_stimuli`) are:

* its first heartbeat (epoch 0; or its first after it left): the member starts -- its subscription (topic names, or
  a regex resolved against the feed's topic metadata), rebalance timeout, instance id, rack;
* a heartbeat naming another subscription: a subscription change; so is a topic starting or stopping to match a
  member's regex, for the classic replay (a classic client rejoins for it; the consumer protocol's coordinator
  resolves regexes itself);
* epoch -1: a leave; epoch -2: a static member's temporary leave (the process closed, its session runs on);
* its other heartbeats: it is alive and heartbeating -- a crashed member simply stops, and the session expires it.
  Each client also heartbeats on its own once it has sent nothing for the group's heartbeat interval while the
  recording shows it alive (see below);
* topic metadata and group deletion, as recorded.

The reactions, which the replay makes its own:

* a heartbeat acknowledging an assignment (its owned partitions differ from the member's previous ones): it
  acknowledged what the *recorded* broker assigned. Dropped -- unless it is the member's last sign of life before a
  session of silence, then it is a plain heartbeat, so that the member's session runs out when it did;
* a heartbeat with epoch 0 from a member still in the group (a rejoin after FENCED_MEMBER_EPOCH or
  UNKNOWN_MEMBER_ID, a static member retrying after UNRELEASED_INSTANCE_ID): replayed as a heartbeat -- the client
  is alive and talking to its coordinator -- which is a join again only if the *replayed* coordinator left it at
  epoch 0.

A simulated client reacts only while the recording shows it alive (:meth:`ConsumerFeedStimuli.alive`: at its
requests, or between two less than a session apart or followed by a heartbeat with an epoch > 0; not after its last
one, nor in a silence that ends in its leave or rejoin): a crashed client acknowledges, syncs and rejoins nothing.
The group's ``group.consumer.session.timeout.ms`` and heartbeat interval (Kafka's 45 s and 5 s; the feed does not
carry them, ``--coordinator-config group.consumer.*`` does) are every member's session and heartbeat timer. A feed
made from a broker's records (the cluster feed) has only the heartbeats that changed something and reports a
session expiry as a leave: replay it with the broker's own session timeout (not the tracker's infinite one the
cluster feed suggests): a silent member then heartbeats on its own timer if it is next heard with an epoch > 0, and
is taken for crashed if it is next heard leaving -- its expiry comes a little early (its heartbeats after its last
record are unknown).

* ``server:uniform``, ``server:range``: one :class:`ConsumerGroupCoordinator` per group with those settings and
  the reactions of the classic feed's server replay above: the stimuli are heartbeats again, a join naming the
  assignor under test, the others with the epoch and owned partitions of the *replayed* group; an assignment is
  acknowledged ``REACTION_MS`` after it, a fence answered by a rejoin ``REACTION_MS`` later. Under the assignor the
  group used, the replayed target assignments are the recorded ones, epoch for epoch; what differs is the clients'
  reaction time (the recorded ones took their own, e.g. 10-300 ms to revoke in the simulator): when a partition
  reaches its next owner -- so which member holds it in between, and the moves -- and, by that much, the expiry of a
  member whose last request before it closed (-2) acknowledged an assignment.
* client-side assignors: the classic coordinator, with the group's session timeout (kept within
  group.min/max.session.timeout.ms) for every member. A join is a JoinGroup without member id and, ``REACTION_MS``
  later, the KIP-394 second one with the id it got (part of the member's join: sent even by a member that crashes
  right after); heartbeats carry the replayed generation (none while the member's JoinGroup waits); a subscription
  change is a rejoin with the new topics; -1 is a LeaveGroup, -2 nothing (a static classic member closes without
  one, KIP-345). A member the replayed coordinator removed while the recording shows it alive joins again, as a new
  member, at its next heartbeat. SyncGroup and the rejoins are the classic replay's reactions above.

Offset commits of consumer-protocol groups are not replayed (they only count as signs of life).

A group with members of both protocols (Kafka 4.x's online migration: classic requests beside consumer heartbeats,
``mixed_groups``) is replayed through the tracker's routing (``routing.GroupModel``: the classic group, its upgrade
when a consumer-protocol member joins, classic members inside the consumer group, the downgrade when the last
consumer-protocol member goes), each member in the protocol it spoke:

* the consumer-protocol members: their stimuli and reactions as above (a consumer-protocol feed's);
* the classic members (:func:`classic_stimuli`): a member's first JoinGroup (or its first after it left) is its
  start, a rejoin naming other topics a subscription change, a LeaveGroup its leave -- as a leader's assignment
  that leaves it out less than a session after it was last heard from (a feed from a broker's records has no
  LeaveGroup; a crash would take a session); its other JoinGroups and SyncGroups are reactions to the recorded
  broker, kept as a heartbeat ``2 * REACTION_MS`` later (a newcomer's KIP-394 second JoinGroup has reached the
  replayed coordinator by then), its recorded heartbeats as heartbeats, and it heartbeats on its own every interval
  (a third of its session, at most 3 s) while the recording shows it alive. The reactions: a SyncGroup
  ``REACTION_MS`` after its JoinGroup's answer, a rejoin ``REACTION_MS`` after REBALANCE_IN_PROGRESS (or
  ILLEGAL_GENERATION), a KIP-394 second JoinGroup after MEMBER_ID_REQUIRED; removed from the group while the
  recording shows it alive, it joins again as a new member. A LeaveGroup the feed dates at the member's JoinGroup
  of the same moment (a cluster feed dates an Empty generation's departures at their last sign of life) comes after
  that join's round; a member alive at the recording's end finishes the round its last requests started (the replay
  runs on that long, a few ``REACTION_MS``). Each member asks for the id the recorded broker gave it
  (``member_id_hint``: Kafka draws ids at random), so that assignors ordering members by id break ties as the
  recorded broker did.
* the assignor under test: a server-side one is the consumer group's; a client-side one is what the classic members'
  JoinGroups name (alone). The other side keeps what it used: the classic members their recorded protocols, the
  consumer group its ``group.consumer.assignors``.

Replayed under the recorded assignors and settings, the rolling upgrade and back Kafka 4.4 recorded
(``tests/feeds/kafka44_migration.json``; ``kafka44_migration_deferred.json`` with the broker's default assignment
interval too) tells the recording's story -- the same members with the same ids, the
same switches at the same moments, the same classic generations and group epochs with the same assignments and
targets, the same departures in the same order; what differs is when the members' reactions came (the recorded
clients took their own time to rejoin, sync and acknowledge, the replayed ones ``REACTION_MS`` or their next
heartbeat), hence the moments rebalances complete and partitions change hands
(``tests/views/test_replay_migration.py``).

Everything runs on event time through the pure coordinators, so a replay is deterministic.
"""

# Where each part lives:
#   settings       the assignors compared and their names, the simulated clients' reaction time
#   classic        the classic replay (a classic feed under a client-side assignor)
#   server         the consumer-protocol replay of a classic feed (server-side assignors)
#   stimuli        a consumer-protocol feed's stimuli per member
#   consumer_feed  the two replays of those stimuli, under either kind of assignor
#   mixed          groups with members of both protocols: their classic members' stimuli, the replay through routing
#   dispatch       replay_outputs: one feed, one assignor, each group under its own protocol
#   scoring        Score, score, compare, format_table
#   cli            the command line (main)
from streaming.views.replay.cli import build_parser, default_assignors, main, read_feed
from streaming.views.replay.dispatch import consumer_groups, mixed_groups, replay_outputs, split_feed
from streaming.views.replay.mixed import classic_stimuli
from streaming.views.replay.scoring import Score, compare, format_table, score
from streaming.views.replay.server import KAFKA_HEARTBEAT_INTERVAL_MS
from streaming.views.replay.settings import (
    DEFAULT_ASSIGNORS,
    REACTION_MS,
    SERVER_ASSIGNORS,
    SERVER_PREFIX,
    check_assignor,
    is_server_assignor,
)
from streaming.views.replay.stimuli import ConsumerFeedStimuli, consumer_stimuli

__all__ = [
    "DEFAULT_ASSIGNORS",
    "KAFKA_HEARTBEAT_INTERVAL_MS",
    "REACTION_MS",
    "SERVER_ASSIGNORS",
    "SERVER_PREFIX",
    "ConsumerFeedStimuli",
    "Score",
    "build_parser",
    "check_assignor",
    "classic_stimuli",
    "compare",
    "consumer_groups",
    "consumer_stimuli",
    "default_assignors",
    "format_table",
    "is_server_assignor",
    "main",
    "mixed_groups",
    "read_feed",
    "replay_outputs",
    "score",
    "split_feed",
]
