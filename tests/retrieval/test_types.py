from dataclasses import fields, replace

import pytest

from retrieval.types import Candidate
from tests.records import memory_record


def test_a_revised_candidate_equals_what_dataclasses_replace_makes_and_leaves_the_original_alone():
    original = Candidate(
        memory=memory_record("m1", content="Deploys run on Tuesday"), fused_score=0.4, found_by=("vector",)
    )

    revised = original.revised(relevance_score=0.3, source="sibling", sibling_of="m0")

    assert revised == replace(original, relevance_score=0.3, source="sibling", sibling_of="m0")
    assert revised is not original
    assert (original.relevance_score, original.source, original.sibling_of) == (0.0, "direct", None)
    assert [
        getattr(revised, f.name)
        for f in fields(Candidate)
        if f.name not in {"relevance_score", "source", "sibling_of"}
    ] == [
        getattr(original, f.name)
        for f in fields(Candidate)
        if f.name not in {"relevance_score", "source", "sibling_of"}
    ]


def test_a_revised_candidate_stays_frozen():
    revised = Candidate(memory=memory_record("m1", content="x")).revised(weighted_score=0.5)

    with pytest.raises(AttributeError):
        revised.weighted_score = 0.9  # type: ignore[misc]


def test_revising_a_field_candidate_does_not_have_is_refused_as_replace_refuses_it():
    original = Candidate(memory=memory_record("m1", content="x"))

    with pytest.raises(TypeError, match="no field relevance, wieght"):
        original.revised(relevance=0.3, wieght=2.0)
    with pytest.raises(TypeError):
        replace(original, relevance=0.3)  # type: ignore[call-arg]


def test_a_candidate_made_with_of_equals_the_one_its_constructor_makes():
    memory = memory_record("m1", content="Deploys run on Tuesday")

    made = Candidate.of(memory, fused_score=0.4, found_by=("vector",), fused_absolute=0.25)

    assert made == Candidate(memory=memory, fused_score=0.4, found_by=("vector",), fused_absolute=0.25)
    assert [getattr(made, f.name) for f in fields(Candidate)] == [
        getattr(Candidate(memory=memory, fused_score=0.4, found_by=("vector",), fused_absolute=0.25), f.name)
        for f in fields(Candidate)
    ]
    with pytest.raises(AttributeError):
        made.fused_score = 0.9  # type: ignore[misc]


def test_making_a_candidate_with_a_field_it_does_not_have_is_refused():
    with pytest.raises(TypeError, match="no field fused"):
        Candidate.of(memory_record("m1", content="x"), fused=0.4)
