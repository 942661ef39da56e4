"""forget through its handler: what a caller may forget, as it may read it."""

from contextlib import contextmanager

import pytest

from tests.fakes import TableEmbedder
from tests.helpers import killed_after, make_runtime, settings_for
from tools.common import Caller, ToolFailure
from tools.forget import ForgetInput, forget
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember

OWNER = Caller("agent-a", "ses_owner")
LATER = Caller("agent-a", "ses_later")  # the same agent, in another session (a restarted server)


def test_a_session_private_memory_is_forgotten_by_naming_its_session(runtime):
    note = remember(
        RememberInput(content="the temporary staging password rotates tonight", visibility="session"),
        runtime,
        OWNER,
    )
    with pytest.raises(ToolFailure, match=f"no memory '{note.id}'"):  # another session cannot see it
        forget(ForgetInput(memory_id=note.id, mode="purge"), runtime, LATER)
    gone = forget(ForgetInput(memory_id=note.id, mode="purge", session_id="ses_owner"), runtime, LATER)
    assert [m.id for m in gone.forgotten] == [note.id]
    assert runtime.store.get_memory(note.id).status == "purged"
    assert (
        recall(RecallInput(query="staging password", session_id="ses_owner"), runtime, OWNER).memories == []
    )


def test_an_id_of_another_project_is_said_to_be_there_only_to_a_caller_on_this_machine(runtime):
    shared = remember(RememberInput(content="alpha listens on port 8080", project_id="alpha"), runtime, OWNER)
    private = remember(
        RememberInput(content="alpha's admin password rotates", project_id="alpha", visibility="session"),
        runtime,
        OWNER,
    )
    where = "; it is in org 'default' / project 'alpha'"
    with pytest.raises(ToolFailure, match=f"project 'default'{where}: check the id"):
        forget(ForgetInput(memory_id=shared.id), runtime, LATER)
    # A token's holder is told nothing of other projects, nor anyone of a memory private to a session.
    remote = Caller("agent-a", "ses_remote", remote=True)
    for memory_id, caller in ((shared.id, remote), (private.id, LATER)):
        with pytest.raises(ToolFailure) as failure:
            forget(ForgetInput(memory_id=memory_id), runtime, caller)
        assert "alpha" not in str(failure.value)
    assert runtime.store.get_memory(shared.id).status == "active"


def test_forget_by_query_judges_a_memory_by_what_it_says_not_by_its_episode(tmp_path):
    turns = {
        "We adopted a rescue puppy": (1.0, 0.6, 0.0),  # on topic
        "Walks happen every morning before work": (1.0, 1.0, 1.886),  # cosine 0.6 with the query
        "She already knows sit and stay": (0.6, 1.0, 0.0),  # on topic
    }
    query = "pet care routine"
    embedder = TableEmbedder({**turns, query: (1.0, 1.0, 0.0)}, name="table-model")
    runtime = make_runtime(settings_for(tmp_path / "db"), embedder=embedder)
    try:
        for minute, text in enumerate(turns):
            remember(
                RememberInput(content=text, episode_id="new-dog", occurred_at=f"2026-01-01T10:0{minute}:00Z"),
                runtime,
                OWNER,
            )
        listed = forget(ForgetInput(query=query, max_memories=3, dry_run=True), runtime, OWNER)
        recalled = recall(RecallInput(query=query, top_k=3), runtime, OWNER)
    finally:
        runtime.close()
    # The walks turn is 2/3 x 0.6 = 0.4 relevant on its own, under the 0.5 forget asks for; a recall reads
    # it with its neighbours (context cosine 0.96), which would lift it over 0.5, but forget does not.
    assert sorted(m.preview for m in listed.forgotten) == [
        "She already knows sit and stay",
        "We adopted a rescue puppy",
    ]
    walks = next(m for m in recalled.memories if m.content.startswith("Walks"))
    assert walks.score > 0.5


def test_forget_by_query_reads_relevance_as_the_floor_does_and_takes_nothing_recall_scores_below_it(runtime):
    """A review: the long memory below shares the query's words with much else; recall scores it 0.44
    (its BM25 read against the best match, lower than against a full match of the query), yet forget read
    0.67 and took it at forget's floor of 0.5."""
    exact = remember(
        RememberInput(content="Staging deploy: staging deploy staging deploy"), runtime, OWNER
    ).id
    long = remember(
        RememberInput(
            content="The staging deploy needs VPN access, and the release manager signs off on it after the "
            "nightly integration run on Jenkins finishes and the dashboards stay green for an hour"
        ),
        runtime,
        OWNER,
    ).id
    remember(RememberInput(content="The office cat is called Miso"), runtime, OWNER)
    shown = {m.id: m.score for m in recall(RecallInput(query="staging deploy"), runtime, OWNER).memories}
    assert shown[long] < runtime.settings.forget_min_relevance <= shown[exact]
    matched = forget(ForgetInput(query="staging deploy", max_memories=3, dry_run=True), runtime, OWNER)
    assert [(m.id, m.relevance) for m in matched.matches] == [(exact, round(shown[exact], 4))]


