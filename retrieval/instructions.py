"""Stage: memories that read as instructions to the model are flagged, and demoted by configuration.

A memory is data an agent wrote down. One that talks to the model instead ("ignore previous
instructions", a fake system turn, tool-call markup) is how a poisoned memory tries to steer the next
agent that recalls it. Such memories are never dropped (the text may be a legitimate note about prompt
injection), but each is flagged with the signals it matched, in the trace and in the context block's
provenance line, and its relevance is multiplied by ``instruction_demotion`` (1.0: flag only).

Runs after the iterative retrieval pool is settled and before feedback weighting, so the demotion
carries into the final order exactly as a lower relevance would.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from retrieval.rerank import by_relevance
from retrieval.trace import InstructionsFlagged, StageOutput
from retrieval.types import Candidate, RecallRequest

_SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "override",
        re.compile(
            r"(?i)\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?"
            r"\b(?:previous|prior|above|earlier|preceding|all|your|system)\b[^.\n]{0,25}?"
            r"\b(?:instructions?|prompts?|directions|guardrails)\b"
        ),
    ),
    (
        "role-change",
        re.compile(
            r"(?i)\byou are now\b|\bfrom now on,? you (?:are|will|must)\b|\bnew (?:system )?instructions?\s*:"
            r"|\bact as (?:an? )?(?:unrestricted|unfiltered|jailbroken)\b|\benable (?:developer|dan|god) mode\b"
        ),
    ),
    (
        "prompt-extraction",
        re.compile(
            r"(?i)\b(?:reveal|print|repeat|show|output|leak)\b[^.\n]{0,30}\b(?:system prompt|system message|"
            r"developer message|hidden instructions)\b"
        ),
    ),
    (
        "chat-markup",
        re.compile(
            r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?INST\]|<</?SYS>>"
            r"|(?im:^\s*(?:system|assistant|developer)\s*:\s*\S)"
        ),
    ),
    (
        "tool-call",
        re.compile(
            r"</?(?:[a-z]+:)?(?:function_calls|invoke|tool_call|tool_use|tool_result)\b"
            r"|\"tool_calls\"\s*:|\{\s*\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:arguments|parameters|input)\"\s*:"
        ),
    ),
)


@lru_cache(maxsize=4_096)
def instruction_signals(text: str) -> tuple[str, ...]:
    """The signals ``text`` matches, in a fixed order (empty: it reads as plain data). Cached: the stage
    asks for every candidate, and assembly again for each memory it renders (episode siblings too)."""
    return tuple(name for name, pattern in _SIGNALS if pattern.search(text))


class InstructionStage:
    name = "instructions"

    def __init__(self, demotion: float) -> None:
        if not 0.0 <= demotion <= 1.0:
            raise ValueError(f"instruction_demotion must be in [0, 1], but got {demotion}")
        self._demotion = demotion

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        flagged: list[tuple[str, tuple[str, ...]]] = []
        adjusted = []
        for candidate in candidates:
            signals = instruction_signals(candidate.memory.content)
            if not signals:
                adjusted.append(candidate)
                continue
            flagged.append((candidate.id, signals))
            adjusted.append(
                replace(
                    candidate,
                    instruction_signals=signals,
                    instruction_factor=self._demotion,
                    relevance_score=candidate.relevance_score * self._demotion,
                )
            )
        ordered = by_relevance(tuple(adjusted)) if flagged and self._demotion < 1.0 else tuple(adjusted)
        return StageOutput(ordered, (InstructionsFlagged(tuple(flagged), self._demotion),))
