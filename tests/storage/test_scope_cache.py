"""The in-process scope copies: they answer like LanceDB, follow other processes' writes, apply this
process's own writes without reading them back, and step aside for scopes that are too big."""

import threading
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from retrieval.text import index_terms
from storage.records import Scope
from storage.scope_cache import ScopeCache
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new, vec

OTHER = Scope("globex", "api")


def open_store(path, **cache) -> MemoryStore:
    return MemoryStore.open(str(path), vector_dim=DIM, **cache)


def corpus():
    rows = [
        new(f"m{i}", f"note number {i} about topic {i % 3}", hot=(i % DIM, (i * 3) % DIM)) for i in range(30)
    ]
    rows.append(new("fact-t", "tagged fact", hot=(1,), tags=("db",)))
    rows.append(new("art", "an artifact", hot=(1,), kind="artifact"))
    rows.append(new("old", "superseded one", hot=(1,), status="superseded"))
    rows.append(new("gone", "expired ephemeral", hot=(1,), expires_at=NOW - timedelta(days=1)))
    rows.append(new("other-emb", "other embedder", hot=(1,), embedder="other"))
    rows.append(new("elsewhere", "another scope", hot=(1,), scope=OTHER))
    return rows


@pytest.mark.parametrize(
    ("kinds", "tags"), [(None, None), (["artifact"], None), (None, ["db"]), (["fact"], ["db"])]
)
@pytest.mark.slow
def test_a_copy_answers_vector_searches_like_lancedb(tmp_path, kinds, tags):
    with open_store(tmp_path / "db") as cached, open_store(tmp_path / "db", cache_scope_rows=0) as plain:
        cached.insert_many(corpus())
        query = np.asarray(vec(1, 3), dtype=np.float32)
        got = cached.vector_search(SCOPE, query, embedder="emb", limit=8, kinds=kinds, tags=tags)
        want = plain.vector_search(SCOPE, query, embedder="emb", limit=8, kinds=kinds, tags=tags)
        assert cached.cache.loads == 2 and plain.cache.loads == 0  # the insert copied its two scopes
        assert [h.record.id for h in got] == [h.record.id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
        assert {h.record.id for h in got}.isdisjoint({"old", "gone", "other-emb", "elsewhere"})


def test_reads_from_a_copy_match_reads_from_the_table(tmp_path):
    with open_store(tmp_path / "db") as cached, open_store(tmp_path / "db", cache_scope_rows=0) as plain:
        cached.insert_many(
            [*corpus(), new("ep1", "in an episode", episode_id="e1"), new("ep2", "too", episode_id="e1")]
        )
        ids = ["m1", "old", "missing", "elsewhere"]
        assert cached.get_memories(ids, SCOPE) == plain.get_memories(ids, SCOPE)
        assert cached.get_memory("m2", SCOPE) == plain.get_memory("m2", SCOPE)
        assert sorted(s.id for s in cached.episode_member_stubs(SCOPE, ["e1"])) == ["ep1", "ep2"]
        vectors = cached.memory_vectors(["m1", "m2"], SCOPE)
        assert np.allclose(vectors["m1"], plain.memory_vectors(["m1"], SCOPE)["m1"])
        hits = cached.fulltext_search(SCOPE, "note topic", limit=5)
        assert [h.record.id for h in hits] == [
            h.record.id for h in plain.fulltext_search(SCOPE, "note topic", limit=5)
        ]
        assert all(h.vector is not None for h in hits)


def test_another_processs_writes_reach_the_copy_by_reading_only_what_changed(tmp_path):
    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many(corpus())
        query = np.asarray(vec(5), dtype=np.float32)
        mine.vector_search(SCOPE, query, embedder="emb", limit=3)  # builds the copy
        theirs.insert_memory(new("fresh", "written by the other process", hot=(5,)))
        theirs.retract(SCOPE, ["m5"], NOW)
        theirs.set_weights({"m13": 1.5}, NOW)
        hits = mine.vector_search(SCOPE, query, embedder="emb", limit=3)
        assert hits[0].record.id == "fresh"
        assert "m5" not in {h.record.id for h in hits}
        assert mine.get_memory("m5", SCOPE).status == "retracted"
        assert mine.get_memory("m13", SCOPE).weight == 1.5
        assert (mine.cache.loads, mine.cache.deltas) == (2, 1)  # copied by the insert, then one catch-up


def test_this_processs_own_writes_are_applied_without_reading_them_back(tmp_path):
    with open_store(tmp_path / "db") as store:
        store.insert_many(corpus())
        store.get_memory("m1", SCOPE)  # builds the copy
        store.insert_memory(new("mine", "my own write", hot=(2,)))
        store.supersede(SCOPE, ["m2"], "mine", NOW)
        store.mark_consolidated(["mine"], NOW)
        assert store.get_memory("mine", SCOPE).consolidated_at == NOW
        assert store.get_memory("m2", SCOPE).replaced_by == "mine"
        top = store.vector_search(SCOPE, np.asarray(vec(2), dtype=np.float32), embedder="emb", limit=1)
        assert top[0].record.id == "mine"
        assert (store.cache.loads, store.cache.deltas) == (2, 0)  # the insert's copies of its two scopes


def test_a_scope_above_the_size_limit_is_searched_in_lancedb(tmp_path):
    with open_store(tmp_path / "db", cache_scope_rows=10) as store:
        store.insert_many(corpus())  # copies both scopes while empty; the first grows past 10 and is dropped
        assert not store.cache.holds(SCOPE) and store.cache.holds(OTHER)  # one memory: small enough
        hits = store.vector_search(SCOPE, np.asarray(vec(5), dtype=np.float32), embedder="emb", limit=3)
        assert len(hits) == 3 and not store.cache.holds(SCOPE) and store.cache.loads == 2
        assert store.get_memory("elsewhere", OTHER) is not None
        assert store.cache.loads == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_copies_past_the_total_displace_only_idle_ones_and_never_thrash(tmp_path):
    with open_store(tmp_path / "db", cache_total_rows=40) as store:
        clock = store.cache._clock = Clock()
        store.insert_many(corpus())
        store.get_memory("elsewhere", OTHER)
        store.get_memory("m1", SCOPE)
        store.get_memory("elsewhere", OTHER)  # 35 + 1 rows fit: both stay
        assert store.cache.loads == 2
        store.insert_many([new(f"x{i}", f"extra {i}", scope=OTHER) for i in range(10)])  # 35 + 11 > 40
        assert store.get_memory("x1", OTHER) is not None  # the growth evicted the one used longest ago
        for _ in range(3):  # no longer fits beside the busy one: built once for one read, then LanceDB
            assert store.get_memory("m1", SCOPE) is not None
            assert store.get_memory("x1", OTHER) is not None
        assert store.cache.loads == 3
        clock.now += 301  # both idle now: the next scope asked for takes the room
        assert store.get_memory("m1", SCOPE) is not None
        assert store.get_memory("m2", SCOPE) is not None
        assert store.cache.loads == 4


class CountingReader:
    """A reader over an in-memory list that counts version checks."""

    def __init__(self, rows) -> None:
        self.rows = rows
        self.version_checks = 0

    def latest_version(self) -> int:
        self.version_checks += 1
        return 1

    def scope_size_above(self, scope, limit) -> bool:
        return False

    def scope_rows(self, scope):
        return [
            (n.record, np.asarray(n.vector, dtype=np.float32), n.search_text)
            for n in self.rows
            if n.record.scope == scope
        ]

    def rows_changed_since(self, version, scopes):
        return []

    def scope_episodes(self, scope):
        return []


def test_reads_inside_one_version_check_the_table_once():
    from storage.scope_cache import ScopeCache

    reader = CountingReader(corpus())
    cache = ScopeCache(reader, dimension=DIM, max_scope_rows=100, max_total_rows=1000)
    with cache.one_version():
        for _ in range(3):
            with cache.reading(SCOPE) as copy:
                assert "m1" in copy.records
    assert reader.version_checks == 1
    with cache.reading(SCOPE), cache.reading(SCOPE):
        pass
    assert reader.version_checks == 3  # outside the block, every read checks


def test_two_threads_read_a_copy_at_once_and_a_write_waits_for_both():
    import threading

    from storage.scope_cache import ScopeCache

    cache = ScopeCache(CountingReader(corpus()), dimension=DIM, max_scope_rows=100, max_total_rows=1000)
    with cache.reading(SCOPE):  # built (and caught up) before the readers start
        pass
    both_inside = threading.Barrier(3, timeout=5)
    leave = threading.Event()
    order: list[str] = []

    def read() -> None:
        with cache.reading(SCOPE) as copy:
            assert copy is not None and "m1" in copy.records
            both_inside.wait()  # breaks unless both readers are inside at once
            leave.wait(5)
            order.append("read")

    def write() -> None:
        record = next(row.record for row in corpus() if row.record.id == "m1")
        cache.advance(1, 2, inserted=[(record, None, None)])
        order.append("write")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    both_inside.wait()
    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.05)
    assert writer.is_alive() and order == []  # the write waits while the copy is being read
    leave.set()
    for thread in [*readers, writer]:
        thread.join(5)
    assert order == ["read", "read", "write"]


