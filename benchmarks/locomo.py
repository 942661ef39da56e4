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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The reader of the conversations is shared with `memoria import` (console.transcripts).
from console.transcripts import DIA_ID, Turn, locomo_turns, normalise_dia_id, parse_session_date

__all__ = [
    "ADVERSARIAL",
    "CATEGORIES",
    "Conversation",
    "Question",
    "Turn",
    "final_version",
    "load",
    "ndcg_at_k",
    "normalise_dia_id",
    "normalise_evidence",
    "parse_sample",
    "parse_session_date",
    "recall_at_k",
    "reciprocal_rank",
    "standing_turns",
]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5


@dataclass(frozen=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int
    answer: str = ""  # LoCoMo's gold answer (the feedback experiment's "hook" arm writes it as the agent's)


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
    turns = locomo_turns(sample)
    known = {turn.dia_id for turn in turns}
    questions = tuple(
        Question(
            question=str(qa["question"]),
            evidence=tuple(e for e in normalise_evidence(qa.get("evidence", [])) if e in known),
            category=int(qa["category"]),
            answer=str(qa.get("answer", "")),
        )
        for qa in sample.get("qa", [])
    )
    return Conversation(str(sample["sample_id"]), tuple(turns), questions)


def normalise_evidence(raw: Iterable[str]) -> list[str]:
    """``["D8:6; D9:17", "D:11:26"]`` -> ``["D8:6", "D9:17", "D11:26"]`` (order kept, duplicates dropped)."""
    found: list[str] = []
    for item in raw:
        for match in DIA_ID.finditer(str(item)):
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id not in found:
                found.append(dia_id)
    return found


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
