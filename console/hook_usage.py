"""What the session-end hook reads of a Claude Code transcript: what the agent wrote after a session's
first recall of the ending conversation (its messages, and the string values of its tool calls' input,
memoria's own calls left out), what it had been told (the user's messages and tool results, memoria's
own left out, and its own writing before that recall), and so which memories of the session's contexts it
used (``retrieval.usage``). The hook credits those as ``used``; without a transcript, or with nothing
used, it reports as before.

A transcript is JSON Lines; lines of ``"type": "assistant"`` or ``"user"`` carry a ``message`` whose
``content`` is text or a list of blocks (``text``; ``tool_use`` with an ``id``, a ``name`` and an
``input``; ``tool_result`` with the ``tool_use_id`` it answers), and a ``timestamp``. Anything else, a
line that does not parse, or a file that is not a regular file is skipped: the hook never fails the
session. Only the last ``MAX_TRANSCRIPT_BYTES`` of a transcript are read.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrieval.usage import ShownText, used_by_values, values
from storage.records import Scope, View
from tools.common import Runtime
from writing.outcomes import shown_contexts

log = logging.getLogger(__name__)

OWN_TOOLS = "mcp__memoria__"  # how Claude Code names memoria's tools: their input is not the agent's work
# A recall's id, as its context's first line names it ("Relevant memories (retrieval ret_...)").
RETRIEVAL_ID_BYTES = re.compile(rb"\bret_[0-9a-f]{20}\b")
# The session_start prompt's opening (``server.prompts``), and its context block, which Claude Code gives the
# model as the user's words: its memories are memoria's, not the user's (a context the user pasted into a
# message of its own is what the user said).
PROMPT_OPENING = "You are starting this task:"
CONTEXT_BLOCK = re.compile(r"(?:Relevant memories \(retrieval |Memories \()ret_[0-9a-f]{20}\)")
# What shows memoria used in a conversation: its tools' calls, its prompt, its command in a shell.
MEMORIA_SIGNS = (OWN_TOOLS.encode(), PROMPT_OPENING.encode(), b"memoria recall", b"memoria remember")
MAX_TRANSCRIPT_BYTES = 32 << 20  # the conversation's end; the hook has 60 s


@dataclass
class Transcript:
    """What the agent wrote since a moment (``said``), the values it had been given otherwise (``heard``:
    the user's words and tool results, its own writing before the moment), and the values it wrote since
    then before anything else gave them to it (``wrote``: what only a memory can have told it)."""

    said: list[str] = field(default_factory=list)
    heard: set[str] = field(default_factory=set)
    wrote: set[str] = field(default_factory=set)


def read_transcript(path: str, since: datetime) -> Transcript:
    """The transcript at ``path`` read in order: a value counts as the agent's own when it wrote it (after
    ``since``) before the user or a tool's result gave it (an Edit's result echoes what the agent wrote,
    and a later Read shows it again: neither takes the value back)."""
    found = Transcript()
    own_calls: set[str] = set()  # ids of memoria's tool calls, whose results are recalled memories
    for entry in _entries(path):
        kind = entry.get("type")
        if kind not in ("assistant", "user"):
            continue
        moment = _moment(entry.get("timestamp"))
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else ():
            if not isinstance(block, dict):
                continue
            for text, written in _texts(block, kind, own_calls):
                if written and moment is not None and moment >= since:
                    found.said.append(text)
                    found.wrote |= values(text) - found.heard
                else:
                    found.heard |= values(text)
    return found


@dataclass(frozen=True)
class TranscriptRecalls:
    """What a transcript shows of memoria: the recall ids it names, and whether memoria was used at all."""

    ids: frozenset[str]
    used: bool


def recalls_in(path: Any) -> TranscriptRecalls | None:
    """The recall ids the transcript at ``path`` names (memoria's results, a prompt's context, a `memoria
    recall` run in a shell), its subagents' transcripts beside it included, each read whole as bytes (a
    conversation's first recall comes early, before the last ``MAX_TRANSCRIPT_BYTES``), and whether it
    shows memoria used at all. None when there is no transcript to read."""
    if not isinstance(path, str):
        return None
    try:
        main = Path(path)
        if not main.is_file():
            return None
        files = [main, *sorted(main.with_suffix("").joinpath("subagents").glob("*.jsonl"))]
    except (OSError, ValueError):
        return None
    ids: set[str] = set()
    used = False
    for file in files:
        try:
            with open(file, "rb") as transcript:
                info = os.fstat(transcript.fileno())
                if not stat.S_ISREG(info.st_mode) or not info.st_size:  # (an empty file cannot be mapped)
                    continue
                with mmap.mmap(transcript.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    ids.update(found.decode() for found in RETRIEVAL_ID_BYTES.findall(mapped))
                    used = used or any(mapped.find(sign) != -1 for sign in MEMORIA_SIGNS)
        except (OSError, ValueError):
            if file == main:
                return None  # the conversation's own transcript unreadable: nothing shown either way
    return TranscriptRecalls(frozenset(ids), used or bool(ids))


def _entries(path: str) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as transcript:
            if not stat.S_ISREG(os.fstat(transcript.fileno()).st_mode):
                return  # a pipe or a device: nothing to read to an end
            size = os.fstat(transcript.fileno()).st_size
            if size > MAX_TRANSCRIPT_BYTES:
                transcript.seek(size - MAX_TRANSCRIPT_BYTES)
                transcript.readline()  # the rest of a line cut in two
            for raw in transcript:
                try:
                    entry = json.loads(raw.decode("utf-8", errors="replace"))
                except (ValueError, RecursionError):
                    continue
                if isinstance(entry, dict):
                    yield entry
    except (OSError, ValueError):  # no such file, no access, a path with a NUL byte
        return


def _texts(block: dict[str, Any], kind: str, own_calls: set[str]) -> Iterator[tuple[str, bool]]:
    """Each text of a block, and whether the agent wrote it (its text, its tool calls' input)."""
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        text = block["text"]
        shown = CONTEXT_BLOCK.search(text) if kind == "user" and text.startswith(PROMPT_OPENING) else None
        # The memories of a prompt's context are memoria's: what the agent writes of them after is what it
        # used (a trial: session_start's memories counted as the user's words, and none was credited).
        yield (text[: shown.start()] if shown else text), kind == "assistant"
    elif block.get("type") == "tool_use" and kind == "assistant":
        if str(block.get("name", "")).startswith(OWN_TOOLS):
            own_calls.add(str(block.get("id")))
            return
        for leaf in _strings(block.get("input")):
            yield leaf, True
    elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in own_calls:
        for leaf in _strings(block.get("content")):
            yield leaf, False


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The strings of a JSON value (not its keys, numbers or booleans: a tool's parameters)."""
    if depth > 50:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)


def _moment(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def used_in_session(
    runtime: Runtime, scope: Scope, session_id: str, transcript: Any, since: datetime | None
) -> list[str]:
    """The memories of ``session_id``'s contexts since ``since`` (when the ending conversation began:
    after /clear a server's session goes on into the next conversation), above their filler floor, of
    which the agent wrote a value after the first of those recalls that it had not been given otherwise,
    by its ``transcript`` (a path). None without one; never an error (the report goes on without)."""
    if not isinstance(transcript, str):
        return []
    try:
        return _used_in_session(runtime, scope, session_id, transcript, since)
    except Exception as exc:  # a bad transcript or a store fault: the report is made all the same
        log.warning("reading the transcript for the memories used failed (%s); reporting without", exc)
        return []


def _used_in_session(
    runtime: Runtime, scope: Scope, session_id: str, transcript: str, since: datetime | None
) -> list[str]:
    retrievals = [
        retrieval
        for retrieval in runtime.store.session_retrievals(scope, session_id)
        if since is None or retrieval.created_at >= since
    ]
    if not retrievals:
        return []
    read = read_transcript(transcript, retrievals[0].created_at)
    if not read.said:
        return []
    contexts, _, _ = shown_contexts(retrievals)
    policy = runtime.credit_policy
    placed = []
    for context in contexts:
        best = max((memory.score for memory in context.memories), default=0.0)
        placed += [
            (context.query, m.memory_id) for m in context.memories if policy.above_floor(m.score, best)
        ]
    # Read as the scope holds them (org-visible ones are on the org's shelf), as the report reads them.
    found = runtime.store.get_memories(list(dict.fromkeys(memory_id for _, memory_id in placed)), View(scope))
    contents = {memory.id: memory.content for memory in found.values() if memory.content}
    asked = {query for query, _ in placed}
    shown = [
        ShownText(memory_id, contents[memory_id], " ".join(asked))  # any of the session's queries held it
        for _, memory_id in placed
        if memory_id in contents
    ]
    return used_by_values(shown, read.wrote)
