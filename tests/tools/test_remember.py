import pytest

from storage.records import Scope
from tools.common import Caller, ToolFailure, memory_id_for
from tools.remember import RememberInput, remember

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
    assert runtime.store.get_episode("ep-1", Scope("default", "default")) is not None


def test_the_same_content_in_the_same_scope_is_stored_once(runtime):
    first = remember(RememberInput(content="Use pnpm, not npm"), runtime, CALLER)
    again = remember(RememberInput(content="Use  pnpm, not npm ", agent_id="cursor"), runtime, CALLER)
    assert again.status == "duplicate"
    assert again.id == again.duplicate_of == first.id
    assert again.agent_id == "claude-code"  # the original's provenance is kept
    assert runtime.store.count_memories() == 1


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
