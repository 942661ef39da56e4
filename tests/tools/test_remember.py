import time
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.text import content_hash
from storage.records import Scope
from tests.fakes import RecordingEmbedder
from tests.helpers import make_runtime
from tools.common import Caller, ToolFailure, memory_id_for
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.remember_many import BatchItem, RememberManyInput, remember_many
from tools.remember_text import batch_text_of, text_of

CALLER = Caller(agent_id="claude-code", session_id="ses_1")


def test_content_is_stored_verbatim_with_its_provenance(runtime):
    out = remember(
        RememberInput(content="  Deploys run from scripts/deploy.sh\n", tags=["ops"], episode_id="ep-1"),
        runtime,
        CALLER,
    )
    assert out.status == "stored" and out.duplicate_of is None
    stored = runtime.store.get_memory(out.id)
    assert stored.content == "  Deploys run from scripts/deploy.sh\n"
    assert (stored.agent_id, stored.session_id, stored.episode_id, stored.tags) == (
        "claude-code",
        "ses_1",
        "ep-1",
        ("ops",),
    )
    assert stored.embedder == runtime.models.embedder.name
    assert "ep-1" in runtime.store.get_episodes(Scope("default", "default"), ["ep-1"])


def test_the_same_content_in_the_same_scope_is_stored_once(runtime):
    first = remember(RememberInput(content="Use pnpm, not npm"), runtime, CALLER)
    again = remember(RememberInput(content="Use  pnpm, not npm ", agent_id="cursor"), runtime, CALLER)
    assert again.status == "duplicate"
    assert again.id == again.duplicate_of == first.id
    assert again.agent_id == "claude-code"  # the original's provenance is kept
    assert runtime.store.count_memories() == 1


def test_the_same_content_stated_again_adds_its_tags_and_a_higher_tier_and_says_so(runtime):
    first = remember(RememberInput(content="Use ruff for linting", tags=["lint"]), runtime, CALLER)
    again = remember(
        RememberInput(content="Use ruff for linting", tags=["python", "lint"], protection_tier="protected"),
        runtime,
        CALLER,
    )
    assert again.status == "duplicate" and again.id == first.id
    assert again.note == (
        "an identical memory is stored; added its tags ['python'] and raised its protection tier from "
        "standard to protected"
    )
    stored = runtime.store.get_memory(first.id)
    assert (stored.tags, stored.protection_tier) == (("lint", "python"), "protected")
    found = recall(RecallInput(query="linting", tags=["python"]), runtime, CALLER)
    assert [memory.id for memory in found.memories] == [first.id]  # the new tag is searchable
    # Said again with less, nothing is taken away, and nothing is said.
    less = remember(RememberInput(content="Use ruff for linting"), runtime, CALLER)
    assert less.note is None
    assert runtime.store.get_memory(first.id).protection_tier == "protected"


def test_an_ephemeral_memory_expires_counted_from_when_it_happened_as_it_decays(runtime):
    """Its decay runs from when it happened (``occurred_at``); its expiry runs from then too. A new user's
    trial found one dated two months back shown first at score 0.000, fully decayed, its expiry still a
    week after the write."""
    now = datetime.now(UTC)
    ttl = timedelta(seconds=runtime.settings.ephemeral.ttl_seconds)  # 7 days
    happened = now - timedelta(days=2)
    kept = remember(
        RememberInput(content="The demo runs at 3pm", protection_tier="ephemeral", occurred_at=happened),
        runtime,
        CALLER,
    )
    stored = runtime.store.get_memory(kept.id)
    assert stored.expires_at == stored.created_at + ttl  # five days from now, not seven
    long_ago = now - timedelta(days=61)
    with pytest.raises(
        ToolFailure,
        match=r"an ephemeral memory that happened at .* expired at .* \(7 days after it happened: .*: remember it",
    ):
        remember(
            RememberInput(
                content="The flaky tests are quarantined in tests/quarantine.txt",
                protection_tier="ephemeral",
                occurred_at=long_ago,
            ),
            runtime,
            CALLER,
        )
    assert [m.id for m in runtime.store.list_memories(Scope("default", "default"), limit=10)] == [kept.id]


def test_an_amend_to_ephemeral_counts_the_expiry_from_when_the_memory_happened(runtime):
    """A trial: an amend made a dated memory ephemeral with an expiry a week from now, where remembering it
    ephemeral was refused as expired; its time now runs from when it happened, as for a new memory."""
    now = datetime.now(UTC)
    ttl = timedelta(seconds=runtime.settings.ephemeral.ttl_seconds)  # 7 days
    recent = remember(
        RememberInput(content="The demo runs at 3pm", occurred_at=now - timedelta(days=2)), runtime, CALLER
    )
    amended = remember(
        RememberInput(content="The demo runs at 3pm", replaces=recent.id, protection_tier="ephemeral"),
        runtime,
        CALLER,
    )
    stored = runtime.store.get_memory(amended.id)
    assert (stored.protection_tier, stored.expires_at) == (
        "ephemeral",
        stored.created_at + ttl,
    )  # in five days
    old = remember(
        RememberInput(content="Code freeze for the October release", occurred_at=now - timedelta(days=61)),
        runtime,
        CALLER,
    )
    with pytest.raises(
        ToolFailure, match=r"as an ephemeral memory it expired at .*nothing was changed. Keep its tier"
    ):
        remember(
            RememberInput(
                content="Code freeze for the October release", replaces=old.id, protection_tier="ephemeral"
            ),
            runtime,
            CALLER,
        )
    assert runtime.store.get_memory(old.id).protection_tier == "standard"


def test_an_ephemeral_memory_stated_again_keeps_its_expiry_unless_its_author_protects_it(runtime):
    first = remember(
        RememberInput(content="The demo runs at 3pm", protection_tier="ephemeral"), runtime, CALLER
    )
    expires = runtime.store.get_memory(first.id).expires_at
    assert expires is not None
    # "standard" is also what a statement naming no tier says: it does not make the memory lasting.
    assert remember(RememberInput(content="The demo runs at 3pm"), runtime, CALLER).note is None
    assert runtime.store.get_memory(first.id).expires_at == expires
    again = remember(
        RememberInput(content="The demo runs at 3pm", protection_tier="protected"), runtime, CALLER
    )
    assert (
        again.note == "an identical memory is stored; raised its protection tier from ephemeral to protected"
    )
    stored = runtime.store.get_memory(first.id)
    assert (stored.protection_tier, stored.expires_at) == ("protected", None)


def test_another_agents_identical_write_corroborates_and_adds_its_tags_but_not_its_tier(runtime):
    first = remember(RememberInput(content="Staging resets on Sunday"), runtime, CALLER)
    second = remember(
        RememberInput(
            content="Staging resets on Sunday", agent_id="bob", tags=["ops"], protection_tier="immutable"
        ),
        runtime,
        CALLER,
    )
    assert (
        second.note
        == "already stored by claude-code; recorded bob as corroborating it; added its tags ['ops']"
    )
    stored = runtime.store.get_memory(first.id)
    assert (stored.tags, stored.protection_tier) == (("ops",), "standard")


