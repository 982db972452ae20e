"""Coverage-guided fuzzing of every decoder and session with atheris (libFuzzer).

`python -m fuzz --list`, `python -m fuzz TARGET... --time 60`, `python -m fuzz --all --time 30`
(`make fuzz`). The targets, seeds and contract are tests/fuzzing.py's, shared with the
hypothesis suite in `make test`; see docs/reliability.md, "Fuzzing".
"""
