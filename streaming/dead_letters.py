"""Dead letters: what the job could not use, with the reason, next to its group's outputs on the dead-letter topic.

Two kinds share one shape: a record that is not a usable event (``reason`` says why; ``raw_base64`` its bytes), and
the events of a group whose micro-batch step raised (``exception`` names the error; ``raw_base64`` each event as the
job read it, so they can be replayed once the bug is fixed). ``source`` is the record's topic, partition and offset
(None for a step that had only timers to fire).
"""

from __future__ import annotations

import base64

import msgspec

from streaming.coordinator.outputs import DEAD_LETTER, DeadLetter

_JSON = msgspec.json.Encoder(order="sorted")
MAX_MESSAGE = 2000  # an exception's text can be any length; a dead letter must stay a small record


def dead_letter(
    group_id: str | None,
    ts: int,
    reason: str,
    raw: bytes | None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> DeadLetter:
    source = None if topic is None else {"topic": topic, "partition": int(partition), "offset": int(offset)}
    return {
        "type": DEAD_LETTER,
        "group_id": group_id,
        "ts": int(ts),
        "reason": reason,
        "raw_base64": base64.b64encode(bytes(raw) if raw is not None else b"").decode("ascii"),
        "source": source,
    }


def step_failure_letters(
    group_id: str | None, events: list[tuple[dict, str, int, int]], error: BaseException, ts: int
) -> list[DeadLetter]:
    """A group whose step raised (a bug, or a state that cannot be read): each of its events of the batch, given as
    (event, topic, partition, offset), as a dead letter naming the exception; one letter if only its timers were due.
    The caller keeps the group's state from before the batch, and every other group goes on."""
    message = str(error)[:MAX_MESSAGE]
    reason = f"group step failed: {type(error).__name__}: {message} (the group keeps its state from before this batch)"
    exception = {"type": type(error).__name__, "message": message}
    letters = [
        dict(
            dead_letter(group_id, event.get("ts") or ts, reason, _JSON.encode(event), topic, partition, offset),
            exception=exception,
        )
        for event, topic, partition, offset in events
    ]
    return letters or [dict(dead_letter(group_id, ts, reason, b""), exception=exception)]


def is_step_failure(output: dict) -> bool:
    return output.get("type") == DEAD_LETTER and "exception" in output