def test_warming_builds_the_copies_before_the_first_read(tmp_path):
    with open_store(tmp_path / "db") as writer:
        writer.insert_many(corpus())
    with open_store(tmp_path / "db") as store:  # a process that has not read anything yet
        assert store.cache.warm(store.scopes()) == 2
        store.vector_search(SCOPE, np.asarray(vec(5), dtype=np.float32), embedder="emb", limit=3)
        store.get_memory("elsewhere", OTHER)
        assert store.cache.loads == 2  # the reads found the copies built
        assert store.cache.warm(store.scopes()) == 0


def test_a_listing_reads_a_copy_there_is_and_builds_none(tmp_path):
    with open_store(tmp_path / "db") as writer:
        writer.insert_many(corpus())
    with open_store(tmp_path / "db") as store:  # a one-off command: nothing read yet
        listed = [m.id for m in store.list_memories(SCOPE, limit=3)]
        assert store.cache.loads == 0
        store.vector_search(SCOPE, np.asarray(vec(5), dtype=np.float32), embedder="emb", limit=3)
        assert store.cache.loads == 1  # a search builds one, and the next listing reads it
        assert [m.id for m in store.list_memories(SCOPE, limit=3)] == listed
        assert store.cache.loads == 1


class AnotherProcessWritesDuringTheRead:
    """The store as the cache reads it, but another process commits a memory while a scope is read."""

    def __init__(self, store: MemoryStore, other: MemoryStore) -> None:
        self.store, self.other = store, other

    def latest_version(self) -> int:
        return self.store.table_version()

    def scope_size_above(self, scope, limit) -> bool:
        return self.store.scope_size_above(scope, limit)

    def scope_rows(self, scope):
        rows = self.store.scope_rows(scope)
        self.other.insert_memory(new("late", "committed while the scope was read", hot=(7,)))
        return rows

    def rows_changed_since(self, version, scopes):
        return self.store.rows_changed_since(version, scopes)

    def scope_episodes(self, scope):
        return self.store.scope_episodes(scope)


