from __future__ import annotations

from pathlib import Path

import pytest

# the golden captures live in the repository (tests/data/README.md says where they came from)
CAPTURES = Path(__file__).parents[1] / "data" / "captures" / "vrpn"


@pytest.fixture(scope="session")
def captures() -> Path:
    assert CAPTURES.is_dir(), f"golden captures missing: {CAPTURES}"  # fails, never skips
    return CAPTURES
