"""The live table and the progress bars in a real terminal: tmux runs them, ``capture-pane`` reads what a person
would see. Redrawn in place means the picture appears once on the screen, however many times it was drawn; the
alternate screen keeps the JVM's log lines from scrolling it apart; the last picture stays after the end."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One detached tmux session of a fixed size running one command."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.name = f"rt-{uuid.uuid4().hex[:8]}"
        # As from a person's shell: the terminal's own size, not a COLUMNS/LINES this process may have inherited.
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                "160",
                "-y",
                "50",
                "-c",
                str(cwd),
                f"env -u COLUMNS -u LINES {command}",
            ],
            check=True,
        )

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def history(self) -> str:
        """The normal screen with its scrollback (what stays once the alternate screen is left)."""
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", self.name)

    def alternate_on(self) -> bool:
        return self.tmux("display-message", "-p", "-t", self.name, "#{alternate_on}").strip() == "1"

    def wait_for(self, condition, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"no {what} after {timeout_s:.0f} s; screen:\n{self.screen()}"
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


LIVE_TABLE = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from streaming.coordinator import GroupCoordinator
    from streaming.feeds.simulator import SimulationSettings, Simulator
    from streaming.views.live_view import LiveView

    start = 1_700_000_000_000
    events = Simulator(SimulationSettings(groups=3, seed=2), start_ms=start).run_until(start + 60_000)
    coordinator, view = GroupCoordinator(), LiveView()
    step = len(events) // 6 + 1
    for batch, i in enumerate(range(0, len(events), step)):
        outputs = [o for e in events[i:i + step] for o in coordinator.handle(e)]
        print("a JVM log line that must not scroll the table apart", file=sys.stderr, flush=True)
        view.update(batch, outputs)
        view.draw({{"inputRowsPerSecond": 1000.0, "processedRowsPerSecond": 2000.0,
                    "durationMs": {{"triggerExecution": 42}}}})
        time.sleep(0.15)
    print("drawn", file=open("drawn", "w"))
    input()
    view.close()
    print("closed", file=open("closed", "w"))
    time.sleep(30)
""")


def test_live_table_redraws_in_place_on_the_alternate_screen_and_stays_after(tmp_path):
    script = tmp_path / "live.py"
    script.write_text(LIVE_TABLE.format(repo=str(REPO)))
    term = Tmux(f"{sys.executable} {script}", tmp_path)
    try:
        term.wait_for(lambda: (tmp_path / "drawn").exists(), "six batches drawn")
        screen = term.screen()
        assert term.alternate_on(), "the live table runs on the alternate screen"
        assert screen.count("GROUP") == 1 and screen.count("batch 5") == 1, screen  # one picture, the last one
        for group in ("group-0", "group-1", "group-2"):
            assert sum(line.lstrip("│ ").startswith(group) for line in screen.splitlines()) == 1, screen
        assert "must not scroll" not in screen, screen  # painted over by the redraw
        assert screen.splitlines()[0].startswith("batch 5"), screen  # the picture starts at the top
        assert "input 1000 ev/s" in screen and "│" in screen, screen  # the status line and a drawn table

        term.tmux("send-keys", "-t", term.name, "Enter")
        term.wait_for(lambda: (tmp_path / "closed").exists(), "the view closed")
        term.wait_for(lambda: not term.alternate_on(), "the normal screen back")
        after = term.history()
        assert after.count("batch 5") == 1 and "batch 4" not in after, after  # the last picture, once
    finally:
        term.close()


def test_replay_progress_bars_finish_in_place_then_the_table(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming",
            "simulate",
            "--out",
            "feed.jsonl",
            "--groups",
            "3",
            "--duration",
            "300",
            "--seed",
            "5",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    term = Tmux(
        f"env PYTHONPATH={REPO} {sys.executable} -m streaming replay --feed feed.jsonl --assignor range,sticky; "
        f"touch done; sleep 30",
        tmp_path,
    )
    try:
        term.wait_for(lambda: (tmp_path / "done").exists(), "replay finished")
        screen = term.history()
        for bar in ("reading the feed", "replay range", "replay sticky"):
            lines = [line for line in screen.splitlines() if bar in line]
            assert len(lines) == 1, f"{bar!r} drawn once, in place:\n{screen}"
            assert "/s" in lines[0], lines[0]  # finished with its count and rate
        assert "partitions moved" in screen and "sticky" in screen, screen
    finally:
        term.close()