def test_a_write_committed_while_a_copy_is_warmed_is_in_the_copy(tmp_path):
    with open_store(tmp_path / "db") as store, open_store(tmp_path / "db") as other:
        store.insert_many(corpus())
        cache = ScopeCache(
            AnotherProcessWritesDuringTheRead(store, other),
            dimension=DIM,
            max_scope_rows=100,
            max_total_rows=100,
        )
        cache.warm([SCOPE])
        with cache.reading(SCOPE) as copy:
            assert "late" in copy.records
            assert (
                copy.nearest(np.asarray(vec(7), dtype=np.float32), embedder="emb", limit=1, now=NOW)[0][0].id
                == "late"
            )
        assert cache.loads == 1


def open_text_store(path, **cache) -> MemoryStore:
    return MemoryStore.open(str(path), vector_dim=DIM, analyzer=index_terms, **cache)


@pytest.mark.slow
@pytest.mark.parametrize(("kinds", "tags"), [(None, None), (["artifact"], None), (None, ["db"])])
def test_a_copy_with_an_analyzer_answers_full_text_searches_with_lancedbs_filters(tmp_path, kinds, tags):
    with open_text_store(tmp_path / "db") as cached, open_store(tmp_path / "db", cache_scope_rows=0) as plain:
        cached.insert_many(corpus())
        for query in ("note topic", "tagged fact", "artifact", "superseded expired ephemeral embedder scope"):
            got = cached.fulltext_search(SCOPE, query, limit=50, kinds=kinds, tags=tags)
            want = plain.fulltext_search(SCOPE, query, limit=50, kinds=kinds, tags=tags)
            assert {h.record.id for h in got} == {h.record.id for h in want}, query
            assert all(h.vector is not None for h in got)
        assert (cached.fulltext_engine(SCOPE), plain.fulltext_engine(SCOPE)) == ("copy-bm25", "lancedb-bm25")
        assert cached.cache.loads == 2  # the insert's copies of its two scopes, nothing since


