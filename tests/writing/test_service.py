"""The write service (writing.service): the new memories of remembers in flight at once are inserted
together, and each is consolidated by its own caller."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.text import content_hash
from storage import schema
from storage.records import Scope
from tests.fakes import RecordingEmbedder
from tests.helpers import killed_after, make_runtime, settings_for
from tools.common import Caller, ToolFailure, memory_id_for
from tools.remember import RememberInput, draft_of, prepare, remember
from tools.remember_many import BatchItem, RememberManyInput, remember_many

CALLER = Caller(agent_id="claude-code", session_id="ses_1")
TIMEOUT = 30.0


class GatedEmbedder(RecordingEmbedder):
    """Keeps its first batch waiting until released, so that remembers arriving meanwhile queue up; and
    records the texts of each batch it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed_documents(self, texts):
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            self.entered.set()
            assert self.release.wait(TIMEOUT)
        return super().embed_documents(texts)


def queue_behind(runtime, embedder: GatedEmbedder, first: threading.Thread, others: list[threading.Thread]):
    """Start ``others`` while ``first`` is held in the embedder, wait until every one of them queued for
    the next batch, then let ``first`` go and wait for all of them."""
    for thread in others:
        thread.start()
    deadline = time.monotonic() + TIMEOUT
    while runtime.writer.queued < len(others):
        assert time.monotonic() < deadline, "the remembers did not queue behind the first"
        time.sleep(0.01)
    embedder.release.set()
    for thread in [first, *others]:
        thread.join(TIMEOUT)


def test_remembers_arriving_while_one_is_written_are_embedded_and_committed_together(settings):
    embedder = GatedEmbedder()
    runtime = make_runtime(settings, embedder=embedder)
    results = {}

    def write(content: str, project: str = "default") -> None:
        results[content] = remember(RememberInput(content=content, project_id=project), runtime, CALLER)

    try:
        first = threading.Thread(target=write, args=("The deploy key rotates every ninety days",))
        first.start()
        assert embedder.entered.wait(TIMEOUT)
        before = runtime.store.table_version()  # the first one's commit is still to come
        same_scope = [
            "Staging runs Kubernetes 1.29",
            "Lunch is served at noon on Fridays",
            "The billing service is written in Go",
        ]
        others = [threading.Thread(target=write, args=(text,)) for text in same_scope]
        others.append(threading.Thread(target=write, args=("The wiki moved to Notion", "docs")))
        queue_behind(runtime, embedder, first, others)

        # The first alone; then the four that queued behind it, in one embedding batch and one commit.
        assert embedder.batches[0] == ["The deploy key rotates every ninety days"]
        assert sorted(embedder.batches[1]) == sorted([*same_scope, "The wiki moved to Notion"])
        assert len(embedder.batches) == 2
        assert runtime.store.table_version() == before + 2
        assert [out.status for out in results.values()] == ["stored"] * 5
        for text in same_scope:
            stored = runtime.store.get_memory(results[text].id)
            assert (stored.content, stored.status, stored.agent_id) == (text, "active", "claude-code")
            assert stored.consolidated_at is not None
        wiki = runtime.store.get_memory(results["The wiki moved to Notion"].id)
        assert (wiki.org_id, wiki.project_id) == ("default", "docs")
        # Each of the three in one scope searched its neighbours with the product its batch made at once
        # (``ScopeCopy.prime``); the one alone in "docs", and the first, made their own.
        with runtime.store.cache.reading(Scope("default", "default")) as copy:
            assert copy is not None and copy.primed_taken == 3
    finally:
        embedder.release.set()
        runtime.close()


def test_a_batch_primes_no_products_when_consolidation_is_off(tmp_path):
    embedder = GatedEmbedder()
    runtime = make_runtime(settings_for(tmp_path / "store", consolidation_enabled=False), embedder=embedder)
    try:
        first = threading.Thread(
            target=lambda: remember(
                RememberInput(content="The deploy key rotates every ninety days"), runtime, CALLER
            )
        )
        first.start()
        assert embedder.entered.wait(TIMEOUT)
        texts = ["Staging runs Kubernetes 1.29", "Lunch is served at noon", "Billing is written in Go"]
        others = [
            threading.Thread(target=lambda text=text: remember(RememberInput(content=text), runtime, CALLER))
            for text in texts
        ]
        queue_behind(runtime, embedder, first, others)
        assert sorted(embedder.batches[1]) == sorted(texts)  # one batch, which no consolidation searches for
        with runtime.store.cache.reading(Scope("default", "default")) as copy:
            assert copy is not None and copy.primed_waiting == 0 and copy.primed_taken == 0
    finally:
        embedder.release.set()
        runtime.close()


def test_a_near_duplicate_collapsed_in_a_batch_is_superseded_in_the_name_of_the_agent_who_restated_it(
    runtime,
):
    out = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="Lunch is served at noon on Fridays", agent_id="planner"),
                BatchItem(content="The staging cluster runs Kubernetes 1.29", agent_id="ops-bot"),
                BatchItem(content="the staging cluster runs kubernetes 1.29", agent_id="ops-bot"),
            ]
        ),
        runtime,
        CALLER,
    )
    assert out.collapsed == 1
    [event] = runtime.store.recent_lineage(Scope("default", "default"), ["supersede"], 5)
    assert (event.memory_id, event.related_id) == (out.results[1].id, out.results[2].id)
    assert event.agent_id == "ops-bot"


def test_the_values_a_batch_disputes_are_written_in_one_commit(runtime):
    ports = [f"billing-api listens on port {port} in staging" for port in (8001, 8002, 8003, 8004)]
    contradictions = runtime.store.tables()[schema.CONTRADICTIONS]
    before = contradictions.version
    out = remember_many(RememberManyInput(items=[BatchItem(content=text) for text in ports]), runtime, CALLER)
    assert contradictions.version == before + 1  # one commit, not one a pair (each also left a fragment)
    place = {result.id: index for index, result in enumerate(out.results)}
    pairs = runtime.store.contradictions(Scope("default", "default"))
    # every port disputes every port stated before it, as when remembered one at a time
    assert sorted((place[p.older_id], place[p.newer_id]) for p in pairs) == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 2),
        (1, 3),
        (2, 3),
    ]


def test_a_restatement_absorbed_behind_the_call_hands_its_dispute_to_the_memory_it_restates(runtime):
    # The supersede is committed on another thread, which carries the restatement's open pairs to the
    # memory it restates: it must find the pair this remember found, not one still waiting to be written.
    ops = Caller(agent_id="ops-bot", session_id="ses_2")
    restated = remember(
        RememberInput(content="billing-api now listens on nginx port 8002 in staging"), runtime, ops
    )
    older = remember(RememberInput(content="billing-api listens on port 8001 in staging"), runtime, CALLER)
    again = remember(RememberInput(content="billing-api now listens on port 8002 in staging"), runtime, ops)
    assert again.consolidation.absorbed_into == restated.id
    assert runtime.writer.settle(TIMEOUT)
    names = {restated.id: "restated", older.id: "older", again.id: "again"}
    pairs = runtime.store.contradictions(Scope("default", "default"), status=None)
    assert sorted((names[p.older_id], names[p.newer_id], p.status) for p in pairs) == [
        ("older", "again", "resolved"),
        ("restated", "older", "open"),
    ]


@pytest.mark.parametrize("batch", [False, True])
def test_a_value_stored_after_a_newer_value_another_writer_stored_first_is_disputed_by_it(runtime, batch):
    # Two writers at once: this memory was made (its time taken) before the other's and stored after it, so
    # the other's examination never saw it; its own must judge the pair (two processes left it to each other).
    ops = Caller(agent_id="ops-bot", session_id="ses_2")
    said = RememberInput(content="The amber gateway listens on port 8001 in staging")
    made = prepare(runtime, draft_of(said, runtime, CALLER))
    newer = remember(RememberInput(content="The amber gateway listens on port 8002 in staging"), runtime, ops)
    assert newer.consolidation.contradicts == []  # the older value was not stored yet
    if batch:
        [stored] = runtime.writer.remember_many([made], llm=None)
    else:
        stored = runtime.writer.remember(made, llm=None)
    assert stored.consolidation.contradicts == [newer.id]
    [dispute] = runtime.store.contradictions(Scope("default", "default"))
    assert (dispute.older_id, dispute.newer_id) == (made.record.id, newer.id)


