"""drift's text: what an agent reads of where beliefs conflict and changed."""

from tools.common import Caller
from tools.drift import DriftInput, drift, text_of
from tools.remember import RememberInput, remember

CALLER = Caller("claude-code", "ses_1")


def test_the_text_shows_each_dispute_as_its_two_statements_newest_first_with_how_to_settle_it(runtime):
    """A trial read raw JSON, and a denial as "'(no negation)' then 'not'"."""
    older = remember(RememberInput(content="The API gateway listens on port 9090"), runtime, CALLER).id
    newer = remember(
        RememberInput(content="The API gateway does not listen on port 9090"), runtime, Caller("cursor", "s2")
    ).id
    text = text_of(drift(DriftInput(), runtime, CALLER))
    lines = text.splitlines()
    assert lines[0] == (  # how to settle them said once, not for each pair (a trial: four values, six pairs)
        "1 open contradiction. Settle each: forget the one that is wrong (forget memory_id=...), or remember "
        "what is true with replaces= the wrong one's id."
    )
    assert lines[1].startswith(f"[open] {newer} (cursor, ") and lines[1].endswith(
        "'The API gateway does not listen on port 9090'"
    )
    assert lines[2].startswith(f"    against the older {older} (claude-code, ")
    assert lines[3] == "    (opposition: the newer denies it ('not') (subject overlap 1.00))"
    assert len(lines) == 4


def test_the_text_lists_the_recent_changes_one_line_each(runtime):
    old = remember(RememberInput(content="Deploys go out on Tuesdays"), runtime, CALLER).id
    new = remember(RememberInput(content="Deploys go out on Wednesdays", replaces=old), runtime, CALLER).id
    text = text_of(drift(DriftInput(), runtime, CALLER))
    assert text.splitlines()[0] == "0 open contradictions."
    assert "Recent changes, newest first:" in text
    change = next(line for line in text.splitlines() if line.startswith("- "))
    assert f"supersede: {old} (claude-code, " in change and f"by {new} (claude-code, " in change
    assert change.endswith("(explicit; explicit update)")


def test_drift_of_a_project_that_holds_nothing_says_which_projects_do(runtime):
    """A trial: a mistyped project_id read only "0 open contradictions"."""
    remember(RememberInput(content="Deploys go out on Tuesdays", project_id="web"), runtime, CALLER)
    out = drift(DriftInput(project_id="wbe"), runtime, CALLER)
    assert out.note is not None and "'wbe'" in out.note and "web" in out.note
    assert text_of(out).splitlines()[1] == f"{out.note[0].upper()}{out.note[1:]}."
    assert drift(DriftInput(project_id="web"), runtime, CALLER).note is None


def test_drift_of_a_project_that_reads_only_the_orgs_shelf_says_so_without_a_search_that_matched_nothing(
    runtime,
):
    """A trial: drift, which searches for nothing, said "Nothing relevant was found ... the org's shelf ...
    matched nothing" in a project whose recall then found the shelf's memory."""
    remember(RememberInput(content="Deploys go out on Tuesdays", visibility="org"), runtime, CALLER)
    out = drift(DriftInput(project_id="mobile"), runtime, CALLER)
    assert out.note == (
        "org 'default' / project 'mobile' holds no memory of its own, only the org's shelf, which every project "
        "reads: check `project_id` if this project should hold some"
    )


def test_an_open_pair_whose_side_was_just_superseded_is_not_listed_until_it_is_carried(runtime):
    """A trial: drift right after a restatement superseded one side of an open pair listed the superseded
    memory as disputed; a moment later, the pair carried to its restatement, it did not."""
    from datetime import UTC, datetime

    remember(RememberInput(content="The API gateway listens on port 9090"), runtime, CALLER)
    newer = remember(
        RememberInput(content="The API gateway does not listen on port 9090"), runtime, Caller("cursor", "s2")
    ).id
    assert drift(DriftInput(), runtime, CALLER).open_contradictions == 1
    other = remember(RememberInput(content="Billing exports run nightly"), runtime, CALLER).id
    scope = runtime.store.get_memory(newer).scope
    # The supersede committed, its pair not carried yet (as between a restatement and the work behind it).
    assert runtime.store.supersede(scope, [newer], other, datetime.now(UTC)) == [newer]
    out = drift(DriftInput(), runtime, CALLER)
    assert (out.open_contradictions, out.contradictions) == (0, [])
