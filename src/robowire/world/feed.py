"""The change feed: every world change goes to every subscriber, and no subscriber can slow
the producer or grow memory without bound.

Two kinds of subscriber share one interface (`await wait()`, then `pull()`):

* `Subscription`, a queue of every item (the recorder's kind). It is bounded in items and,
  where the feed knows item sizes, in bytes; a subscriber that falls behind loses its *oldest*
  items, and the loss is counted.
* `robowire.world.latest.LatestState` (the viewers', protocol sinks' and JSON lines' kind):
  which devices changed since the last pull, pulled as their latest values.

Publishing never blocks and never waits for a subscriber.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

DEFAULT_QUEUE = 10_000
DEFAULT_BYTES = 64 << 20  # a queue subscriber holds at most this much by default


class Subscriber(Protocol[T_contra]):
    """What the feed hands its items to."""

    def put(self, item: T_contra) -> None: ...


class Waiting:
    """What every subscriber shares: `wait()` returns once `pending()` is true or it closed;
    `notify()` (from `put`) wakes a waiting `wait()`."""

    _wakeup: asyncio.Event | None = None
    closed = False
    interrupted = False  # `interrupt()` was called: `wait()` returns at once

    def pending(self) -> bool:
        raise NotImplementedError

    def notify(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def interrupt(self) -> None:
        """Make `wait()` return now and from now on (the waiter has something else to see
        to: a sink whose server ended)."""
        self.interrupted = True
        self.notify()

    async def wait(self) -> None:
        """Return once something is there to pull (or the subscriber is closed, or
        interrupted)."""
        while not self.pending() and not self.closed and not self.interrupted:
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            self._wakeup.clear()
            await self._wakeup.wait()


class Subscription(Waiting, Generic[T]):
    """One subscriber's bounded queue. Iterate it with `async for`, or `wait()` and `pull()`."""

    def __init__(
        self,
        feed: ChangeFeed[T],
        maxlen: int,
        max_bytes: int | None = None,
        size_of: Callable[[T], int] | None = None,
    ) -> None:
        if maxlen < 1:
            raise ValueError("a subscription needs room for at least one item")
        self._feed = feed
        self._queue: deque[T] = deque(maxlen=maxlen)
        self._sizes: deque[int] = deque()
        self._size_of = size_of if max_bytes is not None else None
        self.max_bytes = max_bytes
        self.bytes = 0  # what the queued items hold, where sizes are known
        self.dropped = 0

    def put(self, item: T) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1  # deque(maxlen) pushes the oldest out on append
            if self._sizes:
                self.bytes -= self._sizes.popleft()
        self._queue.append(item)
        if self._size_of is not None and self.max_bytes is not None:
            size = self._size_of(item)
            self._sizes.append(size)
            self.bytes += size
            while self.bytes > self.max_bytes and len(self._queue) > 1:
                self._queue.popleft()
                self.bytes -= self._sizes.popleft()
                self.dropped += 1
        self.notify()

    def __len__(self) -> int:
        return len(self._queue)

    def drain(self) -> list[T]:
        """Everything queued so far, oldest first; the queue is empty afterwards."""
        items = list(self._queue)
        self._queue.clear()
        self._sizes.clear()
        self.bytes = 0
        return items

    def pull(self, limit: int | None = None, max_bytes: int | None = None) -> list[T]:
        """The oldest `limit` items queued (all with None), oldest first, off the queue; with
        `max_bytes` (where sizes are known), only as many as fit in that many bytes, but at
        least one."""
        queue, sizes = self._queue, self._sizes
        if max_bytes is not None and sizes:
            count, total = 1, sizes[0]
            for size in itertools.islice(sizes, 1, limit):
                total += size
                if total > max_bytes:
                    break
                count += 1
            limit = count
        if limit is None or limit >= len(queue):
            return self.drain()
        items = [queue.popleft() for _ in range(limit)]
        if sizes:
            self.bytes -= sum(sizes.popleft() for _ in range(limit))
        return items

    def pending(self) -> bool:
        return bool(self._queue)

    async def get(self) -> T:
        """The oldest queued item, waiting for one if the queue is empty."""
        await self.wait()
        if not self._queue:
            raise StopAsyncIteration
        if self._sizes:
            self.bytes -= self._sizes.popleft()
        return self._queue.popleft()

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await self.get()

    def close(self) -> None:
        """Stop receiving; a waiting `get` ends the iteration once the queue is empty."""
        self.closed = True
        self._feed.unsubscribe(self)
        self.notify()

    def __enter__(self) -> Subscription[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChangeFeed(Generic[T]):
    """Fan-out of published items to independent subscribers. `size_of` tells a queue
    subscriber with a byte bound what an item holds."""

    def __init__(self, size_of: Callable[[T], int] | None = None) -> None:
        self._subscribers: list[Subscriber[T]] = []
        self._size_of = size_of
        self.queues = 0  # queue subscribers: they need each item's own values
        self.published = 0

    def subscribe(
        self, maxlen: int = DEFAULT_QUEUE, max_bytes: int | None = None
    ) -> Subscription[T]:
        """A queue of every item from now on (bounded by `maxlen` items and `max_bytes`)."""
        sub = Subscription(self, maxlen, max_bytes, self._size_of)
        self._subscribers.append(sub)
        self.queues += 1
        return sub

    def attach(self, subscriber: Subscriber[T]) -> None:
        """Hand every item from now on to `subscriber` (a latest-state subscriber)."""
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber[T]) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)
            if isinstance(subscriber, Subscription):
                self.queues -= 1

    def backlog(self) -> int:
        """The most bytes any byte-bounded queue subscriber holds (0 if none is behind)."""
        return max((s.bytes for s in self._subscribers if isinstance(s, Subscription)), default=0)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, item: T) -> None:
        self.published += 1
        for sub in self._subscribers:
            sub.put(item)
