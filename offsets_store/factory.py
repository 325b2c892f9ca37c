"""``open_store``: a store URL to a backend. Kept apart from the base class in ``store.py`` so that the backends,
which build on that class, and the factory, which knows the backends, import in one direction only."""

from __future__ import annotations

from offsets_store.kafka_store import KafkaStore
from offsets_store.sqlite_store import SqliteStore
from offsets_store.store import Store

DEFAULT_STORE = "sqlite:data/offsets.db"  # where the commands keep the store unless told


def open_store(url: str, client: dict | None = None) -> Store:
    """``sqlite:PATH`` (embedded default) or ``kafka:BOOTSTRAP/TOPIC[?partitions=50]``; ``client``: kafka-python
    settings for a Kafka store (see ``streaming.kafka_client.kafka_conf``)."""
    scheme, _, rest = url.partition(":")
    if scheme == "sqlite" and rest:
        return SqliteStore(rest)
    if scheme == "kafka" and "/" in rest:
        target, _, query = rest.partition("?")
        bootstrap, _, topic = target.rpartition("/")
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        return KafkaStore(bootstrap, topic, partitions=int(params.get("partitions", 50)), client=client)
    raise ValueError(f"store must be sqlite:PATH or kafka:BOOTSTRAP/TOPIC, not {url!r}")


def store_bootstrap(url: str | None) -> str | None:
    """The broker a ``kafka:`` store lives on (None for any other store)."""
    scheme, _, rest = (url or "").partition(":")
    return rest.partition("?")[0].rpartition("/")[0] or None if scheme == "kafka" else None
