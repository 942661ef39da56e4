"""A reader's view of the store: its project's shared memories, its own agent's and session's private
ones, and the org's shelf. Each read is checked twice: answered by the scope copies and by LanceDB (no
copies, so the typed ``visibility`` filter does the work)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from retrieval.text import index_terms
from storage.records import (
    Audience,
    NewMemory,
    Scope,
    TimeWindow,
    View,
    Viewer,
    may_see,
    org_shelf,
    same_audience,
)
from storage.store import MemoryStore
from tests.records import memory_record

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
WEB = Scope("acme", "web")
API = Scope("acme", "api")
DIM = 8
ALICE = Viewer("alice", "s1")
ALICE_LATER = Viewer("alice", "s2")
BOB = Viewer("bob", "s9")


def unit(*hot: int) -> np.ndarray:
    values = np.zeros(DIM, dtype=np.float32)
    values[list(hot)] = 1.0
    return values / np.linalg.norm(values)


def new(
    memory_id: str, content: str, scope: Scope, visibility: str, *, agent="alice", session="s1", **fields
):
    record = memory_record(
        memory_id,
        org_id=scope.org_id,
        project_id=scope.project_id,
        agent_id=agent,
        session_id=session,
        content=content,
        updated_at=NOW,
        embedder="emb",
        visibility=visibility,
        **{"created_at": NOW, **fields},
    )
    return NewMemory(record, unit(0), content)


@pytest.fixture(params=["copies", "lancedb"])
def store(request, tmp_path):
    copies = request.param == "copies"  # scope copies answer every search, BM25 included
    opened = MemoryStore.open(
        str(tmp_path / "db"),
        vector_dim=DIM,
        cache_scope_rows=250_000 if copies else 0,
        analyzer=index_terms if copies else None,
    )
    opened.insert_many(
        [
            new("project", "deploy notes for the web project", WEB, "project", episode_id="ep"),
            new("agent", "deploy notes alice keeps for herself", WEB, "agent", episode_id="ep"),
            new("session", "deploy notes for this session only", WEB, "session", episode_id="ep"),
            new("bobs", "deploy notes bob keeps for himself", WEB, "agent", agent="bob", session="s9"),
            new("org", "deploy notes for every project of acme", org_shelf("acme"), "org"),
            new("api", "deploy notes of the api project", API, "project"),
        ]
    )
    yield opened
    opened.close()


VISIBLE = {
    ALICE: {"project", "agent", "session", "org"},
    ALICE_LATER: {"project", "agent", "org"},
    BOB: {"project", "bobs", "org"},
}


@pytest.mark.slow
@pytest.mark.parametrize("viewer", list(VISIBLE))
def test_every_read_of_a_view_returns_what_its_viewer_may_see(store, viewer):
    view = View(WEB, viewer)
    wanted = VISIBLE[viewer]
    assert {h.record.id for h in store.vector_search(view, unit(0), embedder="emb", limit=10)} == wanted
    assert {h.record.id for h in store.fulltext_search(view, "deploy notes", limit=10)} == wanted
    everyone = ["project", "agent", "session", "bobs", "org", "api"]
    assert set(store.get_memories(everyone, view)) == wanted
    assert {m.id for m in store.list_memories(view, limit=10)} == wanted
    assert {s.id for s in store.episode_member_stubs(view, ["ep"])} == wanted & {
        "project",
        "agent",
        "session",
    }


@pytest.mark.slow
def test_a_plain_scope_reads_that_scope_whole_and_nothing_of_the_shelf(store):
    found = {h.record.id for h in store.vector_search(WEB, unit(0), embedder="emb", limit=10)}
    assert found == {"project", "agent", "session", "bobs"}
    assert store.get_memory("org", WEB) is None and store.get_memory("org", org_shelf("acme")) is not None


@pytest.mark.slow
def test_the_operators_view_reads_every_memory_of_the_project_and_the_shelf(store):
    found = {h.record.id for h in store.vector_search(View(WEB), unit(0), embedder="emb", limit=10)}
    assert found == {"project", "agent", "session", "bobs", "org"}


@pytest.mark.slow
def test_another_project_of_the_org_reads_only_the_shelf_and_its_own(store):
    found = {h.record.id for h in store.fulltext_search(View(API, BOB), "deploy notes", limit=10)}
    assert found == {"api", "org"}


@pytest.mark.slow
def test_a_search_of_two_scopes_keeps_its_limit_and_best_first_order(store):
    hits = store.vector_search(View(WEB, ALICE), unit(0), embedder="emb", limit=2)
    assert len(hits) == 2
    hits = store.fulltext_search(View(WEB, ALICE), "deploy notes every project acme", limit=5)
    assert hits[0].record.id == "org"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.slow
def test_private_memories_neither_corroborate_nor_contradict_in_the_aggregation_rows(store):
    assert {row.id for row in store.aggregation_rows(WEB, 10)} == {"project"}
    assert {row.id for row in store.aggregation_rows(org_shelf("acme"), 10)} == {"org"}


def test_audiences_follow_visibility_owner_and_session():
    shared = memory_record("a", visibility="project")
    mine = memory_record("b", visibility="agent", agent_id="alice")
    mine_too = memory_record("c", visibility="agent", agent_id="alice", session_id="other")
    session = memory_record("d", visibility="session", agent_id="alice", session_id="s1")
    other_session = memory_record("e", visibility="session", agent_id="alice", session_id="s2")
    assert same_audience(mine, mine_too) and not same_audience(shared, mine)
    assert not same_audience(session, other_session)
    assert may_see(ALICE, session) and not may_see(ALICE_LATER, session) and not may_see(BOB, mine)
    assert may_see(None, session)  # the operator


@pytest.mark.slow
def test_a_time_window_holds_memories_only_if_the_viewer_may_see_one_of_that_time(store):
    month_ago = NOW - timedelta(days=30)
    store.insert_memory(new("old", "an old private note", WEB, "agent", created_at=month_ago))
    window = TimeWindow(month_ago - timedelta(hours=1), month_ago + timedelta(hours=1))
    assert store.holds_memories_in(View(WEB, ALICE), window)
    assert not store.holds_memories_in(View(WEB, BOB), window)


@pytest.mark.slow
def test_an_audience_view_filters_before_its_limit(store):
    """Consolidation reads one audience: nearer memories of other audiences never crowd it out."""
    store.insert_memory(new("closer", "shared and nearer", WEB, "project"))
    mine = View(WEB, with_org=False, audience=Audience("agent", "alice"))
    assert [h.record.id for h in store.vector_search(mine, unit(0), embedder="emb", limit=1)] == ["agent"]
    assert [h.record.id for h in store.fulltext_search(mine, "deploy notes", limit=1)] == ["agent"]
    shared = View(WEB, with_org=False, audience=Audience("project"))
    found = {h.record.id for h in store.vector_search(shared, unit(0), embedder="emb", limit=10)}
    assert found == {"project", "closer"}
    session = View(WEB, with_org=False, audience=Audience("session", "alice", "s1"))
    assert [m.id for m in store.list_memories(session, limit=10)] == ["session"]


@pytest.mark.slow
def test_a_views_full_text_hits_read_on_one_scale_whichever_index_found_them(store, request):
    query = "deploy notes every project acme"
    alone = store.fulltext_search(org_shelf("acme"), query, limit=1)[0]
    view = View(WEB, ALICE)
    [via_view] = [hit for hit in store.fulltext_search(view, query, limit=10) if hit.record.id == "org"]
    if request.node.callspec.params["store"] == "lancedb":  # LanceDB's index keeps no term statistics
        assert store.fulltext_ceiling(view, query) is None
        return
    # The shelf's hit, read against a full match, is as relevant seen from the project as on its own.
    own = alone.score / store.fulltext_ceiling(org_shelf("acme"), query)
    assert via_view.score / store.fulltext_ceiling(view, query) == pytest.approx(own)
    # A project whose index knows none of the words reads on the shelf's scale.
    empty = View(Scope("acme", "empty"), BOB)
    assert store.fulltext_ceiling(empty, query) == store.fulltext_ceiling(org_shelf("acme"), query)
    [only] = store.fulltext_search(empty, query, limit=10)
    assert only.score == pytest.approx(alone.score)


@pytest.mark.slow
def test_a_memorys_own_keyword_score_is_its_fulltext_hits_score_on_the_views_scale(store):
    # The score the vector leg's hits are fused with when the full-text leg's limit left them out: the org
    # shelf's index is put on the home scope's scale, as its hits are.
    view = View(WEB, ALICE)
    query = "deploy notes every project acme"
    hits = {hit.record.id: hit.score for hit in store.fulltext_search(view, query, limit=10)}
    scores = store.fulltext_scores(view, query, ["project", "org", "no-such-memory"])
    if store.fulltext_engine(WEB) == "copy-bm25":
        assert scores == pytest.approx({"project": hits["project"], "org": hits["org"]})
    else:  # LanceDB's index scores only the hits it returns
        assert scores == {}
    # Another agent's private memory is not scored for alice, whatever the caller asks.
    assert store.fulltext_scores(view, "deploy notes bob himself", ["bobs"]) == {}
