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
        result = subprocess.run(
            [sys.executable, "-m", "streaming", name, "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0 and "usage" in result.stdout.lower(), (name, result.stderr[-500:])
    assert main(["no-such-command"]) == 2


def test_run_defaults_work_against_the_bundled_broker():
    args = build_parser().parse_args([])
    assert args.bootstrap is None and args.events_topic == "rebalance-events"
    assert args.store == "sqlite:data/offsets.db" and args.time_mode == "processing" and args.kafka_source == "auto"
    args = build_parser().parse_args(["--coordinator-conf", "group.max.size=3", "--time-mode", "event"])
    assert args.coordinator_conf == ["group.max.size=3"] and args.time_mode == "event"


def test_one_spelling_of_the_coordinator_settings_across_commands():
    """run spelt --coordinator-conf, report and replay --coordinator-config (issue #34): all take both now."""
    from streaming.views.replay import build_parser as replay_parser
    from streaming.views.report import build_parser as report_parser

    for parser, required in (
        (build_parser(), []),
        (report_parser(), ["--group", "g", "--feed", "f", "--out", "o"]),
        (replay_parser(), ["--feed", "f"]),
    ):
        args = parser.parse_args(required + ["--coordinator-conf", "a=1", "--coordinator-config", "b=2"])
        assert args.coordinator_conf == ["a=1", "b=2"]


def test_a_fresh_checkpoint_on_a_store_with_a_position_says_what_it_skips(kafka_bootstrap, topic_name):
    """Issue #34 point 4: a new checkpoint with an existing store resumed from the store's position and showed
    'groups 0', every event skipped without a word. It says how many it skips, and why."""
    import json

    from kafka import KafkaProducer

    from streaming.kafka_client.topics import ensure_topics
    from streaming.tracker import TrackerConfig, _skip_notice

    ensure_topics(kafka_bootstrap, {topic_name: 2})
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(10):
        producer.send(topic_name, key=b"g", value=b"{}", partition=i % 2)
    producer.flush()
    producer.close()
    config = TrackerConfig(bootstrap=kafka_bootstrap, events_topic=topic_name)
    notice = _skip_notice(config, json.dumps({topic_name: {"0": 5, "1": 3}}), groups=2)
    assert f"skipping 8 of the 10 events on {topic_name}" in notice and "partition 0 at 5, partition 1 at 3" in notice
    assert "give a new --store" in notice
    unplaced = _skip_notice(config, None, groups=2)
    assert (
        f"no position on {topic_name}: reading its 10 events from earliest on top of the 2 rebuilt groups" in unplaced
    )


def test_run_stops_before_spark_with_one_line_when_the_broker_cannot_go_on(tmp_path):
    """Nobody at the address: one line, exit 2, no SparkSession started (the broker check comes first)."""
    from streaming.local.broker import free_port

    started = __import__("time").monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming",
            "run",
            "--bootstrap",
            f"127.0.0.1:{free_port()}",
            "--checkpoint",
            str(tmp_path / "ck"),
            "--store",
            f"sqlite:{tmp_path / 'o.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        result.returncode == 2
        and result.stderr.strip().splitlines() == [result.stderr.strip().splitlines()[0]]
        and "no broker answers at 127.0.0.1:" in result.stderr
    )
    assert "Spark" not in result.stdout + result.stderr and __import__("time").monotonic() - started < 60


def test_a_failed_query_is_said_in_one_line_naming_its_cause():
    from streaming.tracker import _cause

    spark_text = (
        "[STREAM_FAILED] Query [id = 5a26, runId = 0586] terminated with exception: "
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. "
        "Reason: An exception was thrown from the Python worker. Please see the stack trace below.\n"
        'Traceback (most recent call last):\n  File "/x/sinks.py", line 137, in handle\n'
        "    self._produce_until_delivered(outputs, batch_id)\n"
        "offsets_store.delivery.DeliveryError: batch 0: writing the outputs to Kafka: Kafka refused it: "
        "AssertionError('Headers not supported in v0/v1')\n SQLSTATE: 39000 SQLSTATE: XXKST\n"
        "=== Streaming Query ===\nIdentifier: rebalance-tracker [id = 5a26]\nCurrent Committed Offsets: {}\n"
        "\tat org.apache.spark.sql.execution.streaming.StreamExecution.run(StreamExecution.scala:1)\n"
    )
    assert _cause(spark_text) == (
        "offsets_store.delivery.DeliveryError: batch 0: writing the outputs to Kafka: "
        "Kafka refused it: AssertionError('Headers not supported in v0/v1')"
    )
    assert _cause("something else entirely\nsecond line") == "something else entirely"
