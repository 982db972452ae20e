import asyncio
import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader

from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError, DecodeError
from robowire.gateway import Gateway
from robowire.recording import (
    McapRecorder,
    McapSource,
    RecordingAdapter,
    WorldUpdate,
    read_recording,
)
from robowire.service import Source
from robowire.sinks import JsonLinesSink
from robowire.world import World
from support import mcap_schema_class


class Walk(Source):
    async def run(self, world: World) -> None:
        for i in range(10):
            world.update_device(
                self.name,
                "n1",
                receive_time=1000.0 + i * 0.01,
                source_time=900.0 + i,
                kind="sensor_node",
                name="node one",
                position=(i, 2 * i, 0),
                telemetry={"temp": (20.0 + i, "Cel")},
                attributes={"firmware": "1.2"} if i == 0 else None,
                links=["n2"],
            )
            await asyncio.sleep(0)
        world.log(self.name, "n1", "done", time=1000.2)


async def test_record_then_replay_gives_the_same_updates(tmp_path):
    path = str(tmp_path / "run.mcap")
    await asyncio.wait_for(Gateway().add(Walk("walk"), McapRecorder(path)).run(), 5)
    recorded = [(t, u) for t, u in read_recording(path) if isinstance(u, WorldUpdate)]
    assert [u.vectors["position"].tolist() for _, u in recorded] == [
        [[i, 2 * i, 0]] for i in range(10)
    ]
    assert recorded[-1][0] == 1000.09

    out = io.StringIO()
    replay = McapSource(parse_endpoint(path), speed=100.0)
    await asyncio.wait_for(Gateway().add(replay, JsonLinesSink(out)).run(), 5)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    updates = [x for x in lines if "position" in x]
    assert [u["position"] for u in updates] == [[i, 2 * i, 0] for i in range(10)]
    last = updates[-1]
    assert last["source"] == "walk" and last["kind"] == "sensor_node" and last["name"] == "node one"
    assert last["telemetry"]["temp"] == {"value": 29.0, "unit": "Cel"}
    assert last["links"] == ["n2"] and last["source_time"] == 909.0
    assert last["attributes"] == {"firmware": "1.2"}
    assert any(x.get("log") == "done" for x in lines)


def test_a_file_that_is_not_mcap_is_one_config_error(tmp_path):
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"not an mcap file at all")
    with pytest.raises(ConfigError, match="not a readable MCAP recording"):
        list(read_recording(str(bad)))


async def test_a_recorder_that_falls_behind_counts_what_its_queue_dropped(tmp_path):
    world = World()
    recorder = McapRecorder(str(tmp_path / "run.mcap"), max_bytes=64 << 10)
    task = asyncio.create_task(recorder.run(world))
    await asyncio.wait_for(recorder.ready.wait(), 2)
    slots = world.table("show").slots(f"d{i}" for i in range(1000))
    for i in range(50):  # ~50 updates of 1,000 drones without letting the recorder run
        world.update("show", slots, receive_time=float(i), position=np.full((1000, 3), i))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert recorder.stats.dropped > 40  # each update holds ~24 kB: the 64 kB queue kept two
    kept = {t for t, u in read_recording(recorder.path) if isinstance(u, WorldUpdate)}
    assert len(kept) == 50 - recorder.stats.dropped and max(kept) == 49.0  # the newest kept


async def test_a_swarm_update_replays_to_exactly_the_values_written(tmp_path):
    """Columns the recorder writes compactly (float32 where exact, one value for all, none,
    a few rows) come back as the very float64 values written."""
    path = str(tmp_path / "run.mcap")
    n = 200
    rng = np.random.default_rng(7)
    position = rng.normal(size=(n, 3)) * 100  # float64 that float32 cannot hold
    geodetic = np.column_stack([np.full(n, 47.5), np.linspace(8.0, 8.1, n), np.full(n, 400.0)])
    led = np.float32(rng.uniform(0, 255, n)).astype(np.float64)  # exactly float32
    sparse = np.full(n, np.nan)
    sparse[[3, 150]] = [1.25, 2.5]
    absent = np.full(n, np.nan)

    class Swarm(Source):
        async def run(self, world: World) -> None:
            world.table("swarm").protocol = "vrsp"  # as a VRSP source's: drone ids
            slots = world.table("swarm").slots((f"d{i}" for i in range(n)), kind="drone")
            world.update(
                "swarm",
                slots,
                receive_time=5000.0,
                source_time=4999.5,
                position=position,
                geodetic=geodetic,
                telemetry={"led": (led, "1"), "cue": (sparse, "1"), "laser": (absent, "W")},
            )

    await asyncio.wait_for(Gateway().add(Swarm("swarm"), McapRecorder(path)).run(), 5)
    replay = McapSource(parse_endpoint(path), speed=100.0)
    gateway = Gateway().add(replay)
    await asyncio.wait_for(gateway.run(), 5)
    table = gateway.world.tables["swarm"]
    assert table.ids == [f"d{i}" for i in range(n)] and set(table.kinds) == {"drone"}
    assert np.array_equal(table.position[:n], position)
    assert np.array_equal(table.geodetic[:n], geodetic)
    assert np.array_equal(table.telemetry["led"][:n], led)
    assert np.array_equal(table.telemetry["cue"][:n], sparse, equal_nan=True)
    assert np.isnan(table.telemetry["laser"][:n]).all() and table.units["laser"] == "W"
    assert (table.source_time[:n] == 4999.5).all()
    assert table.protocol == "vrsp"  # a VRSP sink of the replay keeps the drone ids
    assert set(gateway.world.tables) == {"swarm"}


