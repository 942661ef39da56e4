"""The typed lifespan state: settings, the runtime (built in a background thread so the MCP handshake
never waits for LanceDB or models), per-connection session ids and background maintenance."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio

from retrieval.outcomes import CreditPolicy, WeightPolicy
from retrieval.text import counted
from server.config import Settings
from server.ordering import WritesInFlight
from server.upkeep import aggregation_pass, catch_up, finish_unfinished, maintenance_round
from tools.common import Runtime, ServerFault, backend_summary, memory_id_for
from tools.lanes import READS, READS_WAITING, Lanes
from writing.repairs import restore_misread_versions

if TYPE_CHECKING:
    from retrieval.models.providers import Models
    from server.llm_bridge import LLMChooser
    from storage.store import MemoryStore

log = logging.getLogger(__name__)

COMPACTION_SHARE = 100  # an early maintenance round once appends reach 1/100 of the memories (or more)

RuntimeFactory = Callable[[Settings], "ServerRuntime"]


def open_store(settings: Settings) -> MemoryStore:
    """The store ``settings`` name, created and migrated if needed."""
    from retrieval.text import index_terms, with_other_forms
    from storage.store import MemoryStore

    return MemoryStore.open(
        settings.db_uri,
        storage_options=settings.storage_options,
        vector_dim=settings.vector.dim,
        cache_scope_rows=settings.cache.scope_rows,
        cache_total_rows=settings.cache.total_rows,
        vector_index_min_rows=settings.vector.index_min_rows,
        analyzer=index_terms,
        lancedb_query=with_other_forms,
        index_cache_bytes=settings.lancedb.index_cache_mb << 20,
        metadata_cache_bytes=settings.lancedb.metadata_cache_mb << 20,
    )


def build_runtime(settings: Settings, announce: Callable[[str], None] | None = None) -> ServerRuntime:
    """Open the store, load the models (falling back to the offline backend, said through ``announce``:
    a WARNING by default) and assemble the pipeline; then finish what a process that died left half
    done (``server.upkeep.finish_unfinished``), so that nothing served reads it half done."""
    from retrieval.models.providers import load_models
    from storage.products import single_blas_thread

    single_blas_thread()  # numpy's BLAS threads would spin beside every write (storage.products)
    store = open_store(settings)
    try:
        models = load_models(model_config(settings), store.vector_dim, announce)
        runtime = assemble_runtime(settings, store, models)
    except BaseException:
        store.close()
        raise
    try:  # what a process that died left half done, finished before anything is served
        finish_unfinished(runtime)
    except Exception as exc:  # left written down: the first maintenance round tries again
        log.warning(
            "finishing the writes a stopped process left unfinished failed (the next round retries): %s", exc
        )
    return runtime


def assemble_runtime(settings: Settings, store: MemoryStore, models: Models) -> ServerRuntime:
    """The pipeline and corroboration cache over an open store and loaded models."""
    from retrieval.aggregation import CorroborationService
    from retrieval.feedback_index import FeedbackIndex
    from retrieval.outcomes import closeness_for
    from retrieval.pipeline import RecallPipeline, build_stages
    from writing.consolidation.service import ConsolidationService
    from writing.drafts import WriteLimits
    from writing.service import WriteService

    corroboration = CorroborationService(
        store, max_rows=settings.aggregation.max_rows, oppositions=oppositions(settings)
    )
    weight_policy = weight_policy_for(settings)  # one policy: the feedback index's and report_outcome's
    feedback = FeedbackIndex(
        store,
        models.embedder,
        closeness=closeness_for(settings.feedback.closeness, models.embedder.name),
        policy=weight_policy,
    )
    options = pipeline_options(settings, models.embedder.name, reranked=models.reranker is not None)
    stages = build_stages(store, models, options, corroboration, feedback)
    pipeline = RecallPipeline(stages, backend_summary(models))
    journal = store.unfinished_writes()  # this process's journal of unfinished writes, for both
    consolidation = ConsolidationService(
        store,
        models.embedder,
        consolidation_policy(settings),
        memory_id=memory_id_for,
        reranker=models.reranker,
        contradicted=corroboration.keep_apart,
        journal=journal,
    )
    runtime = ServerRuntime(
        settings=settings,
        lanes=Lanes(reads=read_lane(settings, models)),
        weight_policy=weight_policy,
        credit_policy=credit_policy_for(settings),
        store=store,
        models=models,
        pipeline=pipeline,
        corroboration=corroboration,
        consolidation=consolidation,
        feedback=feedback,
    )
    runtime.writer = WriteService(
        store,
        models.embedder,
        consolidation,
        corroboration,
        WriteLimits(**settings.flat(field.name for field in dataclasses.fields(WriteLimits))),
        clock=lambda: runtime.clock(),
        weights=weight_policy,
        journal=journal,
    )
    return runtime


@dataclass
class ServerRuntime(Runtime):
    """The runtime as the server builds it: the tools' parts, and the whole settings for the server's
    own work (upkeep, transports) and the commands for people."""

    settings: Settings
    # When the maintenance rounds last expired the journal (``time.monotonic()``; None: not yet).
    journal_expired_at: float | None = None


def read_lane(settings: Settings, models: Models) -> int:
    """The worker threads recalls may hold at once (``tools.lanes``): ``MEMORIA_READ_CONCURRENCY``, or 3
    when recall runs on this machine alone, 40 when one of its steps waits on a network model (the
    Cohere reranker; with a language model configured, the LLM gate, reranker or passes, or a second
    retrieval round, which asks it whether the first sufficed)."""
    from retrieval.models.rerankers.cohere import CohereReranker
    from retrieval.models.rerankers.llm import parse_reranker_configuration

    if settings.read_concurrency is not None:
        return settings.read_concurrency

    def enabled(raw: Any) -> bool:
        configuration = parse_reranker_configuration(raw)
        return configuration is not None and configuration.enabled

    waits = isinstance(models.reranker, CohereReranker) or (
        settings.llm != "none"
        and (
            settings.gate == "llm"
            or bool(settings.llm_passes)
            or settings.max_iterations > 1
            or enabled(settings.llm_reranker)
            or any(enabled(raw) for raw in settings.llm_reranker_by_agent.values())
        )
    )
    return READS_WAITING if waits else READS


def weight_policy_for(settings: Settings) -> WeightPolicy:
    """The feedback weight policy the settings declare (report_outcome and the recall's feedback index)."""
    feedback = settings.feedback
    return WeightPolicy(
        feedback.ema_alpha,
        feedback.min_weight,
        feedback.max_weight,
        feedback.named_alpha,
        feedback.context_reach,
    )


def credit_policy_for(settings: Settings) -> CreditPolicy:
    """How a report credits its contexts' memories: the feedback settings of the same names."""
    names = {field.name for field in dataclasses.fields(CreditPolicy)}
    return CreditPolicy(**settings.feedback.model_dump(include=names))


def oppositions(settings: Settings) -> tuple[tuple[str, str], ...]:
    from retrieval.contradictions import DEFAULT_OPPOSITIONS

    return (
        *DEFAULT_OPPOSITIONS,
        *((str(left), str(right)) for left, right in settings.contradiction_oppositions),
    )


def consolidation_policy(settings: Settings):  # -> writing.consolidation.service.ConsolidationPolicy
    from writing.consolidation.service import ConsolidationPolicy

    return ConsolidationPolicy(**settings.consolidation.model_dump(), oppositions=oppositions(settings))


def pipeline_options(
    settings: Settings, embedder_name: str, reranked: bool = False
):  # -> retrieval.pipeline.PipelineOptions
    """The pipeline's knobs: the settings of the same names, some resolved for the backend or parsed.
    ``reranked``: a reranker loaded, so relevance is its score (the floor depends on it)."""
    from retrieval.models.rerankers.llm import parse_reranker_configuration
    from retrieval.pipeline import PipelineOptions
    from retrieval.stages.fusion import context_share_for, vector_weight_for
    from retrieval.stages.threshold import relevance_floor_for

    resolved: dict[str, Any] = dict(
        vector_weight=vector_weight_for(settings.fusion_vector_weight, embedder_name),
        context_share=context_share_for(settings.fusion_context_share, embedder_name),
        min_fact_score=relevance_floor_for(settings.min_fact_score, embedder_name, reranked),
        fold_threshold=settings.consolidation.text_dedup_threshold,
        llm_reranker=parse_reranker_configuration(settings.llm_reranker),
        llm_reranker_by_agent={
            agent: config
            for agent, raw in settings.llm_reranker_by_agent.items()
            if (config := parse_reranker_configuration(raw)) is not None
        },
        llm_passes=tuple(dict.fromkeys(settings.llm_passes)),
        half_lives={
            "standard": settings.decay_half_life_days,
            "ephemeral": settings.ephemeral.half_life_days,
        },
    )
    # Every other option is the setting of its name (``flat`` refuses a name no setting has, so an option
    # added without its setting fails here rather than keeping its default); these two have none.
    unset = {"use_vector", "use_rerank"}  # switches of the benchmarks' ablations
    names = {field.name for field in dataclasses.fields(PipelineOptions)} - unset - set(resolved)
    return PipelineOptions(**{**settings.flat(names), **resolved})


def model_config(settings: Settings):  # -> retrieval.models.providers.ModelConfig
    """The models' configuration: its fields are named like the settings' variables."""
    from retrieval.models.providers import ModelConfig

    values = settings.flat(field.name for field in dataclasses.fields(ModelConfig))
    key = settings.cohere.api_key
    return ModelConfig(**{**values, "cohere_api_key": key.get_secret_value() if key else None})


# Connections whose default session this process holds (a new one after each report of it).
MAX_HELD_SESSIONS = 10_000
# The client names one principal's default sessions are kept under at a time: a token's holder naming its
# clients at will cannot push other principals' sessions out of the ``MAX_HELD_SESSIONS`` held.
MAX_CLIENTS_PER_PRINCIPAL = 32


class AppState:
    """Process-wide resources for the server's lifetime (one per lifespan)."""

    def __init__(
        self,
        settings: Settings,
        runtime_factory: RuntimeFactory = build_runtime,
        *,
        pause: Callable[[float], bool] | None = None,
        when_warm: Callable[[], object] | None = None,
    ) -> None:
        """``pause(seconds)``: wait between aggregation passes, True when the server stops (default: the
        stop event's wait; tests pass a clock of their own). ``when_warm``: called once, after the scope
        copies were warmed (or failed to be)."""
        # Imported here: the LLM bridge needs the MCP SDK, which the CLI (build_runtime) does not load.
        from server.llm_bridge import LLMChooser

        self.settings = settings
        self.llms: LLMChooser = LLMChooser(settings)
        self._factory = runtime_factory
        self._future: concurrent.futures.Future[ServerRuntime] = concurrent.futures.Future()
        self._sessions: OrderedDict[str, tuple[str, bool]] = OrderedDict()  # key -> (session, reported)
        self._previous: OrderedDict[str, str] = OrderedDict()  # key -> the session a task ended by a report
        self._sessions_lock = threading.Lock()
        # Per principal, the client names its default sessions are kept under (``client_key``).
        self._clients: dict[str, OrderedDict[str, None]] = {}
        self._stop = threading.Event()
        self._pause = pause or self._stop.wait
        self._when_warm = when_warm
        self._closing_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        # Per session, the writes in flight: a read waits for those sent before it (``server.ordering``).
        self.writes_in_flight = WritesInFlight()

    def start(self) -> None:
        builder = threading.Thread(target=self._build, name="memoria-runtime", daemon=True)
        builder.start()
        self._threads.append(builder)

    def _build(self) -> None:
        try:
            runtime = self._factory(self.settings)
        except BaseException as exc:
            log.error("memoria could not start: %s", exc)
            self._future.set_exception(exc)
            return
        with self._closing_lock:
            if self._stop.is_set():  # the server shut down while models were loading
                runtime.close()
                self._future.set_exception(RuntimeError("the server is shutting down"))
                return
            self._future.set_result(runtime)
        log.info(
            "memoria ready: store %s; embedder %s; reranker %s",
            runtime.store.uri,
            runtime.models.embedder_info.active,
            runtime.models.reranker_info.active,
        )
        for target, name in (
            (self._maintain, "memoria-maintenance"),
            (self._aggregate, "memoria-aggregation"),
            (self._refresh_vectors, "memoria-vectors"),
        ):
            thread = threading.Thread(target=target, args=(runtime,), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _refresh_vectors(self, runtime: ServerRuntime) -> None:
        if not self._stop.is_set():
            _refresh_stale_vectors(runtime, self._stop.is_set)

    def _aggregate(self, runtime: ServerRuntime) -> None:
        """Warm the scope copies, then the aggregation job: first pass at once (it reads the copies),
        then every ``aggregation_interval_seconds``."""
        try:
            started = time.perf_counter()
            built = runtime.store.cache.warm(runtime.store.scopes())
            if built:
                log.info("copied %d scopes into memory in %.1f s", built, time.perf_counter() - started)
        except Exception as exc:  # a copy not built now is built by its first read
            log.warning("warming the scope copies failed: %s", exc)
        if self._when_warm is not None and not self._stop.is_set():
            try:
                self._when_warm()
            except Exception as exc:  # tuning only: the server serves the same without it
                log.warning("the step after warming failed: %s", exc)
        while not self._stop.is_set():
            try:
                with runtime.store.behind_the_calls():
                    report = aggregation_pass(runtime, self.llms.background())
                runtime.aggregation_passes += 1
                for line in report.details:
                    log.debug("aggregation %s", line)
            except Exception as exc:  # the next pass retries; recall uses the clusters it has
                log.warning("aggregation pass failed (will retry): %s", exc)
            if self._pause(self.settings.aggregation.interval_seconds) or self._stop.is_set():
                return

    def _maintain(self, runtime: ServerRuntime) -> None:
        """A maintenance round every ``maintenance_interval_seconds``, or sooner once
        ``compaction_after_appends`` appends piled up (a server writing all day would otherwise leave
        hundreds of fragments, each making the next append slower, between two rounds), or 1% of the
        memories if that is more: a round's compaction rewrites the memories table whole (LanceDB 0.40
        takes no target size), so a bigger table compacts less often for the same cost per append."""
        # No caller waits for a round: callers waiting for the write lock take it first.
        with runtime.store.behind_the_calls():
            self._maintain_rounds(runtime)

    def _maintain_rounds(self, runtime: ServerRuntime) -> None:
        interval, piled = self.settings.maintenance_interval_seconds, self.settings.compaction.after_appends
        last, failed = time.monotonic(), False
        try:  # what happened while no server ran, now rather than a round later
            catch_up(runtime)
        except Exception as exc:  # the rounds retry it
            log.warning(
                "catching up with expiry and unfinished writes failed (the next round retries): %s", exc
            )
        try:  # what an earlier release's rules decided and today's would not (``writing.repairs``)
            restore_misread_versions(runtime.writer)
        except Exception as exc:  # the next start tries again
            log.warning("repairing what an earlier release decided failed (the next start retries): %s", exc)
        keep = timedelta(seconds=self.settings.keep_versions_seconds)
        while not self._stop.wait(min(1.0, interval)):
            try:  # the versions' sightings between rounds: what the next clean-up may drop sooner
                runtime.store.sight_versions(keep)
            except Exception as exc:  # the rounds still see them
                log.debug("could not look at the tables' newest versions: %s", exc)
            due = time.monotonic() - last >= interval
            try:
                early = not failed and early_round_due(
                    runtime.store.appends_since_maintenance, piled, runtime.store.memory_rows
                )
            except Exception as exc:  # counting the table failed: wait for the interval
                log.debug("could not count the memories for an early maintenance round: %s", exc)
                early = False
            if not due and not early:
                continue
            last = time.monotonic()
            try:
                for table, what in maintenance_round(runtime).items():
                    log.debug("maintenance %s: %s", table, what)
                failed = False
            except Exception as exc:  # the next round (after a full interval) retries; reads and writes go on
                failed = True
                log.warning("store maintenance failed (will retry): %s", exc)

    async def runtime(self) -> ServerRuntime:
        """The runtime, waiting for start-up to finish; a failed start-up becomes a clear tool error."""
        try:
            if not self._future.done():
                await anyio.to_thread.run_sync(self._future.result)
            return self._future.result()
        except Exception as exc:
            raise ServerFault(
                f"the memory server could not start: {str(exc).rstrip('.')}. Fix the configuration (see the "
                "server's stderr) and restart it."
            ) from exc

    def session_for(
        self, key: str, first: str | None = None, *, begins_task: bool = False, hold: bool = False
    ) -> str:
        """The session a connection's calls default to. ``key`` names the connection (per client for this
        lifespan on stdio and in process; per transport session on HTTP); ``first`` is its first session
        (None: one made now). Once a report of it was made, the connection's next call that begins a task
        (``begins_task``: a recall or a remember) begins a new session; other calls (a report again, an
        explanation, a read) stay in the reported one. ``hold``: keep the connection's entry even when it
        is its ``first`` (a report is about to mark it). Held: connections without a ``first``, and those
        that reported, at most ``MAX_HELD_SESSIONS`` (the least recently used go first)."""
        with self._sessions_lock:
            held = self._sessions.get(key)
            if held is not None and held[1] and begins_task:
                self._previous[key] = held[0]  # for a report that meant to change that one's
                self._previous.move_to_end(key)
                while len(self._previous) > MAX_HELD_SESSIONS:
                    self._previous.popitem(last=False)
                held = None  # reported: this task begins the next session
                self._sessions.pop(key)
                first = None
            if held is None:
                session_id = first or new_session_id()
                if first is not None and not hold:
                    return session_id  # known from the connection itself: nothing to hold yet
                held = self._sessions[key] = (session_id, False)
                while len(self._sessions) > MAX_HELD_SESSIONS:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
            return held[0]

    def client_key(self, principal: str, name: str) -> str:
        """The key of ``principal``'s default session for its client ``name`` (``server.identity``): the
        principal keeps the sessions of its ``MAX_CLIENTS_PER_PRINCIPAL`` most recent client names, and a
        name beyond them drops the least recent one's session (its own, no one else's)."""
        key = f"{principal}\x1f{name}"
        with self._sessions_lock:
            names = self._clients.setdefault(principal, OrderedDict())
            names[name] = None
            names.move_to_end(name)
            while len(names) > MAX_CLIENTS_PER_PRINCIPAL:
                dropped = f"client:{principal}\x1f{names.popitem(last=False)[0]}"
                self._sessions.pop(dropped, None)
                self._previous.pop(dropped, None)
        return key

    def previous_session(self, key: str) -> str | None:
        """The connection's session before its current one: reported, then ended by the next task."""
        with self._sessions_lock:
            return self._previous.get(key)

    def session_reported(self, key: str, session_id: str) -> None:
        """A report of ``session_id``, the connection's default session, was made."""
        with self._sessions_lock:
            held = self._sessions.get(key)
            if held is not None and held[0] == session_id:
                self._sessions[key] = (session_id, True)

    def close(self) -> None:
        with self._closing_lock:
            self._stop.set()
        for thread in self._threads[1:]:  # maintenance: let a compaction in progress finish
            thread.join(timeout=30)
        if self._future.done() and self._future.exception() is None:
            self._future.result().close()


def early_round_due(appended: int, after_appends: int, memory_rows: Callable[[], int]) -> bool:
    """Whether the appends since the last round start one before the interval: ``after_appends`` of them
    (0: never), and at least one per ``COMPACTION_SHARE`` memories the table holds (counted only then)."""
    if not after_appends or appended < after_appends:
        return False
    return appended >= memory_rows() // COMPACTION_SHARE


def new_session_id() -> str:
    return "ses_" + secrets.token_hex(8)


def _refresh_stale_vectors(runtime: ServerRuntime, stopping: Callable[[], bool]) -> None:
    """At start, memories whose vectors another embedder made cannot be compared by vector search: only
    the full-text leg finds them. With ``MEMORIA_REEMBED_AT_START`` (on by default) the server remakes, in
    the background while it serves, the vectors of another recipe of the active model (``+author``, or made
    before its prompts were applied) and the offline fallback's hashed ones. Another model's vectors are the
    user's call (two processes configured with two models would otherwise undo each other at every start):
    the server says so once, with what to do, as it does on the offline fallback (re-embedding then would
    replace a model's vectors with hashed ones)."""
    from retrieval.models.embedders.sentence_transformers import same_model
    from storage.stats import stale_embedders

    active = runtime.models.embedder.name
    try:
        stale = stale_embedders(runtime.store, active)
    except Exception as exc:  # a check, never a reason not to serve
        log.debug("counting vectors by embedder failed: %s", exc)
        return
    fallback = runtime.models.embedder_info.offline_fallback
    may_remake = runtime.settings.reembed_at_start and not fallback

    def remade(name: str) -> bool:
        fallback_vectors = name.startswith("hashed-") and not active.startswith("hashed-")
        return may_remake and (same_model(name, active) or fallback_vectors)

    left = {name: count for name, count in stale.items() if not remade(name)}
    if left:
        until = (
            "the configured model loads (see `memoria doctor`)"
            if fallback
            else "`memoria reembed` makes them again (and compares them with what was written meanwhile)"
        )
        log.warning(
            "%s %s vectors from another embedder (%s) than the active %s: vector search skips them until %s",
            counted(sum(left.values()), "memory"),
            "has" if sum(left.values()) == 1 else "have",
            ", ".join(f"{name}: {count}" for name, count in left.items()),
            active,
            until,
        )
    todo = {name: count for name, count in stale.items() if name not in left}
    if not todo:
        return
    from writing.reembedding import reembed

    log.info(
        "%s %s vectors of an older recipe of %s or of the offline fallback (%s): giving them vectors from %s "
        "in the background",
        counted(sum(todo.values()), "memory"),
        "has" if sum(todo.values()) == 1 else "have",
        active,
        ", ".join(f"{name}: {count}" for name, count in todo.items()),
        active,
    )
    started = time.perf_counter()
    try:
        # Small batches: a recall's query embedding waits for the batch the model is on.
        done = reembed(
            runtime.store, runtime.models.embedder, batch_size=16, stop=stopping, only=todo.__contains__
        )
    except Exception as exc:  # what was embedded is written; the next start or `memoria reembed` goes on
        log.warning("re-embedding at start stopped (%s): run `memoria reembed` to finish", exc)
        return
    seconds = time.perf_counter() - started
    if done.written < sum(todo.values()) and stopping():
        # Stopped between batches (the server is shutting down): what was embedded is written.
        log.info(
            "re-embedded %s of %s in %.1f s before stopping; the next start goes on",
            f"{done.written:,}",
            counted(sum(todo.values()), "memory"),
            seconds,
        )
        return
    log.info("re-embedded %s in %.1f s", counted(done.written, "memory"), seconds)
