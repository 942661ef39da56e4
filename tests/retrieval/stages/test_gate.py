import json

import pytest

from retrieval.stages.gate import GateStage, classify
from retrieval.trace import GateDecided
from retrieval.types import RecallRequest
from storage.records import Scope
from tests.fakes import ScriptedLLM

SMALL_TALK = [
    "hi",
    "Hello!",
    "hey there :)",
    "thanks!",
    "Thank you so much",
    "ok",
    "okay, got it",
    "sounds good",
    "cool 👍",
    "lol",
    "good morning",
    "bye, see you later",
    "how are you?",
    "what's up",
    "",
    "   ",
    "?!",
]
REAL = [
    "deploy?",
    "why did the build fail",
    "thanks, how do I deploy billing?",
    "postgres",
    "what is the api rate limit",
    "ok so where are invoices stored",
    "hi, the tests are flaky again",
    "k8s",
    "404 on /login",
    "who owns auth?",
]


@pytest.mark.parametrize("query", SMALL_TALK)
def test_small_talk_is_gated(query):
    assert classify(query).retrieve is False


@pytest.mark.parametrize("query", REAL)
def test_any_content_word_means_retrieve(query):
    assert classify(query).retrieve is True


def request(query: str, llm=None) -> RecallRequest:
    return RecallRequest(
        query=query, scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15, llm=llm
    )


def test_a_gated_query_halts_the_pipeline_with_an_empty_context():
    output = GateStage("local")(request("thanks!"), ())
    assert output.halt and output.context == "" and output.candidates == ()
    assert output.events[0].retrieve is False and output.events[0].method == "local"


def test_the_gate_can_be_switched_off():
    output = GateStage("off")(request("thanks!"), ())
    assert output.halt is None and output.events == (GateDecided(True, "off", "the gate is switched off"),)


def answer(needs: bool, confidence: float) -> str:
    return json.dumps({"needs_memory": needs, "confidence": confidence, "reason": "small talk"})


def test_an_unreadable_llm_confidence_means_retrieve():
    llm = ScriptedLLM({"gate": [json.dumps({"needs_memory": False, "confidence": "high"})]})
    assert GateStage("llm")(request("lovely weather for a deploy", llm), ()).halt is None


def test_the_llm_gate_skips_only_with_high_confidence():
    sure = GateStage("llm")(
        request("lovely weather for a deploy", ScriptedLLM({"gate": [answer(False, 0.9)]})), ()
    )
    assert sure.halt is not None and sure.events[0].method == "llm"
    unsure = GateStage("llm")(
        request("lovely weather for a deploy", ScriptedLLM({"gate": [answer(False, 0.6)]})), ()
    )
    assert unsure.halt is None and unsure.events[0].retrieve is True


def test_an_unavailable_llm_means_retrieve_and_the_trace_says_why():
    output = GateStage("llm")(request("where are invoices", ScriptedLLM({})), ())
    assert output.halt is None and "LLM gate unavailable" in output.events[0].reason


def test_without_an_llm_the_local_classifier_decides():
    output = GateStage("llm")(request("where are invoices"), ())
    assert output.halt is None and "no LLM for the gate" in output.events[0].reason
    assert GateStage("llm")(request("thanks"), ()).halt is not None