def recording_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("whole") / "run.mcap"
    asyncio.run(asyncio.wait_for(Gateway().add(Walk("walk"), McapRecorder(str(path))).run(), 5))
    return path.read_bytes()


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return recording_bytes(tmp_path_factory)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=0, max_value=1 << 16))
def test_a_recording_cut_anywhere_reads_up_to_the_cut(whole: bytes, cut: int, tmp_path) -> None:
    full = [repr(x) for _, x in read_recording_bytes(whole, tmp_path / "full.mcap")]
    part = tmp_path / "cut.mcap"
    part.write_bytes(whole[: cut % (len(whole) + 1)])
    got: list[str] = []
    try:
        for _, line in read_recording(str(part)):
            got.append(repr(line))
    except (ConfigError, DecodeError):
        pass  # nothing readable, or the cut end: what came before it is what counts
    assert got == full[: len(got)]


def read_recording_bytes(data: bytes, path) -> list[tuple[float, object]]:
    path.write_bytes(data)
    return list(read_recording(str(path)))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=2000))
def test_random_bytes_are_one_typed_error_or_nothing(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/random.mcap"
        with open(path, "wb") as f:
            f.write(data)
        with contextlib.suppress(ConfigError, DecodeError):
            list(read_recording(path))


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
update_like = st.fixed_dictionaries(
    {"devices": st.lists(st.text(max_size=3), max_size=4)},
    optional={
        "position": json_values,
        "new": json_values,
        "telemetry": json_values,
        "float32": json_values,
        "source_time": json_values,
        "links": json_values,
    },
)


@settings(max_examples=200, deadline=None)
@given(line=update_like | json_values)
def test_a_damaged_world_message_is_dropped_and_counted_never_raised(line) -> None:
    dropped: list[str] = []
    adapter = RecordingAdapter(World(), dropped.append)
    applied = adapter.apply([("walk", line)], 1.0)
    assert applied + len(dropped) == 1


async def test_the_receive_tap_sees_what_udp_and_tcp_sources_received():
    """On asyncio's own loop (the CLI's uvloop is covered by the record tests): the one UDP
    loop and the one stream driver hand a source's bytes to its tap, with transport and peer."""
    from robowire.gateway import open_sim, open_source
    from robowire.service import SimOptions

    gateway = Gateway()
    spyglass = open_sim("spyglass", SimOptions(port=0, count=2))
    vrsp = open_source("vrsp://127.0.0.1:0")
    gateway.add(spyglass, vrsp)
    run = asyncio.create_task(gateway.run(3.0))
    await asyncio.wait_for(spyglass.ready.wait(), 5)
    await asyncio.wait_for(vrsp.ready.wait(), 5)
    assert spyglass.address is not None and vrsp.address is not None
    viewer = open_source("spyglass://{}:{}".format(*spyglass.address))
    seen: list[tuple[str, str, int, tuple[str, int]]] = []
    for source in (viewer, vrsp):
        source.tap = lambda data, now, transport, peer, name=source.name: seen.append(
            (name, transport, len(data), peer)
        )
    gateway.add(viewer, open_sim("vrsp", SimOptions(count=3, target="{}:{}".format(*vrsp.address))))
    await run
    tcp = [s for s in seen if s[0] == viewer.name]
    udp = [s for s in seen if s[0] == vrsp.name]
    assert tcp and all(t == "tcp" and p == spyglass.address and n > 0 for _, t, n, p in tcp)
    assert udp and all(t == "udp" and p[0] == "127.0.0.1" and n > 0 for _, t, n, p in udp)
    assert viewer.stats.messages_in > 0 and vrsp.stats.messages_in > 0


JSON_RECORDING = Path(__file__).parents[1] / "data" / "recordings" / "json-2dd4a94.mcap"


async def test_an_older_json_recording_still_replays_to_the_values_it_was_made_from():
    """`tests/data/recordings/json-2dd4a94.mcap` was written by the JSON recorder (see
    make_json_recording.py beside it); the values below are what that script wrote."""
    assert JSON_RECORDING.is_file()
    replay = McapSource(parse_endpoint(str(JSON_RECORDING)), speed=100.0)
    gateway = Gateway().add(replay)
    await asyncio.wait_for(gateway.run(), 10)
    walk = gateway.world.tables["walk"]
    assert walk.ids == ["n1"] and walk.kinds == ["sensor_node"] and walk.names == ["node one"]
    assert walk.position[0].tolist() == [9.0, 18.0, 0.0] and walk.source_time[0] == 909.0
    assert walk.telemetry["temp"][0] == 29.0 and walk.units["temp"] == "Cel"
    assert walk.attributes[0] == {"firmware": "1.2"} and walk.links[0] == ("n2",)
    n = 200
    rng = np.random.default_rng(7)
    position = rng.normal(size=(n, 3)) * 100
    led = np.float32(rng.uniform(0, 255, n)).astype(np.float64)
    swarm = gateway.world.tables["swarm"]
    assert swarm.ids == [f"d{i}" for i in range(n)] and set(swarm.kinds) == {"drone"}
    assert np.array_equal(swarm.position[:n], position)
    assert np.array_equal(swarm.geodetic[:n, 1], np.linspace(8.0, 8.1, n))
    assert (swarm.geodetic[:n, 0] == 47.5).all() and (swarm.geodetic[:n, 2] == 400.0).all()
    assert np.array_equal(swarm.telemetry["led"][:n], led)
    cue = np.full(n, np.nan)
    cue[[3, 150]] = [1.25, 2.5]
    assert np.array_equal(swarm.telemetry["cue"][:n], cue, equal_nan=True)
    assert np.isnan(swarm.telemetry["laser"][:n]).all() and swarm.units["laser"] == "W"
    assert (swarm.source_time[:n] == 999.5).all()


async def test_a_broken_devices_inf_nan_and_huge_values_replay_as_written(tmp_path):
    """Bad values are values: a broken device's inf, -inf, NaN and 1e308 are recorded and come
    back from a replay exactly, beside a good device's, and the Foxglove /tf channel (read here
    with the `mcap` reader and the schema the file carries) has them as the doubles they are."""
    path = str(tmp_path / "run.mcap")
    inf, nan = np.inf, np.nan
    position = np.array([(1.0, 2.0, 3.0), (inf, -inf, nan), (1e308, -1e308, 0.0)])
    orientation = np.array([(1.0, 0.0, 0.0, 0.0), (inf, nan, 0.0, 0.0), (inf, 0.0, 0.0, 0.0)])
    battery = np.array([12.0, inf, -inf])

    class Broken(Source):
        async def run(self, world: World) -> None:
            slots = world.table("broken").slots(["good", "hole", "huge"], kind="drone")
            world.update(
                "broken",
                slots,
                receive_time=5000.0,
                position=position,
                orientation=orientation,
                telemetry={"battery": (battery, "V")},
            )

    await asyncio.wait_for(Gateway().add(Broken("broken"), McapRecorder(path)).run(), 5)
    replay = McapSource(parse_endpoint(path), speed=100.0)
    gateway = Gateway().add(replay)
    await asyncio.wait_for(gateway.run(), 5)
    table = gateway.world.tables["broken"]
    assert np.array_equal(table.position[:3], position, equal_nan=True)
    assert np.array_equal(table.orientation[:3], orientation, equal_nan=True)
    assert np.array_equal(table.telemetry["battery"][:3], battery)

    with open(path, "rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        assert summary is not None
        tf = next(c for c in summary.channels.values() if c.topic == "/tf")
        frames = mcap_schema_class(summary.schemas[tf.schema_id])
        translations = {
            t.child_frame_id: (t.translation.x, t.translation.y, t.translation.z)
            for _, _, message in reader.iter_messages(topics=["/tf"])
            for t in frames.FromString(message.data).transforms
        }
    assert translations["broken/good"] == (1.0, 2.0, 3.0)
    assert translations["broken/huge"] == (1e308, -1e308, 0.0)
