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


def session_modules(protocols: Path) -> list[str]:
    """The sans-I/O contract's entries for the `session_<role>` modules under `protocols`
    (import-linter's wildcards replace whole module names only: `*.session_*` is refused)."""
    return sorted(
        f"robowire.protocols.{path.parent.name}.{path.stem}"
        for path in protocols.glob("*/session_*.py")
    )


def test_every_session_module_is_held_to_sans_io() -> None:
    """pyproject.toml names each `session_<role>` module, and no module that is gone: the
    message says the lines to write."""
    sources = contracts()["forbidden"]["source_modules"]
    protocols = ROOT / "src" / "robowire" / "protocols"
    named = [s for s in sources if "*" not in s]
    missing = [m for m in session_modules(protocols) if m not in named]
    assert not missing, "add to source_modules in pyproject.toml: " + ", ".join(
        f'"{m}"' for m in missing
    )
    gone = [m for m in named if not (ROOT / "src" / f"{m.replace('.', '/')}.py").exists()]
    assert not gone, f"source_modules names modules that are gone: {gone}"
