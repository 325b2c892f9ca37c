"""Properties of the coordinator over generated group histories (hypothesis picks the scenario; the simulator plays
the clients): whatever happens, generations only go up, no partition has two owners in a generation, an eager
round hands out every partition, and serialising the state anywhere changes nothing."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.coordinator import CoordinatorConfig, GroupCoordinator
from streaming.feeds.simulator import SimulationSettings, Simulator

scenarios = st.builds(
    SimulationSettings,
    groups=st.integers(1, 3),
    members_per_group=st.integers(1, 5),
    topics_per_group=st.integers(1, 3),
    partitions_per_topic=st.integers(1, 8),
    assignors=st.lists(
        st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]), min_size=1, max_size=4, unique=True
    ).map(tuple),
    churn_interval_ms=st.integers(2_000, 20_000),
    static_fraction=st.sampled_from([0.0, 0.5, 1.0]),
    seed=st.integers(0, 10_000),
)


def run(events, split: int | None = None) -> list[dict]:
    config = CoordinatorConfig()
    coordinator, out = GroupCoordinator(config), []
    for i, e in enumerate(events):
        if i == split:
            coordinator = GroupCoordinator.from_bytes(coordinator.to_bytes(), config)
        out += coordinator.handle(e)
        for group in coordinator.groups.values():  # the protocol support kept per join equals a recount
            recount = Counter(n for m in group.members.values() for n in m.protocol_names())
            assert group.supported_protocols() == recount, group.group_id
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios, minutes=st.integers(1, 4), split=st.floats(0, 1))
def test_invariants_hold_in_every_generated_history(scenario, minutes, split):
    simulator = Simulator(scenario, start_ms=0)
    events = simulator.run_until(minutes * 60_000)
    outputs = run(events)
    generations: dict[str, int] = {}
    for r in (o for o in outputs if o["type"] == "rebalance"):
        assert r["generation"] > generations.get(r["group_id"], -1), "generations only go up"
        generations[r["group_id"]] = r["generation"]
        owned = [tuple(tp) for parts in r["assignment"].values() for tp in parts]
        assert len(owned) == len(set(owned)), "a partition has two owners"
        sizes = simulator.coordinator.groups.get(r["group_id"])
        if r["members"] and r["rebalance_protocol"] == "eager" and not r["unknown_topics"] and sizes:
            topics = simulator.group_topics[r["group_id"]]
            # Topics only grow, so the sizes known now bound the ones known then; each partition that existed
            # then must be owned (the assignment cannot name partitions that did not exist).
            assert all(t in topics and p < sizes.topics.get(t, 0) for t, p in owned)
            assert len(owned) == len({tp for tp in owned}) and owned, "an eager round leaves nothing unowned"
    for o in outputs:
        if o["type"] == "state_change":
            assert o["from"] != o["to"]
    # Serialising the whole coordinator between any two events changes nothing.
    assert run(events, int(split * len(events))) == outputs


@settings(max_examples=30, deadline=None)
@given(scenario=scenarios)
def test_eager_assignment_is_complete_when_everyone_is_stable(scenario):
    simulator = Simulator(scenario, start_ms=0)
    events = simulator.run_until(90_000)
    coordinator = GroupCoordinator(CoordinatorConfig())
    for e in events:
        coordinator.handle(e)
    for group in coordinator.groups.values():
        if group.state.value != "Stable" or group.protocol_name == "cooperative-sticky" or not group.members:
            continue
        owned = sorted(tp for m in group.members.values() for tp in m.assignment)
        wanted = sorted((t, p) for t in simulator.group_topics[group.group_id] for p in range(group.topics.get(t, 0)))
        assert owned == wanted