def test_tags_beyond_the_limit_are_left_out_and_the_note_says_which(runtime):
    limit = runtime.settings.max_tags
    kept = [f"t{n}" for n in range(limit - 1)]
    first = remember(RememberInput(content="Builds run on Buildkite", tags=kept), runtime, CALLER)
    again = remember(
        RememberInput(content="Builds run on Buildkite", tags=["ci", "infra", "x"]), runtime, CALLER
    )
    assert again.note == (
        f"an identical memory is stored; added its tags ['ci'] and left out the tags ['infra', 'x']: a memory "
        f"has at most {limit}"
    )
    assert runtime.store.get_memory(first.id).tags == (*kept, "ci")


def test_a_superseded_text_stated_again_says_how_to_make_it_current(runtime):
    old = remember(RememberInput(content="Deploys happen on Fridays"), runtime, CALLER)
    new = remember(RememberInput(content="Deploys happen on Mondays", replaces=old.id), runtime, CALLER)
    again = remember(RememberInput(content="Deploys happen on Fridays"), runtime, CALLER)
    assert again.status == "duplicate" and again.id == old.id
    assert again.note == (
        f"an identical memory was superseded; the current memory is {new.id}. To make this text current "
        f"again, remember it with replaces={new.id}"
    )
    back = remember(RememberInput(content="Deploys happen on Fridays", replaces=new.id), runtime, CALLER)
    assert back.id == old.id and runtime.store.get_memory(old.id).status == "active"


def test_a_correction_whose_text_is_another_memory_of_other_words_is_refused(runtime):
    """A trial: `memoria edit` of a release deadline with the text of a database decision (pasted by mistake)
    made the decision replace the deadline, which dropped out of every listing."""
    deadline = remember(RememberInput(content="The release freeze starts December 12"), runtime, CALLER).id
    decision = remember(RememberInput(content="We chose PostgreSQL for billing"), runtime, CALLER).id
    with pytest.raises(ToolFailure) as refused:
        remember(RememberInput(content="We chose PostgreSQL for billing", replaces=deadline), runtime, CALLER)
    assert str(refused.value).startswith(
        f"this text is already memory {decision} ('We chose PostgreSQL for billing'), which shares no word with "
        f"{deadline} ('The release freeze starts December 12'); nothing was changed."
    )
    assert runtime.store.get_memory(deadline).status == "active"
    # A correction already stored that is about the same thing still replaces it.
    fixed = remember(RememberInput(content="The release freeze starts December 15"), runtime, CALLER).id
    out = remember(
        RememberInput(content="The release freeze starts December 15", replaces=deadline), runtime, CALLER
    )
    assert out.id == fixed and runtime.store.get_memory(deadline).status == "superseded"


def test_a_superseded_text_whose_replacement_was_forgotten_is_current_again_when_stated_again(runtime):
    from tools.forget import ForgetInput, forget

    old = remember(RememberInput(content="Deploys happen on Fridays"), runtime, CALLER)
    new = remember(RememberInput(content="Deploys happen on Mondays", replaces=old.id), runtime, CALLER)
    forget(ForgetInput(memory_id=new.id), runtime, CALLER)
    again = remember(RememberInput(content="Deploys happen on Fridays"), runtime, CALLER)
    assert (
        again.id == old.id
        and again.note == f"restored: stated again; {new.id}, which had replaced it, is retracted"
    )
    assert runtime.store.get_memory(old.id).status == "active"
    restored = runtime.store.recent_lineage(Scope("default", "default"), ["restore"], 5)
    assert [(event.memory_id, event.reason) for event in restored] == [
        (old.id, f"stated again; {new.id}, which had replaced it, is retracted")
    ]


def test_the_same_content_in_another_project_is_a_separate_memory(runtime):
    a = remember(RememberInput(content="Use pnpm"), runtime, CALLER)
    b = remember(RememberInput(content="Use pnpm", project_id="api"), runtime, CALLER)
    assert a.id != b.id and b.status == "stored" and b.project_id == "api"


def test_ids_are_deterministic_so_a_retried_call_lands_on_the_same_memory(runtime):
    out = remember(RememberInput(content="retry me", org_id="acme", project_id="web"), runtime, CALLER)
    from retrieval.text import content_hash

    assert out.id == memory_id_for(Scope("acme", "web"), content_hash("retry me"))


def test_explicit_agent_and_session_override_the_connection_defaults(runtime):
    out = remember(RememberInput(content="x", agent_id="planner", session_id="ses_custom"), runtime, CALLER)
    assert (out.agent_id, out.session_id) == ("planner", "ses_custom")


def test_content_over_the_configured_limit_is_refused_with_advice(runtime):
    with pytest.raises(ToolFailure, match=r"limit is 20,000\. Store one fact per memory"):
        remember(RememberInput(content="x" * 20_001), runtime, CALLER)
    assert runtime.store.count_memories() == 0


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"content": "   "}, "empty or whitespace"),
        ({"content": "x", "kind": "note"}, "literal_error"),
        ({"content": "x", "tags": ["a|b"]}, "must not contain '|'"),
        ({"content": "x", "agent_id": "bad\x00agent"}, "control characters"),
    ],
)
def test_invalid_arguments_are_rejected_by_the_input_model(arguments, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as failure:
        RememberInput(**arguments)
    assert message in str(failure.value) or message in repr(failure.value.errors())


def test_occurred_at_dates_an_imported_memory_and_the_future_is_refused(runtime):
    out = remember(
        RememberInput(content="We moved to Berlin", occurred_at="2023-05-08T13:56:00"), runtime, CALLER
    )
    assert runtime.store.get_memory(out.id).created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with pytest.raises(ToolFailure, match="is in the future"):
        remember(
            RememberInput(content="Tomorrow's news", occurred_at="2999-01-01T00:00:00Z"), runtime, CALLER
        )
    for placeholder, said in (
        ("0001-01-01T00:00:00Z", "is before 1970"),
        ("1970-01-01T00:00:00Z", "is the Unix epoch"),
    ):
        with pytest.raises(ToolFailure, match=f"{said}, where placeholder dates"):
            remember(RememberInput(content="Ancient news", occurred_at=placeholder), runtime, CALLER)
    assert runtime.store.count_memories() == 1


@pytest.mark.parametrize(
    "stamp", ["86400", "1764590000000", 1764590000, " 20261101.5 ", 3.5, "1.5e9", ".5e10"]
)
def test_a_number_is_not_read_as_a_unix_time(stamp):
    # Lax datetime parsing read "86400" as 1970-01-02 (past the placeholder check) and milliseconds too.
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="a number, which is not read as a time here"):
        RememberInput(content="Cache warmed", occurred_at=stamp)


