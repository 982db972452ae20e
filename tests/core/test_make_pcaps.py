"""`tools/make_pcaps.py` writes its pcaps anywhere (`--out` outside the repository) and
reproduces every pcap of tests/data/captures it makes byte for byte: the committed captures
are what the tool writes, not files no one can make again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "captures"
RECORDED = {"vrpn/tcp_tracker.pcap"}  # recorded from the mainline VRPN peers (captures/README)


def test_make_pcaps_writes_outside_the_repository_every_committed_pcap_byte_for_byte(
    tmp_path: Path,
) -> None:
    out = tmp_path / "captures"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_pcaps.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    written = {str(p.relative_to(out)) for p in out.rglob("*.pcap")}
    committed = {str(p.relative_to(CAPTURES)) for p in CAPTURES.rglob("*.pcap")}
    assert written == committed - RECORDED
    for name in sorted(written):
        assert (out / name).read_bytes() == (CAPTURES / name).read_bytes(), name
    assert str(out) in result.stdout  # said where, as given