def test_a_write_retried_after_its_examination_failed_leaves_alone_what_a_newer_memory_judged_of_it(
    runtime, monkeypatch
):
    # The newer memory met it, by their dates, and kept it: the old state itself stays beside a move away.
    archived = RememberInput(content="Archived image uploads: S3")
    examine = runtime.consolidation.on_write
    monkeypatch.setattr(runtime.consolidation, "on_write", FailingExamination())
    with pytest.raises(ConnectionResetError):
        remember(archived, runtime, CALLER)
    monkeypatch.setattr(runtime.consolidation, "on_write", examine)
    moved = remember(RememberInput(content="We moved image uploads from S3 to R2"), runtime, CALLER)
    assert (moved.consolidation.contradicts, moved.consolidation.revised) == ([], [])
    again = remember(archived, runtime, CALLER)  # the retry examines the first write's memory
    assert again.consolidation is not None and again.consolidation.contradicts == []
    assert runtime.store.contradictions(Scope("default", "default")) == []


def test_a_batchs_items_judge_each_other_once_by_their_dates(runtime):
    # The move is examined first and keeps the older archive; the archive, dated before it, met it there.
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    items = [
        BatchItem(content="We moved image uploads from S3 to R2"),
        BatchItem(content="Archived image uploads: S3", occurred_at=yesterday),
    ]
    out = remember_many(RememberManyInput(items=items), runtime, CALLER)
    assert [result.consolidation.contradicts for result in out.results] == [[], []]
    assert runtime.store.contradictions(Scope("default", "default")) == []


class FailingExamination:
    """A consolidation whose connection breaks (the memory is stored, not examined)."""

    def __call__(self, *args, **kwargs):
        raise ConnectionResetError("connection reset by peer")


class BrokenLLM:
    """An LLM whose connection breaks mid-call: consolidation asks it only about a near-duplicate."""

    name = "broken-llm"

    def complete(self, request):
        raise ConnectionResetError("connection reset by peer")


def test_in_a_batch_each_draft_is_consolidated_with_its_own_requests_llm_and_only_its_own_error(settings):
    embedder = GatedEmbedder()
    runtime = make_runtime(settings, embedder=embedder)
    broken = Caller("claude-code", "ses_1", BrokenLLM())  # a connection whose LLM fails when asked
    outcomes = {}

    def write(content: str, caller: Caller) -> None:
        try:
            outcomes[content] = remember(RememberInput(content=content), runtime, caller).status
        except Exception as exc:
            outcomes[content] = type(exc).__name__

    try:
        embedder.release.set()
        stored = [
            remember(RememberInput(content=text), runtime, CALLER).id
            for text in ("I prefer TypeScript.", "The staging cluster runs Kubernetes 1.29")
        ]
        embedder.batches.clear()
        embedder.release.clear()
        gate = threading.Thread(target=write, args=("The deploy key rotates every ninety days", CALLER))
        gate.start()
        assert embedder.entered.wait(TIMEOUT)
        # Each restates a stored memory closely enough for consolidation to ask an LLM, if it has one.
        drafts = {"i prefer typescript": broken, "the staging cluster runs kubernetes 1.29": CALLER}
        threads = [threading.Thread(target=write, args=pair) for pair in drafts.items()]
        queue_behind(runtime, embedder, gate, threads)

        assert sorted(embedder.batches[1]) == sorted(drafts)  # they were one batch
        assert outcomes == {
            "The deploy key rotates every ninety days": "stored",
            "i prefer typescript": "ConnectionResetError",  # its request's LLM failed
            "the staging cluster runs kubernetes 1.29": "stored",  # its own, though the batch stored it first
        }
        home = Scope("default", "default")
        failed, restated = (runtime.store.get_memory(memory_id_for(home, content_hash(t))) for t in drafts)
        assert failed.consolidated_at is None  # stored, not examined: a retry consolidates it
        assert restated.consolidated_at is not None  # the rules decided, without an LLM
        old = runtime.store.get_memory(stored[1])
        assert (old.status, old.replaced_by) == ("superseded", restated.id)
        assert runtime.store.get_memory(stored[0]).status == "active"
    finally:
        embedder.release.set()
        runtime.close()


def test_two_agents_restating_a_forgotten_memory_at_once_restore_it_once_and_corroborate(settings):
    embedder = GatedEmbedder()
    runtime = make_runtime(settings, embedder=embedder)
    text = "The staging cluster runs Kubernetes 1.29"
    home = Scope("default", "default")
    outcomes = {}

    def write(agent: str) -> None:
        outcomes[agent] = remember(RememberInput(content=text), runtime, Caller(agent, f"ses_{agent}"))

    try:
        embedder.release.set()
        first = remember(RememberInput(content=text), runtime, Caller("ops-bot", "ses_0"))
        runtime.store.retract(home, [first.id], datetime.now(UTC))
        embedder.batches.clear()
        embedder.release.clear()
        slow = threading.Thread(target=write, args=("planner",))  # held while embedding its restatement
        slow.start()
        assert embedder.entered.wait(TIMEOUT)
        fast = threading.Thread(target=write, args=("reviewer",))  # restores it meanwhile
        fast.start()
        fast.join(TIMEOUT)
        embedder.release.set()
        slow.join(TIMEOUT)

        assert outcomes["reviewer"].status == "stored"
        assert outcomes["reviewer"].note.startswith("restored: an identical memory had been retracted")
        assert outcomes["planner"].status == "duplicate"  # no error: the memory was live again
        assert "recorded planner as corroborating it" in outcomes["planner"].note
        stored = runtime.store.get_memory(first.id)
        assert (stored.status, stored.agent_id) == ("active", "reviewer")
    finally:
        embedder.release.set()
        runtime.close()


class ReportInProgress:
    """A report holding the reports' lock until released: carries of credits queue behind it."""

    def __init__(self, runtime) -> None:
        self._held, self._release = threading.Event(), threading.Event()

        def hold() -> None:
            with runtime.store.reporting():
                self._held.set()
                assert self._release.wait(TIMEOUT)

        self._thread = threading.Thread(target=hold)

    def __enter__(self) -> "ReportInProgress":
        self._thread.start()
        assert self._held.wait(TIMEOUT)
        return self

    def __exit__(self, *exc_info) -> None:
        self._release.set()
        self._thread.join(TIMEOUT)


def credited(runtime, content: str, question: str, outcome: str, role: str) -> str:
    """A memory one report moved: named helpful (1.0 -> 1.15) or misleading (1.0 -> 0.85)."""
    from tools.recall import RecallInput, recall
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    memory_id = remember(RememberInput(content=content), runtime, CALLER).id
    recall(RecallInput(query=question), runtime, CALLER)
    report_outcome(ReportOutcomeInput(outcome=outcome, **{role: [memory_id]}), runtime, CALLER)
    return memory_id


# A runbook step a report named helpful (1.15), and the same step restated twice (case, punctuation).
ROLLBACK = "Rollback a bad deploy with make rollback"
RESTATED = "rollback a bad deploy with make rollback."
RESTATED_AGAIN = "ROLLBACK a bad deploy with make rollback"


def helped(runtime) -> str:
    return credited(runtime, ROLLBACK, "roll back a deploy", "success", "helpful_ids")


def said(runtime, content: str, **fields):
    return remember(RememberInput(content=content, **fields), runtime, CALLER)


def weights(runtime, *memory_ids: str) -> list[float]:
    return [runtime.store.get_memory(memory_id).weight for memory_id in memory_ids]


def test_a_restatement_of_a_restatement_gets_the_credits_still_on_their_way_to_the_first(runtime):
    """A -> B -> C while the carry of A's credits to B waits: they do not stay on B, which left the active
    set; they go on to C, the memory that stands."""
    a = helped(runtime)
    with ReportInProgress(runtime):
        b, c = said(runtime, RESTATED), said(runtime, RESTATED_AGAIN)
        assert b.consolidation.superseded == [a] and c.consolidation.superseded == [b.id]
    assert runtime.writer.settle(TIMEOUT)
    assert weights(runtime, a, b.id, c.id) == [1.15, 1.15, 1.15]
    assert runtime.store.get_memory(c.id).status == "active"