def test_a_forget_by_query_that_takes_nothing_names_the_close_memory_it_left_and_how_to_forget_it(runtime):
    """A new user's trial: recall ranked the staging memory first at 0.83 for these words, and forget said
    only "the closest scored 0.36"."""
    staging = remember(
        RememberInput(content="The staging database is reset every Sunday night"), runtime, OWNER
    ).id
    cat = remember(RememberInput(content="The office cat is called Miso"), runtime, OWNER).id
    [first] = recall(RecallInput(query="staging db reset schedule", top_k=1), runtime, OWNER).memories
    assert first.id == staging and first.score >= runtime.settings.forget_min_relevance
    left = forget(ForgetInput(query="staging db reset schedule"), runtime, OWNER)
    assert left.forgotten == [] and left.note.startswith("nothing was forgotten: no active memory matches")
    assert f"The closest is {staging} ('The staging database is reset every Sunday night') at 0." in left.note
    assert left.note.endswith(f"Say more of its words, or pass memory_id={staging} to forget it.")
    # Nothing near (under half the floor): no memory is pointed to.
    far = forget(ForgetInput(query="bananas and kiwis"), runtime, OWNER)
    assert cat not in far.note and far.note.endswith("Pass memory_id to forget a particular memory.")
    assert runtime.store.get_memory(staging).status == "active"


def test_the_result_lists_memories_as_they_are_after_the_call_and_a_second_purge_erases_nothing(runtime):
    kept = remember(RememberInput(content="the billing database is backed up nightly"), runtime, OWNER).id
    purged = remember(RememberInput(content="the staging password is hunter2"), runtime, OWNER).id
    shown = forget(ForgetInput(memory_id=kept, dry_run=True), runtime, OWNER).forgotten
    assert [(m.id, m.status) for m in shown] == [(kept, "active")]  # a dry run: as they are now
    retracted = forget(ForgetInput(memory_id=kept), runtime, OWNER)
    assert [(m.id, m.status) for m in retracted.forgotten] == [(kept, "retracted")]
    first = forget(ForgetInput(memory_id=purged, mode="purge"), runtime, OWNER)
    assert [(m.id, m.status, m.preview) for m in first.forgotten] == [(purged, "purged", "[purged]")]
    again = forget(ForgetInput(memory_id=purged, mode="purge"), runtime, OWNER)
    assert (again.forgotten, again.note) == ([], "1 already purged, left as it was")
    # a retracted memory's text can still be purged
    erased = forget(ForgetInput(memory_id=kept, mode="purge"), runtime, OWNER)
    assert [(m.id, m.status) for m in erased.forgotten] == [(kept, "purged")]
    assert runtime.store.get_memory(kept).status == "purged"


def test_a_purge_by_tag_erases_that_tags_expired_and_retracted_memories_too(settings):
    """A review found a purge by tag saying every memory with the tag was purged while it skipped an
    ephemeral one past its expiry (not yet retracted by maintenance), whose text then stayed on disk; a
    retracted one's text was never reached either. A retraction by tag takes the expired one too."""
    import time
    from pathlib import Path

    from tests.forensics import files_holding

    runtime = make_runtime(settings.replace(ephemeral_ttl_seconds=1.0))
    try:
        lapsing = remember(
            RememberInput(content="door code zq7EXPIRED", tags=["secret"], protection_tier="ephemeral"),
            runtime,
            OWNER,
        ).id
        retracted = remember(
            RememberInput(content="vault pin zq7RETRACTED", tags=["secret"]), runtime, OWNER
        ).id
        forget(ForgetInput(memory_id=retracted), runtime, OWNER)
        standing = remember(RememberInput(content="wifi key zq7ACTIVE", tags=["secret"]), runtime, OWNER).id
        time.sleep(1.2)  # the ephemeral memory's time runs out; no maintenance round retracts it
        shown = forget(ForgetInput(tag="secret"), runtime, OWNER)  # a retraction, shown first
        assert {m.id for m in shown.forgotten} == {lapsing, standing}
        purged = forget(ForgetInput(tag="secret", mode="purge", dry_run=False), runtime, OWNER)
        assert {m.id for m in purged.forgotten} == {lapsing, retracted, standing}
        assert purged.note == "3 memories tagged 'secret' purged"
        assert {runtime.store.get_memory(m).status for m in (lapsing, retracted, standing)} == {"purged"}
        again = forget(ForgetInput(tag="secret", mode="purge", dry_run=False), runtime, OWNER)
        assert again.note == "nothing was forgotten: no memory has the tag 'secret'"
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7") == []


def test_a_purge_by_query_reaches_the_retracted_and_the_expired_memories_that_match(settings):
    """A retracted memory keeps its text until a purge; asked to purge what matches, forget by query looked
    at active memories only and said nothing matched. A retraction by query still takes active ones only."""
    import time
    from pathlib import Path

    from tests.forensics import files_holding

    runtime = make_runtime(settings.replace(ephemeral_ttl_seconds=1.0))
    try:
        retracted = remember(RememberInput(content="The vault pin is zq7RETRACTED"), runtime, OWNER).id
        forget(ForgetInput(memory_id=retracted), runtime, OWNER)
        lapsing = remember(
            RememberInput(content="The door code is zq7EXPIRED", protection_tier="ephemeral"), runtime, OWNER
        ).id
        kept = remember(RememberInput(content="The office cat is called Miso"), runtime, OWNER).id
        time.sleep(1.2)  # the ephemeral memory's time runs out; no maintenance round retracts it
        nothing = forget(ForgetInput(query="vault pin zq7RETRACTED"), runtime, OWNER)
        assert nothing.forgotten == [] and nothing.note.startswith("nothing was forgotten: no active memory")
        shown = forget(
            ForgetInput(query="vault pin zq7RETRACTED", mode="purge", dry_run=True), runtime, OWNER
        )
        assert [(m.id, m.status) for m in shown.forgotten] == [(retracted, "retracted")]
        purged = forget(
            ForgetInput(query="vault pin zq7RETRACTED", mode="purge", dry_run=False), runtime, OWNER
        )
        assert [(m.id, m.status) for m in purged.forgotten] == [(retracted, "purged")]
        door = forget(ForgetInput(query="door code zq7EXPIRED", mode="purge", dry_run=False), runtime, OWNER)
        assert [m.id for m in door.forgotten] == [lapsing]
        again = forget(ForgetInput(query="vault pin zq7RETRACTED", mode="purge"), runtime, OWNER)
        assert again.forgotten == [] and again.note.startswith("nothing was forgotten: no stored memory")
        assert runtime.store.get_memory(kept).status == "active"
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7") == []


