from __future__ import annotations

from pathlib import Path

import pytest

# shared/ sits beside the checkout (../shared) in CI and in the lead's tree
_CANDIDATES = (
    Path(__file__).resolve().parents[2].parent / "shared" / "captures" / "vrpn",
    Path("/work/shared/captures/vrpn"),
)
CAPTURES = next((c for c in _CANDIDATES if c.exists()), _CANDIDATES[0])


@pytest.fixture(scope="session")
def captures() -> Path:
    if not CAPTURES.exists():
        pytest.skip("shared/captures/vrpn is not beside this checkout")
    return CAPTURES
