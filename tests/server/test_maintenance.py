"""Background maintenance compacts the fragments that single-row writes pile up, off the request path;
the aggregation job runs at start and then every interval."""

import json
import re
import threading

import anyio
import pytest

from server.app import build_server
from tests.fakes import TokenEmbedder
from tests.helpers import call, connected, make_runtime, settings_for
from tools.common import Caller

pytestmark = pytest.mark.anyio


class Recorded:
    """A server factory that keeps the runtime it built, so a test can look at its store."""

    def __init__(self) -> None:
        self.runtime = None

    def __call__(self, settings):
        self.runtime = make_runtime(settings)
        return self.runtime


async def remember_twelve(client) -> None:
    for index in range(12):
        await call(client, "remember", {"content": f"small write number {index}"})


def fragments(runtime) -> int:
    return runtime.store._memories.stats()["fragment_stats"]["num_fragments"]


async def compacted(runtime) -> None:
    with anyio.fail_after(30):
        while fragments(runtime) >= 4:
            await anyio.sleep(0.1)


@pytest.mark.slow
async def test_background_maintenance_compacts_small_appends(tmp_path):
    settings = settings_for(tmp_path / "db", maintenance_interval_seconds=0.2, compaction_min_fragments=4)
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await compacted(built.runtime)
        recalled = await call(client, "recall", {"query": "small write number 7", "top_k": 12})
    assert len(recalled["memories"]) == 12
    assert recalled["memories"][0]["content"] == "small write number 7"


@pytest.mark.slow
async def test_appends_piling_up_start_a_round_before_the_interval(tmp_path):
    # An hour between rounds, but 8 appends are enough to start one: a busy server compacts as it goes.
    settings = settings_for(
        tmp_path / "db",
        maintenance_interval_seconds=3600,
        compaction_min_fragments=4,
        compaction_after_appends=8,
    )
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await compacted(built.runtime)
        assert built.runtime.store.appends_since_maintenance < 12


@pytest.mark.slow
async def test_without_enough_appends_nothing_runs_before_the_interval(tmp_path):
    settings = settings_for(
        tmp_path / "db",
        maintenance_interval_seconds=3600,
        compaction_min_fragments=4,
        compaction_after_appends=1000,
    )
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await anyio.sleep(2.5)  # the loop looks every second: two looks, neither due
        assert fragments(built.runtime) >= 12


def test_the_aggregation_job_runs_at_start_then_every_interval_by_its_clock(tmp_path):
    from server.state import AppState

    settings = settings_for(tmp_path / "db")  # MEMORIA_AGGREGATION_INTERVAL_SECONDS: 60 by default
    built = Recorded()
    waits: list[tuple[float, int]] = []  # (seconds asked for, passes finished by then)
    done = threading.Event()

    def pause(seconds: float) -> bool:  # a clock that moves when asked: no real minute goes by
        waits.append((seconds, built.runtime.aggregation_passes))
        if len(waits) == 3:
            done.set()
            return True  # the server stops
        return False

    state = AppState(settings, built, pause=pause)
    state.start()
    try:
        assert done.wait(30)
    finally:
        state.close()
    # The first pass ran before the first wait (at start), then one pass per 60 s interval.
    assert waits == [(60.0, 1), (60.0, 2), (60.0, 3)]


@pytest.mark.slow
async def test_stats_carry_the_last_aggregation_pass_with_the_source_documents_names(tmp_path):
    settings = settings_for(tmp_path / "db")
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        # The same conclusion from two agents: one cluster, corroborated.
        await call(
            client, "remember", {"content": "the billing service runs on postgres 16", "agent_id": "a"}
        )
        await call(
            client, "remember", {"content": "The billing service runs on Postgres 16!", "agent_id": "b"}
        )
        with anyio.fail_after(30):
            while built.runtime.aggregation_passes < 1:
                await anyio.sleep(0.05)
        built.runtime.corroboration.run_all()  # a pass that has seen the memory
        read = await client.read_resource("memoria://stats")
    stats = json.loads(read.contents[0].text)
    last = stats["aggregation"]
    assert set(last) >= {"clusters", "contradictions", "corroboratedCount", "elapsedMs"}
    assert (last["clusters"], last["contradictions"], last["corroboratedCount"], last["rows"]) == (1, 0, 1, 2)
    assert last["elapsedMs"] >= 0 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", last["finished_at"])


def test_an_early_round_needs_the_set_appends_and_one_per_hundred_memories():
    from server.state import early_round_due

    def rows(count: int):
        return lambda: count

    assert not early_round_due(99, 100, rows(0))  # fewer than MEMORIA_COMPACTION_AFTER_APPENDS
    assert early_round_due(100, 100, rows(5_000))  # 100 >= 5,000 / 100
    assert not early_round_due(100, 100, rows(50_000))  # a compaction rewrites 50,000 rows: wait for 500
    assert early_round_due(500, 100, rows(50_000))
    assert not early_round_due(10_000, 0, rows(0))  # 0: the interval only

    def uncounted() -> int:
        raise AssertionError("the table is counted only once the set appends are reached")

    assert not early_round_due(3, 100, uncounted)


