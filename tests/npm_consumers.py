"""Running the third-party JavaScript consumers in tests/js (Foxglove's `@foxglove/ws-protocol`
client, `@mcap/core`'s readers) from a test: `node tests/js/SCRIPT.mjs ARGS…`, whose one line
of JSON is returned. They are installed by `make test` (`npm ci` from tests/js's lockfile); a
missing install fails the test with how to install it, it never skips."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

JS = Path(__file__).resolve().parent / "js"
INSTALL = f"cd {JS} && npm ci (make test does it)"


def _command(script: str, args: tuple[str, ...]) -> list[str]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (apt-get install nodejs npm)"
    assert (JS / "node_modules" / ".package-lock.json").is_file(), f"not installed: {INSTALL}"
    return [node, str(JS / script), *args]


def _result(script: str, out: bytes, err: bytes) -> dict[str, Any]:
    text = out.decode().strip()
    assert text, f"{script} printed nothing; it said: {err.decode()}"
    result: dict[str, Any] = json.loads(text.splitlines()[-1])
    return result


async def run_node(script: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """The JSON a tests/js script printed (run without blocking the event loop, so a
    gateway in this process keeps serving it)."""
    process = await asyncio.create_subprocess_exec(
        *_command(script, args), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return _result(script, out, err)


def run_node_sync(script: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """`run_node` for a test without an event loop."""
    return asyncio.run(run_node(script, *args, timeout=timeout))
