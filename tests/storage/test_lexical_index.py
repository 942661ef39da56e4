"""BM25 over a scope copy's search text: Lucene's idf, k1 = 1.2, b = 0.75, computed here by hand."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.lexical_index import LexicalIndex


def index_of(*texts: str) -> LexicalIndex:
    index = LexicalIndex(str.split)
    for row, text in enumerate(texts):
        index.set(row, text)
    return index


def everything(count: int) -> np.ndarray:
    return np.ones(count, dtype=bool)


def test_scores_are_okapi_bm25_with_lucenes_idf():
    index = index_of("postgres pool size", "postgres replica lag postgres", "redis cache")
    # N = 3 documents, read as 20 (``MIN_DOCUMENTS``), average length 3; "postgres" is in 2 of them.
    idf = math.log(1 + (20 - 2 + 0.5) / (2 + 0.5))
    short = 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / 3))  # tf 1, length 3
    long = 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 4 / 3))  # tf 2, length 4
    found = index.search("postgres", everything(3), limit=5)
    assert [row for row, _ in found] == [1, 0]
    assert [score for _, score in found] == pytest.approx([idf * long, idf * short])


def test_query_terms_add_up_and_repeats_count_once():
    index = index_of("postgres pool size", "redis pool", "nothing here")
    pool_idf = math.log(1 + (20 - 2 + 0.5) / (2 + 0.5))
    size_idf = math.log(1 + (20 - 1 + 0.5) / (1 + 0.5))
    average = 7 / 3
    row0 = 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / average))
    found = dict(index.search("pool size size", everything(3), limit=5))
    assert found[0] == pytest.approx((pool_idf + size_idf) * row0)
    assert set(found) == {0, 1}


def test_only_eligible_rows_come_back_best_first_ties_in_row_order():
    index = index_of("alpha", "alpha", "alpha", "beta")
    eligible = np.array([True, False, True, True])
    assert [row for row, _ in index.search("alpha", eligible, limit=5)] == [0, 2]
    assert [row for row, _ in index.search("alpha", everything(4), limit=2)] == [0, 1]
    assert index.search("gamma", everything(4), limit=5) == []
    assert index.search("   ", everything(4), limit=5) == []


def test_any_rows_score_is_the_one_a_search_would_give_it_whatever_its_rank():
    # What the vector leg's hits are fused with when the full-text leg's limit left them out.
    index = index_of("postgres pool size", "postgres replica lag postgres", "redis cache")
    idf = math.log(1 + (20 - 2 + 0.5) / (2 + 0.5))
    short = 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / 3))
    # Row 0 ranks second for "postgres": a search limited to one hit leaves it out, scores_of does not.
    assert [row for row, _ in index.search("postgres", everything(3), limit=1)] == [1]
    assert index.scores_of("postgres", [0, 2]) == pytest.approx([idf * short, 0.0])
    assert index.scores_of("kafka", [0, 1]) == [0.0, 0.0]  # no memory holds the term
    assert index.scores_of("postgres", []) == []


def test_a_rows_new_text_replaces_its_old_terms_and_statistics():
    index = index_of("postgres pool", "redis cache")
    index.set(0, "mysql pool")
    assert index.search("postgres", everything(2), limit=5) == []
    assert [row for row, _ in index.search("mysql", everything(2), limit=5)] == [0]
    index.set(1, "")  # a purged memory: no text, not a document any more
    assert index.documents == 1
    assert index.search("redis", everything(2), limit=5) == []
    # One document of length 2 with the term (read as one of 20): idf = ln(1 + 19.5 / 1.5), tf part 2.2 / 2.2.
    assert index.search("mysql", everything(2), limit=5)[0][1] == pytest.approx(math.log(1 + 19.5 / 1.5))


def test_compacting_stale_postings_changes_no_result():
    index = index_of(*(f"word{row % 7} common" for row in range(50)))
    before = index.search("word3 common", everything(50), limit=50)
    for rewrite in range(400):  # rewriting rows makes stale postings until a compaction drops them
        for row in range(50):
            index.set(row, f"word{row % 7} common" if rewrite % 2 else f"other{row} common")
    after = index.search("word3 common", everything(50), limit=50)
    assert [row for row, _ in after] == [row for row, _ in before]
    assert [score for _, score in after] == pytest.approx([score for _, score in before])
    assert index._stale_postings < 20_000


def test_the_ceiling_is_the_score_of_a_full_match_of_average_length():
    index = index_of("postgres pool size", "redis pool", "nothing here")
    pool_idf = math.log(1 + (20 - 2 + 0.5) / (2 + 0.5))
    size_idf = math.log(1 + (20 - 1 + 0.5) / (1 + 0.5))
    # "kafka" is in no memory: it counts with the idf of df 0, log(1 + 20.5 / 0.5); repeats count once.
    assert index.ceiling("pool size size kafka") == pytest.approx(pool_idf + size_idf + math.log(42))
    # A document of average length holding each term once scores exactly the ceiling: idf x 2.2 / 2.2.
    average = index_of("pool size x", "pool y z", "w v u")  # every document 3 terms long
    full = dict(average.search("pool size", everything(3), limit=5))[0]
    assert full == pytest.approx(average.ceiling("pool size"))
    assert index_of().ceiling("pool") == 0.0


def test_a_querys_search_and_ceiling_gather_its_postings_once_until_a_text_is_indexed():
    index = index_of("postgres pool size", "redis cache")
    found = index.search("postgres cache", everything(2), limit=5)
    gathered = index._gathered
    ceiling = index.ceiling("postgres cache")
    assert index._gathered is gathered  # the ceiling read what the search gathered
    index.set(2, "postgres replica")  # a text indexed: gathered again, and the new row counts
    assert index.search("postgres cache", everything(3), limit=5) != found
    assert index._gathered is not gathered
    assert index.ceiling("postgres cache") < ceiling  # "postgres" in 2 documents now, not 1


def test_a_small_scope_reads_idf_as_if_it_held_twenty_memories():
    # Every memory of a small store says "billing": read over 3 documents it counts for next to nothing
    # (ln(1 + 0.5 / 3.5) = 0.13, against 2.08 for a word none holds), over 20 for 1.79 against 3.74.
    small = index_of("we use postgres for billing", "billing moved to mysql", "billing moved to cockroachdb")
    assert small.ceiling("billing") == pytest.approx(math.log(1 + (20 - 3 + 0.5) / (3 + 0.5)))
    assert small.ceiling("database") == pytest.approx(math.log(1 + 20.5 / 0.5))
    # From 20 memories on, the scope's own counts: 25 documents, "common" in all of them.
    large = index_of(*(f"word{row} common" for row in range(25)))
    assert large.ceiling("common") == pytest.approx(math.log(1 + 0.5 / 25.5))


def bm25_by_hand(texts: dict[int, str], query: str) -> dict[int, float]:
    """Each row's score from its current text alone, a term at a time (repeats in the query once)."""
    documents = [text.split() for text in texts.values() if text.split()]
    count, average = max(len(documents), 20), sum(map(len, documents)) / max(len(documents), 1)
    scores: dict[int, float] = {}
    for term in dict.fromkeys(query.split()):
        holding = sum(1 for words in documents if term in words)
        if not holding:
            continue
        weight = math.log(1.0 + (count - holding + 0.5) / (holding + 0.5))
        for row, text in texts.items():
            words = text.split()
            if term in words:
                tf = words.count(term)
                norm = 1.2 * (1.0 - 0.75 + 0.75 * len(words) / average)
                scores[row] = scores.get(row, 0.0) + weight * tf * 2.2 / (tf + norm)
    return scores


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 11), st.lists(st.sampled_from("abcdef"), max_size=6)),
        min_size=1,
        max_size=40,
    ),
    st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=5),
)
def test_scores_after_any_rewrites_match_bm25_of_the_current_texts(writes, query_words):
    index = LexicalIndex(str.split)
    texts: dict[int, str] = {}
    for row, words in writes:  # rewriting a row leaves stale postings the search must not count
        texts[row] = " ".join(words)
        index.set(row, texts[row])
    query = " ".join(query_words)
    expected = bm25_by_hand(texts, query)
    rows = max(texts) + 1
    found = dict(index.search(query, everything(rows), limit=rows))
    assert found == pytest.approx(expected)
    assert index.scores_of(query, list(range(rows))) == pytest.approx(
        [expected.get(row, 0.0) for row in range(rows)]
    )
    # Rows past the eligible mask's length are never returned.
    assert set(index.search(query, everything(3), limit=rows)) <= {
        (row, found[row]) for row in found if row < 3
    }


def test_rows_that_score_alike_come_latest_written_first_and_the_latest_make_the_cut():
    # Fifteen values of one port score alike for "payments-api port": the oldest filled the hits, and the
    # current value was no candidate. Given when each row was written, the latest come first.
    index = index_of(*(f"payments-api port {8000 + row}" for row in range(6)), "payments-api owner dana")
    written = np.array([10.0, 50.0, 20.0, 60.0, 30.0, 40.0, 5.0])
    found = index.search("payments-api port", everything(7), limit=3, written=written)
    assert [row for row, _ in found] == [3, 1, 5]
    # Without the times, ties stay in row order.
    assert [row for row, _ in index.search("payments-api port", everything(7), limit=3)] == [0, 1, 2]
    # A better score still comes first, whenever it was written.
    index.set(6, "payments-api port port")
    assert index.search("port", everything(7), limit=2, written=written)[0][0] == 6
