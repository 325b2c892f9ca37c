"""``rebalance-tracker replay``: moved into a package; the next commit splits server.py into its modules."""
from streaming.views.replay.server import *  # noqa: F401,F403
