"""The command line: every command is listed and reachable, and run's options parse to the job's settings."""
from __future__ import annotations

import subprocess
import sys

from streaming.cli.main import COMMANDS, main
from streaming.cli.run import build_parser, parse_trigger


def test_parse_trigger():
    assert parse_trigger("500ms") == "500 milliseconds"
    assert parse_trigger("1s") == "1 seconds"
    assert parse_trigger("2 seconds") == "2 seconds"


def test_every_command_is_listed_and_has_help(capsys):
    assert main([]) == 0
    listing = capsys.readouterr().out
    for name in COMMANDS:
        assert name in listing
        result = subprocess.run([sys.executable, "-m", "streaming", name, "--help"], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0 and "usage" in result.stdout.lower(), (name, result.stderr[-500:])
    assert main(["no-such-command"]) == 2


def test_run_defaults_work_against_the_bundled_broker():
    args = build_parser().parse_args([])
    assert args.bootstrap is None and args.events_topic == "rebalance-events"
    assert args.store == "sqlite:data/offsets.db" and args.time_mode == "processing" and args.kafka_source == "python"
    args = build_parser().parse_args(["--coordinator-conf", "group.max.size=3", "--time-mode", "event"])
    assert args.coordinator_conf == ["group.max.size=3"] and args.time_mode == "event"
