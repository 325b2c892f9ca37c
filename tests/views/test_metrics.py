"""The Prometheus endpoint, scraped over HTTP while outputs of a real coordinator run are folded in, and read back
with Prometheus' own text parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streaming.coordinator.figures import spans_of
from streaming.views.metrics import serve
from tests.views.test_history import _crash_scenario

COUNTERS = (
    "group_rebalances",
    "group_rebalance_triggers",
    "group_expired_members",
    "group_partitions_moved",
    "dead_lettered_events",
    "batches",
    "input_rows",
)
GAUGES = ("groups", "group_state", "group_members", "group_generation", "last_batch_id")
HISTOGRAMS = ("group_rebalance_duration_seconds", "group_partition_unavailability_seconds", "batch_duration_seconds")


def scrape(url: str) -> dict:
    """{family name: family} of one scrape, parsed as Prometheus parses it."""
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode("utf-8")
    return {family.name: family for family in text_string_to_metric_families(text)}


def _get(families: dict, name: str, **labels) -> float:
    """The value of sample ``rebalance_tracker_<name>`` with exactly ``labels``."""
    sample_name = f"rebalance_tracker_{name}"
    for family in families.values():
        for sample in family.samples:
            if sample.name == sample_name and sample.labels == labels:
                return sample.value
    raise KeyError(f"{sample_name}{labels}")


def test_values_follow_the_crash_while_the_job_runs(endpoint):
    metrics, url = endpoint
    h, a, b, c = _crash_scenario()
    outputs = h.outputs
    # Batch 1 ends just after c expired: the group is rebalancing.
    cut = next(i for i, o in enumerate(outputs) if o["type"] == "member_expired") + 2
    metrics.update(0, outputs[:cut], {"durationMs": {"triggerExecution": 1_500}, "numInputRows": 40})
    s = scrape(url)
    assert _get(s, "group_state", group="g", state="PreparingRebalance") == 1
    assert (
        sum(
            _get(s, "group_state", group="g", state=st)
            for st in ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
        )
        == 1
    )
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
    s = scrape(url)
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
        assert _get(s, "group_rebalance_duration_seconds_bucket", group="g", le=le) == sum(
            d <= bound for d in durations
        )
    # Each partition a rebalance gave a new owner: its time without one while the group had members.
    unavailable = [span.unavailable_ms / 1000 for r in rebalances for span in spans_of(r)]
    assert unavailable and _get(s, "group_partition_unavailability_seconds_count", group="g") == len(unavailable)
    assert _get(s, "group_partition_unavailability_seconds_sum", group="g") == pytest.approx(sum(unavailable))
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
    s = scrape(url)
    assert _get(s, "group_state", group="g", state="Empty") == 1 and _get(s, "group_members", group="g") == 0
    assert _get(s, "group_expired_members_total", group="g") == 1  # leaving is not expiring
    out = h.send(type="delete_group")
    metrics.update(
        2,
        out
        + [
            {
                "type": "state_change",
                "group_id": "other",
                "ts": h.now,
                "from": "Empty",
                "to": "PreparingRebalance",
                "generation": 0,
                "reason": "join",
            }
        ],
    )
    s = scrape(url)
    assert _get(s, "group_state", group="g", state="Dead") == 1
    assert _get(s, "groups", state="Dead") == 1 and _get(s, "groups", state="PreparingRebalance") == 1
    assert _get(s, "groups", state="Stable") == 0


def test_label_values_are_escaped(endpoint):
    metrics, url = endpoint
    metrics.update(0, [{"type": "member_joined", "group_id": 'we"ird\\group\nx', "ts": 1, "member_id": "m"}])
    s = scrape(url)
    assert _get(s, "group_members", group='we"ird\\group\nx') == 1


def test_types_buckets_and_standard_collectors(endpoint):
    metrics, url = endpoint
    h, *_ = _crash_scenario()
    metrics.update(0, h.outputs, {"durationMs": {"triggerExecution": 80}, "numInputRows": 3})
    s = scrape(url)
    for name in COUNTERS:
        assert s[f"rebalance_tracker_{name}"].type == "counter", name
        assert any(x.name == f"rebalance_tracker_{name}_total" for x in s[f"rebalance_tracker_{name}"].samples)
    for name in GAUGES:
        assert s[f"rebalance_tracker_{name}"].type == "gauge", name
    for name in HISTOGRAMS:
        assert s[f"rebalance_tracker_{name}"].type == "histogram", name
    from streaming.views.metrics import BATCH_BUCKETS, REBALANCE_BUCKETS

    def bounds(name, **labels):
        return [
            float(x.labels["le"])
            for x in s[f"rebalance_tracker_{name}"].samples
            if x.name.endswith("_bucket") and {k: v for k, v in x.labels.items() if k != "le"} == labels
        ]

    assert bounds("group_rebalance_duration_seconds", group="g") == [*REBALANCE_BUCKETS, float("inf")]
    assert bounds("batch_duration_seconds") == [*BATCH_BUCKETS, float("inf")]
    # The standard process and Python collectors come with the scrape.
    assert "process_cpu_seconds" in s and "python_info" in s and "python_gc_collections" in s


def test_served_on_loopback_by_default():
    server, url = serve(0)
    try:
        assert server.server_address[0] == "127.0.0.1" and url.startswith("http://127.0.0.1:")
    finally:
        server.shutdown()
        server.server_close()


def test_groups_rebuilt_from_the_store_and_their_gaps_are_counted(endpoint):
    from tests.core.test_restore_rule import restore_story

    metrics, url = endpoint
    metrics.update(0, restore_story())
    families = scrape(url)
    assert _get(families, "groups_restored_total") == 2 and _get(families, "restore_gaps_total") == 1
    assert (
        _get(families, "group_generation", group="quiet") == 1 and _get(families, "group_members", group="quiet") == 2
    )
    assert _get(families, "groups", state="Stable") == 2


def test_lag_per_group_and_partition_with_bounded_series_and_rebalance_costs(endpoint):
    from tests.core.test_lag import commit, rebalance, sample

    metrics, url = endpoint
    metrics.max_partition_series = 2
    outputs = []
    for s in range(0, 17):
        for p in range(3):  # t-p's consumer stops committing at 4 s, 7 s, 10 s: the last least behind
            if s <= 4 + 3 * p:
                outputs.append(commit(s * 1_000, s * 10, partition=p))
            outputs.append(sample(s * 1_000, s * 10, partition=p))
        if s == 12:
            outputs.append(rebalance(12_500, [["t", 2, 10_000, 12_500, 0]]))
    outputs += [commit(16_500, 160, partition=2), sample(17_000, 170, partition=2)]
    metrics.update(0, outputs)
    families = scrape(url)
    assert _get(families, "group_lag_records", group="g") == 120  # t-0: 160 - 40
    assert _get(families, "group_lag_seconds", group="g") == pytest.approx(11.9)  # offset 40 came at 4.1 s
    assert _get(families, "partition_lag_records", group="g", topic="t", partition="1") == 90
    assert _get(families, "partition_lag_seconds", group="g", topic="t", partition="1") == pytest.approx(8.9)
    with pytest.raises(KeyError):  # the third partition is over the bound of 2 series
        _get(families, "partition_lag_records", group="g", topic="t", partition="2")
    assert _get(families, "group_rebalance_lag_records_total", group="g") == 65  # log end 165 at 16.5 s
    assert _get(families, "group_rebalance_lag_seconds_count", group="g") == 1
    assert _get(families, "group_rebalance_lag_seconds_sum", group="g") == pytest.approx(6.4)
