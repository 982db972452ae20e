from __future__ import annotations

from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parents[2].parent.parent / "shared" / "captures" / "vrpn"
for candidate in (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "captures" / "vrpn",
    Path("/work/shared/captures/vrpn"),
):
    if candidate.exists():
        CAPTURES = candidate.resolve()
        break


@pytest.fixture(scope="session")
def captures() -> Path:
    if not CAPTURES.exists():
        pytest.skip("shared/captures/vrpn is not beside this checkout")
    return CAPTURES
