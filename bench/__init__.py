"""robowire benchmarks: `make bench` runs every `bench/bench_*.py` module's `main()`."""

QUICK = False  # `python -m bench --quick`: modules shorten their windows