def test_a_purges_own_reason_keeps_no_word_of_what_it_erases(settings):
    """A new user's trial: purged with reason "leaked hunter2-ZEBRA", the reason stayed in lineage, the
    memory's resource, the export and the store's files."""
    from pathlib import Path

    from tests.forensics import files_holding

    runtime = make_runtime(settings)
    try:
        leaked = remember(RememberInput(content="The bastion login is zq7leak"), runtime, OWNER).id
        forget(
            ForgetInput(memory_id=leaked, mode="purge", reason="Zq7LEAK pasted by the deploy bot"),
            runtime,
            OWNER,
        )
        scope = runtime.store.get_memory(leaked).scope
        [event] = [e for e in runtime.store.lineage(scope, [leaked]) if e.action == "purge"]
        assert event.reason == "[purged] pasted by the deploy bot"
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7") == []
    assert files_holding(Path(settings.db_uri), b"Zq7") == []


def test_a_purge_names_the_earlier_memories_it_erases_with_it_before_it_does(settings):
    """A new user's trial: purging a correction also erased the memory it corrected (which held the same
    personal data but for a detail), and neither the dry run nor the confirmation had named it."""
    from pathlib import Path

    from tests.forensics import files_holding

    runtime = make_runtime(settings)
    try:
        said = remember(RememberInput(content="The billing cron runs nightly at 02:00"), runtime, OWNER).id
        again = remember(RememberInput(content="the billing cron runs at 02:00 nightly"), runtime, OWNER)
        assert again.consolidation.superseded == [said]  # a restatement: the same words
        wrong = remember(RememberInput(content="Alice Smith lives at 12 Zq7elm Streat"), runtime, OWNER).id
        right = remember(
            RememberInput(content="Alice Smith lives at 12 Zq7elm Street", replaces=wrong), runtime, OWNER
        ).id
        for memory_id, earlier in ((again.id, said), (right, wrong)):
            shown = forget(ForgetInput(memory_id=memory_id, mode="purge", dry_run=True), runtime, OWNER)
            assert shown.note == (
                "a purge also erases 1 earlier memory they replaced (restatements, or what an explicit update "
                f"corrected): {earlier}"
            )
            done = forget(ForgetInput(memory_id=memory_id, mode="purge"), runtime, OWNER)
            assert done.note == f"also purged 1 earlier memory it replaced: {earlier}"
            assert runtime.store.get_memory(earlier).status == "purged"
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"Zq7elm") == []


def test_a_purge_by_query_counts_what_it_erases_with_its_match_as_no_match_left(settings):
    """A new user's trial: a dry run said "1 more memory matches the query closely enough too (the next
    0.85)" and then named that same memory among those the purge also erases: the restatement its match
    replaced, which says the same words."""
    from tools.remember_many import RememberManyInput, remember_many

    runtime = make_runtime(settings)
    try:
        said = "Retro 2026-12-04: we agreed to timebox code reviews to 24 hours"
        items = [
            {"content": said, "tags": ["process"]},
            {
                "content": "Retro 2026-12-04: flaky e2e tests get quarantined within a day",
                "tags": ["process"],
            },
            {"content": said + ".", "tags": ["process"]},
        ]
        first, _, again = remember_many(RememberManyInput(items=items), runtime, OWNER).results
        assert runtime.store.get_memory(first.id).replaced_by == again.id  # a restatement in the batch
        shown = forget(ForgetInput(query="code review timebox", mode="purge", max_memories=1), runtime, OWNER)
        assert [m.id for m in shown.forgotten] == [again.id] and shown.dry_run
        assert "more memory matches" not in shown.note
        assert shown.note.endswith(f"(restatements, or what an explicit update corrected): {first.id}")
    finally:
        runtime.close()


def test_a_purge_among_many_memories_and_recalls_leaves_its_text_in_no_file(settings):
    """Found this stop: LanceDB rewrites a row by marking its old place deleted, and its compaction leaves a
    fragment with few deleted rows as it is, so a memory purged among 40 others stayed word for word in a
    data file the table still used (as did the traces quoting it, among many recalls)."""
    from pathlib import Path

    from tests.forensics import files_holding
    from tools.remember_many import BatchItem, RememberManyInput, remember_many

    runtime = make_runtime(settings)
    try:
        filler = [
            BatchItem(content=f"Service {n} runs on port {8000 + n}", episode_id="ops") for n in range(40)
        ]
        remember_many(RememberManyInput(items=filler), runtime, OWNER)
        secret = remember(
            RememberInput(content="The vault token is zq7VAULTsecret", episode_id="ops"), runtime, OWNER
        ).id
        remember(RememberInput(content="Service 99 runs on port 9099", episode_id="ops"), runtime, OWNER)
        for n in range(12):  # traces that quote it, among others that do not
            recall(RecallInput(query="vault token" if n % 3 == 0 else f"service {n} port"), runtime, OWNER)
        runtime.store.maintain(min_fragments=2)  # one compacted fragment, as a long-running store has
        forget(ForgetInput(memory_id=secret, mode="purge"), runtime, OWNER)
        assert len(recall(RecallInput(query="service port", top_k=50), runtime, OWNER).memories) >= 41
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7VAULT") == []


