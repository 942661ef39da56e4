from tools.common import Caller
from tools.explain_ranking import ExplainRankingInput, explain_ranking
from tools.explain_text import LEFT_OUT_SHOWN, text_of
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, report_outcome

CALLER = Caller("claude-code", "ses_1")


def test_the_text_lists_the_context_in_ranked_order_then_what_was_left_out_and_why(runtime):
    texts = ["postgres connection pool size is 20", "postgres listens on 5432", "the office cat is Miso"]
    ids = [remember(RememberInput(content=text), runtime, CALLER).id for text in texts]
    recalled = recall(RecallInput(query="postgres pool size", top_k=1), runtime, CALLER)
    out = explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER)
    lines = text_of(out).splitlines()
    assert lines[0].startswith(f"Ranking of retrieval {out.retrieval_id} for 'postgres pool size' (")
    top = out.candidates[0]
    assert top.in_context and top.id == ids[0]
    # The floor's scale is not the relevance's (a trial read "matches the query at 0.25 (floor 0.15)" in
    # recall's note and found only "relevance 0.528" here): each match says both.
    assert lines[1] == (
        'The relevance floor is 0.1, on the scale of each match\'s "matches the query at" (not its relevance): '
        "below it a memory never enters the context."
    )
    # No report moved anything: final = relevance x weight 1.000.
    assert lines[2] == (
        f"[1] {ids[0]} · final {top.scores.final:.3f} = relevance {top.scores.relevance:.3f} x weight 1.000 · "
        f"matches the query at {top.scores.floor:.3f} · in the context at position [1] · "
        "'postgres connection pool size is 20'"
    )
    left = [c for c in out.candidates if not c.in_context]
    assert lines[3] == f"Left out ({len(left)}):"
    assert [line.split(" · ")[0] for line in lines[4 : 4 + len(left)]] == [
        f"[{c.rank + 1}] {c.id}" for c in left
    ]
    assert all(" · ranked below the top_k=1 cut · " in line for line in lines[4 : 4 + len(left)])
    assert lines[-1].startswith("Stages (ms): gate ")


def test_only_the_first_memories_left_out_are_listed_and_the_text_says_so(runtime):
    hosts = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    for host in [*hosts, "kilo", "lima", "mike"][: LEFT_OUT_SHOWN + 3]:
        remember(RememberInput(content=f"the postgres replica on {host} lags"), runtime, CALLER)
    recalled = recall(RecallInput(query="postgres replica lag", top_k=20, char_budget=300), runtime, CALLER)
    out = explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER)
    left = [c for c in out.candidates if not c.in_context]
    assert len(left) > LEFT_OUT_SHOWN
    text = text_of(out)
    assert (
        f"Left out ({len(left)}; the first {LEFT_OUT_SHOWN} here, every one in the structured content):"
        in text
    )
    assert left[LEFT_OUT_SHOWN - 1].id in text and left[LEFT_OUT_SHOWN].id not in text


def test_a_corroborated_memorys_sum_is_bracketed_before_what_multiplies_it(runtime):
    """A new user's trial read "relevance 0.901 + corroboration 0.100 x weight 0.250" as 0.901 + 0.025."""
    said = remember(RememberInput(content="We deploy on Tuesdays."), runtime, Caller("cursor", "ses_1")).id
    remember(RememberInput(content="we deploy on tuesdays"), runtime, Caller("claude-code", "ses_2"))
    recalled = recall(RecallInput(query="when do we deploy"), runtime, CALLER)
    out = explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER)
    [entry] = [c for c in out.candidates if c.id == said]
    s = entry.scores
    assert s.corroboration_boost == 0.1
    line = next(line for line in text_of(out).splitlines() if line.startswith(f"[{entry.rank + 1}] {said}"))
    assert f"final {s.final:.3f} = (relevance {s.relevance:.3f} + corroboration 0.100) x weight 1.000" in line


def test_a_memory_superseded_since_the_recall_says_so_and_by_what(runtime):
    """A trial: the text showed the stale 8443 first with no word that it had been replaced since."""
    old = remember(RememberInput(content="The payments API listens on port 8443"), runtime, CALLER).id
    recalled = recall(RecallInput(query="payments API port"), runtime, CALLER)
    new = remember(
        RememberInput(content="The payments API listens on port 9443", replaces=old), runtime, CALLER
    ).id
    text = text_of(explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER))
    line = next(line for line in text.splitlines() if line.startswith(f"[1] {old}"))
    following = text.splitlines()[text.splitlines().index(line) + 1]
    assert following == (
        f"    now superseded: replaced by {new} ('The payments API listens on port 9443'; supersede, explicit)"
    )


