"""Stage: the gate. Queries that need no memory (greetings, thanks, acknowledgements, chit-chat, nothing
but function words) skip retrieval. A real question wrongly gated costs more than a wasted search, so
the local classifier gates only when not a single content word is left; the optional LLM judgement
(``MEMORIA_GATE=llm``, through the request's LLM) may gate only with high confidence, and any doubt or
failure means retrieve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from retrieval.models.llm.base import LLMRequest, LLMUnavailable, parse_json_object
from retrieval.text import STOPWORDS, word_tokens
from retrieval.trace import GateDecided, StageOutput
from retrieval.types import Candidate, RecallRequest

GateMode = Literal["local", "llm", "off"]

# Words that carry no topic in chat: greetings, thanks, acknowledgements, small talk, laughter, farewells.
CHITCHAT = frozenset(
    """
    hi hello hey heya hiya howdy yo greetings morning afternoon evening gm gn thanks thank thx ty tysm
    cheers appreciate appreciated ok okay okey k kk sure yes yeah yep yup ya no nope nah cool great nice
    awesome perfect alright good gotcha got understood noted sounds lol lmao haha hahaha hehe
    hmm hm um uh oh ah wow bye goodbye cya later welcome please np worries whats sup wassup
    amazing brilliant excellent wonderful much see soon ttyl s t d m ll re ve

    """.split()  # noqa: SIM905 - a word list reads better as text
)

LLM_GATE_CONFIDENCE = 0.8


@dataclass(frozen=True)
class GateDecision:
    retrieve: bool
    reason: str
    content_words: tuple[str, ...] = ()


def classify(query: str) -> GateDecision:
    """Retrieve unless the query has no content word at all."""
    words = word_tokens(query)
    if not words:
        return GateDecision(False, "the query has no words")
    content = tuple(word for word in words if word not in STOPWORDS and word not in CHITCHAT)
    if not content:
        return GateDecision(False, "greeting, thanks, acknowledgement or chit-chat: no content words")
    return GateDecision(True, "has content words: " + ", ".join(content[:6]), content)


GATE_SYSTEM = (
    "You decide whether a message sent to an AI agent needs the agent's long-term memory of earlier work "
    "(facts, decisions, fixes, project details). Greetings, thanks and small talk do not. When unsure, say it does."
)


class GateStage:
    name = "gate"

    def __init__(self, mode: GateMode = "local") -> None:
        self._mode = mode

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        if self._mode == "off":
            return StageOutput(candidates, (GateDecided(True, "off", "the gate is switched off"),))
        decision = classify(request.query)
        if not decision.retrieve:
            return StageOutput(
                (), (GateDecided(False, "local", decision.reason),), context="", halt=decision.reason
            )
        if self._mode == "llm":
            if request.llm is None:
                reason = (
                    decision.reason
                    + "; no LLM for the gate (the client offers no sampling), so the local classifier decided"
                )
                return StageOutput(candidates, (GateDecided(True, "local", reason),))
            return self._ask(request, candidates)
        return StageOutput(candidates, (GateDecided(True, "local", decision.reason),))

    def _ask(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        assert request.llm is not None
        question = LLMRequest(
            purpose="gate",
            system=GATE_SYSTEM,
            prompt=(
                f"Message: {request.query!r}\n"
                'Answer with JSON only: {"needs_memory": true|false, "confidence": 0.0-1.0, "reason": "..."}'
            ),
            max_tokens=120,
        )
        try:
            answer = parse_json_object(request.llm.complete(question).text)
        except LLMUnavailable as exc:
            reason = f"LLM gate unavailable ({exc}); retrieving"
            return StageOutput(candidates, (GateDecided(True, "llm", reason),))
        confidence = answer.get("confidence", 0.0)
        if not isinstance(confidence, (int, float)) or isinstance(confidence, bool):
            confidence = 0.0  # an unreadable confidence is no confidence: retrieve
        if answer.get("needs_memory") is False and confidence >= LLM_GATE_CONFIDENCE:
            reason = f"the LLM judged no memory is needed (confidence {confidence:.2f}): {answer.get('reason', '')}".strip()
            return StageOutput((), (GateDecided(False, "llm", reason),), context="", halt=reason)
        judged = f"the LLM judged memory may help (confidence {confidence:.2f})"
        return StageOutput(candidates, (GateDecided(True, "llm", judged),))
