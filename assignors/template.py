"""Template for your own assignor: copy this file, rename the class and ``name``, change ``assign``.

Rules every assignor must follow (the tests in tests/assignors/test_assignors_properties.py check them for ours):

* return every member id of ``subscriptions`` as a key, even with an empty list;
* give a member only partitions of topics it subscribes to, and only partitions that exist
  (``0 <= p < partitions_per_topic[topic]``);
* give each partition to at most one member (exactly one if someone subscribes to its topic);
* be deterministic: the same input must give the same output, because every consumer trusts the leader's
  answer and the tracker recomputes it;
* order members the way Kafka does when ties matter: ``sorted_members(subscriptions)``.

Register it so ``get_assignor`` and the kafka-python adapters can find it::

    from assignors import register_assignor
    from assignors.template import TemplateAssignor   # your copy

    register_assignor(TemplateAssignor)                # under TemplateAssignor.name
    consumer = KafkaConsumer(..., partition_assignment_strategy=[kafka_python_strategy("template")])

The example below deals each topic's partitions round-robin over that topic's subscribers, starting each
topic at a different member so single-partition topics do not all land on the first member.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import EAGER, Assignment, Assignor, PartitionRacks, Subscription, TopicPartition, sorted_members


class TemplateAssignor(Assignor):
    name = "template"  # the protocol name members advertise in JoinGroup; must be unique in the group
    supported_protocols = (EAGER,)  # add COOPERATIVE only if you never move a partition owned by someone else

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> Assignment:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        ordered = sorted_members(subscriptions)
        for index, topic in enumerate(sorted(partitions_per_topic)):
            subscribers = [m for m in ordered if topic in subscriptions[m].topics]
            if not subscribers:
                continue
            for p in range(partitions_per_topic[topic]):
                assignment[subscribers[(index + p) % len(subscribers)]].append(TopicPartition(topic, p))
        return {member: sorted(parts) for member, parts in assignment.items()}
