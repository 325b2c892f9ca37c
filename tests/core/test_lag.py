"""Lag in records and seconds, and a rebalance's lag cost (streaming/coordinator/lag.py; docs/lag.md has the worked
timeline of test_a_rebalance_costs_the_lag_built_until_the_new_owners_first_commit)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.coordinator.lag import (
    CAUGHT_UP,
    EXTRAPOLATED,
    INTERPOLATED,
    LOWER_BOUND,
    LagBook,
    built,
    lag,
    offset_time,
)
from streaming.coordinator.routing import Configs, run_feed
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.spark.group_step import step_group


def sample(ts, offset, group="g", topic="t", partition=0):
    return {"type": "log_end", "group_id": group, "ts": ts, "topic": topic, "partition": partition, "offset": offset}


def commit(ts, offset, group="g", topic="t", partition=0):
    return {
        "type": "offset_commit",
        "group_id": group,
        "ts": ts,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": ts,
        "expire_timestamp": -1,
        "tombstone": False,
    }


def test_seconds_are_interpolated_between_the_samples_around_the_committed_offset():
    # 10 records a second: the record at offset 49 arrived when the log end passed 49, at 5.0 s.
    assert offset_time([(0, 0), (10_000, 100)], 49) == (5_000, INTERPOLATED)
    assert lag([(0, 0), (10_000, 100)], 49, 10_000) == (51, 5.0, INTERPOLATED)


def test_below_the_oldest_sample_seconds_are_extrapolated_then_a_lower_bound():
    assert offset_time([(10_000, 100), (20_000, 200)], 49) == (5_000, EXTRAPOLATED)
    assert lag([(10_000, 100), (20_000, 200)], 49, 20_000) == (151, 15.0, EXTRAPOLATED)
    assert lag([(10_000, 100)], 49, 10_000) == (51, 0.0, LOWER_BOUND)  # one sample: at least 0 s
    assert lag([(10_000, 100), (20_000, 100)], 49, 20_000) == (51, 10.0, LOWER_BOUND)


def test_caught_up_is_zero_and_unknown_is_none():
    assert lag([(0, 0), (10_000, 100)], 100, 10_000) == (0, 0.0, CAUGHT_UP)
    assert lag([(0, 0), (10_000, 100)], 120, 10_000) == (0, 0.0, CAUGHT_UP)  # a stale sample: never negative
    assert lag([(0, 0), (10_000, 100)], None, 10_000) == (None, None, None)  # nothing committed
    assert lag([(10_000, 100)], 5, 9_999) == (None, None, None)  # no sample by then
    assert lag([(0, 50), (10_000, 100)], 75, 5_000) == (0, 0.0, CAUGHT_UP)  # the log end at 5 s: 75
    assert lag([(0, 50), (10_000, 100)], 60, 5_000) == (15, 2.8, INTERPOLATED)  # offset 60 came at 2.2 s


@settings(max_examples=200, deadline=None)
@given(
    rate=st.integers(1, 1_000),
    times=st.lists(st.integers(0, 600), min_size=2, max_size=20, unique=True),
    behind=st.floats(0, 1),
)
def test_a_steady_producer_gives_the_exact_age_of_the_oldest_unconsumed_record(rate, times, behind):
    """Records at ``rate`` a second from time 0: record n arrives at (n + 1) / rate s. Sampled at whole seconds, the
    interpolation is exact between samples and the extrapolation exact below them."""
    times = sorted(times)
    samples = [(t * 1_000, t * rate) for t in times]
    now = times[-1] * 1_000
    committed = int(behind * (times[-1] * rate - 1))
    records, seconds, method = lag(samples, committed, now)
    assert records == times[-1] * rate - committed
    if records == 0:
        assert (seconds, method) == (0.0, CAUGHT_UP)
    elif method == LOWER_BOUND:  # no growth to extrapolate from: samples all at one log end
        assert times[0] * rate == times[-1] * rate
    else:
        assert seconds == pytest.approx(times[-1] - (committed + 1) / rate, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(ends=st.lists(st.integers(0, 10**6), min_size=1, max_size=16), data=st.data())
def test_seconds_never_negative_and_fall_as_the_group_catches_up(ends, data):
    samples = [(i * 1_000 + 1, e) for i, e in enumerate(sorted(ends))]
    now = samples[-1][0]
    a, b = sorted(data.draw(st.lists(st.integers(0, samples[-1][1] + 5), min_size=2, max_size=2)))
    ra, sa, _ = lag(samples, a, now)
    rb, sb, _ = lag(samples, b, now)
    assert 0 <= rb <= ra and 0 <= sb <= sa + 1e-9


def test_a_sample_gives_the_partitions_lag_against_the_commit_before_it():
    book = LagBook()
    assert book.add(sample(0, 0)) == [
        {
            "type": "partition_lag",
            "group_id": "g",
            "ts": 0,
            "topic": "t",
            "partition": 0,
            "log_end": 0,
            "committed": None,
            "lag_records": None,
            "lag_seconds": None,
            "lag_seconds_method": None,
        }
    ]
    book.add(commit(500, 0))
    (figure,) = book.add(sample(10_000, 100))
    assert (figure["committed"], figure["lag_records"], figure["lag_seconds"], figure["lag_seconds_method"]) == (
        0,
        100,
        9.9,
        INTERPOLATED,
    )
    book.add(commit(10_500, 100))
    (figure,) = book.add(sample(11_000, 110))
    assert (figure["lag_records"], figure["lag_seconds"]) == (10, 0.9)  # record 100 came at 10.1 s
    assert book.current("g") == [figure] and book.current("other") == []


def test_memory_is_bounded_per_partition_and_in_partitions():
    book = LagBook(samples=4, commits=2, max_partitions=3)
    for i in range(100):
        book.add(sample(i * 1_000, i * 10, partition=i % 5))
        book.add(commit(i * 1_000, i * 5, partition=i % 5))
    assert len(book.partitions) == 3
    assert all(len(p.samples) <= 4 and len(p.commits) <= 2 for p in book.partitions.values())
    assert sum(len(figures) for figures in book.latest.values()) <= 3


def test_a_log_that_goes_back_starts_its_samples_again():
    book = LagBook()
    book.add(sample(0, 500))
    book.add(commit(1, 0))
    (figure,) = book.add(sample(1_000, 20))  # the topic was recreated
    assert figure["lag_records"] == 20 and list(book.partitions[("g", "t", 0)].samples) == [(1_000, 20)]


def rebalance(ts, spans, generation=2, group="g"):
    return {
        "type": "rebalance",
        "group_id": group,
        "ts": ts,
        "generation": generation,
        "partitions_without_owner": spans,
    }


def test_a_rebalance_costs_the_lag_built_until_the_new_owners_first_commit():
    """The worked timeline of docs/lag.md. 10 records a second on t-0 and t-1; the owner commits every second and
    keeps up, until 10.0 s its owner is told to stop (released); the rebalance ends at 12.5 s; the new owner's
    first commits come at 15.0 s (t-0) and 16.0 s (t-1); the cost is out at the first sample after the last."""
    book = LagBook()
    derived = []
    for s in range(0, 18):
        now = s * 1_000
        for p in (0, 1):
            if s <= 10:
                derived += book.add(commit(now, s * 10, partition=p))  # the old owner, up to date
            derived += book.add(sample(now, s * 10, partition=p))
        if now == 12_000:
            assert book.add(rebalance(12_500, [["t", 0, 10_000, 12_500, 0], ["t", 1, 10_000, 12_500, 0]])) == []
        if now == 15_000:
            assert book.add(commit(15_000, 150, partition=0)) == []  # t-1 still to come
        if now == 16_000:
            assert book.add(commit(16_000, 160, partition=1)) == []
    (cost,) = [d for d in derived if d["type"] == "rebalance_lag"]
    # t-0: lag 0 at the release; 50 records just before 15.0 s, the oldest (offset 100) appended at 10.1 s: 4.9 s.
    # t-1: 60 records and 5.9 s before 16.0 s. The cost: 110 records, and 5.9 s for the partition that fell most.
    assert cost == {
        "type": "rebalance_lag",
        "group_id": "g",
        "ts": 17_000,
        "rebalance_ts": 12_500,
        "generation": 2,
        "lag_records": 110,
        "lag_seconds": 5.9,
        "lag_seconds_method": INTERPOLATED,
        "no_members_lag_records": 0,
        "no_members_lag_seconds": 0.0,
        "partitions": [
            ["t", 0, 10_000, 15_000, 0, 50, 0.0, 4.9, INTERPOLATED, 0, 0.0],
            ["t", 1, 10_000, 16_000, 0, 60, 0.0, 5.9, INTERPOLATED, 0, 0.0],
        ],
    }


def member(kind, ts, member_id, group="g"):
    return {"type": kind, "group_id": group, "ts": ts, "member_id": member_id}


def emptied_group(members: bool) -> list[dict]:
    """The outputs of the scenario below: a leaves at 10 s, the group is empty until b joins at 14 s."""
    outputs = [member("member_joined", 0, "a")] if members else []
    for s in range(0, 18):
        now = s * 1_000
        if members and now == 14_000:
            outputs.append(member("member_joined", 14_000, "b"))
        outputs += [commit(now, s * 10)] if s <= 10 else []
        if members and now == 10_000:
            outputs.append(member("member_left", 10_000, "a"))
        outputs.append(sample(now, s * 10))
        if now == 14_000:
            outputs.append(rebalance(14_500, [["t", 0, 10_000, 14_500, 4_000]]))
        if now == 16_000:
            outputs.append(commit(16_000, 160))
    return outputs


def test_the_lag_built_while_the_group_had_no_member_is_not_the_rebalances_cost():
    """As partition unavailability (docs/figures.md): the time the group had no member is left out of the cost and
    shown apart. 10 records a second on t-0; the only member a keeps up and leaves at 10.0 s (released; the group
    is empty); b joins at 14.0 s; the rebalance ends at 14.5 s (span 10.0 -> 14.5, 4.0 s of it without a member);
    b first commits at 16.0 s. Before it: 60 records, the oldest (100) appended at 10.1 s: 5.9 s. Of that, 40
    records came and 3.9 s passed (10.1 -> 14.0) while the group had no member: the cost is 20 records and 2.0 s --
    the 0.5 s of unavailability and b's 1.5 s until its first commit."""

    (cost,) = [d for d in LagBook().add_all(emptied_group(members=True)) if d["type"] == "rebalance_lag"]
    assert (cost["lag_records"], cost["lag_seconds"]) == (20, 2.0)
    assert (cost["no_members_lag_records"], cost["no_members_lag_seconds"]) == (40, 3.9)
    assert cost["partitions"] == [["t", 0, 10_000, 16_000, 0, 60, 0.0, 5.9, INTERPOLATED, 40, 3.9]]
    # Outputs that do not account for the coordinator's no_members_ms (here: no member outputs at all) leave the
    # split, and so the cost, unknown -- never counted as the rebalance's.
    (cost,) = [d for d in LagBook().add_all(emptied_group(members=False)) if d["type"] == "rebalance_lag"]
    assert cost["lag_records"] is cost["lag_seconds"] is cost["no_members_lag_records"] is None


