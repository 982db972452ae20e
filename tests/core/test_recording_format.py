"""The recorder's world channel, `/robowire/<source>`: protobuf `robowire.Update`
(src/robowire/recording/update.proto), written with numpy (`writer.update_message`, and for a
few devices a layout made once per set of fields, `writer.SmallUpdate`). Read here
with the protobuf runtime's own parser from the FileDescriptorSet the recording carries (not
with robowire's reader), for random columns: every value comes back, NaN where none."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robowire.errors import DecodeError
from robowire.recording.reader import from_protobuf, world_message
from robowire.recording.writer import SMALL, UPDATE_PROTO, UPDATE_SCHEMA, UpdateEncoder
from robowire.world import Update, World
from robowire.world.model import ATTRIBUTES, LINKS

SRC = Path(__file__).resolve().parents[2] / "src"


def parser() -> type:
    """`robowire.Update` built from the schema the recording carries."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(UPDATE_PROTO).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(UPDATE_SCHEMA))


UPDATE = parser()


def column_values(column, n: int, width: int) -> np.ndarray:
    """What update.proto says a Column means, spelled out (one form at a time)."""
    assert column.width == width
    shape = (n,) if width == 1 else (n, width)
    values = list(column.float64) or list(column.float32)
    if column.same:
        return np.tile(values, (n, 1)).reshape(shape)
    out = np.full(shape, np.nan)
    if column.rows:
        rows = out.reshape(n, width)
        for i, row in enumerate(column.rows):
            rows[row] = values[i * width : (i + 1) * width]
    elif values:
        out[...] = np.array(values).reshape(shape)
    return out


UNITS = {"led": "1", "volt": "V", "cue": ""}
finite = st.floats(allow_nan=False, allow_infinity=False)
values = st.one_of(
    finite, st.just(float("nan")), st.floats(width=32, allow_nan=False), st.just(2.5)
)


@st.composite
def updates(draw: st.DrawFn) -> tuple[World, Update, dict[str, np.ndarray]]:
    n = draw(st.one_of(st.integers(1, SMALL), st.integers(SMALL + 1, 40)))  # both paths
    world = World()
    table = world.table("swarm")
    ids = draw(st.lists(st.text(min_size=1, max_size=12), min_size=n, max_size=n, unique=True))
    slots = np.array([table.slot(i, "drone", f"name {i}") for i in ids], np.intp)

    def column(shape: tuple[int, ...]) -> np.ndarray:
        kind = draw(st.sampled_from(["random", "same", "absent", "sparse", "few"]))
        if kind == "same":
            return np.broadcast_to(draw(hnp.arrays(np.float64, shape[1:], elements=finite)), shape)
        if kind == "absent":
            return np.full(shape, np.nan)
        data = draw(hnp.arrays(np.float64, shape, elements=values))
        if kind == "sparse" and data.ndim == 1:
            data[1:] = np.nan
        if kind == "few":  # a value for some devices, in runs or not, fewer than half or not
            data[draw(hnp.arrays(np.bool_, shape[0]))] = np.nan
        return data

    extra: dict[str, object] = {}
    if draw(st.booleans()):
        extra["attributes"] = {"firmware": draw(st.text(max_size=5))}
        extra["links"] = draw(st.lists(st.sampled_from(ids), max_size=3))
        for slot in slots.tolist():
            table.attributes[slot].update(extra["attributes"])  # type: ignore[arg-type]
            table.links[slot] = tuple(extra["links"])  # type: ignore[arg-type]
    written = {
        "source_time": column((n,)),
        "position": column((n, 3)),
        "orientation": column((n, 4)),
        "geodetic": column((n, 3)),
        "led": column((n,)),
        "volt": column((n,)),
        "cue": column((n,)),
    }
    with world.subscribe(every_update=True) as changes:  # (the recorder's: with the values)
        world.update(
            "swarm",
            slots,
            receive_time=1.0,
            source_time=written["source_time"],
            position=written["position"],
            orientation=written["orientation"],
            geodetic=written["geodetic"],
            telemetry={name: (written[name], unit) for name, unit in UNITS.items()},
            changed={ATTRIBUTES, LINKS} if extra else set(),
        )
        (update,) = changes.pull()
    assert isinstance(update, Update)
    return world, update, written


