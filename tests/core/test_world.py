import asyncio
import time

import numpy as np
import pytest

from robowire.world import ChangeFeed, LogEvent, Update, World


def test_update_device_creates_view_in_enu_with_units():
    world = World()
    world.update_device(
        "s",
        "7",
        receive_time=10.0,
        source_time=9.5,
        kind="sensor_node",
        position=(1.0, 2.0, 3.0),
        telemetry={"temp": (21.5, "Cel")},
        links=["8", "9"],
    )
    device = world.device("s", "7")
    assert device.kind == "sensor_node"
    assert device.position == (1.0, 2.0, 3.0)
    assert device.orientation is None and device.velocity is None
    assert device.telemetry == {"temp": (21.5, "Cel")}
    assert device.links == ("8", "9")
    assert (device.source_time, device.receive_time) == (9.5, 10.0)


def test_vectorised_update_writes_many_devices_and_publishes_one_update():
    world = World()
    sub = world.feed.subscribe()
    table = world.table("swarm")
    slots = table.slots((f"d{i}" for i in range(1000)), kind="drone")
    positions = np.arange(3000, dtype=float).reshape(1000, 3)
    update = world.update(
        "swarm",
        slots,
        receive_time=1.0,
        position=positions,
        telemetry={"battery": (np.full(1000, 0.5), "ratio")},
    )
    assert len(update) == 1000 and update.fields == {"position", "battery"}
    assert world.device("swarm", "d999").position == (2997.0, 2998.0, 2999.0)
    assert world.device("swarm", "d0").telemetry["battery"] == (0.5, "ratio")
    assert sub.drain() == [update]
    assert len(world) == 1000


def test_table_grows_and_keeps_existing_rows():
    world = World()
    for i in range(100):
        world.update_device("s", str(i), receive_time=float(i), position=(i, 0, 0))
    assert [d.position[0] for d in world.devices("s")] == list(range(100))  # type: ignore[index]


def test_orientation_is_only_reported_once_written():
    world = World()
    world.update_device("s", "a", receive_time=0, orientation=(0.0, 0.0, 0.0, 1.0))
    world.update_device("s", "b", receive_time=0, position=(0, 0, 0))
    assert world.device("s", "a").orientation == (0.0, 0.0, 0.0, 1.0)
    assert world.device("s", "b").orientation is None


def test_slow_subscriber_loses_oldest_and_counts_drops():
    feed: ChangeFeed[int] = ChangeFeed()
    slow = feed.subscribe(maxlen=10)
    fast = feed.subscribe(maxlen=1000)
    for i in range(100):
        feed.publish(i)
    assert slow.drain() == list(range(90, 100))
    assert slow.dropped == 90
    assert fast.drain() == list(range(100)) and fast.dropped == 0


async def test_slow_subscriber_does_not_slow_the_producer():
    world = World()
    slow = world.feed.subscribe(maxlen=100)
    received = []

    async def consume() -> None:
        async for item in slow:
            received.append(item)
            await asyncio.sleep(0.01)  # a consumer far slower than the producer

    consumer = asyncio.create_task(consume())
    table = world.table("s")
    slots = table.slots(["a"])
    start = time.perf_counter()
    for i in range(20_000):
        world.update("s", slots, receive_time=float(i))
        if i % 1000 == 0:
            await asyncio.sleep(0)  # let the consumer run now and then
    elapsed = time.perf_counter() - start
    consumer.cancel()
    # Publishing never waited for the consumer: it got only a few items, the rest were dropped,
    # and the queue never held more than its bound.
    assert len(received) < 200
    assert slow.dropped > 19_000
    assert len(slow) <= 100
    assert elapsed < 20_000 * 0.01 / 10  # far less than the consumer's pace would allow


async def test_subscription_iteration_ends_after_close():
    feed: ChangeFeed[int] = ChangeFeed()
    sub = feed.subscribe()
    feed.publish(1)
    sub.close()
    assert [item async for item in sub] == [1]
    feed.publish(2)
    assert len(sub) == 0 and feed.subscriber_count == 0


def test_log_events_go_on_the_feed():
    world = World()
    sub = world.feed.subscribe()
    world.log("vrpn", "Tracker0", "hello", time=1.0, level="warning")
    (event,) = sub.drain()
    assert isinstance(event, LogEvent) and event.text == "hello" and event.level == "warning"


def test_device_json_leaves_out_absent_values():
    world = World()
    world.update_device("s", "n", receive_time=2.0, position=(1, 2, 3))
    assert world.device("s", "n").to_json() == {
        "source": "s",
        "device": "n",
        "kind": "device",
        "position": [1.0, 2.0, 3.0],
        "receive_time": 2.0,
    }


def test_subscription_needs_room():
    with pytest.raises(ValueError):
        ChangeFeed[int]().subscribe(0)


def test_update_is_a_value():
    u = Update("s", np.array([0]), frozenset({"position"}), 1.0)
    assert len(u) == 1
