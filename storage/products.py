"""A scope copy's products of its vector matrix with a query, on threads that sleep while they wait.

numpy's OpenBLAS splits a product over threads of its own, which then wait for the next one by spinning
for about a tenth of a second. Every write compares its new memory with its scope's vectors (a
matrix-vector product), so a server writing one memory at a time kept a core of this 2-core machine
spinning beside LanceDB's threads: in a `perf` profile of writes 2,100-2,400 (one at a time, in process),
47% of the process's samples were OpenBLAS threads waiting, and those writes ran at 0.44-0.59x the rate of
the first 300 (docs/benchmarks.md, "numpy's spinning threads"). The server so runs numpy's BLAS on the
calling thread (``single_blas_thread``), and ``matrix_product`` splits a product of at least
``PARALLEL_ROWS`` rows (times queries) over this module's own workers, which sleep while idle, so that a
large scope's recall keeps both cores.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Below this many products of a row with a query, a product takes well under a millisecond on one thread
# (0.4-0.7 ms at 10,000 x 384): handing parts to other threads costs more than it saves. 100,000 x 384: 15.4 ms
# on one thread, 8.1 on two. A group commit's products (``ScopeCopy.prime``) count each of its queries.
PARALLEL_ROWS = 32_768

_workers: ThreadPoolExecutor | None = None
_workers_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _workers
    with _workers_lock:
        if _workers is None:  # one worker fewer than the cores: the caller computes a part too
            cores = os.cpu_count() or 1
            _workers = ThreadPoolExecutor(
                max_workers=max(1, cores - 1), thread_name_prefix="memoria-products"
            )
        return _workers


def parts_for(rows: int, queries: int = 1, cores: int | None = None) -> int:
    """How many parts a product of ``rows`` rows with ``queries`` queries is split into: one below
    ``PARALLEL_ROWS`` rows times queries, else one per core, each of at least half of that."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    work = rows * max(1, queries)
    if work < PARALLEL_ROWS:
        return 1
    return max(1, min(cores, rows, work // (PARALLEL_ROWS // 2)))


def matrix_product(matrix: np.ndarray, query: np.ndarray, *, parts: int | None = None) -> np.ndarray:
    """``matrix @ query`` (a vector, or the columns of a matrix), with its rows split into ``parts`` (by
    default ``parts_for``) computed at once: the first here, the others on the module's workers (numpy lets
    go of the interpreter lock while it multiplies)."""
    rows = matrix.shape[0]
    queries = query.shape[1] if query.ndim == 2 else 1
    parts = parts_for(rows, queries) if parts is None else max(1, min(parts, rows))
    if parts == 1:
        return matrix @ query
    out = np.empty((rows, *query.shape[1:]), dtype=np.result_type(matrix, query))
    bounds = [rows * part // parts for part in range(parts + 1)]

    def part(index: int) -> None:
        start, end = bounds[index], bounds[index + 1]
        np.matmul(matrix[start:end], query, out=out[start:end])

    workers = _pool()
    pending = [workers.submit(part, index) for index in range(1, parts)]
    part(0)
    for each in pending:
        each.result()
    return out


def single_blas_thread() -> None:
    """Run numpy's BLAS (and any other BLAS library loaded) on the calling thread, for the whole process
    (see the module's docstring)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def row_dots(vectors: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``vectors[left[i]] . vectors[right[i]]`` for each i, 0 where either index is -1; in blocks, so that
    no copy of the whole matrix is made."""
    dots = np.zeros(len(left), dtype=np.float32)
    for start in range(0, len(left), 8192):
        a, b = left[start : start + 8192], right[start : start + 8192]
        both = (a >= 0) & (b >= 0)
        dots[start : start + 8192][both] = np.einsum("ij,ij->i", vectors[a[both]], vectors[b[both]])
    return dots
