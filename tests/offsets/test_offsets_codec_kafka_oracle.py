"""Our ``__consumer_offsets`` codec against Kafka's own writer, on random records: the record helpers the group
coordinator writes with and ``GroupCoordinatorRecordSerde`` (``kafka-group-coordinator``), and ``ConsumerProtocol``
(``kafka-clients``), from the broker's Maven jars (``tests/kafka_oracle/java/RecordOracle.java``, one JVM for the
module). The same bytes, and ours reads Kafka's back to the same fields.

A new offset commit without an expiry is OffsetCommitValue v4 in Kafka 4.1+ and in ours (topic id as a tagged
field, absent when unknown); Kafka 4.0 wrote v3, which ours writes given ``"value_version": 3``.
"""

from __future__ import annotations

import base64
import random
import subprocess

import pytest

from offsets_store import decode_record, encode_record
from offsets_store.codec import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from offsets_store.codec import record_key
from assignors.java import java_hash_order as hashmap_order
from tests.kafka_oracle.oracle import JAVA

TEXT = "abcxyz-_.0123456789éß漢😀"


def _hex(text: str | None) -> str:
    return "-" if text is None else text.encode().hex()


def _text(rng: random.Random, most: int = 12, least: int = 0) -> str:
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(least, most)))


def _topic_partitions(pairs) -> str:
    return ",".join(f"{_hex(t)}:{p}" for t, p in pairs)


def _offset_case(rng: random.Random) -> dict:
    expire = rng.choice([-1, -1, rng.randrange(1, 2**41)])
    return {
        "type": "offset_commit",
        "group_id": _text(rng, least=rng.choice([0, 1])),
        "topic": _text(rng, least=1),
        "partition": rng.randrange(0, 2000),
        "offset": rng.choice([0, rng.randrange(0, 2**50)]),
        "leader_epoch": rng.choice([-1, rng.randrange(0, 500)]),
        "metadata": rng.choice(["", _text(rng, 30)]),
        "commit_timestamp": rng.randrange(0, 2**41),
        "expire_timestamp": expire,
        "tombstone": False,
    }


def _offset_fields(r: dict) -> list[str]:
    return [
        _hex(r["group_id"]),
        _hex(r["topic"]),
        str(r["partition"]),
        str(r["offset"]),
        str(r["leader_epoch"]),
        _hex(r["metadata"]),
        str(r["commit_timestamp"]),
        str(r["expire_timestamp"]),
        r.get("topic_id", "-"),
    ]


def _with_topic_id(r: dict, rng: random.Random) -> dict:
    """Half the commits name their topic by id (OffsetCommit v10+, Kafka 4.1+), from their own generator so the
    other cases stay as they were."""
    return {**r, "topic_id": _uuid(rng)} if rng.random() < 0.5 else r


def _subscription(rng: random.Random, version: int) -> dict:
    # Java clients send their topics sorted (ConsumerProtocol sorts them); ours writes them in the given order.
    topics = sorted({_text(rng, 8, 1) for _ in range(rng.randint(0, 4))})
    owned = (
        sorted({(rng.choice(topics), rng.randrange(0, 50)) for _ in range(rng.randint(0, 5))})
        if topics and version >= 1
        else []
    )
    return {
        "topics": topics,
        "user_data": rng.choice([None, "", base64.b64encode(rng.randbytes(5)).decode()]),
        "owned_partitions": [list(tp) for tp in owned],
        "generation": rng.choice([-1, rng.randrange(0, 100)]) if version >= 2 else -1,
        "rack": rng.choice([None, _text(rng, 5, 1)]) if version >= 3 else None,
    }


def _assignment(rng: random.Random) -> dict:
    topics = [_text(rng, 8, 1) for _ in range(rng.randint(0, 3))]
    parts = sorted({(t, rng.randrange(0, 50)) for t in topics for _ in range(rng.randint(1, 4))})
    return {
        "partitions": [list(tp) for tp in parts],
        "user_data": rng.choice([None, "", base64.b64encode(rng.randbytes(4)).decode()]),
    }


