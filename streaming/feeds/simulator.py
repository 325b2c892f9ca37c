"""A seeded simulation of consumer groups that plays the client side of the classic or the consumer protocol.

Classic groups: simulated consumers join (with the KIP-394 member-id round trip), sync, heartbeat every
``heartbeat.interval.ms``, auto-commit, rejoin when told ``REBALANCE_IN_PROGRESS``, and — at random, from the seed —
crash, leave, restart as static members, scale out, or see their topics grow. A local :class:`GroupCoordinator`
answers them, exactly as the broker would.

Consumer-protocol groups (KIP-848, ``SimulationSettings(group_protocol="consumer")``, or ``"mixed"``: every other
group): each member makes its own member id and speaks ``ConsumerGroupHeartbeat`` to a local
:class:`ConsumerGroupCoordinator`, as Kafka's Java consumer does -- a first heartbeat with epoch 0 and its
subscription, then one every heartbeat interval (the coordinator's answer sets it) with its epoch and the partitions
it owns. It reconciles like the Java consumer: an assignment that takes partitions away is applied after a processing
delay (``revocation_delay_ms``: the time to commit and run ``onPartitionsRevoked``), new partitions at once, and
either way the client acknowledges with a heartbeat naming what it now owns. It rejoins with epoch 0 when fenced,
leaves with epoch -1 (a static member with -2, keeping its partitions until it is back or its session ends), and, on
top of the classic disruptions, changes its subscription now and then. It auto-commits as the Java consumer does
(``CommitRequestManager``), with its member epoch as OffsetCommit's ``generationIdOrMemberEpoch``: every
``commit_interval_ms`` the partitions it owns, and also just before it gives partitions up and before it leaves. A
commit refused with STALE_MEMBER_EPOCH is sent again at once when the client has learnt a newer epoch since (the
Java consumer's retry with the latest epoch), and otherwise dropped, as one refused with UNKNOWN_MEMBER_ID (the
member was fenced; its heartbeat finds out and it rejoins). A commit never keeps a consumer-protocol member alive.

What comes out is the event feed the tracker consumes, every event stamped with its virtual time. Same seed and
settings, same feed.
"""

from __future__ import annotations

import base64
import heapq
import random
from itertools import combinations
from dataclasses import dataclass, field
from typing import Callable

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.coordinator.outputs import (
    COMMIT_RESPONSE,
    CONSUMER_HEARTBEAT_RESPONSE,
    HEARTBEAT_RESPONSE,
    JOIN_RESPONSE,
    MEMBER_JOINED,
    MEMBER_REPLACED,
    SYNC_RESPONSE,
)

EAGER_PROTOCOLS = ("range", "roundrobin", "sticky")
# What a Kafka 4.x broker accepts with its defaults (group.consumer.min/max.session.timeout.ms and
# group.consumer.min/max.heartbeat.interval.ms): a consumer-protocol group's session and heartbeat interval must lie
# within these bounds, or the broker must be configured to allow them.
KAFKA_CONSUMER_SESSION_BOUNDS_MS = (45_000, 60_000)
KAFKA_CONSUMER_HEARTBEAT_BOUNDS_MS = (5_000, 15_000)
GROUP_PROTOCOLS = ("classic", "consumer", "mixed")
# Errors a consumer-protocol client rejoins after (with epoch 0, giving up its partitions), as the Java consumer does.
FENCED_ERRORS = ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID")


