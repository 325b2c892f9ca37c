"""The examples of README and ``docs/``, run as a reader runs them: the commands as written, in a fresh directory,
with only the broker address (``kafka:9092``) swapped for the test's broker. An example in any of them that no test
runs fails the first test, so the documents cannot drift from the tool again."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.coordinator import parse_event
from streaming.local.broker import _die_with_parent
from tests.groups import OWN_PROCESSES

pytestmark = pytest.mark.xdist_group(OWN_PROCESSES)


REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# Every document whose examples are checked: the front page and each file of docs/.
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]

# Commands of the documents run elsewhere, and where: each such test must exist and run that subcommand.
RUN_ELSEWHERE = {
    "make demo": ("tests/cli/test_demo.py", "demo"),  # `rebalance-tracker demo` under make's venv
    "make test": (".ci/run", "make test"),  # the CI command itself
    "rebalance-tracker run --master": ("tests/tracker/test_tracker_cluster.py", '"run", "--master"'),
    "rebalance-tracker spark-cluster": ("tests/tracker/test_tracker_cluster.py", "spark_cluster"),
    "spark-submit": ("tests/tracker/test_tracker_cluster.py", "spark-submit"),
    "rebalance-tracker broker --apache-kafka 4": (
        "tests/brokers/test_apache_kafka4.py",
        '"broker", "--apache-kafka", "4"',
    ),
    "export KAFKA_BOOTSTRAP": ("tests/cli/test_track_a_cluster.py", "KAFKA_BOOTSTRAP"),
}


# Sections (a document's title or a ``##`` heading, in README or docs/) whose commands are one workflow, run as a
# script by a test of their own (each command's subcommand and options must appear there).
SECTIONS_ELSEWHERE = {"Track a real cluster": "tests/cli/test_track_a_cluster.py"}


def sections_of(document: Path) -> Iterator[tuple[str, str]]:
    """(heading, text) of each section of a document: its title (``#``) and each ``##`` heading start one; a ``###``
    stays in its section, and a ``#`` line inside a fenced block is a shell comment, not a heading."""
    heading, text, fenced = None, [], False
    for line in document.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"##? ", line):
            if heading is not None:
                yield heading, "".join(text)
            heading, text = line.lstrip("#").strip(), []
            continue
        text.append(line)
    if heading is not None:
        yield heading, "".join(text)


def readme_commands(sections: bool = False) -> list:
    """Every command of the documents' ``bash`` blocks: continuation lines joined, comments dropped (with
    ``sections``: (section heading, command) pairs)."""
    commands = []
    for heading, body in (pair for doc in DOCUMENTS for pair in sections_of(doc)):
        for block in re.findall(r"^```bash\n(.*?)^```", body, re.S | re.M):
            for line in block.replace("\\\n", " ").splitlines():
                words = [w for w in shlex.split(line, comments=True) if w != "&"]
                if words:
                    commands.append((heading.strip(), shlex.join(words)) if sections else shlex.join(words))
    return commands


def examples(prefix: str) -> list[list[str]]:
    """The documents' commands starting with ``prefix`` that this file runs (not those of SECTIONS_ELSEWHERE), as
    argv."""
    found = [
        shlex.split(c)
        for section, c in readme_commands(sections=True)
        if c.startswith(prefix) and section not in SECTIONS_ELSEWHERE
    ]
    assert found, f"README and docs/ have no '{prefix}' example any more: update this test"
    return found


def runs_here(command: str) -> bool:
    return any(command.startswith(p) for p in HERE)


HERE = (
    "rebalance-tracker run",
    "rebalance-tracker simulate",
    "rebalance-tracker offsets",
    "rebalance-tracker replay",
    "rebalance-tracker report",
    "rebalance-tracker outputs",
)


