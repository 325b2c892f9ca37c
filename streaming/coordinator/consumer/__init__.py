"""Kafka's consumer group protocol (KIP-848, ``group.protocol=consumer``) as a pure, deterministic model.

Modules, one job each: ``member_state`` (MemberState), ``member`` (ConsumerGroupMember), ``reconcile``
(CurrentAssignmentBuilder), ``target`` (TargetAssignmentBuilder over ``assignors.server``), ``records`` (the
``__consumer_offsets`` records), ``group`` (ConsumerGroup, changed only by replaying records), ``topics`` (the
metadata image), ``regex`` (regex subscriptions), ``config``, ``classic_members`` (members of the classic
protocol in a consumer group, and the online upgrade and downgrade), ``coordinator`` (the request handling and timers,
offset commits and their cleanup; the offsets arithmetic is ``streaming.coordinator.offsets``, shared with the classic
model).
"""

from streaming.coordinator.consumer.config import ConsumerGroupConfig
from streaming.coordinator.consumer.coordinator import ConsumerGroupCoordinator, is_consumer_state
from streaming.coordinator.consumer.errors import HeartbeatError
from streaming.coordinator.consumer.group import ConsumerGroup
from streaming.coordinator.consumer.member import ConsumerGroupMember
from streaming.coordinator.consumer.member_state import MemberState
from streaming.coordinator.consumer.reconcile import reconcile

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "MemberState",
    "HeartbeatError",
    "reconcile",
    "is_consumer_state",
]