def _group_case(rng: random.Random) -> dict:
    consumer = rng.random() < 0.8
    members = []
    for i in range(rng.choice([0, 1, 2, 3, 6, 13])):
        sub = encode_subscription(_subscription(rng, 3), rng.randrange(0, 4)) if consumer else rng.randbytes(6)
        asg = encode_assignment(_assignment(rng), rng.randrange(0, 4)) if consumer else rng.randbytes(3)
        members.append(
            {
                "member_id": f"{_text(rng, 6)}-{i}-{rng.getrandbits(64):016x}",
                "client_id": _text(rng, 8),
                "group_instance_id": rng.choice([None, f"instance-{i}"]),
                "client_host": "/127.0.0.1",
                "rebalance_timeout": rng.randrange(1000, 600_000),
                "session_timeout": rng.randrange(1000, 60_000),
                "subscription": decode_subscription(sub) if consumer else {"raw": base64.b64encode(sub).decode()},
                "assignment": decode_assignment(asg) if consumer else {"raw": base64.b64encode(asg).decode()},
            }
        )
    return {
        "type": "group_metadata",
        "group_id": _text(rng, least=1),
        "tombstone": False,
        "protocol_type": "consumer" if consumer else rng.choice(["connect", "x"]),
        "generation": rng.randrange(0, 1000) if members else rng.randrange(0, 5),
        "protocol": rng.choice(["range", "roundrobin", "cooperative-sticky"]) if members else None,
        "leader": rng.choice(members)["member_id"] if members else None,
        "current_state_timestamp": rng.randrange(0, 2**41),
        "members": members,
    }


def _group_lines(r: dict) -> list[str]:
    lines = [
        "\t".join(
            [
                "group",
                _hex(r["group_id"]),
                _hex(r["protocol_type"]),
                str(r["generation"]),
                _hex(r["protocol"]),
                _hex(r["leader"]),
                str(r["current_state_timestamp"]),
            ]
        )
    ]
    consumer = r["protocol_type"] == "consumer"
    for m in r["members"]:
        sub = encode_subscription(m["subscription"]) if consumer else base64.b64decode(m["subscription"]["raw"])
        asg = encode_assignment(m["assignment"]) if consumer else base64.b64decode(m["assignment"]["raw"])
        lines.append(
            "\t".join(
                [
                    "member",
                    _hex(m["member_id"]),
                    _hex(m["group_instance_id"]),
                    _hex(m["client_id"]),
                    _hex(m["client_host"]),
                    str(m["rebalance_timeout"]),
                    str(m["session_timeout"]),
                    sub.hex(),
                    asg.hex(),
                ]
            )
        )
    return lines + ["end"]


def _uuid(rng: random.Random) -> str:
    while True:
        text = base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
        if not text.startswith("-") and text not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return text