def test_a_fallback_backends_reason_is_left_to_the_structured_content(runtime):
    """A trial: every explanation's first line carried both fallbacks' reasons, 600 characters."""
    remember(RememberInput(content="postgres listens on 5432"), runtime, CALLER)
    recalled = recall(RecallInput(query="postgres port"), runtime, CALLER)
    out = explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER)
    reason = "sentence-transformers/all-MiniLM-L6-v2 is not cached and could not be downloaded (no network)"
    out = out.model_copy(update={"backends": {"embedder": f"hashed-v1:384 (offline fallback: {reason})"}})
    head = text_of(out).splitlines()[0]
    assert (
        head.endswith("; embedder hashed-v1:384 (offline fallback: `backends` says why)).")
        and reason not in head
    )


def test_an_episode_siblings_final_is_shown_as_what_it_took_from_the_memory_that_brought_it(runtime):
    """A new user's trial: a sibling read "final 0.594 = relevance 0.000 x weight 1.000 + neighbour 0.170",
    which sums to 0.170; its score is alpha (0.5) x the final of the memory that brought it."""
    # The cat first: a memory's search text holds the turn before it, which would match the query.
    cat = remember(
        RememberInput(content="the office cat is Miso", episode_id="onboarding"), runtime, CALLER
    ).id
    pool = remember(
        RememberInput(content="postgres connection pool size is 20", episode_id="onboarding"), runtime, CALLER
    ).id
    recalled = recall(RecallInput(query="postgres pool size", top_k=1), runtime, CALLER)
    out = explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER)
    by_id = {c.id: c for c in out.candidates}
    source, sibling = by_id[pool], by_id[cat]
    assert sibling.source == "sibling" and sibling.brought_by == pool
    s = sibling.scores
    lent = s.neighbourhood + s.answer_type
    # Expected by hand: score_propagation_alpha 0.5 x the source's final x min(1, weight 1.0), plus what was lent.
    assert abs((s.final - lent) - 0.5 * source.scores.final) < 1e-9
    line = next(line for line in text_of(out).splitlines() if line.startswith(f"[{sibling.rank + 1}] {cat}"))
    lent_text = "".join(
        f" + {name} {value:.3f}"
        for name, value in (("neighbour", s.neighbourhood), ("answer type", s.answer_type))
        if value
    )
    assert f"final {s.final:.3f} = {0.5 * source.scores.final:.3f} from its episode's {pool} " in line
    assert f"(alpha x that memory's final x min(1, weight 1.000)){lent_text} · " in line
    assert "relevance" not in line.split(" · ")[1]


def test_a_disputed_memory_says_so_and_by_which_as_the_context_did(runtime):
    """A trial: the context marked a memory DISPUTED, and the explanation's text said nothing of it."""
    old = remember(
        RememberInput(content="Feature flag checkout_v2 is enabled in staging"), runtime, CALLER
    ).id
    new = remember(
        RememberInput(content="Feature flag checkout_v2 is disabled in staging"), runtime, CALLER
    ).id
    recalled = recall(RecallInput(query="checkout_v2 flag in staging"), runtime, CALLER)
    text = text_of(explain_ranking(ExplainRankingInput(retrieval_id=recalled.retrieval_id), runtime, CALLER))
    [line] = [line for line in text.splitlines() if f"] {old} · " in line]
    assert f" · DISPUTED by {new} · 'Feature flag checkout_v2 is enabled in staging'" in line
    assert "DISPUTED" not in next(line for line in text.splitlines() if f"] {new} · " in line)


def test_with_weighting_off_the_weight_is_said_beside_the_arithmetic_not_in_it(tmp_path):
    """A trial, with the org's feedback_weighting_disabled: "final 0.814 = relevance 0.814 x weight 0.250"."""
    from server.config import OrgFeatures
    from tests.helpers import make_runtime, settings_for

    settings = settings_for(
        tmp_path / "db", org_features={"acme": OrgFeatures(feedback_weighting_disabled=True)}
    )
    runtime = make_runtime(settings)
    try:
        memory = remember(
            RememberInput(content="postgres listens on 5432", org_id="acme"), runtime, CALLER
        ).id
        recall(RecallInput(query="postgres port", org_id="acme"), runtime, CALLER)
        report_outcome(
            ReportOutcomeInput(outcome="failure", misleading_ids=[memory], org_id="acme"), runtime, CALLER
        )
        recalled = recall(
            RecallInput(query="postgres port", org_id="acme"), runtime, Caller("other", "ses_2")
        )
        out = explain_ranking(
            ExplainRankingInput(retrieval_id=recalled.retrieval_id, org_id="acme"),
            runtime,
            Caller("other", "ses_2"),
        )
        [line] = [line for line in text_of(out).splitlines() if line.startswith(f"[1] {memory}")]
        s = out.candidates[0].scores
        assert s.final == s.relevance
        assert line.startswith(
            f"[1] {memory} · final {s.final:.3f} = relevance {s.relevance:.3f} (its weight here, 0.250, not "
            "applied: feedback weighting is off) · "
        )
    finally:
        runtime.close()
