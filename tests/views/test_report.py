"""The HTML report of a crash, read back as tables, and its PNG rendered by headless Chromium."""

from __future__ import annotations

import json
import os
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from streaming.views import report
from streaming.feeds.simulator import SimulationSettings, Simulator
from streaming.views.history import build_history, coordinator_outputs
from tests.coordinator_harness import Harness, of_type

START = 1_700_000_000_000
TOPIC = [{"name": "range", "topics": ["orders"]}]


# ---------------------------------------------------------------- a scripted crash, recorded as a feed
def _crash_feed(tmp_path: Path) -> tuple[Path, Harness, dict[str, str]]:
    """a, b, c consume 'orders' (6 partitions) with range; c stops heartbeating and expires."""
    h = Harness(assignment_mode="tracker", group_initial_rebalance_delay_ms=3_000)  # Kafka's default delay
    h.now = START
    h.send(type="topic_metadata", topic="orders", partitions=6)
    ids = {n: h.new_member(client_id=n, protocols=TOPIC) for n in "abc"}
    while h.state() != "CompletingRebalance":  # the initial delay gathers all three
        h.tick(1_000)
    h.tick(5)  # clients answer a moment after the join round ends
    for n in "abc":
        h.sync(ids[n], 1)
    for _ in range(4):  # 12 s: c's 10 s session runs out
        h.tick(3_000)
        for n in "ab":
            h.heartbeat(ids[n], h.generation())
    for n in "ab":  # told REBALANCE_IN_PROGRESS, a and b rejoin
        h.join(member_id=ids[n], client_id=n, protocols=TOPIC)
    for n in "ab":
        h.sync(ids[n], 2)
    h.tick(3_000)
    for n in "ab":
        h.heartbeat(ids[n], 2)
    path = tmp_path / "crash.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in h.events), encoding="utf-8")
    return path, h, ids


