"""The two replays of a consumer-protocol feed's stimuli: under a server-side assignor through the consumer
protocol's coordinator, under a client-side one through the classic coordinator (the package's docstring, the end of
"Consumer-protocol feeds")."""

from __future__ import annotations

from typing import Callable

from streaming.coordinator import CoordinatorConfig, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.coordinator.outputs import JOIN_RESPONSE, MEMBER_JOINED, MEMBER_REPLACED
from streaming.views.replay.classic import _Client, _join_fields, _Replayer
from streaming.views.replay.server import _ConsumerClient, _ConsumerReplayer
from streaming.views.replay.stimuli import ConsumerFeedStimuli


def _by_recorded(stimuli: list[dict], on_progress: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """A replayer's progress (stimuli done) as recorded events done."""
    if on_progress is None:
        return None
    return lambda i: on_progress(stimuli[i - 1]["n"] if i else 0)


def _event(**fields) -> dict:
    event, error = parse_event(fields)
    assert error is None, error  # the replay only sends well-formed requests
    return event


class _ConsumerFeedServerReplayer(_ConsumerReplayer):
    """A consumer-protocol feed under a server-side assignor: each stimulus is a heartbeat again, with the epoch and
    the partitions of the *replayed* group; the reactions are :class:`_ConsumerReplayer`'s."""

    def __init__(self, assignor: str, feed: ConsumerFeedStimuli, group_config: ConsumerGroupConfig) -> None:
        super().__init__(assignor, None)
        self.feed, self.group_config = feed, group_config

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[dict]:  # type: ignore[override]
        return self._drive(
            self.feed.stimuli, self._stimulus, self.feed.end, _by_recorded(self.feed.stimuli, on_progress)
        )

    def _stimulus(self, s: dict) -> None:
        kind, group_id = s["kind"], s["group_id"]
        if kind == "event":
            return self._group_event(s["event"])
        key = (group_id, s["member_id"])
        client = self.clients.get(key)
        if kind == "join":
            self._coordinator(group_id, group_config=self.group_config)
            client = self.clients[key] = _ConsumerClient(
                s["member_id"],
                s["instance_id"],
                list(s["names"] or []),
                s["rebalance_timeout_ms"],
                s["client_id"],
                s["client_host"],
                regex=s["regex"],
                rack=s["rack_id"],
            )
            return self._join(group_id, client)
        if client is None:
            return
        if kind == "heartbeat":
            self._heartbeat(group_id, client)
        elif kind == "subscribe" and not s.get("resolved"):  # the coordinator resolves regexes itself
            client.topics, client.regex = list(s["names"] or []), s["regex"]
            self._heartbeat(
                group_id, client, subscribed_topic_names=list(s["names"] or []), subscribed_topic_regex=s["regex"] or ""
            )
        elif kind == "leave":
            if client.epoch > 0:
                self._send(group_id, client, -2 if s["temporary"] else -1)
            del self.clients[key]

    def _alive(self, key: tuple[str, str], session_ms: int) -> bool:
        return self.feed.alive(key, self.now, strictly=True)  # the client's own heartbeat timer

    # A client reacts only while the recording shows it alive: a crashed one acknowledges and rejoins nothing.
    def _acknowledge(self, group_id: str, client: _ConsumerClient) -> None:
        if self.feed.alive((group_id, client.member_id), self.now):
            return super()._acknowledge(group_id, client)
        client.pending = None

    def _rejoin(self, group_id: str, client: _ConsumerClient) -> None:
        if self.feed.alive((group_id, client.member_id), self.now):
            super()._rejoin(group_id, client)


class _ConsumerFeedClassicReplayer(_Replayer):
    """A consumer-protocol feed under a client-side assignor, through the classic coordinator: each member joins
    (KIP-394: with no member id, then with the one the coordinator gives), heartbeats with the replayed generation
    and leaves as a classic client does; the reactions (SyncGroup, rejoins) are :class:`_Replayer`'s."""

    def __init__(
        self,
        assignor: str,
        cooperative: bool,
        config: CoordinatorConfig | None,
        feed: ConsumerFeedStimuli,
        session_timeout_ms: int,
    ) -> None:
        super().__init__(assignor, cooperative, config)
        limits = self.coordinator.config
        self.feed = feed
        self.session_ms = min(
            max(session_timeout_ms, limits.group_min_session_timeout_ms), limits.group_max_session_timeout_ms
        )
        self.members: dict[tuple[str, str], dict] = {}  # recorded member -> its join stimulus, topics kept current
        self.ids: dict[tuple[str, str], str] = {}  # recorded member -> its member id in the replayed group
        self.recorded_ids: dict[tuple[str, str], tuple[str, str]] = {}  # and back
        self._joining: tuple[tuple[str, str], dict] | None = None
        self._recorded_event: dict | None = None

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[dict]:  # type: ignore[override]
        return super().run(self.feed.stimuli, _by_recorded(self.feed.stimuli, on_progress), until=self.feed.end)

    def _rewrite(self, s: dict) -> dict | None:
        self._recorded_event = event = self._translate(s)
        return event

    def _translate(self, s: dict) -> dict | None:
        kind, group_id, ts = s["kind"], s["group_id"], s["ts"]
        if kind == "event":
            return s["event"]
        key = (group_id, s["member_id"])
        if kind == "join":
            self.members[key] = dict(s)
            self.ids.pop(key, None)
            return self._fresh_join(key, ts)
        member = self.members.get(key)
        if member is None:
            return None
        replayed = self.ids.get(key)
        client = self.clients.get((group_id, replayed)) if replayed is not None else None
        if kind == "leave":
            del self.members[key]
            self.ids.pop(key, None)
            if s["temporary"] or client is None:
                return None  # KIP-345: a static member closes without LeaveGroup
            return _event(
                type="leave",
                group_id=group_id,
                ts=ts,
                member_id=replayed,
                group_instance_id=member["instance_id"],
                reason="the consumer is being closed",
            )
        if kind == "subscribe":
            member["topics"] = s["topics"]
        if client is None:
            # Gone from the replayed group (expired, or its join refused) while the recording shows it alive: a
            # classic client told UNKNOWN_MEMBER_ID joins again, as a new member.
            return self._fresh_join(key, ts)
        if kind == "subscribe":
            return super()._rewrite(self._join(key, ts, replayed))  # a rejoin with the new topics
        if client.awaiting_join:
            return None  # no heartbeats while its JoinGroup waits
        return super()._rewrite(
            _event(
                type="heartbeat",
                group_id=group_id,
                ts=ts,
                member_id=replayed,
                group_instance_id=member["instance_id"],
                generation=0,
            )
        )

    def _join(self, key: tuple[str, str], ts: int, member_id: str) -> dict:
        m = self.members[key]
        timeout = m["rebalance_timeout_ms"]
        return _event(
            type="join",
            group_id=key[0],
            ts=ts,
            member_id=member_id,
            group_instance_id=m["instance_id"],
            client_id=m["client_id"],
            client_host=m["client_host"],
            session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=timeout if timeout > 0 else self.session_ms,
            protocol_type="consumer",
            protocols=[{"name": self.assignor, "topics": m["topics"]}],
        )

    def _fresh_join(self, key: tuple[str, str], ts: int) -> dict:
        event = super()._rewrite(self._join(key, ts, ""))
        self._joining = (key, event)
        return event

    def _send(self, event: dict) -> None:
        if event is not self._recorded_event and not self._reacts(event):
            return
        outputs = self.coordinator.handle(event)
        if self._joining is not None and self._joining[1] is event:
            self._adopt(self._joining[0], event, outputs)
            self._joining = None
        self._observe(outputs)

    def _reacts(self, event: dict) -> bool:
        """Whether a client sends this reaction (SyncGroup, a rejoin): only while the recording shows it alive -- a
        crashed client does nothing. The second JoinGroup of KIP-394 is sent whatever: it is half of the member's
        recorded join, not an answer to this coordinator's assignment."""
        group_id, member_id = event["group_id"], event["member_id"]
        key = self.recorded_ids.get((group_id, member_id))
        if key is None or self.feed.alive(key, event["ts"]):
            return True
        group = self.coordinator.groups.get(group_id)
        if event["type"] == "join" and group is not None and member_id in group.pending_members:
            return True
        client = self.clients.get((group_id, member_id))
        if client is not None and event["type"] == "join":
            client.awaiting_join = False  # it sent no JoinGroup: it waits for none
        return False

    def _adopt(self, key: tuple[str, str], join: dict, outputs: list[dict]) -> None:
        """The member id the replayed coordinator gave a recorded member's join; a dynamic member comes back with it
        ``REACTION_MS`` later (KIP-394)."""
        instance = join["group_instance_id"]
        for o in outputs:
            if instance is None and o["type"] == JOIN_RESPONSE and o["error"] == "MEMBER_ID_REQUIRED":
                self.ids[key] = o["member_id"]
                self.recorded_ids[(key[0], o["member_id"])] = key
                topics = self.members[key]["topics"]
                self.clients[(key[0], o["member_id"])] = _Client(_join_fields(join), topics, awaiting_join=True)
                self._later(
                    o["ts"],
                    dict(_join_fields(join), member_id=o["member_id"], protocols=[self._protocol(topics, None)]),
                )
            elif (
                instance is not None
                and o["type"] in (MEMBER_JOINED, MEMBER_REPLACED)
                and o.get("group_instance_id") == instance
            ):
                self.ids[key] = o["member_id"]
                self.recorded_ids[(key[0], o["member_id"])] = key