@dataclass
class SimulationSettings:
    groups: int = 3
    members_per_group: int = 3
    topics_per_group: int = 2
    partitions_per_topic: int = 6
    assignors: tuple[str, ...] = ("range", "roundrobin", "sticky", "cooperative-sticky")
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    commit_interval_ms: int = 5_000
    # Mean time between disruptions (crash, leave, scale-out, static restart, topic growth) in each group.
    churn_interval_ms: int = 20_000
    static_fraction: float = 0.3
    records_per_second: int = 50  # how fast committed offsets advance on each partition
    # Log-end samples (``log_end`` events) of each group's partitions this often, as the tracker's sampler sends
    # them; the producers write ``records_per_second`` to every partition. None: no samples (lag unknown).
    log_end_interval_ms: int | None = None
    seed: int = 0
    # Which protocol the groups speak: "classic", "consumer" (KIP-848) or "mixed" (group-0 classic, group-1
    # consumer, and so on).
    group_protocol: str = "classic"
    # Consumer-protocol groups: the server-side assignor each group's members ask for (group.remote.assignor), one
    # per consumer group in turn, and the coordinator's group.consumer.* settings (Kafka's defaults): the session
    # and the heartbeat interval are the broker's, not the client's, in this protocol (broker_settings() says which
    # ones the feed assumes).
    server_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    revocation_delay_ms: int = 300  # at most this long to give up revoked partitions (uniform from 10 ms)

    def __post_init__(self) -> None:
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {self.group_protocol!r}")

    def is_consumer_group(self, index: int) -> bool:
        return self.group_protocol == "consumer" or (self.group_protocol == "mixed" and index % 2 == 1)

    def broker_settings(self) -> dict[str, int]:
        """The broker settings the consumer-protocol groups of this feed assume: a tracker replaying the feed, or a
        Kafka 4.x broker serving the same clients, needs them. Kafka's defaults (a 45 s session, a 5 s heartbeat)
        need nothing else; other values also name the min/max bounds a default broker would refuse them by."""
        settings = {
            "group.consumer.session.timeout.ms": self.consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms": self.consumer_heartbeat_interval_ms,
        }
        low, high = KAFKA_CONSUMER_SESSION_BOUNDS_MS
        if self.consumer_session_timeout_ms < low:
            settings["group.consumer.min.session.timeout.ms"] = self.consumer_session_timeout_ms
        if self.consumer_session_timeout_ms > high:
            settings["group.consumer.max.session.timeout.ms"] = self.consumer_session_timeout_ms
        low, high = KAFKA_CONSUMER_HEARTBEAT_BOUNDS_MS
        if self.consumer_heartbeat_interval_ms < low:
            settings["group.consumer.min.heartbeat.interval.ms"] = self.consumer_heartbeat_interval_ms
        if self.consumer_heartbeat_interval_ms > high:
            settings["group.consumer.max.heartbeat.interval.ms"] = self.consumer_heartbeat_interval_ms
        return settings

    def consumer_config(self) -> ConsumerGroupConfig:
        """The coordinator settings of the consumer-protocol groups (a tracker replaying the feed needs the same)."""
        return ConsumerGroupConfig(
            group_consumer_session_timeout_ms=self.consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms=self.consumer_heartbeat_interval_ms,
            group_consumer_assignors=tuple(dict.fromkeys((*self.server_assignors, "uniform", "range"))),
        )


@dataclass
class Client:
    """One simulated KafkaConsumer."""

    name: str
    group_id: str
    protocol: str
    topics: list[str]
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    phase: str = "joining"  # joining / awaiting-join / syncing / stable / gone
    assignment: list[tuple[str, int]] = field(default_factory=list)
    epoch: int = 0  # bumps on every restart so stale scheduled actions are ignored
    # Consumer protocol (KIP-848): ``protocol`` is then the server assignor the member asks for.
    consumer: bool = False
    member_epoch: int = 0  # the epoch the coordinator last gave (0: (re)joining)
    pending: list[tuple[str, int]] | None = None  # the last assignment received and not yet reconciled
    reconcile_token: int = 0
    heartbeat_interval_ms: int = 0
    commit_epoch: int = -1  # the member epoch its last commit was sent with

    @property
    def cooperative(self) -> bool:
        return self.protocol == "cooperative-sticky"