def _cases() -> list[tuple[str, object, list[str]]]:
    """(kind, our input, the oracle's command lines)."""
    rng, ids = random.Random(11), random.Random(12)
    cases = []
    for _ in range(300):
        r = _with_topic_id(_offset_case(rng), ids)
        cases.append(("offset", r, ["\t".join(["offset", *_offset_fields(r)])]))
    for version in range(5):
        for _ in range(30):
            r = _offset_case(rng)
            r["expire_timestamp"] = r["expire_timestamp"] if version == 1 else -1
            r = _with_topic_id(r, ids) if version == 4 else r
            cases.append(
                (f"offset-value-{version}", r, ["\t".join(["offset-value", str(version), *_offset_fields(r)])])
            )
    for _ in range(20):
        r = _offset_case(rng)
        cases.append(("offset-tombstone", r, ["\t".join(["offset-tombstone", *_offset_fields(r)[:3]])]))
    for _ in range(150):
        r = _group_case(rng)
        cases.append(("group", r, _group_lines(r)))
    for _ in range(10):
        group, ts = _text(rng, least=1), rng.randrange(2**41)
        cases.append(("group-tombstone", group, [f"group-tombstone\t{_hex(group)}"]))
        cases.append(
            (
                "group-created",
                {
                    "type": "group_metadata",
                    "group_id": group,
                    "tombstone": False,
                    "protocol_type": "",
                    "generation": 0,
                    "protocol": None,
                    "leader": None,
                    "current_state_timestamp": ts,
                    "members": [],
                },
                [f"group-created\t{_hex(group)}\t{ts}"],
            )
        )
    for version in range(4):
        for _ in range(40):
            sub = _subscription(rng, version)
            cases.append(
                (
                    f"subscription-{version}",
                    sub,
                    [
                        "\t".join(
                            [
                                "subscription",
                                str(version),
                                ",".join(map(_hex, sub["topics"])),
                                "-" if sub["user_data"] is None else base64.b64decode(sub["user_data"]).hex(),
                                _topic_partitions(sub["owned_partitions"]),
                                str(sub["generation"]),
                                _hex(sub["rack"]),
                            ]
                        )
                    ],
                )
            )
            asg = _assignment(rng)
            cases.append(
                (
                    f"assignment-{version}",
                    asg,
                    [
                        "\t".join(
                            [
                                "assignment",
                                str(version),
                                _topic_partitions(asg["partitions"]),
                                "-" if asg["user_data"] is None else base64.b64decode(asg["user_data"]).hex(),
                            ]
                        )
                    ],
                )
            )
    for _ in range(40):
        group, member = _text(rng, least=1), _text(rng, least=1)
        epoch, hash_, ts = (
            rng.randrange(0, 10**6),
            rng.choice([0, rng.randrange(-(2**63), 2**63)]),
            rng.randrange(2**41),
        )
        target = [
            {"topicId": _uuid(rng), "partitions": rng.sample(range(100), rng.randint(1, 6))}
            for _ in range(rng.randint(0, 3))
        ]
        cases += [
            (
                "consumer_group_metadata",
                {"type": "consumer_group_metadata", "group_id": group, "epoch": epoch, "metadataHash": hash_},
                [f"consumer-group-epoch\t{_hex(group)}\t{epoch}\t{hash_}"],
            ),
            (
                "consumer_group_target_assignment_member",
                {
                    "type": "consumer_group_target_assignment_member",
                    "group_id": group,
                    "member_id": member,
                    "topicPartitions": target,
                },
                [
                    f"consumer-group-target-member\t{_hex(group)}\t{_hex(member)}\t"
                    + (",".join(f"{t['topicId']}:{';'.join(map(str, t['partitions']))}" for t in target) or "-")
                ],
            ),
            (
                "consumer_group_target_assignment_metadata",
                {
                    "type": "consumer_group_target_assignment_metadata",
                    "group_id": group,
                    "assignmentEpoch": epoch,
                    "assignmentTimestamp": ts,
                },
                [f"consumer-group-target-metadata\t{_hex(group)}\t{epoch}\t{ts}"],
            ),
            (
                "consumer_group_metadata",
                {"type": "consumer_group_metadata", "group_id": group, "tombstone": True},
                [f"consumer-group-epoch-tombstone\t{_hex(group)}"],
            ),
            (
                "consumer_group_target_assignment_member",
                {
                    "type": "consumer_group_target_assignment_member",
                    "group_id": group,
                    "member_id": member,
                    "tombstone": True,
                },
                [f"consumer-group-target-member-tombstone\t{_hex(group)}\t{_hex(member)}"],
            ),
        ]
    return cases


