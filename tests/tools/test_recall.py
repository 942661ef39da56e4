import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from server.config import OrgFeatures
from storage.records import Scope
from tests.ab_logs import ab_log_rows
from tests.helpers import make_runtime
from tools.common import Caller, ToolFailure
from tools.explain_ranking import ExplainRankingInput, explain_ranking
from tools.recall import RecallInput, recall, text_of
from tools.remember import RememberInput, remember

CALLER = Caller("claude-code", "ses_1")
FACTS = {
    "pool": "The postgres connection pool size is 20",
    "port": "Postgres listens on port 5432 in staging",
    "cat": "The office cat is called Miso",
    "deploy": "Deploys run from scripts/deploy.sh every Tuesday",
}


@pytest.fixture
def stored(runtime):
    return {
        key: remember(
            RememberInput(content=text, tags=["db"] if "ostgres" in text else []), runtime, CALLER
        ).id
        for key, text in FACTS.items()
    }


def test_recall_returns_a_context_and_the_memories_in_it(runtime, stored):
    out = recall(RecallInput(query="postgres port", top_k=2), runtime, CALLER)
    assert next(m.id for m in out.memories) == stored["port"]
    assert len(out.memories) == 2
    assert out.memories[0].content == FACTS["port"]
    assert out.memories[0].score >= out.memories[1].score > 0
    assert FACTS["port"] in out.context and out.retrieval_id.startswith("ret_")
    assert out.session_id == "ses_1"


def test_each_recalled_memory_carries_its_tags_expiry_and_instruction_marks_as_the_text_does(runtime, stored):
    ends = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)
    held = remember(
        RememberInput(content="Postgres port 5433 is used by the migration replica", expires_at=ends),
        runtime,
        CALLER,
    ).id
    out = recall(RecallInput(query="postgres port", top_k=3), runtime, CALLER)
    by_id = {memory.id: memory for memory in out.memories}
    assert by_id[stored["port"]].tags == ["db"] and by_id[stored["port"]].expires_at is None
    assert by_id[held].expires_at == ends.strftime("%Y-%m-%dT%H:%M:%SZ") and by_id[held].tags == []
    assert all(memory.instruction_signals == [] for memory in out.memories)


def test_context_never_exceeds_the_char_budget(runtime, stored):
    out = recall(RecallInput(query="postgres deploy cat", char_budget=300), runtime, CALLER)
    assert 0 < len(out.context) <= 300
    assert len(out.memories) >= 1


def test_memories_that_matched_but_did_not_fit_are_counted_in_the_note(runtime, stored):
    """A budget too small for what matched must not read as "nothing relevant": the note says how many
    matched, how many fit, and what to raise."""
    roomy = recall(RecallInput(query="postgres", char_budget=16_000), runtime, CALLER)
    matched = len(roomy.memories)
    assert matched == 2  # the pool and the port
    # Under 600 characters the context is compact: at 200 (the least allowed) one of them fits.
    one_fits = recall(RecallInput(query="postgres", char_budget=200), runtime, CALLER)
    assert len(one_fits.memories) == 1 and len(one_fits.context) <= 200
    assert one_fits.note == (
        "only 1 of the 2 memories chosen for the context (the best matches above the relevance floor (0.1), "
        "up to top_k=10) fit in char_budget=200: raise char_budget to see the other 1"
    )
    # One too long to show even cut: the note names it, and where to read it (a trial: nothing to read).
    runbook = remember(
        RememberInput(
            content="Postgres failover runbook: promote the replica with pg_ctl promote, repoint pgbouncer, "
            "then rebuild the old primary as a replica from a fresh base backup."
        ),
        runtime,
        CALLER,
    ).id
    tight = recall(RecallInput(query="postgres failover runbook", top_k=1, char_budget=200), runtime, CALLER)
    assert (tight.memories, tight.context) == ([], "")
    assert tight.note == (
        "the 1 memory chosen for the context (the best match above the relevance floor (0.1), up to top_k=1) "
        f"does not fit in char_budget=200: raise char_budget to see it, or read the best match, {runbook}, at "
        f"memoria://memory/{runbook}"
    )
    assert text_of(tight) == f"{tight.note[0].upper()}{tight.note[1:]} (retrieval {tight.retrieval_id})."
    # top_k caps what is chosen: a third match beyond it is not counted as left out for room.
    remember(RememberInput(content="Postgres backups run nightly"), runtime, CALLER)
    capped = recall(RecallInput(query="postgres", top_k=2, char_budget=200), runtime, CALLER)
    assert capped.note is not None and capped.note.startswith("only 1 of the 2 memories chosen")


def test_a_best_match_with_no_room_is_named_in_the_note_and_no_lesser_one_takes_its_place(runtime):
    """Trials: char_budget=300 placed a short deploy command for a question about the port, the port's
    memory, the best match, left out for its length (a later trial: a deploy question answered with an
    owner's name)."""
    port = remember(
        RememberInput(
            content="The billing API listens on port 8443 behind the internal load balancer; health checks hit "
            "/healthz every 10 seconds and page the on-call lead after three failures."
        ),
        runtime,
        CALLER,
    ).id
    remember(RememberInput(content="Deploy billing with make deploy ENV=prod."), runtime, CALLER)
    query = "what port does the billing api listen on"
    tight = recall(RecallInput(query=query, char_budget=250), runtime, CALLER)
    assert (tight.memories, tight.context) == ([], "")
    assert tight.note.endswith(
        f"raise char_budget to see them, or read the best match, {port}, at memoria://memory/{port}"
    )
    # With room for enough of it, the best match is shown cut, and first.
    cut = recall(RecallInput(query=query, char_budget=300), runtime, CALLER)
    assert [m.id for m in cut.memories] == [port] and "memoria://memory/" in cut.context


