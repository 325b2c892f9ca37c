"""Server-side assignor lookup, under the names Kafka's broker takes in ``group.consumer.assignors``.

A separate namespace from ``assignors.get_assignor``: client-side names are the protocol names consumers
advertise in JoinGroup (``range``, ``roundrobin``, ``sticky``, ``cooperative-sticky``, ...), server-side names are
the broker's (``uniform``, ``range``).  Both ``range``s exist: ``get_assignor("range")`` is the client-side
RangeAssignor, ``get_server_assignor("range")`` the group coordinator's.  Kafka's class names are accepted too, as
the broker config accepts them (``org.apache.kafka.coordinator.group.assignor.UniformAssignor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .range import RangeAssignor
from .uniform import UniformAssignor

ServerAssignorFactory = Callable[[], object]

_SERVER_REGISTRY: dict[str, ServerAssignorFactory] = {}
_ALIASES: dict[str, str] = {}
KAFKA_PACKAGE = "org.apache.kafka.coordinator.group.assignor."


def register_server_assignor(
    factory: ServerAssignorFactory, name: str | None = None, *, aliases: Iterable[str] = (), replace: bool = False
) -> ServerAssignorFactory:
    """Make ``get_server_assignor(name)`` (and each alias) return ``factory()``; ``name`` defaults to
    ``factory.name``."""
    key = name if name is not None else getattr(factory, "name", None)
    if not key or not isinstance(key, str):
        raise ValueError("a server-side assignor needs a non-empty string name")
    if key in _SERVER_REGISTRY and not replace and _SERVER_REGISTRY[key] is not factory:
        raise ValueError(f"server-side assignor {key!r} is already registered")
    _SERVER_REGISTRY[key] = factory
    for alias in aliases:
        _ALIASES[alias] = key
    return factory


def get_server_assignor(name: str):
    """A fresh server-side assignor for a ``group.consumer.assignors`` name, e.g. ``"uniform"`` or ``"range"``."""
    key = _ALIASES.get(name, name)
    try:
        factory = _SERVER_REGISTRY[key]
    except KeyError:
        raise KeyError(
            f"unknown server-side assignor {name!r}; available: {', '.join(available_server_assignors())}"
        ) from None
    return factory()


def available_server_assignors() -> list[str]:
    return sorted(_SERVER_REGISTRY)


register_server_assignor(UniformAssignor, aliases=(KAFKA_PACKAGE + "UniformAssignor",))
register_server_assignor(RangeAssignor, aliases=(KAFKA_PACKAGE + "RangeAssignor",))
