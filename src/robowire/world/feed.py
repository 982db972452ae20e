"""The change feed: every world change goes to every subscriber's own bounded queue.

A subscriber that falls behind loses its *oldest* items, and the loss is counted; publishing
never blocks, never waits for a subscriber and never grows memory beyond the bounds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_QUEUE = 10_000


class Subscription(Generic[T]):
    """One subscriber's bounded queue. Iterate it with `async for`, or poll with `drain()`."""

    def __init__(self, feed: ChangeFeed[T], maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError("a subscription needs room for at least one item")
        self._feed = feed
        self._queue: deque[T] = deque(maxlen=maxlen)
        self._wakeup: asyncio.Event | None = None
        self.dropped = 0
        self.closed = False

    def _put(self, item: T) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1  # deque(maxlen) pushes the oldest out on append
        self._queue.append(item)
        if self._wakeup is not None:
            self._wakeup.set()

    def __len__(self) -> int:
        return len(self._queue)

    def drain(self) -> list[T]:
        """Everything queued so far, oldest first; the queue is empty afterwards."""
        items = list(self._queue)
        self._queue.clear()
        return items

    async def get(self) -> T:
        """The oldest queued item, waiting for one if the queue is empty."""
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._queue.popleft()

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await self.get()

    def close(self) -> None:
        """Stop receiving; a waiting `get` ends the iteration once the queue is empty."""
        self.closed = True
        self._feed._unsubscribe(self)
        if self._wakeup is not None:
            self._wakeup.set()

    def __enter__(self) -> Subscription[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChangeFeed(Generic[T]):
    """Fan-out of published items to independent bounded subscriptions."""

    def __init__(self) -> None:
        self._subscribers: list[Subscription[T]] = []
        self.published = 0

    def subscribe(self, maxlen: int = DEFAULT_QUEUE) -> Subscription[T]:
        sub = Subscription(self, maxlen)
        self._subscribers.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription[T]) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, item: T) -> None:
        self.published += 1
        for sub in self._subscribers:
            sub._put(item)
