"""The views of a group through Kafka 4.x's online migration (issue #31): the rebalance history, the report and the
live table show one group before (classic generations), during (a consumer group with members of both protocols:
who speaks which, their epochs) and after the downgrade (classic again), with each switch of protocol shown, nobody
gone who did not leave, and every rebalance counted once. Two inputs: the rolling upgrade and back Apache Kafka 4.4.0
wrote (tests/feeds/kafka44_migration.json, through the cluster feed and the tracker), and one built here request by
request through the tracker's routing."""

from __future__ import annotations

import io
import itertools

import pytest

from streaming.views import report
from streaming.views.history import build_history
from streaming.views.live_view import LiveView
from tests.core.test_consumer_migration import G, Driver, last
from tests.feeds.test_cluster_feed_migration import pairs, run
from tests.views.test_metrics import _get, scrape
from tests.views.test_report import _tables


@pytest.fixture(scope="module")
def kafka44():
    """The tracker's outputs of the recorded run, its group and who is who (the client ids k0, k1, k2, c0, c1)."""
    _, outputs = run(pairs())
    group = outputs[0]["group_id"]
    h = build_history(outputs, group)
    return outputs, group, h, {lane.label.split("-")[0]: lane for lane in h.lanes.values()}


def first(outputs, kind, **fields):
    return next(o for o in outputs if o["type"] == kind and all(o.get(k) == v for k, v in fields.items()))


def test_history_of_a_recorded_rolling_upgrade_and_back(kafka44):
    outputs, _, h, lanes = kafka44
    assert sorted(lanes) == ["c0", "c1", "k0", "k1", "k2"]
    # Which protocol each member speaks: the classic consumers stay classic members of the consumer group.
    assert {name: lane.protocols for name, lane in lanes.items()} == {
        "k0": ["classic"],
        "k1": ["classic"],
        "k2": ["classic"],
        "c0": ["consumer"],
        "c1": ["consumer"],
    }
    # The two switches, each with the members it kept.
    upgrade, downgrade = h.switches
    assert (upgrade.from_protocol, upgrade.to_protocol, upgrade.kind) == ("classic", "consumer", "upgrade")
    assert (downgrade.from_protocol, downgrade.to_protocol, downgrade.kind) == ("consumer", "classic", "downgrade")
    assert upgrade.members == [lanes["k0"].key, lanes["k1"].key]
    assert sorted(downgrade.members) == sorted([lanes["k1"].key, lanes["k2"].key])
    assert h.protocols == ["classic", "consumer", "classic"] and h.mixed
    # Nobody gone who did not leave: one span per member, from its join to its own leave (k1 is in the group from
    # generation 2 through the upgrade and the downgrade to its leave).
    left = {d.lane: d.ts for d in h.departures}
    assert [lane.label.split("-")[0] for lane in (h.lanes[d.lane] for d in h.departures)] == [
        "k0",
        "c0",
        "c1",
        "k1",
        "k2",
    ]
    assert all(d.kind == "left" for d in h.departures)
    for lane in lanes.values():
        assert len(lane.spans) == 1 and lane.spans[0][1] == left[lane.key], lane.label
    assert lanes["k1"].spans[0][0] < upgrade.ts < downgrade.ts < lanes["k1"].spans[0][1]
    # Every rebalance once, in order: classic generations, the consumer group's epochs (it starts at the classic
    # generation, 2: the upgrade bumps nothing), classic generations again from the last epoch.
    rebalances = [o for o in outputs if o["type"] == "rebalance"]
    assert len(h.generations) == len(rebalances) == 8
    assert [(g.generation, g.rebalance_protocol) for g in h.generations] == [
        (1, "eager"),
        (2, "eager"),
        (3, "consumer"),
        (5, "consumer"),
        (6, "consumer"),
        (8, "eager"),
        (9, "eager"),
        (10, "eager"),
    ]
    assert h.generations[5].trigger == "downgrade"
    assert [e for _, e in h.group_epochs] == [2, 3, 4, 5, 6, 7]
    # The first target: c0's join took one partition from k1, against what the classic members were given.
    t3 = h.targets[0]
    assert (t3.epoch, t3.trigger) == (3, "join")
    assert [(c.from_lane, c.to_lane) for c in t3.changes] == [(lanes["k1"].key, lanes["c0"].key)]
    # The classic members' epochs in the consumer group: from the classic generation on.
    assert [e for _, e, _ in h.member_epochs[lanes["k1"].key]] == [2, 3, 5, 6, 7]
    assert [e for _, e, _ in h.member_epochs[lanes["k2"].key]][-1] == 6
    # After the downgrade the consumer protocol's current assignments are no more.
    assert h.current == {} and h.pending_revocation == {}