def test_every_readme_command_is_run_by_a_test():
    for section, command in readme_commands(sections=True):
        if section in SECTIONS_ELSEWHERE and not any(command.startswith(k) for k in RUN_ELSEWHERE):
            script = (REPO / SECTIONS_ELSEWHERE[section]).read_text()
            words = shlex.split(command)
            needles = ([words[1]] if words[0] == "rebalance-tracker" else [words[0]]) + [
                w for w in words if w.startswith("--")
            ]
            missing = [n for n in needles if f'"{n}"' not in script]
            assert not missing, f"{SECTIONS_ELSEWHERE[section]} does not run the documents' {command!r} ({missing})"
            continue
        elsewhere = [k for k in RUN_ELSEWHERE if command.startswith(k)]
        if elsewhere:
            path, needle = RUN_ELSEWHERE[elsewhere[0]]
            assert needle in (REPO / path).read_text(), f"{path} no longer runs {command!r}"
        else:
            assert runs_here(command) and not command.startswith("rebalance-tracker run --master"), (
                f"example in README or docs/ not run by any test: {command!r}"
            )


def test_readme_event_example_is_a_valid_event():
    """Every JSON block of README and docs/ is an event the job accepts; the two protocols' joins are among them."""
    blocks = [b for doc in DOCUMENTS for b in re.findall(r"^```json\n(.*?)^```", doc.read_text(), re.S | re.M)]
    types = set()
    for block in blocks:
        event, error = parse_event(block)
        assert error is None, error
        types.add(event["type"])
    assert {"join", "consumer_heartbeat"} <= types


def cli(argv: list[str], cwd: Path, bootstrap: str | None = None) -> list[str]:
    """A documented command as argv for this environment: our own ``rebalance-tracker``, the test's broker."""
    assert argv[0] == "rebalance-tracker"
    argv = [sys.executable, "-m", "streaming", *argv[1:]]
    return [a.replace("kafka:9092", bootstrap) if bootstrap else a for a in argv]


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1")
    e.pop("KAFKA_BOOTSTRAP", None)  # a bare `run` starts its own bundled broker, as docs/running.md says
    return e


def run_ok(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_offline_examples_record_replay_and_report(tmp_path):
    (simulate,) = [c for c in examples("rebalance-tracker simulate") if "--out" in c and "feed.jsonl" in c]
    run_ok(cli(simulate, tmp_path), tmp_path)
    groups = {json.loads(line)["group_id"] for line in (tmp_path / "feed.jsonl").open()}

    (replay,) = [c for c in examples("rebalance-tracker replay") if "feed.jsonl" in c]
    table = run_ok(cli(replay, tmp_path), tmp_path).stdout
    for assignor in replay[replay.index("--assignor") + 1].split(","):
        assert assignor in table.splitlines()[0], table
    assert "partitions moved" in table

    (report,) = [c for c in examples("rebalance-tracker report") if "--feed" in c]
    assert report[report.index("--group") + 1] in groups, "the report example names a group the feed has"
    run_ok(cli(report, tmp_path), tmp_path)
    assert "<html" in (tmp_path / "report.html").read_text()[:500].lower()
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_offline_example_replays_a_consumer_protocol_feed(tmp_path):
    """The KIP-848 pair: a consumer-protocol feed recorded, then replayed under the default assignors -- the four
    client-side ones and the two server-side ones, one column each."""
    (simulate,) = [c for c in examples("rebalance-tracker simulate") if "--group-protocol" in c]
    out = simulate[simulate.index("--out") + 1]
    run_ok(cli(simulate, tmp_path), tmp_path)
    assert any(json.loads(line)["type"] == "consumer_heartbeat" for line in (tmp_path / out).open())
    (replay,) = [c for c in examples("rebalance-tracker replay") if out in c]
    assert "--assignor" not in replay
    table = run_ok(cli(replay, tmp_path), tmp_path).stdout
    assert table.splitlines()[0].split() == [
        "range",
        "roundrobin",
        "sticky",
        "cooperative-sticky",
        "server:uniform",
        "server:range",
    ], table
    assert "partitions moved" in table


class Background:
    """A long-running documented command in its own process group, stopped with Ctrl-C as a reader would."""

    def __init__(self, argv: list[str], cwd: Path, name: str) -> None:
        self.log = cwd / f"{name}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )  # its own process group

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, condition, what: str, timeout_s: float = 150) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert self.proc.poll() is None, f"exited {self.proc.returncode} before {what}:\n{self.text()[-4000:]}"
            assert time.monotonic() < deadline, f"no {what} after {timeout_s:.0f} s:\n{self.text()[-4000:]}"
            time.sleep(0.5)

    def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(90)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.mark.spark
