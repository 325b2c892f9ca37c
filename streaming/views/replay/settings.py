"""The replay's fixed settings: which assignors it compares, how a server-side (KIP-848) one is named, and how fast
a simulated client answers its coordinator."""

from __future__ import annotations

DEFAULT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
# Also compared by default when the feed has consumer-protocol groups: their own protocol's assignors.
SERVER_ASSIGNORS = ("server:uniform", "server:range")
REACTION_MS = 5  # how long a simulated client takes to answer the coordinator
SERVER_PREFIX = "server:"  # server:uniform, server:range -- the KIP-848 assignors, replayed under that protocol


def is_server_assignor(name: str) -> bool:
    return name.startswith(SERVER_PREFIX)


def check_assignor(name: str) -> None:
    """LookupError for a name ``replay`` cannot run (with a hint when a server-side name lacks its prefix)."""
    from assignors import get_assignor
    from assignors.server import get_server_assignor

    if is_server_assignor(name):
        get_server_assignor(name[len(SERVER_PREFIX) :])
        return
    try:
        get_assignor(name)
    except KeyError:
        try:
            get_server_assignor(name)
        except KeyError:
            raise
        raise KeyError(f"{name!r} is a server-side (KIP-848) assignor: name it {SERVER_PREFIX}{name}") from None


def _chosen(assignor: str) -> tuple[str, bool]:
    """The assignor's own name and whether the replay runs it with the cooperative protocol (a server-side one:
    its name without the prefix)."""
    if is_server_assignor(assignor):
        from assignors.server import get_server_assignor

        return get_server_assignor(assignor[len(SERVER_PREFIX) :]).name, False
    from assignors import get_assignor

    chosen = get_assignor(assignor)
    # A cooperative-capable assignor is run the way Kafka's clients use it: with the cooperative protocol.
    return chosen.name, "cooperative" in chosen.supported_protocols
