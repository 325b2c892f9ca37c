"""History and report of consumer-protocol (KIP-848) groups, folded from the real ConsumerGroupCoordinator's outputs
of known feeds: epochs, targets, reconciliation and revocation times, and partitions without an owner."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.views import report
from streaming.views.history import (
    HistoryBuilder,
    OwnershipChange,
    Reconciliation,
    Revocation,
    UnownedSpan,
    build_histories,
    build_history,
    coordinator_outputs,
)
from tests.views.test_report import _read_png, _tables
from offsets_store.codec import CONSUMER_GROUP_TYPES

START = 1_700_000_000_000
CONFIG = ["group.consumer.session.timeout.ms=10000", "group.consumer.heartbeat.interval.ms=3000"]


def hb(ts, member, epoch, owned=None, **fields):
    e = {
        "type": "consumer_heartbeat",
        "group_id": "g",
        "ts": START + ts,
        "member_id": member,
        "member_epoch": epoch,
        "client_id": member[0],
        **fields,
    }
    if owned is not None:
        e["topic_partitions"] = [["t", p] for p in owned]
    return e


def join(ts, member, **fields):
    return hb(ts, member, 0, [], subscribed_topic_names=["t"], rebalance_timeout_ms=30_000, **fields)


# a joins and takes t-0..3; b joins: a is asked to give up t-2, t-3, does so 100 ms later, b takes them on its next
# heartbeat; then a crashes (its last heartbeat at 2.1 s), is fenced at 12.1 s, and b takes everything at 13 s.
FEED = [
    {"type": "topic_metadata", "topic": "t", "partitions": 4, "ts": START},
    join(0, "a-member"),
    join(1_000, "b-member"),
    hb(2_000, "a-member", 1, [0, 1, 2, 3]),
    hb(2_100, "a-member", 1, [0, 1]),
    hb(3_000, "b-member", 2, []),
    hb(8_000, "b-member", 2, [2, 3]),
    hb(13_000, "b-member", 2, [2, 3]),
]
A, B = "a-member", "b-member"


def _outputs():
    outputs, rejected = coordinator_outputs(FEED, None, report.consumer_config(CONFIG))
    assert rejected == 0
    return outputs


def test_targets_epochs_and_returns_to_stable():
    h = build_history(_outputs(), "g")
    assert h.is_consumer and h.protocol == "consumer"
    assert [(t.epoch, t.ts - START, t.bumped_ts - START, t.trigger) for t in h.targets] == [
        (1, 0, 0, "join"),
        (2, 1_000, 1_000, "join"),
        (3, 13_000, 12_100, "expiry"),
    ]
    assert [t.target for t in h.targets] == [
        {A: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]},
        {A: [("t", 0), ("t", 1)], B: [("t", 2), ("t", 3)]},
        {B: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]},
    ]
    assert h.targets[1].changes == [OwnershipChange(("t", 2), A, B), OwnershipChange(("t", 3), A, B)]
    assert [t.reconciliation_ms for t in h.targets] == [0, 2_000, 0]
    assert [t.balance for t in h.targets] == [0, 0, 0]
    assert [(e[0] - START, e[1]) for e in h.group_epochs] == [(0, 1), (1_000, 2), (12_100, 3)]
    # A Generation per rebalance (first epoch bump to Stable again), keyed by the group epoch.
    gens = h.generations
    assert [
        (
            g.generation,
            g.trigger,
            g.started_ts - START,
            g.completed_ts - START,
            g.duration_ms,
            g.partitions_moved,
            g.rebalance_protocol,
            g.protocol,
        )
        for g in gens
    ] == [
        (1, "join", 0, 0, 0, 0, "consumer", "uniform"),
        (2, "join", 1_000, 3_000, 2_000, 2, "consumer", "uniform"),
        (3, "expiry", 12_100, 13_000, 900, 2, "consumer", "uniform"),
    ]
    # Unavailable from the answer that told the owner to stop (a at 2 s; a's fencing at 12.1 s) to the one that
    # told b to start (3 s; 13 s): 1 s each for t-2, t-3, 0.9 s each for t-0, t-1.
    assert [(g.max_partition_unavailable_ms, g.unavailable_partition_ms) for g in gens] == [
        (0, 0),
        (1_000, 2_000),
        (900, 1_800),
    ]
    assert gens[2].owners == {B: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]}
    assert [s.state for s in h.states] == ["Stable", "Reconciling", "Stable", "Assigning", "Stable"]


def test_member_epochs_reconciliation_revocation_and_unowned_partitions():
    h = build_history(_outputs(), "g")
    assert [(ts - START, e, s) for ts, e, s in h.member_epochs[A]] == [
        (0, 1, "STABLE"),
        (2_000, 1, "UNREVOKED_PARTITIONS"),
        (2_100, 2, "STABLE"),
    ]
    assert [(ts - START, e, s) for ts, e, s in h.member_epochs[B]] == [
        (1_000, 2, "UNRELEASED_PARTITIONS"),
        (3_000, 2, "STABLE"),
        (13_000, 3, "STABLE"),
    ]
    # From the new target (1 s) to the member Stable on it: a gave up its two partitions at 2.1 s, b got them at 3 s.
    assert h.reconciliations == [
        Reconciliation(A, A, 2, START + 1_000, START + 2_100),
        Reconciliation(B, B, 2, START + 1_000, START + 3_000),
    ]
    assert [r.duration_ms for r in h.reconciliations] == [1_100, 2_000]
    # a was asked at its 2 s heartbeat and acknowledged 100 ms later.
    assert h.revocations == [
        Revocation(A, A, ("t", 2), 1, START + 2_000, START + 2_100),
        Revocation(A, A, ("t", 3), 1, START + 2_000, START + 2_100),
    ]
    # Owner-less: t-2, t-3 from the answer that asked a to revoke them (it stops fetching them then, before it
    # acknowledges) to b's next heartbeat; t-0, t-1 from a's fencing to b's next one.
    assert h.unowned == [
        UnownedSpan(("t", 2), A, START + 2_000, B, START + 3_000),
        UnownedSpan(("t", 3), A, START + 2_000, B, START + 3_000),
        UnownedSpan(("t", 0), A, START + 12_100, B, START + 13_000),
        UnownedSpan(("t", 1), A, START + 12_100, B, START + 13_000),
    ]
    assert sum(g.partitions_moved for g in h.generations) == 4
    (departure,) = h.departures
    assert (
        departure.lane,
        departure.kind,
        departure.reason,
        departure.ts - START,
        departure.last_heartbeat_ts - START,
    ) == (A, "expired", "session timeout", 12_100, 2_100)
    assert h.lanes[A].label == "a-a-member" and h.lanes[A].spans == [[START, START + 12_100]]
    assert h.current == {B: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]} and h.pending_revocation == {B: []}


def test_static_members_keep_their_lane_and_a_temporary_leave_keeps_the_partitions():
    feed = FEED[:6] + [
        join(3_500, "c-member", instance_id="pod-c"),
        hb(4_000, "c-member", 3, [], instance_id="pod-c"),
        hb(4_500, "a-member", 2, [0, 1]),
        hb(5_000, "c-member", 3, [], instance_id="pod-c"),
        hb(5_500, "b-member", 2, [2, 3]),
        hb(5_600, "b-member", 2, [2]),  # b gives up t-3 ...
        hb(6_000, "c-member", 3, [], instance_id="pod-c"),  # ... and c takes it
    ]
    outputs, _ = coordinator_outputs(feed, None, report.consumer_config(CONFIG))
    h = build_history(outputs, "g")
    owned_by_c = h.current["pod-c"]
    assert owned_by_c == [("t", 3)] and "pod-c" in h.lanes and h.lanes["pod-c"].static
    leave = hb(6_500, "c-member", -2, instance_id="pod-c")
    back = join(7_000, "c-member-2", instance_id="pod-c")
    outputs, _ = coordinator_outputs(feed + [leave, back], None, report.consumer_config(CONFIG))
    h2 = build_history(outputs, "g")
    assert h2.lanes["pod-c"].member_ids == ["c-member", "c-member-2"]
    assert [(d.kind, d.reason) for d in h2.departures] == [("left", "static leave")]
    assert [(r[0] - START, r[2], r[3]) for r in h2.replacements] == [(7_000, "c-member", "c-member-2")]
    # Nothing was released: the static member's partitions waited for it, and nobody else took them.
    assert [u for u in h2.unowned if u.from_lane == "pod-c"] == []
    assert h2.current["pod-c"] == owned_by_c


def test_the_same_history_from_outputs_without_the_records():
    outputs = _outputs()
    without = [o for o in outputs if o["type"] not in CONSUMER_GROUP_TYPES]
    assert len(without) < len(outputs)
    full, lean = build_history(outputs, "g"), build_history(without, "g")
    # The bumps then show in the state changes only: a join's bump is in a Stable -> Reconciling change, an
    # expiry's in Stable -> Assigning; the figures stay.
    assert [(t.epoch, t.trigger) for t in lean.targets] == [(t.epoch, t.trigger) for t in full.targets]
    assert lean.unowned == full.unowned and lean.reconciliations == full.reconciliations
    incremental = HistoryBuilder()
    for o in outputs:
        incremental.add(o)
    assert incremental.groups == build_histories(outputs)


def _write(tmp_path: Path, events) -> Path:
    path = tmp_path / "feed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def test_report_of_a_consumer_group_shows_epochs_targets_and_reconciliation(tmp_path, capsys):
    feed, out = _write(tmp_path, FEED), tmp_path / "r.html"
    args = ["--group", "g", "--feed", str(feed), "--out", str(out)]
    for kv in CONFIG:
        args += ["--coordinator-config", kv]
    assert report.main(args) == 0
    assert "3 target assignments, 3 rebalances, 1 departures" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    tables = _tables(html)
    summary = dict(tables["summary"])
    assert summary["protocol"] == "consumer (KIP-848)" and summary["group epoch at end"] == "3"
    assert summary["target assignments that changed it"] == "3"
    assert summary["changed by trigger"] == "expiry 1, join 2"
    assert summary["reconciliation per member, median / max (ms)"] == "1100 / 2000"
    assert summary["revocation latency, median / max (ms)"] == "100 / 100"
    assert summary["partitions moved"] == "4" and summary["max partition unavailability (ms)"] == "1000"
    assert summary["partition unavailability (partition·s)"] == "3.8" and summary["members expired"] == "1"
    assert summary["max without owner, incl. no members (ms)"] == "1000"
    assert summary["rebalances (epoch bumps to Stable or Empty)"] == "3"
    assert summary["time rebalancing (ms)"] == "2900" and summary["longest rebalance (ms)"] == "2000"
    assert [row[:3] + row[6:7] for row in tables["generations"]] == [
        ["1", "join", "member a-member joined", "0"],
        ["2", "join", "member b-member joined", "2000"],
        ["3", "expiry", "member a-member fenced: the member session expired", "900"],
    ]
    assert [(row[0], row[2], row[5], row[6]) for row in tables["targets"]] == [
        ("1", "join", "4", "0"),
        ("2", "join", "2", "2000"),
        ("3", "expiry", "2", "0"),
    ]
    assert tables["versus"] == [["b-b-member", "t: 0,1,2,3", "t: 0,1,2,3", "", "yes"]]
    epochs = {row[0]: row for row in tables["member-epochs"]}
    assert epochs["a-a-member"][1:4] == ["1 → 2", "1", "1100 / 1100"]
    assert epochs["b-b-member"][1:4] == ["2 → 3", "1", "2000 / 2000"]
    assert tables["revocations"] == [
        ["a-a-member", "1", report.iso(START + 2_000), "t: 2,3", report.iso(START + 2_100), "100"]
    ]
    assert [(row[0], row[1], row[3], row[5], row[6]) for row in tables["unowned"]] == [
        ("t-2", "a-a-member", "b-b-member", "1000", "0"),
        ("t-3", "a-a-member", "b-b-member", "1000", "0"),
        ("t-0", "a-a-member", "b-b-member", "900", "0"),
        ("t-1", "a-a-member", "b-b-member", "900", "0"),
    ]
    assert tables["per-partition"] == [
        ["t-0", "1", "900", "900", "0"],
        ["t-1", "1", "900", "900", "0"],
        ["t-2", "1", "1000", "1000", "0"],
        ["t-3", "1", "1000", "1000", "0"],
    ]
    # The timeline: epochs for bands, member epochs on the lanes, a's reconciling time, owner-less spans, the expiry.
    assert ">epoch 2<" in html and ">gen " not in html
    assert html.count('<line class="unowned"') == 4 and html.count('class="expiry"') == 1
    assert 'class="reconciling"' in html and ">e2<" in html


def test_report_of_a_simulated_consumer_group_agrees_with_the_coordinator():
    s = SimulationSettings(groups=1, seed=3, group_protocol="consumer", churn_interval_ms=15_000)
    events = Simulator(s, start_ms=START).run_until(START + 5 * 60_000)
    outputs, rejected = coordinator_outputs(events, None, s.consumer_config())
    assert rejected == 0
    h = build_history(outputs, "group-0")
    rebalances = [o for o in outputs if o["type"] == "rebalance"]
    targets = [o for o in outputs if o["type"] == "target_assignment"]
    assert [g.generation for g in h.generations] == [o["group_epoch"] for o in rebalances]
    assert [t.epoch for t in h.targets] == [o["assignment_epoch"] for o in targets] and len(targets) > 10
    # Every owner-less span ends with the partition in the new owner's assignment, and no partition is ever held
    # by two lanes at once.
    assert all(u.to_ts is None or u.to_ts >= u.from_ts for u in h.unowned) and h.unowned
    expired = [o["member_id"] for o in outputs if o["type"] == "member_expired"]
    assert sorted(d.member_id for d in h.departures if d.kind == "expired") == sorted(expired) and expired
    # The revocations the simulated clients acknowledged took at most their processing delay.
    latencies = [r.latency_ms for r in h.revocations if r.latency_ms is not None]
    assert latencies and max(latencies) < s.revocation_delay_ms
    tables = _tables(report.render_html(h))
    assert len(tables["targets"]) == len(targets)
    assert [row[0] for row in tables["generations"]] == [str(o["group_epoch"]) for o in rebalances]
    # The members' commits reach the consumer model, which takes every one (at the member's epoch).
    answers = [o for o in outputs if o["type"] == "commit_response"]
    assert len(answers) == sum(e["type"] == "commit" for e in events) > 0
    assert {o["error"] for o in answers} == {"NONE"} and any(o["type"] == "offset_commit" for o in outputs)


@pytest.mark.parametrize("bad", ["group.consumer.session.timeout.ms=abc", "group.consumer.nope=1"])
def test_bad_consumer_settings_are_refused(tmp_path, bad, capsys):
    feed = _write(tmp_path, FEED)
    assert (
        report.main(
            ["--group", "g", "--feed", str(feed), "--out", str(tmp_path / "x.html"), "--coordinator-config", bad]
        )
        == 2
    )
    assert "report:" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists(report.CHROMIUM), reason="needs /usr/bin/chromium (apt-get install -y chromium)")
def test_png_of_a_consumer_group_shows_reconciliation_and_the_expiry(tmp_path):
    feed, html, png = _write(tmp_path, FEED), tmp_path / "r.html", tmp_path / "r.png"
    args = ["--group", "g", "--feed", str(feed), "--out", str(html), "--png", str(png)]
    for kv in CONFIG:
        args += ["--coordinator-config", kv]
    assert report.main(args) == 0
    width, height, rows = _read_png(png.read_bytes())
    assert width == report.PAGE_WIDTH and height == report.page_height(build_history(_outputs(), "g"))
    for colour, at_least in ((report.RECONCILING_FILL, 200), (report.EXPIRY_RED, 20)):
        px = bytes.fromhex(colour[1:])
        assert sum(row.count(px) for row in rows) > at_least, colour