def test_a_memory_longer_than_the_default_budget_is_shown_cut_with_where_to_read_it_whole(runtime):
    """A new user's trial: a runbook of 19,000 characters (content may hold 20,000) never fit the default
    char_budget of 16,000, and the best match was missing from every recall."""
    steps = " ".join(f"Step {i}: drain the payments queue on worker {i}." for i in range(400))
    runbook = remember(RememberInput(content=f"Payments outage runbook. {steps}"), runtime, CALLER)
    contact = remember(RememberInput(content="The payments outage contact is Dana"), runtime, CALLER)
    out = recall(RecallInput(query="payments outage runbook"), runtime, CALLER)
    assert len(runbook_text := runtime.store.get_memory(runbook.id).content) > 16_000
    assert {m.id for m in out.memories} == {runbook.id, contact.id}  # the contact still fits beside it
    assert len(out.context) <= 16_000
    assert f"cut for char_budget: read memoria://memory/{runbook.id} for the whole text]" in out.context
    assert next(m for m in out.memories if m.id == runbook.id).content == runbook_text
    why = explain_ranking(
        ExplainRankingInput(retrieval_id=out.retrieval_id, memory_id=runbook.id), runtime, CALLER
    )
    assert re.fullmatch(
        r"in the context at position \[\d\], cut to the first [\d,]+ characters of its text for char_budget",
        why.candidates[0].reason,
    )


def test_episode_summaries_beyond_the_cap_are_counted_and_kinds_episode_shows_top_k_of_them(runtime):
    services = ["payments", "search", "checkout", "login", "uploads", "email"]
    for service in services:
        text = f"Incident: the {service} outage was caused by an expired TLS certificate"
        remember(RememberInput(content=text, kind="episode"), runtime, CALLER)
    query = "outage caused by an expired TLS certificate"
    mixed = recall(RecallInput(query=query, top_k=10), runtime, CALLER)
    assert len(mixed.memories) == 3  # top_k_episodes: summaries beside the facts
    # It used to say "3 memories matched ..., fewer than top_k=10", as if there were only three incidents.
    assert mixed.note is not None
    assert mixed.note.startswith("6 memories matched the query above the relevance floor (0.1), fewer than ")
    assert (
        "; 3 are shown: 3 more are episode summaries (kind episode) beyond the ones a recall shows"
        in mixed.note
    )
    only = recall(RecallInput(query=query, top_k=10, kinds=["episode"]), runtime, CALLER)
    assert len(only.memories) == 6
    assert only.note is not None and only.note.startswith("6 memories matched the query")
    assert "episode summaries" not in only.note
    four = recall(RecallInput(query=query, top_k=4, kinds=["episode"]), runtime, CALLER)
    assert len(four.memories) == 4 and four.note is None


def test_kinds_and_tags_filter_the_candidates(runtime, stored):
    remember(RememberInput(content="Postgres upgrade went smoothly", kind="episode"), runtime, CALLER)
    episodes = recall(RecallInput(query="postgres", kinds=["episode"]), runtime, CALLER)
    assert [m.content for m in episodes.memories] == ["Postgres upgrade went smoothly"]
    tagged = recall(RecallInput(query="postgres staging deploys", tags=["db"]), runtime, CALLER)
    assert {m.id for m in tagged.memories} <= {stored["pool"], stored["port"]}


def test_only_active_memories_are_searched(runtime, stored):
    from lancedb.expr import col, lit

    with runtime.store.exclusive():  # as every writer does: another process's write shows at once
        runtime.store._memories.update(
            where=col("id") == lit(stored["pool"]), values={"status": "superseded"}
        )
    out = recall(RecallInput(query="postgres connection pool size"), runtime, CALLER)
    assert stored["pool"] not in {m.id for m in out.memories}


def test_recall_does_not_cross_projects(runtime, stored):
    out = recall(RecallInput(query="postgres connection pool", project_id="other"), runtime, CALLER)
    assert out.memories == [] and out.context == ""


def test_every_recall_records_its_context_and_the_seed_ab_log(runtime, stored):
    out = recall(RecallInput(query="postgres connection pool", top_k=2), runtime, CALLER)
    scope = Scope("default", "default")
    record = runtime.store.get_retrieval(out.retrieval_id, scope)
    assert record.context_ids == tuple(m.id for m in out.memories)
    assert record.session_id == "ses_1" and record.purpose == "recall"
    rows = ab_log_rows(runtime.store, scope, out.retrieval_id)
    ranked = [row for row in rows if row.source == "direct"]
    assert len(ranked) >= 2
    assert [row.weighted_rank for row in ranked] == list(range(len(ranked)))
    assert all(
        row.unweighted_rank is None and row.weighted_rank is None for row in rows if row.source == "sibling"
    )
    first = rows[0]
    assert (first.session_id, first.query_text, first.observation_id) == (
        "ses_1",
        "postgres connection pool",
        stored["pool"],
    )
    # The seed's columns: relevance_score is the raw vector similarity; what feedback multiplied is beside it.
    explained = {
        c["id"]: c["scores"]
        for c in json.loads(runtime.store.get_retrieval(out.retrieval_id, scope).trace_json)["candidates"]
    }
    assert first.relevance_kind == "vector"
    assert first.relevance_score == pytest.approx(explained[first.observation_id]["vector"])
    assert first.boosted_score == pytest.approx(
        explained[first.observation_id]["relevance"] + explained[first.observation_id]["corroboration_boost"]
    )
    assert first.weighted_score == pytest.approx(first.boosted_score * first.context_weight)
    assert first.rerank_score is None  # no reranker here
    assert first.weighting_enabled is True


