"""What the session-end hook reads of a Claude Code transcript: what the agent wrote after a session's
first recall (its messages and the input of its tool calls, memoria's own calls left out), and so which
memories of the session's contexts it used (``retrieval.usage``). The hook names those in
``helpful_ids``; without a transcript, or with nothing used, it reports as before.

A transcript is JSON Lines; the lines of ``"type": "assistant"`` carry a ``message`` whose ``content`` is
text or a list of blocks (``text``, ``tool_use`` with a ``name`` and an ``input``), and a ``timestamp``.
Anything else, or a line that does not parse, is skipped: the hook never fails the session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from retrieval.outcomes import CreditPolicy
from retrieval.usage import ShownText, used_memories
from storage.records import Scope
from tools.common import Runtime
from writing.outcomes import shown_contexts

OWN_TOOLS = "mcp__memoria__"  # how Claude Code names memoria's tools: their input is not the agent's work


def agent_output(path: str, since: datetime) -> str:
    """What the agent wrote at or after ``since``: its text and its tool calls' input (JSON), one per line."""
    return "\n".join(_written(path, since))


def _written(path: str, since: datetime) -> Iterator[str]:
    try:
        with open(path, encoding="utf-8") as transcript:
            for line in transcript:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(entry, dict) or entry.get("type") != "assistant":
                    continue
                moment = _moment(entry.get("timestamp"))
                if moment is None or moment < since:
                    continue
                yield from _blocks(entry.get("message"))
    except (OSError, UnicodeDecodeError):
        return


def _moment(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _blocks(message: Any) -> Iterator[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        yield content
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif block.get("type") == "tool_use" and not str(block.get("name", "")).startswith(OWN_TOOLS):
            yield json.dumps(block.get("input"), ensure_ascii=False)


def used_in_session(runtime: Runtime, scope: Scope, session_id: str, transcript: Any) -> list[str]:
    """The memories of ``session_id``'s contexts (above their filler floor) of which the agent wrote a value
    after the session's first recall, by its ``transcript`` (a path); none without one."""
    if not isinstance(transcript, str):
        return []
    retrievals = runtime.store.session_retrievals(scope, session_id)
    if not retrievals:
        return []
    said = agent_output(transcript, retrievals[0].created_at)
    if not said.strip():
        return []
    contexts, _, _ = shown_contexts(retrievals)
    policy = CreditPolicy()
    placed = []
    for context in contexts:
        best = max((memory.score for memory in context.memories), default=0.0)
        placed += [
            (context.query, m.memory_id) for m in context.memories if policy.above_floor(m.score, best)
        ]
    found = runtime.store.get_memories(list(dict.fromkeys(memory_id for _, memory_id in placed)), scope)
    contents = {memory.id: memory.content for memory in found.values() if memory.content}
    shown = [
        ShownText(memory_id, contents[memory_id], query)
        for query, memory_id in placed
        if memory_id in contents
    ]
    return used_memories(shown, said)
