"""``python -m console``: the same as the ``memoria`` console script."""

import sys

from console.cli import main

sys.exit(main())
