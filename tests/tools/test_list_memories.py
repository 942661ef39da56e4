"""Listing a scope's memories: newest first, page by page with a cursor, filtered by agent, tag, kind and
a time window; bad windows and cursors are refused with what to do."""

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from storage.records import Scope
from tools.common import Caller, ToolFailure
from tools.forget import ForgetInput, forget
from tools.list_memories import ListMemoriesInput, list_memories
from tools.remember import RememberInput, remember

ALICE, BOB = Caller("alice", "ses_a"), Caller("bob", "ses_b")


def write(runtime, text, caller=ALICE, day=1, **fields):
    when = datetime(2026, 10, day, 12, 0, tzinfo=UTC)
    return remember(RememberInput(content=text, occurred_at=when, **fields), runtime, caller).id


def listed(runtime, **arguments):
    return [m.id for m in list_memories(ListMemoriesInput(**arguments), runtime, ALICE).memories]


@pytest.fixture
def october(runtime):
    return {
        "deploy": write(runtime, "Deploys go out on Tuesdays", day=1, tags=["ops"]),
        "db": write(runtime, "The billing database is Postgres 16", BOB, day=10),
        "runbook": write(runtime, "restart: systemctl restart api", day=20, kind="artifact", tags=["ops"]),
        "gone": write(runtime, "The old VPN host is vpn1", day=25),
    }


def test_memories_are_listed_newest_first_and_forgotten_ones_are_not(runtime, october):
    forget(ForgetInput(memory_id=october["gone"]), runtime, ALICE)
    assert listed(runtime) == [october["runbook"], october["db"], october["deploy"]]


def test_a_status_lists_the_history_a_window_held(runtime, october):
    # A trial: the week's memory, corrected since, could be seen only by the lineage of an id one knew.
    fixed = remember(
        RememberInput(content="The billing database is Postgres 17", replaces=october["db"]), runtime, BOB
    ).id
    forget(ForgetInput(memory_id=october["gone"]), runtime, ALICE)
    assert listed(runtime, since="2026-10-10", until="2026-10-10") == [fixed]  # the update keeps the date
    assert listed(runtime, status="superseded") == [october["db"]]
    assert listed(runtime, status="retracted") == [october["gone"]]
    history = list_memories(
        ListMemoriesInput(status="any", since="2026-10-10", until="2026-10-10"), runtime, ALICE
    )
    assert {(m.id, m.status, m.replaced_by) for m in history.memories} == {
        (fixed, "active", None),
        (october["db"], "superseded", fixed),
    }


def test_a_cursor_continues_where_the_page_ended_and_the_last_page_has_none(runtime, october):
    first = list_memories(ListMemoriesInput(limit=3), runtime, ALICE)
    assert [m.id for m in first.memories] == [october["gone"], october["runbook"], october["db"]]
    rest = list_memories(ListMemoriesInput(limit=3, cursor=first.next_cursor), runtime, ALICE)
    assert [m.id for m in rest.memories] == [october["deploy"]] and rest.next_cursor is None


def test_filters_by_agent_tag_and_kind(runtime, october):
    assert listed(runtime, agent_id="bob") == [october["db"]]
    assert listed(runtime, tag="ops") == [october["runbook"], october["deploy"]]
    assert listed(runtime, kind="artifact") == [october["runbook"]]


def test_a_window_of_days_or_a_month_includes_its_whole_last_day(runtime, october):
    assert listed(runtime, since="2026-10-10", until="2026-10-20") == [october["runbook"], october["db"]]
    assert listed(runtime, since="2026-10-02T00:00:00Z") == [
        october["gone"],
        october["runbook"],
        october["db"],
    ]
    assert listed(runtime, until="2026-09") == []
    out = list_memories(ListMemoriesInput(since="2026-10", until="2026-10"), runtime, ALICE)
    assert (out.since, out.until) == ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z")
    assert len(out.memories) == 4


def test_another_projects_memories_are_never_listed(runtime, october):
    elsewhere = remember(RememberInput(content="Globex notes", project_id="globex"), runtime, ALICE).id
    assert elsewhere not in listed(runtime)
    assert listed(runtime, project_id="globex") == [elsewhere]


def test_bad_windows_and_cursors_are_refused_with_what_to_do(runtime):
    with pytest.raises(ValidationError, match=r"not a time this server reads.*2026-11-24.*last week"):
        ListMemoriesInput(since="last tuesday-ish")
    with pytest.raises(ToolFailure, match="is not before until"):
        list_memories(ListMemoriesInput(since="2026-11-02", until="2026-11-01"), runtime, ALICE)
    with pytest.raises(ToolFailure, match="not one this server gave"):
        list_memories(ListMemoriesInput(cursor="bm9wZQ"), runtime, ALICE)


