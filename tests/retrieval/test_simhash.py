import itertools
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.simhash import hamming, near_duplicate_pair_arrays, simhash, simhash_tokens, token_hash


def bits(*positions: int) -> int:
    return sum(1 << position for position in positions)


def near_duplicate_pairs(values: list[int]) -> set[tuple[int, int]]:
    left, right = near_duplicate_pair_arrays(values)
    return set(zip(left.tolist(), right.tolist(), strict=True))


def test_tokens_split_on_whitespace_and_drop_punctuation_and_case():
    assert simhash_tokens("We use Postgres, not MySQL!  (really)") == [
        "we",
        "use",
        "postgres",
        "not",
        "mysql",
        "really",
    ]


def test_punctuation_of_any_script_is_dropped_and_letters_and_symbols_of_any_script_are_kept():
    # Classified as each character is first met: Unicode P* categories only (¿ « » — 。 「 」 are
    # punctuation; € and + are symbols, kept; ß, é and 日本 are letters).
    assert simhash_tokens("¿Qué? «straße» — 日本。 「café」 €5 +1") == [
        "qué",
        "straße",
        "日本",
        "café",
        "€5",
        "+1",
    ]
    assert simhash_tokens("¿Qué? «straße»") == ["qué", "straße"]  # the same once the table knows them


def test_fingerprint_ignores_punctuation_case_and_spacing():
    assert simhash("We use Postgres for billing.") == simhash("we  use postgres for billing")
    assert simhash("") == 0 and simhash("!!! ...") == 0


def test_token_hash_is_stable_across_processes():
    code = "from retrieval.simhash import simhash; print(simhash('the deploy script lives in scripts'))"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert int(other) == simhash("the deploy script lives in scripts")
    assert token_hash("postgres") == token_hash("postgres") < 2**64


def test_bit_sign_voting_follows_the_majority_of_token_hashes():
    # Three copies of one token and one other: every bit takes the repeated token's value.
    assert simhash("alpha alpha alpha beta") == token_hash("alpha")


def majority_of_token_bits(text: str) -> int:
    """The seed's definition, bit by bit: bit i is set when more than half the tokens' hashes set it."""
    tokens = simhash_tokens(text)
    return sum(
        1 << bit
        for bit in range(64)
        if 2 * sum((token_hash(token) >> bit) & 1 for token in tokens) > len(tokens)
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["deploy", "billing", "Postgres", "queue", "a", "b", "c!", "x1"]), max_size=700)
)
def test_fingerprint_is_the_majority_of_token_bits_for_short_and_long_texts(words):
    # Up to 255 tokens take one path (counts in byte lanes) and longer texts another (numpy): both must
    # agree with the definition, including ties (an even split leaves the bit unset).
    text = " ".join(words)
    assert simhash(text) == majority_of_token_bits(text)


def test_an_even_split_of_votes_leaves_the_bit_unset():
    assert simhash("alpha beta") == token_hash("alpha") & token_hash("beta")
    long_text = " ".join(["alpha", "beta"] * 200)  # 400 tokens: the numpy path
    assert simhash(long_text) == token_hash("alpha") & token_hash("beta")


def test_hamming_distance_three_is_a_near_duplicate_and_four_is_not():
    # One differing bit in each of three 16-bit blocks: the fourth block is identical, so the pair is found.
    three = bits(0, 16, 32)
    four = bits(0, 16, 32, 48)
    assert hamming(0, three) == 3 and hamming(0, four) == 4
    assert near_duplicate_pairs([0, three]) == {(0, 1)}
    assert near_duplicate_pairs([0, four]) == set()
    assert near_duplicate_pairs([0, bits(1, 2, 3)]) == {(0, 1)}  # all three differences in one block


def test_pairs_chain_only_through_actual_neighbours():
    values = [0, bits(0, 1, 2), bits(0, 1, 2, 3, 4, 5)]  # 0-1: 3 bits, 1-2: 3 bits, 0-2: 6 bits
    assert near_duplicate_pairs(values) == {(0, 1), (1, 2)}


def brute_force(values: list[int], limit: int = 3) -> set[tuple[int, int]]:
    return {
        (i, j)
        for i, j in itertools.combinations(range(len(values)), 2)
        if hamming(values[i], values[j]) <= limit
    }


@settings(max_examples=150, deadline=None)
@given(
    seeds=st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=12),
    flips=st.lists(st.lists(st.integers(min_value=0, max_value=63), max_size=5), max_size=30),
)
@pytest.mark.slow
def test_block_search_finds_exactly_what_a_full_pairwise_scan_finds(seeds, flips):
    values = list(seeds)
    for index, positions in enumerate(flips):
        base = seeds[index % len(seeds)]
        values.append(base ^ bits(*set(positions)))
    assert near_duplicate_pairs(values) == brute_force(values)


@settings(max_examples=100, deadline=None)
@given(edges=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 19)), max_size=40))
def test_components_label_every_index_with_the_smallest_index_it_is_connected_to(edges):
    import numpy as np

    from retrieval.simhash import connected_components
    from retrieval.stages.corroboration import UnionFind

    pairs = [(a, b) for a, b in edges if a != b]
    left = np.array([a for a, _ in pairs], dtype=np.int64)
    right = np.array([b for _, b in pairs], dtype=np.int64)
    labels = connected_components(20, left, right).tolist()
    sets = UnionFind()
    for item in range(20):
        sets.add(f"{item:02d}")
    for a, b in pairs:
        sets.union(f"{a:02d}", f"{b:02d}")
    expected = [min(int(x) for x in sets.members_of(sets.find(f"{i:02d}"))) for i in range(20)]
    assert labels == expected
