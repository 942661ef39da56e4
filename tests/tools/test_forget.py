"""forget through its handler: what a caller may forget, as it may read it."""

import pytest

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