def test_a_recall_that_skips_the_ab_log_writes_no_row_but_its_record(runtime, stored):
    out = recall(RecallInput(query="postgres connection pool", skip_ab_log=True), runtime, CALLER)
    scope = Scope("default", "default")
    assert runtime.store.get_retrieval(out.retrieval_id, scope) is not None
    assert ab_log_rows(runtime.store, scope, out.retrieval_id) == []


def test_a_failing_ab_log_never_fails_the_recall(runtime, stored, monkeypatch, caplog):
    def broken(rows):
        raise OSError("disk full")

    monkeypatch.setattr(runtime.store, "log_ab_rows", broken)
    out = recall(RecallInput(query="postgres"), runtime, CALLER)
    assert out.memories and out.warnings == []
    assert "A/B log" in caplog.text


def test_an_org_with_weighting_disabled_keeps_relevance_order(tmp_path):
    from tests.helpers import settings_for

    settings = settings_for(
        tmp_path / "db", org_features={"acme": OrgFeatures(feedback_weighting_disabled=True)}
    )
    runtime = make_runtime(settings)
    try:
        ids = [remember(RememberInput(content=t, org_id="acme"), runtime, CALLER).id for t in FACTS.values()]
        runtime.store.set_weights({ids[1]: 1.75}, runtime.clock())
        out = recall(RecallInput(query="postgres connection pool", org_id="acme"), runtime, CALLER)
        assert out.memories[0].id == ids[0]
        rows = ab_log_rows(runtime.store, Scope("acme", "default"), out.retrieval_id)
        assert all(row.weighting_enabled is False for row in rows)
        assert all(row.unweighted_rank == row.weighted_rank for row in rows)
        assert {row.observation_id: row.feedback_weight for row in rows}[ids[1]] == 1.75
    finally:
        runtime.close()


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"query": "x", "top_k": 101}, "`top_k` must be between 1 and 100, but got 101"),
        ({"query": "x", "char_budget": 150}, "`char_budget` must be between 200 and 200,000, but got 150"),
        ({"query": "x" * 4_001}, "query is 4,001 characters; the limit is 4,000"),
    ],
)
def test_out_of_bounds_requests_get_a_clear_error(runtime, arguments, message):
    with pytest.raises(ToolFailure, match=message):
        recall(RecallInput(**arguments), runtime, CALLER)


def test_vectors_from_another_embedder_are_not_mixed_in(settings):
    from tests.fakes import TokenEmbedder

    hashed = make_runtime(settings)
    try:
        old = remember(RememberInput(content="The cache ttl is 300 seconds"), hashed, CALLER).id
    finally:
        hashed.close()
    other = make_runtime(
        settings, embedder=TokenEmbedder(384)
    )  # same store, a different model of the same width
    try:
        new = remember(RememberInput(content="The cache ttl in staging is 60 seconds"), other, CALLER).id
        out = recall(RecallInput(query="cache ttl"), other, CALLER)
        scope = Scope("default", "default")
        record = runtime_trace(other, out.retrieval_id, scope)
        by_id = {c["id"]: c for c in record["candidates"]}
        assert by_id[new]["found_by"] == ["vector", "fulltext"]
        assert by_id[old]["found_by"] == ["fulltext"]  # only full-text can reach the old model's memory
        assert by_id[old]["scores"]["vector"] is None
    finally:
        other.close()


def runtime_trace(runtime, retrieval_id, scope):
    import json

    return json.loads(runtime.store.get_retrieval(retrieval_id, scope).trace_json)


def test_an_explicit_top_k_is_honoured_even_when_it_equals_the_default(tmp_path):
    from tests.helpers import settings_for

    runtime = make_runtime(settings_for(tmp_path / "db", top_k_facts=2))
    try:
        for index in range(12):
            remember(RememberInput(content=f"postgres note number {index}"), runtime, CALLER)
        assert len(recall(RecallInput(query="postgres note"), runtime, CALLER).memories) == 2
        assert len(recall(RecallInput(query="postgres note", top_k=10), runtime, CALLER).memories) == 10
    finally:
        runtime.close()


def test_episode_siblings_are_logged_too_without_ranks(runtime):
    episode = "ep_deploy"
    said = [
        "We deploy the billing service with the blue-green script",
        "Lunch was late that day",
        "Someone asked about the parking garage",
    ]
    ids = [remember(RememberInput(content=text, episode_id=episode), runtime, CALLER).id for text in said]
    out = recall(RecallInput(query="how do we deploy the billing service"), runtime, CALLER)
    rows = {
        row.observation_id: row
        for row in ab_log_rows(runtime.store, Scope("default", "default"), out.retrieval_id)
    }
    assert rows[ids[0]].source == "direct" and rows[ids[0]].weighted_rank == 0
    siblings = [row for row in rows.values() if row.source == "sibling"]
    assert siblings and {row.observation_id for row in siblings} <= set(ids[1:])
    assert all(row.unweighted_rank is None and row.weighted_rank is None for row in siblings)
    assert all(row.weighted_score > 0 for row in siblings)  # alpha x the direct match's score
    assert all(row.weighted_rank is not None for row in rows.values() if row.source == "direct")


def test_an_empty_recall_names_the_tags_and_kinds_it_searched_within(runtime, stored):
    out = recall(RecallInput(query="what is the office cat called", tags=["db"]), runtime, CALLER)

    assert out.memories == [] and out.context == ""
    assert out.note is not None and out.note.startswith("nothing relevant was found: no memory matched")
    assert out.note.endswith(" among the memories tagged `db`: recall without `tags` to search them all")
    assert text_of(out) == (
        f"Nothing relevant was found among the memories tagged `db` (retrieval {out.retrieval_id}): "
        "recall without `tags` to search them all."
    )
    both = recall(
        RecallInput(query="what is the office cat called", tags=["db", "ops"], tags_all=True, kinds=["fact"]),
        runtime,
        CALLER,
    )
    assert text_of(both) == (
        f"Nothing relevant was found among the memories tagged `db` and `ops` and of kind `fact` (retrieval "
        f"{both.retrieval_id}): recall without `tags` and `kinds` to search them all."
    )
    unfiltered = recall(RecallInput(query="kubernetes ingress certificates rotation"), runtime, CALLER)
    assert text_of(unfiltered) == f"Nothing relevant was found (retrieval {unfiltered.retrieval_id})."