class _Tables(HTMLParser):
    """Rows of every <table class=...> in a page, as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("class", "")
            self.tables[self._table] = []
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._in_body or self._table == "summary":
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _tables(html: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def test_crash_report_shows_generations_expiry_and_moved_partitions(tmp_path):
    feed, h, ids = _crash_feed(tmp_path)
    out = tmp_path / "report.html"
    assert report.main(["--group", "g", "--feed", str(feed), "--out", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    tables = _tables(html)
    # What the coordinator really did, as the ground truth for the page.
    truth = [o for o in h.outputs if o["type"] == "rebalance"]
    expired = of_type(h.outputs, "member_expired")
    assert [e["member_id"] for e in expired] == [ids["c"]]
    c_partitions = next(o["partitions"] for o in of_type(h.outputs, "assignment", ids["c"]) if o["generation"] == 1)
    assert c_partitions

    generations = tables["generations"]
    assert [row[0] for row in generations] == [str(r["generation"]) for r in truth] == ["1", "2"]
    assert [row[1] for row in generations] == ["join", "expiry"]
    assert [row[11] for row in generations] == [str(r["partitions_moved"]) for r in truth]
    assert 'data-generation="1"' in html and 'data-generation="2"' in html and ">gen 1<" in html
    # The expiry: a table row naming c and the session timeout, and a mark on the timeline.
    (departure,) = tables["departures"]
    assert departure[2] == ids["c"] and departure[3] == "expired" and departure[4] == "session timeout"
    assert html.count('class="expiry"') == 1
    # Every partition c owned left c in generation 2 (range also shifts one of b's), and the table adds up to
    # the coordinator's own count.
    moves = [row for row in tables["moves"] if row[0] == "2"]
    assert sum(int(row[4]) for row in moves) == truth[1]["partitions_moved"]
    from_c = [row for row in moves if row[2].startswith("c-")]
    listed = {int(p) for row in from_c for p in row[5].split(": ")[1].split(",")}
    assert listed == {p for _, p in c_partitions}
    assert all(row[3] in ("a-" + ids["a"][2:10], "b-" + ids["b"][2:10]) for row in from_c)
    assert html.count('class="move"') == len(moves)
    summary = dict(tables["summary"])
    assert summary["rebalances"] == "2" and summary["members expired"] == "1"
    # Self-contained: nothing is fetched from elsewhere.
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html


def test_since_drops_earlier_generations(tmp_path):
    feed, h, ids = _crash_feed(tmp_path)
    second = [o for o in h.outputs if o["type"] == "rebalance"][1]
    out = tmp_path / "later.html"
    since = report.iso(second["started_ts"])
    assert report.main(["--group", "g", "--feed", str(feed), "--since", since, "--out", str(out)]) == 0
    assert [row[0] for row in _tables(out.read_text())["generations"]] == ["2"]
    assert report.parse_since(str(second["started_ts"])) == second["started_ts"] == report.parse_since(since)


def test_outputs_input_gives_the_same_page_as_the_feed(tmp_path):
    feed, h, _ = _crash_feed(tmp_path)
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(o) + "\n" for o in h.outputs), encoding="utf-8")
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert report.main(["--group", "g", "--feed", str(feed), "--out", str(a)]) == 0
    assert report.main(["--group", "g", "--outputs", str(outputs), "--out", str(b)]) == 0
    assert a.read_text() == b.read_text()


def test_unknown_group_and_bad_since_are_errors(tmp_path, capsys):
    feed, _, _ = _crash_feed(tmp_path)
    assert report.main(["--group", "nope", "--feed", str(feed), "--out", str(tmp_path / "x.html")]) == 1
    assert "does not appear" in capsys.readouterr().err
    assert (
        report.main(["--group", "g", "--feed", str(feed), "--since", "yesterday", "--out", str(tmp_path / "x.html")])
        == 2
    )
    assert (
        report.main(
            [
                "--group",
                "g",
                "--feed",
                str(feed),
                "--coordinator-config",
                "no.such.setting=1",
                "--out",
                str(tmp_path / "x.html"),
            ]
        )
        == 2
    )
    assert "unknown coordinator setting" in capsys.readouterr().err


def test_coordinator_settings_change_how_a_feed_replays(tmp_path, capsys):
    feed, _, _ = _crash_feed(tmp_path)
    out = tmp_path / "r.html"
    # With a 20 s minimum session the members' 10 s sessions are refused: as in Kafka, a refused join creates no
    # group, so the group never exists.
    assert (
        report.main(
            [
                "--group",
                "g",
                "--feed",
                str(feed),
                "--out",
                str(out),
                "--coordinator-config",
                "group.min.session.timeout.ms=20000",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "no history" in err and "with INVALID_SESSION_TIMEOUT" in err and not out.exists()
    assert "tracker.adopt.unknown.members" not in err  # not a feed of a broker's answers


def test_simulated_churn_report_lists_every_generation_and_expiry():
    events = Simulator(
        SimulationSettings(groups=1, seed=3, assignors=("sticky",), churn_interval_ms=15_000), start_ms=START
    ).run_until(START + 180_000)
    outputs, rejected = coordinator_outputs(events)
    assert rejected == 0
    history = build_history(outputs, "group-0")
    expiries = [o for o in outputs if o["type"] == "member_expired"]
    assert expiries, "scenario should contain a crash"
    tables = _tables(report.render_html(history))
    assert [row[0] for row in tables["generations"]] == [
        str(o["generation"]) for o in outputs if o["type"] == "rebalance"
    ]
    assert sorted(row[2] for row in tables["departures"] if row[3] == "expired") == sorted(
        o["member_id"] for o in expiries
    )
    moved = sum(o["partitions_moved"] for o in outputs if o["type"] == "rebalance")
    assert dict(tables["summary"])["partitions moved"] == str(moved) and moved > 0


# ---------------------------------------------------------------- the PNG
def _read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered scanlines of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[j : j + 3]) for j in range(0, stride, bpp))
        rows[-1] = list(rows[-1])
        prev = line
    return width, height, rows


@pytest.mark.skipif(not os.path.exists(report.CHROMIUM), reason="needs /usr/bin/chromium (apt-get install -y chromium)")
def test_png_shows_the_timeline(tmp_path):
    feed, h, _ = _crash_feed(tmp_path)
    html, png = tmp_path / "r.html", tmp_path / "r.png"
    assert report.main(["--group", "g", "--feed", str(feed), "--out", str(html), "--png", str(png)]) == 0
    data = png.read_bytes()
    assert len(data) > 10_000
    width, height, rows = _read_png(data)
    history = build_history(h.outputs, "g")
    assert width == report.PAGE_WIDTH and height == report.page_height(history)
    colours = {px for row in rows for px in row}
    assert len(colours) > 50  # text, bands and marks, not a blank page
    red = bytes.fromhex(report.EXPIRY_RED[1:])
    assert sum(row.count(red) for row in rows) > 20  # the expiry cross was drawn
    ink = sum(1 for row in rows for px in row if px != b"\xff\xff\xff")
    assert ink > width * height // 50


def test_png_without_chromium_is_a_clear_error(tmp_path, monkeypatch, capsys):
    feed, _, _ = _crash_feed(tmp_path)
    monkeypatch.setattr(report, "chromium_path", lambda: None)
    code = report.main(
        ["--group", "g", "--feed", str(feed), "--out", str(tmp_path / "r.html"), "--png", str(tmp_path / "r.png")]
    )
    assert code == 3 and "apt-get install -y chromium" in capsys.readouterr().err
    assert (tmp_path / "r.html").exists() and not (tmp_path / "r.png").exists()


def test_the_lag_line_is_drawn_under_the_timeline_with_each_rebalance_and_its_cost():
    from streaming.coordinator.routing import run_feed
    from streaming.feeds.simulator import SimulationSettings, Simulator
    import re

    from streaming.views.history import build_history
    from streaming.views.report import render_html, render_lag_svg

    sim = Simulator(SimulationSettings(groups=1, log_end_interval_ms=1_000, seed=3))
    h = build_history(run_feed(sim.run_until(120_000))[0], "group-0")
    svg = render_lag_svg(h)
    page = render_html(h)
    assert page.index('class="timeline"') < page.index('class="lag"') < page.index("Generations")
    points = re.search(r'class="lag-seconds" points="([^"]+)"', svg)[1].split()
    assert len(points) == len([p for p in h.lag if p[1] is not None])  # a point per moment with a figure
    assert len(re.findall(r'class="lag-rebalance"', svg)) == len(h.generations)
    costs = [g.lag_cost for g in h.generations if g.lag_cost and g.lag_cost["lag_records"] is not None]
    assert costs and re.findall(r'class="lag-cost"[^>]*>\+(\d+) rec / ([\d.]+)s', svg) == [
        (str(c["lag_records"]), f"{c['lag_seconds']:.1f}") for c in costs
    ]
    assert "Lag cost of each rebalance" in page
    assert (
        render_lag_svg(
            build_history(run_feed(Simulator(SimulationSettings(groups=1, seed=3)).run_until(30_000))[0], "group-0")
        )
        == ""
    )  # no samples: no lag panel
