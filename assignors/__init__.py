"""Kafka-exact partition assignors (Range, RoundRobin, Sticky, CooperativeSticky) plus custom ones.

    from assignors import get_assignor, Subscription
    get_assignor("range").assign({"t0": 3}, {"c0": Subscription(["t0"]), "c1": Subscription(["t0"])})
"""
from .base import COOPERATIVE, EAGER, Assignor, Subscription, TopicPartition
from .registry import available_assignors, get_assignor, register_assignor

__all__ = [
    "TopicPartition",
    "Subscription",
    "Assignor",
    "get_assignor",
    "available_assignors",
    "register_assignor",
    "EAGER",
    "COOPERATIVE",
]