@pytest.mark.kafka
def test_live_examples_run_simulate_and_offsets(kafka_bootstrap, tmp_path):
    (run,) = [c for c in examples("rebalance-tracker run --bootstrap")]
    (simulate,) = [c for c in examples("rebalance-tracker simulate") if "--bootstrap" in c]
    (offsets,) = examples("rebalance-tracker offsets")
    tracker = Background(cli(run, tmp_path, kafka_bootstrap), tmp_path, "run")
    feeder = None
    try:
        tracker.wait_for(lambda: "Ctrl-C stops" in tracker.text(), "tracker start")
        feeder = Background(cli(simulate, tmp_path, kafka_bootstrap), tmp_path, "simulate")

        def described() -> bool:
            done = subprocess.run(
                cli(offsets, tmp_path), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=60
            )
            described.out = done.stdout
            return done.returncode == 0

        tracker.wait_for(described, "committed offsets of group-1 in the store")
        header, *rows = described.out.strip().splitlines()
        assert "GROUP" in header and "CURRENT-OFFSET" in header, described.out
        assert rows and all(r.split()[0] == "group-1" for r in rows if r.strip() and not r.startswith("-")), (
            described.out
        )
        assert feeder.ctrl_c() == 0, feeder.text()[-2000:]
        assert tracker.ctrl_c() == 0, tracker.text()[-4000:]
        assert "Traceback" not in tracker.text(), tracker.text()[-4000:]
    finally:
        tracker.kill()
        if feeder is not None:
            feeder.kill()
    # What the job told, as JSON lines, and the timeline drawn from them.
    (outputs,) = examples("rebalance-tracker outputs")
    run_ok(cli(outputs, tmp_path, kafka_bootstrap), tmp_path)
    told = [json.loads(line) for line in (tmp_path / "outputs.jsonl").read_text().splitlines()]
    assert any(o["type"] == "rebalance" and o["group_id"] == "group-3" for o in told)
    (report,) = [c for c in examples("rebalance-tracker report") if "--outputs" in c]
    run_ok(cli(report, tmp_path), tmp_path)
    assert "<html" in (tmp_path / "report.html").read_text()[:500].lower()


@pytest.mark.spark
@pytest.mark.kafka
def test_metrics_example_serves_prometheus_and_stops_on_ctrl_c(tmp_path):
    """``run --metrics-port 9464`` as written: it starts the bundled broker (the bare ``run`` example plus the
    metrics flag), serves metrics Prometheus' own parser reads, and Ctrl-C stops it without a traceback."""
    from prometheus_client.parser import text_string_to_metric_families

    (metrics,) = [c for c in examples("rebalance-tracker run") if "--metrics-port" in c]
    assert ["rebalance-tracker", "run"] in examples("rebalance-tracker run"), "the bare `run` example"
    port = metrics[metrics.index("--metrics-port") + 1]
    url = f"http://127.0.0.1:{port}/metrics"
    tracker = Background(cli(metrics, tmp_path), tmp_path, "run")
    try:

        def scraped() -> bool:
            try:
                scraped.text = urllib.request.urlopen(url, timeout=2).read().decode()
                return "Ctrl-C stops" in tracker.text()
            except OSError:
                return False

        tracker.wait_for(scraped, f"metrics at {url}")
        names = {f.name for f in text_string_to_metric_families(scraped.text)}
        assert {"rebalance_tracker_batches", "rebalance_tracker_input_rows"} <= names, sorted(names)
        assert "started the bundled broker" in tracker.text()
        assert tracker.ctrl_c() == 0, tracker.text()[-4000:]
        assert "Traceback" not in tracker.text(), tracker.text()[-4000:]
    finally:
        tracker.kill()
