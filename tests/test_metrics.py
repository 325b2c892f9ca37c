"""The Prometheus endpoint, scraped over HTTP while outputs of a real coordinator run are folded in."""
from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from streaming.metrics import serve
from tests.test_history import _crash_scenario

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def _scrape(url: str) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode("utf-8")
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) rebalance_tracker_\w+ ", line), line
            continue
        m = SAMPLE.match(line)
        assert m, f"not exposition format: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def _get(samples, name: str, **labels) -> float:
    return samples[(f"rebalance_tracker_{name}", frozenset(labels.items()))]


@pytest.fixture
def endpoint():
    server, url = serve(0)
    yield server.metrics, url
    server.shutdown()
    server.server_close()


def test_values_follow_the_crash_while_the_job_runs(endpoint):
    metrics, url = endpoint
    h, a, b, c = _crash_scenario()
    outputs = h.outputs
    # Batch 1 ends just after c expired: the group is rebalancing.
    cut = next(i for i, o in enumerate(outputs) if o["type"] == "member_expired") + 2
    metrics.update(0, outputs[:cut], {"durationMs": {"triggerExecution": 1_500}, "numInputRows": 40})
    s = _scrape(url)
    assert _get(s, "group_state", group="g", state="PreparingRebalance") == 1
    assert sum(_get(s, "group_state", group="g", state=st) for st in
               ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")) == 1
    assert _get(s, "groups", state="PreparingRebalance") == 1 and _get(s, "groups", state="Stable") == 0
    assert _get(s, "group_members", group="g") == 2
    assert _get(s, "group_expired_members_total", group="g") == 1
    assert _get(s, "group_rebalances_total", group="g") == 1
    assert _get(s, "batch_duration_seconds_count") == 1 and _get(s, "batch_duration_seconds_sum") == 1.5
    assert _get(s, "batch_duration_seconds_bucket", le="1.0") == 0
    assert _get(s, "batch_duration_seconds_bucket", le="2.5") == 1
    assert _get(s, "input_rows_total") == 40

    # Batch 2: the rest of the round, plus an invalid event the job dead-lettered.
    metrics.update(1, outputs[cut:] + [{"type": "dead_letter", "group_id": "g", "ts": h.now, "reason": "bad"}])
    s = _scrape(url)
    rebalances = [o for o in outputs if o["type"] == "rebalance"]
    assert _get(s, "group_state", group="g", state="Stable") == 1
    assert _get(s, "group_state", group="g", state="PreparingRebalance") == 0
    assert _get(s, "group_generation", group="g") == rebalances[-1]["generation"] == 2
    assert _get(s, "group_members", group="g") == 2
    assert _get(s, "group_rebalances_total", group="g") == 2
    assert _get(s, "group_rebalance_triggers_total", group="g", trigger="join") == 1
    assert _get(s, "group_rebalance_triggers_total", group="g", trigger="expiry") == 1
    assert _get(s, "group_partitions_moved_total", group="g") == sum(r["partitions_moved"] for r in rebalances) > 0
    durations = [r["duration_ms"] / 1000 for r in rebalances]
    assert _get(s, "group_rebalance_duration_seconds_count", group="g") == 2
    assert _get(s, "group_rebalance_duration_seconds_sum", group="g") == pytest.approx(sum(durations))
    for le in ("0.1", "1.0", "10.0", "+Inf"):
        bound = float("inf") if le == "+Inf" else float(le)
        assert _get(s, "group_rebalance_duration_seconds_bucket", group="g", le=le) == \
            sum(d <= bound for d in durations)
    assert _get(s, "dead_lettered_events_total") == 1
    assert _get(s, "batches_total") == 2 and _get(s, "last_batch_id") == 1


def test_groups_are_counted_per_state_and_deletion_empties_a_group(endpoint):
    metrics, url = endpoint
    h, a, b, _ = _crash_scenario()
    metrics.update(0, h.outputs)
    h.tick(1_000)
    out = h.send(type="leave", member_id=a, group_instance_id=None)
    out += h.send(type="leave", member_id=b, group_instance_id=None)
    metrics.update(1, out)
    s = _scrape(url)
    assert _get(s, "group_state", group="g", state="Empty") == 1 and _get(s, "group_members", group="g") == 0
    assert _get(s, "group_expired_members_total", group="g") == 1       # leaving is not expiring
    out = h.send(type="delete_group")
    metrics.update(2, out + [{"type": "state_change", "group_id": "other", "ts": h.now, "from": "Empty",
                              "to": "PreparingRebalance", "generation": 0, "reason": "join"}])
    s = _scrape(url)
    assert _get(s, "group_state", group="g", state="Dead") == 1
    assert _get(s, "groups", state="Dead") == 1 and _get(s, "groups", state="PreparingRebalance") == 1
    assert _get(s, "groups", state="Stable") == 0


def test_label_values_are_escaped_and_other_paths_are_404(endpoint):
    metrics, url = endpoint
    metrics.update(0, [{"type": "member_joined", "group_id": 'we"ird\\group', "ts": 1, "member_id": "m"}])
    s = _scrape(url)
    assert _get(s, "group_members", group='we\\"ird\\\\group') == 1
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url.replace("/metrics", "/nope"), timeout=5)
    assert err.value.code == 404