def test_a_correction_of_a_restatement_takes_none_of_the_blame_still_on_its_way(runtime):
    """A misled; B restates it (the blame goes to B) and C corrects B before that carry ran: B ends with
    A's blame, C with none of it, as when each carry runs before the next write."""
    a = credited(runtime, "The API listens on port 8080", "which port", "failure", "misleading_ids")
    with ReportInProgress(runtime):
        b = said(runtime, "the API listens on port 8080.")
        c = said(runtime, "The API now listens on port 9090")
        assert b.consolidation.superseded == [a] and c.consolidation.revised == [b.id]
    assert runtime.writer.settle(TIMEOUT)
    assert weights(runtime, a, b.id, c.id) == [0.85, 0.85, 1.0]


def test_an_explicit_update_of_a_memory_credits_are_on_their_way_to_waits_for_them(runtime):
    a = helped(runtime)
    with ReportInProgress(runtime):
        b = said(runtime, RESTATED)
        fixed = said(runtime, "Roll back a bad deploy with make rollback ENV=prod", replaces=b.id)
    assert runtime.writer.settle(TIMEOUT)
    assert weights(runtime, a, b.id, fixed.id) == [1.15, 1.15, 1.15]


def test_closing_the_runtime_carries_what_is_still_on_its_way(settings):
    runtime = make_runtime(settings)
    helped(runtime)
    with ReportInProgress(runtime):
        b = said(runtime, RESTATED)
    runtime.close()
    reopened = make_runtime(settings)
    try:
        assert weights(reopened, b.id) == [1.15]
    finally:
        reopened.close()


def test_a_restatement_is_answered_while_a_report_holds_the_lock_and_its_credits_follow(runtime):
    """Carrying a superseded memory's credits is a report's sequence; the remember that superseded it is
    answered without waiting for the reports' lock, and the memory that stands gets them once it is free."""
    from tools.recall import RecallInput, recall
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    old = said(runtime, ROLLBACK, tags=["ops"])
    recall(RecallInput(query="how do I roll back a deploy"), runtime, CALLER)
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[old.id]), runtime, CALLER)
    assert runtime.store.get_memory(old.id).weight == 1.15  # one named success, the spec's step
    with ReportInProgress(runtime):
        new = said(runtime, RESTATED)
        assert new.consolidation.superseded == [old.id]
        standing = runtime.store.get_memory(new.id)
        assert standing.tags == ("ops",) and standing.weight == 1.0  # tags at once; credits wait
        assert not runtime.writer.settle(0.2)
    assert runtime.writer.settle(TIMEOUT)
    assert runtime.store.get_memory(new.id).weight == 1.15


CRASHING_WRITER = """
import sys, time
from tests.helpers import make_runtime, settings_for
from tests.writing.test_service import RESTATED, ReportInProgress, helped, said

runtime = make_runtime(settings_for(sys.argv[1]))
helped(runtime)
ReportInProgress(runtime).__enter__()  # holds the reports' lock for longer than the test waits
restated = said(runtime, RESTATED).id
runtime.writer._supersedes.settle(30)  # its supersede is in; its credits wait behind the report in progress
print(restated, flush=True)
time.sleep(3600)
"""


def test_credits_a_killed_process_was_handing_on_are_carried_by_the_next_start(settings):
    with killed_after(CRASHING_WRITER, str(settings.db_uri)) as process:  # kill -9: the carry never ran
        restated_id = process.stdout.readline().strip()
        assert restated_id.startswith("mem_"), process.stderr.read()
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_memory(restated_id).weight == 1.0
        assert runtime.writer.recover_unfinished() == (0, 1)
        assert runtime.writer.settle(TIMEOUT)
        assert runtime.store.get_memory(restated_id).weight == 1.15  # the named success, carried
        assert runtime.writer.recover_unfinished() == (0, 0)  # nothing left written down
    finally:
        runtime.close()


CRASHING_CONSOLIDATION = """
import sys, time
from tests.helpers import make_runtime, settings_for
from tests.writing.test_service import ROLLBACK, RESTATED, helped, said

runtime = make_runtime(settings_for(sys.argv[1]))
if sys.argv[2] in ("llm", "reword"):
    old = said(runtime, "The staging database is postgres version fifteen on the big host").id
elif sys.argv[2] == "correction":
    old = said(runtime, "Alice Chen owns the billing service; page her for billing incidents").id
elif sys.argv[2] == "version":
    old = said(runtime, "make rollback ENV=prod TIMEOUT=30", kind="artifact").id
else:
    old = helped(runtime) if sys.argv[2].startswith("update-") else said(runtime, ROLLBACK).id
print(old, flush=True)

def killed_here(*args, **kwargs):
    print(args[1].id if sys.argv[2] in ("update", "correction") else args[0].id, flush=True)
    time.sleep(3600)

if sys.argv[2] == "llm":  # a language model's supersede (the rules keep both), answered, never committed
    from tests.fakes import ScriptedLLM
    from tools.common import Caller

    decision = '{"decision": "supersede", "survivor": 1, "absorb": [0], "reworded": null, "reason": "one fact"}'
    llm = ScriptedLLM({"consolidate": [decision], "revision": ['{"revises": false}']})
    runtime.store.supersede = lambda *args, **kwargs: time.sleep(3600)
    from tools.remember import RememberInput, draft_of, prepare, remember

    text = "Staging runs postgres fifteen, on the big host machine"  # the rules alone would keep both
    new = remember(RememberInput(content=text), runtime, Caller("claude-code", "ses_1", llm))
    assert new.consolidation.superseded == [old], new.consolidation
    print(new.id, flush=True)
    time.sleep(3600)
elif sys.argv[2] == "reword":  # a language model's rewording: its memory is in, the group's supersede next
    from tests.fakes import ScriptedLLM
    from tools.common import Caller
    from tools.remember import RememberInput, draft_of, prepare, remember

    reworded = "Staging runs postgres version fifteen on the big host machine"
    decision = (
        '{"decision": "supersede", "survivor": 1, "absorb": [0], "reworded": "' + reworded + '", "reason": "one fact"}'
    )
    llm = ScriptedLLM({"consolidate": [decision], "revision": ['{"revises": false}']})

    def cut(scope, losers, survivor_id, at, **kwargs):
        print(survivor_id, flush=True)
        time.sleep(3600)

    runtime.store.supersede = cut
    text = "Staging runs postgres fifteen, on the big host machine"
    remember(RememberInput(content=text), runtime, Caller("claude-code", "ses_1", llm))
    time.sleep(3600)
elif sys.argv[2] == "update-carry":  # the update and its lineage are in; the credits are carried next
    def cut(scope, heir_id, losers):
        print(heir_id, flush=True)
        time.sleep(3600)

    runtime.writer.inheritance.inherit_credits = cut
    said(runtime, "Rollback a bad deploy with make rollback ENV=prod", replaces=old)
    time.sleep(3600)
elif sys.argv[2] in ("lineage", "update-lineage"):  # the status change is committed; its lineage is next
    def cut(*args, **kwargs):
        print(kwargs["related_id"], flush=True)
        time.sleep(3600)

    runtime.consolidation.record_retirement = cut
    if sys.argv[2] == "lineage":
        said(runtime, RESTATED)
    else:
        said(runtime, "Rollback a bad deploy with make rollback ENV=prod", replaces=old)
    time.sleep(3600)
elif sys.argv[2] == "correction":  # the update is done; what said the old text is disputed next
    from tools.common import Caller
    from tools.remember import RememberInput, draft_of, prepare, remember

    other = remember(RememberInput(content="Alice Chen owns the billing service."), runtime, Caller("cursor", "ses_2"))
    print(other.id, flush=True)
    runtime.writer.consolidation.on_correction = killed_here
    said(runtime, "Dave Patel owns the billing service; page him for billing incidents", replaces=old)
elif sys.argv[2] == "version":  # an artifact's update is committed; the link to its previous version next
    def cut(memory_id, previous_id):
        print(memory_id, flush=True)
        time.sleep(3600)

    runtime.store.set_version_of = cut
    said(runtime, "make rollback ENV=prod TIMEOUT=60", replaces=old)
    time.sleep(3600)
elif sys.argv[2] == "update":  # the correction's row is in; the old text is not superseded yet
    runtime.writer.apply_update = killed_here
    said(runtime, "Rollback a bad deploy with make rollback ENV=prod", replaces=old)
elif sys.argv[2] == "commit":  # answered; the supersede it decided is never committed
    runtime.store.supersede = lambda *args, **kwargs: time.sleep(3600)
    print(said(runtime, RESTATED).id, flush=True)
    time.sleep(3600)
else:  # the restatement's row is in, stamped as examined; its consolidation never runs
    runtime.writer.consolidation.on_write = killed_here
    said(runtime, RESTATED)
"""