def test_the_coordinators_no_member_time_is_what_the_lag_cost_leaves_out():
    """Simulated one-member groups that empty and come back (classic eager and cooperative): wherever a cost is
    known, its no-member split is too, and cost + split is the whole lag built from the release to the first
    commit."""
    feed = Simulator(
        SimulationSettings(
            groups=3,
            members_per_group=1,
            seed=2,
            churn_interval_ms=8_000,
            log_end_interval_ms=1_000,
            assignors=("range", "cooperative-sticky", "sticky"),
        ),
        start_ms=0,
    ).run_until(300_000)
    outputs, rejected = run_feed(feed)
    assert rejected == 0
    costs = [d for d in LagBook().add_all(outputs) if d["type"] == "rebalance_lag"]
    rows = [r for c in costs for r in c["partitions"] if r[5] is not None and r[4] is not None]
    idle = [r for r in rows if r[9] != 0]
    assert len(idle) >= 5 and all(r[9] is not None and r[10] is not None for r in idle)
    assert any(r[9] > 0 for r in idle)
    for r in rows:
        records, seconds = built(r)
        assert records == max(r[5] - r[4] - r[9], 0) and records + r[9] >= r[5] - r[4]
        assert seconds is None or seconds <= round(max(r[7] - r[6], 0.0), 3)


