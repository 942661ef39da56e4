"""Reading conversations in LoCoMo's format (Maharana et al., 2024) and scoring recall against their
evidence turns. The data itself is never part of this project: point the benchmarks at a file.

A file is a list of samples: ``sample_id``; ``conversation`` with ``speaker_a``, ``speaker_b``,
``session_N_date_time`` and ``session_N`` (turns ``{speaker, dia_id, text}``, some with a
``blip_caption`` for a shared image); ``qa`` with ``{question, evidence, category}``. A few evidence ids
are malformed (``"D8:6; D9:17"``, ``"D:11:26"``): they are split and normalised, and ids that name no
turn of the conversation are dropped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5

_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    when: datetime | None  # the session's date and time
    image_caption: str | None = None

    @property
    def said(self) -> str:
        """The turn's text, with the caption of an image it shares."""
        return self.text + (f" [shares an image: {self.image_caption}]" if self.image_caption else "")


@dataclass(frozen=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def sessions(self) -> dict[int, list[Turn]]:
        grouped: dict[int, list[Turn]] = {}
        for turn in self.turns:
            grouped.setdefault(turn.session, []).append(turn)
        return grouped

    def scored_questions(self) -> list[Question]:
        """Questions with at least one evidence turn, adversarial ones left out (the headline split)."""
        return [q for q in self.questions if q.category != ADVERSARIAL and q.evidence]


def load(path: str | Path, only: Sequence[str] | None = None) -> list[Conversation]:
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(samples, list):
        raise ValueError(f"{path}: expected a list of LoCoMo samples")
    conversations = [parse_sample(sample) for sample in samples]
    if only:
        wanted = set(only)
        conversations = [c for c in conversations if c.sample_id in wanted]
        missing = wanted - {c.sample_id for c in conversations}
        if missing:
            raise ValueError(f"{path}: no conversation {', '.join(sorted(missing))}")
    return conversations


def parse_sample(sample: dict[str, Any]) -> Conversation:
    conversation = sample["conversation"]
    turns: list[Turn] = []
    for key in sorted(conversation, key=_session_number):
        match = _SESSION.match(key)
        if not match or not isinstance(conversation[key], list):
            continue
        number = int(match.group(1))
        when = parse_session_date(conversation.get(f"{key}_date_time"))
        for raw in conversation[key]:
            turns.append(
                Turn(
                    dia_id=normalise_dia_id(raw["dia_id"]) or raw["dia_id"],
                    session=number,
                    speaker=raw["speaker"],
                    text=raw["text"],
                    when=when,
                    image_caption=raw.get("blip_caption"),
                )
            )
    known = {turn.dia_id for turn in turns}
    questions = tuple(
        Question(
            question=str(qa["question"]),
            evidence=tuple(e for e in normalise_evidence(qa.get("evidence", [])) if e in known),
            category=int(qa["category"]),
        )
        for qa in sample.get("qa", [])
    )
    return Conversation(str(sample["sample_id"]), tuple(turns), questions)


def _session_number(key: str) -> int:
    match = _SESSION.match(key)
    return int(match.group(1)) if match else -1


def normalise_dia_id(raw: str) -> str | None:
    match = _EVIDENCE.search(raw)
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def normalise_evidence(raw: Iterable[str]) -> list[str]:
    """``["D8:6; D9:17", "D:11:26"]`` -> ``["D8:6", "D9:17", "D11:26"]`` (order kept, duplicates dropped)."""
    found: list[str] = []
    for item in raw:
        for match in _EVIDENCE.finditer(str(item)):
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id not in found:
                found.append(dia_id)
    return found


def parse_session_date(text: Any) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> a datetime; None when absent or unreadable."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.replace(",", " ").split())
    for pattern in ("%I:%M %p on %d %B %Y", "%H:%M on %d %B %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, pattern)
        except ValueError:
            continue
    return None


def recall_at_k(returned: Sequence[set[str]], evidence: Sequence[str], k: int) -> float:
    """Share of the evidence turns covered by the first ``k`` returned memories (each memory may stand
    for several turns, e.g. a survivor of consolidation)."""
    if not evidence:
        return 0.0
    covered: set[str] = set()
    for turns in returned[:k]:
        covered |= turns
    return len(covered & set(evidence)) / len(set(evidence))


def ndcg_at_k(returned: Sequence[set[str]], evidence: Sequence[str], k: int) -> float:
    """Binary-relevance NDCG: a returned memory earns 1/log2(rank+1) for each evidence turn it covers
    first; the ideal puts one evidence turn at each of the first ranks."""
    wanted = set(evidence)
    if not wanted:
        return 0.0
    covered: set[str] = set()
    gain = 0.0
    for rank, turns in enumerate(returned[:k], start=1):
        new = (turns & wanted) - covered
        if new:
            gain += len(new) / math.log2(rank + 1)
            covered |= new
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return min(1.0, gain / ideal)


def reciprocal_rank(returned: Sequence[set[str]], evidence: Sequence[str]) -> float:
    """1/rank of the first returned memory that covers an evidence turn; 0 when none does."""
    wanted = set(evidence)
    for rank, turns in enumerate(returned, start=1):
        if turns & wanted:
            return 1.0 / rank
    return 0.0


def standing_turns(memories: Mapping[str, Any], turns_of: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Memory id -> the turns it stands for: its own, plus (transitively) those of every memory it
    superseded. ``memories`` are records with ``status`` and ``replaced_by``."""
    standing = {memory_id: set(turns) for memory_id, turns in turns_of.items()}
    for memory_id in memories:
        final = final_version(memory_id, memories)
        if final != memory_id:
            standing.setdefault(final, set()).update(turns_of.get(memory_id, set()))
    return standing


def final_version(memory_id: str, memories: Mapping[str, Any]) -> str:
    """Follow ``replaced_by`` from a superseded memory to the one standing now (cycles stop)."""
    seen = {memory_id}
    current = memories[memory_id]
    while (
        current.status == "superseded" and current.replaced_by in memories and current.replaced_by not in seen
    ):
        seen.add(current.replaced_by)
        current = memories[current.replaced_by]
    return str(current.id)
