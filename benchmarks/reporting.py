"""Where benchmark reports go, and how they are written."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def write_json(path: Path, report: Any) -> None:
    """Write ``report`` as indented JSON to ``path`` (parents created) and say where on stderr."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}", file=sys.stderr)