def test_a_purged_memorys_words_quoted_by_lineage_are_masked_and_leave_the_store_files(settings):
    from pathlib import Path

    from storage.records import Scope
    from tests.forensics import files_holding
    from tools.lineage import LineageInput, lineage

    runtime = make_runtime(settings)
    try:
        kept = remember(RememberInput(content="Billing uses Postgres for the ledger"), runtime, OWNER)
        revising = remember(
            RememberInput(
                content="We switched billing from Postgres to zq7SECRETxk9db over the staging link"
            ),
            runtime,
            OWNER,
        )
        assert revising.consolidation.revised == [kept.id]
        [event] = runtime.store.lineage(Scope("default", "default"), [kept.id])
        assert "zq7SECRETxk9db" in event.reason  # "revised by 'to zq7SECRETxk9db'"
        forget(ForgetInput(memory_id=revising.id, mode="purge"), runtime, OWNER)
        events = runtime.store.lineage(Scope("default", "default"), [kept.id, revising.id])
        assert events and all("zq7SECRET" not in e.reason for e in events)
        assert next(e.reason for e in events if e.memory_id == kept.id) == "[withheld: the memory was purged]"
        # Its lineage shows it as forget did: purged, its preview "[purged]" (not an empty string).
        history = lineage(LineageInput(memory_id=revising.id), runtime, OWNER)
        assert (history.memory.status, history.memory.preview) == ("purged", "[purged]")
        assert [
            m.memory.preview
            for m in lineage(LineageInput(memory_id=kept.id), runtime, OWNER).replaced_by_chain
        ] == ["[purged]"]
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7SECRET") == []


def test_a_purge_withholds_the_queries_that_asked_for_its_words_and_the_notes_of_reports_naming_it(settings):
    """A new user's trial (stop 73): after the purge, explain_ranking still printed the query "BLUEFINCH",
    and the export held the report's note "the BLUEFINCH codename answered it", in the store's files too."""
    import json
    from pathlib import Path

    from storage.forgetting import WITHHELD
    from storage.records import Scope
    from tests.forensics import files_holding
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    scope = Scope("default", "default")
    runtime = make_runtime(settings)
    try:
        secret = remember(RememberInput(content="Project Kestrel codename is ZQBLUEFINCH"), runtime, OWNER).id
        kept = remember(RememberInput(content="The staging database resets on Sundays"), runtime, OWNER).id
        asking = recall(RecallInput(query="ZQBLUEFINCH codename"), runtime, OWNER)
        other = recall(RecallInput(query="When does the staging database reset?"), runtime, OWNER)
        assert secret in [m.id for m in asking.memories] and kept in [m.id for m in other.memories]
        report_outcome(
            ReportOutcomeInput(
                outcome="success", helpful_ids=[secret], note="the ZQBLUEFINCH codename answered it"
            ),
            runtime,
            OWNER,
        )
        forget(ForgetInput(memory_id=secret, mode="purge"), runtime, OWNER)
        record = runtime.store.get_retrieval(asking.retrieval_id, scope)
        # A review: the gate's reason kept the query's words lower-cased ("has content words: zqbluefinch").
        assert record.query == WITHHELD and "zqbluefinch" not in record.trace_json.lower()
        assert json.loads(record.trace_json)["query"] == WITHHELD
        # A recall that did not ask for it in its words keeps its query (one that shares a telling word of it,
        # "Project Kestrel", would not: a purge cannot tell which of its words were the secret).
        assert (
            runtime.store.get_retrieval(other.retrieval_id, scope).query
            == "When does the staging database reset?"
        )
        assert runtime.store.get_outcome(scope, OWNER.session_id).note == WITHHELD
        tables = runtime.store.tables()
        texts = [
            str(row)
            for name in ("retrieval_ab_logs", "feedback_credits")
            for row in tables[name].to_arrow().to_pylist()
        ]
        assert not any("zqbluefinch" in text.lower() for text in texts)
        assert any("When does the staging database reset?" in text for text in texts)  # the other query stays
        # Its vector too: an embedding can be read back into its words (the offline backend's hashes them).
        [session] = [
            row
            for row in tables["feedback_credits"].to_arrow().to_pylist()
            if row["memory_id"] == "" and row["queries"]
        ]
        vectors = dict(zip(session["queries"], session["query_vectors"], strict=True))
        assert not any(vectors[WITHHELD]) and any(vectors["When does the staging database reset?"])
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"ZQBLUEFINCH") == []
    assert files_holding(Path(settings.db_uri), b"zqbluefinch") == []


