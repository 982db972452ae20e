"""Fixtures of the viewer's browser tests: robowire CLI processes and Debian's chromium."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from robowire.viewer.browser import launch, missing
from support import Process


@pytest.fixture(scope="module")
def cli() -> Iterator[Callable[..., Process]]:
    """Start `robowire ARGS…` processes; all are ended when the module's tests are done."""
    started: list[Process] = []

    def start(*args: str) -> Process:
        started.append(Process(*args))
        return started[-1]

    yield start
    for proc in reversed(started):
        proc.stop()


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def free_udp_port() -> Callable[[], int]:
    """A UDP port on 127.0.0.1 that was free a moment ago (for a source that binds it)."""
    return _free_udp_port


class Viewer:
    """A page on a running viewer, with the console errors it has logged."""

    def __init__(self, page: Any, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.goto(url)

    def _console(self, message: Any) -> None:
        # errors, and WebGL's complaints (chromium logs those as warnings)
        if message.type == "error" or re.search(r"GL_INVALID|WebGL: ", message.text):
            self.errors.append(f"console {message.type}: {message.text}")

    def js(self, expression: str, arg: Any = None) -> Any:
        return self.page.evaluate(expression, arg)

    def wait(
        self, expression: str, arg: Any = None, timeout: float = 60.0, every: float | None = None
    ) -> Any:
        """Wait until the JavaScript `expression` is truthy in the page (checked each animation
        frame, or `every` seconds); generous, as `support.until` (a loaded 2-core machine took
        more than 20 s to list 30 drones in a page that had just opened)."""
        polling: Any = "raf" if every is None else every * 1000
        return self.page.wait_for_function(
            expression, arg=arg, timeout=timeout * 1000, polling=polling
        )


@pytest.fixture(scope="module")
def open_viewer(browser: Any) -> Callable[[str], Viewer]:
    """Open a 1280x800 page on a viewer URL."""

    def open_page(url: str) -> Viewer:
        return Viewer(browser.new_page(viewport={"width": 1280, "height": 800}), url)

    return open_page


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium through Playwright (skips, saying how to install it, when missing)."""
    if reason := missing():
        pytest.skip(f"{reason}; .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = launch(pw)
        try:
            yield browser
        finally:
            browser.close()
