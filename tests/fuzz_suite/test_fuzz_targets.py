"""Every decoder and every session of every protocol (and the zenoh codec, the viewer's
frames, MCAP recordings and pcap captures) fed random bytes and mutated real captures in
random chunkings: only typed errors escape a decoder, nothing escapes a session.

The targets, seeds and mutators are in tests/fuzzing.py (shared with `python -m fuzz`).
Derandomized so CI is reproducible; `FUZZ_EXAMPLES=500 pytest tests/fuzz_suite` digs deeper.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzing import CRASHES, TARGETS, Target, mutate

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

cuts = st.lists(st.integers(1, 97), max_size=6)


@st.composite
def inputs(draw: st.DrawFn, fuzz_target: Target) -> bytes:
    seeds = fuzz_target.seeds()
    if draw(st.booleans()):
        return draw(st.binary(max_size=512))
    seed = seeds[draw(st.integers(0, len(seeds) - 1))]
    rng = random.Random(draw(st.integers(0, 2**32)))
    return mutate(seed, seeds, rng)


def test_every_target_has_seeds_from_real_data() -> None:
    assert len(TARGETS) >= 21
    for fuzz_target in TARGETS.values():
        assert fuzz_target.seeds() and all(fuzz_target.seeds()), fuzz_target.name


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_run_clean_whole_and_byte_by_byte(name: str) -> None:
    fuzz_target = TARGETS[name]
    for seed in fuzz_target.seeds():
        fuzz_target.run(seed, [])
        fuzz_target.run(seed[:600], [1])


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_random_and_mutated_bytes_in_random_chunks(name: str) -> None:
    fuzz_target = TARGETS[name]

    @FUZZ
    @given(data=inputs(fuzz_target), chunking=cuts)
    def run(data: bytes, chunking: list[int]) -> None:
        fuzz_target.run(data, chunking)

    run()


def crash_files() -> list[Path]:
    return sorted(p for p in CRASHES.glob("*/*") if p.is_file())


@pytest.mark.parametrize("path", crash_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_inputs_a_fuzzer_once_crashed_on_are_handled(path: Path) -> None:
    TARGETS[path.parent.name].run(path.read_bytes(), [])
    TARGETS[path.parent.name].run(path.read_bytes(), [3])