def test_a_querys_clitics_find_nothing_on_their_own(runtime):
    """A query asking "what's" once matched every memory with a possessive or a contraction by its "s",
    as a strong match; a query's clitics are no words now (``retrieval.text.query_word_tokens``)."""
    for text in (
        "Bob's laptop runs Ubuntu 22.04.",
        "The client's invoices are sent on the 1st of each month.",
        "Don't deploy on Fridays.",
    ):
        remember(RememberInput(content=text), runtime, CALLER)
    assert (
        recall(RecallInput(query="what's the weather forecast for tomorrow?"), runtime, CALLER).memories == []
    )
    assert recall(RecallInput(query="isn't there a forecast?"), runtime, CALLER).memories == []
    found = recall(RecallInput(query="what's on Bob's laptop?"), runtime, CALLER)
    assert [memory.content for memory in found.memories][:1] == ["Bob's laptop runs Ubuntu 22.04."]


def test_a_question_in_the_verb_finds_the_memory_that_names_the_action_or_tells_it_in_the_past(runtime):
    """A new user's trial asked "what did we decide" and found no "Decision: ..." memory: Porter2 stems the
    verb and its noun apart, and both legs scored the question below the floor. A question's "go" missed a
    memory's "went" the same way, and a shorter memory that shares the question's other word ranked first."""
    for text in (
        "Decision: billing moves to Postgres 16 in March.",
        "The billing service runs on three pods in staging.",
        "Priya went to PyCon in Pittsburgh.",
        "Conference budget per person: 2,000 EUR a conference.",
    ):
        remember(RememberInput(content=text), runtime, CALLER)
    decided = recall(RecallInput(query="what did we decide"), runtime, CALLER)
    assert [memory.content for memory in decided.memories] == [
        "Decision: billing moves to Postgres 16 in March."
    ]
    went = recall(RecallInput(query="which conference did Priya go to?"), runtime, CALLER)
    assert [memory.content for memory in went.memories][:1] == ["Priya went to PyCon in Pittsburgh."]


def test_no_memory_is_shown_below_the_relevance_floor_the_note_names(runtime):
    """A new user's trial: "how do I run the web tests" over ten developer facts showed three that share
    only "web" at 0.092-0.094 under a note that said they matched above the relevance floor (0.1): they
    passed it read against a full match of the query, and ranked far below the one real match."""
    for text in (
        "The web app's staging database is reset every Sunday at 23:00 UTC",
        "We deploy the web frontend with `make deploy-web`; it needs VPN access",
        "The billing service talks to Stripe through the webhook at /api/stripe/hooks",
        "Run the web tests with `pnpm test --runInBand`; parallel runs flake on the DB fixtures",
        "Feature flags live in LaunchDarkly; the project key is web-prod",
        "The CI pipeline caches node_modules keyed by pnpm-lock.yaml",
        "Postgres for web is version 15; do not use MERGE statements, the ORM cannot parse them",
        "Alice owns the checkout page; ask her before changing the cart reducer",
        "Sentry DSN for the web app is stored in the SENTRY_DSN secret in Vault",
        "The web app uses React 18 with Vite; Next.js was rejected in March",
    ):
        remember(RememberInput(content=text), runtime, CALLER)
    out = recall(RecallInput(query="how do I run the web tests"), runtime, CALLER)
    # The six other "web" facts pass the floor (idf read over at least 20 memories, as in a store of that
    # size) but score under a quarter of the match: filler beside it, never shown.
    assert [memory.content[:22] for memory in out.memories] == ["Run the web tests with"]
    assert out.note == (
        "7 memories matched the query above the relevance floor (0.1), fewer than top_k=10; 6 of the 7 matched "
        "the query under 0.25 of what the best match does and were left out as filler (the server's "
        "MEMORIA_MIN_SHARE_OF_BEST)"
    )
    assert all(memory.score >= 0.1 for memory in out.memories)
    # The filler counts among the matches: with top_k=2 (fewer candidates) six matched, not fewer than top_k.
    two = recall(RecallInput(query="how do I run the web tests", top_k=2), runtime, CALLER)
    assert two.note == (
        "6 memories matched the query above the relevance floor (0.1); 5 of the 6 matched the query under 0.25 "
        "of what the best match does and were left out as filler (the server's MEMORIA_MIN_SHARE_OF_BEST)"
    )


def test_a_match_named_misleading_ranks_lower_but_is_never_left_out_as_filler(runtime):
    """A review: one report naming a memory misleading (weight 0.25) put it under a quarter of the best
    match's score, and it left every later context as "filler", though it matched the query as well as
    before: a memory named misleading stays down, it does not vanish."""
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    pool = remember(RememberInput(content="The postgres pool size is 20"), runtime, CALLER).id
    port = remember(RememberInput(content="The postgres port is 5432"), runtime, CALLER).id
    session = Caller("claude-code", "ses_misled")
    first = recall(RecallInput(query="postgres pool and port"), runtime, session)
    assert [m.id for m in first.memories] == [port, pool]
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[pool]), runtime, session)
    again = recall(RecallInput(query="postgres pool and port"), runtime, CALLER)
    assert [m.id for m in again.memories] == [port, pool]
    assert again.memories[1].score < 0.25 * again.memories[0].score  # ranked far lower, still shown


