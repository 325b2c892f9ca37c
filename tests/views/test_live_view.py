"""The live table folds outputs into a per-group picture."""

from __future__ import annotations

import io

from streaming.views.live_view import LiveView, clock


def test_rebalances_expiries_and_commits_show_in_the_table():
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(
        0,
        [
            {"type": "state_change", "group_id": "g1", "to": "PreparingRebalance", "ts": 1000},
            {
                "type": "rebalance",
                "group_id": "g1",
                "generation": 1,
                "protocol": "range",
                "leader": "c-1",
                "members": ["c-1", "c-2"],
                "trigger": "member_join",
                "completed_ts": 4000,
                "duration_ms": 3000,
                "partitions_moved": 6,
                "ts": 4000,
            },
            {"type": "state_change", "group_id": "g1", "to": "Stable", "ts": 4000},
            {"type": "offset_commit", "group_id": "g1", "topic": "t", "partition": 0, "offset": 5, "ts": 4100},
        ],
    )
    view.update(
        1,
        [
            {"type": "member_expired", "group_id": "g1", "member_id": "c-2", "ts": 9000},
            {"type": "dead_letter", "group_id": "g1", "reason": "bad JSON", "ts": 9001},
        ],
    )
    g = view.groups["g1"]
    assert (g.state, g.generation, g.members, g.protocol, g.expired, g.rebalances) == ("Stable", 1, 2, "range", 1, 1)
    assert g.committed == {("t", 0): 5}
    text = view.render()
    assert "batch 1" in text and "dead letters 1" in text
    row = next(line for line in text.splitlines() if line.startswith("g1"))
    assert "Stable" in row and "member_join" in row and "3.0s" in row


def test_recent_lines_are_dated_like_last_rebalance_and_unknown_figures_show_as_unknown():
    """Issue #34: in event time the recent lines said the wall clock while LAST REBALANCE said the event's time; a
    cluster feed's rebalance (its start unknown) showed 0.0s; one member read '1 members'."""
    from streaming.views.live_view import clock

    view = LiveView(out=io.StringIO(), redraw=False)
    completed = 1_600_000_123_000  # long ago: a wall-clock date cannot pass for it
    view.update(
        0,
        [
            {
                "type": "rebalance",
                "group_id": "g",
                "generation": 5,
                "protocol": "range",
                "leader": "c-1",
                "members": ["c-1"],
                "trigger": "expiry",
                "completed_ts": completed,
                "duration_ms": None,
                "partitions_moved": None,
                "ts": completed,
            },
            {"type": "member_expired", "group_id": "g", "member_id": "c-2", "ts": completed - 1},
        ],
    )
    text = view.render()
    row = next(line for line in text.splitlines() if line.startswith("g "))
    assert clock(completed) in row and " ? " in row and "0.0s" not in row
    assert f"  {clock(completed)} g: generation 5 (expiry), 1 member" in text.splitlines()
    assert f"  {clock(completed - 1)} g: member c-2 expired" in text.splitlines()