def test_text_written_by_another_process_or_purged_reaches_the_copys_index(tmp_path):
    with open_text_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many(corpus())
        assert mine.fulltext_search(SCOPE, "zebra", limit=5) == []  # builds the copy
        theirs.insert_memory(new("zebra", "a zebra crossing", hot=(4,)))
        assert [h.record.id for h in mine.fulltext_search(SCOPE, "zebra", limit=5)] == ["zebra"]
        theirs.purge(SCOPE, ["zebra"], NOW)
        assert mine.fulltext_search(SCOPE, "zebra crossing", limit=5) == []
        mine.purge(SCOPE, ["m4"], NOW)  # this process's own purge, applied without a read-back
        assert "m4" not in {h.record.id for h in mine.fulltext_search(SCOPE, "note number 4", limit=50)}
        assert mine.cache.loads == 2  # the insert's copies of its two scopes, nothing since


@pytest.mark.slow
def test_a_copy_knows_the_scopes_episodes_and_follows_new_ones_and_titles(tmp_path):
    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many([new("a", "first step", episode_id="e1")])
        assert set(mine.get_episodes(SCOPE, ["e1", "e2"])) == {"e1"}
        reads = mine.cache.loads
        theirs.insert_memory(new("b", "in a new episode", episode_id="e2"))
        theirs.insert_memory(new("s", "Deploy day: what went wrong", episode_id="e1", kind="episode"))
        found = mine.get_episodes(SCOPE, ["e1", "e2"])
        assert set(found) == {"e1", "e2"} and found["e1"].title == "Deploy day: what went wrong"
        mine.insert_many([new("c", "my own new episode", episode_id="e3")])
        assert mine.get_episodes(SCOPE, ["e3"])["e3"].agent_id == "agent"
        theirs.purge(SCOPE, ["s"], NOW)  # the title came from that memory: it goes with it
        assert mine.get_episodes(SCOPE, ["e1"])["e1"].title is None
        assert mine.cache.loads == reads  # all of it without building the copy again
        assert mine.get_episodes(OTHER, ["e1"]) == {}


def episode_reads_of(store) -> list[list[str]]:
    """From now on, the ids of each read ``store`` makes of the episodes table, sorted, in order."""
    read, asked = store._read_episodes, []

    def counted(scope, episode_ids):
        asked.append(sorted(episode_ids))
        return read(scope, episode_ids)

    store._read_episodes = counted
    return asked


