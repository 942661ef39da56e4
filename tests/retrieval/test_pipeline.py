import json

import numpy as np
import pytest

from retrieval.models.providers import BackendInfo, Models
from retrieval.pipeline import PipelineOptions, RecallPipeline, build_stages
from retrieval.stages.candidate_search import CandidateSearchStage
from retrieval.trace import CandidatesFused, QueryEmbeddedWithoutAgents, SearchLegRan, SearchLegSkipped
from retrieval.types import RecallRequest
from storage.records import MemoryRecord, Scope, SearchHit, View
from tests.fakes import FakeSource, ScriptedReranker, TokenEmbedder
from tests.helpers import ALL_STAGES
from tests.records import memory_record

SCOPE = Scope("acme", "web")


def record(memory_id: str, content: str, embedder: str, weight: float = 1.0) -> MemoryRecord:
    return memory_record(
        memory_id, org_id="acme", project_id="web", content=content, embedder=embedder, weight=weight
    )


def request(**overrides) -> RecallRequest:
    values = dict(
        query="postgres pool size",
        scope=SCOPE,
        top_k=2,
        char_budget=2000,
        candidate_limit=6,
        retrieval_id="ret_t",
    )
    values.update(overrides)
    return RecallRequest(**values)


def models(embedder, reranker=None) -> Models:
    return Models(
        embedder,
        reranker,
        BackendInfo("embedder", embedder.name, embedder.name),
        BackendInfo("reranker", "none", reranker.name if reranker else "none"),
    )


def test_candidate_search_queries_both_legs_with_the_scope_and_embedder():
    embedder = TokenEmbedder()
    source = FakeSource(
        embedder,
        [record("m1", "postgres pool size is 20", embedder.name), record("m2", "cats", embedder.name)],
    )
    output = CandidateSearchStage(source, embedder, vector_weight=0.5)(request(), ())
    # The request's reach: its scope as its viewer sees it, and the org's shelf.
    assert source.calls == [("fulltext", View(SCOPE), 6), ("vector", View(SCOPE), embedder.name, 6)]
    assert output.candidates[0].id == "m1"
    assert output.candidates[0].found_by == ("vector", "fulltext")
    assert output.events[:2] == (
        SearchLegRan("vector", embedder.name, 2, 6),
        SearchLegRan("fulltext", "word-overlap", 1, 6),
    )
    assert output.events[2] == CandidatesFused("weighted-sum", 0.5, 0.5, 2, 2)


class ContextSource(FakeSource):
    """A FakeSource that knows each memory's context cosine, from a table."""

    def __init__(self, embedder, memories, contexts: dict[str, float]) -> None:
        super().__init__(embedder, memories)
        self.contexts = contexts
        self.asked_context: list[tuple[str, ...]] = []

    def vector_search(self, scope, vector, *, embedder, limit, context_share=0.0, **filters):
        self.calls.append(("vector", scope, embedder, limit, context_share))
        hits = [
            SearchHit(m, float(np.dot(vector, self.vectors[m.id])), self.vectors[m.id], self.contexts[m.id])
            for m in self.memories
            if m.id == "m1"  # the others are left to full text
        ]
        return hits[:limit]

    def context_scores(self, scope, vector, memory_ids, *, embedder):
        self.asked_context.append(tuple(memory_ids))
        return {memory_id: self.contexts[memory_id] for memory_id in memory_ids}


def test_candidate_search_fuses_each_memory_with_its_context_and_asks_it_for_fulltext_only_hits():
    embedder = TokenEmbedder()
    memories = [
        record("m1", "postgres pool size is 20", embedder.name),
        record("m2", "we raised it last week", embedder.name),
        record("m3", "pool", embedder.name),
    ]
    source = ContextSource(embedder, memories, {"m1": 0.9, "m2": 0.9, "m3": 0.1})
    stage = CandidateSearchStage(source, embedder, vector_weight=2 / 3, context_share=0.5)
    output = stage(request(query="postgres pool"), ())
    assert ("vector", View(SCOPE), embedder.name, 6, 0.5) in source.calls
    # m1 was the vector leg's hit and came with its context; only m3, found by full text alone, is asked
    assert source.asked_context == [("m3",)]
    cosines = {m.id: cosine(embedder, "postgres pool", m.content) for m in memories}
    found = {c.id: c for c in output.candidates}
    assert {c.id: c.context_score for c in output.candidates} == {"m1": 0.9, "m3": 0.1}
    # a third each for the cosine, the better of cosine and context, and the words (BM25 over the best):
    # m1: 1/3 x cosine + 1/3 x max(cosine, 0.9) + 1/3 x 2/2; m3: 1/3 x cosine + 1/3 x max(cosine, 0.1) + 1/3 x 1/2
    assert cosines["m1"] < 0.9 and cosines["m3"] > 0.1  # m1's context lifts it; m3's is below its own cosine
    assert found["m1"].fused_score == pytest.approx((cosines["m1"] + 0.9 + 1.0) / 3)
    assert found["m3"].fused_score == pytest.approx((2 * cosines["m3"] + 0.5) / 3)
    fused_event = next(e for e in output.events if isinstance(e, CandidatesFused))
    assert fused_event.context_share == 0.5


