"""Kafka-exact partition assignors (Range, RoundRobin, Sticky, CooperativeSticky) plus custom ones.

    from assignors import get_assignor, Subscription
    get_assignor("range").assign({"t0": 3}, {"c0": Subscription(["t0"]), "c1": Subscription(["t0"])})

Two registries, because Kafka has two kinds of assignors with different inputs:

* ``get_assignor(name)`` -- client-side assignors under the protocol names consumers advertise in JoinGroup
  (``partition.assignment.strategy``): ``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``, ...
* ``get_server_assignor(name)`` -- the group coordinator's KIP-848 assignors under the broker's
  ``group.consumer.assignors`` names: ``uniform``, ``range`` (see ``assignors.server``).

``range`` is in both and means the client RangeAssignor in the first, the coordinator's in the second.
"""

from .base import COOPERATIVE, EAGER, Assignor, Subscription, TopicPartition
from .registry import available_assignors, get_assignor, register_assignor
from .server import available_server_assignors, get_server_assignor

__all__ = [
    "TopicPartition",
    "Subscription",
    "Assignor",
    "get_assignor",
    "available_assignors",
    "register_assignor",
    "get_server_assignor",
    "available_server_assignors",
    "EAGER",
    "COOPERATIVE",
]
