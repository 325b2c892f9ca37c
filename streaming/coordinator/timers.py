"""The coordinators' timers: deadlines in a heap, the model's own fields the only truth.

A model keeps each deadline where Kafka does (a member's session, a group's join or retention deadline) and moves it
freely -- a heartbeat pushes a session on without touching the heap. The heap only says when to look: an entry whose
deadline is gone or earlier than the model's is stale, one whose deadline moved later is pushed back. So timers need no
cancelling, and a group rebuilt from its state re-arms by arming every deadline it holds.

Entries are ``(deadline, *key)``: ties fire in key order, which keeps the outputs deterministic.
"""

from __future__ import annotations

import heapq
import weakref
from typing import Callable, Hashable, Iterator

Key = tuple[Hashable, ...]


class Timers:
    def __init__(self, deadline_of: Callable[[Key], int | None]) -> None:
        # The model's method giving its current deadline for a key (None: no such timer now), held weakly: the model
        # owns its timers, and a strong reference back would make every model a cycle only the cyclic collector frees.
        self._deadline_of = weakref.WeakMethod(deadline_of)
        self._heap: list[tuple] = []
        self._armed: dict[Key, int] = {}  # the earliest entry pushed for a key

    def arm(self, key: Key, deadline: int | None) -> None:
        if deadline is None:
            return
        armed = self._armed.get(key)
        if armed is not None and armed <= deadline:
            return  # the earlier entry pushes itself back to the model's deadline when it pops
        self._armed[key] = deadline
        heapq.heappush(self._heap, (deadline, *key))

    def due(self, now_ms: int) -> Iterator[tuple[int, Key]]:
        """Each live timer due at or before ``now_ms``, in deadline then key order. The caller fires it before asking
        for the next one, and whatever the firing arms is seen in the same pass."""
        while self._heap and self._heap[0][0] <= now_ms:
            if self._settle():
                deadline, *key = heapq.heappop(self._heap)
                self._armed.pop(tuple(key), None)
                yield deadline, tuple(key)

    def next_deadline(self) -> int | None:
        """The first live deadline (stale entries are dropped on the way)."""
        while self._heap:
            if self._settle():
                return self._heap[0][0]
        return None

    def _settle(self) -> bool:
        """Is the heap's first entry live? If not, drop it (or push it back to the model's later deadline)."""
        deadline, *key = self._heap[0]
        current = self._deadline_of()(tuple(key))
        if current == deadline:
            return True
        heapq.heappop(self._heap)
        self._armed.pop(tuple(key), None)
        if current is not None and current > deadline:
            self.arm(tuple(key), current)
        return False