class ShallowFulltextSource(FakeSource):
    """A FakeSource whose full-text leg returns only its best hit, as a leg limit leaves the rest out."""

    def __init__(self, embedder, memories) -> None:
        super().__init__(embedder, memories)
        self.asked_keywords: list[tuple[str, ...]] = []

    def fulltext_search(self, scope, text, *, limit, **filters):
        return super().fulltext_search(scope, text, limit=1, **filters)

    def fulltext_scores(self, scope, text, memory_ids):
        self.asked_keywords.append(tuple(memory_ids))
        return super().fulltext_scores(scope, text, memory_ids)


def test_a_vector_hit_the_fulltext_leg_left_out_is_fused_with_its_own_keyword_score():
    embedder = TokenEmbedder()
    memories = [
        record("m1", "postgres pool size is 20", embedder.name),
        record("m2", "the pool is shared", embedder.name),
        record("m3", "cats", embedder.name),
    ]
    source = ShallowFulltextSource(embedder, memories)
    output = CandidateSearchStage(source, embedder, vector_weight=0.5)(request(query="postgres pool"), ())
    # Full text returned m1 alone; the vector leg's other hits are scored by the index, once.
    assert source.asked_keywords == [("m2", "m3")]
    found = {c.id: c for c in output.candidates}
    assert found["m2"].found_by == ("vector",)
    assert found["m2"].fulltext_score == 1.0  # one of the query's two words
    # Half the cosine and half the words over the best full-text hit (m1 holds both: 2).
    assert found["m2"].fused_score == pytest.approx(
        0.5 * cosine(embedder, "postgres pool", "the pool is shared") + 0.5 * 1 / 2
    )
    assert found["m3"].fulltext_score == 0.0
    assert found["m3"].fused_score == pytest.approx(0.5 * max(cosine(embedder, "postgres pool", "cats"), 0.0))

    # A query whose words no memory holds: the full-text leg found nothing, so nothing is asked.
    source.asked_keywords.clear()
    CandidateSearchStage(source, embedder, vector_weight=0.5)(request(query="kafka"), ())
    assert source.asked_keywords == []


def said_by(agent: str, memory_id: str, content: str, embedder: TokenEmbedder) -> MemoryRecord:
    return memory_record(
        memory_id, org_id="acme", project_id="web", content=content, embedder=embedder.name, agent_id=agent
    )


def cosine(embedder: TokenEmbedder, query: str, content: str) -> float:
    return float(np.dot(embedder.embed_query(query), embedder.embed_query(content)))


def test_the_vector_leg_embeds_the_query_without_the_names_of_authors_the_fulltext_leg_found():
    embedder = TokenEmbedder()
    memories = [
        said_by("melanie", "m1", "melanie painted a sunset", embedder),
        said_by("jon", "m2", "the lake at dawn", embedder),
    ]
    output = CandidateSearchStage(FakeSource(embedder, memories), embedder, vector_weight=0.5)(
        request(query="what did Melanie paint"), ()
    )
    assert QueryEmbeddedWithoutAgents(("melanie",), "what did paint") in output.events
    scores = {c.id: c.vector_score for c in output.candidates}
    assert scores["m1"] == pytest.approx(cosine(embedder, "what did paint", "melanie painted a sunset"))
    assert scores["m2"] == pytest.approx(cosine(embedder, "what did paint", "the lake at dawn"))