def test_one_read_brings_every_stale_episode_of_a_scope_up_to_date(tmp_path):
    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many([new("a", "first step", episode_id="e0")])
        assert set(mine.get_episodes(SCOPE, ["e0"])) == {"e0"}  # the copy is built
        theirs.insert_many([new(f"m{n}", f"step {n}", episode_id=f"e{n}") for n in range(1, 6)])
        asked = episode_reads_of(mine)
        assert set(mine.get_episodes(SCOPE, ["e2"])) == {"e2"}  # only what was asked for comes back
        assert asked == [["e1", "e2", "e3", "e4", "e5"]]  # but every stale one was read with it
        assert set(mine.get_episodes(SCOPE, ["e1", "e4", "e5"])) == {"e1", "e4", "e5"}
        assert len(asked) == 1  # no read more


def test_episodes_this_process_wrote_are_never_read_back_from_the_table(tmp_path):
    with open_store(tmp_path / "db") as mine:
        mine.insert_many([new("a", "first step", episode_id="e0")])
        assert set(mine.get_episodes(SCOPE, ["e0"])) == {"e0"}  # the copy is built
        asked = episode_reads_of(mine)
        mine.insert_many([new(f"m{n}", f"step {n}", episode_id=f"e{n}") for n in range(1, 4)])
        mine.insert_many(
            [new("t", "Release day: the rollback\nand what followed", episode_id="e4", kind="episode")]
        )
        found = mine.get_episodes(SCOPE, ["e1", "e2", "e3", "e4"])
        assert set(found) == {"e1", "e2", "e3", "e4"} and found["e2"].agent_id == "agent"
        assert found["e4"].title == "Release day: the rollback"  # titled by the memory written with it
        assert asked == []


def test_a_write_sequence_inside_one_version_decides_on_the_newest_rows(tmp_path):
    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many(corpus())
        with mine.one_version():
            assert mine.get_memory("m1", SCOPE).status == "active"  # the request's one version check
            theirs.retract(SCOPE, ["m1"], NOW)
            assert mine.get_memory("m1", SCOPE).status == "active"  # pinned: the same snapshot
            assert mine.supersede(SCOPE, ["m1", "m2"], "m3", NOW) == ["m2"]  # but the lock reads again
        assert mine.get_memory("m1", SCOPE).status == "retracted"


def test_a_read_between_a_purges_commits_never_keeps_the_purged_title(tmp_path):
    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many([new("s", "Secret launch codes 1234", episode_id="e1", kind="episode")])
        assert mine.get_episodes(SCOPE, ["e1"])["e1"].title == "Secret launch codes 1234"
        merge = theirs._merge_update

        def merge_then_read(update):  # another request reads the episode right after the memory's commit
            merge(update)
            mine.get_episodes(SCOPE, ["e1"])

        theirs._merge_update = merge_then_read
        theirs.purge(SCOPE, ["s"], NOW)
        assert mine.get_episodes(SCOPE, ["e1"])["e1"].title is None


def test_an_episode_read_older_than_a_newer_mark_is_not_kept():
    from storage.records import EpisodeRecord
    from storage.scope_copy import ScopeCopy

    copy = ScopeCopy(DIM)
    copy.put(new("a", "one", episode_id="e1").record, None)
    _, stale = copy.episodes_for(["e1"])  # a reader starts reading e1 ...
    copy.put(new("b", "retitles it", episode_id="e1", kind="episode").record, None)  # ... it changes
    old = EpisodeRecord("e1", "acme", "web", None, "agent", "s1", NOW, NOW)
    copy.refresh_episodes(stale, {"e1": old})
    fresh, still_stale = copy.episodes_for(["e1"])
    assert fresh == {} and list(still_stale) == ["e1"]  # read again next time, not served stale


class SizedReader(CountingReader):
    """Scopes of given sizes (one memory per row, no vectors)."""

    def __init__(self, sizes) -> None:
        rows = [
            new(f"{scope.project_id}-{i}", f"row {i}", scope=scope)
            for scope, size in sizes.items()
            for i in range(size)
        ]
        super().__init__(rows)


