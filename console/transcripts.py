"""Reading conversations from files into sessions of messages: LoCoMo's format (Maharana et al., 2024),
chat messages as JSON or JSON Lines, and plain-text transcripts. Parsing only; ``console.transfer``
stores them. Every error says where in the file it is (a line, or a message's position).

LoCoMo: a list of samples, each with ``sample_id`` and ``conversation`` (``speaker_a``, ``speaker_b``,
``session_N_date_time`` and ``session_N``: turns ``{speaker, dia_id, text}``, some with the
``blip_caption`` of a shared image).

JSON: a list of messages, ``{"messages": [...]}`` (one session), or a list of such sessions (or of
lists of messages). JSON Lines: one message, or one ``{"messages": [...]}`` session, per line. A message
is ``{"role"|"speaker"|"name": ..., "content"|"text": ..., "timestamp"|"time": ..., "session": ...}``
(only the text is required); messages naming a ``session`` are grouped by it, in order of first mention.

Plain text: ``Name: message`` lines; a line without a ``Name:`` prefix continues the message before it (a
name is at most four words, without brackets, quotes or sentence punctuation: "for attempt in range(8):" is
code and "The CI slowdown comes from cache misses:" a sentence, both the message's own lines).
Sessions are separated by a blank line or a line starting with ``---`` or ``#``, which may carry the
session's date (``--- 2024-03-01 14:00``, ``## 1:56 pm on 8 May, 2023``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SESSION_KEY = re.compile(r"^session_(\d+)$")
DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_SPEAKER_LINE = re.compile(r"^([^\s:][^:]{0,63}?)\s*:\s+(\S.*)$")
_SPEAKER_ALONE = re.compile(r"^([^\s:][^:]{0,63}?)\s*:$")  # "Alice:", the message on the lines after
# What no name holds: a line of code or a sentence before a colon is no speaker ("for attempt in range(8):",
# "The CI slowdown comes from cache misses: ..."; a trial's infra chat had 53 "speakers" for 2 people).
_NOT_IN_A_NAME = re.compile(r"[()\[\]{}`=<>\"!?;]")
MAX_NAME_WORDS = 4


def _speaker(match: re.Match[str] | None) -> str | None:
    """The speaker a line names (``_SPEAKER_LINE`` or ``_SPEAKER_ALONE``'s match), None when what comes before
    its colon reads as no name: more than ``MAX_NAME_WORDS`` words, or code or a sentence's punctuation."""
    if match is None:
        return None
    name = match.group(1)
    return None if len(name.split()) > MAX_NAME_WORDS or _NOT_IN_A_NAME.search(name) else name


_SPEAKER_FIELDS = ("role", "speaker", "name")
_TEXT_FIELDS = ("content", "text")
_TIME_FIELDS = ("timestamp", "time")
_SESSION_TIME_FIELDS = ("date", "date_time", "timestamp", "time", "started_at")
_SESSION_NAME_FIELDS = ("session", "id", "session_id", "title")


class TranscriptError(ValueError):
    """A file that is not a transcript of the expected shape; the message says where and what."""


@dataclass(frozen=True)
class Turn:
    """One turn of a LoCoMo conversation."""

    dia_id: str
    session: int
    speaker: str
    text: str
    when: datetime | None  # the session's date and time (naive, as LoCoMo writes it)
    image_caption: str | None = None

    @property
    def said(self) -> str:
        """The turn's text, with the caption of an image it shares."""
        return self.text + (f" [shares an image: {self.image_caption}]" if self.image_caption else "")


@dataclass(frozen=True)
class Message:
    speaker: str | None  # None: the file does not say (the importer's agent id is used)
    text: str
    when: datetime | None  # UTC
    where: str  # its place in the file, for error messages: "line 12", "message 3 of session 2"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    name: str  # unique within the file
    when: datetime | None  # UTC; the session's date, when the file gives one
    messages: tuple[Message, ...]


# ------------------------------------------------------------------ LoCoMo


def is_locomo(data: Any) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(sample, dict) and "conversation" in sample for sample in data)
    )


def locomo_turns(sample: Any, where: str = "sample") -> list[Turn]:
    """The turns of one LoCoMo sample, session by session."""
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        raise TranscriptError(f'{where}: expected an object with a "conversation" object')
    conversation = sample["conversation"]
    turns: list[Turn] = []
    for key in sorted(conversation, key=_session_number):
        match = SESSION_KEY.match(key)
        if not match or not isinstance(conversation[key], list):
            continue
        number = int(match.group(1))
        when = parse_session_date(conversation.get(f"{key}_date_time"))
        for index, raw in enumerate(conversation[key], start=1):
            place = f"{where} {key} turn {index}"
            if not isinstance(raw, dict):
                raise TranscriptError(f"{place}: expected an object, got {type(raw).__name__}")
            for field in ("speaker", "dia_id", "text"):
                if not isinstance(raw.get(field), str):
                    raise TranscriptError(f'{place}: "{field}" is missing or not a string')
            caption = raw.get("blip_caption")
            turns.append(
                Turn(
                    dia_id=normalise_dia_id(raw["dia_id"]) or raw["dia_id"],
                    session=number,
                    speaker=raw["speaker"],
                    text=raw["text"],
                    when=when,
                    image_caption=caption if isinstance(caption, str) else None,
                )
            )
    return turns