def test_a_search_outside_a_recall_embeds_the_query_with_its_names():
    # forget by query searches without attribution to weigh who wrote what: the name stays in the vector
    embedder = TokenEmbedder()
    memories = [said_by("melanie", "m1", "melanie painted a sunset", embedder)]
    stage = CandidateSearchStage(FakeSource(embedder, memories), embedder, vector_weight=0.5)
    fused, events = stage.search(View(SCOPE), "what did Melanie paint", leg_limit=6, limit=6)
    assert not any(isinstance(event, QueryEmbeddedWithoutAgents) for event in events)
    expected = cosine(embedder, "what did Melanie paint", "melanie painted a sunset")
    assert fused[0].vector_score == pytest.approx(expected)


def test_a_query_naming_no_author_of_the_hits_is_embedded_as_it_is():
    embedder = TokenEmbedder()
    memories = [said_by("jon", "m1", "melanie painted a sunset", embedder)]
    output = CandidateSearchStage(FakeSource(embedder, memories), embedder, vector_weight=0.5)(
        request(query="what did Melanie paint"), ()
    )
    assert not any(isinstance(event, QueryEmbeddedWithoutAgents) for event in output.events)
    expected = cosine(embedder, "what did Melanie paint", "melanie painted a sunset")
    assert output.candidates[0].vector_score == pytest.approx(expected)


def test_fulltext_can_be_switched_off():
    embedder = TokenEmbedder()
    source = FakeSource(embedder, [record("m1", "postgres", embedder.name)])
    output = CandidateSearchStage(source, embedder, vector_weight=0.5, use_fulltext=False)(request(), ())
    assert [call[0] for call in source.calls] == ["vector"]
    assert SearchLegSkipped("fulltext", "disabled by configuration") in output.events
    assert output.candidates[0].fused_score == pytest.approx(output.candidates[0].vector_score)


def test_pipeline_runs_every_stage_in_order_and_traces_each_with_its_time():
    embedder = TokenEmbedder()
    memories = [
        record("m1", "postgres pool size is 20", embedder.name, weight=0.5),
        record("m2", "the postgres pool size was raised", embedder.name, weight=1.5),
        record("m3", "cats", embedder.name),
    ]
    reranker = ScriptedReranker({"postgres pool size is 20": 0.9, "the postgres pool size was raised": 0.8})
    stages = build_stages(FakeSource(embedder, memories), models(embedder, reranker), PipelineOptions())
    pipeline = RecallPipeline(stages, {"embedder": embedder.name})
    result = pipeline.run(request())

    assert [stage.name for stage in result.trace.stages] == ALL_STAGES
    assert all(stage.elapsed_ms >= 0 for stage in result.trace.stages)
    # m1: 0.9 x 0.5 = 0.45; m2: 0.8 x 1.5 = 1.2 -> m2 first; m3: 0.05 x 1.0
    assert [c.id for c in result.candidates] == ["m2", "m1", "m3"]
    assert [c.final_score for c in result.candidates] == pytest.approx([1.2, 0.45, 0.05])
    assert [c.id for c in result.in_context] == ["m2", "m1"]
    assert "postgres pool size is 20" in result.context
    assert result.trace.backends == {"embedder": embedder.name}


def test_a_recall_within_a_time_window_finds_and_expands_only_memories_of_that_time():
    from datetime import UTC, datetime, timedelta

    from storage.records import TimeWindow

    embedder = TokenEmbedder()
    day = datetime(2026, 11, 20, tzinfo=UTC)

    def at(memory_id: str, content: str, days: int) -> MemoryRecord:
        return memory_record(
            memory_id,
            org_id="acme",
            project_id="web",
            content=content,
            embedder=embedder.name,
            episode_id="ep",
            created_at=day + timedelta(days=days),
        )

    memories = [
        at("before", "postgres pool size was 10", 0),
        at("inside", "postgres pool size is 20", 2),
        at("sibling", "the change went out with the release", 2),
        at("after", "we talked about lunch", 4),
    ]
    stages = build_stages(FakeSource(embedder, memories), models(embedder), PipelineOptions())
    window = TimeWindow(day + timedelta(days=1), day + timedelta(days=3))
    result = RecallPipeline(stages, {"embedder": embedder.name}).run(request(window=window, top_k=1))
    # "before" matches the query as well as "inside", and "after" shares its episode: neither is of the
    # window, so neither is a candidate nor a sibling; the episode's member of that time is.
    assert [c.id for c in result.in_context] == ["inside", "sibling"]
    assert {c.id for c in result.candidates} == {"inside", "sibling"}
    assert json.loads(result.trace.to_json())["window"] == {
        "since": "2026-11-21T00:00:00Z",
        "until": "2026-11-23T00:00:00Z",
        "from": None,
    }
