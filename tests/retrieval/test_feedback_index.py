"""The per-scope index of outcome reports behind contextual feedback weights, with cosines set by hand:
deploy (1, 0); close (0.8, 0.6): cosine 0.8 with deploy; half (0.45, 0.893029): cosine 0.45; far (0, 1)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from retrieval.feedback_index import FeedbackIndex, set_apart
from retrieval.outcomes import Closeness, WeightPolicy
from retrieval.text import term_set
from storage.records import CreditedSession, MemoryCredit, MemoryRecord, OutcomeRecord, ReportQueries, Scope
from tests.fakes import TableEmbedder
from tests.records import memory_record

SCOPE = Scope("o", "p")  # the scope every report below is made in
VECTORS = {"deploy": (1.0, 0.0), "close": (0.8, 0.6), "half": (0.45, 0.893029), "far": (0.0, 1.0)}
CLOSENESS = Closeness(0.3, 0.6)  # 0.8 -> 1.0; 0.45 -> 0.5; 0 -> 0
START = datetime(2026, 1, 1, tzinfo=UTC)


class Reports:
    """The credit table as the index reads it: the current reports and a version."""

    def __init__(self, reports=()) -> None:
        self.reports: list[OutcomeRecord] = []
        self.versions: list[tuple[int, OutcomeRecord]] = []  # (version written at, report)
        self.version = 1
        self.credited_reads = 0
        for report in reports:
            self.add(report)

    def add(self, report: OutcomeRecord) -> None:
        self.version += 1
        self.reports = [r for r in self.reports if r.session_id != report.session_id] + [report]
        self.versions.append((self.version, report))

    def _credited(self, report: OutcomeRecord):
        return [
            CreditedSession(report.session_id, report.first_reported_at, report.revision, credit)
            for credit in report.memory_credits()
        ]

    def feedback_version(self) -> int:
        return self.version

    def credited_memories(self, scope):
        self.credited_reads += 1
        return {
            m
            for found in self.credits_for(scope).values()
            for c in found
            if c.credit.share > 0
            for m in [c.credit.memory_id]
        }

    def credits_for(self, scope, memory_ids=None, *, session_id=None):
        found = {memory_id: [] for memory_id in memory_ids or ()}
        for report in sorted(self.reports, key=lambda r: (r.first_reported_at, r.session_id)):
            for credited in self._credited(report):
                if memory_ids is None or credited.credit.memory_id in found:
                    found.setdefault(credited.credit.memory_id, []).append(credited)
        return found

    def report_queries(self, scope, session_ids):
        return {r.session_id: queries_of(r) for r in self.reports if r.session_id in session_ids}

    def feedback_changed_since(self, version):
        changed = [report for written, report in self.versions if written > version]
        return (
            [(SCOPE, credited) for report in changed for credited in self._credited(report)],
            [(SCOPE, queries_of(report)) for report in changed],
        )


def queries_of(report: OutcomeRecord) -> ReportQueries:
    vectors = np.asarray(report.query_vectors, dtype=np.float32) if report.query_vectors else None
    return ReportQueries(report.session_id, report.queries, vectors, report.query_embedder)


def outcome(
    session: str, credits, queries=("deploy",), embedder: TableEmbedder | None = None, order: int = 0
):
    vectors = tuple(tuple(float(x) for x in embedder.embed_query(q)) for q in queries) if embedder else ()
    return OutcomeRecord(
        session_id=session,
        org_id="o",
        project_id="p",
        outcome="success",
        score=1.0,
        note=None,
        memory_ids=tuple(c.memory_id for c in credits),
        first_reported_at=START + timedelta(minutes=order),
        reported_at=START + timedelta(minutes=order),
        revision=1,
        credits=tuple(credits),
        queries=tuple(queries),
        query_vectors=vectors,
        query_embedder=embedder.name if embedder else None,
    )


# Every step at the spec's alpha, named memories too, so the weights below are the EMA's (the larger
# step of a named memory is tests/retrieval/test_outcomes.py's, and one test here).
SPEC_STEPS = WeightPolicy(named_alpha=0.2)


def index_over(
    outcomes: Reports, embedder: TableEmbedder | None = None, policy: WeightPolicy = SPEC_STEPS, **options
) -> FeedbackIndex:
    return FeedbackIndex(
        outcomes, embedder or TableEmbedder(VECTORS), closeness=CLOSENESS, policy=policy, **options
    )


def weight_for(index: FeedbackIndex, query: str, memory_id: str = "m") -> float:
    vector = TableEmbedder(VECTORS).embed_query(query)
    return index.weights(SCOPE, vector, [memory_record(memory_id)])[memory_id].weight


def test_a_report_moves_a_memory_for_close_queries_only():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)  # the same task: a full step
    assert weight_for(index, "close") == pytest.approx(1.15)  # cosine 0.8 >= full
    assert weight_for(index, "half") == pytest.approx(1.075)  # closeness 0.5: 1 + 0.5 x 0.15
    assert weight_for(index, "far") == 1.0  # unrelated: untouched
    assert weight_for(index, "deploy", "other") == 1.0  # no report names it


def test_a_named_memory_takes_the_named_step_for_close_queries_only():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    index = index_over(outcomes, embedder, policy=WeightPolicy())  # named_alpha 1.0
    assert weight_for(index, "deploy") == pytest.approx(1.75)  # 1 + 1.0 x (1.75 - 1)
    assert weight_for(index, "half") == pytest.approx(1.375)  # closeness 0.5: 1 + 0.5 x 0.75
    assert weight_for(index, "far") == 1.0


def test_the_query_is_embedded_only_when_a_credit_needs_comparing_and_then_once():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports(
        [
            outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder),
            outcome("s2", [MemoryCredit("n", "helpful", 1.0, 1.0, 0)], queries=(), order=1),
        ]
    )
    index = index_over(outcomes, embedder)
    asked: list[str] = []

    def lazily(query: str):
        return lambda: asked.append(query) or embedder.embed_query(query)

    # No credit for these memories, or only a session without recorded queries (it counts everywhere):
    # nothing to compare, so the query is never embedded.
    found = index.weights(SCOPE, lazily("deploy"), [memory_record("other"), memory_record("n")])
    assert asked == [] and found["other"].weight == 1.0 and found["n"].weight == pytest.approx(1.15)
    # m's report recorded its query: the query is embedded once, for every memory that needs it.
    found = index.weights(
        SCOPE, lazily("half"), [memory_record("m"), memory_record("m2"), memory_record("n")]
    )
    assert asked == ["half"] and found["m"].weight == pytest.approx(1.075)  # closeness 0.5


def test_the_weights_carry_the_steps_and_the_global_weight():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    found = index_over(outcomes, embedder).weights(
        SCOPE, embedder.embed_query("half"), [memory_record("m", weight=1.15)]
    )["m"]
    assert found.global_weight == 1.15
    [step] = found.steps
    assert (step.session_id, step.role, step.closeness) == ("s1", "helpful", pytest.approx(0.5, abs=1e-5))
    assert (step.weight_before, step.weight_after) == (1.0, pytest.approx(1.075, abs=1e-5))


def test_what_is_held_is_read_once_and_a_new_report_costs_one_read_of_its_rows():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    index = index_over(outcomes, embedder)
    for _ in range(3):
        weight_for(index, "deploy")
    assert index.reads == 3  # which memories the scope's reports credit, m's credits, its session's queries
    outcomes.add(outcome("s2", [MemoryCredit("m", "misleading", 1.0, 0.0, 0)], embedder=embedder, order=1))
    # 1.15, then a failure step, one of two named reports: 1.15 + 1/2 x 0.2 x (0.25 - 1.15) = 1.06
    assert weight_for(index, "deploy") == pytest.approx(1.06)
    assert index.reads == 4  # the rows the report wrote; s2's queries came with them


def test_a_memory_no_report_credits_is_weighed_without_a_read_until_a_report_credits_it():
    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy", "never") == 1.0
    reads = index.reads
    for name in ("never", "nor-this", "nor-that"):
        assert weight_for(index, "deploy", name) == 1.0
    assert index.reads == reads and outcomes.credited_reads == 1
    # A report credits "never" after the scope's credited memories were read: the next recall catches up,
    # and the rows it applies are all of "never"'s credits (none before), so they are not read again.
    outcomes.add(outcome("s2", [MemoryCredit("never", "helpful", 1.0, 1.0, 0)], embedder=embedder, order=1))
    assert weight_for(index, "deploy", "never") == pytest.approx(1.15)
    assert outcomes.credited_reads == 1
    assert index.reads == reads + 1  # the rows the report wrote, nothing more
    # A second report of "never" is applied to what is held: 1.15 + 1/2 x 0.2 x (0.25 - 1.15) = 1.06.
    outcomes.add(
        outcome("s3", [MemoryCredit("never", "misleading", 1.0, 0.0, 0)], embedder=embedder, order=2)
    )
    assert weight_for(index, "deploy", "never") == pytest.approx(1.06)
    assert index.reads == reads + 2


def test_a_scope_with_more_credited_memories_than_may_be_held_reads_each_candidates_credits():
    embedder = TableEmbedder(VECTORS)
    reports = [
        outcome(f"s{n}", [MemoryCredit(f"m{n}", "helpful", 1.0, 1.0, 0)], embedder=embedder, order=n)
        for n in range(3)
    ]
    outcomes = Reports(reports)
    index = index_over(outcomes, embedder, max_held_credited=2)
    assert weight_for(index, "deploy", "m1") == pytest.approx(1.15)
    assert weight_for(index, "deploy", "never") == 1.0
    reads = index.reads
    assert weight_for(index, "deploy", "other") == 1.0
    assert index.reads == reads + 1  # not known to be uncredited: read
    assert outcomes.credited_reads == 1  # the scope is not read again either


def test_a_corrected_report_replaces_its_sessions_credit_in_what_is_held():
    embedder = TableEmbedder(VECTORS)
    first = outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)
    outcomes = Reports([first])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)
    # The correction no longer credits m: its row is written with share 0.
    outcomes.add(outcome("s1", [MemoryCredit("m", "helpful", 0.0, 1.0, 0)], embedder=embedder))
    assert weight_for(index, "deploy") == 1.0


def test_queries_embedded_by_another_embedder_are_embedded_again():
    other = TableEmbedder({"deploy": (0.0, 1.0)}, name="old-model")  # its vectors mean nothing here
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=other)])
    embedder = TableEmbedder(VECTORS)
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)
    assert embedder.calls == ["deploy"]  # the stored query, embedded again by the running embedder


def test_hashed_query_vectors_are_always_made_again_from_the_stored_query():
    # Stored by an offline server from before a query's clitics were dropped, under the same name: the
    # vector stored is not the one the running embedder makes for the same query.
    stale = TableEmbedder({"deploy": (0.0, 1.0)}, name="hashed-v1:2")
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=stale)])
    embedder = TableEmbedder(VECTORS, name="hashed-v1:2")
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)  # the same task: a full step
    assert embedder.calls == ["deploy"]


def test_a_query_a_purge_withheld_counts_for_no_query_when_made_again_from_its_text():
    """A review: on the offline backend the stored query vectors are always made again from the text, so a
    withheld query got the placeholder's vector, not the zeros the purge wrote."""
    from storage.forgetting import WITHHELD

    credit = MemoryCredit("m", "helpful", 1.0, 1.0, 0)
    outcomes = Reports(
        [outcome("s1", [credit], queries=(WITHHELD,), embedder=TableEmbedder({WITHHELD: (1.0, 0.0)}))]
    )
    embedder = TableEmbedder(
        {**VECTORS, WITHHELD: (1.0, 0.0)}, name="hashed-v1:2"
    )  # the placeholder's: deploy's
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.0)  # cosine 0 with the zeroed query: too far
    assert WITHHELD not in embedder.calls
    # A model's stored vector, from a purge before vectors were zeroed: read as zeros all the same.
    model = TableEmbedder({**VECTORS, WITHHELD: (1.0, 0.0)}, name="model-x")
    outcomes = Reports([outcome("s1", [credit], queries=(WITHHELD,), embedder=model)])
    assert weight_for(index_over(outcomes, model), "deploy") == pytest.approx(1.0)
    assert weight_for(
        index_over(Reports([outcome("s1", [credit], embedder=model)]), model), "deploy"
    ) == pytest.approx(1.15)


