"""String.hashCode and java.util.HashMap's iteration order, checked against a real JVM: Kafka picks a new classic
leader, lists JoinGroup members and writes GroupMetadataValue members in that order, and breaks protocol-vote ties
by it. Skips where no ``javac`` is installed."""
from __future__ import annotations

import random
import shutil
import subprocess
from collections import Counter

import pytest

from streaming.coordinator.javahash import hashmap_order, string_hash

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")

JAVA = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class HashOrder {
    // Each input line: keys as hex UTF-8, comma separated. Output: their hashCodes, then the HashMap's order.
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            Map<String, Integer> map = new HashMap<>();
            StringBuilder hashes = new StringBuilder();
            for (String hex : line.split(",", -1)) {
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
    h = string_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _bucket16(key: str) -> int:
    return _spread(key) & 15


def _key_sets(rng: random.Random) -> list[list[str]]:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_éß漢😀"
    sets = []
    for _ in range(300):   # member-id-like keys, and any text (accents, CJK, a character outside the BMP)
        n = rng.choice([1, 2, 3, 5, 12, 13, 25, 49, 97, 200])
        sets.append([f"consumer-{rng.randrange(100)}-{rng.getrandbits(64):016x}" if rng.random() < 0.5 else
                     "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(n)])
    # Nine or more keys in one bucket of a small table: HashMap grows instead of making a tree bin. (Nine in one
    # bucket of a table of 64 or more would make one, whose order is a red-black tree's: not modelled, and not
    # met with real member ids.)
    colliding = [k for k in (f"p{i}" for i in range(200_000)) if _bucket16(k) == 3]
    while len(sets) < 330:
        keys = rng.sample(colliding, rng.randrange(9, 20)) + [f"x{rng.randrange(1000)}" for _ in range(3)]
        if max(Counter(_spread(k) & 63 for k in keys).values()) <= 8:
            sets.append(keys)
    return sets


def test_string_hash_and_hashmap_order_are_the_jvms(tmp_path):
    (tmp_path / "HashOrder.java").write_text(JAVA, encoding="utf-8")
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "HashOrder.java")], check=True)
    sets = _key_sets(random.Random(7))
    feed = "".join(",".join(k.encode().hex() for k in keys) + "\n" for keys in sets)
    answer = subprocess.run(["java", "-cp", str(tmp_path), "HashOrder"], input=feed, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert len(answer) == len(sets)
    for keys, line in zip(sets, answer):
        hashes, order = line.split("\t")
        assert [string_hash(k) for k in keys] == [int(h) for h in hashes.split(",")]
        assert hashmap_order(keys) == [bytes.fromhex(k).decode() for k in order.split(",")], keys
