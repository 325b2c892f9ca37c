import sys

from streaming.views.replay import main

sys.exit(main())
