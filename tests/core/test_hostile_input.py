"""Bad and hostile input: every bad record is dead-lettered with a precise reason, every good one around it is
processed, and nothing raises (issue #13)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event

START = 1_700_000_000_000
HEARTBEAT = {"type": "heartbeat", "group_id": "g", "member_id": "m", "generation": 1}


def with_fields(**fields) -> bytes:
    return json.dumps({**HEARTBEAT, **fields}).encode()


def commit(**offset) -> bytes:
    return json.dumps(
        {"type": "commit", "group_id": "g", "offsets": [{"topic": "t", "partition": 0, "offset": 1, **offset}]}
    ).encode()


# (raw record value, what the reason must say)
CORPUS = [
    (b"\xff\xfe{}", "not UTF-8: byte 0xff at position 0"),
    (b"\xc3\x28", "not UTF-8"),
    (b"[1, 2]", "must be a JSON object, got list"),
    (b'"a string"', "must be a JSON object, got str"),
    (b"null", "must be a JSON object, got NoneType"),
    (b"", "not valid JSON"),
    (b"{", "not valid JSON"),
    (b"[" * 10_000 + b"]" * 10_000, "nested too deeply"),
    (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nested too deeply"),
    (with_fields(generation=2**31), "heartbeat.generation = 2147483648 is out of range"),
    (b'{"type":"heartbeat","group_id":"g","generation":' + b"9" * 5_000 + b"}", "a number of more than"),
    (b'{"type":"heartbeat","group_id":"g","generation":1e999}', "heartbeat.generation must be an integer"),
    (b'{"type":"heartbeat","group_id":"g","generation":NaN}', "NaN is not a JSON number"),
    (b'{"type":"heartbeat","group_id":"g","generation":Infinity}', "Infinity is not a JSON number"),
    (b'{"type":"heartbeat","group_id":"g","group_id":"h","generation":1}', "duplicate key 'group_id'"),
    (b'{"type":"heartbeat","group_id":"g","generation":1,"x":1,"x":2}', "duplicate key 'x'"),
    (
        b'{"type":"commit","group_id":"g","offsets":[{"topic":"t","topic":"u","partition":0,"offset":1}]}',
        "duplicate key 'topic'",
    ),
    (
        b'{"type":"heartbeat","group_id":"g","member_id":"a\\u003ab","generation":1,"generation":2}',
        "duplicate key 'generation'",
    ),
    (b'{"type":"heartbeat","group_id":"g","generation":1,"x":"\xff"}', "not UTF-8: byte 0xff at position 55"),
    (with_fields(ts=-1), "heartbeat.ts = -1 is out of range"),
    (with_fields(ts=2**63), "heartbeat.ts = 9223372036854775808 is out of range"),
    (with_fields(ts="now"), "heartbeat.ts must be an integer, got str"),
    (with_fields(group_id=7), "heartbeat.group_id must be a string"),
    (with_fields(member_id=["m"]), "heartbeat.member_id must be a string"),
    (with_fields(generation=True), "heartbeat.generation must be an integer, got bool"),
    (with_fields(type="rejoin"), "unknown event type 'rejoin'"),
    (json.dumps({"type": "heartbeat", "group_id": "g"}).encode(), "heartbeat: missing field 'generation'"),
    (commit(offset=-5), "commit.offsets[0].offset = -5 is out of range"),
    (commit(offset=2**63), "commit.offsets[0].offset = 9223372036854775808 is out of range"),
    (commit(partition=-1), "commit.offsets[0].partition = -1 is out of range"),
    (commit(partition=2**31), "commit.offsets[0].partition = 2147483648 is out of range"),
    (commit(leader_epoch=-2), "commit.offsets[0].leader_epoch = -2 is out of range"),
    (commit(metadata=5), "commit.offsets[0].metadata must be a string"),
    (
        json.dumps(
            {
                "type": "join",
                "group_id": "g",
                "session_timeout_ms": 2**31,
                "protocols": [{"name": "range", "topics": ["t"]}],
            }
        ).encode(),
        "join.session_timeout_ms = 2147483648 is out of range",
    ),
    (json.dumps({"type": "join", "group_id": "g", "protocols": "range"}).encode(), "join.protocols must be a list"),
    (json.dumps({"type": "topic_metadata", "topic": "t", "partitions": -3}).encode(), "partitions must be >= 0"),
    (
        json.dumps({"type": "sync", "group_id": "g", "generation": 1, "assignments": {"m": [["t", -1]]}}).encode(),
        "must be a list of [topic, partition] pairs",
    ),
    (b'{"type":"heartbeat","group_id":"' + b"g" * (1 << 20) + b'","generation":1}', "exceeds the 1048576-byte limit"),
]


@pytest.mark.parametrize("raw,reason", CORPUS, ids=[r for _, r in CORPUS])
def test_each_bad_record_has_a_precise_reason(raw, reason):
    event, error = parse_event(raw)
    assert event is None and reason in error, error


def test_big_but_legal_requests_are_handled():
    """A join naming 100k topics, or a member owning 10k partitions, is a request like any other: the
    coordinator answers it (within the size limit of one record)."""
    topics = [f"t{i}" for i in range(100_000)]
    big = {
        "type": "join",
        "group_id": "g",
        "member_id": "",
        "session_timeout_ms": 10_000,
        "ts": START,
        "protocols": [{"name": "range", "topics": topics}],
    }
    event, error = parse_event(json.dumps(big).encode())
    assert error is None and len(event["protocols"][0]["topics"]) == 100_000
    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    assert coordinator.handle(event)[0]["error"] == "MEMBER_ID_REQUIRED"
    owned = [["t", p] for p in range(10_000)]
    join = {**big, "protocols": [{"name": "sticky", "topics": ["t"], "owned_partitions": owned}]}
    assert parse_event(json.dumps(join).encode())[1] is None


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    ),
    st.sampled_from(["join", "sync", "heartbeat", "leave", "commit", "topic_metadata", "delete_group"]),
    st.sampled_from(
        [
            "group_id",
            "member_id",
            "generation",
            "ts",
            "protocols",
            "offsets",
            "assignments",
            "assigned",
            "session_timeout_ms",
            "partitions",
            "topic",
            "retention_ms",
        ]
    ),
)
def test_any_value_in_any_field_is_an_event_or_a_reason_never_an_exception(value, kind, name):
    event, error = parse_event(json.dumps({"type": kind, "group_id": "g", name: value}).encode())
    assert (event is None) != (error is None)
    if event is not None:  # and a good event never makes the coordinator raise
        GroupCoordinator(CoordinatorConfig()).handle({**event, "ts": event["ts"] or START})


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_an_event_or_a_reason(raw):
    event, error = parse_event(raw)
    assert (event is None) != (error is None)


@pytest.mark.spark
def test_the_job_dead_letters_the_corpus_and_processes_every_good_event_around_it(spark, tmp_path):
    """Through the streaming job: the corpus interleaved with a simulated feed; plus events stamped far ahead of
    their record (a clock gone wrong, or an attack on the watermark)."""
    from streaming.feeds.simulator import SimulationSettings, Simulator
    from streaming.spark.job import JobOptions
    from tests.spark.test_job import Collector, assert_compacted_prefix, by_group, reference, start, write_rows

    feed = Simulator(SimulationSettings(groups=2, seed=5, churn_interval_ms=10_000), start_ms=START).run_until(
        START + 60_000
    )
    future = [
        with_fields(group_id="group-0", ts=253402300799000),  # 9999-12-31
        with_fields(group_id="group-1", ts=START + 10 * 3_600_000),
    ]  # ten hours ahead of its record
    bad = [raw for raw, _ in CORPUS] + future
    values, keys, stamps = [], [], []
    step = max(1, len(feed) // len(bad))
    for i, e in enumerate(feed):
        values.append(json.dumps(e).encode())
        keys.append(e["group_id"].encode())
        stamps.append(e["ts"])
        if i % step == 0 and bad:
            values.append(bad.pop(0))
            keys.append(b"group-0")
            stamps.append(e["ts"])
    values += bad
    keys += [b"group-0"] * len(bad)
    stamps += [feed[-1]["ts"]] * len(bad)
    source, checkpoint = tmp_path / "source", tmp_path / "checkpoint"
    source.mkdir()
    write_rows(source, "a", values, keys, 0, stamps)
    sink = Collector()
    options = JobOptions(time_mode="event", watermark_delay="1 second")
    query = start(spark, source, checkpoint, options, sink)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    dead = [o for o in sink.outputs if o["type"] == "dead_letter"]
    reasons = sorted(d["reason"] for d in dead)
    assert len(dead) == len(CORPUS) + len(future)
    for _, reason in CORPUS:
        assert any(reason in r for r in reasons), reason
    assert sum("ahead of its record's timestamp" in r for r in reasons) == 2
    # Every good event was processed: the outputs equal the pure model's on the good events alone, but for store
    # records a later one of their key replaced in the same micro-batch (the watermark trails the last event by a
    # second, so only the final second's timers may still be pending).
    want = reference(feed, CoordinatorConfig())
    got = by_group(sink.outputs)
    for group_id, outputs in want.items():
        assert len(outputs) - assert_compacted_prefix(got[group_id], outputs) <= 3