def test_query_vectors_of_the_author_recipe_are_used_as_they_are():
    # Reports made while a model embedded memories as "author: content" stored their query vectors under
    # "<name>+author"; queries never carried the author, so those vectors are still the model's.
    embedder = TableEmbedder(VECTORS, name="st:m")
    authored = TableEmbedder(VECTORS, name="st:m")
    report = outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=authored)
    outcomes = Reports([replace(report, query_embedder=embedder.name + "+author")])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)
    assert embedder.calls == []  # the stored query vector is used, not embedded again


def test_a_report_from_before_credits_moves_the_global_weight_but_no_query():
    legacy = outcome("s0", [], queries=())
    legacy = OutcomeRecord(**{**legacy.__dict__, "memory_ids": ("m",)})
    assert legacy.memory_credits() == (MemoryCredit("m", "context", 1.0, 1.0, None),)
    assert weight_for(index_over(Reports([legacy])), "deploy") == 1.0


def test_a_memory_named_in_a_session_without_queries_counts_for_every_query():
    named = outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, None)], queries=())
    index = index_over(Reports([named]))
    assert weight_for(index, "far") == pytest.approx(1.15)


def test_a_session_without_queries_moves_its_named_memories_by_the_spec_step_only():
    # Nothing to compare: the report counts for every query, so even with the named step (default policy,
    # named_alpha 1.0) it moves a memory by alpha 0.2: 1.15 helpful, 0.85 misleading, never 1.75 or 0.25.
    helpful = outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, None)], queries=())
    index = index_over(Reports([helpful]), policy=WeightPolicy())
    assert weight_for(index, "far") == pytest.approx(1.15) and weight_for(index, "deploy") == pytest.approx(
        1.15
    )
    misleading = outcome("s1", [MemoryCredit("m", "misleading", 1.0, 0.0, None)], queries=())
    assert weight_for(index_over(Reports([misleading]), policy=WeightPolicy()), "far") == pytest.approx(0.85)


