"""The consumer-protocol model writes exactly the offsets store's record dicts: every record it emits goes through
``encode_record``/``decode_record`` unchanged, and the decoded records rebuild the same groups through
``load_records`` (and ``Store.consumer_group`` reads them) -- model -> store -> model, tombstones included."""

from __future__ import annotations

from offsets_store.codec import CONSUMER_GROUP_TYPES, decode_record, encode_record
from offsets_store.consumer_groups import consumer_group_states
from streaming.coordinator.consumer import ConsumerGroupCoordinator
from streaming.coordinator.consumer import records as R
from tests.consumer_harness import Harness

G = "fooup"


def history() -> tuple[Harness, list[dict]]:
    """A history writing every record type, values and tombstones: joins (names, regex, static), a static
    temporary leave and replacement, a leave, a partition count change, a second group deleted when empty."""
    h = Harness({"foo": 6, "bar": 3}, scripted=False)
    outs = h.join("a", ["foo", "bar"])[2]
    outs += h.join("b", ["foo"], instance_id="ib", rack_id="r1", server_assignor="uniform")[2]
    outs += h.hb("c", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="ba.*", topic_partitions=[])[2]
    h.ts = 11_000
    outs += h.hb("c", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="ba.*", topic_partitions=[])[2]
    outs += h.hb("a", 1)[2] + h.hb("b", 2, instance_id="ib")[2]
    outs += h.hb("b", -2, instance_id="ib")[2]
    outs += h.join("b2", ["foo"], instance_id="ib")[2]
    outs += h.topic("foo", 8)
    outs += h.hb("a", h.member("a").member_epoch)[2]
    outs += h.hb("c", -1)[2]
    outs += h.join("x", ["foo"], group_id="other")[2] + h.hb("x", -1, group_id="other")[2]
    outs += h.event(type="delete_group", group_id="other")
    return h, [o for o in outs if R.is_record(o)]


def written(decoded, original):
    """The decoded value restricted to what the original wrote, at every level (decoding adds defaults)."""
    if isinstance(original, dict):
        return {k: written(decoded[k], v) for k, v in original.items() if k != "ts"}
    if isinstance(original, list) and len(original) == len(decoded):
        return [written(d, o) for d, o in zip(decoded, original)]
    return decoded


def test_the_model_writes_the_stores_record_dicts_and_every_type_round_trips():
    h, records = history()
    assert R.RECORD_TYPES == set(CONSUMER_GROUP_TYPES)
    assert {r["type"] for r in records} == R.RECORD_TYPES
    assert {r["type"] for r in records if r["tombstone"]} == R.RECORD_TYPES
    for r in records:
        decoded = decode_record(*encode_record(r))
        # What the model wrote comes back as it was (the decoded record adds defaults and the value version).
        assert written(decoded, r) == {k: v for k, v in r.items() if k != "ts"}, r
        assert encode_record(decoded) == encode_record(r)


def test_records_through_the_codec_rebuild_the_same_groups():
    h, records = history()
    decoded = [decode_record(*encode_record(r)) for r in records]
    for source in (records, decoded):
        rebuilt = ConsumerGroupCoordinator(h.c.config)
        rebuilt.load_records(source, 50_000)
        assert {g: x.durable_view() for g, x in rebuilt.groups.items()} == {
            g: x.durable_view() for g, x in h.c.groups.items()
        }
        assert set(rebuilt.groups) == {G}  # the deleted group's tombstones removed it
        assert set(rebuilt.soft[G].sessions.values()) == {50_000 + 45_000}  # sessions restarted at load time
        # The topic image is seeded from the subscription metadata, so the next heartbeat keeps the assignment.
        assert rebuilt.image.get("foo").partitions == 8 and rebuilt.image.id_for("foo") == h.id("foo")


def test_compacted_records_read_by_the_store_shape_and_rebuilt():
    """Latest value per key, tombstones deleting (what the store keeps), still rebuild the groups."""
    h, records = history()
    live: dict = {}
    for r in records:
        key = encode_record(r)[0]
        if r["tombstone"]:
            live.pop(key, None)
        else:
            live[key] = decode_record(*encode_record(r))
    rebuilt = ConsumerGroupCoordinator(h.c.config)
    rebuilt.load_records(list(live.values()), 0)
    assert {g: x.durable_view() for g, x in rebuilt.groups.items()} == {
        g: x.durable_view() for g, x in h.c.groups.items()
    }
    state = consumer_group_states(live.values())[G]
    group = h.group()
    assert state["group_epoch"] == group.group_epoch and state["assignment_epoch"] == group.assignment_epoch
    assert set(state["members"]) == set(group.members) and "other" not in consumer_group_states(live.values())
