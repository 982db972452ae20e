"""The license pyproject.toml names (BSD-3-Clause) is in the repository and ships in the
built wheel (`.dist-info/licenses/LICENSE`, where PEP 639 puts it) and the sdist: both built
here with the project's own build backend, each opened with the standard library."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(kind: str, out: Path) -> Path:
    """`hatchling build -t KIND` of the checkout (no network: the backend is installed)."""
    result = subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", kind, "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1795336000"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (built,) = out.glob("*.whl" if kind == "wheel" else "*.tar.gz")
    return built


def test_pyproject_names_the_license_whose_text_the_repository_has() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "Neither the name of the copyright holder nor the names of its" in text


def test_the_wheel_and_the_sdist_carry_the_license(tmp_path: Path) -> None:
    text = (ROOT / "LICENSE").read_bytes()
    wheel = build("wheel", tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (licensed,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licensed) == text
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
        assert "License-Expression: BSD-3-Clause" in lines
        assert "License-File: LICENSE" in lines
    sdist = build("sdist", tmp_path)
    with tarfile.open(sdist) as archive:
        (member,) = [m for m in archive.getmembers() if m.name.endswith("/LICENSE")]
        found = archive.extractfile(member)
        assert found is not None and found.read() == text