def test_a_basic_format_iso_date_or_time_is_the_one_it_names(runtime):
    out = remember(RememberInput(content="Cache warmed", occurred_at="20261101"), runtime, CALLER)
    assert runtime.store.get_memory(out.id).created_at == datetime(2026, 11, 1, tzinfo=UTC)
    timed = remember(RememberInput(content="Cache cold", occurred_at="20261101T0930+0200"), runtime, CALLER)
    assert runtime.store.get_memory(timed.id).created_at == datetime(2026, 11, 1, 7, 30, tzinfo=UTC)
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="names no real date or time"):
        RememberInput(content="Cache warm", occurred_at="20261341T000000Z")


def test_the_turn_before_an_answer_makes_the_answer_findable(runtime):
    # "pets" is only in the question; the answer is found through the memory before it in its episode.
    turns = [
        ("Ben", "Do you have any pets at home?"),
        ("Ana", "Yes, Oscar, my guinea pig."),
        ("Ben", "I went hiking in the Alps last summer."),
    ]
    out = remember_many(
        RememberManyInput(
            items=[BatchItem(content=text, agent_id=speaker, episode_id="chat-1") for speaker, text in turns]
        ),
        runtime,
        CALLER,
    )
    ids = [result.id for result in out.results]
    assert [runtime.store.get_memory(i).agent_id for i in ids] == ["Ben", "Ana", "Ben"]
    with_fulltext = recall(RecallInput(query="pets", top_k=2), runtime, CALLER)
    direct = [m.id for m in with_fulltext.memories if m.source == "direct"]
    assert ids[1] in direct and ids[2] not in direct


def test_the_author_and_the_day_are_searchable(runtime):
    remember(
        RememberInput(content="The cache is warm", agent_id="reviewer", occurred_at="2024-03-02T10:00:00Z"),
        runtime,
        CALLER,
    )
    remember(RememberInput(content="The cache is cold"), runtime, CALLER)
    top = recall(
        RecallInput(query="what did reviewer say about the cache in March 2024", top_k=1), runtime, CALLER
    )
    assert [m.content for m in top.memories] == ["The cache is warm"]


def test_the_embedder_sees_a_memorys_content_alone_not_its_author_or_its_neighbours(settings):
    # The author and the turn before are in the full-text field; a vector of "author: content" ranked
    # worse with a real model (docs/retrieval.md), and a vector of the turn before as well would make the
    # same fact said after different turns look less alike to consolidation.
    embedder = RecordingEmbedder()
    runtime = make_runtime(settings, embedder=embedder)
    try:
        remember(
            RememberInput(content="Do you have pets?", agent_id="caroline", episode_id="ep"), runtime, CALLER
        )
        answer = BatchItem(content="Oscar, my guinea pig", agent_id="melanie", episode_id="ep")
        out = remember_many(RememberManyInput(items=[answer]), runtime, CALLER)
        assert embedder.seen == ["Do you have pets?", "Oscar, my guinea pig"]
        assert runtime.store.get_memory(out.results[0].id).embedder == embedder.name
    finally:
        runtime.close()


def test_a_new_memory_is_one_write_already_stamped_as_examined_by_consolidation(runtime):
    before = runtime.store.table_version()
    out = remember(RememberInput(content="The deploy key rotates every ninety days"), runtime, CALLER)
    assert runtime.store.table_version() == before + 1  # no insert-then-update
    assert runtime.store.get_memory(out.id).consolidated_at is not None


class BrokenLLM:
    """An LLM whose connection breaks mid-call (not a polite "unavailable")."""

    name = "broken-llm"

    def complete(self, request):
        raise ConnectionResetError("connection reset by peer")


def test_if_consolidation_fails_the_stamp_comes_off_and_the_retry_consolidates(runtime):
    first = remember(RememberInput(content="I prefer TypeScript."), runtime, CALLER)
    with pytest.raises(ConnectionResetError):
        remember(
            RememberInput(content="i prefer typescript"), runtime, Caller("claude-code", "ses_1", BrokenLLM())
        )
    again = memory_id_for(Scope("default", "default"), content_hash("i prefer typescript"))
    assert runtime.store.get_memory(again).consolidated_at is None  # stored, but not examined

    retried = remember(RememberInput(content="i prefer typescript"), runtime, CALLER)  # the rules resolve it
    assert retried.id == again
    assert runtime.store.get_memory(first.id).status == "superseded"
    assert runtime.store.get_memory(again).consolidated_at is not None


def test_a_batch_is_one_write_with_its_own_near_duplicates_already_superseded(runtime):
    before = runtime.store.table_version()
    out = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="The staging cluster runs Kubernetes 1.29"),
                BatchItem(content="the staging cluster runs kubernetes 1.29"),
                BatchItem(content="Lunch is served at noon on Fridays"),
            ]
        ),
        runtime,
        CALLER,
    )
    assert out.collapsed == 1
    assert (
        batch_text_of(out).splitlines()[0]
        == "3 stored (1 of them folded into a later item), 0 already stored, in default/default"
    )
    assert runtime.store.table_version() == before + 1
    loser, survivor, other = (runtime.store.get_memory(r.id) for r in out.results)
    assert (loser.status, loser.replaced_by) == ("superseded", survivor.id)
    assert survivor.status == other.status == "active"
    assert all(m.consolidated_at is not None for m in (loser, survivor, other))


def test_content_of_control_characters_only_is_refused_and_nul_never_reaches_storage(runtime):
    from pydantic import ValidationError

    for content in (
        "\x00",
        "\x00\x01\u200b",
        "\x1b\x07\t\u2060",
        " \x7f\x1f\n ",
        "\u2800",
        " \u3164\uffa0 ",
        "\ufe0f\u034f",
    ):
        with pytest.raises(ValidationError, match="only control or blank characters"):
            RememberInput(content=content)
    stored = remember(RememberInput(content="staging\x00 resets on Sunday"), runtime, CALLER)
    assert runtime.store.get_memory(stored.id).content == "staging resets on Sunday"
    assert stored.note == "1 NUL character removed from the content (none is ever stored)"  # and said so
    assert remember(RememberInput(content="staging resets on Sunday"), runtime, CALLER).note is None


def test_each_item_of_a_batch_says_which_nul_characters_were_removed(runtime):
    from tools.remember_many import RememberManyInput, remember_many

    out = remember_many(
        RememberManyInput(items=[{"content": "cron\x00 runs\x00 hourly"}, {"content": "the queue is SQS"}]),
        runtime,
        CALLER,
    )
    assert [result.note for result in out.results] == [
        "2 NUL characters removed from the content (none is ever stored)",
        None,
    ]