def locomo_sessions(data: Any) -> list[Session]:
    """One session per LoCoMo session of every sample, named ``<sample_id>:session_<n>``; each message
    is ``said`` (with an image's caption) by its speaker, tagged ``dia:<turn id>``."""
    if not is_locomo(data):
        raise TranscriptError(
            'expected a list of LoCoMo samples (objects with "sample_id" and "conversation")'
        )
    sessions: list[Session] = []
    seen: set[str] = set()
    for index, sample in enumerate(data):
        sample_id = sample.get("sample_id")
        if not isinstance(sample_id, str | int) or isinstance(sample_id, bool) or not str(sample_id).strip():
            raise TranscriptError(f'sample {index}: "sample_id" is missing')
        where = f"sample {index} ({sample_id})"
        if str(sample_id) in seen:
            raise TranscriptError(f"{where}: sample_id {sample_id!r} appears twice")
        seen.add(str(sample_id))
        by_session: dict[int, list[Turn]] = {}
        for turn in locomo_turns(sample, where):
            by_session.setdefault(turn.session, []).append(turn)
        for number, turns in by_session.items():
            when = turns[0].when.replace(tzinfo=UTC) if turns[0].when else None
            messages = tuple(
                Message(
                    turn.speaker,
                    turn.said,
                    None,
                    f"{where} session_{number} turn {position}",
                    (f"dia:{turn.dia_id}",),
                )
                for position, turn in enumerate(turns, start=1)
            )
            sessions.append(Session(f"{sample_id}:session_{number}", when, messages))
    return sessions


def _session_number(key: str) -> int:
    match = SESSION_KEY.match(key)
    return int(match.group(1)) if match else -1


