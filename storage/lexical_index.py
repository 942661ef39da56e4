"""BM25 over the search text of one scope copy, in numpy: a recall's full-text leg without a LanceDB query.

Postings are append-only ``array('i')`` triples per term (row, term frequency, generation). When a row's
text changes (a purge, a scrubbed quote) its generation goes up and its old postings stop counting;
they are dropped for good when stale postings outnumber live ones. Scoring is Okapi BM25 with Lucene's
idf, ``log(1 + (N - df + 0.5) / (df + 0.5))``, k1 = 1.2, b = 0.75, over every row with text in the scope
(any status, as the LanceDB index counts them; N at least ``MIN_DOCUMENTS``); the caller's mask picks which
rows may be returned.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

K1 = 1.2
B = 0.75
# A scope of a few memories says little about how common a word is: idf reads it as if the scope held at
# least this many, the others holding none of the query's words. Without it a word every memory of a small
# store shares counts for next to nothing: "which database do we use for billing", asked of a store whose
# only current memory is "We switched from MySQL to CockroachDB for billing" (beside the two it revised),
# read 0.0998 against the floor of 0.1 (a new user's trial). 20: the 30 facts of ``benchmarks.filler`` rank
# as before (50 let more filler pass).
MIN_DOCUMENTS = 20

Analyzer = Callable[[str], Sequence[str]]
# Live postings of some terms: rows, term frequencies, the term of each (its position), postings per term.
_Gathered = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]


class LexicalIndex:
    def __init__(self, analyze: Analyzer) -> None:
        self._analyze = analyze
        self._postings: dict[str, tuple[array, array, array]] = {}  # term -> rows, tfs, generations
        self._generation = np.zeros(0, dtype=np.int32)
        self._length = np.zeros(0, dtype=np.float32)  # analysed terms per row (0: no text)
        self._text_key = np.zeros(0, dtype=np.int64)  # hash of the indexed text, to skip unchanged rows
        self._distinct = np.zeros(0, dtype=np.int32)  # postings per row (its distinct terms)
        self._documents = 0
        self._total_length = 0.0
        self._live_postings = 0
        self._stale_postings = 0
        self._changes = 0  # texts indexed (``set``), so that a gathering of postings knows it still holds
        # The last terms' live postings (``_live_postings_of``) at ``_changes``: a recall asks the same query's
        # ``search`` and ``ceiling`` one after the other, and gathered them twice.
        self._gathered: tuple[int, tuple[str, ...], _Gathered] | None = None

    @property
    def documents(self) -> int:
        return self._documents

    def set(self, row: int, text: str) -> None:
        """Index ``text`` as row ``row``'s (replacing what it had)."""
        self._grow(row + 1)
        key = hash(text)
        if self._length[row] > 0 and self._text_key[row] == key:
            return
        terms = Counter(self._analyze(text)) if text else Counter()
        self._changes += 1
        self._drop(row)
        self._generation[row] += 1
        self._text_key[row] = key
        generation = int(self._generation[row])
        for term, frequency in terms.items():
            postings = self._postings.get(term)
            if postings is None:
                postings = self._postings[term] = (array("i"), array("i"), array("i"))
            postings[0].append(row)
            postings[1].append(frequency)
            postings[2].append(generation)
        length = float(sum(terms.values()))
        self._length[row] = length
        self._distinct[row] = len(terms)
        self._live_postings += len(terms)
        if length > 0:
            self._documents += 1
            self._total_length += length
        if self._stale_postings > max(self._live_postings, 10_000):
            self._compact()

    def ceiling(self, text: str) -> float:
        """The BM25 score of a document of average length that holds each of ``text``'s indexed terms
        once: the sum of their idf (each term adds idf x (k1 + 1) / (1 + k1) = idf). A score divided by it
        says how much of the query a memory matches, in [0, 1] (a longer repetition can pass 1). A term the
        scope never uses counts with the idf of a term in no document, the highest: a query about something
        memory never mentions is matched by nothing in full. 0.0 when nothing is indexed."""
        terms = list(dict.fromkeys(self._analyze(text))) if text.strip() else []
        if not terms or self._documents == 0:
            return 0.0
        _, _, _, holding = self._live_postings_of(terms)
        total = 0.0
        for live in holding:
            total += idf(self._documents, live)
        return total

    def search(
        self, text: str, eligible: np.ndarray, limit: int, *, written: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The best ``limit`` eligible rows (``eligible`` is a boolean mask over rows) matching ``text``:
        (row, BM25 score), best first. Ties in row order, or, given when each row was ``written``, the
        latest first: memories that say the same words but for a value score alike, and the latest is the
        value most likely current (fifteen values of a service's port, replicas and timeout each filled the
        leg's hits with the oldest, and an overview question's context with values long replaced)."""
        if limit <= 0:
            return []
        count = len(eligible)
        scores = self._scores(text, count)
        if scores is None:
            return []
        candidates = np.flatnonzero((scores > 0) & eligible)
        if len(candidates) == 0:
            return []
        # (the row itself last: a tie of times stays in row order)
        later = -written[candidates] if written is not None else candidates
        if len(candidates) > limit:
            least = np.partition(-scores[candidates], limit - 1)[limit - 1]  # the limit-th score, negated
            above = -scores[candidates] < least
            tied = np.flatnonzero(-scores[candidates] == least)
            tied = tied[np.lexsort((candidates[tied], later[tied]))][: limit - int(above.sum())]
            keep = np.flatnonzero(above)
            keep = np.concatenate((keep, tied))
            candidates, later = candidates[keep], later[keep]
        order = np.lexsort((candidates, later, -scores[candidates]))
        return [(int(row), float(scores[row])) for row in candidates[order]]

    def scores_of(self, text: str, rows: Sequence[int]) -> list[float]:
        """The BM25 score of each of ``rows`` for ``text``, as ``search`` scores it (0.0: no term matches).
        For the memories the vector leg found and the full-text leg did not return: fused on their real
        keyword score instead of none."""
        if not rows:
            return []
        scores = self._scores(text, max(rows) + 1)
        if scores is None:
            return [0.0] * len(rows)
        return [float(scores[row]) for row in rows]

    def _scores(self, text: str, count: int) -> np.ndarray | None:
        """Every row's BM25 score for ``text`` over the first ``count`` rows; None when nothing can match."""
        terms = list(dict.fromkeys(self._analyze(text))) if text.strip() else []
        if not terms or self._documents == 0:
            return None
        average = self._total_length / self._documents
        rows, frequencies, term_of, holding = self._live_postings_of(terms)
        weights = np.array([idf(self._documents, live) for live in holding], dtype=np.float64)
        norm = K1 * (1.0 - B + B * self._length[rows].astype(np.float64) / average)
        parts = weights[term_of] * frequencies * (K1 + 1.0) / (frequencies + norm)
        inside = rows < count
        # Each row's parts summed in the terms' order, from 0.0: the sums a loop over the terms would make (a
        # row has at most one live posting per term).
        return np.bincount(rows[inside], weights=parts[inside], minlength=count)

    def _live_postings_of(self, terms: Sequence[str]) -> _Gathered:
        """The live postings of ``terms`` gathered in the terms' order: their rows, term frequencies (as
        floats) and terms (positions in ``terms``), and how many live postings each term has; read-only.
        Gathered before any arithmetic, so that a search makes a few operations over them all instead of a
        few per term: each operation over more than 500 values lets the interpreter go to another thread,
        and under load waits for its turn back (``benchmarks.recall_latency --beside``). The last
        gathering is kept until a text is indexed (``_gathered``)."""
        key, last = tuple(terms), self._gathered
        if last is not None and last[0] == self._changes and last[1] == key:
            return last[2]
        found = [(at, postings) for at, term in enumerate(terms) if (postings := self._postings.get(term))]
        sizes = [len(postings[0]) for _, postings in found]

        def gathered(part: int) -> np.ndarray:
            if not found:
                return np.zeros(0, dtype=np.int32)
            return np.concatenate([np.frombuffer(postings[part], dtype=np.int32) for _, postings in found])

        rows = gathered(0)
        term_of = np.repeat(np.array([at for at, _ in found], dtype=np.int64), sizes)
        live = gathered(2) == self._generation[rows]
        rows, term_of = rows[live], term_of[live]
        frequencies = gathered(1)[live].astype(np.float64)
        for part in (rows, frequencies, term_of):
            part.flags.writeable = False
        result = (rows, frequencies, term_of, tuple(np.bincount(term_of, minlength=len(terms)).tolist()))
        self._gathered = (self._changes, key, result)
        return result

    def _drop(self, row: int) -> None:
        length = float(self._length[row])
        if length > 0:
            self._documents -= 1
            self._total_length -= length
        stale = int(self._distinct[row])
        self._live_postings -= stale
        self._stale_postings += stale
        self._length[row] = 0.0
        self._distinct[row] = 0

    def _compact(self) -> None:
        for term, (rows, frequencies, generations) in list(self._postings.items()):
            row_array = np.frombuffer(rows, dtype=np.int32)
            live = np.frombuffer(generations, dtype=np.int32) == self._generation[row_array]
            if live.all():
                continue
            if not live.any():
                del self._postings[term]
                continue
            self._postings[term] = (
                array("i", row_array[live].tolist()),
                array("i", np.frombuffer(frequencies, dtype=np.int32)[live].tolist()),
                array("i", np.frombuffer(generations, dtype=np.int32)[live].tolist()),
            )
        self._stale_postings = 0

    def _grow(self, rows: int) -> None:
        capacity = len(self._generation)
        if rows <= capacity:
            return
        size = max(rows, capacity * 2, 64)
        self._generation = np.concatenate([self._generation, np.zeros(size - capacity, dtype=np.int32)])
        self._length = np.concatenate([self._length, np.zeros(size - capacity, dtype=np.float32)])
        self._text_key = np.concatenate([self._text_key, np.zeros(size - capacity, dtype=np.int64)])
        self._distinct = np.concatenate([self._distinct, np.zeros(size - capacity, dtype=np.int32)])


def idf(documents: int, holding: int) -> float:
    """Lucene's idf of a term ``holding`` of ``documents`` rows hold, over at least ``MIN_DOCUMENTS``."""
    documents = max(documents, MIN_DOCUMENTS)
    return math.log(1.0 + (documents - holding + 0.5) / (holding + 0.5))