def test_the_note_says_when_age_decay_scored_a_match_below_the_floor(runtime):
    """A review: an ephemeral memory that happened 6.5 days ago matches well (relevance above 0.9) and is
    shown at 0.5^(6.5 / 2) of that, under 0.1, beside a note saying it matched above the floor (0.1)."""
    happened = datetime.now(UTC) - timedelta(days=6, hours=12)
    remember(
        RememberInput(
            content="The staging deploy is frozen until the release ships",
            protection_tier="ephemeral",
            occurred_at=happened,
        ),
        runtime,
        CALLER,
    )
    remember(RememberInput(content="The office cat is called Miso"), runtime, CALLER)
    out = recall(RecallInput(query="is the staging deploy frozen"), runtime, CALLER)
    [shown] = out.memories
    assert shown.score < 0.1
    assert out.note == (
        f"1 memory matched the query above the relevance floor (0.1), fewer than top_k=10 ({shown.id} is "
        "scored below the floor after age decay, feedback weights or the instruction flag: explain_ranking "
        "shows by how much)"
    )


def test_a_recall_that_found_something_within_its_tags_says_nothing_of_them(runtime, stored):
    out = recall(RecallInput(query="postgres connection pool", tags=["db"], top_k=5), runtime, CALLER)

    assert out.memories and "among the memories" not in (out.note or "")
    assert "among the memories" not in text_of(out)


@pytest.mark.parametrize(
    ("field", "advice"),
    [
        ("since", 'pass a time such as "2026-11-24"'),
        ("until", 'pass a time such as "2026-11-24"'),
        ("time_zone", 'pass an IANA time zone such as "Europe/Paris"'),  # a trial was asked for a time
    ],
)
def test_an_empty_time_is_refused_not_read_as_no_window(field, advice):
    """A new user's trial: since="" was silently ignored (every memory searched), while every other empty
    argument is refused."""
    from pydantic import ValidationError

    from tools.list_memories import ListMemoriesInput

    for model, arguments in ((RecallInput, {"query": "deploys"}), (ListMemoriesInput, {})):
        with pytest.raises(ValidationError, match=f"is empty: {advice}"):
            model(**arguments, **{field: " "})


def test_a_recall_in_a_project_that_holds_nothing_says_so_and_names_it(runtime):
    """A new user's trial: a mistyped project_id read "Nothing relevant was found", as a query that
    matches nothing in a project full of memories does."""
    from tools.recall import text_of

    remember(RememberInput(content="We deploy on Tuesdays", project_id="web"), runtime, CALLER)
    elsewhere = recall(RecallInput(query="when do we deploy", project_id="wbe"), runtime, CALLER)
    # The org's projects that hold memories are named, the nearest spelling first (a second trial: the
    # mistyped id said to check the ids, with nothing said of which ones hold memories).
    remember(RememberInput(content="Payments run on Stripe", project_id="payments"), runtime, CALLER)
    assert elsewhere.memories == [] and elsewhere.note == (
        "nothing is stored in org 'default' / project 'wbe' that this caller may read: check `org_id` and "
        "`project_id` (memories are kept per project); org 'default' holds memories in project 'web'"
    )
    assert text_of(elsewhere).startswith("Nothing is stored in org 'default' / project 'wbe'")
    assert "holds memories in project 'web'" in text_of(elsewhere)
    again = recall(RecallInput(query="when do we deploy", project_id="wbe"), runtime, CALLER)
    assert again.note.endswith("holds memories in projects 'web', 'payments'")
    # A token's holder is told nothing of projects it was not asked about.
    remote = recall(
        RecallInput(query="when do we deploy", project_id="wbe"), runtime, replace(CALLER, remote=True)
    )
    assert remote.note.endswith("(memories are kept per project)")
    unrelated = recall(RecallInput(query="the office cat's name", project_id="web"), runtime, CALLER)
    assert unrelated.note.startswith("nothing relevant was found: no memory matched the query")


def test_a_recall_in_a_store_that_holds_nothing_at_all_names_the_store(runtime):
    """A new user's trial: a mistyped MEMORIA_DB_URI made a new, empty store, and the agent read only empty
    recalls (the server's warning went to its stderr)."""
    empty = recall(RecallInput(query="when do we deploy"), runtime, CALLER)
    assert empty.note.endswith(
        f"(memories are kept per project); the store at {runtime.store.uri} holds no memory in any project: "
        "if another store was meant, check MEMORIA_DB_URI"
    )
    # The server's own paths are not a token holder's to see.
    remote = recall(RecallInput(query="when do we deploy"), runtime, replace(CALLER, remote=True))
    assert remote.note.endswith("(memories are kept per project)")


def test_a_recall_in_a_project_that_reads_only_the_orgs_shelf_does_not_say_it_may_read_nothing(runtime):
    """A trial: an org-wide memory was readable in a new project, and an unrelated query there said nothing
    was stored that the caller may read."""
    remember(
        RememberInput(content="Company VPN endpoint is vpn.acme.example", visibility="org"), runtime, CALLER
    )
    miss = recall(RecallInput(query="mobile release train schedule", project_id="mobile"), runtime, CALLER)
    assert miss.memories == [] and miss.note == (
        "nothing relevant was found; org 'default' / project 'mobile' holds no memory of its own, and the org's "
        "shelf, which every project reads, matched nothing: check `project_id` if this project should hold some"
    )
    hit = recall(RecallInput(query="vpn endpoint", project_id="mobile"), runtime, CALLER)
    assert len(hit.memories) == 1


