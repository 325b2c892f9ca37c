"""Settings of the consumer group protocol under Kafka's broker names and defaults (Kafka 4.0).

The ``offsets.*`` and ``offset.metadata.max.bytes`` settings are the broker's, shared with the classic coordinator
(``streaming.coordinator.config.CoordinatorConfig``; ``routing.Configs`` gives both models the same values)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

INT_MAX = 2**31 - 1
MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")
_BOOLEANS = (
    "empty_group_assignment_epoch",
    "group_consumer_assignor_offload_enable",
    "classic_member_timeouts",
    "regex_resolution_events",
    "upgrade_with_metadata",
)


@dataclass(frozen=True)
class ConsumerGroupConfig:
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = INT_MAX
    # The first is the default assignor (Kafka: group.consumer.assignors = uniform, range).
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # Kafka's group.consumer.migration.policy (ConsumerGroupMigrationPolicy): whether a non-empty group may switch
    # protocol online. An empty group is replaced by a group of the other protocol whatever the policy.
    group_consumer_migration_policy: str = "bidirectional"
    # Committed offsets (OffsetMetadataManager): retention, how often the broker's cleanup pass runs, and the
    # largest commit metadata.
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    # Not a Kafka setting: the epoch a new group starts at (group and target assignment). 0 up to Kafka 4.2; 1 since
    # 4.3 (KAFKA-20268: an empty target at epoch 1, so the first computed one is epoch 2).
    initial_group_epoch: int = 0
    # Not a Kafka setting: when the last members of a group are removed, the target assignment epoch follows the
    # new group epoch (KAFKA-20442, from Kafka 4.4; 4.3.0 and before leave it behind until the next member joins).
    empty_group_assignment_epoch: bool = False
    # Not a Kafka setting: whether an online upgrade gives the new consumer group its subscribed topics' metadata
    # (Kafka 4.1+, KIP-1101: ConsumerGroup.fromClassicGroup sets the metadata hash, so the heartbeat that upgraded
    # the group, such as a static member's taking its classic predecessor's place, finds nothing changed) or leaves
    # it to that heartbeat, which writes it and bumps the group epoch (4.0).
    upgrade_with_metadata: bool = False
    # Kafka 4.3+'s group.consumer.assignment.interval.ms (KIP-1263, KAFKA-20291; 1000 by default there): a new target
    # assignment is computed at most once per interval, by the first heartbeat at or after the last computation's
    # time + interval (GroupMetadataManager.canComputeNextTargetAssignment); until then members reconcile to the last
    # target. 0 (the default here, as Kafka up to 4.2 always did): in the heartbeat that bumped the group epoch.
    group_consumer_assignment_interval_ms: int = 0
    # Kafka 4.3+'s group.consumer.assignor.offload.enable (KIP-1263; true by default there, internal in 4.4,
    # KAFKA-20930). Taken so that a broker's settings can be given as they are: Kafka 4.3.0 and 4.4.0 never act on
    # it for consumer groups (the offloaded assignor, KAFKA-20292, is not in them), nor does the model.
    group_consumer_assignor_offload_enable: bool = True
    # Not a Kafka setting: whether classic-protocol members of a consumer group time out (their session, join and
    # sync timeouts). A feed that shows no heartbeats nor SyncGroups (the cluster feed) turns it off: the records say
    # when such a member is gone.
    classic_member_timeouts: bool = True
    # Not a Kafka setting: whether the group's regular expressions are resolved when a ``regex_resolved`` event says
    # the broker did. Kafka resolves them after the request that asked (asynchronously, on its executor) and writes
    # the result as a write of its own, milliseconds later, other members' requests perhaps between; the cluster
    # feed sees that write and says so (``tracker.expire.members=false``, an observer's feed, turns it on). Off, the
    # model resolves them right after the request.
    regex_resolution_events: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.group_consumer_assignors, str):
            object.__setattr__(
                self,
                "group_consumer_assignors",
                tuple(a.strip() for a in self.group_consumer_assignors.split(",") if a.strip()),
            )
        policy = str(self.group_consumer_migration_policy).strip().lower()
        if policy not in MIGRATION_POLICIES:
            raise ValueError(
                f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                f"not {self.group_consumer_migration_policy!r}"
            )
        object.__setattr__(self, "group_consumer_migration_policy", policy)
        if not self.group_consumer_assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        if self.group_consumer_session_timeout_ms <= 0 or self.group_consumer_heartbeat_interval_ms <= 0:
            raise ValueError("session timeout and heartbeat interval must be positive")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be lower than group.consumer.session.timeout.ms"
            )
        if not 0 <= self.group_consumer_assignment_interval_ms <= INT_MAX:
            raise ValueError("group.consumer.assignment.interval.ms must be between 0 and 2147483647")
        if self.initial_group_epoch not in (0, 1):
            raise ValueError("initial.group.epoch is 0 (Kafka up to 4.2) or 1 (Kafka 4.3+)")
        if self.offsets_retention_minutes <= 0 or self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offsets.retention.minutes and offsets.retention.check.interval.ms must be positive")

    @classmethod
    def from_properties(cls, props: Mapping[str, object] | None) -> "ConsumerGroupConfig":
        """Kafka-style keys (``group.consumer.session.timeout.ms``) or field names; unknown keys are an error."""
        by_name = {f.name.replace("_", "."): f for f in fields(cls)}
        values: dict[str, object] = {}
        for key, raw in (props or {}).items():
            f = by_name.get(key) or next((g for g in fields(cls) if g.name == key), None)
            if f is None:
                raise ValueError(f"unknown consumer group setting {key!r}; known: {', '.join(sorted(by_name))}")
            if f.name == "group_consumer_assignors":
                values[f.name] = raw if isinstance(raw, (tuple, list)) and not isinstance(raw, str) else str(raw)
                values[f.name] = tuple(values[f.name]) if not isinstance(values[f.name], str) else values[f.name]
            elif f.name == "group_consumer_migration_policy":
                values[f.name] = str(raw)
            elif f.name in _BOOLEANS:
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise ValueError(f"{key} must be true or false, not {raw!r}")
                values[f.name] = text == "true"
            else:
                try:
                    values[f.name] = int(str(raw).strip())
                except ValueError:
                    raise ValueError(f"{key} must be an integer, not {raw!r}") from None
        return cls(**values)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("downgrade", "bidirectional")

    def to_properties(self) -> dict[str, object]:
        return {
            f.name.replace("_", "."): (
                ",".join(getattr(self, f.name)) if f.name == "group_consumer_assignors" else getattr(self, f.name)
            )
            for f in fields(self)
        }
