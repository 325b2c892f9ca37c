"""The worked timelines of docs/figures.md, one test each: the real coordinators driven through the timeline, and the
figures their ``rebalance`` records carry (and the views show) against the numbers computed by hand in the doc."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.coordinator.consumer import records as R
from streaming.coordinator.figures import spans_of
from streaming.feeds.cluster_feed import OBSERVER_SETTINGS, ClusterFeed
from streaming.views import replay, report
from streaming.views.history import build_history
from streaming.views.live_view import LiveView
from streaming.views.replay.settings import REACTION_MS
from tests.coordinator_harness import Harness, of_type, one
from tests.views.test_report import _tables

T = [("t", p) for p in range(6)]


def rebalances(outputs: list[dict]) -> list[dict]:
    return of_type(outputs, "rebalance")


def spans(record: dict) -> list[tuple]:
    """(partition, released, taken, no members, unavailable) of each span a rebalance closed."""
    return [(s.partition[1], s.released_ts, s.taken_ts, s.no_members_ms, s.unavailable_ms) for s in spans_of(record)]


def parts(*ps: int) -> list[list]:
    return [["t", p] for p in ps]


# ---------------------------------------------------------------------- classic
def classic(protocol: str = "range", **config) -> Harness:
    h = Harness(**config)
    h.now = 0
    h.protocols = [{"name": protocol, "topics": ["t"]}]
    return h


def join(h: Harness, member_id: str = "", owned=None, **kw) -> list[dict]:
    protocols = [dict(h.protocols[0])]
    if owned is not None:
        protocols[0].update(owned_partitions=parts(*owned), generation=h.generation())
    return h.join(member_id=member_id, protocols=protocols, session=30_000, **kw)


def new_member(h: Harness, name: str, **kw) -> str:
    member_id = one(join(h, client_id=name, **kw), "join_response")["member_id"]
    join(h, member_id, client_id=name, **kw)
    return member_id


def stable_pair(h: Harness) -> tuple[str, str]:
    """a and b Stable at 0 (generation 1): a t-0 t-1, b t-2 t-3."""
    a, b = new_member(h, "a"), new_member(h, "b")
    h.tick(0)
    h.sync(a, 1, assignments={a: parts(0, 1), b: parts(2, 3)})
    h.sync(b, 1)
    assert h.state() == "Stable" and h.leader() == a
    return a, b


def at(h: Harness, seconds: float) -> None:
    h.now = int(seconds * 1000)


def test_eager_join():
    h = classic("range")
    a, b = stable_pair(h)
    at(h, 10.0)
    c = new_member(h, "c")
    assert h.state() == "PreparingRebalance"
    at(h, 11.0)
    assert h.heartbeat(a, 1) == "REBALANCE_IN_PROGRESS"
    join(h, a, client_id="a")
    at(h, 12.0)
    assert h.heartbeat(b, 1) == "REBALANCE_IN_PROGRESS"
    join(h, b, client_id="b")
    assert h.state() == "CompletingRebalance"
    at(h, 12.5)
    h.sync(a, 2, assignments={a: parts(0, 1), b: parts(2), c: parts(3)})
    first, second = rebalances(h.outputs)
    assert (first["trigger"], first["duration_ms"], first["partitions_moved"], spans(first)) == ("join", 0, 0, [])
    assert (second["trigger"], second["started_ts"], second["completed_ts"], second["duration_ms"]) == (
        "join",
        10_000,
        12_500,
        2_500,
    )
    assert second["partitions_moved"] == 1  # t-3, b -> c
    # Each partition from the moment its consumer learnt of the round, not from the round's start.
    assert spans(second) == [
        (0, 11_000, 12_500, 0, 1_500),
        (1, 11_000, 12_500, 0, 1_500),
        (2, 12_000, 12_500, 0, 500),
        (3, 12_000, 12_500, 0, 500),
    ]
    assert second["max_partition_unavailable_ms"] == 1_500 and second["awaiting_owner"] == []
    g = build_history(h.outputs, "g").generations[-1]
    assert (g.unavailable_partition_ms, g.balance, g.settled) == (4_000, 1, True)


def test_cooperative_join_two_rounds():
    h = classic("cooperative-sticky")
    a, b = stable_pair(h)
    at(h, 10.0)
    c = new_member(h, "c", owned=[])
    at(h, 11.0)
    assert h.heartbeat(a, 1) == "REBALANCE_IN_PROGRESS"
    join(h, a, owned=[0, 1], client_id="a")
    at(h, 12.0)
    assert h.heartbeat(b, 1) == "REBALANCE_IN_PROGRESS"
    join(h, b, owned=[2, 3], client_id="b")
    at(h, 12.5)
    h.sync(a, 2, assignments={a: parts(0, 1), b: parts(2), c: []})
    h.sync(b, 2)
    h.sync(c, 2)
    first_round = rebalances(h.outputs)[-1]
    assert (
        first_round["generation"],
        first_round["rebalance_protocol"],
        first_round["duration_ms"],
        first_round["partitions_moved"],
        spans(first_round),
    ) == (2, "cooperative", 2_500, 1, [])
    # b was told to give t-3 up by this round's SyncGroup answer: released, awaiting its next owner.
    assert first_round["awaiting_owner"] == [["t", 3, 12_500]] and first_round["max_partition_unavailable_ms"] == 0
    at(h, 12.6)
    join(h, b, owned=[2], client_id="b")  # b revoked t-3 and rejoins
    assert h.state() == "PreparingRebalance"
    at(h, 13.0)
    assert h.heartbeat(a, 2) == "REBALANCE_IN_PROGRESS"
    join(h, a, owned=[0, 1], client_id="a")
    assert h.heartbeat(c, 2) == "REBALANCE_IN_PROGRESS"
    join(h, c, owned=[], client_id="c")
    at(h, 13.5)
    h.sync(a, 3, assignments={a: parts(0, 1), b: parts(2), c: parts(3)})
    second_round = rebalances(h.outputs)[-1]
    assert (
        second_round["generation"],
        second_round["started_ts"],
        second_round["duration_ms"],
        second_round["partitions_moved"],
    ) == (3, 12_600, 900, 0)
    assert spans(second_round) == [(3, 12_500, 13_500, 0, 1_000)]  # only t-3, 1 s
    assert second_round["max_partition_unavailable_ms"] == 1_000 and second_round["awaiting_owner"] == []
    gens = build_history(h.outputs, "g").generations
    # The first round's lopsided assignment (2/1/0) is not one the group settles on; the second is.
    assert [(g.generation, g.balance, g.settled) for g in gens[1:]] == [(2, 2, False), (3, 1, True)]


def test_empty_group_and_back_classic():
    h = classic("range", group_initial_rebalance_delay_ms=3_000)
    a = new_member(h, "a")
    at(h, 3.0)
    h.tick(0)
    h.sync(a, 1, assignments={a: parts(0, 1)})
    at(h, 10.0)
    h.send(type="leave", member_id=a, group_instance_id=None)
    assert h.state() == "Empty"
    empty = rebalances(h.outputs)[-1]
    assert (empty["trigger"], empty["duration_ms"], empty["partitions_moved"], spans(empty)) == ("leave", 0, 2, [])
    assert empty["awaiting_owner"] == [["t", 0, 10_000], ["t", 1, 10_000]] and empty["members"] == []
    at(h, 70.0)
    b = new_member(h, "b")
    at(h, 73.0)
    h.tick(0)  # the initial delay ends the round
    h.sync(b, 3, assignments={b: parts(0, 1)})
    back = rebalances(h.outputs)[-1]
    assert (back["trigger"], back["started_ts"], back["duration_ms"], back["partitions_moved"]) == (
        "join",
        70_000,
        3_000,
        0,
    )
    # 63 s without an owner, 60 of them with nobody in the group: 3 s of unavailability, the join round's.
    assert spans(back) == [(0, 10_000, 73_000, 60_000, 3_000), (1, 10_000, 73_000, 60_000, 3_000)]
    assert back["max_partition_unavailable_ms"] == 3_000


def test_static_restarts_classic():
    h = classic("range")
    pod = one(join(h, instance_id="pod-a", client_id="a"), "member_joined")["member_id"]
    b = new_member(h, "b")
    h.tick(0)
    h.sync(pod, 1, assignments={pod: parts(0, 1), b: parts(2, 3)}, instance_id="pod-a")
    h.sync(b, 1)
    at(h, 10.0)
    restarted = one(join(h, instance_id="pod-a", client_id="a"), "member_replaced")["member_id"]
    assert h.state() == "Stable" and len(rebalances(h.outputs)) == 1  # no rebalance, no figure
    at(h, 20.0)
    h.send(type="leave", member_id=b, group_instance_id=None)
    at(h, 21.0)
    assert h.heartbeat(restarted, 1, instance_id="pod-a") == "REBALANCE_IN_PROGRESS"
    join(h, restarted, instance_id="pod-a", client_id="a")
    at(h, 21.5)
    h.sync(restarted, 2, assignments={restarted: parts(0, 1, 2, 3)}, instance_id="pod-a")
    leave = rebalances(h.outputs)[-1]
    assert (leave["trigger"], leave["duration_ms"], leave["partitions_moved"]) == ("leave", 1_500, 2)
    assert spans(leave) == [
        (0, 21_000, 21_500, 0, 500),
        (1, 21_000, 21_500, 0, 500),
        (2, 20_000, 21_500, 0, 1_500),
        (3, 20_000, 21_500, 0, 1_500),
    ]


def test_cluster_feed_figures_are_unknown():
    """A classic group followed from its __consumer_offsets records: when a round began and when the eager
    consumers gave their partitions up are not in them."""

    def snapshot(generation: int, ts: int, members: dict[str, list]) -> dict:
        return {
            "type": "group_metadata",
            "group_id": "g",
            "tombstone": False,
            "protocol_type": "consumer",
            "generation": generation,
            "protocol": "range",
            "leader": "a-1",
            "value_version": 2,
            "current_state_timestamp": ts,
            "members": [
                {
                    "member_id": m,
                    "client_id": m[0],
                    "client_host": "/h",
                    "session_timeout": 10_000,
                    "rebalance_timeout": 10_000,
                    "subscription": {"topics": ["t"], "user_data": ""},
                    "assignment": {"partitions": ps, "user_data": ""},
                }
                for m, ps in members.items()
            ],
        }

    tracker = GroupCoordinator(CoordinatorConfig.from_properties(OBSERVER_SETTINGS))
    feed, outputs = ClusterFeed(), []
    for record in (snapshot(1, 10_000, {"a-1": parts(0, 1)}), snapshot(2, 20_000, {"a-1": parts(0), "b-1": parts(1)})):
        for raw in feed.events_for(record):
            event, error = parse_event(raw)
            assert error is None, error
            outputs += tracker.handle(event)
    second = rebalances(outputs)[-1]
    assert (second["generation"], second["completed_ts"], second["started_ts"], second["duration_ms"]) == (
        2,
        20_000,
        None,
        None,
    )
    assert second["partitions_moved"] == 1 and second["max_partition_unavailable_ms"] is None
    assert spans(second) == [(0, None, 20_000, None, None), (1, None, 20_000, None, None)]
    g = build_history(outputs, "g").generations[-1]
    assert (g.duration_ms, g.unavailable_partition_ms, g.balance) == (None, None, 0)
    view = LiveView(redraw=False)
    view.update(0, outputs)
    (row,) = view._picture(None)[1]
    assert row[LiveView.HEADER.index("TOOK")] == "?" and row[LiveView.HEADER.index("MOVED")] == "1"
    tables = _tables(report.render_html(build_history(outputs, "g")))
    summary = dict(tables["summary"])
    assert summary["longest rebalance (ms)"] == "unknown" and summary["max partition unavailability (ms)"] == "unknown"
    assert summary["partitions moved"] == "1"
    row = tables["generations"][-1]  # generation, ..., started, duration, join ms, sync ms, moved, max
    assert row[7:13] == ["unknown", "?", "?", "0", "1", "?"]
    score = replay.score("observed", outputs)
    assert score.max_rebalance_ms is None and score.max_unavailable_ms is None and score.partitions_moved == 1
    assert "?" in replay.format_table([score])


# ---------------------------------------------------------------------- consumer protocol
class Consumer:
    """A scripted consumer-protocol group on topic t (server assignor ``assignor``)."""

    def __init__(self, partitions: int, assignor: str = "uniform", **config) -> None:
        self.coordinator = ConsumerGroupCoordinator(ConsumerGroupConfig(**config))
        self.assignor = assignor
        self.outputs: list[dict] = []
        self.events: list[dict] = []
        self.send({"type": "topic_metadata", "topic": "t", "partitions": partitions}, 0)

    def send(self, fields: dict, seconds: float) -> list[dict]:
        event, error = parse_event({"group_id": "g", "ts": int(seconds * 1000), **fields})
        assert error is None, error
        self.events.append(event)
        out = self.coordinator.advance(event["ts"] - 1) + self.coordinator.handle(event)
        self.outputs += out
        return out

    def heartbeat(self, seconds: float, member: str, epoch: int, owned=(), **fields) -> dict:
        out = self.send(
            {
                "type": "consumer_heartbeat",
                "member_id": member,
                "member_epoch": epoch,
                "topic_partitions": parts(*owned),
                **fields,
            },
            seconds,
        )
        return one(out, "consumer_heartbeat_response")

    def join(self, seconds: float, member: str, **fields) -> dict:
        return self.heartbeat(
            seconds,
            member,
            0,
            subscribed_topic_names=["t"],
            rebalance_timeout_ms=30_000,
            server_assignor=self.assignor,
            **fields,
        )


def test_consumer_join_and_expiry():
    g = Consumer(4, group_consumer_session_timeout_ms=10_000, group_consumer_heartbeat_interval_ms=3_000)
    g.join(0.0, "a")
    g.join(1.0, "b")
    assert g.heartbeat(2.0, "a", 1, [0, 1, 2, 3])["member_epoch"] == 1  # told to revoke t-2, t-3
    assert g.heartbeat(2.1, "a", 1, [0, 1])["member_epoch"] == 2  # acknowledged; a then crashes
    g.heartbeat(3.0, "b", 2)
    g.heartbeat(8.0, "b", 2, [2, 3])
    g.heartbeat(13.0, "b", 2, [2, 3])
    one_, two, three = rebalances(g.outputs)
    assert [
        (r["trigger"], r["started_ts"], r["completed_ts"], r["duration_ms"], r["partitions_moved"])
        for r in (one_, two, three)
    ] == [("join", 0, 0, 0, 0), ("join", 1_000, 3_000, 2_000, 2), ("expiry", 12_100, 13_000, 900, 2)]
    assert spans(two) == [(2, 2_000, 3_000, 0, 1_000), (3, 2_000, 3_000, 0, 1_000)]
    assert spans(three) == [(0, 12_100, 13_000, 0, 900), (1, 12_100, 13_000, 0, 900)]
    h = build_history(g.outputs, "g")
    assert sorted((r.lane, r.duration_ms) for r in h.reconciliations) == [("a", 1_100), ("b", 2_000)]
    assert [(r.partition[1], r.latency_ms) for r in h.revocations] == [(2, 100), (3, 100)]


def test_stable_to_stable_epoch_bump():
    g = Consumer(4, assignor="range")
    g.join(0.0, "a")
    g.send({"type": "topic_metadata", "topic": "t", "partitions": 6}, 5.0)
    g.heartbeat(6.0, "a", 1, [0, 1, 2, 3])
    assert [o["to"] for o in of_type(g.outputs, "state_change")] == ["Stable"]  # Stable -> Stable: no change
    bump = rebalances(g.outputs)[-1]
    assert (
        bump["group_epoch"],
        bump["trigger"],
        bump["started_ts"],
        bump["duration_ms"],
        bump["partitions_moved"],
        spans(bump),
    ) == (2, "metadata", 6_000, 0, 0, [])
    g.join(20.0, "b")
    g.heartbeat(21.0, "a", 2, [0, 1, 2, 3, 4, 5])  # told to revoke t-3..t-5
    g.heartbeat(21.2, "a", 2, [0, 1, 2])
    g.heartbeat(23.0, "b", 3)
    join_ = rebalances(g.outputs)[-1]
    assert (
        join_["group_epoch"],
        join_["trigger"],
        join_["started_ts"],
        join_["duration_ms"],
        join_["partitions_moved"],
    ) == (3, "join", 20_000, 3_000, 3)
    assert spans(join_) == [(p, 21_000, 23_000, 0, 2_000) for p in (3, 4, 5)]


def test_empty_group_and_back_consumer():
    g = Consumer(2)
    g.join(0.0, "a")
    g.heartbeat(10.0, "a", -1)
    empty = rebalances(g.outputs)[-1]
    assert (empty["trigger"], empty["duration_ms"], empty["partitions_moved"], empty["members"]) == ("leave", 0, 2, [])
    assert empty["awaiting_owner"] == [["t", 0, 10_000], ["t", 1, 10_000]]
    g.join(70.0, "b")
    back = rebalances(g.outputs)[-1]
    assert (back["trigger"], back["started_ts"], back["duration_ms"], back["partitions_moved"]) == (
        "join",
        70_000,
        0,
        0,
    )
    assert spans(back) == [(0, 10_000, 70_000, 60_000, 0), (1, 10_000, 70_000, 60_000, 0)]


def test_a_rebalance_in_progress_when_the_group_is_rebuilt_has_an_unknown_start():
    g = Consumer(4, group_consumer_session_timeout_ms=10_000, group_consumer_heartbeat_interval_ms=3_000)
    g.join(0.0, "a")
    g.join(1.0, "b")  # a rebalance starts ... and the checkpoint is lost
    rebuilt = ConsumerGroupCoordinator(g.coordinator.config)
    rebuilt.load_records([o for o in g.outputs if R.is_record(o)], now_ms=1_500)
    g.coordinator, g.outputs = rebuilt, []
    g.heartbeat(2.0, "a", 1, [0, 1, 2, 3])
    g.heartbeat(2.1, "a", 1, [0, 1])
    g.heartbeat(3.0, "b", 2)
    (done,) = rebalances(g.outputs)
    assert (done["trigger"], done["started_ts"], done["completed_ts"], done["duration_ms"]) == (
        "unknown",
        None,
        3_000,
        None,
    )
    # Who held what came back with the members' records: the spans are known.
    assert spans(done) == [(2, 2_000, 3_000, 0, 1_000), (3, 2_000, 3_000, 0, 1_000)]


def test_static_restarts_consumer():
    g = Consumer(2)
    g.join(0.0, "m1", instance_id="pod-a")
    g.heartbeat(10.0, "m1", -2, instance_id="pod-a")
    g.join(12.0, "m2", instance_id="pod-a")
    assert one(g.outputs, "member_replaced")["previous_member_id"] == "m1"
    assert [r["trigger"] for r in rebalances(g.outputs)] == ["join"]  # no epoch bump, no rebalance
    g.heartbeat(20.0, "m2", -2, instance_id="pod-a")
    g.send({"type": "topic_metadata", "topic": "other", "partitions": 1}, 70.0)  # time passes: the session ends
    expiry = rebalances(g.outputs)[-1]  # 45 s after m2's last heartbeat (12.0; a leave does not extend it)
    assert (expiry["trigger"], expiry["completed_ts"], expiry["partitions_moved"], expiry["awaiting_owner"]) == (
        "expiry",
        57_000,
        2,
        [["t", 0, 57_000], ["t", 1, 57_000]],
    )


# ---------------------------------------------------------------------- the property
def _empty_and_back_feed(gap_ms: int, partitions: int, members: int) -> tuple[list[dict], int]:
    """A recorded classic feed: ``members`` consumers Stable on t, all leave at 20 s, the group stays empty for
    ``gap_ms``, then as many new ones join and stay 20 s. Returns the feed and the leave time."""
    h = Harness(assignment_mode="tracker", group_initial_rebalance_delay_ms=3_000)
    h.now = 0
    h.send(type="topic_metadata", topic="t", partitions=partitions)

    def round_of(names: list[str]) -> list[str]:
        ids = [h.new_member(client_id=n) for n in names]
        h.tick(3_000)
        for m in [h.leader()] + [m for m in ids if m != h.leader()]:
            h.sync(m, h.generation())
        return ids

    def heartbeats(ids: list[str], until: int) -> None:
        while h.now + 3_000 < until:
            h.tick(3_000)
            for m in ids:
                h.heartbeat(m, h.generation())

    first = round_of([f"a{i}" for i in range(members)])
    heartbeats(first, 20_000)
    h.now = left = 20_000
    for m in first:
        h.send(type="leave", member_id=m, group_instance_id=None)
    assert h.state() == "Empty"
    h.now = left + gap_ms
    second = round_of([f"b{i}" for i in range(members)])
    heartbeats(second, h.now + 20_000)
    return h.events, left


@settings(max_examples=15, deadline=None)
@given(gap_s=st.integers(1, 599), partitions=st.integers(1, 6), members=st.integers(1, 3))
def test_an_empty_period_counts_the_same_way(gap_s, partitions, members):
    """The same feed replayed under classic and server-side assignors: the time the group had no member goes to
    ``no_members_ms`` under every assignor -- the same time, up to the classic client's KIP-394 second join -- and
    none of it to unavailability, however long it lasted: what is left is at most the rebalance that ended it.
    (Up to 10 min: an Empty group without offsets is deleted after offsets.retention.check.interval.ms, and the
    one that comes back is a new group with nothing to count.)"""
    feed, left = _empty_and_back_feed(gap_s * 1000, partitions, members)
    no_members = {}
    for assignor in ("range", "cooperative-sticky", "server:uniform", "server:range"):
        outputs = replay.replay_outputs(feed, assignor)
        later = [(s, o) for o in outputs if o["type"] == "rebalance" and o["ts"] > left for s in spans_of(o)]
        back = [(s, o) for s, o in later if s.released_ts == left]  # (later ones: moves among the newcomers)
        assert sorted(s.partition for s, _ in back) == [("t", p) for p in range(partitions)], assignor
        assert all(s.no_members_ms == 0 for s, _ in later if s.released_ts > left), assignor
        assert {s.no_members_ms for s, _ in back} <= set(range(gap_s * 1000, gap_s * 1000 + REACTION_MS + 1))
        assert all(s.unavailable_ms <= o["duration_ms"] for s, o in back), assignor
        no_members[assignor] = {s.no_members_ms for s, _ in back}
    classic_ = no_members["range"] | no_members["cooperative-sticky"]
    server = no_members["server:uniform"] | no_members["server:range"]
    assert max(classic_ | server) - min(classic_ | server) <= REACTION_MS


# ---------------------------------------------------------------------- the ledger is state
class _ThroughBytes(Harness):
    """A harness whose coordinator is stored as bytes and read back after every event and every tick, as the
    job keeps a group's state between micro-batches."""

    def send(self, **fields) -> list[dict]:
        out = super().send(**fields)
        self.coordinator = GroupCoordinator.from_bytes(self.coordinator.to_bytes(), self.config)
        return out

    def tick(self, ms: int) -> list[dict]:
        out = super().tick(ms)
        self.coordinator = GroupCoordinator.from_bytes(self.coordinator.to_bytes(), self.config)
        return out


