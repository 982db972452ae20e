"""Every ```python block of README.md and docs/*.md runs, as a reader would paste it.

An HTML comment just before a block says how: `<!-- snippet: sim PROTOCOL | OLD -> NEW -->`
runs `robowire sim PROTOCOL` on a free port first and replaces OLD by NEW in the block (`{port}`
is the simulator's port); `<!-- snippet: run | OLD -> NEW -->` runs it with only the
replacements; `<!-- snippet: skip REASON -->` marks a block that cannot run here, saying why.
A block without a comment runs as it is. Blocks with top-level `await` run in an event loop.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.api.simulators import simulator

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- snippet: (?P<how>.*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    how: str
    code: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets() -> list[Snippet]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            found.append(Snippet(path, line, match.group("how") or "run", match.group("code")))
    return found


def run_block(code: str) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, "<snippet>", "exec", flags=flags)
    scope: dict[str, object] = {"__name__": "__snippet__"}
    result = eval(compiled, scope)
    if inspect.iscoroutine(result):
        asyncio.run(asyncio.wait_for(result, 60))


def test_the_docs_have_python_snippets() -> None:
    assert len(snippets()) >= 5  # the README's connect, publish and VSM, ugcs.md, xrp.md


@pytest.mark.parametrize("snippet", snippets(), ids=str)
def test_snippet_runs(snippet: Snippet, monkeypatch: pytest.MonkeyPatch) -> None:
    how, *replacements = (part.strip() for part in snippet.how.split("|"))
    if how.startswith("skip"):
        pytest.skip(how.removeprefix("skip").strip() or "marked not runnable")
    monkeypatch.chdir(ROOT)  # paths in the docs are the repository's

    def prepared(port: int) -> str:
        code = snippet.code
        for replacement in replacements:
            old, _, new = replacement.partition(" -> ")
            assert old in code, f"{snippet}: {old!r} is not in the block"
            code = code.replace(old, new.replace("{port}", str(port)))
        return code

    if how.startswith("sim "):
        with simulator(how.split()[1]) as (_, port):
            run_block(prepared(port))
    else:
        assert how == "run", f"{snippet}: unknown snippet marker {how!r}"
        run_block(prepared(0))