@settings(max_examples=200, deadline=None)
@given(case=updates())
def test_an_update_reads_back_with_protobufs_own_parser(
    case: tuple[World, Update, dict[str, np.ndarray]],
) -> None:
    world, update, written = case
    table = world.tables["swarm"]
    n = len(update.slots)
    encoder = UpdateEncoder(table)  # (a few devices: a layout; more: `update_message`)
    data = encoder.encode(table, update)
    message = UPDATE.FromString(data)
    assert list(message.devices) == [table.ids[s] for s in update.slots]
    assert [(d.row, d.kind, d.name) for d in message.new] == [
        (i, "drone", f"name {table.ids[s]}") for i, s in enumerate(update.slots)
    ]
    for name, width in (("position", 3), ("orientation", 4), ("geodetic", 3)):
        got = column_values({c.name: c for c in message.vectors}[name], n, width)
        expect = written[name]
        assert np.array_equal(got, expect, equal_nan=True), name
    assert np.array_equal(
        column_values(message.source_time, n, 1), written["source_time"], equal_nan=True
    )
    telemetry = {c.name: c for c in message.telemetry}
    assert {name: c.unit for name, c in telemetry.items()} == UNITS
    for name in UNITS:
        got = column_values(telemetry[name], n, 1)
        assert np.array_equal(got, written[name], equal_nan=True)
    if ATTRIBUTES in update.fields:
        assert len(message.attributes) == n and len(message.links) == n
    # robowire's own reader agrees with protobuf's
    ours = from_protobuf(data)
    assert ours.devices == list(message.devices)
    assert np.array_equal(ours.vectors["position"], written["position"], equal_nan=True)
    # a device already described is not described again
    assert not UPDATE.FromString(encoder.encode(table, update)).new


def test_a_device_whose_unit_changed_is_written_with_the_new_unit() -> None:
    world = World()
    encoder = UpdateEncoder(world.table("robot"))
    with world.subscribe(every_update=True) as changes:
        for unit in ("V", "V", "mV"):
            world.update_device("robot", "r1", receive_time=1.0, telemetry={"volt": (5.0, unit)})
            (update,) = changes.pull()
            assert isinstance(update, Update)
            (column,) = UPDATE.FromString(encoder.encode(world.tables["robot"], update)).telemetry
            assert (column.unit, list(column.float64)) == (unit, [5.0])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_are_a_decode_error_or_an_update(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        world_message(data)


def test_the_generated_module_is_not_stale(tmp_path: Path) -> None:
    """`make proto` into a temporary tree gives exactly the committed update_pb2 files."""
    plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    if not plugin.exists():
        found = shutil.which("protoc-gen-mypy")
        assert found, "protoc-gen-mypy (mypy-protobuf, a dev dependency) is not installed"
        plugin = Path(found)
    result = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--python_out={tmp_path}",
         f"--mypy_out={tmp_path}", f"--plugin=protoc-gen-mypy={plugin}",
         "robowire/recording/update.proto"],
        cwd=SRC, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name in ("update_pb2.py", "update_pb2.pyi"):
        fresh = (tmp_path / "robowire" / "recording" / name).read_text(encoding="utf-8")
        committed = (SRC / "robowire" / "recording" / name).read_text(encoding="utf-8")
        assert committed == fresh, f"{name} is stale: run `make proto`"


def test_an_update_of_one_device_with_no_columns_names_the_device() -> None:
    world = World()
    encoder = UpdateEncoder(world.table("robot"))
    with world.subscribe(every_update=True) as changes:
        world.update_device("robot", "r1", receive_time=1.0)
        (update,) = changes.pull()
    assert isinstance(update, Update)
    message = UPDATE.FromString(encoder.encode(world.tables["robot"], update))
    assert list(message.devices) == ["r1"] and not message.telemetry and not message.vectors
