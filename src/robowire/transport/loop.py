"""The event loop: uvloop when it is installed (faster sockets), asyncio's own otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a fresh (uv)loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
