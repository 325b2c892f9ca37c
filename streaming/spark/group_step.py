"""One group's micro-batch step: the pure function the Spark shell wraps.

Spark hands us a group's serialised coordinator state, the group's new events (already validated) and the clock;
we return the new state, the outputs and the next deadline. Nothing here knows about Spark, so the exact same step
runs in tests, in replays and inside ``applyInPandasWithState``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from streaming.coordinator import CoordinatorConfig
from streaming.coordinator import outputs as out
from streaming.coordinator.consumer.records import RECORD_TYPES as CONSUMER_GROUP_RECORDS
from streaming.coordinator.routing import Configs, GroupModel
from streaming.gc_pause import gc_paused

# Output types the job keeps by default. Per-request responses (join_response, heartbeat_response, ...) are what the
# coordinator answers each client; a tracker rarely needs them downstream and they are most of the volume.
DEFAULT_OUTPUT_TYPES = (
    frozenset(
        {
            out.STATE_CHANGE,
            out.ASSIGNMENT,
            out.REBALANCE,
            out.MEMBER_EXPIRED,
            out.MEMBER_JOINED,
            out.MEMBER_LEFT,
            out.MEMBER_REPLACED,
            out.OFFSET_COMMIT,
            out.GROUP_METADATA,
            # Consumer-protocol (KIP-848) groups: their target assignments, their __consumer_offsets records, the switch
            # between protocols, and events a model does not act on.
            out.TARGET_ASSIGNMENT,
            out.PROTOCOL_SWITCH,
            out.IGNORED_EVENT,
            # A lost checkpoint: each group rebuilt from the store, and the first sign of what the store did not hold.
            out.GROUP_RESTORED,
            out.RESTORE_GAP,
            # Log-end samples, passed on: lag is measured from them and the commits (streaming/coordinator/lag.py).
            out.LOG_END,
            # What instrumented clients told their applications (rebalance and commit callbacks, statistics), passed on.
            out.CLIENT_REPORT,
        }
    )
    | CONSUMER_GROUP_RECORDS
)


@dataclass
class StepResult:
    state: bytes | None  # None: the group no longer exists (Dead and nothing left to keep)
    outputs: list[dict] = field(default_factory=list)
    next_deadline: int | None = None


def step_group(
    state: bytes | None,
    events: Iterable[dict],
    now_ms: int | None,
    config: CoordinatorConfig | Configs,
    keep_types: frozenset[str] | None = DEFAULT_OUTPUT_TYPES,
) -> StepResult:
    """Apply ``events`` (in feed order), then fire the timers due at ``now_ms``.

    The coordinator fires timers due before each event itself, so the result does not depend on how the feed was
    cut into micro-batches — the property that makes restarts and replays give identical output. The group runs on
    the classic or the consumer-protocol model (``streaming.coordinator.routing``); ``config`` is both models'
    settings (a ``CoordinatorConfig`` alone: the consumer protocol's defaults).
    """
    with gc_paused():  # in a process holding pandas, pyarrow and pyspark, ~25% of a step was the collector
        return _step(state, events, now_ms, config, keep_types)


def _step(
    state: bytes | None,
    events: Iterable[dict],
    now_ms: int | None,
    config: CoordinatorConfig | Configs,
    keep_types: frozenset[str] | None,
) -> StepResult:
    configs = config if isinstance(config, Configs) else Configs.of(config)
    coordinator = GroupModel.from_bytes(state, configs)
    outputs: list[dict] = coordinator.announcements()  # a group rebuilt from the store says so in its first step
    for event in events:
        outputs.extend(coordinator.handle(event))
    if now_ms is not None:
        outputs.extend(coordinator.advance(int(now_ms)))
    if keep_types is not None:
        outputs = [o for o in outputs if o.get("type") in keep_types]
    if coordinator.is_blank():
        return StepResult(None, outputs, None)
    return StepResult(coordinator.to_bytes(), outputs, coordinator.next_deadline())
