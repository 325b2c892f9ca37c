"""A classic group followed from a cluster's ``__consumer_offsets`` (``cluster-feed``), as the stimuli a replay needs.

That feed carries the broker's answers, not the clients' requests: at each GroupMetadata record a ``join`` for every
member with the generation and leader the broker gave it, and the syncs; the members' commits; a ``leave`` where the
feed saw one. No heartbeats and no member id the replay's own coordinator issued. Replayed as recorded, every join
was refused (UNKNOWN_MEMBER_ID) and ``replay`` printed 0 rebalances for every assignor (issue #34).

What happened *to* the members is in it all the same, and that is what a replay keeps:

* a member's first appearance is its start: a JoinGroup without member id, as a new consumer sends it (the replayer
  then joins again with the id its coordinator gave, KIP-394, and maps the broker's id to it);
* its later joins are the broker's rounds (reactions: dropped), unless they name other topics (a subscription
  change: kept);
* its ``leave``: a LeaveGroup; its commits: kept;
* the topics' sizes, which the feed does not carry (the tracker's job asks the broker): every partition of a
  subscribed topic is assigned in a generation with members, so the highest partition a leader's assignment names
  gives each topic's size, announced for the group (``topic_metadata``) when first seen and when it grows;
* it heartbeats every interval (a third of its session, at most Java's 3 s) while alive: from its start to its
  leave, or, when a later record leaves it out and no leave was seen, to its last sign of life (its last commit or
  the last record naming it): it crashed there, and its session expires it; to the recording's end otherwise.

A group is taken for such a feed when it has no heartbeat at all and a join carrying a broker-issued member id with
the broker's generation (an instrumented client's feed has heartbeats).
"""

from __future__ import annotations

from streaming.coordinator import parse_event

HEARTBEAT_INTERVAL_MS = 3_000  # Java's heartbeat.interval.ms default, at most a third of the session


def observed_groups(events: list[dict]) -> set[str]:
    """The classic groups of a feed that come from a cluster's records (see the module's docstring)."""
    answered, heartbeating = set(), set()
    for e in events:
        gid = e.get("group_id") or ""
        if e["type"] == "heartbeat":
            heartbeating.add(gid)
        elif e["type"] == "join" and e["member_id"] and e.get("generation") is not None:
            answered.add(gid)
    return answered - heartbeating


def client_stimuli(events: list[dict], groups: set[str]) -> list[dict]:
    """``events`` (in time order) with the ``groups``' events turned into the requests their clients sent, in time
    order. Each such group's first joins keep the broker's member id; the replayer sends them without one."""
    out = [e for e in events if (e.get("group_id") or "") not in groups]
    for gid in sorted(groups):
        out += _group_stimuli([e for e in events if (e.get("group_id") or "") == gid])
    out.sort(key=lambda e: e["ts"])  # stable: a group's own order kept at equal times
    return out


def _group_stimuli(events: list[dict]) -> list[dict]:
    started: dict[str, dict] = {}  # member id -> its first join
    topics: dict[str, list[str]] = {}
    last_sign: dict[str, int] = {}  # member id -> its last commit or the last record naming it
    ended: dict[str, int] = {}  # member id -> when it left or crashed
    sizes: dict[str, int] = {}  # topic -> partitions seen assigned
    out: list[dict] = []
    for e in events:
        kind, member_id, ts = e["type"], e.get("member_id") or "", e["ts"]
        if kind == "join":
            named = sorted(e["protocols"][0].get("topics", [])) if e["protocols"] else []
            if member_id not in started or member_id in ended:
                started[member_id] = e
                ended.pop(member_id, None)
                out.append(_request(e))
            elif named != topics.get(member_id):
                out.append(_request(e))  # a subscription change: the client rejoined with other topics
            topics[member_id] = named
            last_sign[member_id] = ts
        elif kind == "sync":
            if member_id in started:
                last_sign[member_id] = ts
            if e.get("assignments") is not None:  # the leader's: whoever it leaves out is gone
                for gone in [m for m in started if m not in e["assignments"] and m not in ended]:
                    ended[gone] = last_sign.get(gone, ts)
                out += _grown(sizes, e)
        elif kind == "leave":
            if member_id in started and member_id not in ended:
                ended[member_id] = ts
            out.append(e)
        elif kind == "commit":
            if member_id in started and member_id not in ended:
                last_sign[member_id] = max(ts, last_sign.get(member_id, ts))
            out.append(e)
        else:
            out.append(e)
    end = max((e["ts"] for e in events), default=0)
    for member_id, join in started.items():
        out += _heartbeats(join, join["ts"], ended.get(member_id, end))
    return out


def _grown(sizes: dict[str, int], sync: dict) -> list[dict]:
    """``topic_metadata`` for each topic the leader's assignment shows larger than known, at the first join of that
    round's answer (the replay's assignors need the size when the members join)."""
    seen: dict[str, int] = {}
    for partitions in sync["assignments"].values():
        for topic, partition in partitions:
            seen[topic] = max(seen.get(topic, 0), partition + 1)
    out = []
    for topic, n in sorted(seen.items()):
        if n > sizes.get(topic, 0):
            sizes[topic] = n
            event, error = parse_event(
                {
                    "type": "topic_metadata",
                    "group_id": sync["group_id"],
                    "topic": topic,
                    "partitions": n,
                    "ts": sync["ts"],
                }
            )
            assert error is None, error
            out.append(event)
    return out


def _request(join: dict) -> dict:
    """A join as its client sent it: without the broker's answer (generation, leader)."""
    return dict(join, generation=None, leader=None)


def _heartbeats(join: dict, start: int, end: int) -> list[dict]:
    interval = min(join["session_timeout_ms"] // 3, HEARTBEAT_INTERVAL_MS)
    out = []
    for ts in range(start + interval, end + 1, interval):
        event, error = parse_event(
            {
                "type": "heartbeat",
                "group_id": join["group_id"],
                "member_id": join["member_id"],
                "group_instance_id": join.get("group_instance_id"),
                "generation": 0,
                "ts": ts,
            }
        )
        assert error is None, error
        event["synthesized"] = True  # the replayer drops it while its client waits in a JoinGroup
        out.append(event)
    return out