def test_a_window_of_relative_words_is_read_on_the_servers_clock(runtime):
    runtime.clock = lambda: datetime(2026, 10, 6, 12, tzinfo=UTC)  # a Tuesday; that week began on the 5th
    ids = [write(runtime, f"note {day}", day=day) for day in (1, 2, 3, 4)]
    assert listed(runtime, since="last week", until="last week") == ids[:4][::-1]  # Sep 28 - Oct 5
    assert listed(runtime, since="3 days ago", until="yesterday") == [ids[3], ids[2]]  # Oct 3 - 5
    out = list_memories(ListMemoriesInput(since="yesterday"), runtime, ALICE)
    assert (out.since, out.until) == ("2026-10-05T00:00:00Z", None)


def test_a_scope_too_big_for_a_copy_is_listed_the_same_from_lancedb(tmp_path):
    from tests.helpers import make_runtime, settings_for

    runtime = make_runtime(settings_for(tmp_path / "db", cache_scope_rows=0))  # no scope copies
    try:
        ids = [write(runtime, f"note {day}", day=day, tags=["t"] if day % 2 else []) for day in (1, 2, 3, 4)]
        first = list_memories(ListMemoriesInput(limit=3), runtime, ALICE)
        rest = list_memories(ListMemoriesInput(limit=3, cursor=first.next_cursor), runtime, ALICE)
        assert [m.id for m in first.memories] + [m.id for m in rest.memories] == ids[::-1]
        assert listed(runtime, tag="t", since="2026-10-02") == [ids[2]]
        in_episode = write(runtime, "note in an episode", day=5, episode_id="ep_1")
        assert listed(runtime, episode_id="ep_1") == [in_episode]
    finally:
        runtime.close()


def test_an_episode_is_listed_alone(runtime):
    first = write(runtime, "started the migration", day=1, episode_id="ep_mig")
    write(runtime, "unrelated note", day=2)
    second = write(runtime, "finished the migration", day=3, episode_id="ep_mig")
    assert listed(runtime, episode_id="ep_mig") == [second, first]


def test_a_listed_ephemeral_memory_says_when_it_expires(runtime):
    lasting = write(runtime, "Deploys go out on Tuesdays")
    brief = remember(
        RememberInput(content="The canary is at 10% today", protection_tier="ephemeral"), runtime, ALICE
    )
    listed_now = {m.id: m.expires_at for m in list_memories(ListMemoriesInput(), runtime, ALICE).memories}
    assert listed_now == {lasting: None, brief.id: brief.expires_at}


def test_a_memory_past_its_expiry_is_left_out_but_listed_as_expired_in_a_windows_history(runtime):
    """A trial: in a store no server's maintenance round retracted it in, a memory past its expiry was
    listed by no status, though `show` and `stats` said it had expired."""
    import time

    lasting = write(runtime, "Deploys go out on Tuesdays")
    ends = datetime.now(UTC) + timedelta(seconds=1)
    brief = remember(
        RememberInput(content="The wifi password changes tonight", expires_at=ends), runtime, ALICE
    )
    time.sleep(1.2)
    assert listed(runtime) == [lasting]
    history = {
        m.id: m.status for m in list_memories(ListMemoriesInput(status="any"), runtime, ALICE).memories
    }
    assert history == {lasting: "active", brief.id: "expired"}


def test_a_batch_sharing_one_time_is_listed_in_the_batchs_order(runtime):
    """A trial: 25 turns of one remember_many with one occurred_at came back as 5, 8, 6, 19, 9, ...: each
    now takes a microsecond after the one before it of that time, so newest first is the batch reversed."""
    from tools.remember_many import BatchItem, RememberManyInput, remember_many

    when = datetime(2026, 10, 3, 9, 0, tzinfo=UTC)
    items = [BatchItem(content=f"Step {n} of the migration runbook", occurred_at=when) for n in range(12)]
    ids = [r.id for r in remember_many(RememberManyInput(items=items), runtime, ALICE).results]
    assert listed(runtime) == ids[::-1]
    stored = runtime.store.get_memories(ids, Scope("default", "default"))
    assert [stored[i].created_at for i in ids[:3]] == [when + timedelta(microseconds=n) for n in range(3)]