def killed_between_insert_and_consolidation(settings, step: str) -> tuple[str, str]:
    """A process remembers a memory, then a second one, and is killed (kill -9) once the second's row is
    committed, before its consolidation (``step`` "update": before its explicit update) ran. Returns
    the two ids."""
    with killed_after(CRASHING_CONSOLIDATION, str(settings.db_uri), step) as process:
        old, new = process.stdout.readline().strip(), process.stdout.readline().strip()
        assert old.startswith("mem_") and new.startswith("mem_"), process.stderr.read()
    return old, new


def test_a_restatement_a_killed_process_never_consolidated_is_by_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "consolidation")
    runtime = make_runtime(settings)
    try:
        before = runtime.store.get_memories([old, new], Scope("default", "default"))
        # Half done: both active, and the new one stamped as examined, so the sweep would never look.
        assert [before[old].status, before[new].status] == ["active", "active"]
        assert before[new].consolidated_at is not None
        assert runtime.writer.recover_unfinished() == (1, 0)
        after = runtime.store.get_memory(old)
        assert (after.status, after.replaced_by) == ("superseded", new)
        [event] = runtime.store.lineage(Scope("default", "default"), [old])
        assert (event.action, event.related_id) == ("supersede", new)
        assert runtime.writer.recover_unfinished() == (0, 0)  # done, and nothing left written down
    finally:
        runtime.close()


def test_a_supersede_a_killed_process_answered_and_never_committed_is_by_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "commit")
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_memory(old).status == "active"
        assert runtime.writer.recover_unfinished() == (1, 0)
        assert runtime.store.get_memory(old).replaced_by == new
        [event] = runtime.store.lineage(Scope("default", "default"), [old])
        assert (event.action, event.related_id) == ("supersede", new)
    finally:
        runtime.close()


def test_an_explicit_update_a_killed_process_left_half_done_is_finished_by_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "update")
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_memory(old).status == "active"  # the old text beside the correction
        assert runtime.writer.recover_unfinished() == (1, 0)
        after = runtime.store.get_memory(old)
        assert (after.status, after.replaced_by) == ("superseded", new)
        assert runtime.store.get_memory(new).status == "active"
        [event] = runtime.store.lineage(Scope("default", "default"), [old])
        assert (event.action, event.resolver, event.reason) == ("supersede", "explicit", "explicit update")
    finally:
        runtime.close()


def test_an_explicit_updates_correction_a_killed_process_never_made_is_made_by_the_next_start(settings):
    """Another agent's "Alice Chen owns the billing service." is disputed by the update that handed the
    service to Dave Patel, even when a crash came between the update and that dispute."""
    with killed_after(CRASHING_CONSOLIDATION, str(settings.db_uri), "correction") as process:
        old, other, new = (process.stdout.readline().strip() for _ in range(3))
        assert all(i.startswith("mem_") for i in (old, other, new)), process.stderr.read()
    runtime = make_runtime(settings)
    try:
        reach = Scope("default", "default")
        assert runtime.store.newer_contradictions(reach, [other]) == {}  # the dispute never made
        assert runtime.writer.recover_unfinished() == (1, 0)
        assert runtime.store.get_memory(old).replaced_by == new
        assert runtime.store.newer_contradictions(reach, [other]) == {other: [new]}
        assert runtime.writer.recover_unfinished() == (0, 0)
    finally:
        runtime.close()


def test_a_language_models_supersede_a_killed_process_answered_is_committed_as_decided_by_the_next_start(
    settings,
):
    """The next start has no language model: it must not take the decision again by the rules, which keep
    both, but commit the one the caller was told of."""
    old, new = killed_between_insert_and_consolidation(settings, "llm")
    runtime = make_runtime(settings)
    try:
        scope = Scope("default", "default")
        assert runtime.store.get_memory(old).status == "active"
        runtime.writer.recover_unfinished()
        after = runtime.store.get_memory(old)
        assert (after.status, after.replaced_by) == ("superseded", new)
        [event] = runtime.store.lineage(scope, [old])
        assert (event.action, event.related_id, event.resolver) == ("supersede", new, "llm:scripted-llm")
        assert runtime.store.get_memory(new).status == "active"
        assert runtime.writer.recover_unfinished() == (0, 0)
    finally:
        runtime.close()


def test_a_rewording_a_crash_cut_off_before_its_group_was_superseded_is_finished_by_the_next_start(settings):
    """A review: the language model's rewording was inserted, and a crash before the group's supersede left
    it active beside the memories it rewords, for good."""
    old, reworded = killed_between_insert_and_consolidation(settings, "reword")
    runtime = make_runtime(settings)
    try:
        scope = Scope("default", "default")
        assert [m.status for m in runtime.store.get_memories([old, reworded], scope).values()] == [
            "active"
        ] * 2
        runtime.writer.recover_unfinished()
        after = runtime.store.get_memory(old)
        assert (after.status, after.replaced_by) == ("superseded", reworded)
        assert runtime.store.get_memory(reworded).status == "active"
        events = [e for e in runtime.store.lineage(scope, [old]) if e.memory_id == old]
        assert [(e.action, e.related_id, e.resolver) for e in events] == [
            ("reword", reworded, "llm:scripted-llm")
        ]
        active = runtime.store.list_memories(scope, limit=10)
        assert [m.id for m in active] == [reworded]  # the remember's own memory was reworded too
    finally:
        runtime.close()


def test_a_supersede_a_crash_cut_off_before_its_lineage_is_recorded_by_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "lineage")
    runtime = make_runtime(settings)
    try:
        scope = Scope("default", "default")
        assert runtime.store.get_memory(old).replaced_by == new
        assert runtime.store.lineage(scope, [old]) == []  # half done: superseded, and nothing says so
        assert runtime.writer.recover_unfinished() == (1, 0)
        [event] = runtime.store.lineage(scope, [old])
        # As decided (written down before the answer), not as a guess of recovery's.
        assert (event.action, event.related_id, event.resolver) == ("supersede", new, "rules:near-exact")
        assert runtime.writer.recover_unfinished() == (0, 0)
    finally:
        runtime.close()


def test_an_explicit_update_a_crash_cut_off_before_its_lineage_and_credits_is_finished_by_the_next_start(
    settings,
):
    old, new = killed_between_insert_and_consolidation(settings, "update-lineage")
    runtime = make_runtime(settings)
    try:
        scope = Scope("default", "default")
        assert runtime.store.get_memory(old).replaced_by == new
        assert weights(runtime, old, new) == [1.15, 1.0]  # the correction has not taken its credits yet
        assert runtime.writer.recover_unfinished() == (1, 0)
        [event] = runtime.store.lineage(scope, [old])
        assert (event.action, event.related_id, event.resolver, event.reason) == (
            "supersede",
            new,
            "explicit",
            "explicit update",
        )
        assert runtime.writer.settle(TIMEOUT)
        assert weights(runtime, new) == [1.15]  # the sessions the old text served go on with the correction
    finally:
        runtime.close()