def test_a_report_that_read_before_a_purge_and_wrote_after_it_keeps_no_word_of_the_memory(settings):
    """A review: a report that read the session's recalls before the purge and committed its queries after
    the purge's first scrub kept the query; the purge scrubs the reports again after its erase."""
    from storage.forgetting import WITHHELD
    from storage.records import Scope
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    scope = Scope("default", "default")
    runtime = make_runtime(settings)
    try:
        secret = remember(RememberInput(content="Project Kestrel codename is ZQBLUEFINCH"), runtime, OWNER).id
        recall(RecallInput(query="ZQBLUEFINCH codename"), runtime, OWNER)
        store = runtime.store
        scrub = store._scrub_reports
        calls = []

        def late_report(scope_, words):  # a report commits right after the first scrub, before the erase
            calls.append(1)
            scrub(scope_, words)
            if len(calls) == 1:
                report_outcome(
                    ReportOutcomeInput(outcome="success", helpful_ids=[secret], note="ZQBLUEFINCH it was"),
                    runtime,
                    OWNER,
                )

        store._scrub_reports = late_report
        forget(ForgetInput(memory_id=secret, mode="purge"), runtime, OWNER)
        assert len(calls) == 2
        assert store.get_outcome(scope, OWNER.session_id).note == WITHHELD
        rows = store.tables()["feedback_credits"].to_arrow().to_pylist()
        assert not any("zqbluefinch" in str(row).lower() for row in rows)
    finally:
        runtime.close()


@pytest.mark.parametrize("restored", [False, True], ids=["new", "restored"])
def test_a_memory_purged_while_the_next_one_in_its_episode_is_written_is_not_quoted_by_it(settings, restored):
    """The remember reads the memory before it in its episode (its search text quotes it), then a purge of
    that memory runs whole before the remember's insert (or its restore, of a text retracted before): the
    write leaves the purged words out."""
    import threading

    from storage.records import Scope, View
    from tests.fakes import RecordingEmbedder

    class Held(RecordingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.armed, self.entered, self.going = False, threading.Event(), threading.Event()

        def embed_documents(self, texts):
            if self.armed and any("noted, thanks" in text for text in texts):
                self.entered.set()  # the quote of the memory before it is read by now
                assert self.going.wait(30)
            return super().embed_documents(texts)

    embedder = Held()
    runtime = make_runtime(settings, embedder=embedder)
    try:
        secret = remember(
            RememberInput(content="The vault word is zq7SECRETxk9", episode_id="ep1"), runtime, OWNER
        )
        if restored:
            retracted = remember(RememberInput(content="noted, thanks", episode_id="ep1"), runtime, OWNER)
            forget(ForgetInput(memory_id=retracted.id), runtime, OWNER)
        embedder.armed = True
        said = {}
        writer = threading.Thread(
            target=lambda: said.setdefault(
                "next", remember(RememberInput(content="noted, thanks", episode_id="ep1"), runtime, OWNER)
            )
        )
        writer.start()
        assert embedder.entered.wait(30)
        forget(ForgetInput(memory_id=secret.id, mode="purge"), runtime, OWNER)
        embedder.going.set()
        writer.join(30)
        rows = runtime.store._select(runtime.store._memories, None, ["id", "search_text"], limit=None)
        text = {row["id"]: row["search_text"] for row in rows}[said["next"].id]
        assert "zq7SECRET" not in text and text.startswith("noted, thanks")
        scope = View(Scope("default", "default"))
        assert runtime.store.fulltext_search(scope, "zq7SECRETxk9", limit=5) == []
    finally:
        runtime.close()


KILLED_MID_PURGE = """
import sys, time
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.forget import ForgetInput, forget

runtime = make_runtime(settings_for(sys.argv[1]))

def killed_here(*args, **kwargs):
    print("erased", flush=True)
    time.sleep(3600)

setattr(runtime.store, sys.argv[3], killed_here)
forget(ForgetInput(memory_id=sys.argv[2], mode="purge"), runtime, Caller("agent-a", "ses_2"))
"""


def killed_mid_purge(settings, memory_id: str, at: str = "_scrub_traces") -> None:
    """Another process purges ``memory_id`` and is killed (kill -9) half way, where it calls the store's
    ``at`` (``_scrub_traces``: after the erase; ``_scrub_quotes``: before it): its journal entry stays."""
    with killed_after(KILLED_MID_PURGE, str(settings.db_uri), memory_id, at) as process:
        assert process.stdout.readline().strip() == "erased", process.stderr.read()


PHONE = "The on-call phone number is 555 0100"


@contextmanager
def purge_killed_in_another_process(settings, at: str = "_scrub_traces"):
    """A running runtime, and a memory of it that another process was killed purging (``killed_mid_purge``)."""
    running = make_runtime(settings)
    try:
        memory = remember(RememberInput(content=PHONE), running, OWNER)
        killed_mid_purge(settings, memory.id, at)
        yield running, memory
    finally:
        running.close()


def test_a_running_server_finishes_a_purge_another_process_was_killed_in(settings):
    from server.upkeep import catch_up

    with purge_killed_in_another_process(settings) as (running, memory):
        assert running.store.get_memory(memory.id).status == "purged"  # erased, the rest of it not done
        catch_up(running)  # its next maintenance round's catch-up finishes it
        assert running.store.finish_pending_purges() == 0
        scope = running.store.get_memory(memory.id).scope
        assert [e.action for e in running.store.lineage(scope, [memory.id])][-1] == "purge"


def test_a_memory_restored_after_a_killed_purge_stays_when_the_purge_is_finished(settings):
    with purge_killed_in_another_process(settings) as (running, memory):
        again = remember(RememberInput(content=PHONE), running, OWNER)  # acknowledged: restored
        assert (again.status, again.note) == ("stored", "restored: an identical memory had been purged")
    reopened = make_runtime(settings)  # the next start finishes the dead process's purge
    try:
        stored = reopened.store.get_memory(memory.id)
        assert (stored.status, stored.content) == ("active", PHONE)
    finally:
        reopened.close()


def test_a_purge_killed_before_its_erase_is_finished_even_if_a_report_moved_the_memory_since(settings):
    from server.upkeep import catch_up
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    with purge_killed_in_another_process(settings, at="_scrub_quotes") as (running, memory):
        assert running.store.get_memory(memory.id).status == "active"  # not erased yet
        recall(RecallInput(query="on-call phone number"), running, OWNER)
        report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[memory.id]), running, OWNER)
        assert running.store.get_memory(memory.id).weight > 1.0  # the row was written since
        catch_up(running)
        stored = running.store.get_memory(memory.id)
        assert (stored.status, stored.content) == ("purged", "")


