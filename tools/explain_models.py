"""The scores and feedback each candidate of ``explain_ranking`` carries (its output's parts)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StageScores(BaseModel):
    vector: float | None = Field(description="Cosine similarity to the query embedding, [-1, 1].")
    context: float | None = Field(None, description="Cosine of its context (it and its episode neighbours).")
    fulltext: float | None = Field(
        description="BM25 score from the full-text index (>= 0), also for a vector hit the full-text leg did "
        "not return (its found_by names the vector leg alone; 0 when it matches no word of the query); null "
        "when the index cannot score it (a scope LanceDB's index serves) or the full-text leg found nothing."
    )
    fused: float = Field(
        description="w x semantic + (1 - w) x bm25 / the best bm25 of the query's candidates, [0, 1]: what "
        "ranks; semantic = (1 - c) x vector + c x max(vector, context) (floored at 0), or the vector without a "
        "context (the trace's candidates_fused event gives w and c)."
    )
    fused_absolute: float | None = Field(
        None,
        description="The same with bm25 / the bm25 of a full match of the query (capped at 1): the floor "
        "reads the lower of this and fused, so that the best of weak matches is still filler; null when the "
        "full-text index keeps no term statistics.",
    )
    rerank: float | None = Field(
        description="Cross-encoder, Cohere or LLM relevance, [0, 1]; null when no reranker ran."
    )
    attribution: float = Field(
        1.0,
        description="1 - author_discount when the query names an agent other than its author, else 1.",
    )
    instruction_factor: float = Field(
        1.0,
        description="MEMORIA_INSTRUCTION_DEMOTION when its text reads as instructions to the model, else 1.",
    )
    relevance: float = Field(
        description="(rerank if it ran, else fused) x attribution x instruction_factor (0 for an episode sibling); "
        "the floor reads it before instruction_factor, with the lower of fused and fused_absolute."
    )
    floor: float | None = Field(
        None,
        description="What the relevance floor compared (see relevance); null for an episode sibling.",
    )
    corroboration_boost: float = Field(
        0.0, description="log2(1 + corroborating agents) x 0.1, added to relevance before feedback weighting."
    )
    decay: float = Field(1.0, description="Age decay, 0.5^(age/half-life) by tier; 1 if it does not fade.")
    feedback_weight: float = Field(
        description="The weight feedback applied for this query (neutral 1.0): the outcome reports of "
        "sessions whose queries were close to this one, replayed (see feedback)."
    )
    global_weight: float = Field(
        1.0, description="The memory's EMA weight over every report, whatever the query (the baseline)."
    )
    neighbourhood: float = Field(0.0, description="Lent by its best episode neighbour (neighbourhood_of).")
    answer_type: float = Field(0.0, description="Lent for stating the time, place, host or quantity asked.")
    final: float = Field(
        description="(relevance + boost) x decay x feedback_weight (a sibling: alpha x its source's final), "
        "plus neighbourhood and answer_type: what ranks."
    )


class FeedbackMove(BaseModel):
    """One session's report, as it moved this memory's weight for this query."""

    session_id: str
    role: str = Field(
        description="helpful or misleading: the agent named it; context: it was in the session's context; "
        "used: the session-end hook saw the agent use it."
    )
    outcome_score: float = Field(description="What it moved towards: 1 success, 0 failure.")
    share: float = Field(description="Its share of a full step in that report.")
    closeness: float = Field(
        description="How close that session's query is to this one: 0 (unrelated) to 1 (the same task)."
    )
    weight_before: float
    weight_after: float


class FeedbackExplanation(BaseModel):
    reports: int = Field(0, description="Reports that moved its weight for this query.")
    far: int = Field(0, description="Reports about tasks too far from this query (or set apart) to count.")
    set_apart: int = Field(
        0,
        description="Of `far`, the reports that named this memory (helpful, or misleading beside such a helpful "
        "one) for a task whose query is close to this one but set apart from it by a word: this query has a "
        "word that this memory does not say and another memory of the recall, matching as many of the "
        "query's words, does; this memory says the reporting query's own word instead.",
    )
    moves: list[FeedbackMove] = Field(
        default_factory=list, description="The reports that moved it most (at most 5)."
    )