def test_a_duplicate_that_asks_for_another_kind_says_the_memory_keeps_its_own(runtime):
    # A new user's trial: a duplicate batch item's kind "artifact" was dropped, its note saying nothing.
    stored = remember(RememberInput(content="Deploys need two approvals"), runtime, CALLER)
    out = remember_many(
        RememberManyInput(
            items=[{"content": "Deploys need two approvals", "kind": "artifact", "tags": ["ci"]}]
        ),
        runtime,
        CALLER,
    )
    [result] = out.results
    assert (result.status, result.kind) == ("duplicate", "fact")
    assert result.note == (
        "an identical memory is stored; added its tags ['ci'] and kept its kind fact (artifact was asked: a "
        "memory keeps the kind it was first stored with; forget it and remember the text again as artifact "
        "to change it)"
    )
    again = remember(RememberInput(content="Deploys need two approvals", tags=["ci"]), runtime, CALLER)
    assert again.note is None and runtime.store.get_memory(stored.id).kind == "fact"  # the same kind: no word


def test_an_update_refused_because_its_memory_left_meanwhile_leaves_nothing_new_active(runtime, monkeypatch):
    """Another write supersedes the memory between the update's check and its own supersede: the update
    is an error, and the memory written for it is retracted again, with lineage."""
    old = remember(RememberInput(content="The cache TTL is 60 seconds"), runtime, CALLER)
    monkeypatch.setattr(runtime.store, "supersede", lambda *args, **kwargs: [])  # as if it had gone meanwhile
    with pytest.raises(
        ToolFailure, match=f"{old.id} is no longer active.*the update was refused, and the text"
    ):
        remember(RememberInput(content="The cache TTL is 300 seconds", replaces=old.id), runtime, CALLER)
    monkeypatch.undo()
    listed = [m.content for m in runtime.store.list_memories(Scope("default", "default"), limit=10)]
    assert listed == ["The cache TTL is 60 seconds"]
    withdrawn = [
        e
        for e in runtime.store.recent_lineage(Scope("default", "default"), ["retract"], 5)
        if e.resolver == "explicit"
    ]
    assert len(withdrawn) == 1 and "was refused" in withdrawn[0].reason


def test_line_breaks_and_tabs_of_visible_text_are_kept_as_written(runtime):
    for content in ("line one\nline two\tend", "naïve café\r\nsecond line"):
        stored = remember(RememberInput(content=content), runtime, CALLER)
        assert runtime.store.get_memory(stored.id).content == content


def test_the_same_content_twice_in_one_batch_is_stored_once_and_then_a_duplicate(runtime):
    text = "Batch: the cache TTL is 300 seconds"
    out = remember_many(
        RememberManyInput(
            items=[BatchItem(content=text), BatchItem(content="another"), BatchItem(content=text)]
        ),
        runtime,
        CALLER,
    )
    first, _, again = out.results
    assert (first.status, again.status) == ("stored", "duplicate")
    assert again.id == first.id and again.duplicate_of == first.id
    assert (out.stored, out.duplicates) == (2, 1)
    assert remember(RememberInput(content=text), runtime, CALLER).status == "duplicate"  # as a later call


def test_the_same_content_twice_in_one_batch_keeps_what_the_second_item_adds(runtime):
    text = "Batch: the cache TTL is 300 seconds"
    items = [
        BatchItem(content=text, tags=["a"]),
        BatchItem(content=text, tags=["b"], protection_tier="protected"),
    ]
    first, again = remember_many(RememberManyInput(items=items), runtime, CALLER).results
    assert again.note == (
        "the same content as an earlier item of this batch; added its tags ['b'] and raised its protection "
        "tier from standard to protected"
    )
    stored = runtime.store.get_memory(first.id)
    assert (stored.tags, stored.protection_tier) == (("a", "b"), "protected")


def test_the_same_content_from_two_agents_in_one_batch_is_the_first_agents_and_corroborated(runtime):
    text = "Batch: the queue retries three times"
    out = remember_many(
        RememberManyInput(
            items=[BatchItem(content=text, agent_id="alice"), BatchItem(content=text, agent_id="bob")]
        ),
        runtime,
        CALLER,
    )
    first, second = out.results
    assert (first.status, second.status) == ("stored", "duplicate") and first.id == second.id
    assert runtime.store.get_memory(first.id).agent_id == "alice"  # the first item's author wrote it
    assert "recorded bob as corroborating it" in (second.note or "")


def test_an_update_keeps_the_date_of_what_it_corrects_unless_given_one(runtime):
    """A new user's trial: a corrected incident, updated over MCP, was dated today and left its week's
    window (the CLI's edit kept the date; now the tool does, for every caller)."""
    agent = Caller("agent", "ses_1")
    incident = remember(
        RememberInput(content="The Nov 3 outage was caused by DNS", occurred_at="2026-11-03T14:00:00Z"),
        runtime,
        agent,
    )
    fixed = remember(
        RememberInput(content="The Nov 3 outage was caused by an expired certificate", replaces=incident.id),
        runtime,
        agent,
    )
    assert fixed.created_at == "2026-11-03T14:00:00Z"
    dated = remember(
        RememberInput(
            content="The Nov 3 outage was caused by an expired TLS certificate",
            replaces=fixed.id,
            occurred_at="2026-11-04T09:00:00Z",
        ),
        runtime,
        agent,
    )
    assert dated.created_at == "2026-11-04T09:00:00Z"  # the date given
    # A memory dated when it was written is corrected now: consolidation then reads the correction as
    # newer than what was said since (a review).
    port = remember(RememberInput(content="The billing API listens on port 8080"), runtime, agent)
    moved = remember(
        RememberInput(content="The billing API listens on port 9090", replaces=port.id), runtime, agent
    )
    assert runtime.store.get_memory(moved.id).created_at > runtime.store.get_memory(port.id).created_at


def test_an_update_with_the_same_text_changes_only_its_tags_or_tier_in_place(runtime):
    """A new user's trial: a wrong tag could be fixed only by rewording the memory (the same text with
    replaces was refused, and restating adds tags), and `memoria edit` needed new text."""
    agent = Caller("agent", "ses_1")
    text = "The release train leaves every second Tuesday"
    stored = remember(RememberInput(content=text, tags=["billing", "release"]), runtime, agent)
    retagged = remember(RememberInput(content=text, replaces=stored.id, tags=["release"]), runtime, agent)
    assert (retagged.status, retagged.id) == ("updated", stored.id)
    assert (
        retagged.note
        == "updated in place, the text unchanged: its tags are now ['release'] (were ['billing', 'release'])"
    )
    memory = runtime.store.get_memory(stored.id)
    assert (memory.status, memory.tags) == ("active", ("release",))
    tagged = recall(RecallInput(query="release train", tags=["billing"]), runtime, agent)
    assert tagged.memories == []  # the recall filtered by the wrong tag no longer finds it
    with pytest.raises(
        ToolFailure, match="already has this text, these tags, this tier and this expiry: nothing to update"
    ):
        remember(RememberInput(content=text, replaces=stored.id, tags=["release"]), runtime, agent)
    with pytest.raises(ToolFailure, match="the new content is the same"):  # no tags or tier given: as before
        remember(RememberInput(content=text, replaces=stored.id), runtime, agent)


