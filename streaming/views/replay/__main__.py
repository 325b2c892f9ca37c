"""``python -m streaming.views.replay``: the replay's command line."""

import sys

from streaming.views.replay.cli import main

sys.exit(main())