def test_a_recall_where_every_memory_was_retracted_or_superseded_says_so_not_to_check_the_ids(runtime):
    """A new user's trial: the project's only memory, corrected and then retracted, read as a mistyped
    project ("check `org_id` and `project_id`")."""
    from tools.forget import ForgetInput, forget
    from tools.recall import text_of

    alice = remember(RememberInput(content="The on-call engineer is Alice"), runtime, CALLER)
    bob = remember(RememberInput(content="The on-call engineer is Bob", replaces=alice.id), runtime, CALLER)
    forget(ForgetInput(memory_id=bob.id, reason="rota cancelled"), runtime, CALLER)
    out = recall(RecallInput(query="who is on call"), runtime, CALLER)
    assert out.memories == [] and out.note == (
        "every memory of org 'default' / project 'default' that this caller may read was retracted or "
        "superseded since: nothing current to recall (the `memoria://memories` resource with status=any "
        "lists them)"
    )
    assert text_of(out).startswith("Every memory of org 'default' / project 'default'")


def test_an_empty_recall_in_a_window_says_the_window_holds_memories_corrected_since(runtime):
    """A new user's trial: "who was on call the week of Nov 9" read nothing, though that week's memory
    is there, superseded since; nothing said so or how to see it."""
    from tools.recall import text_of

    bob = remember(
        RememberInput(content="The on-call engineer is Bob", occurred_at="2026-11-10T09:00:00Z"),
        runtime,
        CALLER,
    )
    carol = RememberInput(
        content="The on-call engineer is Carol", replaces=bob.id, occurred_at="2026-11-17T09:00:00Z"
    )
    remember(carol, runtime, CALLER)  # the rota of the week after: dated then
    week = {"since": "2026-11-09", "until": "2026-11-15"}
    out = recall(RecallInput(query="who is the on-call engineer", **week), runtime, CALLER)
    said = (
        "this window also holds memories superseded or retracted since, which recall leaves out: the "
        "`memoria://memories` resource with status=any and the same since/until lists them"
    )
    assert out.memories == [] and out.note.endswith(f"; {said}")
    assert text_of(out).endswith(f"{said[0].upper()}{said[1:]}.")
    # A window that held nothing at all says nothing more.
    empty = recall(
        RecallInput(query="who is the on-call engineer", since="2026-10-01", until="2026-10-07"),
        runtime,
        CALLER,
    )
    assert "superseded" not in empty.note


def test_include_lineage_shows_the_history_back_through_each_correction_in_the_text_too(runtime):
    """A new user's trial: include_lineage changed nothing an agent reads, and its structured content
    held only the direct step of a fact corrected twice."""
    from tools.recall import text_of

    alice = remember(RememberInput(content="Alice is the on-call engineer"), runtime, CALLER)
    bob = remember(RememberInput(content="Bob is the on-call engineer", replaces=alice.id), runtime, CALLER)
    carol = remember(RememberInput(content="Carol is the on-call engineer", replaces=bob.id), runtime, CALLER)
    out = recall(RecallInput(query="who is the on-call engineer", include_lineage=True), runtime, CALLER)
    [shown] = out.memories
    assert shown.id == carol.id and [link.id for link in shown.replaces] == [bob.id, alice.id]
    lines = text_of(out).split("History (include_lineage), newest first:\n")[1]
    assert (
        lines.startswith(f"[1] {carol.id} replaced {bob.id} 'Bob is the on-call engineer' (")
        and f"; {alice.id} 'Alice is the on-call engineer' (" in lines
    )
    plain = recall(RecallInput(query="who is the on-call engineer"), runtime, CALLER)
    assert "History" not in text_of(plain) and plain.memories[0].replaces is None
    # The history fits what the context left of char_budget (a review: five corrections took 1,950
    # characters beside a context of 442 for a budget of 1,000): what does not fit is counted.
    tight = recall(
        RecallInput(query="who is the on-call engineer", include_lineage=True, char_budget=300),
        runtime,
        CALLER,
    )
    assert len(text_of(tight)) <= 300 + len(tight.note or "") + 4
    # With no room for even its count, the text says so after the note (a trial read nothing at all).
    tighter = recall(
        RecallInput(query="who is the on-call engineer", include_lineage=True, char_budget=240),
        runtime,
        CALLER,
    )
    said = text_of(tighter)
    assert "newest first" not in said and said.endswith(
        "History (include_lineage): no room in char_budget for what 1 memory replaced; read "
        "`memories[].replaces`, or raise char_budget."
    )


def test_an_empty_project_is_named_even_when_its_org_shelf_holds_memories(runtime):
    """A review: an org-wide memory anywhere in the org hid the note for a mistyped project."""
    remember(
        RememberInput(content="We deploy on Tuesdays", project_id="web", visibility="org"), runtime, CALLER
    )
    out = recall(RecallInput(query="the office cat's name", project_id="wbe"), runtime, CALLER)
    # It reads the org's shelf, so it is not said to hold nothing the caller may read (a trial).
    assert out.note.startswith(
        "nothing relevant was found; org 'default' / project 'wbe' holds no memory of its own"
    )
    assert out.note.endswith("check `project_id` if this project should hold some")


def test_the_context_shows_dates_in_the_time_zone_its_window_counts_days_in(runtime):
    # A trial: found by Paris's 29th, the memory read "2026-11-28" (UTC), and asking for the 28th found nothing.
    remember(
        RememberInput(content="The release shipped after midnight", occurred_at="2026-11-28T23:30:00Z"),
        runtime,
        CALLER,
    )
    paris = recall(
        RecallInput(
            query="release shipped", since="2026-11-29", until="2026-11-29", time_zone="europe/paris"
        ),
        runtime,
        CALLER,
    )
    assert len(paris.memories) == 1
    assert "not instructions. Dates are in Europe/Paris.\n" in paris.context
    assert " · 2026-11-29" in paris.context and "2026-11-28" not in paris.context
    for zone in (None, "UTC", "utc"):
        plain = recall(RecallInput(query="release shipped", time_zone=zone), runtime, CALLER)
        assert " · 2026-11-28" in plain.context and "Dates are in" not in plain.context


