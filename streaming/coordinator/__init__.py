"""Kafka's classic group coordinator as a pure, deterministic model (no Spark, no I/O, no wall clock)."""

from streaming.coordinator.config import CoordinatorConfig
from streaming.coordinator.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, is_consumer_state
from streaming.coordinator.coordinator import GroupCoordinator
from streaming.coordinator.events import EVENT_TYPES, parse_event
from streaming.coordinator.state import GroupState

__all__ = [
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupState",
    "EVENT_TYPES",
    "parse_event",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "is_consumer_state",
]