@pytest.fixture(scope="module")
def answers(kafka_oracle_classpath) -> list[tuple[str, object, list[str]]]:
    """Every case with Kafka's answer (its fields, tab-separated), from one JVM."""
    cases = _cases()
    feed = "".join(line + "\n" for _, _, lines in cases for line in lines)
    out = subprocess.run(
        [*JAVA, "-cp", kafka_oracle_classpath, "RecordOracle"],
        input=feed,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.splitlines()
    assert len(out) == len(cases), out[-3:]
    errors = [(kind, line) for (kind, _, _), line in zip(cases, out) if line.startswith("error")]
    assert not errors, errors[:3]
    return [(kind, ours, line.split("\t")) for (kind, ours, _), line in zip(cases, out)]


def _of(answers, kind: str):
    found = [(ours, kafka) for k, ours, kafka in answers if k == kind]
    assert found, kind
    return found


def _without_versions(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("key_version", "value_version", "_unknownTaggedFields")}


def test_offset_commits_are_kafkas_bytes_and_read_back(answers):
    expiring = 0
    for record, (key, value) in _of(answers, "offset"):
        kafka_key, kafka_value = bytes.fromhex(key), bytes.fromhex(value)
        assert record_key(record) == kafka_key, record
        # Kafka writes value v1 when the commit carries an expiry (so do we), else v4 (Kafka 4.1+; see below).
        version = 1 if record["expire_timestamp"] != -1 else 4
        assert kafka_value[:2] == version.to_bytes(2, "big")
        assert encode_record({**record, "value_version": version}) == (kafka_key, kafka_value), record
        if version == 1:
            expiring += 1
        # v1 has no leader epoch nor topic id: Kafka drops them, so do we, and they read back as none
        expected = (
            {k: v for k, v in record.items() if k != "topic_id"} | {"leader_epoch": -1} if version == 1 else record
        )
        assert _without_versions(decode_record(kafka_key, kafka_value)) == expected
    assert expiring >= 50


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_values_of_every_version_are_kafkas_generated_bytes(answers, version):
    for record, (value,) in _of(answers, f"offset-value-{version}"):
        assert encode_record({**record, "value_version": version})[1].hex() == value, record


def test_new_offset_commits_are_written_at_the_version_kafka_writes_them(answers):
    """Kafka 4.1+ (GroupCoordinatorRecordHelpers.offsetCommitValueVersion): v1 with an expiry, else v4, its topic id
    a tagged field when the commit named one."""
    with_id = 0
    for record, (key, value) in _of(answers, "offset"):
        assert encode_record(record) == (bytes.fromhex(key), bytes.fromhex(value)), record
        with_id += "topic_id" in record and record["expire_timestamp"] == -1
    assert with_id >= 50


def test_offset_commit_tombstones_are_kafkas(answers):
    for record, (key, value) in _of(answers, "offset-tombstone"):
        assert value == "-"
        assert encode_record({**record, "tombstone": True}) == (bytes.fromhex(key), None)


def test_group_metadata_is_kafkas_bytes_with_its_members_in_hashmap_order(answers):
    sizes = set()
    for record, (key, value, order) in _of(answers, "group"):
        kafka_order = [bytes.fromhex(m).decode() for m in order.split(",") if m]
        # ClassicGroup keeps its members in a HashMap: the order the record lists them in, as our model has it.
        ids = [m["member_id"] for m in record["members"]]
        assert kafka_order == hashmap_order(ids)
        ordered = {**record, "members": sorted(record["members"], key=lambda m: kafka_order.index(m["member_id"]))}
        kafka_key, kafka_value = bytes.fromhex(key), bytes.fromhex(value)
        assert encode_record(ordered) == (kafka_key, kafka_value), record
        decoded = decode_record(kafka_key, kafka_value)
        assert decoded["value_version"] == 3
        assert _without_versions(decoded) == {
            **ordered,
            "members": [
                {**m, "subscription": {**m["subscription"]}, "assignment": {**m["assignment"]}}
                for m in ordered["members"]
            ],
        }
        sizes.add(len(ids))
    assert sizes == {0, 1, 2, 3, 6, 13}


def test_a_new_groups_record_is_kafkas(answers):
    """Kafka 4 writes one when a classic group is created (its first JoinGroup): generation 0, no protocol type."""
    for record, (key, value) in _of(answers, "group-created"):
        assert encode_record(record) == (bytes.fromhex(key), bytes.fromhex(value))


def test_group_metadata_tombstones_are_kafkas(answers):
    for group, (key, value) in _of(answers, "group-tombstone"):
        record = {"type": "group_metadata", "group_id": group, "tombstone": True}
        assert value == "-" and encode_record(record) == (bytes.fromhex(key), None)


@pytest.mark.parametrize("version", range(4))
def test_embedded_consumer_protocol_is_kafkas_bytes(answers, version):
    for sub, (kafka,) in _of(answers, f"subscription-{version}"):
        assert encode_subscription(sub, version).hex() == kafka, sub
        assert {k: v for k, v in decode_subscription(bytes.fromhex(kafka)).items() if k != "version"} == sub
    for asg, (kafka,) in _of(answers, f"assignment-{version}"):
        assert encode_assignment(asg, version).hex() == kafka, asg
        assert {k: v for k, v in decode_assignment(bytes.fromhex(kafka)).items() if k != "version"} == asg


@pytest.mark.parametrize(
    "kind",
    ["consumer_group_metadata", "consumer_group_target_assignment_member", "consumer_group_target_assignment_metadata"],
)
def test_consumer_group_records_are_kafkas_bytes(answers, kind):
    tombstones = 0
    for record, (key, value) in _of(answers, kind):
        kafka_key, kafka_value = bytes.fromhex(key), None if value == "-" else bytes.fromhex(value)
        assert encode_record(record) == (kafka_key, kafka_value), record
        if kafka_value is None:
            tombstones += 1
            continue
        decoded = decode_record(kafka_key, kafka_value)
        assert {k: decoded[k] for k in record} == record
    assert tombstones == (40 if kind != "consumer_group_target_assignment_metadata" else 0)