def test_offset_tombstone_removes_commit():
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, [{"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 1, "offset": 7}])
    view.update(1, [{"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 1, "tombstone": True}])
    assert view.groups["g"].committed == {}


def _busy_view(**kwargs) -> LiveView:
    view = LiveView(**kwargs)
    view.update(
        3,
        [
            {
                "type": "rebalance",
                "group_id": "orders",
                "generation": 4,
                "protocol": "cooperative-sticky",
                "leader": "c-1",
                "members": ["c-1", "c-2", "c-3"],
                "trigger": "expiry",
                "completed_ts": 4000,
                "duration_ms": 1200,
                "partitions_moved": 2,
                "ts": 4000,
            },
            {"type": "state_change", "group_id": "orders", "to": "Stable", "generation": 4, "ts": 4000},
            {"type": "member_expired", "group_id": "orders", "member_id": "c-4", "ts": 3000},
            {"type": "offset_commit", "group_id": "orders", "topic": "t", "partition": 0, "offset": 5, "ts": 4100},
        ],
    )
    return view


PROGRESS = {"inputRowsPerSecond": 120.0, "processedRowsPerSecond": 900.0, "durationMs": {"triggerExecution": 230}}


def test_not_a_terminal_gets_plain_lines():
    out = io.StringIO()  # not a TTY: redraw is decided from the stream
    view = _busy_view(out=out)
    assert view.redraw is False
    view.draw(PROGRESS)
    view.draw(PROGRESS)
    view.close()
    text = out.getvalue()
    assert "\x1b" not in text and "┃" not in text and "│" not in text  # no escape codes, no box drawing
    assert text.count("batch 3  groups 1  dead letters 0  input 120 ev/s  processed 900 ev/s  batch took 230 ms") == 2
    row = next(line for line in text.splitlines() if line.startswith("orders"))
    assert row.split() == [
        "orders",
        "Stable",
        "4",
        "cooperative-sticky",
        "3",
        "1",
        "00:00:04",
        "expiry",
        "1.2s",
        "2",
        "1",
        "1",
        "-",
    ]


def test_a_terminal_gets_a_rich_table_redrawn_in_place():
    from rich.console import Console

    out = io.StringIO()
    view = _busy_view(console=Console(file=out, force_terminal=True, width=160, color_system="standard"))
    assert view.redraw is True
    view.draw(PROGRESS)
    first = out.getvalue()
    view.update(4, [{"type": "state_change", "group_id": "orders", "to": "PreparingRebalance", "ts": 5000}])
    view.draw(PROGRESS)
    view.close()
    text = out.getvalue()
    assert first.startswith("\x1b[?1049h") and "\x1b[?25l" in first  # alternate screen, cursor hidden
    assert "┃" in first and "│" in first and "GROUP" in first  # a box-drawn table with its header
    second, after = text[len(first) :].split("\x1b[?1049l")
    assert second.startswith("\x1b[H")  # the second draw repaints from the top
    assert "\x1b[?25h" in second and "PreparingRebalance" in after  # cursor back, the last picture on the
    #                                                                     normal screen, where it stays
    plain = _strip_ansi(text)
    rows = [line for line in plain.splitlines() if line.startswith("│ orders")]
    cells = [c.strip() for c in rows[0].strip().strip("│").split("│")]
    assert cells == [
        "orders",
        "Stable",
        "4",
        "cooperative-sticky",
        "3",
        "1",
        "00:00:04",
        "expiry",
        "1.2s",
        "2",
        "1",
        "1",
        "-",
    ]
    assert "PreparingRebalance" in rows[-1]
    assert "batch 4  groups 1  dead letters 0  input 120 ev/s" in plain


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_groups_of_both_protocols_and_a_switch_between_them():
    """Consumer-protocol groups (one switches to the classic protocol once Empty) beside a classic group: every
    output is read as its own protocol's, and the table shows each group as it is at the end."""
    from streaming.coordinator import parse_event
    from streaming.coordinator.routing import Configs, GroupModels
    from tests.consumer_feed import consumer_groups_feed

    start = 1_700_000_000_000
    configs = Configs.from_properties({"group.consumer.heartbeat.interval.ms": "4000"})
    models = GroupModels(configs)
    outputs = [
        o
        for e in consumer_groups_feed(start, duration_ms=110_000, configs=configs)
        for o in models.handle(parse_event(e)[0])
    ]
    switched = {o["group_id"] for o in outputs if o["type"] == "protocol_switch"}
    assert switched, "the feed has a group that switches protocol"
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, outputs)
    for gid, model in models.models.items():
        assert view.groups[gid].consumer == (model.protocol == "consumer"), gid
    text = view.render()
    assert all(gid in text for gid in models.models)
    # COMMITTED: the partitions each group has offsets for, consumer-protocol groups included.
    for gid, model in models.models.items():
        assert len(view.groups[gid].committed) == len(model.model.fetch_offsets(gid)) > 0, gid


def test_groups_rebuilt_from_the_store_and_their_gaps_are_counted():
    from tests.core.test_restore_rule import restore_story

    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, restore_story())
    assert (view.restored, view.restore_gaps) == (2, 1)
    g = view.groups["quiet"]
    assert (g.state, g.generation, g.members, g.protocol) == ("Stable", 1, 2, "range")
    text = view.render()
    assert "restored 2 (gaps 1)" in text and "2 groups rebuilt from the store" in text
    assert "g: the store did not hold all (restore gap): generation 2 is newer" in text
    assert next(line for line in text.splitlines() if line.startswith("quiet")).split()[-2] == "1"  # committed


def test_the_lag_column_shows_the_worst_partition_and_a_rebalance_cost_is_noted():
    from tests.core.test_lag import commit, rebalance, sample

    view = LiveView(out=io.StringIO(), redraw=False)
    outputs = []
    for s in range(0, 17):
        for p in (0, 1):
            if s <= 10 or p == 0:  # t-1's owner stops committing at 10 s
                outputs.append(commit(s * 1_000, s * 10, partition=p))
            outputs.append(sample(s * 1_000, s * 10, partition=p))
    outputs.insert(
        outputs.index(sample(12_000, 120, partition=1)) + 1, rebalance(12_500, [["t", 1, 10_000, 12_500, 0]])
    )
    outputs.append(commit(16_500, 160, partition=1))  # the new owner's first commit
    view.update(0, outputs)
    assert "cost" not in view.render()  # measured once a sample brackets the commit
    view.update(1, [sample(17_000, 170, partition=1)])
    text = view.render()
    row = next(line for line in text.splitlines() if line.startswith("g "))
    # t-0 at 16 s: caught up; t-1 at 17 s, its new owner's commit of 160 made: 10 records, offset 160 came at 16.1 s.
    assert row.split()[-2:] == ["10/0.9s", "t-1"]
    # From its release at 10 s (caught up) to 16.5 s (log end 165 between the samples): 65 records, 6.4 s.
    assert "g: the rebalance of 00:00:12 cost 65 records, 6.4 s (interpolated) of lag" in text.replace(
        clock(12_500), "00:00:12"
    )


def test_a_rebalance_costs_lag_with_the_no_member_time_apart():
    """As the report shows it (docs/figures.md): the lag built while the group had no member is not the rebalance's
    cost; the note says it apart (the scenario of tests/core/test_lag.py: 20 records, 2.0 s; 40, 3.9 s apart)."""
    from tests.core.test_lag import emptied_group

    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, emptied_group(members=True))
    text = view.render().replace(clock(14_500), "00:00:14")
    assert (
        "g: the rebalance of 00:00:14 cost 20 records, 2.0 s (interpolated), and 40 records, 3.9 s with no member"
        in text
    )
