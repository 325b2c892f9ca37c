"""``rebalance-tracker`` command line: one subcommand per job, each implemented in its own module."""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module with a main(argv) function, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("streaming.cli.demo", "bundled broker + simulated groups + the tracker with a live table"),
    "run": ("streaming.cli.run", "run the streaming tracker against an event topic"),
    "simulate": ("streaming.feeds.publish", "publish simulated consumer-group events to a topic or file"),
    "outputs": ("streaming.views.outputs_topic", "the outputs topic as JSON lines, every output once (for report)"),
    "report": ("streaming.views.report", "HTML (and PNG) timeline of a group's rebalances"),
    "replay": ("streaming.views.replay", "what-if: replay a recorded feed through each assignor, side by side"),
    "cluster-feed": ("streaming.feeds.cluster_feed", "turn a cluster's __consumer_offsets into tracker events"),
    "offsets": ("offsets_store.describe", "show a group's committed offsets and lag from the store"),
    "broker": ("streaming.local.broker", "run the bundled Kafka-compatible broker (Tansu) on loopback"),
    "spark-cluster": ("streaming.local.spark_cluster", "run a Spark standalone master and workers on loopback"),
    "kafka-connector": ("streaming.spark.connector", "print Spark's Kafka connector jars, for spark-submit --jars"),
}


def usage() -> str:
    lines = ["usage: rebalance-tracker COMMAND [options]", "", "commands:"]
    width = max(map(len, COMMANDS))
    lines += [f"  {name:<{width}} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run 'rebalance-tracker COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"rebalance-tracker: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
