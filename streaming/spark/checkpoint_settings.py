"""The settings a checkpoint's state was built with, kept beside it, so a restart that changes them is refused.

A checkpoint's state is keyed by what ``--state-key`` says: the group id, or the group's ``__consumer_offsets``
partition out of ``offsets.topic.num.partitions``. Restarted with another keying or another partition count, the job
would look for every group under a key it was never stored under and start each one from nothing, silently. The time
mode changes the query's plan (a watermark and event-time timers, or neither). So the first start of a checkpoint
writes ``tracker-settings.json`` next to Spark's query checkpoint, and each later start compares.
"""

from __future__ import annotations

import json
from pathlib import Path

FILE = "tracker-settings.json"


class CheckpointSettingsChanged(ValueError):
    """The checkpoint was written with other settings than this start asks for."""


def job_settings(state_key: str, time_mode: str, state_partitions: int | None) -> dict:
    """What a checkpoint's state depends on. The partition count matters only when the state is keyed by it."""
    return {
        "state_key": state_key,
        "time_mode": time_mode,
        "offsets.topic.num.partitions": state_partitions if state_key == "coordinator-partition" else None,
    }


def check_and_record(checkpoint: str, fresh: bool, settings: dict) -> None:
    """Refuse ``settings`` that differ from those ``checkpoint`` was started with; record them on its first start.

    ``fresh``: no micro-batch was ever planned in the checkpoint (its state is empty, any settings will do). A
    checkpoint from before this file existed gets it written now, from this start's settings."""
    path = Path(checkpoint) / FILE
    recorded = None if fresh or not path.exists() else json.loads(path.read_text())
    if recorded is not None and recorded != settings:
        changed = ", ".join(
            f"{name} {recorded.get(name)!r} -> {value!r}"
            for name, value in settings.items()
            if recorded.get(name) != value
        )
        raise CheckpointSettingsChanged(
            f"checkpoint {checkpoint} was started with other settings ({changed}): its state would not be found "
            f"under them. Restart with the checkpoint's settings, or start a new --checkpoint (the groups are "
            f"rebuilt from the store)."
        )
    if recorded is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(settings, sort_keys=True) + "\n")
        temporary.replace(path)
