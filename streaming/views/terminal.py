"""What the commands show while they work: a table redrawn in place and progress bars on a terminal, plain lines
everywhere else (CI, pipes, log files).

This module is the one place that knows ``rich``; the commands use :func:`progress`, :func:`track`,
:class:`LiveScreen`, :func:`table` and :func:`is_terminal`. Whether a stream is a terminal is rich's answer for it
(so ``TERM=dumb``, ``NO_COLOR``, ``FORCE_COLOR`` and ``TTY_COMPATIBLE`` behave as they do for other rich programs).
Progress goes to stderr, so stdout stays the command's result.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterable, Iterator, Sequence, TextIO, TypeVar

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table
from rich.text import Text

T = TypeVar("T")
PLAIN_EVERY_S = 10.0  # how often a plain progress line is written while work goes on
PUSH_EVERY_S = 0.1  # how often counts reach the terminal display (advance() is called per item)


def console(out: TextIO | None = None, *, terminal: bool | None = None, width: int | None = None) -> Console:
    """A console writing to ``out`` (default stdout); ``terminal`` forces or forbids terminal output."""
    return Console(
        file=out if out is not None else sys.stdout,
        force_terminal=terminal,
        width=width,
        highlight=False,
        soft_wrap=False,
    )


def is_terminal(out: TextIO | None = None) -> bool:
    return console(out).is_terminal


# ==================================================================== a table redrawn in place
def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, right: Iterable[int] = (), caption: str | None = None
) -> Table:
    """A table; columns whose index is in ``right`` are right-aligned (numbers)."""
    right = set(right)
    t = Table(caption=caption, caption_justify="left", header_style="bold", expand=False)
    for i, name in enumerate(header):
        t.add_column(name, justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        t.add_row(*row)
    return t


def lines(*texts: str | None, style: str | None = None) -> Text:
    return Text("\n".join(t for t in texts if t is not None), style=style)


def stack(*parts: RenderableType | None) -> Group:
    return Group(*(p for p in parts if p is not None))


class LiveScreen:
    """Shows a renderable on a terminal and redraws it on each :meth:`show`, on the terminal's alternate screen:
    every redraw repaints the whole screen, so lines that other writers (the JVM's log) put on it in between are
    painted over instead of scrolling the picture apart. :meth:`close` goes back to the normal screen and prints
    the last picture there, so it stays in the scrollback."""

    def __init__(self, out: TextIO | None = None, *, width: int | None = None, con: Console | None = None):
        self.console = con if con is not None else console(out, terminal=True, width=width)
        self._live = Live(
            console=self.console,
            screen=True,
            auto_refresh=False,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._last: RenderableType | None = None

    def show(self, renderable: RenderableType) -> None:
        if self._last is None:
            self._live.start()
        self._last = renderable
        self._live.update(renderable, refresh=True)

    def close(self) -> None:
        if self._last is not None:
            self._live.stop()
            self.console.print(self._last)
            self._last = None


# ==================================================================== progress
class _Count(ProgressColumn):
    def render(self, task) -> Text:
        unit = task.fields.get("unit", "")
        done = _number(task.completed)
        return Text(f"{done}/{_number(task.total)} {unit}" if task.total is not None else f"{done} {unit}")


class _Rate(ProgressColumn):
    def render(self, task) -> Text:
        speed = (task.finished_speed if task.finished else task.speed) or (
            task.completed / task.elapsed if task.elapsed else None
        )  # too short for rich's sampled estimate
        return Text(f"{speed:,.0f} {task.fields.get('unit', '')}/s" if speed else "", style="cyan")


class Task:
    """One piece of long work: call :meth:`advance` per item (cheap: the display is updated a few times a second)
    or :meth:`update` with absolute values; ``note`` is a short free text shown after the counts."""

    def __init__(self, progress: "Progress", description: str, total: float | None, unit: str) -> None:
        self._progress = progress
        self.description, self.total, self.unit = description, total, unit
        self.completed: float = 0
        self.note = ""
        self.started = self._pushed = self._written = time.monotonic()
        self._id = progress._add(self)

    def advance(self, n: float = 1) -> None:
        self.completed += n
        now = time.monotonic()
        if now - self._pushed >= PUSH_EVERY_S:
            self._push(now)

    def update(self, completed: float | None = None, total: float | None = None, note: str | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if total is not None:
            self.total = total
        if note is not None:
            self.note = note
        now = time.monotonic()
        if now - self._pushed >= PUSH_EVERY_S:
            self._push(now)

    def _push(self, now: float) -> None:
        self._pushed = now
        self._progress._push(self, now)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.completed / elapsed if elapsed > 0 else 0.0

    def plain(self, done: bool = False) -> str:
        count = _number(self.completed) + (f"/{_number(self.total)}" if self.total is not None and not done else "")
        elapsed = time.monotonic() - self.started
        text = f"{self.description}: {count} {self.unit}"
        text += f" in {elapsed:.1f} s" if done else ""
        text += f" ({self.rate():,.0f} {self.unit}/s)"
        return text + (f", {self.note}" if self.note else "")


class Progress:
    """Progress of one or more tasks, as bars on a terminal or, elsewhere, a plain line per task every
    ``PLAIN_EVERY_S`` seconds and when it finishes. Use as a context manager."""

    def __init__(self, out: TextIO | None = None, *, terminal: bool | None = None, width: int | None = None):
        self.console = console(out if out is not None else sys.stderr, terminal=terminal, width=width)
        self.terminal = self.console.is_terminal
        self._rich: _RichProgress | None = None
        self._tasks: dict[int, Task] = {}
        self._next_id = 0
        if self.terminal:
            self._rich = _RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                _Count(),
                _Rate(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[note]}"),
                console=self.console,
                transient=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )

    def __enter__(self) -> "Progress":
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc) -> None:
        for task in list(self._tasks.values()):
            self.finish(task)
        if self._rich is not None:
            self._rich.stop()

    def task(self, description: str, total: float | None = None, unit: str = "events") -> Task:
        return Task(self, description, total, unit)

    def finish(self, task: Task) -> None:
        """The task is done: its final count, time and rate are shown (a plain line off a terminal)."""
        if self._tasks.pop(task._id, None) is None:
            return
        if self._rich is not None:
            if task.total is None:
                task.total = task.completed
            self._rich.update(task._id, completed=task.completed, total=task.total, note=task.note)
            self._rich.stop_task(task._id)
        else:
            self.console.print(task.plain(done=True), markup=False, highlight=False)

    def _add(self, task: Task) -> int:
        if self._rich is not None:
            task_id = self._rich.add_task(task.description, total=task.total, unit=task.unit, note="")
        else:
            task_id = self._next_id
            self._next_id += 1
        self._tasks[task_id] = task
        return task_id

    def _push(self, task: Task, now: float) -> None:
        if self._rich is not None:
            self._rich.update(task._id, completed=task.completed, total=task.total, note=task.note)
        elif now - task._written >= PLAIN_EVERY_S:
            task._written = now
            self.console.print(task.plain(), markup=False, highlight=False)


@contextlib.contextmanager
def progress(
    description: str,
    total: float | None = None,
    unit: str = "events",
    out: TextIO | None = None,
) -> Iterator[Task]:
    """One task's progress, finished when the block ends."""
    with Progress(out) as p:
        yield p.task(description, total, unit)


def track(
    items: Iterable[T], description: str, total: float | None = None, unit: str = "events", out: TextIO | None = None
) -> Iterator[T]:
    """``items``, counted as they are consumed."""
    with progress(description, total, unit, out) as task:
        for item in items:
            yield item
            task.advance()


def count_lines(path: str) -> int:
    """Lines of a file, read in large blocks: the total of a progress bar over a JSON-lines feed."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
