"""Java's and Kafka's own classes answer what our code computes by hand (``tests/kafka_oracle/java/HashOracle.java``,
one JVM for the module, Kafka's jars from Maven): ``String.hashCode``, the ``__consumer_offsets`` partition of a group
(``Utils.abs(groupId.hashCode()) % partitions``), Kafka's ``Uuid`` (parsing, ``hashCode``, ``compareTo``) and
``TopicPartition.hashCode``, the iteration order of ``HashSet``s of them, built from a collection or added to one by
one (nine of them in one bucket of a small table included), and the producer's ``Utils.murmur2`` and
``Utils.toPositive``. (``HashMap<String, ...>`` order: ``test_javahash_jvm.py``.)
"""

from __future__ import annotations

import base64
import random
import subprocess
from collections import Counter

import pytest

from assignors.base import TopicPartition
from assignors.java import (
    TIMELINE_MIN_CAPACITY,
    java_hash_order,
    java_hashset_capacity_from_collection,
    java_string_hash,
    java_topic_partition_hash,
    murmur2,
    timeline_capacity_after_adding,
    timeline_hash_order,
    to_positive,
)
from assignors.server.types import parse_uuid, uuid_hash, uuid_sort_key
from offsets_store import partition_for
from tests.kafka_oracle.oracle import JAVA

PARTITION_COUNTS = [1, 3, 7, 50, 64, 1000, 2**31 - 1]
TEXT = "abcdefghijklmnopqrstuvwxyz0123456789-_.éß漢😀"


def _text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"consumer-{rng.randrange(100)}-{rng.getrandbits(64):016x}"
    return "".join(rng.choice(TEXT) for _ in range(rng.randrange(0, 16)))


