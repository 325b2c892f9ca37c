"""What the tracker does with a group rebuilt from the store after a lost checkpoint (streaming/coordinator/restored.py),
one rule at a time. The whole-feed checks are in test_recovery.py (simulated, normal mode) and test_real_broker.py
(Apache Kafka, observe mode)."""
from __future__ import annotations

from tests.coordinator_harness import Harness, of_type, one

COOPERATIVE = "cooperative-sticky"


def cooperative(owned: list[tuple[str, int]]) -> list[dict]:
    return [{"name": COOPERATIVE, "topics": ["t"], "owned_partitions": [list(tp) for tp in owned], "generation": 1}]


def test_a_partition_a_member_owns_is_assigned_even_beyond_the_size_the_tracker_knows():
    """The tracker's topic sizes can lag behind the members' (a group rebuilt from the store knows only the partitions
    its stored assignment names). Kafka's sticky assignor fails when handed fewer partitions than are owned ("no more
    unfilled consumers"); the tracker takes an owned partition as proof that it exists."""
    h = Harness(assignment_mode="tracker")
    h.send(type="topic_metadata", topic="t", partitions=2)
    a = h.new_member(client_id="a", protocols=cooperative([("t", 0), ("t", 3)]))
    b = h.new_member(client_id="b", protocols=cooperative([("t", 1), ("t", 2)]))
    h.tick(0)
    h.sync(h.leader(), h.generation())
    rebalance = one(h.outputs, "rebalance")
    assert sorted(tuple(tp) for parts in rebalance["assignment"].values() for tp in parts) == \
        [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    assert sorted(map(tuple, rebalance["assignment"][a])) == [("t", 0), ("t", 3)]   # sticky: each keeps its own
    assert sorted(map(tuple, rebalance["assignment"][b])) == [("t", 1), ("t", 2)]
    assert not of_type(h.outputs, "dead_letter")
