"""Name -> assignor lookup.  Names are the protocol names consumers advertise (``partition.assignment.strategy``).

Server-side (KIP-848) assignors have their own lookup under the broker's names:
``assignors.server.get_server_assignor``.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import Assignor
from .cooperative_sticky import CooperativeStickyAssignor
from .priority_failover import PriorityFailoverAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import StickyAssignor
from .template import TemplateAssignor

AssignorFactory = Callable[[], Assignor]

_REGISTRY: dict[str, AssignorFactory] = {}


def register_assignor(factory: AssignorFactory, name: str | None = None, *, replace: bool = False) -> AssignorFactory:
    """Make ``get_assignor(name)`` return ``factory()``.  ``factory`` is usually the class itself.

    ``name`` defaults to ``factory.name``.  Usable as a class decorator.  Re-registering a name raises unless
    ``replace=True``, so a typo cannot silently shadow a built-in assignor.
    """
    key = name if name is not None else getattr(factory, "name", None)
    if not key or not isinstance(key, str):
        raise ValueError("an assignor needs a non-empty string name")
    if key in _REGISTRY and not replace and _REGISTRY[key] is not factory:
        raise ValueError(f"assignor {key!r} is already registered")
    _REGISTRY[key] = factory
    return factory


def get_assignor(name: str) -> Assignor:
    """A fresh assignor for a protocol name, e.g. ``"range"`` or ``"cooperative-sticky"``."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        from .server import available_server_assignors

        hint = ""
        if name in available_server_assignors():
            hint = f" ({name!r} is a server-side assignor: assignors.get_server_assignor({name!r}))"
        raise KeyError(f"unknown assignor {name!r}; available: {', '.join(available_assignors())}{hint}") from None
    return factory()


def available_assignors() -> list[str]:
    return sorted(_REGISTRY)


for _cls in (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    CooperativeStickyAssignor,
    PriorityFailoverAssignor,
    TemplateAssignor,
):
    register_assignor(_cls)