class Named(TokenEmbedder):
    """A token embedder under the name of a real one (``st:<model>:<width>`` and its recipes)."""

    def __init__(self, name: str, dimension: int) -> None:
        super().__init__(dimension)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


def store_two_memories(settings, embedder=None) -> str:
    """Two memories with vectors from ``embedder`` (the hashed one by default); returns its name."""
    from tools.remember import RememberInput, remember

    first = make_runtime(settings, embedder=embedder)
    caller = Caller(agent_id="a", session_id="s")
    for content in ("the deploy runs on Fridays", "the staging database resets on Sundays"):
        remember(RememberInput(content=content), first, caller)
    name = first.models.embedder.name
    first.close()
    return name


def started_until(settings, factory, done, caplog) -> None:
    """Start the server's background work, wait until ``done()`` and the start-up vector check has
    finished (30 s at most), then stop it."""
    import time

    from server.state import AppState

    def checking() -> bool:
        return any(thread.name == "memoria-vectors" and thread.is_alive() for thread in threading.enumerate())

    state = AppState(settings, factory, pause=lambda seconds: True)
    with caplog.at_level("INFO", logger="server.state"):
        state.start()
        try:
            deadline = time.monotonic() + 30
            while (not done() or checking()) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            state.close()


def said(caplog, words: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if words in record.getMessage()]


def counts(settings, embedder) -> dict[str, int]:
    from storage.stats import embedder_counts

    runtime = make_runtime(settings, embedder=embedder)
    try:
        return embedder_counts(runtime.store)
    finally:
        runtime.close()


def test_at_start_an_older_recipe_of_the_model_gets_the_models_vectors_in_the_background(tmp_path, caplog):
    from storage.records import Scope

    settings = settings_for(tmp_path / "db")
    old = Named("st:all-MiniLM-L6-v2:384+author", settings.vector.dim)  # "author: content" vectors
    store_two_memories(settings, embedder=old)
    model = Named("st:all-MiniLM-L6-v2:384", settings.vector.dim)
    started_until(
        settings, lambda s: make_runtime(s, embedder=model), lambda: bool(said(caplog, "re-embedded")), caplog
    )
    assert said(caplog, "older recipe") == [
        f"2 memories have vectors of an older recipe of {model.name} or of the offline fallback ({old.name}: 2): "
        f"giving them vectors from {model.name} in the background"
    ]
    assert said(caplog, "re-embedded")[0].startswith("re-embedded 2 memories in ")
    assert not said(caplog, "another embedder")
    assert counts(settings, model) == {model.name: 2}
    again = make_runtime(settings, embedder=model)
    try:  # the vector leg finds them now (it compares only vectors of the active embedder)
        query = model.embed_query("the deploy runs on Fridays")
        hits = again.store.vector_search(Scope("default", "default"), query, embedder=model.name, limit=1)
        assert [hit.record.content for hit in hits] == ["the deploy runs on Fridays"]
    finally:
        again.close()


def test_at_start_the_offline_fallbacks_hashed_vectors_get_the_models_once_it_loads(tmp_path, caplog):
    settings = settings_for(tmp_path / "db")
    hashed = store_two_memories(settings)  # written while the model did not load
    model = Named("st:all-MiniLM-L6-v2:384", settings.vector.dim)
    started_until(
        settings, lambda s: make_runtime(s, embedder=model), lambda: bool(said(caplog, "re-embedded")), caplog
    )
    assert said(caplog, "older recipe")[0].startswith(
        f"2 memories have vectors of an older recipe of {model.name} or of the offline fallback ({hashed}: 2)"
    )
    assert counts(settings, model) == {model.name: 2}


@pytest.mark.parametrize(
    ("stored", "options"),
    [
        # Another model: two processes configured with two models would otherwise undo each other.
        ("st:BAAI/bge-small-en-v1.5:384+prompts", {}),
        # An older recipe of the model, with re-embedding at start turned off.
        ("st:all-MiniLM-L6-v2:384+author", {"reembed_at_start": False}),
    ],
)
def test_vectors_not_remade_at_start_are_left_to_the_user_with_what_to_do(tmp_path, caplog, stored, options):
    settings = settings_for(tmp_path / "db", **options)
    store_two_memories(settings, embedder=Named(stored, settings.vector.dim))
    model = Named("st:all-MiniLM-L6-v2:384", settings.vector.dim)
    started_until(
        settings, lambda s: make_runtime(s, embedder=model), lambda: bool(said(caplog, "another")), caplog
    )
    assert said(caplog, "another embedder") == [
        f"2 memories have vectors from another embedder ({stored}: 2) than the active {model.name}: vector "
        "search skips them until `memoria reembed` makes them again (and compares them with what was written "
        "meanwhile)"
    ]
    assert not said(caplog, "re-embedded")
    assert counts(settings, model) == {stored: 2}  # nothing was re-embedded