def test_an_update_that_changes_only_a_secret_says_that_redaction_made_the_texts_the_same(runtime):
    """A trial: "the wifi password is tr0ub4dor" after "... hunter2" was told the text was the same."""
    stored = remember(RememberInput(content="The wifi password is hunter2"), runtime, CALLER)
    with pytest.raises(ToolFailure) as refused:
        remember(RememberInput(content="The wifi password is tr0ub4dor", replaces=stored.id), runtime, CALLER)
    assert str(refused.value).startswith(
        f"with its secrets redacted (1 password), the new content is the same as {stored.id}'s: secrets are "
        "never stored, so only the text around them can be updated"
    )


def test_a_same_text_update_redacts_its_tags_and_only_the_author_changes_the_tier(runtime):
    """A review: the in-place update stored a token given as a tag verbatim, and let any agent make
    another's memory immutable (or expire it), with no lineage."""
    alice, bob = Caller("alice", "ses_a"), Caller("bob", "ses_b")
    text = "Deploy keys live in the vault under ci/deploy"
    stored = remember(RememberInput(content=text, tags=["ci"]), runtime, alice)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    retagged = remember(RememberInput(content=text, replaces=stored.id, tags=["ci", token]), runtime, bob)
    assert token not in str(runtime.store.get_memory(stored.id).tags) and token not in (retagged.note or "")
    assert retagged.redacted is not None
    for tier in ("immutable", "ephemeral"):
        with pytest.raises(
            ToolFailure, match="was written by 'alice': only its author changes its protection tier"
        ):
            remember(RememberInput(content=text, replaces=stored.id, protection_tier=tier), runtime, bob)
    made = remember(
        RememberInput(content=text, replaces=stored.id, protection_tier="immutable"), runtime, alice
    )
    assert made.protection_tier == "immutable"
    with pytest.raises(ToolFailure, match="is immutable"):
        remember(RememberInput(content=text, replaces=stored.id, protection_tier="standard"), runtime, alice)
    events = [
        e for e in runtime.store.lineage(Scope("default", "default"), [stored.id]) if e.action == "amend"
    ]
    assert [(e.agent_id, e.reason.split(" (")[0]) for e in events] == [
        ("bob", "its tags are now ['ci', '[REDACTED:github-token]']"),
        ("alice", "its protection tier is now immutable"),
    ]
    other = remember(RememberInput(content="Deploy keys rotate monthly", tags=["ci"]), runtime, alice)
    with pytest.raises(
        ToolFailure,
        match="changes only tags, protection_tier and expires_at; its kind stays as it is: leave it out",
    ):
        remember(
            RememberInput(
                content="Deploy keys rotate monthly", replaces=other.id, tags=["ops"], kind="episode"
            ),
            runtime,
            alice,
        )


def test_an_ephemeral_memory_stated_again_as_lasting_by_its_author_no_longer_expires(runtime):
    """A new user's trial: restated with protection_tier="standard", it stayed ephemeral, and expired."""
    agent, other = Caller("agent", "ses_1"), Caller("other", "ses_2")
    text = "The staging cluster runs on the spot node pool"
    first = remember(RememberInput(content=text, protection_tier="ephemeral", tags=["infra"]), runtime, agent)
    assert first.expires_at is not None
    by_other = remember(RememberInput(content=text, protection_tier="standard"), runtime, other)
    assert by_other.status == "duplicate" and by_other.expires_at is not None
    assert "kept its ephemeral tier: only its author (agent) makes it lasting" in by_other.note
    lasting = remember(RememberInput(content=text, protection_tier="standard", tags=["k8s"]), runtime, agent)
    assert (lasting.status, lasting.protection_tier, lasting.expires_at) == ("updated", "standard", None)
    assert lasting.note.endswith("its protection tier is now standard (was ephemeral); it no longer expires")
    assert runtime.store.get_memory(first.id).tags == ("infra", "k8s")  # restating added its tag


def test_a_batch_makes_its_authors_ephemeral_memory_lasting_as_remember_does_and_not_a_superseded_one(
    runtime,
):
    """A review: remember_many left it ephemeral, saying nothing; and a superseded ephemeral memory stated
    again as lasting failed instead of naming the memory that stands in its place."""
    agent = Caller("agent", "ses_1")
    text = "The staging cluster runs on spot nodes this week"
    first = remember(RememberInput(content=text, protection_tier="ephemeral"), runtime, agent)
    batch = remember_many(
        RememberManyInput(items=[BatchItem(content=text, protection_tier="standard")]), runtime, agent
    )
    [out] = batch.results
    assert (out.status, out.protection_tier, out.expires_at) == ("updated", "standard", None)
    gone = remember(
        RememberInput(content="The CI queue is paused", protection_tier="ephemeral"), runtime, agent
    )
    remember(RememberInput(content="The CI queue is paused until noon", replaces=gone.id), runtime, agent)
    again = remember(
        RememberInput(content="The CI queue is paused", protection_tier="standard"), runtime, agent
    )
    assert again.status == "duplicate" and runtime.store.get_memory(first.id).expires_at is None


def test_an_update_of_a_retracted_memory_is_refused_with_what_to_do_instead(runtime):
    from tools.forget import ForgetInput, forget

    old = remember(RememberInput(content="The cache is Redis"), runtime, CALLER)
    forget(ForgetInput(memory_id=old.id), runtime, CALLER)
    with pytest.raises(ToolFailure) as refused:
        remember(RememberInput(content="The cache is Valkey", replaces=old.id), runtime, CALLER)
    assert str(refused.value) == (
        f"{old.id} is retracted, not active; nothing was stored. Remember the new text without replaces "
        "(its own text remembered again restores it)"
    )
    assert runtime.store.count_memories() == 1


def test_an_update_of_a_chain_names_where_it_ends_or_that_nothing_stands_there(runtime):
    # A new user's trial: told to update the retracted end of a chain, which was refused in turn.
    from tools.forget import ForgetInput, forget

    first = remember(RememberInput(content="The rate limit is 500 rpm"), runtime, CALLER).id
    second = remember(RememberInput(content="The rate limit is 600 rpm", replaces=first), runtime, CALLER).id
    third = remember(RememberInput(content="The rate limit is 700 rpm", replaces=second), runtime, CALLER).id
    with pytest.raises(ToolFailure) as through:
        remember(RememberInput(content="The rate limit is 800 rpm", replaces=first), runtime, CALLER)
    assert str(through.value) == (
        f"{first} is superseded, not active; nothing was stored. Update {third}, which stands in its place "
        f"now (through {second})"
    )
    forget(ForgetInput(memory_id=third), runtime, CALLER)
    with pytest.raises(ToolFailure) as ended:
        remember(RememberInput(content="The rate limit is 800 rpm", replaces=second), runtime, CALLER)
    assert str(ended.value) == (
        f"{second} is superseded, not active; nothing was stored. Nothing stands in its place: {third}, the "
        "last memory to replace it, is retracted; remember the new text without replaces"
    )
    assert runtime.store.count_memories() == 3