def test_report_of_a_recorded_rolling_upgrade_and_back(kafka44):
    _, _, h, lanes = kafka44
    html = report.render_html(h)
    tables = _tables(html)
    facts = report.summary(h)
    assert (
        facts["protocol"].startswith("classic → consumer (upgrade at ")
        and " → classic (downgrade at " in (facts["protocol"])
    )
    assert facts["generation at end"] == 10 and "group epoch at end" not in facts
    assert facts["rebalances (generations and epoch bumps to Stable or Empty)"] == 8
    # The rebalances table: classic generations and consumer epochs, each with its protocol.
    assert [(row[0], row[1]) for row in tables["generations"]] == [
        ("1", "eager"),
        ("2", "eager"),
        ("3", "consumer"),
        ("5", "consumer"),
        ("6", "consumer"),
        ("8", "eager"),
        ("9", "eager"),
        ("10", "eager"),
    ]
    # The switches: a table and a dashed line each on the timeline, named under it.
    switches = tables["switches"]
    assert [row[1:4] for row in switches] == [["classic", "consumer", "upgrade"], ["consumer", "classic", "downgrade"]]
    assert switches[0][4] == f"{lanes['k0'].label}, {lanes['k1'].label}"
    svg = report.render_svg(h)
    assert svg.count('class="protocol-switch"') == 2
    assert ">upgrade to consumer<" in svg and ">downgrade to classic<" in svg
    # Band labels: "gen" for the classic generations, "epoch" for the consumer group's.
    assert ">gen 1<" in svg and ">gen 2<" in svg and ">epoch 6<" in svg and ">epoch 1<" not in svg
    # Each member says its protocol, on its lane and in the members table.
    assert f"{lanes['k1'].label} (classic)" in svg and f"{lanes['c0'].label} (consumer)" in svg
    assert {row[0].split("-")[0]: row[1] for row in tables["members"]} == {
        "k0": "classic",
        "k1": "classic",
        "k2": "classic",
        "c0": "consumer",
        "c1": "consumer",
    }
    assert {row[0]: row[5] for row in tables["members"]} == {
        lane.label: report.iso(lane.spans[0][1]) for lane in lanes.values()
    }
    # A group that ends classic has no "target vs current" at its end; its targets are still listed.
    assert "versus" not in tables and [row[0] for row in tables["targets"]] == ["3", "5", "6", "7"]


def batches(outputs):
    """The outputs as the job hands them to the live table: a batch per moment (the cluster feed's writes)."""
    return [list(batch) for _, batch in itertools.groupby(outputs, key=lambda o: o["ts"])]


def test_live_table_through_a_recorded_rolling_upgrade_and_back(kafka44):
    outputs, group, _, _ = kafka44
    upgrade = first(outputs, "protocol_switch", to="consumer")["ts"]
    downgrade = first(outputs, "protocol_switch", to="classic")["ts"]
    view = LiveView(out=io.StringIO(), redraw=False)
    seen = []
    for i, batch in enumerate(batches(outputs)):
        view.update(i, batch)
        g = view.groups[group]
        seen.append(
            (batch[0]["ts"], g.consumer, g.state, g.generation, g.members, len(g.classic_members), g.rebalances)
        )
        if batch[0]["ts"] == upgrade:
            # k0 and k1 stay, now classic members of the consumer group; c0 joined; two classic rebalances so far.
            assert (g.consumer, g.state, g.members, len(g.classic_members), g.rebalances) == (
                True,
                "Reconciling",
                3,
                2,
                2,
            )
            row = next(line for line in view.render().splitlines() if line.startswith(group))
            assert "3 (2 classic, 3 reconciling)" in row  # the classic members at epoch 2 must rejoin for 3
            assert f"{group}: upgraded online to the consumer protocol, 2 members stay" in view.render()
        if batch[0]["ts"] == downgrade:
            # c1, the last consumer-protocol member, left: k1 and k2 form a classic group, which rebalances.
            assert (g.consumer, g.state, g.generation, g.members, g.rebalances) == (
                False,
                "PreparingRebalance",
                7,
                2,
                5,
            )
            assert f"{group}: downgraded online to the classic protocol, 2 members stay" in view.render()
    # Every rebalance counted once, across both switches; the members never dropped to none before the end.
    assert view.groups[group].rebalances == sum(1 for o in outputs if o["type"] == "rebalance") == 8
    assert all(members > 0 for ts, *_, members, _, _ in seen[:-1])
    assert view.groups[group].state == "Empty" and len(view.groups[group].committed) == 4