def test_on_the_offline_fallback_a_models_vectors_are_kept_until_the_model_loads(tmp_path, caplog):
    import dataclasses

    settings = settings_for(tmp_path / "db")
    model = Named("st:all-MiniLM-L6-v2:384", settings.vector.dim)  # the configured model, while it loaded
    store_two_memories(settings, embedder=model)

    def fallen_back(s):  # the model does not load this time: the hashed vectors answer
        runtime = make_runtime(s)
        info = dataclasses.replace(runtime.models.embedder_info, requested=model.name, offline_fallback=True)
        runtime.models = dataclasses.replace(runtime.models, embedder_info=info)
        return runtime

    started_until(settings, fallen_back, lambda: bool(said(caplog, "another")), caplog)
    messages = said(caplog, "another embedder")
    assert len(messages) == 1 and messages[0].startswith(
        f"2 memories have vectors from another embedder ({model.name}: 2)"
    )
    assert messages[0].endswith("until the configured model loads (see `memoria doctor`)")
    assert not said(caplog, "re-embedded")
    assert counts(settings, model) == {model.name: 2}  # never replaced by hashed vectors


def test_nothing_is_said_or_done_at_start_when_every_vector_is_the_active_embedders(tmp_path, caplog):
    settings = settings_for(tmp_path / "db")
    store_two_memories(settings)
    started_until(settings, make_runtime, lambda: bool(said(caplog, "memoria ready")), caplog)
    assert said(caplog, "memoria ready")
    assert (
        not said(caplog, "another embedder")
        and not said(caplog, "older recipe")
        and not said(caplog, "re-embedded")
    )


@pytest.mark.slow
async def test_the_step_after_warming_runs_once_with_the_copies_built_and_before_the_first_pass(tmp_path):
    from server.state import AppState

    settings = settings_for(tmp_path / "db")
    async with connected(build_server(settings)) as client:  # a store with a scope to warm
        await call(client, "remember", {"content": "the billing service runs on postgres 16"})
    built = Recorded()
    seen: list[tuple[bool, int]] = []  # (every scope copied, aggregation passes) when the step ran
    done = threading.Event()

    def when_warm() -> None:
        store = built.runtime.store
        scopes = list(store.scopes())
        copied = bool(scopes) and all(store.cache.holds(scope) for scope in scopes)
        seen.append((copied, built.runtime.aggregation_passes))

    def pause(seconds: float) -> bool:
        done.set()
        return True

    state = AppState(settings, built, pause=pause, when_warm=when_warm)
    state.start()
    try:
        assert done.wait(30)
    finally:
        state.close()
    assert seen == [(True, 0)]


def test_re_embedding_at_start_stopped_by_a_shutdown_says_how_far_it_got(tmp_path, caplog):
    from server.state import _refresh_stale_vectors
    from tools.remember import RememberInput, remember

    settings = settings_for(tmp_path / "db")
    old = Named("st:all-MiniLM-L6-v2:384+author", settings.vector.dim)
    first = make_runtime(settings, embedder=old)
    for index in range(20):
        remember(RememberInput(content=f"fact number {index} about service {index}"), first, Caller("a", "s"))
    first.close()
    model = Named("st:all-MiniLM-L6-v2:384", settings.vector.dim)
    runtime = make_runtime(settings, embedder=model)
    asked: list[int] = []

    def stopping() -> bool:  # asked before each batch of 16, and once more at the end: stop after the first
        asked.append(1)
        return len(asked) > 1

    try:
        with caplog.at_level("INFO", logger="server.state"):
            _refresh_stale_vectors(runtime, stopping)
    finally:
        runtime.close()
    # A trial read "re-embedded 64 memories in 1.4 s" as finished when the server was stopped part-way.
    [line] = said(caplog, "re-embedded")
    assert line.startswith("re-embedded 16 of 20 memories in ") and line.endswith(
        "before stopping; the next start goes on"
    )


@pytest.mark.slow
async def test_a_server_starting_on_a_store_an_earlier_release_wrote_repairs_it(tmp_path, monkeypatch):
    """The next-version rule of releases before 2026-12-06 superseded one service's artifact by another's
    (writing.repairs); a server started on such a store makes the first active again."""
    from tools.remember import RememberInput, remember
    from writing.consolidation import service as consolidation_service

    settings = settings_for(tmp_path / "db")
    earlier = make_runtime(settings)
    monkeypatch.setattr(consolidation_service, "names_another_artifact", lambda older, newer: False)
    ledger = "Health check for ledger: curl -fsS http://localhost:8017/healthz returns ok."
    billing = "Health check for billing-api: curl -fsS http://localhost:8002/healthz returns ok."
    first = remember(RememberInput(content=ledger, kind="artifact"), earlier, Caller("a", "s1")).id
    remember(RememberInput(content=billing, kind="artifact"), earlier, Caller("a", "s2"))
    assert earlier.store.get_memory(first).status == "superseded"
    earlier.close()
    monkeypatch.undo()

    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        with anyio.fail_after(30):
            while built.runtime is None or built.runtime.store.get_memory(first).status != "active":
                await anyio.sleep(0.1)
        recalled = await call(client, "recall", {"query": "health check for the ledger"})
    assert recalled["memories"][0]["id"] == first