def test_a_new_version_whose_supersede_failed_is_superseded_when_the_remember_is_retried(runtime):
    """A review: the rules link a new version (``version_of``) before they supersede the old one; a retry
    after a failure in between found the link and left the old version active beside the new."""
    old = said(runtime, "make rollback ENV=prod TIMEOUT=30 RETRIES=3", kind="artifact").id
    real = runtime.writer.consolidation._supersede

    def failing(*args, **kwargs):
        runtime.writer.consolidation._supersede = real
        raise RuntimeError("the store went away")

    runtime.writer.consolidation._supersede = failing
    newer = "make rollback ENV=prod TIMEOUT=60 RETRIES=3"
    with pytest.raises(RuntimeError, match="the store went away"):
        said(runtime, newer, kind="artifact")
    again = said(runtime, newer, kind="artifact")
    assert runtime.store.get_memory(again.id).version_of == old
    assert (runtime.store.get_memory(old).status, runtime.store.get_memory(old).replaced_by) == (
        "superseded",
        again.id,
    )


def test_an_artifacts_update_a_crash_cut_off_before_its_version_link_is_linked_at_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "version")
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_memory(old).replaced_by == new
        assert runtime.store.get_memory(new).version_of is None
        assert runtime.writer.recover_unfinished() == (1, 0)
        assert runtime.store.get_memory(new).version_of == old
        [event] = runtime.store.lineage(Scope("default", "default"), [old])
        assert (event.action, event.related_id, event.resolver) == ("supersede", new, "explicit")
    finally:
        runtime.close()


def test_an_explicit_update_a_crash_cut_off_before_its_credits_hands_them_on_at_the_next_start(settings):
    old, new = killed_between_insert_and_consolidation(settings, "update-carry")
    runtime = make_runtime(settings)
    try:
        [event] = runtime.store.lineage(Scope("default", "default"), [old])
        assert (event.related_id, event.resolver) == (new, "explicit")  # its lineage was in
        assert weights(runtime, new) == [1.0]
        runtime.writer.recover_unfinished()
        assert runtime.writer.settle(TIMEOUT)
        assert weights(runtime, new) == [1.15]
    finally:
        runtime.close()


def test_a_recovered_entry_that_fails_keeps_the_dead_processs_file_for_the_next_round(
    runtime, settings, monkeypatch
):
    from pathlib import Path

    from storage.unfinished import OwedConsolidation, UnfinishedWrites
    from tests.storage.test_unfinished import died

    a = said(runtime, ROLLBACK)
    gone = UnfinishedWrites(Path(settings.db_uri))
    gone.begin(OwedConsolidation(Scope("default", "default"), (a.id,)))
    died(gone)
    with monkeypatch.context() as patched:
        patched.setattr(runtime.writer.recovery, "_finish_consolidation", lambda owed: 1 / 0)
        assert runtime.writer.recover_unfinished() == (0, 0)
    assert runtime.writer.recover_unfinished() == (1, 0)  # the next round finds it still there
    assert runtime.writer.recover_unfinished() == (0, 0)


def test_a_remember_leaves_nothing_owed_behind(runtime):
    said(runtime, ROLLBACK)
    said(runtime, RESTATED)
    remember_many(RememberManyInput(items=[BatchItem(content="Deploys go out on Tuesdays")]), runtime, CALLER)
    assert runtime.writer.settle(TIMEOUT)  # the restatement's supersede, committed behind the call
    assert runtime.writer.journal.entries._open == {}


class GatedSupersede:
    """The store's supersede, held at a gate until the test opens it."""

    def __init__(self, runtime, fails: bool = False) -> None:
        self.original = runtime.store.supersede
        self.gate = threading.Event()
        self.fails = fails
        runtime.store.supersede = self

    def __call__(self, *args, **kwargs):
        assert self.gate.wait(TIMEOUT)
        if self.fails:
            raise OSError("the disk is full")
        return self.original(*args, **kwargs)


def test_a_restatement_is_answered_before_its_supersede_is_committed_and_reads_as_done_meanwhile(runtime):
    from tools.recall import RecallInput, recall

    scope = Scope("default", "default")
    old = said(runtime, ROLLBACK)
    gated = GatedSupersede(runtime)
    new = said(runtime, RESTATED)  # answered with the commit held at the gate
    assert new.consolidation.superseded == [old.id]
    assert runtime.store._committed([old.id], scope)[old.id].status == "active"  # the row, not yet
    read = runtime.store.get_memory(old.id)
    assert (read.status, read.replaced_by) == ("superseded", new.id)
    context = recall(RecallInput(query="how do I roll back a bad deploy"), runtime, CALLER)
    assert [memory.id for memory in context.memories] == [new.id]
    listed = runtime.store.list_memories(scope, limit=10)
    assert [memory.id for memory in listed] == [new.id]
    assert not runtime.writer.settle(0.2)
    lineage: list = []
    reader = threading.Thread(target=lambda: lineage.extend(runtime.store.lineage(scope, [old.id])))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # a read of its lineage waits for the commit, which writes the event
    gated.gate.set()
    reader.join(TIMEOUT)
    assert [(event.action, event.related_id) for event in lineage] == [("supersede", new.id)]
    assert runtime.writer.settle(TIMEOUT)
    assert committed_chain(runtime, old) == [("superseded", new.id)]
    assert not runtime.store._pending
    assert runtime.writer.journal.entries._open == {}


def test_a_restatement_forgotten_before_its_supersede_is_committed_leaves_neither_active(runtime):
    scope = Scope("default", "default")
    old = said(runtime, ROLLBACK)
    gated = GatedSupersede(runtime)
    new = said(runtime, RESTATED)
    forgot: list = []
    forgetting = threading.Thread(
        target=lambda: forgot.extend(runtime.store.retract(scope, [new.id], datetime.now(UTC)))
    )
    forgetting.start()
    forgetting.join(0.2)
    assert forgetting.is_alive()  # waits for the supersede it would undo
    gated.gate.set()
    forgetting.join(TIMEOUT)
    assert forgot == [new.id]
    assert runtime.writer.settle(TIMEOUT)
    assert [runtime.store.get_memory(i).status for i in (old.id, new.id)] == ["superseded", "retracted"]


def committed_chain(runtime, *memories) -> list[tuple[str, str | None]]:
    """Each memory's status and ``replaced_by`` as the rows say (not as this process reads them)."""
    rows = runtime.store._committed([memory.id for memory in memories], Scope("default", "default"))
    return [(rows[memory.id].status, rows[memory.id].replaced_by) for memory in memories]


class QueueHeld:
    """Holds the queue of supersedes being committed until the test opens it (or ``after`` seconds)."""

    def __init__(self, runtime, after: float | None = None) -> None:
        self.gate = threading.Event()
        runtime.writer._supersedes.submit(lambda: self.gate.wait(TIMEOUT))
        if after is not None:
            threading.Timer(after, self.gate.set).start()


def test_a_chain_of_restatements_commits_in_the_order_decided(runtime):
    """B restates A; C restates B while B's caller is still in its consolidation's tail: A's supersede was
    queued when it was decided, before C's, so each survivor is still active when its commit comes."""
    a = said(runtime, ROLLBACK)
    writer = runtime.writer
    original_track = writer.track
    slow, in_track = threading.Event(), threading.Event()

    def track(scope, report, written_id=None):
        if report.superseded == [a.id]:  # B's caller, after its supersede was held
            in_track.set()
            assert slow.wait(TIMEOUT)
        return original_track(scope, report, written_id)

    writer.track = track
    results: dict = {}
    b_thread = threading.Thread(target=lambda: results.setdefault("b", said(runtime, RESTATED)))
    b_thread.start()
    assert in_track.wait(TIMEOUT)
    c = said(runtime, RESTATED_AGAIN)
    slow.set()
    b_thread.join(TIMEOUT)
    b = results["b"]
    assert b.consolidation.superseded == [a.id] and c.consolidation.superseded == [b.id]
    assert writer.settle(TIMEOUT)
    assert committed_chain(runtime, a, b, c) == [("superseded", b.id), ("superseded", c.id), ("active", None)]


def test_an_explicit_update_of_a_restatement_waits_for_its_supersede(runtime):
    a = said(runtime, ROLLBACK)
    QueueHeld(runtime, after=0.3)
    b = said(runtime, RESTATED)  # A -> B held behind the queue
    c = said(runtime, "Rollback a bad deploy with make rollback ENV=prod", replaces=b.id)
    assert runtime.writer.settle(TIMEOUT)
    assert committed_chain(runtime, a, b, c) == [("superseded", b.id), ("superseded", c.id), ("active", None)]