def _cooperative_then_empty(h: Harness) -> list[dict]:
    h.now = 0
    h.protocols = [{"name": "cooperative-sticky", "topics": ["t"]}]
    a, b = stable_pair(h)
    at(h, 10.0)
    c = new_member(h, "c", owned=[])
    join(h, a, owned=[0, 1], client_id="a")
    join(h, b, owned=[2, 3], client_id="b")
    at(h, 10.5)
    h.sync(a, 2, assignments={a: parts(0, 1), b: parts(2), c: []})  # b is to give t-3 up
    at(h, 20.0)
    for m in (a, b, c):  # everyone leaves: Empty
        h.send(type="leave", member_id=m, group_instance_id=None)
    at(h, 30.0)
    d = new_member(h, "d", owned=[])
    h.tick(0)
    h.sync(d, h.generation(), assignments={d: parts(0, 1, 2, 3)})
    assert h.state() == "Stable"
    return rebalances(h.outputs)


def test_the_figures_survive_the_state_being_stored_between_any_two_events():
    """The job keeps each group's state as bytes between micro-batches: the figures' ledger (owners, releases, the
    time without members) goes with it, so a timeline run through the bytes after every event gives the same
    records as one run in one piece."""
    whole = _cooperative_then_empty(Harness())
    assert any(r["awaiting_owner"] for r in whole)
    # t-3, revoked from b at 10.5, waited 9.5 s with members around before the group emptied at 20.0.
    assert spans(whole[-1]) == [
        (0, 20_000, 30_000, 10_000, 0),
        (1, 20_000, 30_000, 10_000, 0),
        (2, 20_000, 30_000, 10_000, 0),
        (3, 10_500, 30_000, 10_000, 9_500),
    ]
    assert _cooperative_then_empty(_ThroughBytes()) == whole

    g = Consumer(2)
    g.join(0.0, "a")
    g.join(1.0, "b")
    g.heartbeat(2.0, "a", 1, [0, 1])
    g.heartbeat(3.0, "b", 2)
    g.heartbeat(4.0, "a", -1)
    g.heartbeat(5.0, "b", -1)
    g.join(9.0, "c")
    outputs: list[dict] = []
    coordinator = ConsumerGroupCoordinator(g.coordinator.config)
    for e in g.events:
        outputs += coordinator.advance(e["ts"] - 1) + coordinator.handle(e)
        coordinator = ConsumerGroupCoordinator.from_bytes(coordinator.to_bytes(), g.coordinator.config)
    assert rebalances(outputs) == rebalances(g.outputs) and spans(rebalances(outputs)[-1])