def test_an_expired_memory_reads_expired_and_is_not_updated(settings):
    # Until the next maintenance round retracts it, it read "active" in its views and took an update.
    import time

    from tools.lineage import LineageInput, lineage
    from tools.show_memory import ShowMemoryInput, show_memory

    runtime = make_runtime(settings.replace(ephemeral_ttl_seconds=1.0))
    try:
        down = remember(
            RememberInput(content="The CI runner pool is down", protection_tier="ephemeral"), runtime, CALLER
        ).id
        time.sleep(1.2)
        assert show_memory(ShowMemoryInput(memory_id=down), runtime, CALLER).status == "expired"
        history = lineage(LineageInput(memory_id=down), runtime, CALLER)
        assert history.memory.status == "expired"
        assert history.note is not None and history.note.startswith("it expired at ")
        assert history.note.endswith(
            "(its ephemeral tier) and is no longer recalled: remember its text again to restore it"
        )
        with pytest.raises(ToolFailure, match=r"expired at .* \(its ephemeral tier\) .* nothing was stored"):
            remember(RememberInput(content="The CI runner pool is back", replaces=down), runtime, CALLER)
        assert runtime.store.count_memories() == 1
    finally:
        runtime.close()


def test_a_correction_of_an_ephemeral_memory_says_it_expires_too(runtime):
    down = remember(
        RememberInput(content="The CI runner pool is down", protection_tier="ephemeral"), runtime, CALLER
    ).id
    back = remember(RememberInput(content="The CI runner pool is back", replaces=down), runtime, CALLER)
    assert back.protection_tier == "ephemeral" and back.expires_at is not None
    assert back.note is not None and back.note.endswith(
        f"kept the ephemeral tier of {down}: it expires at {back.expires_at} unless remembered with another "
        "protection_tier"
    )
    lasting = remember(
        RememberInput(content="The CI runner pool is fixed", replaces=back.id, protection_tier="standard"),
        runtime,
        CALLER,
    )
    assert lasting.expires_at is None and "ephemeral" not in (lasting.note or "")


def test_a_correction_already_stored_as_a_lasting_memory_says_nothing_of_expiry(runtime):
    # A review: "duplicate ... it expires at None".
    lasting = remember(RememberInput(content="The runner pool is back to normal"), runtime, CALLER).id
    down = remember(
        RememberInput(content="The runner pool is down", protection_tier="ephemeral"), runtime, CALLER
    ).id
    again = remember(
        RememberInput(content="The runner pool is back to normal", replaces=down), runtime, CALLER
    )
    assert again.id == lasting and again.expires_at is None
    assert "ephemeral" not in (again.note or "")


def test_another_agents_update_of_a_protected_memory_stands_beside_it_disputing_it(runtime):
    """A trial: a third agent's replaces= made a protected fact two agents stated vanish, and took its tier."""
    alice, mallory = Caller("alice", "ses_a"), Caller("mallory", "ses_m")
    fact = "The Redis cache runs on redis.internal port 6379"
    kept = remember(RememberInput(content=fact, tags=["cache"], protection_tier="protected"), runtime, alice)
    other = remember(
        RememberInput(content="The Redis cache runs on redis.evil.example port 6380", replaces=kept.id),
        runtime,
        mallory,
    )
    assert other.status == "stored" and other.protection_tier == "standard"  # not the protected tier
    assert f"{kept.id} is protected and was remembered by 'alice'" in other.note
    assert runtime.store.get_memory(kept.id).status == "active"
    found = recall(RecallInput(query="redis cache host and port"), runtime, alice).memories
    assert [m.id for m in found][:2] == [other.id, kept.id]
    assert found[1].contradicted_by == [other.id]  # the pair is open: the protected fact marked disputed
    [pair] = runtime.store.contradictions(Scope("default", "default"))
    assert (pair.kind, pair.detail) == ("update", "mallory asked to replace alice's protected memory")
    # Its author replaces it.
    fixed = remember(
        RememberInput(content="The Redis cache runs on redis.internal port 6390", replaces=kept.id),
        runtime,
        alice,
    )
    assert runtime.store.get_memory(kept.id).replaced_by == fixed.id
    assert fixed.protection_tier == "protected"


def test_another_agents_update_of_a_standard_memory_replaces_it_with_no_higher_tier(runtime):
    alice, bob = Caller("alice", "ses_a"), Caller("bob", "ses_b")
    old = remember(RememberInput(content="Deploys happen on Fridays"), runtime, alice)
    new = remember(RememberInput(content="Deploys happen on Mondays", replaces=old.id), runtime, bob)
    assert runtime.store.get_memory(old.id).replaced_by == new.id
    assert new.protection_tier == "standard"


def test_an_agents_update_of_a_protected_memory_says_what_it_did_with_the_text(runtime):
    """A review: the note said "stored beside it, disputing it" when the text was superseded and nothing was
    stored, and named the agent who had stored the text before as the one asking to replace."""
    alice, bob, mallory = Caller("alice", "ses_a"), Caller("bob", "ses_b"), Caller("mallory", "ses_m")
    earlier = remember(RememberInput(content="The API gateway listens on port 8080"), runtime, alice)
    kept = remember(
        RememberInput(
            content="The API gateway listens on port 9090", replaces=earlier.id, protection_tier="protected"
        ),
        runtime,
        alice,
    )
    with pytest.raises(
        ToolFailure, match=f"this text is {earlier.id}, which is superseded: nothing was changed"
    ):
        remember(
            RememberInput(content="The API gateway listens on port 8080", replaces=kept.id), runtime, mallory
        )
    other = remember(RememberInput(content="The API gateway listens on port 7070"), runtime, bob)
    said = remember(
        RememberInput(content="The API gateway listens on port 7070", replaces=kept.id), runtime, mallory
    )
    assert f"was stored already (by 'bob') as {other.id} beside it, disputing it" in said.note
    pairs = runtime.store.contradictions(Scope("default", "default"))
    assert [(p.older_id, p.newer_id) for p in pairs] == [(kept.id, other.id)]  # bob's value disputed it first


def test_an_ephemeral_memory_restated_as_lasting_twice_in_one_batch_reads_lasting_for_both(runtime):
    """A review: the second item's note carried the amend's "nothing to update" refusal, and it still
    read ephemeral with an expiry."""
    text = "The staging build is red right now"
    remember(RememberInput(content=text, protection_tier="ephemeral"), runtime, CALLER)
    items = [
        BatchItem(content=text, protection_tier="standard"),
        BatchItem(content=text, protection_tier="standard"),
    ]
    first, second = remember_many(RememberManyInput(items=items), runtime, CALLER).results
    assert (first.protection_tier, first.expires_at) == ("standard", None)
    assert (second.protection_tier, second.expires_at) == ("standard", None)
    assert "nothing to update" not in (second.note or "")


def _at(runtime, moment):
    runtime.clock = lambda: moment[0]


