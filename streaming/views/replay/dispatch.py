"""One feed under one assignor: :func:`replay_outputs` splits the feed into its classic and its consumer-protocol
groups and hands each part to the replayer for its protocol and the assignor's."""

from __future__ import annotations

import heapq
from typing import Callable, Iterable

from streaming.coordinator import CoordinatorConfig
from streaming.coordinator.consumer import ConsumerGroupConfig
from streaming.views.replay.classic import _Replayer
from streaming.coordinator.routing import Configs
from streaming.views.replay.mixed import _MixedReplayer, classic_stimuli
from streaming.views.replay.observed import client_stimuli, observed_groups
from streaming.views.replay.consumer_feed import _ConsumerFeedClassicReplayer, _ConsumerFeedServerReplayer
from streaming.views.replay.server import _ConsumerReplayer
from streaming.views.replay.settings import _chosen, is_server_assignor
from streaming.views.replay.stimuli import consumer_stimuli


def consumer_groups(events: Iterable[dict]) -> set[str]:
    """The groups of a feed that speak the consumer protocol (KIP-848): those with ``consumer_heartbeat`` events."""
    return {e.get("group_id") or "" for e in events if e["type"] == "consumer_heartbeat"}


CLASSIC_REQUESTS = ("join", "sync", "heartbeat", "leave")


def mixed_groups(events: Iterable[dict]) -> set[str]:
    """The consumer-protocol groups of a feed that also have classic requests: members of both protocols (Kafka
    4.x's online migration). Both kinds of members are replayed, through the tracker's routing (``mixed.py``)."""
    events = list(events)
    classic = {e.get("group_id") or "" for e in events if e["type"] in CLASSIC_REQUESTS}
    return consumer_groups(events) & classic


def split_feed(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the classic groups' events, the consumer-protocol groups' events); topic metadata that names no group goes to
    both."""
    consumer = consumer_groups(events)
    if not consumer:
        return events, []
    classic, kip848 = [], []
    for e in events:
        gid = e.get("group_id")
        if e["type"] == "topic_metadata" and not gid:
            classic.append(e)
            kip848.append(e)
        elif (gid or "") in consumer:
            kip848.append(e)
        else:
            classic.append(e)
    return classic, kip848


def replay_outputs(
    events: Iterable[dict],
    assignor: str,
    config: CoordinatorConfig | None = None,
    on_progress: Callable[[int], None] | None = None,
    consumer_config: ConsumerGroupConfig | None = None,
) -> list[dict]:
    """Coordinator outputs of ``events`` (validated feed events with ``ts``) replayed under ``assignor``;
    ``on_progress(n)`` hears how many recorded events have been replayed, now and then. A ``server:NAME`` assignor
    replays the feed under the consumer protocol (see the package's docstring). The feed's classic groups and its
    consumer-protocol groups (``consumer_config``: their group.consumer.* settings, Kafka's defaults otherwise) are
    replayed apart -- groups do not interact -- and their outputs merged in time order."""
    feed = sorted(events, key=lambda e: e["ts"])  # stable: equal timestamps keep feed order
    classic, kip848 = split_feed(feed)
    runs = []
    if not kip848 or any(e["type"] != "topic_metadata" for e in classic):
        runs.append(_replay_classic_feed(classic, assignor, config, on_progress))
    if kip848:
        shifted = None if on_progress is None else (lambda n, done=len(classic): on_progress(done + n))  # noqa: B008 (binds the count now)
        runs.append(_replay_consumer_feed(kip848, assignor, config, consumer_config or ConsumerGroupConfig(), shifted))
    if on_progress is not None:
        on_progress(len(feed))
    return runs[0] if len(runs) == 1 else list(heapq.merge(*runs, key=lambda o: o["ts"]))


def _replay_classic_feed(
    feed: list[dict], assignor: str, config: CoordinatorConfig | None, on_progress: Callable[[int], None] | None
) -> list[dict]:
    name, cooperative = _chosen(assignor)
    observed = observed_groups(feed)  # from a cluster's records: the broker's answers, no heartbeats
    if observed:
        feed = client_stimuli(feed, observed)
    if is_server_assignor(assignor):
        return _ConsumerReplayer(name, config).run(feed, on_progress)
    return _Replayer(name, cooperative, config, observed).run(feed, on_progress)


def _replay_consumer_feed(
    feed: list[dict],
    assignor: str,
    config: CoordinatorConfig | None,
    group_config: ConsumerGroupConfig,
    on_progress: Callable[[int], None] | None,
) -> list[dict]:
    name, cooperative = _chosen(assignor)
    mixed = mixed_groups(feed)
    if mixed:  # groups with members of both protocols: through the tracker's routing, apart from the others
        both = [e for e in feed if (e.get("group_id") or "") in mixed or _for_every_group(e)]
        rest = [e for e in feed if (e.get("group_id") or "") not in mixed]
        runs = [_replay_mixed_groups(both, assignor, config, group_config, on_progress)]
        if any(not _for_every_group(e) for e in rest):
            runs.append(_replay_consumer_feed(rest, assignor, config, group_config, None))
        return runs[0] if len(runs) == 1 else list(heapq.merge(*runs, key=lambda o: o["ts"]))
    stimuli = consumer_stimuli(feed, group_config)
    if is_server_assignor(assignor):
        return _ConsumerFeedServerReplayer(name, stimuli, group_config).run(on_progress)
    return _ConsumerFeedClassicReplayer(
        name, cooperative, config, stimuli, group_config.group_consumer_session_timeout_ms
    ).run(on_progress)


def _for_every_group(e: dict) -> bool:
    return e["type"] == "topic_metadata" and not e.get("group_id")


def _replay_mixed_groups(
    feed: list[dict],
    assignor: str,
    config: CoordinatorConfig | None,
    group_config: ConsumerGroupConfig,
    on_progress: Callable[[int], None] | None,
) -> list[dict]:
    name, _ = _chosen(assignor)
    stimuli = consumer_stimuli(feed, group_config)
    configs = Configs(config or CoordinatorConfig(), group_config)
    return _MixedReplayer(name, is_server_assignor(assignor), configs, stimuli, classic_stimuli(feed)).run(on_progress)