def test_a_denial_comes_after_what_the_query_says_only_among_equally_close_matches(runtime):
    """A review: ordering every agreeing memory first purged a 0.66 match ahead of the 0.90 one."""
    secret = remember(
        RememberInput(content="Never paste the staging deploy token zq7TOKEN into chat"), runtime, OWNER
    ).id
    remember(RememberInput(content="The staging deploy token is rotated monthly"), runtime, OWNER)
    out = forget(
        ForgetInput(query="staging deploy token zq7TOKEN", mode="purge", dry_run=False), runtime, OWNER
    )
    assert [m.id for m in out.forgotten] == [secret]


def test_a_purge_of_a_superseded_copy_names_the_memory_that_replaced_it_and_stays(runtime):
    """A review: the superseded copy of a text, quoted exactly, was purged and its active restatement kept
    the words without a word about it (what replaced a memory may also be a correction, which a purge of
    the old text must not take: it is named, not erased)."""
    said = remember(RememberInput(content="The billing cron runs nightly at 02:00"), runtime, OWNER).id
    again = remember(RememberInput(content="the billing cron runs at 02:00 nightly"), runtime, OWNER)
    assert again.consolidation.superseded == [said]
    runtime.writer.settle(30)
    out = forget(
        ForgetInput(query="The billing cron runs nightly at 02:00", mode="purge", dry_run=False),
        runtime,
        OWNER,
    )
    assert [m.id for m in out.forgotten] == [said]
    assert f"what replaced {said} ({again.id}) stays: purge it too if it holds the same words" in out.note
    assert runtime.store.get_memory(again.id).status == "active"


def test_a_purge_reason_keeps_no_word_of_any_scope_it_erases_nor_of_their_tags(settings):
    """A review: the reason was masked one scope at a time, and a tag the purge erased was not masked."""
    from pathlib import Path

    from tests.forensics import files_holding

    runtime = make_runtime(settings)
    try:
        here = remember(
            RememberInput(content="The staging key is zq7alpha", tags=["leak"]), runtime, OWNER
        ).id
        shelf = remember(
            RememberInput(
                content="The org vault pin is zq7beta", tags=["leak", "cust-zq7smith"], visibility="org"
            ),
            runtime,
            OWNER,
        ).id
        out = forget(
            ForgetInput(
                tag="leak", mode="purge", dry_run=False, reason="leaked zq7alpha, zq7beta for cust-zq7smith"
            ),
            runtime,
            OWNER,
        )
        assert sorted(m.id for m in out.forgotten) == sorted([here, shelf])
        reasons = [
            event.reason
            for memory_id in (here, shelf)
            for event in runtime.store.lineage(runtime.store.get_memory(memory_id).scope, [memory_id])
            if event.action == "purge"
        ]
        assert reasons == ["leaked [purged], [purged] for [purged]-[purged]"] * 2
    finally:
        runtime.close()
    assert files_holding(Path(settings.db_uri), b"zq7") == []


def test_an_immutable_memory_is_forgotten_only_by_the_agent_that_remembered_it(runtime):
    rule = remember(
        RememberInput(content="Never deploy the payments service on a Friday", protection_tier="immutable"),
        runtime,
        OWNER,
    ).id
    other = Caller("agent-b", "ses_other")
    with pytest.raises(ToolFailure, match="remembered by agent 'agent-a': only that agent may forget it"):
        forget(ForgetInput(memory_id=rule), runtime, other)
    with pytest.raises(ToolFailure, match="--agent agent-a"):
        forget(ForgetInput(memory_id=rule, mode="purge"), runtime, other)
    remote = Caller("agent-b", "ses_other", remote=True)  # a token's holder: no command line to offer
    with pytest.raises(ToolFailure) as refused:
        forget(ForgetInput(memory_id=rule), runtime, remote)
    assert str(refused.value).endswith("Ask 'agent-a' to forget it")
    assert runtime.store.get_memory(rule).status == "active"
    # its author may: the tier says no other agent changes it, not that it never goes
    gone = forget(ForgetInput(memory_id=rule), runtime, LATER)
    assert [(m.id, m.status) for m in gone.forgotten] == [(rule, "retracted")]


def test_a_forget_by_query_or_tag_leaves_another_agents_immutable_memory_and_says_so(runtime):
    rule = remember(
        RememberInput(
            content="Payments deploys need two approvals", tags=["deploy"], protection_tier="immutable"
        ),
        runtime,
        OWNER,
    ).id
    habit = remember(
        RememberInput(content="Payments deploys usually run after lunch", tags=["deploy"]), runtime, OWNER
    ).id
    other = Caller("agent-b", "ses_other")
    by_tag = forget(ForgetInput(tag="deploy", dry_run=False), runtime, other)
    assert [m.id for m in by_tag.forgotten] == [habit]
    assert f"1 immutable memory of another agent left: {rule} (only 'agent-a'" in by_tag.note
    by_query = forget(ForgetInput(query="payments deploys need two approvals"), runtime, other)
    assert by_query.forgotten == []
    assert f"{rule} (only 'agent-a', who remembered it, may forget it)" in by_query.note
    assert runtime.store.get_memory(rule).status == "active"