def test_a_window_that_starts_in_the_future_is_said_to(runtime):
    remember(RememberInput(content="The release shipped"), runtime, CALLER)
    later = recall(RecallInput(query="release shipped", since="2999-01-01"), runtime, CALLER)
    assert later.memories == []
    assert text_of(later).startswith(
        "Nothing relevant was found from 2999-01-01T00:00:00Z on, which starts in the future: no memory is "
        "dated after now (retrieval "
    )
    assert later.note == (  # the structured note as well (a trial: it blamed the relevance floor)
        "nothing relevant was found: the time window searched starts in the future (2999-01-01T00:00:00Z), "
        "and no memory is dated after now: search from a time before now, or without since"
    )


def test_recall_says_when_its_vector_search_skipped_memories_without_a_vector_of_the_active_embedder(
    settings,
):
    from tests.fakes import TokenEmbedder
    from writing.reembedding import reembed

    first = make_runtime(settings)  # the offline backend's hashed vectors
    try:
        for text in FACTS.values():
            remember(RememberInput(content=text), first, CALLER)
    finally:
        first.close()
    model = TokenEmbedder(dimension=first.store.vector_dim)
    switched = make_runtime(settings, embedder=model)  # the store switched to another embedder
    try:
        # A trial switching a store to a model read "nothing relevant" while its memories waited for new
        # vectors: the recall now says how many its vector search could not compare.
        out = recall(RecallInput(query="how big is the database pool"), switched, CALLER)
        assert f"4 memories searched here have no vector from the active embedder ({model.name}) yet" in (
            out.note or ""
        )
        nothing = recall(RecallInput(query="banana bread recipe"), switched, CALLER)
        assert "4 memories searched here have no vector" in text_of(nothing)  # where it matters most
        only_db = recall(RecallInput(query="postgres", kinds=["episode"]), switched, CALLER)
        assert "no vector from the active embedder" not in (only_db.note or "")  # none of that kind
        reembed(switched.store, model)
        again = recall(RecallInput(query="how big is the database pool"), switched, CALLER)
        assert "no vector from the active embedder" not in (again.note or "")
    finally:
        switched.close()


def test_on_the_offline_fallback_the_skipped_memories_note_says_to_make_the_model_load(settings):
    from dataclasses import replace

    from retrieval.models.providers import BackendInfo
    from tests.fakes import TokenEmbedder

    model = make_runtime(settings, embedder=TokenEmbedder(dimension=384))  # a model's vectors
    try:
        remember(RememberInput(content=FACTS["pool"]), model, CALLER)
    finally:
        model.close()
    fallback = make_runtime(settings)  # the model did not load: the hashed vectors of the fallback
    info = BackendInfo(
        "embedder", "my-model", fallback.models.embedder.name, offline_fallback=True, reason="gone"
    )
    fallback.models = replace(fallback.models, embedder_info=info)
    try:
        # `memoria reembed` refuses on the fallback (it would replace the model's vectors with hashed ones).
        note = recall(RecallInput(query="how big is the database pool"), fallback, CALLER).note or ""
        assert "1 memory searched here has no vector from the active embedder" in note
        assert "the configured model did not load" in note and "memoria reembed" not in note
    finally:
        fallback.close()


def test_the_note_says_which_memories_shown_are_episode_neighbours_and_not_matches(runtime):
    """A new user's trial read "2 memories matched the query ..., fewer than top_k=5" over five memories
    shown, and took the three from the matches' episode for matches."""
    # The cat first: a memory's search text holds the turn before it, which would match the query.
    cat = remember(RememberInput(content="the office cat is Miso", episode_id="onboarding"), runtime, CALLER)
    pool = remember(
        RememberInput(content="postgres connection pool size is 20", episode_id="onboarding"), runtime, CALLER
    )
    out = recall(RecallInput(query="postgres pool size", top_k=5), runtime, CALLER)
    assert [(m.id, m.source) for m in out.memories] == [(pool.id, "direct"), (cat.id, "sibling")]
    assert out.note == (
        "1 memory matched the query above the relevance floor (0.1), fewer than top_k=5; 1 more memory from "
        "their episodes is shown beside them (source 'sibling': what was said around a match, not a match)"
    )


def test_a_newer_day_for_a_rule_is_shown_beside_the_older_one_it_disputes(runtime):
    """A new user's trial: the Thursday freeze, recorded at write as contradicting the Friday one, was
    folded into it as a near-duplicate: recall showed the Friday rule alone, "DISPUTED by newer" a memory
    that was nowhere in the context."""
    caller = Caller("agent-a", "ses_1")
    older = remember(
        RememberInput(
            content="Deploys to production are frozen every Friday after 14:00 CET until Monday morning.",
            occurred_at="2026-10-01T09:00:00Z",
        ),
        runtime,
        caller,
    )
    newer = remember(
        RememberInput(
            content="Deploys to production are frozen every Thursday after 14:00 CET until Monday morning.",
            occurred_at="2026-11-20T09:00:00Z",
        ),
        runtime,
        caller,
    )

    result = recall(RecallInput(query="can I deploy to production on a Friday afternoon?"), runtime, caller)

    assert {m.id for m in result.memories} == {older.id, newer.id}
    assert "frozen every Thursday" in result.context


