"""Debian's chromium driven by Playwright: how the browser tests, the browser bench and
`tools/screenshot.py` open the viewer. Playwright never downloads a browser here; it launches
the one `apt-get install chromium` puts at /usr/bin/chromium (`.ci/run` installs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
MISSING = "Debian chromium not installed: apt-get install chromium"

# As root (no sandbox), and quiet on a machine with no outside network: no background
# connections, updates, sync or QUIC that would be refused at every start.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)


def missing() -> str | None:
    """Why the browser cannot be launched here (None: it can)."""
    return None if Path(CHROMIUM).exists() else MISSING


def launch(playwright: Any) -> Any:
    """A headless chromium from a `sync_playwright()` (or async) context."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
