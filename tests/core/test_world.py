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


def swarm(world: World, n: int = 10_000) -> np.ndarray:
    return world.table("show").slots((f"d{i}" for i in range(n)), kind="drone")


def test_a_stalled_latest_subscriber_holds_one_mask_not_the_updates():
    import tracemalloc

    world = World()
    slots = swarm(world)
    stalled = world.subscribe()
    positions = np.zeros((len(slots), 3))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(300):  # 300 full-swarm updates: the old queue held 254 MiB of copies
        positions[:, 0] = i
        world.update("show", slots, receive_time=float(i), position=positions)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 1 << 20  # a mask of 10,000 flags, not 300 copies of 240 kB
    (update,) = stalled.pull()
    assert len(update) == 10_000 and update.receive_time == 299.0
    assert np.all(update.values["position"][:, 0] == 299.0)


def test_a_late_pull_sees_the_latest_values_of_every_changed_device():
    world = World()
    subscriber = world.subscribe()
    for i in range(5):
        world.update_device("a", "x", receive_time=float(i), position=(i, 0, 0))
    world.update_device("a", "y", receive_time=9.0, telemetry={"t": (3.5, "Cel")})
    world.update_device("b", "z", receive_time=7.0, velocity=(1, 2, 3))
    world.log("b", "z", "hello", time=7.5)
    items = subscriber.pull()
    assert isinstance(items[0], LogEvent) and items[0].text == "hello"
    a, b = items[1:]
    assert isinstance(a, Update) and isinstance(b, Update)
    assert a.source == "a" and a.slots.tolist() == [0, 1] and a.receive_time == 9.0
    assert a.fields == {"position", "t"} and a.values["position"][0].tolist() == [4.0, 0.0, 0.0]
    assert a.values["t"][1] == 3.5
    assert b.source == "b" and b.values["velocity"].tolist() == [[1.0, 2.0, 3.0]]
    assert subscriber.pull() == []  # nothing changed since


async def test_a_latest_subscriber_wakes_on_change_and_not_before():
    world = World()
    subscriber = world.subscribe()
    waiting = asyncio.create_task(subscriber.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    world.update_device("a", "x", receive_time=1.0, position=(1, 2, 3))
    await asyncio.wait_for(waiting, 1)


def test_a_queue_subscriber_is_bounded_in_bytes_and_counts_its_drops():
    world = World()
    slots = swarm(world, 1000)
    recorder = world.subscribe(every_update=True, max_bytes=1 << 20)
    positions = np.zeros((1000, 3))
    for i in range(100):  # each update holds ~32 kB of copies: 100 of them are ~3 MiB
        world.update("show", slots, receive_time=float(i), position=positions + i)
    assert recorder.bytes <= 1 << 20 and recorder.dropped > 60
    kept = recorder.pull()
    assert len(kept) + recorder.dropped == 100
    assert kept[-1].values["position"][0, 0] == 99.0  # the newest are kept, the oldest dropped


def test_updates_are_not_copied_for_latest_subscribers_only():
    world = World()
    world.subscribe()
    update = world.update_device("a", "x", receive_time=1.0, position=(1, 2, 3))
    assert update.values == {}
    world.subscribe(every_update=True)
    update = world.update_device("a", "x", receive_time=2.0, position=(4, 5, 6))
    assert update.values["position"].tolist() == [[4.0, 5.0, 6.0]]


def test_json_rows_from_columns_agree_with_the_device_views():
    world = World()
    queue = world.subscribe(every_update=True)
    world.update_device(
        "s", "a", receive_time=1.0, name="Alpha", position=(1 / 3, 2, 3), links=["b"],
        attributes={"data.20": [24]},
    )  # fmt: skip
    world.update_device(
        "s", "b", receive_time=2.0, source_time=1.5, velocity=(1, 0, 0),
        orientation=(0.0, 0.0, 0.0, 1.0), telemetry={"t": (20.5, "Cel")},
    )  # fmt: skip
    table = world.table("s")
    update = world.update(
        "s",
        table.slots(["a", "b"]),
        receive_time=3.0,
        position=np.array([[7.0, 8, 9], [np.nan] * 3]),
    )
    queue.pull()
    for line, device in zip(world.update_json(update), world.devices("s"), strict=True):
        expected = device.to_json()
        expected.pop("position", None)
        if not np.isnan(update.values["position"][0 if device.device_id == "a" else 1]).any():
            expected["position"] = update.values["position"][0].tolist()
        expected |= {"receive_time": 3.0, "changed": ["position"]}
        assert line == expected


def test_a_json_row_prints_a_field_it_did_not_write_exactly_as_the_row_that_wrote_it():
    """`listen --json` is a log: a tracker's position written by one report and carried in
    the next report's row (that wrote only its velocity) is the same number in both lines,
    whichever way a live stream happens to batch the reports (it was rounded in the second)."""
    world = World()
    world.subscribe(every_update=True)
    position, orientation = (0.9528406780067974, 0.3034709912345678, 1.0), (0.6, 0.0, 0.0, 0.8)
    wrote = world.update_device(
        "s", "t", receive_time=1.0, position=position, orientation=orientation
    )
    carried = world.update_device("s", "t", receive_time=2.0, velocity=(0.1, 0.2, 0.3))
    (first,) = world.update_json(wrote)
    (second,) = world.update_json(carried)
    assert first["position"] == second["position"] == list(position)
    assert first["orientation"] == second["orientation"] == list(orientation)
    assert second["changed"] == ["velocity"]


def test_a_field_written_as_nan_for_a_device_is_not_in_its_changed_list():
    """A swarm where only some drones carry a payload: the payload's telemetry is NaN for the
    others, and their JSON rows must not claim it changed."""
    world = World()
    table = world.table("swarm")
    slots = table.slots(["plain", "spot", "plain2"])
    update = world.update(
        "swarm",
        slots,
        receive_time=1.0,
        position=np.zeros((3, 3)),
        telemetry={
            "led_red": (np.array([1.0, 2.0, 3.0]), "1"),
            "spot_red": (np.array([np.nan, 200.0, np.nan]), "1"),
        },
    )
    rows = {row["device"]: row for row in world.update_json(update)}
    assert rows["plain"]["changed"] == ["led_red", "position"]
    assert rows["plain2"]["changed"] == ["led_red", "position"]
    assert rows["spot"]["changed"] == ["led_red", "position", "spot_red"]
    assert "spot_red" not in rows["plain"]["telemetry"]
