from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.aggregation import CorroborationService, ScopeIndex
from retrieval.simhash import MAX_DISTANCE, hamming, simhash
from retrieval.stages.corroboration import ClusterMember
from retrieval.text import wording
from storage.records import AggregationRow, Scope

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope("acme", "web")


def row(memory_id: str, agent: str, text: str, minutes: int = 0, weight: float = 1.0) -> AggregationRow:
    return AggregationRow(memory_id, agent, weight, T0 + timedelta(minutes=minutes), simhash(text), text)


class FakeSource:
    def __init__(self, rows, attesters=None):
        self.rows = list(rows)
        self.attestations = attesters or {}
        self.contradictions: list[tuple[str, str]] = []
        self.reads = 0

    def scopes(self):
        return [SCOPE]

    def aggregation_rows(self, scope, limit):
        self.reads += 1
        return sorted(self.rows, key=lambda r: r.created_at, reverse=True)[:limit]

    def attesters(self, scope):
        return self.attestations

    def open_contradiction_pairs(self, scope):
        return list(self.contradictions)


SAME = "We deploy the billing service every Tuesday"


def test_a_pass_returns_clusters_contradictions_counts_and_time():
    source = FakeSource(
        [
            row("a", "x", SAME, 0),
            row("b", "y", SAME + "!", 1),  # identical fingerprint: a near-duplicate from another agent
            row("c", "x", "Search is enabled for guests", 2),
            row("d", "y", "Search is disabled for guests", 3),
            row("e", "z", "Unrelated note about lunch", 4),
        ]
    )
    result = CorroborationService(source).run_pass(SCOPE)
    assert [
        (c.canonical.id, [m.id for m in c.corroborating], c.corroboration_score) for c in result.clusters
    ] == [("a", ["b"], 1)]
    assert [(c.older_id, c.newer_id) for c in result.contradictions] == [("c", "d")]
    assert result.corroborated_count == 1 and result.rows == 5 and result.elapsed_ms >= 0


def test_the_pass_reads_only_the_newest_max_rows():
    source = FakeSource([row(f"m{i}", "x", f"note {i}", i) for i in range(10)])
    assert CorroborationService(source, max_rows=3).run_pass(SCOPE).rows == 3


def test_clusters_are_built_on_first_use_and_then_cached():
    source = FakeSource([row("a", "x", SAME), row("b", "y", SAME, 1)])
    service = CorroborationService(source)
    assert set(service.clusters_for(SCOPE, ["a", "b", "c"])) == {"a", "b"}
    service.clusters_for(SCOPE, ["a"])
    assert source.reads == 1


def test_a_new_memory_joins_its_cluster_without_waiting_for_the_next_pass():
    source = FakeSource([row("a", "x", SAME)])
    service = CorroborationService(source)
    assert service.clusters_for(SCOPE, ["a"]) == {}
    service.observe(SCOPE, ClusterMember("b", "y", 1.0, T0, simhash(SAME), content=SAME))
    cluster = service.clusters_for(SCOPE, ["a"])["a"]
    assert cluster.corroborating_agents == ("y",)
    service.attest(SCOPE, "a", "z")
    assert service.clusters_for(SCOPE, ["b"])["b"].corroboration_score == 2


def test_weights_move_the_canonical_member():
    service = CorroborationService(FakeSource([row("a", "x", SAME), row("b", "y", SAME, 1)]))
    assert service.clusters_for(SCOPE, ["a"])["a"].canonical.id == "a"
    service.set_weights(SCOPE, {"b": 1.5})
    cluster = service.clusters_for(SCOPE, ["a"])["a"]
    assert cluster.canonical.id == "b" and cluster.corroborating_agents == ("x",)


def test_incremental_adds_give_the_same_clusters_as_a_full_build():
    texts = [
        SAME,
        SAME + ".",
        "Completely different text about caching",
        "Completely different text about caching!",
    ]
    members = [
        ClusterMember(f"m{i}", f"agent{i}", 1.0, T0 + timedelta(minutes=i), simhash(t))
        for i, t in enumerate(texts)
    ]
    full = ScopeIndex.build(members, {})
    incremental = ScopeIndex()
    for each in members:
        incremental.add(each)
    assert full.clusters() == incremental.clusters()
    assert len(full.clusters()) == 2


