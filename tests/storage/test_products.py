import json
import subprocess
import sys

import numpy as np

from storage.products import PARALLEL_ROWS, matrix_product, parts_for


def test_a_product_split_over_parts_is_the_whole_product():
    matrix = np.array([[1, 0], [0, 1], [1, 1], [2, -1], [0, 3]], dtype=np.float32)
    query = np.array([2, 3], dtype=np.float32)
    # by hand: 1*2 + 0*3, 0*2 + 1*3, 2 + 3, 4 - 3, 0 + 9
    expected = [2.0, 3.0, 5.0, 1.0, 9.0]
    for parts in (1, 2, 3, 5, 9):
        assert matrix_product(matrix, query, parts=parts).tolist() == expected


def test_a_product_with_several_queries_keeps_one_column_each():
    matrix = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    queries = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32).T  # columns: three queries
    product = matrix_product(matrix, queries, parts=2)
    assert product.tolist() == [[1, 2, 3], [3, 4, 7], [5, 6, 11]]


def test_a_large_product_matches_numpys():
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((PARALLEL_ROWS + 1_000, 16), dtype=np.float32)
    query = rng.standard_normal(16, dtype=np.float32)
    assert np.allclose(matrix_product(matrix, query), matrix @ query, atol=1e-5)


def test_only_a_product_of_many_rows_is_split():
    assert parts_for(PARALLEL_ROWS - 1, cores=2) == 1
    assert parts_for(PARALLEL_ROWS, cores=2) == 2
    assert parts_for(100_000, cores=2) == 2
    assert parts_for(100_000, cores=8) == 6  # 100,000 // 16,384: each part at least half of PARALLEL_ROWS
    assert parts_for(10**7, cores=8) == 8
    assert parts_for(10**7, cores=1) == 1


def test_a_group_commits_product_counts_each_query():
    assert parts_for(10_000, queries=3, cores=2) == 1  # 30,000 products
    assert parts_for(10_000, queries=4, cores=2) == 2  # 40,000
    assert parts_for(10_000, queries=64, cores=8) == 8
    assert parts_for(3, queries=10**6, cores=8) == 3  # never more parts than rows


def test_the_server_runs_numpys_blas_on_one_thread():
    # A process of its own: the limit holds for the whole process.
    script = (
        "from storage.products import single_blas_thread\n"
        "single_blas_thread()\n"
        "from threadpoolctl import threadpool_info\n"
        "import json\n"
        "print(json.dumps([each['num_threads'] for each in threadpool_info() if each['user_api'] == 'blas']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    threads = json.loads(done.stdout)
    assert threads and set(threads) == {1}