def test_an_explicit_update_back_to_what_a_restatement_restated_waits_for_its_supersede(runtime):
    a = said(runtime, ROLLBACK)
    QueueHeld(runtime, after=0.3)
    b = said(runtime, RESTATED)
    back = said(runtime, ROLLBACK, replaces=b.id)  # the update reverted: A again
    assert back.id == a.id
    assert runtime.writer.settle(TIMEOUT)
    assert runtime.store.get_memory(a.id).status == "active"
    assert (runtime.store.get_memory(b.id).status, runtime.store.get_memory(b.id).replaced_by) == (
        "superseded",
        a.id,
    )


def test_a_supersede_whose_survivor_was_superseded_meanwhile_is_committed_as_decided(runtime):
    """B restated A, and B was superseded (here: a write around this service, as another process or a
    revision would) before A -> B was committed: the chain reads A -> B -> C, with each step's event."""
    scope = Scope("default", "default")
    a = said(runtime, ROLLBACK)
    queue = QueueHeld(runtime)
    b = said(runtime, RESTATED)
    c = said(runtime, "An unrelated memory about the cafeteria menu")
    runtime.store.supersede(scope, [b.id], c.id, datetime.now(UTC))  # committed directly, not held
    queue.gate.set()
    assert runtime.writer.settle(TIMEOUT)
    assert (runtime.store.get_memory(a.id).status, runtime.store.get_memory(a.id).replaced_by) == (
        "superseded",
        b.id,
    )
    [event] = runtime.store.lineage(scope, [a.id])
    assert (event.action, event.related_id) == ("supersede", b.id)


def test_a_supersede_that_would_close_a_loop_is_not_committed(runtime):
    """Another process superseded B by A before A -> B was committed: committing it would leave neither
    standing, so A stays as it is."""
    scope = Scope("default", "default")
    a = said(runtime, ROLLBACK)
    queue = QueueHeld(runtime)
    b = said(runtime, RESTATED)
    runtime.store.supersede(scope, [b.id], a.id, datetime.now(UTC))  # the rows: A active, B superseded by A
    queue.gate.set()
    assert runtime.writer.settle(TIMEOUT)
    committed = runtime.store._committed([a.id, b.id], scope)
    assert (committed[a.id].status, committed[b.id].replaced_by) == ("active", a.id)


def test_a_refused_explicit_update_leaves_nothing_owed(runtime):
    """The memory to replace was forgotten between the caller's check and the update: refused, what it
    wrote retracted again, and nothing left written down as owed."""
    import pytest

    from tools.remember import draft_of
    from writing.drafts import WriteRefused

    old = said(runtime, ROLLBACK)
    seen = runtime.store.get_memory(old.id)  # as the caller's check saw it: active
    runtime.store.retract(Scope("default", "default"), [old.id], datetime.now(UTC))
    draft = draft_of(
        RememberInput(content="Rollback a bad deploy with make rollback ENV=prod"), runtime, CALLER
    )
    with pytest.raises(WriteRefused, match="no longer active"):
        runtime.writer.remember(runtime.writer.prepare(draft), llm=None, replaces=seen)
    assert runtime.writer.settle(TIMEOUT)
    assert runtime.writer.journal.entries._open == {}


def test_a_supersede_whose_commit_fails_is_given_up_and_left_to_the_sweep(runtime, caplog):
    old = said(runtime, ROLLBACK)
    gated = GatedSupersede(runtime, fails=True)
    new = said(runtime, RESTATED)
    gated.gate.set()
    assert runtime.writer.settle(TIMEOUT)
    assert runtime.store.get_memory(old.id).status == "active"  # read as the rows say again
    assert runtime.store.get_memory(new.id).consolidated_at is None  # the sweep examines it again
    assert "could not supersede" in caplog.text
    assert runtime.writer.journal.entries._open == {}
    runtime.store.supersede = gated.original
    runtime.consolidation.sweep(Scope("default", "default"))
    assert runtime.store.get_memory(old.id).replaced_by == new.id


def test_a_consolidation_that_failed_is_left_to_the_sweep_and_to_the_next_start(runtime):
    def broken(*args, **kwargs):
        raise RuntimeError("consolidation failed")

    runtime.writer.consolidation.on_write = broken
    try:
        said(runtime, ROLLBACK)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure should reach the caller")
    stored = runtime.store.get_memory(memory_id_for(Scope("default", "default"), content_hash(ROLLBACK)))
    assert stored.consolidated_at is None  # unstamped: the sweep examines it
    [owed] = runtime.writer.journal.entries._open.values()  # still written down: the next start runs it
    assert stored.id in owed


def test_credits_are_carried_when_they_cannot_be_written_down(runtime, caplog):
    a = helped(runtime)

    def full(*args, **kwargs):
        raise OSError("disk full")

    runtime.writer.journal.entries.begin = full
    b = said(runtime, RESTATED)
    assert b.consolidation.superseded == [a]
    assert runtime.writer.settle(TIMEOUT)
    assert weights(runtime, b.id) == [1.15]
    assert "could not write down the credits handed on" in caplog.text
    assert runtime.writer.inheritance.pending_heirs({b.id}) == set()


def test_a_remember_whose_owed_consolidation_cannot_be_written_down_is_stored_and_consolidated(
    runtime, caplog
):
    def full(*args, **kwargs):
        raise OSError("disk full")

    runtime.writer.journal.entries.begin_many = full
    out = said(runtime, ROLLBACK)
    stored = runtime.store.get_memory(out.id)
    assert out.status == "stored" and stored.consolidated_at is not None  # consolidated all the same
    assert runtime.writer.journal.entries._open == {}  # nothing written down, nothing left open
    assert "could not write down the consolidation owed by" in caplog.text and out.id in caplog.text


def test_a_recovered_carry_to_a_memory_replaced_since_goes_on_to_the_one_that_stands(
    runtime, settings, monkeypatch
):
    from pathlib import Path

    from storage.unfinished import HandOn, UnfinishedWrites
    from tests.storage.test_unfinished import died

    a = helped(runtime)
    # B restated A in a process that died before carrying A's credits: written down, never carried.
    with monkeypatch.context() as patched:
        patched.setattr(runtime.writer.inheritance, "hand_on", lambda *args: None)
        b = said(runtime, RESTATED)
    gone = UnfinishedWrites(Path(settings.db_uri))
    gone.begin(HandOn(Scope("default", "default"), b.id, ((a, True),)))
    died(gone)
    # C restates B before any server recovers that carry: B has nothing to hand on yet.
    c = said(runtime, RESTATED_AGAIN)
    assert c.consolidation.superseded == [b.id] and weights(runtime, b.id, c.id) == [1.0, 1.0]
    assert runtime.writer.recover_unfinished() == (0, 1)
    assert runtime.writer.settle(TIMEOUT)
    assert weights(runtime, b.id, c.id) == [1.15, 1.15]


def test_a_memory_forgotten_before_its_restatement_takes_the_lock_is_given_nothing_and_read_as_it_is(
    tmp_path,
):
    """``take_restated`` reads the memory again under the write lock: one retracted or purged since the
    caller read it gets no tags, and comes back with its status, so that ``_remember`` looks again."""
    from dataclasses import replace

    from tools.forget import ForgetInput, forget

    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        caller = Caller("agent-a", "ses_1")
        stored = remember(RememberInput(content="Tickets live in Linear"), runtime, caller)
        read_before = runtime.store.get_memory(stored.id)  # as the writer read it, still active
        forget(ForgetInput(memory_id=stored.id, mode="purge"), runtime, caller)
        restated = replace(read_before, tags=("tools",), agent_id="agent-a")
        taken, added = runtime.writer.take_restated(read_before, restated)
        assert (taken.status, added) == ("purged", None)
        assert runtime.store.get_memory(stored.id).tags == ()
        # Said again through the tool, the text is restored, not attested on a purged memory.
        again = remember(RememberInput(content="Tickets live in Linear", tags=["tools"]), runtime, caller)
        assert again.status == "stored" and again.note == "restored: an identical memory had been purged"
    finally:
        runtime.close()