def test_a_forget_by_query_leaves_the_memory_that_says_its_words_with_another_value(runtime):
    """A trial: forgetting a planted port by its words retracted the true port too, which recall then lacked."""
    true = remember(
        RememberInput(content="The production Postgres database listens on port 5432"), runtime, OWNER
    )
    false = remember(
        RememberInput(content="FYI the production Postgres database listens on port 6543"), runtime, OWNER
    )
    query = "the production Postgres database listens on port 6543"
    out = forget(ForgetInput(query=query, max_memories=5), runtime, OWNER)
    assert [memory.id for memory in out.forgotten] == [false.id]
    assert f"left 1 memory that says the query's words with another value: {true.id}" in out.note
    assert runtime.store.get_memory(true.id).status == "active"
    again = forget(ForgetInput(query=query, max_memories=5), runtime, OWNER)
    assert again.forgotten == [] and again.note.startswith("nothing was forgotten: left 1 memory that says")


def test_a_forget_by_query_leaves_the_memory_that_gives_the_role_to_another_name(runtime):
    """Forgetting who held a role by its words must not take the current holder with it."""
    priya = remember(RememberInput(content="Priya is the on-call lead."), runtime, OWNER)
    dan = remember(RememberInput(content="Dan Reyes is the on-call lead."), runtime, OWNER)
    out = forget(ForgetInput(query="Priya is the on-call lead", max_memories=5), runtime, OWNER)
    assert [memory.id for memory in out.forgotten] == [priya.id]
    assert f"left 1 memory that says the query's words with another value: {dan.id}" in out.note
    assert runtime.store.get_memory(dan.id).status == "active"


def test_a_forget_by_query_in_few_words_leaves_a_memory_that_names_other_values_than_the_querys(runtime):
    """A new user's trial: a query naming a port in a few words retracted the memory of another port."""
    redis = remember(
        RememberInput(content="Redis is used as the session cache, on port 6379, with a TTL of 30 minutes."),
        runtime,
        OWNER,
    )
    postgres = remember(
        RememberInput(content="The production Postgres database listens on port 5433, not the default 5432."),
        runtime,
        OWNER,
    )
    wrong_port = forget(ForgetInput(query="Redis session cache port 6380"), runtime, OWNER)
    assert wrong_port.forgotten == []
    assert f"left 1 memory that says the query's words with another value: {redis.id}" in wrong_port.note
    other_port = forget(
        ForgetInput(query="production Postgres database listens on port 5434"), runtime, OWNER
    )
    assert other_port.forgotten == [] and postgres.id in other_port.note
    # A query without a number, or naming one the memory names, forgets as before.
    assert [
        m.id for m in forget(ForgetInput(query="Redis session cache port 6379"), runtime, OWNER).forgotten
    ] == [redis.id]
    postgres_gone = forget(ForgetInput(query="production Postgres database listens on port"), runtime, OWNER)
    assert [m.id for m in postgres_gone.forgotten] == [postgres.id]
    assert runtime.store.get_memory(redis.id).status == "retracted"


def test_a_forget_by_query_leaves_the_org_visible_memories_a_project_token_may_not_change(runtime):
    """A trial: the dry run listed an org-wide memory as going, and the call then refused them all."""
    project_only = Caller("alice", "ses_a", may_change_org=lambda org_id: False)
    shelf = remember(
        RememberInput(content="Company VPN endpoint is vpn.acme.example on port 1194", visibility="org"),
        runtime,
        OWNER,
    )
    mine = remember(
        RememberInput(content="Web app VPN endpoint is vpn.acme.example on port 1194 for staging"),
        runtime,
        OWNER,
    )
    query = ForgetInput(query="VPN endpoint vpn.acme.example port 1194", max_memories=5)
    dry = forget(query.model_copy(update={"dry_run": True}), runtime, project_only)
    done = forget(query, runtime, project_only)
    assert [m.id for m in dry.forgotten] == [m.id for m in done.forgotten] == [mine.id]
    assert f"1 org-visible memory left: {shelf.id}" in done.note
    assert runtime.store.get_memory(shelf.id).status == "active"
    with pytest.raises(ToolFailure, match=f"{shelf.id} \\(org-visible\\) is read by every project"):
        forget(ForgetInput(memory_id=shelf.id), runtime, project_only)


def test_a_forget_by_tag_from_a_project_names_the_org_wide_memories_it_takes_from_every_project(runtime):
    """A trial: ``memoria forget --tag logging --project web`` retracted the org's memory tagged so, for every
    project, and neither its preview nor its result said it was org-wide."""
    shelf = remember(
        RememberInput(
            content="Every service must emit logs as JSON lines", tags=["logging"], visibility="org"
        ),
        runtime,
        OWNER,
    ).id
    remember(RememberInput(content="The web app logs through pino", tags=["logging"]), runtime, OWNER)
    said = "1 of these is org-wide, read by every project of org 'default', not 'default' alone: it"
    dry = forget(ForgetInput(tag="logging"), runtime, OWNER)
    assert f"{said} would be forgotten for every project ({shelf})" in dry.note
    done = forget(ForgetInput(tag="logging", dry_run=False), runtime, OWNER)
    assert f"{said} was forgotten for every project ({shelf})" in done.note
    # By its id, the memory is named: nothing to add.
    again = remember(RememberInput(content="Logs are kept for 30 days", visibility="org"), runtime, OWNER).id
    assert forget(ForgetInput(memory_id=again), runtime, OWNER).note is None


