"""The import-linter contracts `make lint` checks: the layer diagram of docs/architecture.md,
and sans-I/O protocol cores."""

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def diagram_layers() -> list[str]:
    """The layers the diagram names, highest first (a line's text before its description)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("robowire is layered", 1)[1].split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line and not line[0].isspace()]
    return [re.split(r"\s{2,}", line, maxsplit=1)[0] for line in lines]


def contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["type"]: c for c in config["contracts"]}


def test_the_diagram_is_the_contract() -> None:
    contract = contracts()["layers"]
    assert contract["exhaustive"] is True  # a module no layer names fails too
    assert diagram_layers() == contract["layers"]


def test_every_session_module_is_held_to_sans_io() -> None:
    sources = set(contracts()["forbidden"]["source_modules"])
    protocols = ROOT / "src" / "robowire" / "protocols"
    for path in protocols.glob("*/session*.py"):
        name = f"robowire.protocols.{path.parent.name}.{path.stem}"
        assert name in sources or f"robowire.protocols.*.{path.stem}" in sources, name
