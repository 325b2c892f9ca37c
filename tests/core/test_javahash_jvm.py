"""String.hashCode and java.util.HashMap's iteration order, checked against a real JVM: Kafka picks a new classic
leader, lists JoinGroup members and writes GroupMetadataValue members in that order, and breaks protocol-vote ties
by it; the assignors size theirs (``new HashMap<>(n)``). Skips where no ``javac`` is installed."""

from __future__ import annotations

import functools
import random
import shutil
import subprocess
from collections import Counter

import pytest

from assignors.java import java_hash_order, java_string_hash

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")

JAVA = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class HashOrder {
    // Each input line: the initial capacity ("-": the default constructor), a tab, then keys as hex UTF-8, comma
    // separated. Output: their hashCodes, then the HashMap's order.
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] fields = line.split("\\t", -1);
            Map<String, Integer> map = fields[0].equals("-") ? new HashMap<>()
                                                             : new HashMap<>(Integer.parseInt(fields[0]));
            StringBuilder hashes = new StringBuilder();
            for (String hex : fields[1].split(",", -1)) {
                String key = new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8);
                map.put(key, 0);
                hashes.append(hashes.length() == 0 ? "" : ",").append(key.hashCode());
            }
            StringJoiner order = new StringJoiner(",");
            for (String key : map.keySet())
                order.add(HexFormat.of().formatHex(key.getBytes(StandardCharsets.UTF_8)));
            System.out.println(hashes + "\\t" + order);
        }
    }
}
"""


def _spread(key: str) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _no_tree_bin(keys: list[str]) -> bool:
    """No bucket of a table of 64 gets a 9th key: HashMap would make a tree bin there, whose order is a red-black
    tree's (not modelled, and not met with real member ids)."""
    return max(Counter(_spread(k) & 63 for k in keys).values()) <= 8


@functools.lru_cache(maxsize=1)
def _candidates() -> list[tuple[str, int]]:
    return [(k, _spread(k)) for k in (f"p{i}" for i in range(200_000))]


def _colliding(bucket: int, capacity: int) -> list[str]:
    return [k for k, spread in _candidates() if spread & (capacity - 1) == bucket]


def _text(rng: random.Random) -> str:
    """Member-id-like keys, and any text (accents, CJK, a character outside the BMP)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_éß漢😀"
    return (
        f"consumer-{rng.randrange(100)}-{rng.getrandbits(64):016x}"
        if rng.random() < 0.5
        else "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
    )


def _key_sets(rng: random.Random) -> list[list[str]]:
    sets = []
    for _ in range(300):
        n = rng.choice([1, 2, 3, 5, 12, 13, 25, 49, 97, 200])
        sets.append([_text(rng) for _ in range(n)])
    # Nine or more keys in one bucket of a small table: HashMap grows instead of making a tree bin.
    colliding = _colliding(3, 16)
    while len(sets) < 330:
        keys = rng.sample(colliding, rng.randrange(9, 20)) + [f"x{rng.randrange(1000)}" for _ in range(3)]
        if _no_tree_bin(keys):
            sets.append(keys)
    return sets


def _sized_key_sets(rng: random.Random) -> list[tuple[int, list[str]]]:
    """``new HashMap<>(capacity)``: small and large tables, and the 9th key of a bucket in a table of 1 to 32, which
    doubles it before its size would."""
    sets = []
    for _ in range(200):
        capacity = rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 33, 64, 100, 1000])
        sets.append((capacity, [_text(rng) for _ in range(rng.choice([1, 2, 3, 4, 5, 7, 12, 13, 25, 49, 97]))]))
    for capacity in (1, 2, 4, 8, 16, 32):
        colliding = _colliding(5 % capacity, capacity)
        added = 0
        while added < 20:
            keys = rng.sample(colliding, rng.randrange(9, 17)) + [f"x{rng.randrange(1000)}" for _ in range(2)]
            if _no_tree_bin(keys):
                rng.shuffle(keys)
                sets.append((capacity, keys))
                added += 1
    return sets


@pytest.fixture(scope="module")
def jvm(tmp_path_factory):
    """Ask the JVM: [(capacity or None, keys)] -> [(hashCodes, HashMap order)]."""
    directory = tmp_path_factory.mktemp("hash-order")
    (directory / "HashOrder.java").write_text(JAVA, encoding="utf-8")
    subprocess.run(["javac", "-d", str(directory), str(directory / "HashOrder.java")], check=True)

    def ask(sets: list[tuple[int | None, list[str]]]) -> list[tuple[list[int], list[str]]]:
        feed = "".join(
            ("-" if capacity is None else str(capacity)) + "\t" + ",".join(k.encode().hex() for k in keys) + "\n"
            for capacity, keys in sets
        )
        answer = subprocess.run(
            ["java", "-cp", str(directory), "HashOrder"], input=feed, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert len(answer) == len(sets)
        return [
            ([int(h) for h in hashes.split(",")], [bytes.fromhex(k).decode() for k in order.split(",")])
            for hashes, order in (line.split("\t") for line in answer)
        ]

    return ask


def test_string_hash_and_hashmap_order_are_the_jvms(jvm):
    sets = _key_sets(random.Random(7))
    for keys, (hashes, order) in zip(sets, jvm([(None, keys) for keys in sets])):
        assert [java_string_hash(k) for k in keys] == hashes
        assert java_hash_order(keys) == order, keys


def test_hashmap_order_with_an_initial_capacity_is_the_jvms(jvm):
    """One implementation for the coordinators' maps and the assignors' sized ones: both features at once."""
    sets = _sized_key_sets(random.Random(11))
    grown_early = 0
    for (capacity, keys), (_, order) in zip(sets, jvm(sets)):
        assert java_hash_order(keys, java_string_hash, capacity) == order, (capacity, keys)
        # the 9th key of a bucket doubled the table before its size did: the order differs from a table sized by
        # the number of keys alone
        by_size = 1
        while by_size < capacity or len(keys) > by_size * 3 // 4:
            by_size *= 2
        grown_early += order != sorted(keys, key=lambda k: _spread(k) & (by_size - 1))
    assert grown_early >= 20  # the case is met, not only allowed for