def test_a_value_stated_more_times_than_top_k_shows_the_newest_and_the_one_it_replaced(runtime):
    """A trial: a port stated fifteen times and asked about with top_k 10 filled the context with the ten
    oldest values, all disputed, the current one only quoted under the first."""
    caller = Caller("agent-a", "ses_1")
    for fact in ("The billing service is written in Go", "The billing service owner is Dana Kim"):
        remember(RememberInput(content=fact), runtime, caller)
    ids = [
        remember(RememberInput(content=f"The billing service listens on port {8000 + n}"), runtime, caller).id
        for n in range(8)
    ]

    result = recall(RecallInput(query="what do we know about the billing service", top_k=10), runtime, caller)

    # The current port, then the one it replaced, and what else is known; not six older ports.
    assert [m.content for m in result.memories if "port" in m.content] == [
        "The billing service listens on port 8007",
        "The billing service listens on port 8006",
    ]
    assert ids[-1] in {m.id for m in result.memories}
    assert {m.content for m in result.memories if "port" not in m.content} == {
        "The billing service is written in Go",
        "The billing service owner is Dana Kim",
    }
    assert "not among these memories" not in result.context
    assert (result.note or "").startswith("10 memories matched the query")  # the older values among them
    assert (
        "6 older values of things the memories shown say now were left out: a value is shown with the one it "
        "replaced, not every earlier one (explain_ranking lists each)"
    ) in (result.note or "")


def test_an_empty_recall_in_a_window_that_holds_memories_says_how_to_list_them(runtime):
    """A new user's trial: "what did we decide?" since last week matched nothing, though the week held the
    decision, and nothing said how to read what the week held."""
    from tools.recall import text_of

    remember(
        RememberInput(
            content="Code review rule: two approvals are needed for billing changes",
            occurred_at="2026-11-24T09:00:00Z",
        ),
        runtime,
        CALLER,
    )
    week = {"since": "2026-11-23", "until": "2026-11-29"}
    out = recall(RecallInput(query="what did we decide?", **week), runtime, CALLER)
    said = (
        "this window holds memories that did not match the query: the `memoria://memories` resource with the "
        "same since/until (and time_zone) lists them"
    )
    assert out.memories == [] and out.note.endswith(f"; {said}")
    assert text_of(out).endswith(f"{said[0].upper()}{said[1:]}.")
    elsewhere = recall(
        RecallInput(query="what did we decide?", since="2026-10-01", until="2026-10-07"), runtime, CALLER
    )
    assert elsewhere.memories == [] and "memoria://memories" not in (elsewhere.note or "")


def test_a_recall_whose_best_match_barely_clears_the_floor_says_it_is_weak(tmp_path):
    """A new user's trial on the model path: "what is the AWS account id for production?" of a store that
    never held it returned five unrelated memories at 0.15-0.18 over a floor of 0.15, top_k filled, nothing
    said. The fake model's cosines are set; no word is shared with the query, so each memory's relevance is
    w x its cosine = 2/3 x cosine (a memory alone is its own context): 2/3 x 0.3 = 0.2, under 2 x 0.15."""
    from tests.fakes import TableEmbedder
    from tests.helpers import settings_for

    query, weak, strong = (
        "aws account id for production",
        "Lunch is served at noon",
        "Our cloud ledger number",
    )
    embedder = TableEmbedder(
        {query: (1.0, 0.0, 0.0), weak: (0.3, 0.953939, 0.0), strong: (0.9, 0.0, 0.435890)}, name="table-model"
    )
    runtime = make_runtime(settings_for(tmp_path / "db"), embedder=embedder)
    try:
        remember(RememberInput(content=weak), runtime, CALLER)
        out = recall(RecallInput(query=query, top_k=1), runtime, CALLER)
        assert [m.content for m in out.memories] == [weak]
        assert out.note == (
            "even the best match is weak: it matches the query at 0.20 (the relevance floor reads 0.15; "
            "explain_ranking shows each score), so what is shown may not answer the query"
        )
        assert text_of(out).endswith(out.note)
        remember(RememberInput(content=strong), runtime, CALLER)  # 2/3 x 0.9 = 0.6: a match, not weak
        out = recall(RecallInput(query=query, top_k=1), runtime, CALLER)
        assert [m.content for m in out.memories] == [strong] and out.note is None
    finally:
        runtime.close()


def test_the_newer_value_of_a_match_the_search_missed_is_shown_and_explained(runtime):
    """An overview question over a service whose values were stated again and again found the older values
    and not the current one, which the context only quoted under them: the newer value joins the match it
    disputes, scored as it, and is read first."""
    older = remember(RememberInput(content="payments-api listens on port 8080"), runtime, CALLER)
    for text in [
        "Port 8080 is blocked on the office VPN",
        "The proxy forwards port 8080 to payments-api",
        "Port 8080 conflicts with Jenkins on payments-api hosts",
    ]:
        remember(RememberInput(content=text), runtime, CALLER)
    newer = remember(RememberInput(content="payments-api listens on port 9443"), runtime, CALLER)
    assert newer.consolidation.contradicts == [older.id]  # two values said alike: disputed, not revised
    # top_k 1: three candidates a search leg, each of the other three matches "port 8080" better
    out = recall(RecallInput(query="payments-api port 8080", top_k=1), runtime, CALLER)
    [shown] = out.memories
    assert (shown.id, shown.newer_value_of, shown.source) == (newer.id, older.id, "direct")
    explained = explain_ranking(ExplainRankingInput(retrieval_id=out.retrieval_id), runtime, CALLER)
    entry = next(c for c in explained.candidates if c.id == newer.id)
    assert entry.newer_value_of == older.id and f"joined as the newer value of {older.id}" in entry.reason
    # The A/B log keeps it apart from the ranked matches and the episode siblings: it was never ranked.
    rows = ab_log_rows(
        runtime.store, Scope(runtime.settings.org_id, runtime.settings.project_id), out.retrieval_id
    )
    assert {row.observation_id: row.source for row in rows}[newer.id] == "newer_value"