def test_a_memory_true_until_a_day_is_recalled_through_that_day_and_not_after(runtime):
    """A trial: "Until Friday 2026-12-11 the staging DB is frozen" could only be made ephemeral, which kept it
    for a week, and recall went on telling agents not to migrate over the weekend."""
    now = [datetime(2026, 12, 6, 20, 0, tzinfo=UTC)]
    _at(runtime, now)
    text = "Until Friday the staging DB is frozen; do not run migrations there."
    out = remember(RememberInput(content=text, expires_at="2026-12-11"), runtime, CALLER)
    assert out.expires_at == "2026-12-12T00:00:00Z"  # a date alone: through its end (UTC)
    assert runtime.store.get_memory(out.id).protection_tier == "standard"
    shown = recall(RecallInput(query="can I run migrations on staging?"), runtime, CALLER)
    assert [m.id for m in shown.memories] == [out.id] and "holds through 2026-12-11" in shown.context


def test_a_memory_past_the_time_it_was_true_until_is_no_longer_recalled_or_listed(runtime):
    # (on the store's own clock: the scope copies and searches read the time themselves)
    until = datetime.now(UTC) + timedelta(seconds=1)
    text = "The deploy queue is paused while the registry is migrated."
    out = remember(RememberInput(content=text, expires_at=until), runtime, CALLER)
    assert [
        m.id for m in recall(RecallInput(query="is the deploy queue paused?"), runtime, CALLER).memories
    ] == [out.id]
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.05)
    assert recall(RecallInput(query="is the deploy queue paused?"), runtime, CALLER).memories == []
    assert runtime.store.list_memories(Scope("default", "default"), limit=10) == []


def test_an_expiry_that_is_past_or_given_to_an_immutable_memory_is_refused(runtime):
    now = [datetime(2026, 12, 6, 20, 0, tzinfo=UTC)]
    _at(runtime, now)
    with pytest.raises(ToolFailure, match=r"`expires_at` 2026-12-06T00:00:00Z is not after now"):
        remember(RememberInput(content="The demo is today", expires_at="2026-12-05"), runtime, CALLER)
    with pytest.raises(ToolFailure, match="an immutable memory never changes, and never expires"):
        remember(
            RememberInput(content="Prod is eu-west-1", protection_tier="immutable", expires_at="2026-12-31"),
            runtime,
            CALLER,
        )
    with pytest.raises(ValueError, match="names no real date"):
        RememberInput(content="x", expires_at="2026-02-30")
    assert runtime.store.list_memories(Scope("default", "default"), limit=10) == []


def test_an_update_keeps_the_expiry_unless_given_one_and_the_same_text_changes_it_in_place(runtime):
    now = [datetime(2026, 12, 6, 20, 0, tzinfo=UTC)]
    _at(runtime, now)
    first = remember(
        RememberInput(content="The staging DB is frozen", expires_at="2026-12-11"), runtime, CALLER
    )
    # A correction of it is true until then too.
    fixed = remember(
        RememberInput(content="The staging and QA DBs are frozen", replaces=first.id), runtime, CALLER
    )
    assert fixed.expires_at == "2026-12-12T00:00:00Z"
    # The same text with replaces and expires_at: the expiry changes in place, and says what it was.
    later = remember(
        RememberInput(
            content="The staging and QA DBs are frozen", replaces=fixed.id, expires_at="2026-12-14"
        ),
        runtime,
        CALLER,
    )
    assert (later.id, later.status, later.expires_at) == (fixed.id, "updated", "2026-12-15T00:00:00Z")
    assert "it expires at 2026-12-15T00:00:00Z (it was to expire at 2026-12-12T00:00:00Z)" in later.note
    # A change of its tags keeps it.
    tagged = remember(
        RememberInput(content="The staging and QA DBs are frozen", replaces=fixed.id, tags=["ops"]),
        runtime,
        CALLER,
    )
    assert tagged.expires_at == "2026-12-15T00:00:00Z"
    # Stated again, the stored memory keeps its expiry, and the note says how to change it.
    again = remember(
        RememberInput(content="The staging and QA DBs are frozen", expires_at="2026-12-20"), runtime, CALLER
    )
    assert again.status == "duplicate" and again.expires_at == "2026-12-15T00:00:00Z"
    assert f"kept its expiry (2026-12-15T00:00:00Z): pass replaces={fixed.id} with expires_at" in again.note


def test_each_item_of_a_batch_may_say_until_when_it_holds(runtime):
    now = [datetime(2026, 12, 6, 20, 0, tzinfo=UTC)]
    _at(runtime, now)
    out = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="The runner pool is degraded", expires_at="2026-12-07T06:00:00Z"),
                BatchItem(content="The runner pool has 12 machines"),
            ]
        ),
        runtime,
        CALLER,
    )
    assert [result.expires_at for result in out.results] == ["2026-12-07T06:00:00Z", None]


def test_only_its_author_changes_when_a_memory_expires(runtime):
    # A review: another agent's update with the same text and an expiry made a protected memory expire.
    text = "Prod DB is in eu-west-1"
    stored = remember(RememberInput(content=text, protection_tier="protected"), runtime, CALLER)
    with pytest.raises(ToolFailure, match="only its author changes when it expires; nothing was changed"):
        remember(
            RememberInput(content=text, replaces=stored.id, expires_at=datetime.now(UTC) + timedelta(days=1)),
            runtime,
            Caller("cursor", "ses_9"),
        )
    assert runtime.store.get_memory(stored.id).expires_at is None


def test_an_expiry_given_again_or_taken_away(runtime):
    now = [datetime(2026, 12, 6, 20, 0, tzinfo=UTC)]
    _at(runtime, now)
    text = "The staging DB is frozen"
    first = remember(RememberInput(content=text, expires_at="2026-12-11"), runtime, CALLER)
    # Stated again with the expiry it has: nothing to say about it.
    again = remember(RememberInput(content=text, expires_at="2026-12-11"), runtime, CALLER)
    assert again.status == "duplicate" and again.note is None
    # Taken away (null, with replaces and the same text): it no longer expires, and says so.
    cleared = remember(RememberInput(content=text, replaces=first.id, expires_at=None), runtime, CALLER)
    assert cleared.expires_at is None
    assert "it no longer expires (it was to expire at 2026-12-12T00:00:00Z)" in cleared.note
    # An ephemeral memory's tier is its expiry: taken away alone, it says what to pass (a review read
    # "nothing to update").
    brief = remember(
        RememberInput(content="The demo freeze holds", protection_tier="ephemeral"), runtime, CALLER
    )
    with pytest.raises(
        ToolFailure, match=f"{brief.id} is ephemeral: its tier is when it expires.*'standard' too"
    ):
        remember(
            RememberInput(content="The demo freeze holds", replaces=brief.id, expires_at=None),
            runtime,
            CALLER,
        )
    kept = remember(
        RememberInput(
            content="The demo freeze holds", replaces=brief.id, expires_at=None, protection_tier="standard"
        ),
        runtime,
        CALLER,
    )
    assert kept.expires_at is None and kept.protection_tier == "standard"


