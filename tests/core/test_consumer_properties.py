"""Properties of the KIP-848 model over generated histories: clients that follow the protocol mixed with stale,
random and hostile heartbeats, leaves, topic changes and time passing. Whatever happens: nothing raises, group and
assignment epochs never go back, a member's epoch only goes back when it leaves or is replaced, no partition is in
two members' current assignments at once, the records replayed into a fresh coordinator rebuild the same groups,
and serialising the state between any two events changes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.coordinator import parse_event
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from streaming.coordinator.consumer import records as R

TOPICS = ("foo", "bar", "baz")
MEMBERS = ("m1", "m2", "m3", "m4")
STATIC = {"m3": "instance-3", "m4": "instance-4"}

action = st.one_of(
    st.tuples(st.just("hb"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("hb"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("hb"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("revoke"), st.sampled_from(MEMBERS)),
    st.tuples(
        st.just("stale"),
        st.sampled_from(MEMBERS),
        st.integers(-3, 12),
        st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5)), max_size=3),
    ),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(
        st.just("subscribe"),
        st.sampled_from(MEMBERS),
        st.one_of(
            st.lists(st.sampled_from(TOPICS), unique=True, max_size=3).map(lambda t: ("names", t)),
            st.sampled_from(["ba.*", "foo|baz", "f.*"]).map(lambda r: ("regex", r)),
        ),
    ),
    st.tuples(st.just("topic"), st.sampled_from(TOPICS), st.integers(0, 6)),
    st.tuples(st.just("wait"), st.integers(1, 70_000)),
)


class Clients:
    """Client-side state of each member, as the Java consumer keeps it: epoch, owned partitions, subscription."""

    def __init__(self):
        self.epoch = {m: 0 for m in MEMBERS}
        self.owned = {m: [] for m in MEMBERS}
        self.sub = {m: ("names", ["foo", "bar"]) for m in MEMBERS}
        self.ts = 0

    def events(self, act) -> list[dict]:
        kind, rest = act[0], act[1:]
        if kind == "wait":
            self.ts += rest[0]
            return []
        self.ts += 1
        if kind == "topic":
            return [{"type": "topic_metadata", "topic": rest[0], "partitions": rest[1], "ts": self.ts}]
        m = rest[0]
        base = {
            "type": "consumer_heartbeat",
            "group_id": "g",
            "member_id": m,
            "ts": self.ts,
            "instance_id": STATIC.get(m),
        }
        if kind == "stale":
            return [
                {
                    **base,
                    "member_epoch": rest[1],
                    "topic_partitions": [list(tp) for tp in rest[2]],
                    "rebalance_timeout_ms": 20_000,
                    "subscribed_topic_names": ["foo"],
                }
            ]
        if kind == "leave":
            return [{**base, "member_epoch": -2 if m in STATIC and self.ts % 2 else -1}]
        if kind == "subscribe":
            self.sub[m] = rest[1]
        if kind == "revoke" and self.epoch[m] > 0:  # the client gave up everything it was asked to
            self.owned[m] = self.owned[m][: len(self.owned[m]) // 2]
        sub_kind, value = self.sub[m]
        sub = {"subscribed_topic_names": value} if sub_kind == "names" else {"subscribed_topic_regex": value}
        if self.epoch[m] == 0:
            return [{**base, "member_epoch": 0, "rebalance_timeout_ms": 20_000, "topic_partitions": [], **sub}]
        return [
            {
                **base,
                "member_epoch": self.epoch[m],
                "topic_partitions": self.owned[m],
                **(sub if kind == "subscribe" else {}),
            }
        ]

    def learn(self, outputs: list[dict]) -> None:
        for o in outputs:
            if o["type"] != "consumer_heartbeat_response":
                continue
            m = o["member_id"]
            if o["error"] == "NONE":
                self.epoch[m] = max(o["member_epoch"], 0)
                if o["member_epoch"] < 0:
                    self.owned[m] = []
                if o["assignment"] is not None:
                    self.owned[m] = [[a["topic"], p] for a in o["assignment"] for p in a["partitions"]]
            elif o["error"] in (
                "FENCED_MEMBER_EPOCH",
                "UNKNOWN_MEMBER_ID",
                "FENCED_INSTANCE_ID",
                "UNRELEASED_INSTANCE_ID",
                "GROUP_ID_NOT_FOUND",
            ):
                self.epoch[m], self.owned[m] = 0, []


def run(actions, split=None, max_size=3):
    config = ConsumerGroupConfig(group_consumer_max_size=max_size)
    c = ConsumerGroupCoordinator(config)
    clients = Clients()
    outputs, history = [], []
    events = [{"type": "topic_metadata", "topic": t, "partitions": 3, "ts": 0} for t in TOPICS]
    for act in actions:
        batch = events + clients.events(act)
        events = []
        for raw in batch:
            event, error = parse_event(raw)
            assert error is None, error
            if split is not None and len(history) == split:
                c = ConsumerGroupCoordinator.from_bytes(c.to_bytes(), config)
            out = c.handle(event)
            clients.learn(out)
            outputs += out
            history.append(snapshot(c))
        if act[0] == "wait":
            out = c.advance(clients.ts)
            outputs += out
            history.append(snapshot(c))
    return c, outputs, history


def snapshot(c):
    g = c.groups.get("g")
    if g is None:
        return None
    owners = {}
    for m in g.members.values():
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in owners, f"{t}-{p} owned by {owners[(t, p)]} and {m.member_id}"
                    owners[(t, p)] = m.member_id
    return g.group_epoch, g.assignment_epoch, {mid: m.member_epoch for mid, m in g.members.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(action, min_size=1, max_size=60), split=st.floats(0, 1))
def test_invariants_hold_in_every_generated_history(actions, split):
    c, outputs, history = run(actions)
    previous = None
    for snap in history:
        if snap is None or previous is None:
            previous = snap
            continue
        assert snap[0] >= previous[0], "group epoch went back"
        assert snap[1] >= previous[1] or snap[1] == -1, "assignment epoch went back"
        for mid, epoch in snap[2].items():
            before = previous[2].get(mid)
            assert before is None or epoch >= before or epoch in (-2, 0), f"{mid}: epoch {before} -> {epoch}"
        previous = snap
    for o in outputs:
        if o["type"] == "state_change":
            assert o["from"] != o["to"]
    # Replaying every record written, as a broker loading __consumer_offsets, rebuilds the same groups.
    rebuilt = ConsumerGroupCoordinator(c.config)
    rebuilt.load_records([o for o in outputs if R.is_record(o)], c.now)
    assert {g: x.durable_view() for g, x in rebuilt.groups.items()} == {
        g: x.durable_view() for g, x in c.groups.items()
    }
    # Serialising the whole coordinator between any two events changes nothing.
    _, again, _ = run(actions, int(split * len(history)))
    assert again == outputs


@settings(max_examples=30, deadline=None)
@given(actions=st.lists(action, min_size=1, max_size=40))
def test_protocol_following_clients_converge(actions):
    """After the noise, members that keep heartbeating by the protocol reach a Stable group whose current
    assignment is its target assignment. The tail first lets every session lapse: a static instance that rejoined
    without leaving first is refused (UNRELEASED_INSTANCE_ID) until its old session ends, as in Kafka."""
    clients_tail = (
        [("topic", "foo", 3), ("wait", 46_000)]
        + [("hb", m) for m in MEMBERS] * 2
        + [("revoke", m) for m in MEMBERS]
        + [("hb", m) for m in MEMBERS] * 4
    )
    c, outputs, _ = run(list(actions) + clients_tail, max_size=10)
    g = c.groups.get("g")
    if g is None or not g.members:
        return
    if any(m.member_epoch < 0 for m in g.members.values()):
        return  # a static member away on a temporary leave holds its partitions until its session ends
    assert g.state() == "Stable", c.describe_group("g")
    for mid, m in g.members.items():
        assert m.assigned_partitions == g.target.get(mid, {})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=4,
)
heartbeat_fields = st.fixed_dictionaries(
    {"type": st.just("consumer_heartbeat")},
    optional={
        "group_id": st.sampled_from(["g", "", " "]) | json_values,
        "member_id": st.sampled_from(["m1", "m2", ""]) | json_values,
        "member_epoch": st.integers(-4, 5) | json_values,
        "instance_id": st.sampled_from([None, "i", ""]) | json_values,
        "rack_id": json_values,
        "rebalance_timeout_ms": st.sampled_from([-1, 0, 5000]) | json_values,
        "subscribed_topic_names": st.sampled_from([None, [], ["foo"]]) | json_values,
        "subscribed_topic_regex": st.sampled_from([None, "", "f.*", "[", "(a"]) | json_values,
        "server_assignor": st.sampled_from([None, "uniform", "range", "x"]) | json_values,
        "topic_partitions": st.sampled_from(
            [None, [], [["foo", 0]], [{"topic": "foo", "partitions": [1]}], [{"topic_id": "x", "partitions": [0]}]]
        )
        | json_values,
        "ts": st.integers(0, 10**6) | json_values,
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(heartbeat_fields, max_size=15))
def test_arbitrary_heartbeats_never_raise(events):
    """Bad input is a dead letter with a reason; a readable but wrong request gets Kafka's error answer."""
    c = ConsumerGroupCoordinator()
    c.handle(parse_event({"type": "topic_metadata", "topic": "foo", "partitions": 2})[0])
    for raw in events:
        event, reason = parse_event(raw)
        if event is None:
            assert isinstance(reason, str) and reason
            continue
        if event["group_id"] is None:
            continue
        out = c.handle(event)
        answers = [o for o in out if o["type"] == "consumer_heartbeat_response"]
        assert len(answers) == 1 and isinstance(answers[0]["error"], str)
        snapshot(c)
