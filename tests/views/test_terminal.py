"""Progress of long commands: plain lines off a terminal, rich progress bars on one."""

from __future__ import annotations

import io
import re

from streaming.views import terminal


def test_progress_off_a_terminal_is_plain_lines(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(terminal, "PLAIN_EVERY_S", 0.0)  # a line at every push, as if the work took long
    monkeypatch.setattr(terminal, "PUSH_EVERY_S", 0.0)
    with terminal.Progress(out) as bars:
        assert not bars.terminal
        task = bars.task("replay range", total=3, unit="events")
        for _ in range(3):
            task.advance()
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue()
    assert [re.sub(r"\(.*\)", "(R)", line) for line in lines[:3]] == [
        f"replay range: {n}/3 events (R)" for n in (1, 2, 3)
    ]
    assert re.fullmatch(r"replay range: 3 events in \d+\.\d s \([\d,]+ events/s\)", lines[-1])


def test_progress_on_a_terminal_is_a_rich_bar():
    out = io.StringIO()
    with terminal.Progress(out, terminal=True, width=120) as bars:
        task = bars.task("reading the feed", total=2000, unit="records")
        for _ in range(2000):
            task.advance()
        task.update(note="3 groups")
    text = out.getvalue()
    assert "\x1b[" in text and "━" in text  # escape codes and a bar
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).splitlines()[-1]
    assert "reading the feed" in last and "2,000/2,000 records" in last and "records/s" in last
    assert "3 groups" in last


def test_track_counts_what_is_consumed():
    out = io.StringIO()
    assert list(terminal.track(iter(range(5)), "reading", out=out, unit="records")) == [0, 1, 2, 3, 4]
    assert out.getvalue().startswith("reading: 5 records in ")


def test_count_lines(tmp_path):
    (tmp_path / "a").write_bytes(b"x\ny\n")
    (tmp_path / "b").write_bytes(b"x\ny")
    (tmp_path / "c").write_bytes(b"")
    assert [terminal.count_lines(tmp_path / n) for n in "abc"] == [2, 2, 0]
