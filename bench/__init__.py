"""gatewright's benchmarks (not tests): `python -m bench` prints one table. See docs/performance.md."""
