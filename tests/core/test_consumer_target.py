"""The target assignment step (``streaming.coordinator.consumer.target``): what the assignor is given, which
records come out.

Expectations ported from Kafka 4.0's TargetAssignmentBuilderTest (testEmpty, testAssignmentHasNotChanged,
testAssignmentSwapped, testNewMember, testUpdateMember, testPartialAssignmentUpdate, testDeleteMember,
testReplaceStaticMember, testRegularExpressions): a scripted assignor answers, and the records are one
ConsumerGroupTargetAssignmentMember per member whose target changed, then the epoch record. Kafka's test context
also checks the GroupSpec the assignor receives; so does ``Scripted`` here.
"""

from __future__ import annotations

from assignors.server import get_server_assignor
from streaming.coordinator.consumer import ConsumerGroupMember
from streaming.coordinator.consumer import records as R
from streaming.coordinator.consumer.group import HOMOGENEOUS, ResolvedRegex
from streaming.coordinator.consumer.member import assignment
from streaming.coordinator.consumer.target import build_target_assignment
from streaming.coordinator.consumer.topics import TopicImage

G = "my-group"


class Scripted:
    """Kafka's MockPartitionAssignor: answers what it was told and remembers the GroupSpec."""

    def __init__(self, answer):
        self.answer, self.spec = answer, None

    def assign(self, spec, describer):
        self.spec = spec
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in self.answer.items() if m in spec.members}


class Context:
    def __init__(self):
        self.image = TopicImage()
        self.members, self.target, self.static, self.updates, self.regexes = {}, {}, {}, {}, {}

    def topic(self, name, partitions):
        self.image.apply(name, partitions)
        return self.image.id_for(name)

    def add(self, member_id, topics, target, instance_id=None, regex=""):
        self.members[member_id] = ConsumerGroupMember(
            member_id, instance_id=instance_id, subscribed_topic_names=frozenset(topics), subscribed_topic_regex=regex
        )
        if instance_id is not None:
            self.static[instance_id] = member_id
        self.target[member_id] = assignment(target)

    def update(self, member_id, topics, instance_id=None, rack=None):
        base = self.members.get(member_id) or ConsumerGroupMember(member_id)
        self.updates[member_id] = base.with_(
            subscribed_topic_names=frozenset(topics),
            instance_id=instance_id or base.instance_id,
            rack_id=rack or base.rack_id,
        )

    def remove(self, member_id):
        self.updates[member_id] = None

    def build(self, answer):
        assignor = Scripted({m: assignment(a) for m, a in answer.items()})
        metadata = {n: (t.topic_id, t.partitions) for n, t in self.image.by_name.items()}
        result = build_target_assignment(
            G,
            20,
            assignor,
            self.members,
            self.static,
            metadata,
            HOMOGENEOUS,
            self.target,
            self.regexes,
            self.image,
            self.updates,
        )
        return result, assignor.spec


def records_of(result):
    """Member records as a set (Kafka's assertUnorderedRecordsEquals), then the ordered tail."""
    members = {(r["member_id"], repr(r["topicPartitions"])) for r in result.records[:-1]}
    return members, result.records[-1]


def member_record(member_id, a):
    return member_id, repr(R.target_assignment(G, member_id, assignment(a))["topicPartitions"])


def epoch_record():
    return R.target_assignment_epoch(G, 20)


def test_empty():
    result, spec = Context().build({})
    assert result.records == [epoch_record()] and result.assignment == {}


def test_assignment_has_not_changed():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2, 3), bar: (1, 2, 3)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (4, 5, 6), bar: (4, 5, 6)})
    result, spec = c.build({"member-1": {foo: (1, 2, 3), bar: (1, 2, 3)}, "member-2": {foo: (4, 5, 6), bar: (4, 5, 6)}})
    assert result.records == [epoch_record()]
    assert result.assignment == {
        "member-1": assignment({foo: (1, 2, 3), bar: (1, 2, 3)}),
        "member-2": assignment({foo: (4, 5, 6), bar: (4, 5, 6)}),
    }
    # The assignor saw every member with its topic ids (zar has no metadata) and its current target.
    assert set(spec.members["member-1"].topic_ids) == {foo, bar}
    assert spec.members["member-2"].assignment == {foo: (4, 5, 6), bar: (4, 5, 6)}


def test_assignment_swapped():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2, 3), bar: (1, 2, 3)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (4, 5, 6), bar: (4, 5, 6)})
    result, _ = c.build({"member-2": {foo: (1, 2, 3), bar: (1, 2, 3)}, "member-1": {foo: (4, 5, 6), bar: (4, 5, 6)}})
    assert records_of(result) == (
        {
            member_record("member-1", {foo: (4, 5, 6), bar: (4, 5, 6)}),
            member_record("member-2", {foo: (1, 2, 3), bar: (1, 2, 3)}),
        },
        epoch_record(),
    )


def test_new_member():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2, 3), bar: (1, 2, 3)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (4, 5, 6), bar: (4, 5, 6)})
    c.update("member-3", ["foo", "bar", "zar"])
    answer = {
        "member-1": {foo: (1, 2), bar: (1, 2)},
        "member-2": {foo: (3, 4), bar: (3, 4)},
        "member-3": {foo: (5, 6), bar: (5, 6)},
    }
    result, spec = c.build(answer)
    assert records_of(result) == ({member_record(m, a) for m, a in answer.items()}, epoch_record())
    assert result.assignment == {m: assignment(a) for m, a in answer.items()}
    assert spec.members["member-3"].assignment == {}