def test_a_memory_its_author_makes_immutable_by_restating_it_is_weighed_no_lower_than_it_started(runtime):
    misled = credited(runtime, "The API listens on port 8080", "which port", "failure", "misleading_ids")
    assert weights(runtime, misled) == [0.85]
    again = said(runtime, "The API listens on port 8080", protection_tier="immutable")
    assert again.note.endswith("raised its protection tier from standard to immutable")
    assert runtime.writer.settle(TIMEOUT)  # written behind the call, as a report writes weights
    assert weights(runtime, misled) == [1.0]  # the global weight, as the weight for a query already was


def test_a_restatement_whose_shared_insert_landed_and_then_failed_is_still_consolidated(runtime):
    """A group commit of two callers' inserts that commits and then raises (an I/O error after the append)
    is retried a caller at a time; each retry finds the row its own first attempt committed. That row is
    the caller's own write, not another writer's: the restatement is consolidated, and nothing is left
    owed."""
    store = runtime.store
    old = said(runtime, ROLLBACK)
    commit, calls = store._inserts._commit, []
    holding, entered = threading.Event(), threading.Event()

    def landed_then_failed(news):
        calls.append(len(news))
        if len(calls) == 1:  # a first insert holds the group commit while two callers queue behind it
            entered.set()
            assert holding.wait(TIMEOUT)
        results = commit(news)
        if len(calls) == 2:  # the two queued callers' shared commit: in, then an error
            raise OSError("I/O error after the append")
        return results

    retry, retried = store._inserts._retry, []

    def alone(news):
        retried.append(len(news))
        return retry(news)

    store._inserts._commit, store._inserts._retry = landed_then_failed, alone
    answers = {}

    def batch(content: str):  # remember_many inserts through the store's group commit directly
        return remember_many(RememberManyInput(items=[BatchItem(content=content)]), runtime, CALLER)

    first = threading.Thread(target=lambda: batch("Lunch is at noon"))
    first.start()
    assert entered.wait(TIMEOUT)
    restating = threading.Thread(target=lambda: answers.setdefault("restated", said(runtime, RESTATED)))
    other = threading.Thread(target=lambda: answers.setdefault("other", batch("Deploys go on Tuesdays")))
    restating.start()
    other.start()
    deadline = time.monotonic() + TIMEOUT
    while store._inserts.queued < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    holding.set()
    for thread in (first, restating, other):
        thread.join(TIMEOUT)
    assert (calls, retried) == ([1, 2], [1, 1])  # the shared commit failed, then each caller alone
    restated = answers["restated"]
    assert (restated.status, restated.consolidation.superseded) == ("stored", [old.id])
    assert answers["other"].results[0].status == "stored"
    assert runtime.writer.settle(TIMEOUT)
    assert store.get_memory(old.id).replaced_by == restated.id
    assert runtime.writer.recover_unfinished() == (0, 0)


def test_a_remember_whose_coalesced_insert_landed_and_then_failed_is_still_consolidated(settings):
    """The write service's own group of remembers in flight: its shared insert commits and then raises,
    and each caller is retried alone; each finds the row of its own first attempt as its own."""
    embedder = GatedEmbedder()
    runtime = make_runtime(settings, embedder=embedder)
    try:
        embedder.release.set()
        old = said(runtime, ROLLBACK)
        embedder.batches.clear()  # the next batch is held (the gate holds a first batch)
        embedder.entered.clear()
        embedder.release.clear()
        store = runtime.store
        commit, shared = store._inserts._commit, []

        def landed_then_failed(news):
            results = commit(news)
            if len(news) == 2:  # the two queued remembers' shared insert: in, then an error
                shared.append(len(news))
                raise OSError("I/O error after the append")
            return results

        store._inserts._commit = landed_then_failed
        answers = {}
        first = threading.Thread(target=lambda: said(runtime, "Lunch is at noon"))
        first.start()
        assert embedder.entered.wait(TIMEOUT)  # the first remember holds the group; two queue behind it
        restating = threading.Thread(target=lambda: answers.setdefault("restated", said(runtime, RESTATED)))
        other = threading.Thread(
            target=lambda: answers.setdefault("other", said(runtime, "Deploys go on Tuesdays"))
        )
        restating.start()
        other.start()
        deadline = time.monotonic() + TIMEOUT
        while runtime.writer.queued < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        embedder.release.set()
        for thread in (first, restating, other):
            thread.join(TIMEOUT)
        assert shared == [2]
        restated = answers["restated"]
        assert (restated.status, restated.consolidation.superseded) == ("stored", [old.id])
        assert answers["other"].status == "stored"
        assert runtime.writer.settle(TIMEOUT)
        assert store.get_memory(old.id).replaced_by == restated.id
        assert runtime.writer.recover_unfinished() == (0, 0)
    finally:
        runtime.close()


def test_a_decided_supersede_the_next_start_commits_hands_the_losers_tags_and_credits_on(runtime, settings):
    """The crash came after the supersede was written down as decided and before the restatement took the
    old memory's tags and credits: the next start commits it and hands them on as the write would have."""
    from pathlib import Path

    from storage.unfinished import DecidedSupersede, OwedConsolidation, UnfinishedWrites
    from tests.storage.test_unfinished import died
    from writing.consolidation.report import ConsolidationReport

    scope = Scope("default", "default")
    old = helped(runtime)  # weight 1.15
    runtime.store.set_tags(old, ["ops"], runtime.store.get_memory(old).content, runtime.clock())
    original = runtime.writer.consolidation.on_write
    runtime.writer.consolidation.on_write = lambda *args, **kwargs: ConsolidationReport()  # cut off here
    try:
        new = said(runtime, RESTATED).id
    finally:
        runtime.writer.consolidation.on_write = original
    gone = UnfinishedWrites(Path(settings.db_uri))
    gone.begin(DecidedSupersede(scope, (old,), new, "supersede", "rules:near-exact", "claude-code", "ses_1"))
    gone.begin(OwedConsolidation(scope, (new,)))
    died(gone)
    runtime.writer.recover_unfinished()
    assert runtime.writer.settle(TIMEOUT)
    restated = runtime.store.get_memory(new)
    assert runtime.store.get_memory(old).replaced_by == new
    assert ("ops" in restated.tags, restated.weight) == (True, 1.15)
    [event] = runtime.store.lineage(scope, [old])
    assert (event.resolver, event.reason) == (
        "rules:near-exact",
        "decided before a crash; committed by the next start",
    )


@pytest.mark.parametrize("yielding", [True, False], ids=["queue-short", "queue-long"])
def test_a_restatements_supersede_is_committed_after_a_compaction_beside_the_writes(
    runtime, monkeypatch, yielding
):
    """The status change would preempt the compaction's commit (which would then run again under the write
    lock, every remember waiting for it): committed behind the call, it waits for the compaction to end,
    whether its queue is short (it yields to callers too) or long (it takes the lock like any write)."""
    if not yielding:
        monkeypatch.setattr("writing.service.SUPERSEDES_YIELDING", -1)
    old = said(runtime, ROLLBACK)
    compacting = runtime.store._compactions_beside.running()
    compacting.__enter__()
    try:
        new = said(runtime, RESTATED)  # answered while the compaction runs
        assert new.consolidation.superseded == [old.id]
        assert not runtime.writer.settle(0.3)  # its supersede waits
        assert committed_chain(runtime, old) == [("active", None)]
        assert runtime.store.get_memory(old.id).status == "superseded"  # as this process reads it already
    finally:
        compacting.__exit__(None, None, None)
    assert runtime.writer.settle(TIMEOUT)
    assert committed_chain(runtime, old, new) == [("superseded", new.id), ("active", None)]


def test_a_call_waiting_for_a_restatements_supersede_does_not_wait_for_the_compaction(runtime):
    """A retract, a forget or an update of the memory, or a read of its lineage, waits for the supersede
    held for it: that supersede then stops waiting for the compaction beside the writes (the call would
    wait for the compaction too)."""
    old = said(runtime, ROLLBACK)
    compacting = runtime.store._compactions_beside.running()
    compacting.__enter__()
    try:
        new = said(runtime, RESTATED)
        assert not runtime.writer.settle(0.2)  # held behind the compaction, nobody waiting for it
        started = time.perf_counter()
        runtime.store.settle_supersedes([old.id])  # a call waits for it: committed now
        assert time.perf_counter() - started < 3  # not the 5 s a supersede may wait for a compaction
        assert committed_chain(runtime, old, new) == [("superseded", new.id), ("active", None)]
    finally:
        compacting.__exit__(None, None, None)


