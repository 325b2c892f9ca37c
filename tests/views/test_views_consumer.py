"""Prometheus metrics and the live table on consumer-protocol (KIP-848) groups, from the real coordinator's outputs
of the scripted feed of test_history_consumer (a joins, b joins, a gives up two partitions, a crashes)."""

from __future__ import annotations

import io

import pytest

from streaming.views import report
from streaming.views.history import coordinator_outputs
from streaming.views.live_view import LiveView
from streaming.views.metrics import CONSUMER_STATES
from tests.views.test_history_consumer import CONFIG, FEED, START
from tests.views.test_metrics import _get, scrape


def _outputs_until(ms: int) -> list[dict]:
    outputs, _ = coordinator_outputs([e for e in FEED if e["ts"] <= START + ms], None, report.consumer_config(CONFIG))
    return outputs


def test_metrics_show_epochs_members_and_reconciling_members(endpoint):
    metrics, url = endpoint
    # At 2 s: b joined (epoch 2), a was asked to give up two partitions and has not yet: both reconciling.
    first = _outputs_until(2_000)
    metrics.update(0, first)
    s = scrape(url)
    assert _get(s, "group_state", group="g", state="Reconciling") == 1
    assert sum(_get(s, "group_state", group="g", state=st) for st in CONSUMER_STATES) == 1
    assert _get(s, "groups", state="Reconciling") == 1
    assert _get(s, "group_epoch", group="g") == 2 and _get(s, "group_assignment_epoch", group="g") == 2
    assert _get(s, "group_members", group="g") == 2 and _get(s, "group_reconciling_members", group="g") == 2
    assert _get(s, "group_rebalances_total", group="g") == 1  # the first epoch was Stable at once
    with pytest.raises(KeyError):
        _get(s, "group_generation", group="g")  # no generations in this protocol
    # The rest: a acknowledges, b takes its partitions (Stable, epoch 2), a crashes and is fenced, b takes all.
    rest = _outputs_until(20_000)[len(first) :]
    metrics.update(1, rest)
    s = scrape(url)
    assert _get(s, "group_state", group="g", state="Stable") == 1
    assert _get(s, "group_epoch", group="g") == 3 and _get(s, "group_reconciling_members", group="g") == 0
    assert _get(s, "group_members", group="g") == 1 and _get(s, "group_expired_members_total", group="g") == 1
    assert _get(s, "group_rebalances_total", group="g") == 3
    assert _get(s, "group_rebalance_triggers_total", group="g", trigger="expiry") == 1
    assert _get(s, "group_partitions_moved_total", group="g") == 4
    assert _get(s, "group_rebalance_duration_seconds_sum", group="g") == pytest.approx(2.0 + 0.9)


def test_the_live_table_shows_epoch_protocol_and_reconciling_members():
    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, _outputs_until(2_000))
    g = view.groups["g"]
    assert (g.consumer, g.state, g.generation, g.members, g.reconciling) == (True, "Reconciling", 2, 2, 2)
    row = next(line for line in view.render().splitlines() if line.startswith("g "))
    assert row.split()[:7] == ["g", "Reconciling", "e2", "consumer/uniform", "2", "(2", "reconciling)"]
    view.update(1, _outputs_until(20_000)[len(_outputs_until(2_000)) :])
    g = view.groups["g"]
    assert (g.state, g.generation, g.members, g.reconciling, g.rebalances, g.expired) == ("Stable", 3, 1, 0, 3, 1)
    text = view.render()
    row = next(line for line in text.splitlines() if line.startswith("g "))
    assert row.split()[:9] == ["g", "Stable", "e3", "consumer/uniform", "1", "3", "22:13:33", "expiry", "0.9s"]
    assert "GEN/EPOCH" in text and "g: epoch 3 stable (expiry), 1 member" in text