def normalise_dia_id(raw: str) -> str | None:
    match = DIA_ID.search(raw)
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def parse_session_date(text: Any) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> a (naive) datetime; None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.replace(",", " ").split())
    for pattern in ("%I:%M %p on %d %B %Y", "%H:%M on %d %B %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, pattern)
        except ValueError:
            continue
    return None


# ------------------------------------------------------------------ dates


def read_time(value: Any) -> datetime | None:
    """An ISO-8601 string, LoCoMo's ``"1:56 pm on 8 May, 2023"``, or seconds (or milliseconds) since
    1970, as UTC (a time without an offset is UTC); None when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        moment: datetime | None = datetime.fromisoformat(text)
    except ValueError:
        moment = parse_session_date(text)
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _time_field(raw: dict[str, Any], fields: Sequence[str], where: str) -> datetime | None:
    for field in fields:
        value = raw.get(field)
        if value is None:
            continue
        moment = read_time(value)
        if moment is None:
            raise TranscriptError(
                f'{where}: "{field}" is {value!r:.60}, not a time: use ISO 8601 (2024-03-01T14:00:00Z) '
                "or seconds since 1970"
            )
        return moment
    return None


# ------------------------------------------------------------------ JSON and JSON Lines


def json_sessions(data: Any) -> list[Session]:
    """The sessions of a whole JSON document (see the module's docstring for the shapes)."""
    if isinstance(data, dict):
        if "messages" not in data:
            raise TranscriptError('expected {"messages": [...]}, a list of messages, or a list of sessions')
        return _session_objects([(data, "the session")])
    if not isinstance(data, list) or not data:
        raise TranscriptError("expected a non-empty list of messages or of sessions")
    if all(isinstance(item, dict) and "messages" in item for item in data):
        return _session_objects([(item, f"session {index}") for index, item in enumerate(data, start=1)])
    if all(isinstance(item, list) for item in data):
        return _session_objects(
            [({"messages": item}, f"session {index}") for index, item in enumerate(data, start=1)]
        )
    return _grouped([_message(item, f"message {index}") for index, item in enumerate(data, start=1)])


def jsonl_sessions(lines: Iterable[tuple[int, Any]]) -> list[Session]:
    """The sessions of JSON Lines already parsed: (line number, value), one message or session each."""
    sessions: list[tuple[dict[str, Any], str]] = []
    messages: list[tuple[Message, Any]] = []
    for number, value in lines:
        if isinstance(value, dict) and "messages" in value:
            sessions.append((value, f"line {number}"))
        else:
            messages.append(_message(value, f"line {number}"))
    if sessions and messages:
        raise TranscriptError(
            f"{messages[0][0].where}: a message line in a file of session lines: put every message in a "
            'session ({"messages": [...]}) or write one message per line'
        )
    return _session_objects(sessions) if sessions else _grouped(messages)


def _session_objects(items: Sequence[tuple[dict[str, Any], str]]) -> list[Session]:
    sessions: list[Session] = []
    names: set[str] = set()
    for index, (raw, where) in enumerate(items, start=1):
        if not isinstance(raw.get("messages"), list):
            raise TranscriptError(f'{where}: "messages" must be a list of messages')
        name = next((str(raw[f]) for f in _SESSION_NAME_FIELDS if raw.get(f) not in (None, "")), str(index))
        if name in names:
            raise TranscriptError(f"{where}: a second session named {name!r}: give sessions distinct names")
        names.add(name)
        when = _time_field(raw, _SESSION_TIME_FIELDS, where)
        messages = tuple(
            _message(item, f"{where}, message {position}")[0]
            for position, item in enumerate(raw["messages"], start=1)
        )
        sessions.append(Session(name, when, messages))
    return sessions


def _grouped(messages: Sequence[tuple[Message, Any]]) -> list[Session]:
    """Messages grouped by the ``session`` they name (unnamed ones together), in order of first mention."""
    groups: dict[str, list[Message]] = {}
    for message, session in messages:
        groups.setdefault("1" if session is None else str(session), []).append(message)
    return [Session(name, None, tuple(group)) for name, group in groups.items()]


def _message(raw: Any, where: str) -> tuple[Message, Any]:
    """A message and the session it names (None: none)."""
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where}: expected a message object, got {type(raw).__name__}")
    speaker = next((raw[f] for f in _SPEAKER_FIELDS if raw.get(f) not in (None, "")), None)
    if speaker is not None and not isinstance(speaker, str):
        raise TranscriptError(f"{where}: the speaker must be a string, but got {speaker!r:.60}")
    text = _text(raw, where)
    return Message(speaker, text, _time_field(raw, _TIME_FIELDS, where), where), raw.get("session")


def _text(raw: dict[str, Any], where: str) -> str:
    field = next((f for f in _TEXT_FIELDS if f in raw), None)
    if field is None:
        raise TranscriptError(f'{where}: the message has no "content" or "text"')
    value = raw[field]
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        parts = [
            part if isinstance(part, str) else part.get("text")
            for part in value
            if isinstance(part, str) or (isinstance(part, dict) and isinstance(part.get("text"), str))
        ]
        value = "\n".join(p for p in parts if isinstance(p, str))
    if not isinstance(value, str):
        raise TranscriptError(f'{where}: "{field}" must be text, but got {value!r:.60}')
    return value


# ------------------------------------------------------------------ plain text


def text_sessions(lines: Iterable[str]) -> list[Session]:
    """The sessions of a plain-text transcript (see the module's docstring)."""
    sessions: list[Session] = []
    current: list[Message] = []
    date: datetime | None = None
    lines = list(lines)
    # The transcript's speakers: those with a message on their line, anywhere in it.
    speakers = {name for line in lines if (name := _speaker(_SPEAKER_LINE.match(line.strip()))) is not None}

    def close() -> None:
        nonlocal current, date
        if current:
            sessions.append(Session(str(len(sessions) + 1), date, tuple(current)))
            current, date = [], None

    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            close()
        elif stripped.startswith(("---", "#")):
            close()
            date = read_time(stripped.lstrip("-#").strip()) or date
        elif (match := _SPEAKER_LINE.match(stripped)) is not None and _speaker(match) is not None:
            current.append(Message(match.group(1), match.group(2).strip(), None, f"line {number}"))
        elif (match := _SPEAKER_ALONE.match(stripped)) is not None and match.group(1) in speakers:
            # A known speaker's name alone: a message whose text is on the lines after (or none: then it is
            # not stored); another "Word:" alone ("Steps:") goes on the message before.
            current.append(Message(match.group(1), "", None, f"line {number}"))
        elif current:  # a message that goes on over several lines
            last = current[-1]
            text = f"{last.text}\n{stripped}" if last.text else stripped
            current[-1] = Message(last.speaker, text, None, last.where)
        else:
            raise TranscriptError(
                f"line {number}: {stripped!r:.60} does not start with a speaker: write each message as "
                "'Name: message'"
            )
    close()
    return sessions


# ------------------------------------------------------------------ long messages

_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*\s+|\n")


def parts_of(text: str, room: int) -> list[str]:
    """``text`` cut into parts of at most ``room`` characters, for a message longer than a memory may be
    (``MEMORIA_MAX_CONTENT_CHARS``): at the last paragraph break that leaves a part at least half full,
    else at a sentence's end, else between words, else (one very long word) at ``room``. A part is one
    memory, so each should read as a whole where the text allows it."""
    if room < 1:
        raise ValueError(f"room must be >= 1, but got {room}")
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > room:
        head = rest[: room + 1]  # a break right after the part's last character counts
        floor = room // 2
        cut = head.rfind("\n\n")
        if cut < floor:
            cut = max((m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= room), default=-1)
        if cut < floor:
            cut = max((m.start() for m in re.finditer(r"\s", head)), default=-1)
        if cut < floor:
            cut = room
        part, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if part:
            parts.append(part)
    if rest:
        parts.append(rest)
    return parts
