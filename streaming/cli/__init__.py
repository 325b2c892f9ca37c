"""Command-line entry points: ``rebalance-tracker`` and its subcommands."""
