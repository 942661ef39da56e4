from datetime import UTC, datetime

from storage.records import LineageEvent, Scope
from tests.records import memory_record
from tools.memory_views import lineage_links

SCOPE = Scope("o", "p")
AT = datetime(2026, 3, 1, tzinfo=UTC)


class FakeLineage:
    def __init__(self, memories, events) -> None:
        self.memories = {m.id: m for m in memories}
        self.events = events

    def lineage(self, scope, memory_ids):
        wanted = set(memory_ids)
        return [e for e in self.events if e.memory_id in wanted or e.related_id in wanted]

    def get_memories(self, memory_ids, scope):
        return {i: self.memories[i] for i in memory_ids if i in self.memories}


def test_when_a_memory_and_its_replacement_are_both_asked_about_each_link_names_the_other():
    old = memory_record("old", content="the pool size is 10", agent_id="ana")
    new = memory_record("new", content="the pool size is 20", agent_id="ben")
    event = LineageEvent.new(
        SCOPE,
        "supersede",
        "old",
        related_id="new",
        resolver="rules:near-exact",
        reason="restated",
        agent_id="ben",
        session_id="s",
        at=AT,
    )
    links = lineage_links(FakeLineage([old, new], [event]), SCOPE, ["old", "new"])
    assert (links.replaced_by["old"].id, links.replaced_by["old"].preview) == ("new", "the pool size is 20")
    assert links.replaced_by["old"].written_by == "ben"
    assert [(link.id, link.preview, link.written_by) for link in links.replaces["new"]] == [
        ("old", "the pool size is 10", "ana")
    ]
