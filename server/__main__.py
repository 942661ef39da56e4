"""``python -m server``: the same as the ``memoria`` console script."""

import sys

from server.cli import main

sys.exit(main())
