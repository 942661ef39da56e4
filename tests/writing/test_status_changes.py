"""A change of status or tags (a retraction, an expiry, a restore, an amend) and its lineage event are two
commits: a process killed between them leaves the change written down (``storage.unfinished.StatusChange``),
and the next start records it; one killed before the change committed leaves nothing to record."""

import pytest

from storage.records import Scope
from tests.helpers import killed_after, make_runtime
from writing.recovery import RECOVERED

SCOPE = Scope("default", "default")

# A process that makes one change and is killed (kill -9) as it reaches ``cut``: "lineage", the change's
# lineage event (the change is committed), or "change", the change itself (nothing committed).
CHANGING = """
import itertools, sys, time
from datetime import timedelta
from tests.helpers import make_runtime, settings_for
from tests.writing.test_service import CALLER, said
from tools.forget import ForgetInput, forget
from storage.records import Scope

runtime = make_runtime(settings_for(sys.argv[1]))
step, cut = sys.argv[2], sys.argv[3]
tier = "ephemeral" if step == "expire" else "standard"
memory = said(runtime, "Rollback a bad deploy with make rollback", protection_tier=tier)
if step == "restore":  # forgotten, then remembered again: restored
    forget(ForgetInput(memory_id=memory.id), runtime, CALLER)
if step == "revive":  # corrected, then updated back to the earlier text: that memory is active again
    newer = said(runtime, "Rollback a bad deploy with make undeploy", replaces=memory.id)
print(memory.id, flush=True)

def killed(*args, **kwargs):
    print("killed", flush=True)
    time.sleep(3600)

if cut == "lineage":
    runtime.store.add_lineage = killed
elif cut == "update":  # the revive and its event are in; the update it was made for is next
    print(newer.id, flush=True)
    runtime.store.supersede = killed
else:
    runtime.store.retract = runtime.store.restore_memory = runtime.store.reactivate = killed
    runtime.store.set_tags = runtime.store.retract_expired = killed
if step == "retract":
    forget(ForgetInput(memory_id=memory.id), runtime, CALLER)
elif step == "restore":
    said(runtime, "Rollback a bad deploy with make rollback")
elif step == "revive":
    said(runtime, "Rollback a bad deploy with make rollback", replaces=newer.id)
elif step == "amend":
    said(runtime, "Rollback a bad deploy with make rollback", replaces=memory.id, tags=["ops"])
else:  # expire: the maintenance round's retraction of an ephemeral memory past its time
    later = runtime.store.get_memory(memory.id).expires_at + timedelta(seconds=1)
    ticks = itertools.count()
    runtime.clock = lambda: later + timedelta(milliseconds=next(ticks))
    runtime.writer.expire(Scope("default", "default"), [memory.id])
time.sleep(3600)
"""


def killed_changing(settings, step: str, cut: str) -> str:
    """Run ``CHANGING`` for ``step`` until it reaches ``cut``, kill it (kill -9); the memory's id."""
    with killed_after(CHANGING, str(settings.db_uri), step, cut) as process:
        memory_id = process.stdout.readline().strip()
        if cut == "update":
            memory_id += " " + process.stdout.readline().strip()  # and the memory it replaces
        reached = process.stdout.readline().strip()
        assert memory_id.startswith("mem_") and reached == "killed", process.stderr.read()
    return memory_id


# step: (the memory's status once the change committed, the last lineage event before it, the event recorded)
CHANGES = {
    "retract": ("retracted", None, "retract"),
    "restore": ("active", "retract", "restore"),
    "revive": ("active", "supersede", "restore"),
    "amend": ("active", None, "amend"),
    "expire": ("retracted", None, "expire"),
}


def actions(runtime, memory_id: str) -> list[str]:
    return [
        event.action for event in runtime.store.lineage(SCOPE, [memory_id]) if event.memory_id == memory_id
    ]


@pytest.mark.slow
@pytest.mark.parametrize("step", list(CHANGES))
def test_a_change_a_crash_cut_off_before_its_lineage_is_recorded_by_the_next_start(settings, step):
    memory_id = killed_changing(settings, step, "lineage")
    status, last_before, recorded = CHANGES[step]
    runtime = make_runtime(settings)
    try:
        memory = runtime.store.get_memory(memory_id)
        assert memory.status == status
        before = actions(runtime, memory_id)
        assert (before[-1] if before else None) == last_before  # half done: nothing says it changed
        if step == "amend":
            assert memory.tags == ("ops",)
        runtime.writer.recover_unfinished()
        after = runtime.store.lineage(SCOPE, [memory_id])
        event = [event for event in after if event.memory_id == memory_id][-1]
        assert (event.action, event.agent_id) == (
            recorded,
            "memoria" if step == "expire" else "claude-code",
        )
        assert event.reason.startswith(RECOVERED)
        runtime.writer.recover_unfinished()  # nothing left written down: recorded once
        assert actions(runtime, memory_id) == [*before, recorded]
    finally:
        runtime.close()


@pytest.mark.slow
@pytest.mark.parametrize("step", list(CHANGES))
def test_a_change_a_crash_cut_off_before_it_committed_leaves_nothing_to_record(settings, step):
    memory_id = killed_changing(settings, step, "change")
    runtime = make_runtime(settings)
    try:
        memory = runtime.store.get_memory(memory_id)
        before = actions(runtime, memory_id)
        runtime.writer.recover_unfinished()
        assert actions(runtime, memory_id) == before
        assert runtime.store.get_memory(memory_id).status == memory.status
        assert memory.tags == ()
    finally:
        runtime.close()


@pytest.mark.slow
def test_an_update_back_to_an_earlier_text_a_crash_cut_off_after_the_revive_is_finished_by_the_next_start(
    settings,
):
    """A review: the earlier text was active again and the update it was revived for never came, so both
    texts stood active for good."""
    earlier, newer = killed_changing(settings, "revive", "update").split()
    runtime = make_runtime(settings)
    try:
        statuses = [runtime.store.get_memory(memory_id).status for memory_id in (earlier, newer)]
        assert statuses == ["active", "active"]  # half done
        runtime.writer.recover_unfinished()
        assert runtime.store.get_memory(earlier).status == "active"
        assert (runtime.store.get_memory(newer).status, runtime.store.get_memory(newer).replaced_by) == (
            "superseded",
            earlier,
        )
        [event] = [e for e in runtime.store.lineage(SCOPE, [newer]) if e.memory_id == newer]
        assert (event.action, event.resolver, event.related_id) == ("supersede", "explicit", earlier)
        runtime.writer.recover_unfinished()  # done once
        assert len([e for e in runtime.store.lineage(SCOPE, [newer]) if e.memory_id == newer]) == 1
    finally:
        runtime.close()
