"""Views of the tracker's history: rebalance history, HTML report, assignor replay, metrics, the live table."""
