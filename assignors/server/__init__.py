"""Kafka's server-side (KIP-848) assignors: ``uniform`` and ``range``, as the group coordinator runs them.

Their input is not the client-side one (JoinGroup subscriptions with owned partitions): the broker hands them
a ``GroupSpec`` (members with subscribed topic ids, optional rack and instance id, and their current target
assignment) and a ``SubscribedTopicDescriber`` (partitions, and replica racks, per topic id)::

    from assignors.server import GroupSpec, MemberSubscription, SubscribedTopicDescriber, TopicMetadata
    from assignors.server import get_server_assignor

    topics = SubscribedTopicDescriber([TopicMetadata("T1-A4s3VTwiI5CTbEp6POw", "orders", 6)])
    spec = GroupSpec({"m1": MemberSubscription(topic_names=("orders",)),
                      "m2": MemberSubscription(topic_names=("orders",))}, topics)
    get_server_assignor("uniform").assign(spec, topics)   # {member: {topic id: frozenset(partitions)}}

Lookup is by the broker's names (``group.consumer.assignors``) in their own registry: ``get_server_assignor``;
client-side names stay with ``assignors.get_assignor``, so ``range`` means the client RangeAssignor there and the
coordinator's RangeAssignor here.
"""

from .registry import available_server_assignors, get_server_assignor, register_server_assignor
from .types import (
    HETEROGENEOUS,
    HOMOGENEOUS,
    GroupAssignment,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    TopicMetadata,
)
from .range import RangeAssignor
from .uniform import UniformAssignor

__all__ = [
    "GroupSpec",
    "MemberSubscription",
    "SubscribedTopicDescriber",
    "TopicMetadata",
    "GroupAssignment",
    "PartitionAssignorError",
    "HOMOGENEOUS",
    "HETEROGENEOUS",
    "UniformAssignor",
    "RangeAssignor",
    "get_server_assignor",
    "available_server_assignors",
    "register_server_assignor",
]