def test_a_named_memory_is_compared_with_every_query_of_its_session():
    embedder = TableEmbedder(VECTORS)
    named = outcome(
        "s1", [MemoryCredit("m", "helpful", 1.0, 1.0, None)], queries=("deploy", "close"), embedder=embedder
    )
    index = index_over(Reports([named]), embedder)
    # far: cosine 0 with deploy, 0.6 with close (closeness 1.0): the closest query of the session counts.
    assert weight_for(index, "far") == pytest.approx(1.15)
    alone = outcome(
        "s1", [MemoryCredit("m", "helpful", 1.0, 1.0, None)], queries=("deploy",), embedder=embedder
    )
    assert weight_for(index_over(Reports([alone]), embedder), "far") == 1.0


def test_only_the_newest_reports_of_a_memory_count():
    embedder = TableEmbedder(VECTORS)
    failures = [
        outcome(f"f{n}", [MemoryCredit("m", "misleading", 1.0, 0.0, 0)], embedder=embedder, order=n)
        for n in range(3)
    ]
    success = outcome("s", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder, order=9)
    index = index_over(Reports([*failures, success]), embedder, max_reports_per_memory=1)
    assert weight_for(index, "deploy") == pytest.approx(1.15)  # the three failures are older than the cap


def test_over_a_real_store_a_correction_that_drops_a_credit_is_caught_up_by_row_version(tmp_path):
    from storage.store import MemoryStore

    embedder = TableEmbedder(VECTORS)
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=2) as store:
        first = outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)
        store.put_outcome(first)
        index = FeedbackIndex(store, embedder, closeness=CLOSENESS, policy=SPEC_STEPS)
        assert weight_for(index, "deploy") == pytest.approx(1.15)
        reads = index.reads
        corrected = replace(first, revision=2, credits=(MemoryCredit("other", "helpful", 1.0, 1.0, 0),))
        store.put_outcome(corrected, previous=store.get_outcome(SCOPE, "s1"))
        assert weight_for(index, "deploy") == 1.0  # m's credit was written again with share 0
        assert weight_for(index, "deploy", "other") == pytest.approx(1.15)
        # The rows the correction wrote, and nothing more: no report credited "other" before, so its
        # credits came with them.
        assert index.reads == reads + 1