def test_a_copy_that_cannot_fit_leaves_the_idle_ones_in_place():
    a, b, c = Scope("o", "a"), Scope("o", "b"), Scope("o", "c")
    cache = ScopeCache(SizedReader({a: 4, b: 5, c: 7}), dimension=DIM, max_scope_rows=100, max_total_rows=10)
    clock = cache._clock = Clock()
    with cache.reading(a):
        pass
    clock.now += 301  # a is idle now
    with cache.reading(b):
        pass
    with cache.reading(c) as copy:  # 7 rows: even without a it would not fit beside b
        assert len(copy) == 7  # it serves the read that built it
    assert cache.holds(a) and cache.holds(b) and not cache.holds(c)


def test_a_batch_across_scopes_copies_each_of_them_and_creates_their_episodes(tmp_path):
    with open_store(tmp_path / "db") as store:
        store.insert_many([new("a", "in the first scope", episode_id="e1")])
        assert store.cache.loads == 1
        results = store.insert_many(
            [
                new("a", "in the first scope", episode_id="e1"),
                new("b", "elsewhere", scope=OTHER, episode_id="e1"),
            ]
        )
        assert [(record.id, created) for record, created in results] == [("a", False), ("b", True)]
        assert store.cache.loads == 2 and store.cache.holds(OTHER)
        assert set(store.get_episodes(OTHER, ["e1"])) == {"e1"}  # the other scope's episode was created


def test_a_memorys_context_follows_writes_of_this_process_and_of_another(tmp_path):
    turns = [
        new(name, name, hot=hot, episode_id="e1", created_at=NOW + timedelta(minutes=minute))
        for minute, (name, hot) in enumerate((("a", (0,)), ("b", (1,)), ("c", (2,))))
    ]
    query = np.asarray(vec(0, 1), dtype=np.float32)  # cosine 0.7071 with a and b, 0 with c

    def contexts(store: MemoryStore) -> dict[str, float]:
        with store.one_version():  # as a recall asks: after its vector leg, which reads the copy
            store.vector_search(SCOPE, query, embedder="emb", limit=3, context_share=0.5)
            return store.context_scores(SCOPE, query, ["a", "b", "c"], embedder="emb")

    with open_store(tmp_path / "db") as mine, open_store(tmp_path / "db") as theirs:
        mine.insert_many(turns)
        # b between a and c: (a + b + c) . q / sqrt(3) = 0.8165; a with b: 1.0; c with b: 0.5
        assert contexts(mine) == pytest.approx({"a": 1.0, "b": 0.8165, "c": 0.5}, abs=1e-4)
        assert contexts(theirs) == pytest.approx({"a": 1.0, "b": 0.8165, "c": 0.5}, abs=1e-4)
        mine.retract(SCOPE, ["b"], NOW)  # applied to this process's copy without reading it back
        # a and c are neighbours now: (a + c) . q / sqrt(2) = 0.5 each; b is in no chain (its own cosine)
        assert contexts(mine) == pytest.approx({"a": 0.5, "b": 0.7071, "c": 0.5}, abs=1e-4)
        assert contexts(theirs) == pytest.approx({"a": 0.5, "b": 0.7071, "c": 0.5}, abs=1e-4)


class SlowChangesReader(CountingReader):
    """Another process rewrote m1 at version 2; reading the changed rows (a LanceDB scan) waits for ``go``."""

    def __init__(self, rows, changed_text: str = "m1 as another process rewrote it") -> None:
        super().__init__(rows)
        self.version = 1
        self.changed_text = changed_text
        self.changed_reads: list[int] = []
        self.in_read = threading.Event()
        self.go = threading.Event()

    def latest_version(self) -> int:
        return self.version

    def rows_changed_since(self, version, scopes):
        self.changed_reads.append(version)
        self.in_read.set()
        self.go.wait(5)
        m1 = next(n for n in self.rows if n.record.id == "m1")
        record = replace(m1.record, content=self.changed_text)
        return [(record, np.asarray(m1.vector, dtype=np.float32), self.changed_text)]


def built(reader) -> ScopeCache:
    cache = ScopeCache(reader, dimension=DIM, max_scope_rows=100, max_total_rows=1000)
    with cache.reading(SCOPE):  # built at version 1
        pass
    return cache


