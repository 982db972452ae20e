"""The layer diagram in docs/architecture.md is the import-linter contract `make lint` checks."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def diagram_layers() -> list[str]:
    """The layers the diagram names, highest first (a line's text before its description)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("robowire is layered", 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line and not line[0].isspace()]
    return [re.split(r"\s{2,}", line, maxsplit=1)[0] for line in lines]


def test_the_diagram_is_the_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    assert contract["type"] == "layers"
    assert contract["exhaustive"] is True  # a module no layer names fails too
    assert diagram_layers() == contract["layers"]