def _uuid_texts(rng: random.Random) -> list[str]:
    """Kafka Uuids, and strings Uuid.fromString must refuse or read leniently: wrong lengths, padding, the
    standard alphabet, spare low bits set in the last character."""
    texts = [base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=") for _ in range(300)]
    texts += [
        "AAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAQ",
        "AAAAAAAAAAAAAAAAAAAAAQ==",
        "AAAAAAAAAAAAAAAAAAAAAR",
        "_____________________w",
        "_____________________-",
        "gAAAAAAAAAAAAAAAAAAAAA",
        "topic1",
        "",
        "AAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAAAAAA",
        "AAAAAAAAAAAAAAAAAAAA+/",
        "AAAAAAAAAAAAAAAAAAAAAQ=",
        "AAAAAAAAAAAAAAAAAAAA AQ",
        "AAAAAAAAAAAAAAAAAAAAAAAAA",
    ]
    return texts


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def _colliding_partitions(rng: random.Random) -> list[list[TopicPartition]]:
    """Nine to sixteen partitions of a topic in one bucket of a table of 16 or 32, and two others: a HashSet that
    small doubles its table on the 9th instead of making a tree bin (none gets a 9th in a table of 64)."""
    sets = []
    for capacity in (16, 32):
        candidates = [TopicPartition("orders", p) for p in range(20_000)]
        bucket = [tp for tp in candidates if _spread(java_topic_partition_hash(tp)) & (capacity - 1) == 7]
        while len(sets) < (20 if capacity == 16 else 40):
            tps = rng.sample(bucket, rng.randrange(9, 17)) + rng.sample(candidates, 2)
            tps = list(dict.fromkeys(tps))
            if max(Counter(_spread(java_topic_partition_hash(tp)) & 63 for tp in tps).values()) <= 8:
                rng.shuffle(tps)
                sets.append(tps)
    return sets


def _grew_early(items: list, hash_fn, capacity: int) -> bool:
    """Whether a bucket of the table sized by the number of items alone gets a 9th item while it is smaller than 64."""
    while len(items) > capacity * 3 // 4:
        capacity *= 2
    return capacity < 64 and max(Counter(_spread(hash_fn(i)) & (capacity - 1) for i in items).values()) > 8


@pytest.fixture(scope="module")
def kafka(kafka_oracle_classpath):
    rng = random.Random(5)
    groups = [_text(rng) for _ in range(600)] + ["", "polygenelubricants", "Aa", "BB", "😀"]
    uuid_texts = _uuid_texts(rng)
    valid = [t for t in uuid_texts[:300]]
    uuid_sets = [rng.sample(valid, rng.choice([1, 2, 5, 12, 13, 25, 49, 97, 200])) for _ in range(60)]
    topics = [_text(rng) or "t" for _ in range(40)]
    tp_sets = [
        list(
            dict.fromkeys(
                TopicPartition(rng.choice(topics), rng.randrange(0, rng.choice([8, 100, 10_000])))
                for _ in range(rng.choice([1, 3, 12, 13, 40, 97, 300]))
            )
        )
        for _ in range(60)
    ] + _colliding_partitions(rng)
    data = [rng.randbytes(n) for n in list(range(0, 20)) * 5 + [64, 100, 1000]] + [b"foobar", "漢😀".encode()]
    lines = [f"group\t{g.encode().hex()}\t" + "\t".join(map(str, PARTITION_COUNTS)) for g in groups]
    lines += [f"uuid\t{t}" for t in uuid_texts]
    lines += [f"uuids\t{','.join(s)}" for s in uuid_sets]
    lines += [f"partitions\t{','.join(f'{tp.topic.encode().hex()}:{tp.partition}' for tp in s)}" for s in tp_sets]
    lines += [f"murmur2\t{d.hex()}" for d in data]
    member_sets = [[_member_id(rng) for _ in range(rng.choice([1, 2, 3, 5, 7, 13, 40]))] for _ in range(300)]
    removals = [rng.sample(ids, rng.randint(0, len(ids) - 1)) for ids in member_sets]
    lines += [
        f"timeline\t{','.join(m.encode().hex() for m in ids)}\t{','.join(m.encode().hex() for m in gone)}"
        for ids, gone in zip(member_sets, removals)
    ]
    histories = [_member_table_history(rng) for _ in range(200)]
    lines += [f"table\t{','.join(op + m.encode().hex() for op, m in ops)}" for ops in histories]
    out = subprocess.run(
        [*JAVA, "-cp", kafka_oracle_classpath, "HashOracle"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert len(out) == len(lines) and not [a for a in out if a.startswith("error")], out[:3]
    answers = iter(out)
    return {
        "groups": [(g, next(answers).split("\t")) for g in groups],
        "uuid": [(t, next(answers)) for t in uuid_texts],
        "uuids": [(s, next(answers).split("\t")) for s in uuid_sets],
        "partitions": [(s, next(answers).split("\t")) for s in tp_sets],
        "murmur2": [(d, next(answers).split("\t")) for d in data],
        "timeline": [
            (ids, gone, [bytes.fromhex(m).decode() for m in next(answers).split(",") if m])
            for ids, gone in zip(member_sets, removals)
        ],
        "table": [(ops, [bytes.fromhex(m).decode() for m in next(answers).split(",") if m]) for ops in histories],
    }


def _member_table_history(rng: random.Random) -> list[tuple[str, str]]:
    """What a group's records do to its member table: members join (+), are updated (+ again: each of their
    records is a put) and leave (-), some coming back."""
    ids = [_member_id(rng) for _ in range(rng.choice([2, 3, 4, 7, 13]))]
    present: list[str] = []
    ops = []
    for _ in range(rng.randrange(1, 30)):
        if present and rng.random() < 0.15:
            gone = rng.choice(present)
            present.remove(gone)
            ops.append(("-", gone))
        else:
            m = rng.choice(ids)
            if m not in present:
                present.append(m)
            ops.append(("+", m))
    return ops


def test_string_hash_and_the_offsets_partition_of_a_group_are_kafkas(kafka):
    for group, (hash_code, *partitions) in kafka["groups"]:
        assert java_string_hash(group) == int(hash_code), group
        assert [partition_for(group, n) for n in PARTITION_COUNTS] == [int(p) for p in partitions], group


def test_uuid_parsing_hash_and_bits_are_kafkas(kafka):
    valid = 0
    for text, answer in kafka["uuid"]:
        if answer == "invalid":
            assert parse_uuid(text) is None, text
            continue
        hash_code, most, least = map(int, answer.split("\t"))
        assert parse_uuid(text) == (most, least), text
        assert uuid_hash(text) == hash_code, text
        valid += 1
    assert valid >= 300


def _hashset_orders(items: list, hash_fn) -> tuple[list, list]:
    """``new HashSet<>(items)`` and a default ``HashSet`` added to in order."""
    return (
        java_hash_order(items, hash_fn, java_hashset_capacity_from_collection(len(items))),
        java_hash_order(items, hash_fn),
    )


def test_uuid_order_and_hashset_orders_are_javas(kafka):
    for ids, (ordered, from_collection, added) in kafka["uuids"]:
        assert sorted(ids, key=uuid_sort_key) == ordered.split(",")
        assert _hashset_orders(ids, uuid_hash) == (from_collection.split(","), added.split(","))


def test_topic_partition_hash_and_hashset_orders_are_kafkas(kafka):
    def parse(text: str) -> list[TopicPartition]:
        return [TopicPartition(bytes.fromhex(t).decode(), int(p)) for t, p in (x.split(":") for x in text.split(","))]

    grew_early = 0
    for tps, (hashes, from_collection, added) in kafka["partitions"]:
        assert [java_topic_partition_hash(tp) for tp in tps] == [int(h) for h in hashes.split(",")]
        assert _hashset_orders(tps, java_topic_partition_hash) == (parse(from_collection), parse(added))
        grew_early += _grew_early(tps, java_topic_partition_hash, java_hashset_capacity_from_collection(len(tps)))
    assert grew_early >= 20  # the 9th in a bucket of a small table is met, not only allowed for


def test_murmur2_and_to_positive_are_kafkas(kafka):
    for data, (hash_code, positive) in kafka["murmur2"]:
        assert murmur2(data) == int(hash_code) and to_positive(murmur2(data)) == int(positive), data.hex()


def _member_id(rng: random.Random) -> str:
    """A member id as a consumer makes one (a Uuid's text), or a classic-looking one."""
    if rng.random() < 0.8:
        return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")
    return f"consumer-{rng.randrange(100)}-{rng.randbytes(4).hex()}"


def test_a_consumer_groups_member_order_is_kafkas_through_joins_updates_and_leaves(kafka):
    """The model's member table (``ConsumerGroup``: its members in the order they came, and the size its table
    grew to) gives Kafka's order after the puts and removals a group's records make. Kafka's table grows before it
    looks for the key: an update of two members in a table of two slots grows it to four and reorders them (a
    broker's uniform assignor then gave the extra partition to another member than the model did)."""
    from streaming.coordinator.consumer import ConsumerGroupMember
    from streaming.coordinator.consumer.group import ConsumerGroup

    for ops, kafka_order in kafka["table"]:
        group = ConsumerGroup("g")
        for op, m in ops:
            if op == "+":
                group._update_member(group.members.get(m) or ConsumerGroupMember(m))
            elif m in group.members:
                group._remove_member(m)
        assert timeline_hash_order(list(group.members), group.member_slots) == kafka_order, ops


def test_a_timeline_hash_maps_order_is_kafkas(kafka):
    """The order the group coordinator's member table (a TimelineHashMap) gives its members, which the target
    assignment hands on to the assignor (streaming/coordinator/consumer/target.py): members added in order, some
    removed; the table keeps the size it grew to."""
    for ids, gone, kafka_order in kafka["timeline"]:
        slots = TIMELINE_MIN_CAPACITY
        for size in range(len(ids)):
            slots = timeline_capacity_after_adding(slots, size)
        assert timeline_hash_order([m for m in ids if m not in gone], slots) == kafka_order, (ids, gone)