def test_metrics_through_a_recorded_rolling_upgrade_and_back(kafka44, endpoint):
    """Prometheus' view, scraped after each moment: the members stay counted through both switches, the group's
    series are its protocol's (group_epoch while a consumer group, group_generation otherwise), every rebalance
    counted once."""
    outputs, group, _, _ = kafka44
    metrics, url = endpoint
    upgrade = first(outputs, "protocol_switch", to="consumer")["ts"]
    downgrade = first(outputs, "protocol_switch", to="classic")["ts"]
    for i, batch in enumerate(batches(outputs)):
        metrics.update(i, batch)
        ts = batch[0]["ts"]
        if ts in (upgrade, downgrade):
            families = scrape(url)
            members = _get(families, "group_members", group=group)
            if ts == upgrade:  # k0, k1 and c0
                assert members == 3 and _get(families, "group_epoch", group=group) == 3
                with pytest.raises(KeyError):
                    _get(families, "group_generation", group=group)
            else:  # k1 and k2, a classic group at the last epoch, rebalancing
                assert members == 2 and _get(families, "group_generation", group=group) == 7
                assert _get(families, "group_state", group=group, state="PreparingRebalance") == 1
                with pytest.raises(KeyError):
                    _get(families, "group_epoch", group=group)
    families = scrape(url)
    assert _get(families, "group_rebalances_total", group=group) == 8
    assert _get(families, "group_members", group=group) == 0


# ------------------------------------------------------------------------ an upgrade and back built request by request
class Recorded(Driver):
    """The migration tests' driver, keeping every output the tracker's routing gave."""

    def __init__(self, **settings):
        self.outputs = []
        super().__init__(**settings)

    def send(self, **fields):
        out = super().send(**fields)
        self.outputs += out
        return out

    def later(self, ms: int):
        out = super().later(ms)
        self.outputs += out
        return out


def rejoin(d: Recorded, member_id: str) -> None:
    generation = last(d.join(member_id, client_id=member_id[:2]), "join_response")["generation"]
    d.send(type="sync", member_id=member_id, generation=generation)


def upgrade_and_back(d: Recorded) -> tuple[str, str]:
    """k0, k1 (classic) -> c (consumer protocol) joins: the upgrade -> k0 and k1 rejoin, c takes its partition ->
    k0 leaves -> c leaves: the downgrade -> k1 rejoins alone: a classic generation. The classic members' ids."""
    k0, k1 = d.classic_group("k0", "k1")
    d.later(1_000)
    d.hb("c")
    d.later(100)
    for k in (k0, k1):
        rejoin(d, k)
    epoch = d.consumer.groups[G].group_epoch
    d.later(100)
    given = [o for o in d.outputs if o["type"] == "assignment" and o["member_id"] == "c"][-1]["partitions"]
    d.hb("c", epoch, topic_partitions=given)
    d.later(1_000)
    d.send(type="leave", member_id=k0)
    d.later(1_000)
    d.hb("c", -1)
    d.later(100)
    rejoin(d, k1)
    return k0, k1


def test_views_of_an_upgrade_and_back_built_request_by_request():
    """upgrade_and_back, request by request."""
    d = Recorded()
    k0, k1 = upgrade_and_back(d)
    assert d.classic.groups[G].state.value == "Stable"

    h = build_history(d.outputs, G)
    assert [(s.from_protocol, s.to_protocol, s.kind) for s in h.switches] == [
        ("classic", "consumer", "upgrade"),
        ("consumer", "classic", "downgrade"),
    ]
    assert {lane.key: lane.protocols for lane in h.lanes.values()} == {
        k0: ["classic"],
        k1: ["classic"],
        "c": ["consumer"],
    }
    assert [d_.member_id for d_ in h.departures] == [k0, "c"]
    assert [len(lane.spans) for lane in h.lanes.values()] == [1, 1, 1]
    assert h.lanes[k1].spans[0][1] is None  # k1 never left
    protocols = [g.rebalance_protocol for g in h.generations]
    assert protocols == ["eager", "consumer", "eager"] and h.generations[-1].trigger == "downgrade"
    assert len(h.generations) == sum(1 for o in d.outputs if o["type"] == "rebalance")
    assert h.generations[-1].owners == {k1: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]}

    view = LiveView(out=io.StringIO(), redraw=False)
    view.update(0, d.outputs)
    g = view.groups[G]
    assert (g.consumer, g.state, g.members, g.rebalances) == (False, "Stable", 1, len(h.generations))
    # The report renders it, and a part of the history cut after the upgrade keeps the downgrade.
    assert report.render_html(h).count('class="protocol-switch"') == 2
    later = h.since(h.switches[0].ts + 1)
    assert [s.kind for s in later.switches] == ["downgrade"]
    assert "(classic)" in report.render_svg(later)
