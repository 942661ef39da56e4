"""64-bit SimHash near-duplicate detection, for corroboration and consolidation.

Whitespace tokens with punctuation stripped (lower-cased), each hashed to a stable 64-bit value with
BLAKE2b (never Python's per-process salted ``hash()``), combined by bit-sign voting. Two memories are
near-duplicates when their fingerprints differ in at most 3 bits.

Finding those pairs is not a pairwise scan: split the 64 bits into 4 blocks of 16; two fingerprints
within Hamming distance 3 agree exactly on at least one block (pigeonhole), so only memories sharing
a block value are compared.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

MAX_DISTANCE = 3
BLOCKS = 4
BLOCK_BITS = 64 // BLOCKS
# Above this many members a block bucket is compared in row chunks, to bound memory.
_CHUNK = 2_048


_PUNCTUATION_TABLE_LIMIT = 65_536


class _PunctuationTable(dict[int, int | None]):
    """A ``str.translate`` table that deletes Unicode punctuation (categories P*): each code point is
    classified the first time ``translate`` meets it, then looked up in C. (Classifying every code
    point up front took 0.2-0.9 s, paid by the first write of every process.)"""

    def __missing__(self, point: int) -> int | None:
        kept = None if unicodedata.category(chr(point)).startswith("P") else point
        if len(self) < _PUNCTUATION_TABLE_LIMIT:  # text of every script at once stays bounded
            self[point] = kept
        return kept


_PUNCTUATION = _PunctuationTable()


def simhash_tokens(text: str) -> list[str]:
    """Whitespace-separated tokens with punctuation removed, lowercased; empty ones dropped."""
    return [token for token in (raw.translate(_PUNCTUATION).lower() for raw in text.split()) if token]


def _token_digest(token: str) -> bytes:
    return hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()


@lru_cache(maxsize=262_144)
def token_hash(token: str) -> int:
    return int.from_bytes(_token_digest(token), "little")


# Byte value -> its 8 bits as 8 bytes of 0 or 1, least significant bit first.
_SPREAD = [bytes((value >> bit) & 1 for bit in range(8)) for value in range(256)]


@lru_cache(maxsize=262_144)
def _token_lanes(token: str) -> int:
    """``token_hash(token)`` spread out to one byte per bit: bit i becomes byte i (0 or 1). Summing these
    for up to 255 tokens counts, in byte i, how many tokens have bit i set."""
    return int.from_bytes(b"".join([_SPREAD[byte] for byte in _token_digest(token)]), "little")


@lru_cache(maxsize=256)
def _majority_table(count: int) -> bytes:
    """A ``bytes.translate`` table: a vote count -> b"1" where it is a majority of ``count`` tokens."""
    return bytes(ord("1") if votes * 2 > count else ord("0") for votes in range(256))


_LANE_LIMIT = 255  # a byte lane holds counts up to 255


def simhash(text: str) -> int:
    """The unsigned 64-bit fingerprint of ``text`` (0 for text with no tokens)."""
    tokens = simhash_tokens(text)
    if not tokens:
        return 0
    if len(tokens) <= _LANE_LIMIT:
        # The bit votes of every token at once, in Python's big integers (a memory's few dozen tokens
        # cost 3-4 us this way, against about 15 us of numpy calls): byte i of the sum counts bit i.
        votes = sum(map(_token_lanes, tokens)).to_bytes(64, "little")
        return int(votes.translate(_majority_table(len(tokens)))[::-1], 2)
    return _simhash_votes(tokens)


def _simhash_votes(tokens: list[str]) -> int:
    """The same fingerprint for any number of tokens, with numpy."""
    hashes = np.fromiter((token_hash(token) for token in tokens), dtype=np.uint64, count=len(tokens))
    # Bit i of every hash, little-endian, as a (tokens, 64) 0/1 matrix; a bit is set where most vote 1.
    bits = np.unpackbits(hashes.astype("<u8").view(np.uint8), bitorder="little").reshape(len(tokens), 64)
    majority = bits.sum(axis=0, dtype=np.int64) * 2 > len(tokens)
    return int.from_bytes(np.packbits(majority, bitorder="little").tobytes(), "little")


def hamming(left: int, right: int) -> int:
    return (left ^ right).bit_count()


def near_duplicate_pair_arrays(
    fingerprints: Sequence[int] | np.ndarray, max_distance: int = MAX_DISTANCE
) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) whose fingerprints differ in at most ``max_distance`` bits, as two aligned
    index arrays (left < right), without building Python tuples."""
    if max_distance >= BLOCKS:
        raise ValueError(
            f"block search finds distances up to {BLOCKS - 1} bits, but got max_distance={max_distance}"
        )
    values = np.asarray([int(value) for value in fingerprints], dtype=np.uint64)
    found: list[np.ndarray] = []
    for block in range(BLOCKS) if len(values) > 1 else ():
        keys = (values >> np.uint64(block * BLOCK_BITS)) & np.uint64(0xFFFF)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, len(order)])
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
            members = order[start : start + size]
            for chunk in range(0, size, _CHUNK):
                rows = members[chunk : chunk + _CHUNK]
                distances = np.bitwise_count(values[rows][:, None] ^ values[members][None, :])
                row, column = np.nonzero(distances <= max_distance)
                first, second = rows[row], members[column]
                keep = first < second
                found.append(first[keep].astype(np.int64) * len(values) + second[keep])
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    # A pair can share several blocks; encode (i, j) as one integer to deduplicate.
    codes = np.unique(np.concatenate(found))
    return codes // len(values), codes % len(values)


def connected_components(count: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A component label per index (the smallest index in its component), by min-label propagation."""
    labels = np.arange(count, dtype=np.int64)
    if len(left) == 0:
        return labels
    while True:
        smaller = np.minimum(labels[left], labels[right])
        before = labels.copy()
        np.minimum.at(labels, left, smaller)
        np.minimum.at(labels, right, smaller)
        labels = labels[labels]  # pointer jumping
        if np.array_equal(labels, before):
            return labels
