"""`make docs` builds the API reference from the docstrings without a warning."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"API_MODULES := (.*?)\n\S", makefile, re.S)
    assert listed is not None
    modules = listed.group(1).replace("\\", " ").split()
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "pdoc", "-o", str(tmp_path), *modules],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    page = (tmp_path / "robowire" / "live.html").read_text()
    assert "def connect" in page or "connect" in page
    assert (tmp_path / "robowire" / "protocols" / "ugcs" / "vsm.html").is_file()
