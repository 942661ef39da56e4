"""Consolidation run again with this release's rules (writing.reconsolidation): what an earlier release's
rules missed is found, oldest first; a second run finds nothing new; nothing decided before is undone."""

from storage.records import Scope
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.remember import RememberInput, remember
from writing.reconsolidation import Reconsolidated, consolidate_again

SCOPE = Scope("default", "default")


def written_unconsolidated(path, texts: list[str]) -> list[str]:
    """A store whose memories no consolidation examined as they were written (as an earlier release's rules
    missed what they say of each other)."""
    runtime = make_runtime(settings_for(path, consolidation_enabled=False))
    try:
        return [
            remember(RememberInput(content=text), runtime, Caller("claude-code", f"ses_{n}")).id
            for n, text in enumerate(texts)
        ]
    finally:
        runtime.close()


def test_a_revision_an_earlier_release_missed_is_found_and_a_later_restatement_of_the_old_value_disputed(
    tmp_path,
):
    old, new, again, cat = written_unconsolidated(
        tmp_path / "db",
        [
            "The billing API listens on port 8080.",
            "The billing API now listens on port 9090.",
            "Billing API listens on port 8080",  # the old value said again, after the revision
            "The office cat is called Miso.",
        ],
    )
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        found = consolidate_again(runtime.writer, SCOPE)
        assert found == Reconsolidated(examined=4, superseded=1, disputed=1)
        store = runtime.store
        assert (store.get_memory(old).status, store.get_memory(old).replaced_by) == ("superseded", new)
        assert {store.get_memory(i).status for i in (new, again, cat)} == {"active"}
        assert [set(pair) for pair in store.open_contradiction_pairs(SCOPE)] == [{new, again}]
        # Again: the superseded memory is not examined, and nothing new is found.
        assert consolidate_again(runtime.writer, SCOPE) == Reconsolidated(
            examined=3, superseded=0, disputed=0
        )
    finally:
        runtime.close()
