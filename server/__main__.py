"""``python -m server [serve] [--http HOST:PORT] [--db URI]``: the server alone (``memoria`` has every command)."""

import sys

from server.serve import main

sys.exit(main())
