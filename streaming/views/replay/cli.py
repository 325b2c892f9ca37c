"""``rebalance-tracker replay``'s command line: read a feed, replay it under the chosen assignors, print the
scores."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Iterable

from streaming.coordinator import parse_event
from streaming.views import terminal
from streaming.views.replay.dispatch import consumer_groups
from streaming.views.replay.scoring import _table, compare, format_table
from streaming.views.replay.settings import DEFAULT_ASSIGNORS, SERVER_ASSIGNORS, check_assignor


def read_feed(path: str, show_progress: bool = False) -> tuple[list[dict], int]:
    """Valid events of a JSON-lines feed (events without ``ts`` cannot be replayed) and how many were dropped;
    ``show_progress``: a progress bar on stderr (plain lines off a terminal)."""
    from streaming.views.report import read_jsonl

    events, dropped = [], 0
    records = read_jsonl(path)
    if show_progress:
        records = terminal.track(records, "reading the feed", terminal.count_lines(path), unit="records")
    for raw in records:
        event, error = parse_event(raw)
        if error is not None or event.get("ts") is None:
            dropped += 1
        else:
            events.append(event)
    return events, dropped


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rebalance-tracker replay",
        description="Replay a recorded event feed under several assignors, side by side.",
    )
    p.add_argument("--feed", required=True, help="JSON-lines event feed (e.g. from 'rebalance-tracker simulate')")
    p.add_argument(
        "--assignor",
        default=None,
        help="comma-separated assignors to compare: client-side ones by protocol name, server-side "
        "(KIP-848) ones as server:uniform, server:range -- the feed replayed under the consumer "
        f"protocol (default: {','.join(DEFAULT_ASSIGNORS)}, and {','.join(SERVER_ASSIGNORS)} too "
        "when the feed has consumer-protocol groups)",
    )
    p.add_argument("--group", default=None, help="score only this group (default: all groups in the feed)")
    p.add_argument("--json", action="store_true", help="print the scores as JSON instead of a table")
    from streaming.views.report import add_coordinator_option

    add_coordinator_option(p)
    return p


def default_assignors(events: Iterable[dict]) -> list[str]:
    """The client-side assignors, and the server-side ones when the feed has consumer-protocol groups: what they
    used, next to what the classic protocol would have done."""
    return list(DEFAULT_ASSIGNORS) + (list(SERVER_ASSIGNORS) if consumer_groups(events) else [])


def main(argv: list[str] | None = None) -> int:
    from streaming.views.report import consumer_config, coordinator_config

    args = build_parser().parse_args(argv)
    names = [a.strip() for a in args.assignor.split(",") if a.strip()] if args.assignor is not None else []
    try:
        config = coordinator_config(args.coordinator_conf)
        group_config = consumer_config(args.coordinator_conf)
        for name in names:
            check_assignor(name)
    except (ValueError, LookupError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    events, dropped = read_feed(args.feed, show_progress=True)
    if dropped:
        print(f"replay: skipped {dropped} invalid or untimed feed records", file=sys.stderr)
    names = names or default_assignors(events)
    scores = compare(events, names, config, args.group, show_progress=True, consumer_config=group_config)
    if args.json:
        print(json.dumps([asdict(s) for s in scores], indent=2))
    elif terminal.is_terminal(sys.stdout):
        header, rows = _table(scores)
        terminal.console().print(terminal.table(header, rows, right=range(1, len(header))))
    else:
        print(format_table(scores))
    return 0
