"""Client reports (what an instrumented client told its application: streaming/feeds/instrument_confluent.py) as
events: parsed and refused like every other event, and passed on untouched by either model, or with none."""

from __future__ import annotations

import json

import pytest

from streaming.coordinator.events import parse_event
from streaming.coordinator.routing import GroupModel
from streaming.spark.group_step import DEFAULT_OUTPUT_TYPES


def report(**fields):
    return json.dumps(
        {
            "type": "client_report",
            "group_id": "g",
            "ts": 1_000,
            "report": "revoked",
            "member_id": "m",
            "client_id": "c",
            "partitions": [["t", 2]],
            **fields,
        }
    ).encode()


@pytest.mark.parametrize(
    "fields, reason",
    [
        (
            {"report": "rebalanced"},
            "client_report: report must be one of assigned, revoked, lost, committed, "
            "commit_failed, stats, not 'rebalanced'",
        ),
        ({"report": None}, "client_report: missing field 'report'"),
        ({"group_id": ""}, "client_report: group_id must be a non-empty string"),
        (
            {"partitions": [["t", -1]]},
            "client_report.partitions must be a list of [topic, partition] pairs, got ['t', -1]",
        ),
        ({"rebalance_cnt": "3"}, "client_report.rebalance_cnt must be an integer, got str"),
    ],
)
def test_a_bad_report_is_refused_with_its_reason(fields, reason):
    assert parse_event(report(**fields)) == (None, reason)


def test_both_models_and_none_pass_a_report_on_untouched():
    consumer, classic, blank = GroupModel(), GroupModel(), GroupModel()
    consumer.handle(
        parse_event(
            json.dumps(
                {
                    "type": "consumer_heartbeat",
                    "group_id": "g",
                    "ts": 0,
                    "member_id": "m",
                    "member_epoch": 0,
                    "subscribed_topic_names": ["t"],
                    "topic_partitions": [],
                    "rebalance_timeout_ms": 5_000,
                }
            )
        )[0]
    )
    classic.handle(
        parse_event(
            json.dumps(
                {
                    "type": "join",
                    "group_id": "g",
                    "ts": 0,
                    "member_id": "",
                    "protocols": [{"name": "range", "topics": ["t"]}],
                }
            )
        )[0]
    )

    def seen():  # what the models hold of the group (their clocks move with any event's ts, as for log_end)
        group, old = consumer.model.groups["g"], classic.model.groups["g"]
        return (
            group.group_epoch,
            {m: (v.member_epoch, v.assigned_partitions) for m, v in group.members.items()},
            old.generation,
            old.state,
            set(old.members),
        )

    before = seen()
    want = {
        "type": "client_report",
        "group_id": "g",
        "ts": 1_000,
        "report": "revoked",
        "member_id": "m",
        "client_id": "c",
        "partitions": [["t", 2]],
    }
    for model in (consumer, classic, blank):
        assert model.handle(parse_event(report())[0]) == [want]
    assert seen() == before and blank.is_blank()  # nobody acts on it
    stats = parse_event(
        report(report="stats", partitions=None, state="up", rebalance_cnt=2, rebalance_reason="topic metadata changed")
    )[0]
    assert blank.handle(stats) == [
        {
            "type": "client_report",
            "group_id": "g",
            "ts": 1_000,
            "report": "stats",
            "member_id": "m",
            "client_id": "c",
            "state": "up",
            "rebalance_cnt": 2,
            "rebalance_reason": "topic metadata changed",
        }
    ]
    assert "client_report" in DEFAULT_OUTPUT_TYPES  # the job keeps them