def test_update_member():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2, 3), bar: (1, 2)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (4, 5, 6), bar: (3, 4)})
    c.add("member-3", ["bar", "zar"], {bar: (5, 6)})
    c.update("member-3", ["foo", "bar", "zar"], instance_id="instance-id-3", rack="rack-0")
    answer = {
        "member-1": {foo: (1, 2), bar: (1, 2)},
        "member-2": {foo: (3, 4), bar: (3, 4)},
        "member-3": {foo: (5, 6), bar: (5, 6)},
    }
    result, spec = c.build(answer)
    assert records_of(result) == ({member_record(m, a) for m, a in answer.items()}, epoch_record())
    updated = spec.members["member-3"]
    assert (set(updated.topic_ids), updated.instance_id, updated.rack) == ({foo, bar}, "instance-id-3", "rack-0")
    assert updated.assignment == {bar: (5, 6)}


def test_partial_assignment_update():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2), bar: (1, 2)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (3, 4), bar: (3, 4)})
    c.add("member-3", ["bar", "zar"], {foo: (5, 6), bar: (5, 6)})
    answer = {
        "member-1": {foo: (1, 2), bar: (1, 2)},
        "member-2": {foo: (3, 4, 5), bar: (3, 4, 5)},
        "member-3": {foo: (6,), bar: (6,)},
    }
    result, _ = c.build(answer)
    # member-1's target did not change: no record for it.
    assert records_of(result) == (
        {member_record("member-2", answer["member-2"]), member_record("member-3", answer["member-3"])},
        epoch_record(),
    )
    assert result.assignment == {m: assignment(a) for m, a in answer.items()}


def test_delete_member():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2), bar: (1, 2)})
    c.add("member-2", ["foo", "bar", "zar"], {foo: (3, 4), bar: (3, 4)})
    c.add("member-3", ["foo", "bar", "zar"], {foo: (5, 6), bar: (5, 6)})
    c.remove("member-3")
    answer = {"member-1": {foo: (1, 2, 3), bar: (1, 2, 3)}, "member-2": {foo: (4, 5, 6), bar: (4, 5, 6)}}
    result, spec = c.build(answer)
    assert records_of(result) == ({member_record(m, a) for m, a in answer.items()}, epoch_record())
    assert "member-3" not in spec.members and set(result.assignment) == {"member-1", "member-2"}


def test_replace_static_member():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["foo", "bar", "zar"], {foo: (1, 2), bar: (1, 2)}, instance_id="instance-member-1")
    c.add("member-2", ["foo", "bar", "zar"], {foo: (3, 4), bar: (3, 4)}, instance_id="instance-member-2")
    c.add("member-3", ["foo", "bar", "zar"], {foo: (5, 6), bar: (5, 6)}, instance_id="instance-member-3")
    c.remove("member-3")
    c.update("member-3-a", ["foo", "bar", "zar"], instance_id="instance-member-3")
    answer = {
        "member-1": {foo: (1, 2), bar: (1, 2)},
        "member-2": {foo: (3, 4), bar: (3, 4)},
        "member-3-a": {foo: (5, 6), bar: (5, 6)},
    }
    result, spec = c.build(answer)
    assert result.records == [R.target_assignment(G, "member-3-a", assignment(answer["member-3-a"])), epoch_record()]
    # The new instance starts from the departed member's target.
    assert spec.members["member-3-a"].assignment == {foo: (5, 6), bar: (5, 6)}
    assert result.assignment == {m: assignment(a) for m, a in answer.items()}


def test_regular_expressions():
    c = Context()
    foo, bar = c.topic("foo", 6), c.topic("bar", 6)
    c.add("member-1", ["bar", "zar"], {}, regex="foo*")
    c.add("member-2", ["foo", "bar", "zar"], {})
    c.add("member-3", [], {}, regex="foo*")
    c.regexes["foo*"] = ResolvedRegex(frozenset({"foo"}), 10, 12345)
    answer = {
        "member-1": {foo: (1, 2), bar: (1, 2, 3)},
        "member-2": {foo: (3, 4), bar: (4, 5, 6)},
        "member-3": {foo: (5, 6)},
    }
    result, spec = c.build(answer)
    assert records_of(result) == ({member_record(m, a) for m, a in answer.items()}, epoch_record())
    # A regex member is subscribed to its names plus the regex's resolved topics.
    assert set(spec.members["member-1"].topic_ids) == {foo, bar}
    assert set(spec.members["member-3"].topic_ids) == {foo}


def test_with_kafkas_uniform_assignor():
    c = Context()
    foo = c.topic("foo", 6)
    c.add("member-1", ["foo"], {foo: range(6)})
    c.update("member-2", ["foo"])
    metadata = {n: (t.topic_id, t.partitions) for n, t in c.image.by_name.items()}
    result = build_target_assignment(
        G,
        2,
        get_server_assignor("uniform"),
        c.members,
        c.static,
        metadata,
        HOMOGENEOUS,
        c.target,
        {},
        c.image,
        c.updates,
    )
    sizes = sorted(len(a.get(foo, ())) for a in result.assignment.values())
    assert sizes == [3, 3]
    assert set().union(*(a[foo] for a in result.assignment.values())) == set(range(6))
    # The new member's partitions come from member-1, whose record changed; both get a record.
    assert {r.get("member_id") for r in result.records} == {"member-1", "member-2", None}
