"""Loaded by a server started with this folder on its PYTHONPATH (``benchmarks.load --trace-writes``): times
its write path into the file ``MEMORIA_BENCH_WRITE_PROBE`` names (``benchmarks.write_probe``)."""

import os

if os.environ.get("MEMORIA_BENCH_WRITE_PROBE"):
    from benchmarks.write_probe import install_when_loaded

    install_when_loaded(os.environ["MEMORIA_BENCH_WRITE_PROBE"])