def test_what_is_held_stays_within_its_bounds():
    embedder = TableEmbedder(VECTORS)
    reports = [
        outcome(f"s{n}", [MemoryCredit(f"m{n}", "helpful", 1.0, 1.0, 0)], embedder=embedder, order=n)
        for n in range(10)
    ]
    index = index_over(Reports(reports), embedder, max_held_credits=3, max_held_queries=3)
    for n in range(10):
        assert weight_for(index, "deploy", f"m{n}") == pytest.approx(1.15)
    assert len(index._credits) == 3 and len(index._sessions) == 3


def test_recalls_in_flight_when_a_report_lands_read_its_rows_once_between_them():
    """Every recall in flight finds the version changed at once; one reads the changes, the others wait
    for it and use what it caught up to."""
    import threading

    embedder = TableEmbedder(VECTORS)
    outcomes = Reports([outcome("s1", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)
    outcomes.add(outcome("s2", [MemoryCredit("m", "helpful", 1.0, 1.0, 0)], embedder=embedder, order=1))
    reading, release = threading.Event(), threading.Event()
    change_reads = []
    real = outcomes.feedback_changed_since

    def slow_changes(version):
        change_reads.append(version)
        reading.set()
        release.wait(10)
        return real(version)

    outcomes.feedback_changed_since = slow_changes
    found = []
    threads = [threading.Thread(target=lambda: found.append(weight_for(index, "deploy"))) for _ in range(8)]
    threads[0].start()
    assert reading.wait(10)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert change_reads == [2]
    assert found == [pytest.approx(0.8 * 1.15 + 0.2 * 1.75)] * 8  # both reports, in every recall


def test_a_recall_waiting_behind_an_older_catch_up_still_sees_the_report_that_landed_before_it():
    """Recall A reads the changes of version 2 and is slow; report s3 lands (version 3); recall B, begun
    after it, waits for A and must then read s3 too, not take A's older version."""
    import threading

    embedder = TableEmbedder(VECTORS)
    helpful = [MemoryCredit("m", "helpful", 1.0, 1.0, 0)]
    outcomes = Reports([outcome("s1", helpful, embedder=embedder)])
    index = index_over(outcomes, embedder)
    assert weight_for(index, "deploy") == pytest.approx(1.15)
    outcomes.add(outcome("s2", helpful, embedder=embedder, order=1))
    computed, release = threading.Event(), threading.Event()
    real = outcomes.feedback_changed_since
    first = []

    def slow_changes(version):
        changes = real(version)
        if not first:
            first.append(version)
            computed.set()
            release.wait(10)
        return changes

    outcomes.feedback_changed_since = slow_changes
    found = {}
    a = threading.Thread(target=lambda: found.setdefault("a", weight_for(index, "deploy")))
    a.start()
    assert computed.wait(10)
    outcomes.add(outcome("s3", helpful, embedder=embedder, order=2))
    b = threading.Thread(target=lambda: found.setdefault("b", weight_for(index, "deploy")))
    b.start()
    release.set()
    a.join(10)
    b.join(10)
    # Three successes: 1.15, then 0.8 x 1.15 + 0.35 = 1.27, then 0.8 x 1.27 + 0.35 = 1.366.
    assert found == {"a": pytest.approx(1.27), "b": pytest.approx(1.366)}


def test_a_report_does_not_count_for_a_memory_that_says_what_set_its_query_apart_from_this_one():
    """A trial: "Backend tests run with make test", named helpful for "how do I run the backend tests",
    was lifted above the frontend's own memory for "how do I run the frontend tests" (cosine 0.90)."""
    backend, frontend = "how do I run the backend tests", "how do I run the frontend tests"
    table = {backend: (1.0, 0.0), frontend: (0.8, 0.6), "the backend tests": (0.8, 0.6)}
    embedder = TableEmbedder(table)
    credits = [
        MemoryCredit("make", "helpful", 1.0, 1.0, None),
        MemoryCredit("docker", "helpful", 1.0, 1.0, None),
    ]
    index = index_over(Reports([outcome("s1", credits, queries=(backend,), embedder=embedder)]), embedder)
    memories = [
        memory_record("make", content="Backend tests run with make test"),
        memory_record("docker", content="The test suite needs Docker running"),  # says neither word
        memory_record("npm", content="Frontend tests run with npm test"),  # the frontend's own, never named
    ]

    def weights(query: str, weighed: list[MemoryRecord] = memories) -> dict[str, float]:
        found = index.weights(SCOPE, embedder.embed_query(query), weighed, query_text=query)
        return {memory_id: round(w.weight, 6) for memory_id, w in found.items()}

    # Cosine 0.8, closeness 1: one named step of alpha 0.2 towards 1.75 is 1.15, unless set apart.
    assert weights(frontend) == {"make": 1.0, "docker": 1.15, "npm": 1.0}
    far = index.weights(SCOPE, embedder.embed_query(frontend), memories, query_text=frontend)["make"].far
    assert far == 1  # explained as a report about a task too far from this one
    assert weights(backend) == {"make": 1.15, "docker": 1.15, "npm": 1.0}
    # A query with no word the reporting one lacks: nothing sets it apart.
    assert weights("the backend tests") == {"make": 1.15, "docker": 1.15, "npm": 1.0}
    # The frontend's memory a candidate of the recall without being weighed here (an episode's siblings
    # are weighed apart from the candidates): it still sets the backend's memory apart.
    found = index.weights(
        SCOPE, embedder.embed_query(frontend), memories[:2], query_text=frontend, rivals=memories[2:]
    )
    assert {memory_id: round(w.weight, 6) for memory_id, w in found.items()} == {"make": 1.0, "docker": 1.15}
    # No memory of the recall says "frontend": the question reads as the reported task said otherwise.
    assert weights(frontend, memories[:2]) == {"make": 1.15, "docker": 1.15}


def test_a_memory_named_for_a_task_keeps_its_lift_for_the_task_said_in_other_words():
    """A trial: "Deploy harbor to staging with make deploy ENV=staging", named helpful for "how do I deploy
    harbor to staging", read 1.0 for "how do I ship harbor to staging" (the new word "ship" set it apart)
    while a memory the session only showed kept its share and ranked above it."""
    deploy, ship = "how do I deploy harbor to staging", "how do I ship harbor to staging"
    embedder = TableEmbedder({deploy: (1.0, 0.0), ship: (0.8, 0.6)})
    credits = [MemoryCredit("deploy", "helpful", 1.0, 1.0, None)]
    index = index_over(Reports([outcome("s1", credits, queries=(deploy,), embedder=embedder)]), embedder)
    memories = [
        memory_record("deploy", content="Deploy harbor to staging with make deploy ENV=staging"),
        memory_record("url", content="The staging URL is https://staging.harbor.dev"),
    ]
    found = index.weights(SCOPE, embedder.embed_query(ship), memories, query_text=ship)
    # Cosine 0.8, closeness 1: the named step, 0.8 x 1.0 + 0.2 x 1.75 = 1.15.
    assert found["deploy"].weight == pytest.approx(1.15) and found["deploy"].far == 0
    # A memory that says "ship" in passing shares one of the question's words (ship), the named memory two
    # (harbor, staging): no rival, the same task said otherwise (a review found the first version set it
    # apart for any memory of the recall that said the word).
    passing = memory_record("release", content="We ship a release to customers every second Friday")
    found = index.weights(SCOPE, embedder.embed_query(ship), [*memories, passing], query_text=ship)
    assert found["deploy"].weight == pytest.approx(1.15) and found["deploy"].set_apart == 0


def test_a_memory_named_misleading_then_helpful_is_set_apart_whole_for_a_task_set_apart():
    """A review: with only the helpful reports set apart, one older misleading report buried a memory that
    four later reports named helpful, for the neighbouring task (0.25 against 1.0 before)."""
    backend, frontend = "how do I run the backend tests", "how do I run the frontend tests"
    embedder = TableEmbedder({backend: (1.0, 0.0), frontend: (0.8, 0.6)})
    reports = [
        outcome(
            "s0", [MemoryCredit("make", "misleading", 1.0, 0.0, None)], queries=(backend,), embedder=embedder
        )
    ]
    reports += [
        outcome(
            f"s{n}",
            [MemoryCredit("make", "helpful", 1.0, 1.0, None)],
            queries=(backend,),
            embedder=embedder,
            order=n,
        )
        for n in range(1, 5)
    ]
    index = index_over(Reports(reports), embedder)
    memories = [
        memory_record("make", content="Backend tests run with make test"),
        memory_record("npm", content="Frontend tests run with npm test"),
    ]
    found = index.weights(SCOPE, embedder.embed_query(frontend), memories, query_text=frontend)["make"]
    assert (found.weight, found.far, found.set_apart) == (1.0, 5, 5)
    # For its own task the five replay in order: 0.85, then four steps towards 1.75 (alpha 0.2), the n-th
    # helpful one of n + 1 named reports taking n / (n + 1) of its step.
    own = index.weights(SCOPE, embedder.embed_query(backend), memories, query_text=backend)["make"]
    expected = 0.85
    for n in range(1, 5):
        expected += n / (n + 1) * 0.2 * (1.75 - expected)
    assert own.weight == pytest.approx(expected) and own.set_apart == 0


def test_a_memory_named_misleading_stays_lowered_for_the_task_said_in_other_words():
    """A trial: "Use make seed to load demo data", named misleading for "load demo data into the local
    database", came first again at 1.0 for "populate the local database with demo data", though another
    memory said "populate": the agent's word against a memory is not set apart by a new word."""
    load, populate = "load demo data into the local database", "populate the local database with demo data"
    embedder = TableEmbedder({load: (1.0, 0.0), populate: (0.8, 0.6)})
    credits = [MemoryCredit("seed", "misleading", 1.0, 0.0, None)]
    index = index_over(Reports([outcome("s1", credits, queries=(load,), embedder=embedder)]), embedder)
    memories = [
        memory_record("seed", content="Use make seed to load demo data"),
        memory_record("fixtures", content="Populate fixtures with scripts/fixtures.py"),
    ]
    found = index.weights(SCOPE, embedder.embed_query(populate), memories, query_text=populate)
    # The named step towards 0.25: 0.8 x 1.0 + 0.2 x 0.25 = 0.85.
    assert found["seed"].weight == pytest.approx(0.85) and found["seed"].far == 0


def test_set_apart_reads_words_by_their_roots():
    from retrieval.feedback_index import set_apart
    from retrieval.text import term_set

    asked = term_set("NATS messages are ending up in the dead letter queue")
    said = term_set("Handlers must be idempotent because redelivery happens")
    letters = {"letter"}.__contains__  # another memory of the recall says "letters"
    assert set_apart(asked, "NATS messages are being redelivered over and over", said, letters)
    assert not set_apart(
        asked, "NATS messages are being redelivered", term_set("Dead letters are redelivered"), letters
    )
    assert not set_apart(asked, None, said, letters)  # a withheld or unknown query sets nothing apart
    # No other memory says a word of this query's own: the same task said otherwise.
    assert not set_apart(asked, "NATS messages are being redelivered over and over", said, lambda root: False)


def test_a_task_only_partly_close_is_set_apart_by_its_own_word_without_a_rival_saying_it():
    """A trial (offline backend): a report naming the billing deploy memory for "how do I deploy billing to
    staging" (closeness 0.18) lifted it over the VPN memory for "vpn for staging", which says "OpenVPN": no
    memory says "vpn" as the query does, so no rival set the report apart. Between paraphrases (full
    closeness) a rival is still needed: "ship" for "deploy" is the same task said otherwise."""
    asked = term_set("vpn for staging")
    reporting = "how do I deploy billing to staging"
    said = term_set("Deploy billing to staging with ./ops/deploy.sh billing staging from the ops repo.")
    assert set_apart(asked, reporting, said, lambda root: False, paraphrase=False)
    assert not set_apart(asked, reporting, said, lambda root: False, paraphrase=True)
    # Nor is a memory that says this query's own word set apart, partly close or not.
    both = term_set("Deploy billing to staging over the vpn")
    assert not set_apart(asked, reporting, both, lambda root: True, paraphrase=False)


@pytest.mark.parametrize("cosine, lifted", [(0.8, True), (0.5, True), (0.4, False)])
def test_a_rival_is_needed_from_the_closeness_of_a_paraphrase_down_to_half(cosine, lifted):
    """A review: "ship" for "deploy" at closeness 0.67 (a paraphrase MiniLM puts at cosine 0.82) lost its lift
    when only full closeness asked for a rival. Closeness here: (cosine - 0.3) / 0.3, so 1.0, 0.67, 0.33."""
    deploy, ship = "how do I deploy harbor to staging", "how do I ship harbor to staging"
    embedder = TableEmbedder({deploy: (1.0, 0.0), ship: (cosine, (1 - cosine**2) ** 0.5)})
    credits = [MemoryCredit("deploy", "helpful", 1.0, 1.0, None)]
    index = index_over(Reports([outcome("s1", credits, queries=(deploy,), embedder=embedder)]), embedder)
    memories = [
        memory_record("deploy", content="Deploy harbor to staging with make deploy ENV=staging"),
        memory_record("url", content="The staging URL is https://staging.harbor.dev"),  # says no "ship"
    ]
    found = index.weights(SCOPE, embedder.embed_query(ship), memories, query_text=ship)["deploy"]
    # Under half as close the query's own word sets the report apart, no rival needed.
    assert (found.weight > 1.0, found.set_apart) == (lifted, 0 if lifted else 1)