def test_a_remember_waiting_for_the_queue_of_supersedes_does_not_wait_for_the_compaction(
    runtime, monkeypatch
):
    """Past the bound of supersedes still being committed (``MAX_SUPERSEDES_BEHIND``) a remember waits for
    their queue: a call waiting on them, so they stop waiting for the compaction beside the writes (the
    remember would wait for the compaction too: up to 5 s)."""
    monkeypatch.setattr("writing.service.MAX_SUPERSEDES_BEHIND", 1)
    old = said(runtime, ROLLBACK)
    compacting = runtime.store._compactions_beside.running()
    compacting.__enter__()
    try:
        started = time.perf_counter()
        new = said(runtime, RESTATED)  # its supersede fills the queue: the remember waits for it
        assert time.perf_counter() - started < 3
        assert new.consolidation.superseded == [old.id]
        assert committed_chain(runtime, old, new) == [("superseded", new.id), ("active", None)]
    finally:
        compacting.__exit__(None, None, None)


def test_an_update_back_to_an_earlier_text_refused_because_its_memory_was_forgotten_revives_nothing(runtime):
    from tools.forget import ForgetInput, forget
    from tools.remember import draft_of
    from writing.drafts import WriteRefused

    earlier = said(runtime, "The API gateway listens on port 8080").id
    current = said(runtime, "The API gateway listens on port 9090", replaces=earlier).id
    read = runtime.store.get_memory(current)  # the caller read it active ...
    forget(ForgetInput(memory_id=current), runtime, CALLER)  # ... and another caller forgot it meanwhile
    again = RememberInput(content="The API gateway listens on port 8080", replaces=current)
    with pytest.raises(WriteRefused, match="is no longer active"):
        runtime.writer.remember(
            runtime.writer.prepare(draft_of(again, runtime, CALLER)), llm=None, replaces=read
        )
    # Nothing was changed: the earlier text stays superseded, and no event says it was restored.
    assert runtime.store.get_memory(earlier).status == "superseded"
    actions = [
        e.action
        for e in runtime.store.lineage(Scope("default", "default"), [earlier])
        if e.memory_id == earlier
    ]
    assert actions == ["supersede"]


class StoredMeanwhile(RecordingEmbedder):
    """While a batch of two is embedded (after its look-up of stored ids, before its insert), the first
    item's text is remembered by the same agent in another thread."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.runtime, self.fired = text, None, False

    def embed_documents(self, texts):
        if not self.fired and len(texts) == 2:
            self.fired = True
            other = threading.Thread(
                target=remember, args=(RememberInput(content=self.text), self.runtime, CALLER)
            )
            other.start()
            other.join(TIMEOUT)
        return super().embed_documents(texts)


def test_a_batch_near_duplicate_another_writer_stored_first_gets_no_event_saying_it_was_superseded(settings):
    loser, survivor = (
        "the staging deploy runs every friday afternoon",
        "The staging deploy runs every Friday afternoon.",
    )
    embedder = StoredMeanwhile(loser)
    runtime = make_runtime(settings, embedder=embedder)
    embedder.runtime = runtime
    try:
        items = [BatchItem(content=loser), BatchItem(content=survivor)]
        first, _ = remember_many(RememberManyInput(items=items), runtime, CALLER).results
        assert runtime.writer.settle(TIMEOUT)
        assert runtime.store.get_memory(first.id).status == "active"  # stored by the other writer
        events = runtime.store.lineage(Scope("default", "default"), [first.id])
        assert [e.resolver for e in events if e.memory_id == first.id] == []  # before: "rules:intra-batch"
    finally:
        runtime.close()


def test_a_claim_whose_restatement_is_still_being_committed_marks_nothing_disputed_but_its_restatement(
    runtime,
):
    """A trial read "DISPUTED by newer" ids of copies recall no longer showed, before their supersede landed."""
    from tools.recall import RecallInput, recall

    fact = said(runtime, "The production Postgres database listens on port 5432")
    claim = said(runtime, "The production Postgres database listens on port 6543")
    gated = GatedSupersede(runtime)
    again = said(
        runtime, "FYI the production Postgres database listens on port 6543"
    )  # answered, commit held
    assert again.consolidation.superseded == [claim.id]
    context = recall(
        RecallInput(query="which port does the production postgres database listen on"), runtime, CALLER
    )
    marks = {memory.id: memory.contradicted_by for memory in context.memories}
    assert marks == {again.id: [], fact.id: [again.id]}
    gated.gate.set()
    assert runtime.writer.settle(TIMEOUT)
    context = recall(
        RecallInput(query="which port does the production postgres database listen on"), runtime, CALLER
    )
    assert {memory.id: memory.contradicted_by for memory in context.memories} == marks


def test_a_rewording_a_crash_cut_off_before_its_memory_was_inserted_leaves_its_group_as_it_is(
    runtime, settings
):
    """Written down before the insert: the next start finds no survivor, and supersedes nothing by it (the
    store would otherwise point the group at a memory that does not exist)."""
    from pathlib import Path

    from storage.unfinished import DecidedSupersede, UnfinishedWrites

    kept = said(runtime, ROLLBACK)
    gone = UnfinishedWrites(Path(settings.db_uri))  # a process that died right after writing it down
    scope = Scope("default", "default")
    gone.begin(
        DecidedSupersede(scope, (kept.id,), "mem_never_inserted", "reword", "llm:m", "claude-code", "ses_1")
    )
    gone._file.close()
    gone._file = None
    runtime.writer.recover_unfinished()
    assert (runtime.store.get_memory(kept.id).status, runtime.store.get_memory(kept.id).replaced_by) == (
        "active",
        None,
    )
    assert runtime.store.lineage(scope, [kept.id]) == []


def test_an_explicit_update_whose_old_text_another_write_superseded_by_the_new_one_meanwhile_stands(
    runtime, monkeypatch
):
    """A trial: between an update's insert and its supersede, another write's consolidation found the two
    texts alike and superseded the old by the new itself. The update was refused and its new text
    retracted: the old fact stood superseded by a retracted memory, nothing active. It stands now."""
    old = said(runtime, ROLLBACK)
    real = runtime.store.supersede

    def consolidated_first(scope, losers, survivor, at, **kwargs):
        monkeypatch.setattr(runtime.store, "supersede", real)
        real(scope, losers, survivor, at)  # the other write's consolidation, landing first
        return real(scope, losers, survivor, at, **kwargs)  # this update's own step: nothing left to change

    monkeypatch.setattr(runtime.store, "supersede", consolidated_first)
    new = said(runtime, "Rollback a bad deploy with make rollback ENV=prod", replaces=old.id)
    assert new.note == f"explicit update: {new.id} replaces {old.id}, which stays superseded for audit"
    assert runtime.store.get_memory(new.id).status == "active"
    assert (runtime.store.get_memory(old.id).status, runtime.store.get_memory(old.id).replaced_by) == (
        "superseded",
        new.id,
    )


def test_an_explicit_update_whose_old_text_another_memory_replaced_meanwhile_is_refused_and_withdrawn(
    runtime, monkeypatch
):
    old = said(runtime, ROLLBACK)
    other = said(runtime, "Staging resets every Sunday night")
    real = runtime.store.supersede

    def replaced_first(scope, losers, survivor, at, **kwargs):
        monkeypatch.setattr(runtime.store, "supersede", real)
        real(scope, losers, other.id, at)  # another memory took its place first
        return real(scope, losers, survivor, at, **kwargs)

    monkeypatch.setattr(runtime.store, "supersede", replaced_first)
    text = "Rollback a bad deploy with make rollback ENV=prod"
    with pytest.raises(ToolFailure, match="is no longer active"):
        said(runtime, text, replaces=old.id)
    assert runtime.store.get_memory(old.id).replaced_by == other.id
    withdrawn = runtime.store.get_memory(memory_id_for(Scope("default", "default"), content_hash(text)))
    assert withdrawn.status == "retracted"