def test_a_catch_up_reads_the_changed_rows_while_a_write_takes_the_copies_and_one_read_serves_all():
    reader = SlowChangesReader(corpus())
    cache = built(reader)
    reader.version = 2
    seen: list[str] = []

    def read() -> None:
        with cache.reading(SCOPE) as copy:
            seen.append(copy.records["m1"].content)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    assert reader.in_read.wait(5)

    def write() -> None:
        with cache.updating(SCOPE):  # the copies to itself, as applying a write does
            pass

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(2)
    written_during_the_read = not writer.is_alive()
    reader.go.set()
    writer.join(5)
    assert written_during_the_read  # the write did not wait for the catch-up's read
    for thread in readers:
        thread.join(5)
    assert seen == ["m1 as another process rewrote it"] * 2
    assert reader.changed_reads == [1]  # the second reader waited for the first's catch-up, and read nothing
    assert cache.deltas == 1


def test_rows_read_while_a_write_was_applied_are_not_put_over_it():
    reader = SlowChangesReader(corpus(), changed_text="m1 as read before the write")
    cache = built(reader)
    reader.version = 2  # this process's own write, applied by advance while the catch-up reads
    seen: list[str] = []

    def read() -> None:
        with cache.reading(SCOPE) as copy:
            seen.append(copy.records["m1"].content)

    thread = threading.Thread(target=read)
    thread.start()
    assert reader.in_read.wait(5)
    m1 = next(n for n in corpus() if n.record.id == "m1")
    written = replace(m1.record, content="m1 as this process wrote it")
    cache.advance(1, 2, inserted=[(written, np.asarray(m1.vector, dtype=np.float32), written.content)])
    reader.go.set()
    thread.join(5)
    assert seen == ["m1 as this process wrote it"]
    assert cache.deltas == 0  # what the catch-up read was set aside: the copies were at version 2 already


def test_this_processs_write_committed_during_a_catch_up_is_applied_after_its_rows_not_read_back():
    reader = SlowChangesReader(corpus())
    cache = built(reader)
    reader.version = 2  # another process's commit: the copies fall behind

    def read() -> None:
        with cache.reading(SCOPE):
            pass

    reading = threading.Thread(target=read)
    reading.start()
    assert reader.in_read.wait(5)
    m2 = next(n for n in corpus() if n.record.id == "m2")
    mine = replace(m2.record, content="m2 as this process wrote it")
    reader.version = 3  # this process's commit, 2 -> 3, while the catch-up reads
    cache.advance(2, 3, inserted=[(mine, np.asarray(m2.vector, dtype=np.float32), mine.content)])
    reader.go.set()
    reading.join(5)
    with cache.reading(SCOPE) as copy:
        assert copy.records["m2"].content == "m2 as this process wrote it"
        assert copy.records["m1"].content == "m1 as another process rewrote it"
    assert reader.changed_reads == [1]  # the write was applied, not read back from the table
    assert cache.deltas == 1


class RetractedAtTwo(CountingReader):
    """At version 2 another process retracts m1."""

    def __init__(self, rows) -> None:
        super().__init__(rows)
        self.version = 1

    def latest_version(self) -> int:
        return self.version

    def rows_changed_since(self, version, scopes):
        if version >= 2 or SCOPE not in scopes:
            return []
        m1 = next(n for n in self.rows if n.record.id == "m1")
        return [(replace(m1.record, status="retracted"), np.asarray(m1.vector, dtype=np.float32), "m1")]


def test_a_copy_warmed_inside_a_request_that_had_checked_the_version_still_follows_later_commits():
    reader = RetractedAtTwo(corpus())
    cache = ScopeCache(reader, dimension=DIM, max_scope_rows=100, max_total_rows=1000)
    with cache.one_version():
        with cache.reading(OTHER, build=False):  # the request's one version check; nothing built
            pass
        assert cache.warm([SCOPE]) == 1  # read at version 1
    reader.version = 2
    with cache.reading(SCOPE) as copy:
        assert copy.records["m1"].status == "retracted"