def test_a_write_during_a_pass_survives_it_and_passes_do_not_overlap():
    import threading

    gate = threading.Event()
    entered = threading.Event()

    class SlowSource(FakeSource):
        def aggregation_rows(self, scope, limit):
            rows = super().aggregation_rows(scope, limit)
            if self.reads == 1:
                entered.set()
                gate.wait(10)
            return rows

    source = SlowSource([row("a", "x", SAME)])
    service = CorroborationService(source)
    first = threading.Thread(target=service.run_pass, args=(SCOPE,))
    first.start()
    entered.wait(10)
    source.rows.append(row("b", "y", SAME, 1))  # committed to the store, then observed by this process
    service.observe(SCOPE, ClusterMember("b", "y", 1.0, T0, simhash(SAME), content=SAME))
    second = threading.Thread(target=service.run_pass, args=(SCOPE,))
    second.start()
    gate.set()
    first.join(10)
    second.join(10)
    assert source.reads == 2  # the second pass waited for the first, then read a fresh snapshot
    assert service.clusters_for(SCOPE, ["a"])["a"].corroborating_agents == ("y",)


def test_a_claim_and_its_negation_are_no_corroboration_even_with_near_fingerprints():
    long = (
        "The on-call engineer pages the database team when replication lag passes five minutes during the "
        "nightly batch window, and the incident channel gets a summary with the dashboard link afterwards"
    )
    negation = long.replace("pages the database team", "never pages the database team")
    from retrieval.simhash import hamming

    assert hamming(simhash(long), simhash(negation)) <= 3  # near-duplicate fingerprints
    service = CorroborationService(FakeSource([row("a", "x", long), row("b", "y", negation, 1)]))
    assert service.clusters_for(SCOPE, ["a", "b"]) == {}
    # nor does a negation join a cluster as it arrives
    service.observe(SCOPE, ClusterMember("c", "z", 1.0, T0, simhash(negation), negates=True))
    service.observe(SCOPE, ClusterMember("d", "w", 1.0, T0, simhash(long)))
    assert service.clusters_for(SCOPE, ["a"])["a"].corroborating_agents == ("w",)


OTHER = "Completely different text about caching"


def member(memory_id: str, agent: str, text: str = SAME, weight: float = 1.0) -> ClusterMember:
    return ClusterMember(memory_id, agent, weight, T0, simhash(text), wording=wording(text), content=text)


def groups(service: CorroborationService, ids: list[str]) -> set[tuple[str, ...]]:
    clusters = service.clusters_for(SCOPE, ids).values()
    return {tuple(sorted(m.id for m in cluster.members)) for cluster in clusters}


def test_a_pass_keeps_the_two_memories_of_an_open_contradiction_out_of_one_cluster():
    """Near-duplicate fingerprints (the same words), but the store holds the pair as a contradiction."""
    source = FakeSource(
        [row("a", "x", SAME), row("b", "y", SAME, 1), row("c", "x", OTHER, 2), row("d", "y", OTHER + "!", 3)]
    )
    source.contradictions = [("a", "b")]
    service = CorroborationService(source)
    assert groups(service, ["a", "b", "c", "d"]) == {("c", "d")}


def test_a_contradiction_found_after_two_memories_clustered_splits_their_cluster():
    source = FakeSource([row("a", "x", SAME)])
    service = CorroborationService(source)
    service.clusters_for(SCOPE, ["a"])
    service.observe(SCOPE, member("b", "y"))
    service.observe(SCOPE, member("c", "x", OTHER))
    service.observe(SCOPE, member("d", "w", OTHER + "!"))
    assert groups(service, ["a", "b", "c", "d"]) == {("a", "b"), ("c", "d")}
    service.keep_apart(SCOPE, "a", "b")
    assert groups(service, ["a", "b", "c", "d"]) == {("c", "d")}  # the other cluster is untouched
    source.rows.append(row("b", "y", SAME, 1))
    service.run_pass(SCOPE)  # a pass that does not know the pair yet (another process found it)
    assert groups(service, ["a", "b"]) == {("a", "b")}
    service.keep_apart(SCOPE, "a", "b")
    assert groups(service, ["a", "b"]) == set()