class Simulator:
    def __init__(
        self, settings: SimulationSettings | None = None, start_ms: int = 0, config: CoordinatorConfig | None = None
    ) -> None:
        self.settings = s = settings or SimulationSettings()
        self.rng = random.Random(s.seed)
        self.now = start_ms
        self.start_ms = start_ms
        self.coordinator = GroupCoordinator(config or CoordinatorConfig())
        self.consumer_coordinator = ConsumerGroupCoordinator(s.consumer_config())
        # What consumer-protocol clients were answered with an error (well-behaved clients get none but the
        # FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID a session or rebalance timeout earns): (ts, group, member, error).
        self.consumer_errors: list[tuple[int, str, str, str]] = []
        self.consumer_groups: set[str] = set()
        self.group_protocols: dict[str, str] = {}
        self.clients: dict[str, Client] = {}
        self.by_member: dict[tuple[str, str], Client] = {}
        self.topic_sizes: dict[str, int] = {}
        self.group_topics: dict[str, list[str]] = {}
        self._agenda: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._events: list[dict] = []
        self._client_seq = 0
        self._calm = False
        self._setup()

    # ------------------------------------------------------------------ driving
    def run_until(self, t_ms: int) -> list[dict]:
        """Advance virtual time to ``t_ms``; return the feed events produced, in order."""
        while True:
            next_action = self._agenda[0][0] if self._agenda else None
            next_timer = self._next_timer()
            candidates = [t for t in (next_action, next_timer) if t is not None and t <= t_ms]
            if not candidates:
                break
            t = min(candidates)
            self.now = max(self.now, t)
            if next_timer is not None and next_timer == t and (next_action is None or next_timer < next_action):
                self._dispatch(self.coordinator.advance(t))
                if self.consumer_groups:
                    self._dispatch(self.consumer_coordinator.advance(t))
            else:
                _, _, action = heapq.heappop(self._agenda)
                action()
        self.now = max(self.now, t_ms)
        events, self._events = self._events, []
        return events

    def _next_timer(self) -> int | None:
        deadlines = [self.coordinator.next_deadline()]
        if self.consumer_groups:
            deadlines.append(self.consumer_coordinator.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    def _at(self, t: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._agenda, (t, self._seq, action))

    def _send(self, **fields) -> None:
        fields["ts"] = self.now
        event, error = parse_event(fields)
        assert error is None, error  # the simulator only sends well-formed events
        self._events.append(event)
        if event["type"] == "log_end":  # for the tracker's lag, not a request to the coordinators
            return
        if event["type"] == "consumer_heartbeat" or (
            event["type"] == "commit" and event["group_id"] in self.consumer_groups
        ):
            self._dispatch(self.consumer_coordinator.handle(event))
            return
        if event["type"] != "topic_metadata" or event.get("group_id"):
            self._dispatch(self.coordinator.handle(event))
        if event["type"] == "topic_metadata" and self.consumer_groups:
            self._dispatch(self.consumer_coordinator.handle(event))

    # ------------------------------------------------------------------ scenario
    def _setup(self) -> None:
        s = self.settings
        for g in range(s.groups):
            group_id = f"group-{g}"
            topics = [f"topic-{g}-{i}" for i in range(s.topics_per_group)]
            self.group_topics[group_id] = topics
            if s.is_consumer_group(g):
                self.consumer_groups.add(group_id)
                protocol = s.server_assignors[(len(self.consumer_groups) - 1) % len(s.server_assignors)]
            else:
                protocol = s.assignors[g % len(s.assignors)]
            self.group_protocols[group_id] = protocol
            for topic in topics:
                self.topic_sizes[topic] = s.partitions_per_topic
                self._send(type="topic_metadata", group_id=group_id, topic=topic, partitions=s.partitions_per_topic)
            for _ in range(s.members_per_group):
                self._start_client(self._new_client(group_id, protocol), delay=self.rng.randrange(0, 500))
            self._at(self.now + self._churn_delay(), lambda gid=group_id: self._disrupt(gid))
            if s.log_end_interval_ms:
                self._at(self.now + s.log_end_interval_ms, lambda gid=group_id: self._sample_log_ends(gid))

    def _sample_log_ends(self, group_id: str) -> None:
        end = (self.now - self.start_ms) * self.settings.records_per_second // 1000
        for topic in self.group_topics[group_id]:
            for partition in range(self.topic_sizes[topic]):
                self._send(type="log_end", group_id=group_id, topic=topic, partition=partition, offset=end)
        self._at(self.now + self.settings.log_end_interval_ms, lambda: self._sample_log_ends(group_id))

    def _new_client(self, group_id: str, protocol: str) -> Client:
        self._client_seq += 1
        name = f"{group_id}-consumer-{self._client_seq}"
        static = self.rng.random() < self.settings.static_fraction
        client = Client(
            name,
            group_id,
            protocol,
            list(self.group_topics[group_id]),
            instance_id=f"{name}-instance" if static else None,
            consumer=group_id in self.consumer_groups,
        )
        self.clients[name] = client
        return client

    def _member_uuid(self) -> str:
        """A member id as the consumer makes one (KIP-1082: ``Uuid.randomUuid()``), from the seed."""
        return base64.urlsafe_b64encode(self.rng.getrandbits(128).to_bytes(16, "big")).rstrip(b"=").decode()

    def _churn_delay(self) -> int:
        return int(self.rng.expovariate(1 / self.settings.churn_interval_ms)) + 1_000

    def stop_disruptions(self) -> None:
        """From now on nothing crashes, leaves, restarts, scales out or grows: the groups are left to settle."""
        self._calm = True

    def _disrupt(self, group_id: str) -> None:
        if self._calm:
            return
        alive = [c for c in self.clients.values() if c.group_id == group_id and c.phase != "gone"]
        roll = self.rng.random()
        target = self.rng.choice(alive) if alive else None
        if target is None or roll < 0.25:
            self._start_client(self._new_client(group_id, self._group_protocol(group_id)))
        elif roll < 0.45:
            self._crash(target)
        elif roll < 0.65:
            self._leave(target)
        elif roll < 0.85 and target.instance_id is not None:
            self._restart_static(target)
        elif roll < 0.85:
            self._crash(target)
            self._at(self.now + 2_000, lambda: self._start_client(self._new_client(group_id, target.protocol)))
        elif target.consumer and roll < 0.92 and len(self.group_topics[group_id]) > 1:
            self._change_subscription(target)
        else:
            topic = self.rng.choice(self.group_topics[group_id])
            self.topic_sizes[topic] += self.rng.randint(1, 3)
            self._send(type="topic_metadata", group_id=group_id, topic=topic, partitions=self.topic_sizes[topic])
        self._at(self.now + self._churn_delay(), lambda: self._disrupt(group_id))

    def _group_protocol(self, group_id: str) -> str:
        return self.group_protocols[group_id]

    # ------------------------------------------------------------------ client behaviour
    def _start_client(self, client: Client, delay: int = 0) -> None:
        self.by_member.pop((client.group_id, client.member_id), None)  # a restarted consumer forgets its old id
        client.epoch += 1
        client.phase, client.member_id, client.generation, client.assignment = "joining", "", -1, []
        if client.consumer:
            client.member_id = self._member_uuid()  # a new process makes a new member id
            client.member_epoch, client.pending = 0, None
            self.by_member[(client.group_id, client.member_id)] = client
            self._at(self.now + delay, self._guard(client, lambda: self._consumer_join(client)))
            return
        self._at(self.now + delay, self._guard(client, lambda: self._join(client)))

    def _guard(self, client: Client, action: Callable[[], None]) -> Callable[[], None]:
        epoch = client.epoch
        return lambda: action() if client.epoch == epoch and client.phase != "gone" else None

    def _join(self, client: Client) -> None:
        s = self.settings
        protocol = {"name": client.protocol, "topics": client.topics}
        if client.cooperative and client.member_id:
            protocol["owned_partitions"] = [list(tp) for tp in client.assignment]
            protocol["generation"] = client.generation
        client.phase = "awaiting-join"
        self._send(
            type="join",
            group_id=client.group_id,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            client_id=client.name,
            client_host="/10.0.0.1",
            session_timeout_ms=s.session_timeout_ms,
            rebalance_timeout_ms=s.rebalance_timeout_ms,
            protocol_type="consumer",
            protocols=[protocol],
        )

    def _heartbeat_loop(self, client: Client) -> None:
        if client.phase not in ("syncing", "stable"):
            return
        self._send(
            type="heartbeat",
            group_id=client.group_id,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            generation=client.generation,
        )
        if client.phase in ("syncing", "stable"):
            self._at(
                self.now + self.settings.heartbeat_interval_ms,
                self._guard(client, lambda: self._heartbeat_loop(client)),
            )

    def _offsets(self, client: Client) -> list[dict]:
        return [
            {
                "topic": t,
                "partition": p,
                "offset": (self.now - self.start_ms) * self.settings.records_per_second // 1000,
            }
            for t, p in client.assignment
        ]

    def _commit_loop(self, client: Client) -> None:
        if client.consumer:
            if client.phase == "stable":
                self._consumer_commit(client)
        elif client.phase == "stable" and client.assignment:
            self._send(
                type="commit",
                group_id=client.group_id,
                member_id=client.member_id,
                group_instance_id=client.instance_id,
                generation=client.generation,
                offsets=self._offsets(client),
            )
        if client.phase != "gone":
            self._at(
                self.now + self.settings.commit_interval_ms, self._guard(client, lambda: self._commit_loop(client))
            )

    # ------------------------------------------------------------------ consumer protocol (KIP-848) clients
    def _consumer_heartbeat(self, client: Client, epoch: int, **fields) -> None:
        self._send(
            type="consumer_heartbeat",
            group_id=client.group_id,
            member_id=client.member_id,
            member_epoch=epoch,
            instance_id=client.instance_id,
            client_id=client.name,
            client_host="/10.0.0.1",
            **fields,
        )

    def _consumer_commit(self, client: Client) -> None:
        """OffsetCommit of the partitions the client owns, at the epoch it last heard of."""
        if not client.assignment or client.member_epoch <= 0:
            return
        client.commit_epoch = client.member_epoch
        self._send(
            type="commit",
            group_id=client.group_id,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            generation=client.member_epoch,
            offsets=self._offsets(client),
        )

    def _on_consumer_commit(self, client: Client, o: dict) -> None:
        if o["error"] == "NONE":
            return
        self.consumer_errors.append((self.now, client.group_id, client.member_id, o["error"]))
        if (
            o["error"] == "STALE_MEMBER_EPOCH"
            and client.member_epoch != client.commit_epoch
            and client.phase == "stable"
        ):
            self._consumer_commit(client)  # again with the latest epoch (it differs: no loop)

    def _consumer_join(self, client: Client) -> None:
        """The first heartbeat (or a rejoin after being fenced): epoch 0, the whole subscription, nothing owned."""
        client.phase = "awaiting-join"
        client.member_epoch, client.assignment, client.pending = 0, [], None
        self._consumer_heartbeat(
            client,
            0,
            rebalance_timeout_ms=self.settings.rebalance_timeout_ms,
            subscribed_topic_names=list(client.topics),
            server_assignor=client.protocol,
            topic_partitions=[],
        )

    def _owned(self, client: Client) -> list[list]:
        return [[t, p] for t, p in sorted(client.assignment)]

    def _consumer_heartbeat_loop(self, client: Client) -> None:
        if client.phase != "stable":
            return
        self._consumer_heartbeat(client, client.member_epoch, topic_partitions=self._owned(client))
        if client.phase == "stable":
            self._at(
                self.now + client.heartbeat_interval_ms,
                self._guard(client, lambda: self._consumer_heartbeat_loop(client)),
            )

    def _change_subscription(self, client: Client) -> None:
        """The application subscribes to another set of the group's topics (``KafkaConsumer.subscribe``)."""
        topics = self.group_topics[client.group_id]
        choices = [
            sorted(c)
            for n in range(1, len(topics) + 1)
            for c in combinations(topics, n)
            if sorted(c) != sorted(client.topics)
        ]
        client.topics = self.rng.choice(choices)
        if client.phase == "stable":
            self._consumer_heartbeat(
                client,
                client.member_epoch,
                subscribed_topic_names=list(client.topics),
                topic_partitions=self._owned(client),
            )

    def _on_consumer_response(self, client: Client, o: dict) -> None:
        error = o["error"]
        if error != "NONE":
            self.consumer_errors.append((self.now, client.group_id, client.member_id, error))
            if error in FENCED_ERRORS:
                # The Java consumer gives up its partitions and rejoins with the same member id and epoch 0.
                client.epoch += 1
                client.phase = "joining"
                client.assignment, client.pending = [], None
                self._at(self.now + self.rng.randrange(1, 50), self._guard(client, lambda: self._consumer_join(client)))
            elif client.phase == "awaiting-join":
                # E.g. UNRELEASED_INSTANCE_ID: the instance's previous member is still there; try again later.
                client.epoch += 1
                client.phase = "joining"
                self._at(
                    self.now + self.settings.consumer_heartbeat_interval_ms,
                    self._guard(client, lambda: self._consumer_join(client)),
                )
            return
        if o["member_epoch"] < 0:
            return  # the answer to a leave
        client.member_epoch = o["member_epoch"]
        if o["heartbeat_interval_ms"] > 0:
            client.heartbeat_interval_ms = o["heartbeat_interval_ms"]
        if client.phase == "awaiting-join":
            client.phase = "stable"
            self._at(
                self.now + client.heartbeat_interval_ms,
                self._guard(client, lambda: self._consumer_heartbeat_loop(client)),
            )
            self._at(
                self.now + self.settings.commit_interval_ms, self._guard(client, lambda: self._commit_loop(client))
            )
        if o["assignment"] is None:
            return
        new = sorted((a["topic"], p) for a in o["assignment"] for p in a["partitions"])
        current = client.pending if client.pending is not None else client.assignment
        if set(new) == set(current):
            return
        reconciling = client.pending is not None
        client.pending = new
        if reconciling:
            return  # the reconciliation under way applies the newest assignment when it is done
        client.reconcile_token += 1
        token = client.reconcile_token
        # Revoking takes the application's time (commit, onPartitionsRevoked); taking new partitions does not.
        revokes = bool(set(client.assignment) - set(new))
        delay = self.rng.randrange(10, max(self.settings.revocation_delay_ms, 11)) if revokes else 1
        self._at(self.now + delay, self._guard(client, lambda: self._reconcile(client, token)))

    def _reconcile(self, client: Client, token: int) -> None:
        """The client now owns the last assignment it received and says so (the acknowledging heartbeat)."""
        if token != client.reconcile_token or client.pending is None or client.phase != "stable":
            return
        if set(client.assignment) - set(client.pending):
            self._consumer_commit(client)  # auto-commit before the revocation (onPartitionsRevoked)
        client.assignment, client.pending = client.pending, None
        self._consumer_heartbeat(client, client.member_epoch, topic_partitions=self._owned(client))

    def _crash(self, client: Client) -> None:
        client.phase = "gone"  # heartbeats simply stop; the session timeout will notice
        client.epoch += 1
        self._forget(client)

    def _forget(self, client: Client) -> None:
        """A consumer gone for good (crashed, closed, fenced): nothing will look it up again. A live feed makes
        hundreds of them a minute; kept, they grew the simulator without bound (~1 MB a minute for 300 groups) and
        slowed every look-up that scans the clients. (A static member that bounces comes back: not forgotten.)"""
        self.clients.pop(client.name, None)
        for key in [key for key, held in self.by_member.items() if held is client]:
            del self.by_member[key]

    def _leave(self, client: Client) -> None:
        if client.consumer:
            if client.phase == "stable":
                # Close: commit, then -1 leaves for good; a static member leaves with -2 and keeps its partitions.
                self._consumer_commit(client)
                self._consumer_heartbeat(client, -1 if client.instance_id is None else -2)
            client.phase = "gone"
            client.epoch += 1
            self._forget(client)
            return
        if client.instance_id is None and client.member_id:
            self._send(
                type="leave",
                group_id=client.group_id,
                member_id=client.member_id,
                group_instance_id=None,
                reason="the consumer is being closed",
            )
        client.phase = "gone"  # static members do not send LeaveGroup on close (KIP-345)
        client.epoch += 1
        self._forget(client)

    def _restart_static(self, client: Client) -> None:
        """A static member bounces (e.g. a rolling deploy): gone for a while, back with a new member id."""
        if client.consumer and client.phase == "stable":
            self._consumer_commit(client)  # closing: commit, then a temporary leave
            self._consumer_heartbeat(client, -2)
        client.phase = "gone"
        client.epoch += 1
        session = self.settings.consumer_session_timeout_ms if client.consumer else self.settings.session_timeout_ms
        downtime = self.rng.randrange(1_000, session // 2)

        def come_back() -> None:
            client.phase = "joining"
            self._start_client(client)

        self._at(self.now + downtime, come_back)

    # ------------------------------------------------------------------ responses
    def _dispatch(self, outputs: list[dict]) -> None:
        for o in outputs:
            kind = o["type"]
            client = self.by_member.get((o["group_id"], o.get("member_id", "")))
            if kind in (MEMBER_JOINED, MEMBER_REPLACED) and client is None:
                client = self._pending_static(o)
                if client is not None:
                    client.member_id = o["member_id"]
                    self.by_member[(o["group_id"], client.member_id)] = client
            if kind == JOIN_RESPONSE:
                self._on_join_response(o)
            elif client is None or client.phase == "gone":
                continue
            elif kind == CONSUMER_HEARTBEAT_RESPONSE:
                self._on_consumer_response(client, o)
            elif client.consumer and kind == COMMIT_RESPONSE:
                self._on_consumer_commit(client, o)
            elif kind == SYNC_RESPONSE:
                self._on_sync_response(client, o)
            elif kind == HEARTBEAT_RESPONSE and o["error"] == "REBALANCE_IN_PROGRESS":
                self._rejoin(client)
            elif kind in (HEARTBEAT_RESPONSE, COMMIT_RESPONSE) and o["error"] in (
                "UNKNOWN_MEMBER_ID",
                "ILLEGAL_GENERATION",
                "FENCED_INSTANCE_ID",
            ):
                if o["error"] == "FENCED_INSTANCE_ID":
                    client.phase = "gone"
                    self._forget(client)
                else:
                    self._start_client(client)

    def _pending_static(self, o: dict) -> Client | None:
        instance = o.get("group_instance_id")
        if instance is None:
            return None
        return next(
            (
                c
                for c in self.clients.values()
                if c.instance_id == instance and c.phase == "awaiting-join" and c.group_id == o["group_id"]
            ),
            None,
        )

    def _on_join_response(self, o: dict) -> None:
        error = o["error"]
        if error == "MEMBER_ID_REQUIRED":
            client = next(
                (
                    c
                    for c in self.clients.values()
                    if c.group_id == o["group_id"]
                    and c.phase == "awaiting-join"
                    and not c.member_id
                    and c.instance_id is None
                ),
                None,
            )
            if client is not None:
                client.member_id = o["member_id"]
                self.by_member[(o["group_id"], client.member_id)] = client
                self._join(client)
            return
        client = self.by_member.get((o["group_id"], o["member_id"]))
        if client is None or client.phase == "gone":
            return
        if error != "NONE":
            if error in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"):
                if error == "FENCED_INSTANCE_ID":
                    client.phase = "gone"
                    self._forget(client)
                if error == "UNKNOWN_MEMBER_ID":
                    self._start_client(client)
            return
        client.generation = o["generation"]
        was_syncing_or_stable = client.phase in ("syncing", "stable")
        client.phase = "syncing"
        if not was_syncing_or_stable:
            # Java's consumer enables its heartbeat thread on entering COMPLETING_REBALANCE, not once synced.
            self._at(
                self.now + self.settings.heartbeat_interval_ms,
                self._guard(client, lambda: self._heartbeat_loop(client)),
            )
        # The leader would run the assignor here; the coordinator in tracker mode does it for the leader.
        self._at(self.now + self.rng.randrange(1, 30), self._guard(client, lambda: self._sync(client)))

    def _sync(self, client: Client) -> None:
        if client.phase != "syncing":
            return
        self._send(
            type="sync",
            group_id=client.group_id,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            generation=client.generation,
        )

    def _on_sync_response(self, client: Client, o: dict) -> None:
        if o["error"] != "NONE":
            if o["error"] == "REBALANCE_IN_PROGRESS":
                self._rejoin(client)
            return
        was_stable = client.phase == "stable"
        new = [(t, int(p)) for t, p in o["assignment"]]
        revoked = set(client.assignment) - set(new)
        client.assignment = new
        client.phase = "stable"
        if not was_stable:
            self._at(
                self.now + self.settings.commit_interval_ms, self._guard(client, lambda: self._commit_loop(client))
            )
        if client.cooperative and revoked:
            # Cooperative: partitions given up in this round are handed out in a follow-up round.
            self._rejoin(client)

    def _rejoin(self, client: Client) -> None:
        if client.phase in ("awaiting-join", "gone"):
            return
        if not client.cooperative:
            client.assignment = []  # eager: everything is revoked before rejoining
        client.epoch += 1
        client.phase = "joining"
        self._at(self.now + self.rng.randrange(1, 50), self._guard(client, lambda: self._join(client)))
