"""The benchmark suite: `make bench` (or `python -m bench --quick`); see docs/bench.md."""
