"""A consumer-protocol feed's stimuli per member: what happened to its members (they start, heartbeat, change their
subscription, leave), told apart from how they reacted to the recorded broker (the package's docstring,
"Consumer-protocol feeds")."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streaming.coordinator.consumer import ConsumerGroupConfig


@dataclass
class ConsumerFeedStimuli:
    """What happened to a feed's consumer-protocol groups, as stimuli (dicts in time order, each with ``ts``,
    ``kind`` and ``group_id``):

    * ``join``: a member starts (``member_id``, ``instance_id``, ``client_id``, ``client_host``, ``rack_id``,
      ``rebalance_timeout_ms``, ``names``/``regex`` as subscribed and ``topics``: what they name now);
    * ``heartbeat``: the member's own heartbeat (it is alive and talks to its coordinator);
    * ``subscribe``: it subscribes to other topics (``names``, ``regex``, ``topics``); ``resolved``: only its regex
      names other topics now, which a classic client has to tell its coordinator and a consumer-protocol one not;
    * ``leave``: it closes (``temporary``: a static member's epoch -2);
    * ``event``: a ``topic_metadata`` or ``delete_group`` event, as recorded.

    ``requests``: when each member was heard from (its recorded heartbeats: ``join`` with epoch 0, ``heartbeat``
    otherwise; its ``leave``), ``end``: the recording's last time."""

    stimuli: list[dict]
    requests: dict[tuple[str, str], tuple[list[int], list[str]]]
    end: int | None
    session_timeout_ms: int

    def alive(self, key: tuple[str, str], ts: int, strictly: bool = False) -> bool:
        """Whether the recording shows the member alive at ``ts``: at one of its requests (``strictly``: just past
        it, for its own heartbeat timer), or between two of them -- less than a session apart, or followed by a
        heartbeat with an epoch > 0 (a member silent for a session would have been fenced: it heartbeated,
        unrecorded, as in a feed from a broker's records, which has only the heartbeats that changed something).
        Not after its last request, nor in a silence that ends in its leave or rejoin (a crash; such a feed reports
        an expiry as a leave): a crashed client does nothing."""
        times, kinds = self.requests.get(key, ([], []))
        after = bisect.bisect_right(times, ts)
        if after == 0:
            return False
        if ts == times[after - 1] and not strictly:
            return True
        if after == len(times):
            return False
        return times[after] - times[after - 1] < self.session_timeout_ms or kinds[after] == "heartbeat"


@dataclass
class _Recorded:
    """One consumer-protocol member as the feed shows it (for telling its stimuli from its reactions)."""

    names: list[str] | None
    regex: str | None
    topics: list[str]
    owned: frozenset = frozenset()
    left: bool = False


def consumer_stimuli(events: list[dict], group_config: ConsumerGroupConfig) -> ConsumerFeedStimuli:
    """The stimuli of a consumer-protocol feed (``events`` in time order; see the package's docstring for what is a
    stimulus and what a reaction). The group's heartbeat interval and session timeout (``group_config``) drive the
    clients' own heartbeat timer: a member that has sent nothing for an interval heartbeats if the recording shows
    it alive then (:meth:`ConsumerFeedStimuli.alive`)."""
    heartbeat_interval_ms = group_config.group_consumer_heartbeat_interval_ms
    session_timeout_ms = group_config.group_consumer_session_timeout_ms
    from streaming.coordinator.consumer.regex import resolve

    stimuli: list[dict] = []
    requests: dict[tuple[str, str], tuple[list[int], list[str]]] = {}
    members: dict[tuple[str, str], _Recorded] = {}
    acks: list[dict] = []
    sizes: dict[str | None, dict[str, int]] = {}  # group (None: every group) -> topic -> partitions
    names_by_id: dict[str, str] = {}

    def topics_of(group_id: str, names: list[str] | None, regex: str | None) -> list[str]:
        found = set(names or ())
        if regex:
            known = {t for scope in (None, group_id) for t, n in sizes.get(scope, {}).items() if n > 0}
            found |= resolve(regex, known)
        return sorted(found)

    def owned_of(e: dict) -> frozenset | None:
        if e["topic_partitions"] is None:
            return None  # Kafka's clients leave it out when it did not change
        return frozenset(
            (tp["topic"] or names_by_id.get(tp["topic_id"], tp["topic_id"]), p)
            for tp in e["topic_partitions"]
            for p in tp["partitions"]
        )

    for n, e in enumerate(events, 1):
        kind, gid, ts = e["type"], e.get("group_id") or "", e["ts"]
        if kind in ("topic_metadata", "delete_group", "regex_resolved"):
            stimuli.append({"ts": ts, "kind": "event", "group_id": gid, "event": e, "n": n})
            if kind == "topic_metadata":
                if e["topic_id"]:
                    names_by_id[e["topic_id"]] = e["topic"]
                sizes.setdefault(e.get("group_id") or None, {})[e["topic"]] = e["partitions"]
                for (g, member_id), r in members.items():  # a regex may name the topic now (or no longer)
                    if r.regex and not r.left and (not gid or g == gid):
                        topics = topics_of(g, r.names, r.regex)
                        if topics != r.topics:
                            r.topics = topics
                            stimuli.append(
                                {
                                    "ts": ts,
                                    "kind": "subscribe",
                                    "group_id": g,
                                    "member_id": member_id,
                                    "names": r.names,
                                    "regex": r.regex,
                                    "topics": topics,
                                    "resolved": True,
                                    "n": n,
                                }
                            )
            continue
        key = (gid, e.get("member_id") or "")
        r = members.get(key)
        if kind != "consumer_heartbeat":
            if r is not None and not r.left and kind in ("commit", "heartbeat", "join", "sync"):
                times, kinds = requests.setdefault(key, ([], []))  # it was alive (its offset commits, say)
                times.append(ts)
                kinds.append(kind)
            continue
        epoch = e["member_epoch"]
        names = sorted(set(e["subscribed_topic_names"])) if e["subscribed_topic_names"] is not None else None
        regex = e["subscribed_topic_regex"]
        member = {"ts": ts, "group_id": gid, "member_id": key[1], "n": n}
        if epoch < 0:
            if r is not None and not r.left:
                r.left = True
                stimuli.append(dict(member, kind="leave", temporary=epoch == -2))
                times, kinds = requests.setdefault(key, ([], []))
                times.append(ts)
                kinds.append("leave")
            continue
        if r is None or r.left:
            if epoch != 0 and names is None and not regex:
                continue  # a member already there when the recording started, its subscription unknown
            r = members[key] = _Recorded(names, regex or None, topics_of(gid, names, regex))
            stimuli.append(
                dict(
                    member,
                    kind="join",
                    instance_id=e["instance_id"],
                    client_id=e["client_id"],
                    client_host=e["client_host"],
                    rack_id=e["rack_id"],
                    rebalance_timeout_ms=e["rebalance_timeout_ms"],
                    names=r.names,
                    regex=r.regex,
                    topics=r.topics,
                )
            )
        else:
            changed = (names is not None and names != r.names) or (regex is not None and (regex or None) != r.regex)
            owned = frozenset() if epoch == 0 else owned_of(e)
            if changed:
                r.names = names if names is not None else r.names
                r.regex = (regex or None) if regex is not None else r.regex
                r.topics = topics_of(gid, r.names, r.regex)
                stimuli.append(dict(member, kind="subscribe", names=r.names, regex=r.regex, topics=r.topics))
            elif epoch > 0 and owned is not None and owned != r.owned:
                # An acknowledgement: the replayed clients acknowledge their own assignments. Kept (as a heartbeat)
                # only if it is the member's last sign of life, so that its session runs out when it did.
                acks.append(dict(member, kind="heartbeat", last_sign_of_life=True))
            else:  # a heartbeat; a rejoin after being fenced is one too (see the package's docstring)
                stimuli.append(dict(member, kind="heartbeat"))
            if owned is not None:
                r.owned = owned
        times, kinds = requests.setdefault(key, ([], []))
        times.append(ts)
        kinds.append("join" if epoch == 0 else "heartbeat")
    for ack in acks:
        times = requests[(ack["group_id"], ack["member_id"])][0]
        after = bisect.bisect_right(times, ack["ts"])
        if after == len(times) or times[after] - ack["ts"] >= session_timeout_ms:
            stimuli.append(ack)
    feed = ConsumerFeedStimuli(stimuli, requests, events[-1]["ts"] if events else None, session_timeout_ms)
    stimuli += _own_heartbeats(feed, heartbeat_interval_ms)
    stimuli.sort(key=lambda s: (s["ts"], s["n"]))
    return feed


def _own_heartbeats(feed: ConsumerFeedStimuli, interval_ms: int) -> list[dict]:
    """The clients' own heartbeat timer: a heartbeat once a member has sent nothing for an interval, while the
    recording shows it alive (:meth:`ConsumerFeedStimuli.alive`)."""
    stimuli = feed.stimuli
    sends: dict[tuple[str, str], list[tuple[int, bool]]] = {}  # member -> (ts, whether it closed then)
    for s in stimuli:
        if s["kind"] in ("join", "heartbeat", "subscribe") and not s.get("resolved"):
            sends.setdefault((s["group_id"], s["member_id"]), []).append((s["ts"], False))
        elif s["kind"] == "leave":
            sends.setdefault((s["group_id"], s["member_id"]), []).append((s["ts"], True))
    extra = []
    for key, times in sends.items():
        for (sent, closed), following in zip(times, times[1:] + [None]):
            t = sent + interval_ms
            while not closed and (following is None or t < following[0]) and feed.alive(key, t, strictly=True):
                extra.append({"ts": t, "kind": "heartbeat", "group_id": key[0], "member_id": key[1], "own": True})
                t += interval_ms
    # Progress: an added heartbeat counts as the recorded event before it.
    recorded = sorted((s["ts"], s["n"]) for s in stimuli)
    for s in extra:
        at = bisect.bisect_right(recorded, (s["ts"], float("inf")))
        s["n"] = recorded[at - 1][1] if at else 0
    return extra
