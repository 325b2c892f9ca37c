"""A feed through the pure model as a job that loses its checkpoint runs it: the first events, then the groups rebuilt
from the store the first part wrote (``streaming/spark/restore.py``), then the rest of the feed."""

from __future__ import annotations

from dataclasses import dataclass

from offsets_store.store import STORE_TYPES
from streaming.coordinator.events import parse_event
from streaming.coordinator.routing import Configs, GroupModel, GroupModels
from streaming.spark.restore import group_states, load_time


def play(models: GroupModels, events: list[dict]) -> list[dict]:
    """Events in feed order, each group's timers due before an event fired first (``routing.run_feed``)."""
    outputs = []
    for raw in events:
        event, error = parse_event(raw)
        assert error is None, error
        if event.get("ts") is not None:
            outputs += models.advance(event["ts"] - 1)
        outputs += models.handle(event)
    return outputs


@dataclass
class Restart:
    first: list[dict]  # outputs before the checkpoint was lost
    second: list[dict]  # outputs of the groups rebuilt from the store, and of the rest of the feed
    at_cut: GroupModels  # the lost state: the models as they stood when the checkpoint was lost
    models: GroupModels  # the rebuilt models at the end


def lose_checkpoint(events: list[dict], cut: int, props: dict | None = None, end_ms: int | None = None) -> Restart:
    """``events[:cut]``, the checkpoint lost, the store's groups rebuilt at the feed's time there (event time), then
    ``events[cut:]`` and, with ``end_ms``, every timer due by then."""
    configs = Configs.from_properties(props or {})
    at_cut = GroupModels(configs)
    first = play(at_cut, events[:cut])
    records = [o for o in first if o["type"] in STORE_TYPES]
    now = load_time(records, True, 0, max(e["ts"] for e in events[:cut]))
    models = GroupModels(configs)
    models.models = {
        g: GroupModel(configs, GroupModel.from_bytes(state, configs).model, models.topics)
        for g, state in group_states(records, now, configs).items()
    }
    second = [o for m in models.models.values() for o in m.announcements()]  # each rebuilt group's first step
    second += play(models, events[cut:])
    if end_ms is not None:
        second += models.advance(end_ms)
    return Restart(first, second, at_cut, models)