CLAIM, REVERSAL = "Alice reports to Bob", "Bob reports to Alice"  # one fingerprint: a bag of words


@pytest.mark.parametrize("heavier", [None, "r0", "c3"])
def test_restatements_of_both_sides_make_two_clusters_whichever_pairs_were_compared(heavier):
    """A review: the write path compares a new memory with a few neighbours only, so a reversal is
    recorded against some of a claim's restatements; the others joined it to the claim's cluster, where
    the dissenting agents counted as corroborating the claim they deny. Nor may a weight a report gave
    one of them (the canonical order) move a restatement to the other side."""
    marks = ["", ".", "!", "?", ";", "!!"]
    claim = [member(f"c{i}", f"agent{i}", CLAIM + mark) for i, mark in enumerate(marks)]
    reversal = [member(f"r{i}", f"dissent{i}", REVERSAL + mark) for i, mark in enumerate(marks[:3])]
    everyone = [replace(m, weight=1.15) if m.id == heavier else m for m in [*claim, *reversal]]
    # r2 was compared with nothing that contradicts it (it restates r0); r1 with c2 only
    index = ScopeIndex(everyone, apart=[("r0", "c0"), ("r0", "c1")])
    index.keep_apart("r1", "c2")
    assert {tuple(sorted(m.id for m in c.members)) for c in index.clusters()} == {
        tuple(f"c{i}" for i in range(6)),
        ("r0", "r1", "r2"),
    }
    by_member = index.clusters_by_member()
    assert not any(agent.startswith("dissent") for agent in by_member["c0"].corroborating_agents)
    assert set(by_member["r2"].corroborating_agents) | {by_member["r2"].canonical.agent_id} == {
        "dissent0",
        "dissent1",
        "dissent2",
    }


def test_a_memory_that_leaves_takes_its_contradictions_with_it():
    index = ScopeIndex([member("a", "x"), member("b", "y")], apart=[("a", "b")])
    assert index.clusters() == ()
    index.retire(["b"])
    index.add(member("e", "v"))
    assert [sorted(m.id for m in c.members) for c in index.clusters()] == [["a", "e"]]
    assert index._apart == {}
    index.retire(["a", "e"])  # a set with no member left has no cluster
    assert index.clusters() == ()


def test_near_duplicate_fingerprints_that_name_other_hosts_corroborate_nothing():
    """A team's trial: "... runs on host ash.internal ..." and "... oak.internal ..." by two agents formed a
    cluster, each listed as stating the other's host, with a corroboration boost."""
    said = (
        "The nightly search indexer job for the web project runs on host {} with the default settings and "
        "retries twice before paging the on-call channel about it"
    )
    ash, oak = said.format("ash.corp"), said.format("oak.corp")
    assert hamming(simhash(ash), simhash(oak)) <= MAX_DISTANCE  # near-duplicate fingerprints
    source = FakeSource([row("a", "alice", ash), row("b", "bob", oak, 1), row("c", "carol", ash, 2)])
    service = CorroborationService(source)
    assert groups(service, ["a", "b", "c"]) == {("a", "c")}
    service.observe(SCOPE, member("d", "dave", oak))
    assert groups(service, ["a", "b", "c", "d"]) == {("a", "c"), ("b", "d")}


def test_the_same_claim_written_in_another_case_still_corroborates():
    """A review: names compared as sets split "We use Python 3.12 and FastAPI ..." from the same words in
    lower case, whose fingerprints are equal; a name said in the other text in any case is the same."""
    upper = "We use Python 3.12 and FastAPI for the backend"
    lower = "we use python 3.12 and fastapi for the backend"
    assert simhash(upper) == simhash(lower)
    service = CorroborationService(FakeSource([row("a", "alice", upper), row("b", "bob", lower, 1)]))
    assert groups(service, ["a", "b"]) == {("a", "b")}
