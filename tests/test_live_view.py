"""The live table folds outputs into a per-group picture."""
from __future__ import annotations

import io

from streaming.live_view import LiveView


def test_rebalances_expiries_and_commits_show_in_the_table():
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, [
        {"type": "state_change", "group_id": "g1", "to": "PreparingRebalance", "ts": 1000},
        {"type": "rebalance", "group_id": "g1", "generation": 1, "protocol": "range", "leader": "c-1",
         "members": ["c-1", "c-2"], "trigger": "member_join", "completed_ts": 4000, "duration_ms": 3000,
         "partitions_moved": 6, "ts": 4000},
        {"type": "state_change", "group_id": "g1", "to": "Stable", "ts": 4000},
        {"type": "offset_commit", "group_id": "g1", "topic": "t", "partition": 0, "offset": 5, "ts": 4100},
    ])
    view.update(1, [{"type": "member_expired", "group_id": "g1", "member_id": "c-2", "ts": 9000},
                    {"type": "dead_letter", "group_id": "g1", "reason": "bad JSON", "ts": 9001}])
    g = view.groups["g1"]
    assert (g.state, g.generation, g.members, g.protocol, g.expired, g.rebalances) == ("Stable", 1, 2, "range", 1, 1)
    assert g.committed == {("t", 0): 5}
    text = view.render()
    assert "batch 1" in text and "dead letters 1" in text
    row = next(line for line in text.splitlines() if line.startswith("g1"))
    assert "Stable" in row and "member_join" in row and "3.0s" in row


def test_offset_tombstone_removes_commit():
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, [{"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 1, "offset": 7}])
    view.update(1, [{"type": "offset_commit", "group_id": "g", "topic": "t", "partition": 1, "tombstone": True}])
    assert view.groups["g"].committed == {}

