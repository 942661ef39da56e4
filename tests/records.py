"""One way to build a MemoryRecord in tests: sensible defaults, override what the test is about."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from storage.records import MemoryRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def memory_record(memory_id: str, **overrides: Any) -> MemoryRecord:
    fields: dict[str, Any] = dict(
        id=memory_id,
        org_id="o",
        project_id="p",
        agent_id="a",
        session_id="s",
        episode_id=None,
        kind="fact",
        content=memory_id,
        content_hash=memory_id,
        tags=(),
        protection_tier="standard",
        status="active",
        replaced_by=None,
        weight=1.0,
        created_at=NOW,
        updated_at=NOW,
        embedder="e",
    )
    fields.update(overrides)
    return MemoryRecord(**fields)