def test_a_partition_released_again_before_its_first_commit_has_an_unknown_cost():
    book = LagBook()
    book.add(sample(0, 0))
    book.add(commit(0, 0))
    book.add(rebalance(1_000, [["t", 0, 500, 1_000, 0]], generation=2))
    (cost,) = book.add(rebalance(2_000, [["t", 0, 1_500, 2_000, 0]], generation=3))
    assert (cost["generation"], cost["lag_records"], cost["lag_seconds"]) == (2, None, None)
    assert book.add(commit(2_500, 0)) == []
    (_, cost) = book.add(sample(3_000, 0))
    assert (cost["generation"], cost["lag_records"], cost["lag_seconds"]) == (3, 0, 0.0)


def lag_by_group(outputs):
    book = LagBook()
    derived = book.add_all(outputs)
    return {g: [d for d in derived if d["group_id"] == g] for g in sorted({d["group_id"] for d in derived})}


def test_the_same_feed_gives_the_same_lag_in_the_job_step_and_in_a_replay():
    """A simulated feed with log-end samples every second (classic and consumer-protocol groups, crashes and
    rebalances): the job's per-group step over arbitrary micro-batches and the views' run_feed give the same lag
    figures and the same rebalance costs, and a second replay the same again."""
    sim = Simulator(SimulationSettings(groups=2, log_end_interval_ms=1_000, seed=3, group_protocol="mixed"))
    feed = sim.run_until(120_000)
    replayed, rejected = run_feed(feed)
    assert rejected == 0
    want = lag_by_group(replayed)
    assert want == lag_by_group(run_feed(feed)[0])
    costs = [d for g in want.values() for d in g if d["type"] == "rebalance_lag"]
    assert len(costs) >= 4 and all(c["lag_records"] is not None and c["lag_seconds"] > 0 for c in costs)
    rng = random.Random(7)
    stepped = []
    for group in sorted({e["group_id"] for e in feed if e.get("group_id")}):
        events = [e for e in feed if e.get("group_id") == group]
        state, i = None, 0
        while i < len(events):
            batch = events[i : i + rng.randint(1, 40)]
            i += len(batch)
            result = step_group(state, batch, batch[-1]["ts"] - 1, Configs(), keep_types=None)
            state = result.state
            stepped += result.outputs
    assert lag_by_group(stepped) == want


def test_the_history_ties_each_cost_to_its_rebalance_and_keeps_the_worst_partition_over_time():
    from streaming.views.history import build_histories

    sim = Simulator(SimulationSettings(groups=2, log_end_interval_ms=1_000, seed=3, group_protocol="mixed"))
    outputs = run_feed(sim.run_until(120_000))[0]
    costs = [d for d in LagBook().add_all(outputs) if d["type"] == "rebalance_lag"]
    histories = build_histories(outputs)
    tied = [(h.group_id, g.lag_cost) for h in histories.values() for g in h.generations if g.lag_cost]
    assert sorted(tied, key=lambda t: (t[0], t[1]["ts"])) == sorted(
        ((c["group_id"], c) for c in costs), key=lambda t: (t[0], t[1]["ts"])
    )
    for h in histories.values():
        assert all(g.completed_ts == g.lag_cost["rebalance_ts"] for g in h.generations if g.lag_cost)
        points = h.lag
        assert [p[0] for p in points] == sorted({p[0] for p in points})  # one point per sampling moment
        known = [p for p in points if p[1] is not None]
        assert known and max(p[1] for p in known) > 0
        assert h.since(60_000).lag == [p for p in points if p[0] >= 60_000]
