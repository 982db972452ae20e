"""The event loop: uvloop when it is installed (faster sockets), asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
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


def start_now(main: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """Run `main` now, up to the first time it waits, and the rest as a task; its outcome.

    What Python 3.12's eager tasks do, for 3.11: a task made with `create_task` first runs
    after everything already queued on the loop, which on a loaded gateway is a whole round
    of it later (a command sent from the viewer went out 15-40 ms later for that alone). The
    part before the first wait runs as the caller's own (`asyncio.current_task()` is the
    caller's there), so it must not start a timeout (`asyncio.timeout`) before it waits."""
    try:
        waiting = main.send(None)
    except StopIteration as done:
        finished: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        finished.set_result(done.value)
        return finished
    except Exception as exc:
        failed: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        failed.set_exception(exc)
        return failed
    return asyncio.ensure_future(_resumed(main, waiting))


@types.coroutine
def _resumed(main: Coroutine[Any, Any, T], waiting: Any) -> Generator[Any, Any, T]:
    """`main`, which `start_now` ran up to a wait for `waiting`, from there on: the task
    running this hands `main` what it is sent or thrown (a cancellation) as `main`'s own
    task would."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            main.close()
            raise
        except BaseException as exc:
            try:
                waiting = main.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                waiting = main.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