def test_a_purge_withholds_what_a_language_model_wrote_of_the_memory_in_the_traces_that_showed_it(tmp_path):
    """A review: the context selection's reason, kept on every candidate it left out, quoted the purged
    memory's words, and ``explain_ranking`` gave them back after the purge."""
    import json

    from storage.records import Scope
    from tests.fakes import ScriptedLLM
    from tools.explain_ranking import ExplainRankingInput, explain_ranking
    from tools.explain_text import text_of

    runtime = make_runtime(settings_for(tmp_path / "store", llm_passes=["context_selection"]))
    try:
        secret = remember(
            RememberInput(content="The launch codename is BLUEFINCH and ships on 2027-03-01"), runtime, OWNER
        ).id
        remember(RememberInput(content="The launch checklist lives in ops/launch.md"), runtime, OWNER)
        said = {
            "drop": [secret],
            "reason": "the BLUEFINCH codename memory does not say where the checklist is",
        }
        llm = ScriptedLLM({"context_selection": [json.dumps(said)]})
        out = recall(
            RecallInput(query="where is the launch checklist"),
            runtime,
            Caller("agent-a", "ses_owner", llm=llm),
        )
        shown = explain_ranking(ExplainRankingInput(retrieval_id=out.retrieval_id), runtime, OWNER)
        assert "BLUEFINCH" in shown.model_dump_json()  # the model's words, as it said them
        forget(ForgetInput(memory_id=secret, mode="purge"), runtime, OWNER)
        explained = explain_ranking(ExplainRankingInput(retrieval_id=out.retrieval_id), runtime, OWNER)
        [left_out] = [c for c in explained.candidates if c.id == secret]
        assert left_out.reason == (
            "left out by the language model's context selection (what the language model said is withheld: "
            "a memory of this recall was purged)"
        )
        assert "BLUEFINCH" not in explained.model_dump_json() and "BLUEFINCH" not in text_of(explained)
        stored = runtime.store.get_retrieval(out.retrieval_id, Scope("default", "default"))
        assert "BLUEFINCH" not in stored.trace_json
    finally:
        runtime.close()


def test_max_memories_is_refused_beside_a_tag_or_an_id_and_nothing_is_forgotten(runtime):
    """A team's trial: a forget by tag with max_memories planned all three tagged memories, saying nothing of
    the limit it did not heed."""
    ids = [
        remember(RememberInput(content=f"Deploy step {n} of the runbook", tags=["deploy"]), runtime, OWNER).id
        for n in ("one", "two", "three")
    ]
    for asked in (
        ForgetInput(tag="deploy", max_memories=2, dry_run=False),
        ForgetInput(memory_id=ids[0], max_memories=2),
    ):
        with pytest.raises(ToolFailure, match="max_memories applies to a forget by query"):
            forget(asked, runtime, OWNER)
    assert {runtime.store.get_memory(i).status for i in ids} == {"active"}
    # 1, the default a client may send with every call, asks no limit: a dry run lists all three
    assert len(forget(ForgetInput(tag="deploy", max_memories=1), runtime, OWNER).forgotten) == 3


def test_a_memory_another_call_retracted_first_is_not_said_forgotten_again_nor_recorded_twice(runtime):
    """A trial: two servers retracting one memory at once both answered that they had, and its lineage held
    two retractions. The second is told another call did it, and records nothing."""
    kept = remember(RememberInput(content="the billing cron runs at 02:00"), runtime, OWNER).id
    raced = remember(RememberInput(content="the staging cron runs at 04:00"), runtime, OWNER).id
    real = runtime.writer.retract

    def another_call_first(scope, ids, **fields):
        real(scope, [raced], reason="the other call", resolution="retract by agent-b", actor=fields["actor"])
        return real(scope, ids, **fields)

    runtime.writer.retract = another_call_first
    out = forget(ForgetInput(query="cron runs at", max_memories=2, dry_run=False), runtime, OWNER)
    assert [m.id for m in out.forgotten] == [kept]
    assert (
        out.note is not None
        and f"1 memory no longer active, changed by another call meanwhile: {raced}" in out.note
    )
    runtime.store.flush_logs()
    events = [
        e
        for e in runtime.store.lineage(runtime.store.get_memory(raced).scope, [raced])
        if e.action == "retract"
    ]
    assert [e.reason for e in events] == ["the other call"]


def test_a_forget_by_tag_that_another_call_beat_to_one_memory_counts_what_it_retracted(runtime):
    """A review: the tag's note counted the memories read before the race ("2 memories tagged ...
    retracted") where this call retracted one."""
    first = remember(
        RememberInput(content="the billing cron runs at 02:00", tags=["cron"]), runtime, OWNER
    ).id
    raced = remember(
        RememberInput(content="the staging cron runs at 04:00", tags=["cron"]), runtime, OWNER
    ).id
    real = runtime.writer.retract

    def another_call_first(scope, ids, **fields):
        real(scope, [raced], reason="the other call", resolution="retract by agent-b", actor=fields["actor"])
        return real(scope, ids, **fields)

    runtime.writer.retract = another_call_first
    out = forget(ForgetInput(tag="cron", dry_run=False), runtime, OWNER)
    assert [m.id for m in out.forgotten] == [first]
    assert out.note == (
        f"1 memory tagged 'cron' retracted; 1 memory no longer active, changed by another call meanwhile: {raced}"
    )
