"""Benchmarks for callscreen: `python -m bench.run` drives the real service and writes docs/benchmarks.md."""