def test_the_maintenance_round_retracts_a_memory_past_the_time_it_was_given(runtime):
    # A review: the round looked at the ephemeral tier only, and such a memory stayed active for good.
    from server.upkeep import expire_ephemeral

    until = datetime.now(UTC) + timedelta(seconds=1)
    out = remember(RememberInput(content="The deploy queue is paused", expires_at=until), runtime, CALLER)
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 0.05)
    assert expire_ephemeral(runtime) == 1
    assert runtime.store.get_memory(out.id).status == "retracted"
    events = runtime.store.lineage(Scope("default", "default"), [out.id])
    assert [event.action for event in events][-1] == "expire"


def test_what_an_agent_reads_of_a_remember_leaves_out_the_similar_memories_kept_as_distinct(runtime):
    """A trial: "kept beside: <ids>" and "decided by rules:distinct" were most of a batch's text, and nothing
    to act on; the structured content keeps them."""
    remember(RememberInput(content="The billing service deploys every Tuesday"), runtime, CALLER)
    text = "The billing service deploys every Tuesday at noon UTC via Argo"
    near = remember(RememberInput(content=text), runtime, CALLER)
    assert near.consolidation is not None and near.consolidation.kept
    assert text_of(near) == f"stored {near.id} (fact, standard) in default/default"


def test_a_text_stated_again_that_a_newer_memory_disputes_says_so_and_how_to_make_it_current(runtime):
    """A trial: "... port 8080" stated again after "... 9090" answered "already stored", nothing more, and
    recall went on showing 9090 first."""
    old = remember(
        RememberInput(content="The billing API listens on port 8080", occurred_at="2026-12-01T09:00:00Z"),
        runtime,
        CALLER,
    )
    newer = remember(
        RememberInput(content="The billing API listens on port 9090", occurred_at="2026-12-02T09:00:00Z"),
        runtime,
        CALLER,
    )
    again = remember(RememberInput(content="The billing API listens on port 8080"), runtime, CALLER)
    assert (again.id, again.status) == (old.id, "duplicate")
    assert again.note == (
        f"a newer memory disputes it ({newer.id}): recall shows it below that one, marked DISPUTED. If this text "
        f"is what holds now, remember it with replaces={newer.id} to make it current"
    )
    current = remember(
        RememberInput(content="The billing API listens on port 8080", replaces=newer.id), runtime, CALLER
    )
    assert current.id == old.id and runtime.store.get_memory(newer.id).replaced_by == old.id
    shown = recall(RecallInput(query="billing API port"), runtime, CALLER)
    assert [m.id for m in shown.memories] == [old.id]
    assert (
        remember(RememberInput(content="The billing API listens on port 8080"), runtime, CALLER).note is None
    )


def test_a_batch_item_a_later_step_of_the_batch_superseded_says_so_and_not_what_it_said_before(runtime):
    """A trial: an item revised by a later one read "kept beside" it, an older backup time given last read
    "contradicts" a pair drift no longer listed, and an item repeating an earlier one folded into a third
    read as plainly stored."""
    out = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="The API gateway listens on port 8080", occurred_at="2026-12-01T09:00:00Z"),
                BatchItem(
                    content="The API gateway now listens on port 9090", occurred_at="2026-12-03T09:00:00Z"
                ),
                BatchItem(
                    content="The nightly backup now runs at 04:00 UTC", occurred_at="2026-12-04T09:00:00Z"
                ),
                BatchItem(content="The nightly backup runs at 02:00 UTC", occurred_at="2026-12-01T09:00:00Z"),
            ]
        ),
        runtime,
        CALLER,
    )
    port, new_port, backup, old_backup = out.results
    for item, survivor in ((port, new_port), (old_backup, backup)):
        assert runtime.store.get_memory(item.id).replaced_by == survivor.id
        assert item.note == f"superseded by {survivor.id} when this batch was examined"
        assert item.consolidation is not None
        assert (item.consolidation.kept, item.consolidation.contradicts) == ([], [])

    repeated = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="The CI pipeline runs on GitHub Actions"),
                BatchItem(content="The CI pipeline runs on GitHub Actions"),
                BatchItem(content="The CI pipeline runs on GitHub Actions, with the ci tag", tags=["ci"]),
            ]
        ),
        runtime,
        CALLER,
    )
    first, again, last = repeated.results
    assert first.consolidation is not None and first.consolidation.absorbed_into == last.id
    assert (again.status, again.id) == ("duplicate", first.id)
    assert again.note == f"the same content as an earlier item of this batch, superseded by {last.id}"
    assert (repeated.stored, repeated.collapsed, repeated.duplicates) == (2, 1, 1)


def test_the_same_text_again_from_its_author_is_a_duplicate_even_with_consolidation_off(tmp_path):
    """A review: a restatement whose memory was never stamped as examined (consolidation off) read "stored"."""
    from tests.helpers import make_runtime, settings_for

    runtime = make_runtime(settings_for(tmp_path / "db", consolidation_enabled=False))
    try:
        first = remember(RememberInput(content="The billing API listens on port 8080"), runtime, CALLER)
        again = remember(RememberInput(content="The billing API listens on port 8080"), runtime, CALLER)
    finally:
        runtime.close()
    assert (first.status, again.status, again.id) == ("stored", "duplicate", first.id)


def test_a_disputed_text_stated_again_is_told_to_ask_the_author_of_a_protected_newer_memory(runtime):
    """A review: told to pass replaces= another agent's protected memory, which does not replace it."""
    old = remember(
        RememberInput(content="The billing API listens on port 8080", occurred_at="2026-12-01T09:00:00Z"),
        runtime,
        CALLER,
    )
    remember(
        RememberInput(
            content="The billing API listens on port 9090",
            occurred_at="2026-12-02T09:00:00Z",
            protection_tier="protected",
        ),
        runtime,
        Caller(agent_id="cursor", session_id="ses_2"),
    )
    again = remember(RememberInput(content="The billing API listens on port 8080"), runtime, CALLER)
    assert again.id == old.id and again.note is not None
    assert again.note.endswith("ask the author of the newer one to correct it, or forget it")
    assert "replaces=" not in again.note


def test_a_batch_item_restored_then_superseded_by_a_later_item_says_both(runtime):
    """A review: an item that restored a retracted memory read only "restored", superseded meanwhile."""
    from tools.forget import ForgetInput, forget

    old = remember(RememberInput(content="The API gateway listens on port 8080"), runtime, CALLER)
    forget(ForgetInput(memory_id=old.id), runtime, CALLER)
    out = remember_many(
        RememberManyInput(
            items=[
                BatchItem(content="The API gateway listens on port 8080"),
                BatchItem(content="The API gateway now listens on port 9090"),
            ]
        ),
        runtime,
        CALLER,
    )
    restored, newer = out.results
    assert runtime.store.get_memory(old.id).replaced_by == newer.id
    assert restored.note is not None and restored.note.startswith("restored: ")
    assert restored.note.endswith(f"superseded by {newer.id} when this batch was examined")
