"""The Foxglove messages robowire encodes from columns (`sinks.foxglove_messages`, with
`pbwire`) against the same messages built the SDK's way, one `foxglove.messages` object per
transform, cube and fix, encoded by foxglove-sdk: both parsed with Foxglove's own generated
classes (`foxglove-schemas-protobuf`) must hold the same values, for random columns with and
without NaN (a device with no position has no transform; no fix, no LocationFix; no LED
colour, its kind's colour)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from foxglove.messages import (
    Color,
    CubePrimitive,
    FrameTransform,
    FrameTransforms,
    LocationFix,
    LocationFixes,
    Quaternion,
    SceneEntity,
    SceneUpdate,
    Vector3,
)
from foxglove_schemas_protobuf.FrameTransforms_pb2 import FrameTransforms as FrameTransformsPb
from foxglove_schemas_protobuf.LocationFix_pb2 import LocationFix as LocationFixPb
from foxglove_schemas_protobuf.LocationFixes_pb2 import LocationFixes as LocationFixesPb
from foxglove_schemas_protobuf.SceneUpdate_pb2 import SceneUpdate as SceneUpdatePb
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robowire.sinks.foxglove_messages import (
    CUBE_SIZE,
    LED_FIELDS,
    LOCATION_TOPIC,
    SCENE_TOPIC,
    TF_TOPIC,
    FoxgloveMessages,
    schema,
)
from robowire.world import Update, World
from robowire.world.model import GEODETIC, ORIENTATION, POSITION

PARSERS: dict[str, Any] = {
    "foxglove.FrameTransforms": FrameTransformsPb,
    "foxglove.SceneUpdate": SceneUpdatePb,
    "foxglove.LocationFix": LocationFixPb,
    "foxglove.LocationFixes": LocationFixesPb,
}


def sdk_messages(
    world: World, update: Update, colours: np.ndarray, batch: bool
) -> dict[str, list[bytes]]:
    """The reference: the messages built as foxglove-sdk objects, encoded by the SDK."""
    table = world.tables[update.source]
    slots = update.slots.tolist()
    frames = [f"{table.source}/{table.ids[s]}" for s in slots]
    p, q, g = (getattr(table, n)[update.slots].tolist() for n in (POSITION, ORIENTATION, GEODETIC))
    transforms = [
        FrameTransform(
            parent_frame_id="world",
            child_frame_id=frames[i],
            translation=Vector3(x=p[i][0], y=p[i][1], z=p[i][2]),
            rotation=Quaternion(w=q[i][0], x=q[i][1], y=q[i][2], z=q[i][3]),
        )
        for i in range(len(slots))
        if not any(v != v for v in p[i])
    ]
    size = Vector3(x=CUBE_SIZE, y=CUBE_SIZE, z=CUBE_SIZE)
    entities = [
        SceneEntity(
            frame_id=frames[i],
            id=frames[i],
            frame_locked=True,
            cubes=[CubePrimitive(size=size, color=Color(r=r, g=gr, b=b, a=1.0))],
        )
        for i, (r, gr, b) in enumerate(colours.tolist())
    ]
    fixes = [
        LocationFix(frame_id=frames[i], latitude=g[i][0], longitude=g[i][1], altitude=g[i][2])
        for i in range(len(slots))
        if not any(v != v for v in g[i])
    ]
    located = [LocationFixes(fixes=fixes).encode()] if batch else [f.encode() for f in fixes]
    return {
        TF_TOPIC: [FrameTransforms(transforms=transforms).encode()],
        SCENE_TOPIC: [SceneUpdate(entities=entities).encode()],
        LOCATION_TOPIC: located if fixes else [],
    }


def values(name: str, data: bytes) -> Any:
    """A parsed message as plain values, every field printed (NaN as the string "NaN", so
    that NaN equals NaN; -0.0 equals 0.0, which the SDK's encoder leaves out as zero)."""
    message = PARSERS[name].FromString(data)
    return MessageToDict(message, always_print_fields_with_no_presence=True)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
maybe_nan = st.one_of(finite, st.just(float("nan")))


@st.composite
def shows(draw: st.DrawFn) -> tuple[World, Update, bool]:
    n = draw(st.integers(1, 12))
    with_nan = draw(st.booleans())
    element = maybe_nan if with_nan else finite
    world = World()
    ids = draw(st.lists(st.text(min_size=1, max_size=40), min_size=n, max_size=n, unique=True))
    kinds = draw(st.lists(st.sampled_from(["drone", "robot", "node"]), min_size=n, max_size=n))
    table = world.table("show@127.0.0.1:9742")
    slots = np.array([table.slot(i, k) for i, k in zip(ids, kinds, strict=True)], np.intp)
    slots = slots[np.array(draw(st.permutations(range(n))), np.intp)]  # in order, or not
    column = hnp.arrays(np.float64, (n, 3), elements=element)
    led = hnp.arrays(np.float64, n, elements=st.one_of(st.floats(0, 300), st.just(float("nan"))))
    update = world.update(
        table.source,
        slots,
        receive_time=1.0,
        position=draw(column),
        orientation=draw(hnp.arrays(np.float64, (n, 4), elements=element)),
        geodetic=draw(column),
        telemetry={f: (draw(led), "1") for f in LED_FIELDS} if draw(st.booleans()) else {},
    )
    return world, update, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(show=shows())
def test_messages_from_columns_hold_what_the_sdk_objects_hold(
    show: tuple[World, Update, bool],
) -> None:
    world, update, batch = show
    builder = FoxgloveMessages(batch_locations=batch)
    table = world.tables[update.source]
    colours = builder._device_colours(table, update.slots)
    ours: dict[str, list[bytes]] = {TF_TOPIC: [], SCENE_TOPIC: [], LOCATION_TOPIC: []}
    for topic, data in builder.build(table, update):
        if topic in ours:
            ours[topic].extend(data if isinstance(data, list) else [data])
    theirs = sdk_messages(world, update, colours, batch)
    for topic, messages in theirs.items():
        name = builder.schemas[topic]
        assert schema(name)[0] == name
        assert [values(name, m) for m in ours[topic]] == [values(name, m) for m in messages]
    assert not any(topic == SCENE_TOPIC for topic, _ in builder.build(table, update))  # sent


def test_only_the_topics_read_are_built() -> None:
    world = World()
    world.update_device("lab", "r1", receive_time=0.0, position=(1.0, 2.0, 3.0))
    update = Update("lab", np.array([0], np.intp), frozenset({POSITION}), 0.0)
    built = FoxgloveMessages().build(world.tables["lab"], update, {SCENE_TOPIC})
    assert [topic for topic, _ in built] == [SCENE_TOPIC]


@pytest.mark.parametrize("devices", [1, 40])  # a robot's few values (lists), a swarm's (arrays)
def test_telemetry_json_prints_whole_numbers_as_integers_and_no_value_as_null(
    devices: int,
) -> None:
    world = World()
    slots = world.table("fleet").slots(f"r{i}" for i in range(devices))
    count = np.arange(devices, dtype=np.float64)  # whole numbers: integers
    volt = count + 0.25
    gaps = np.where(count % 2 == 1, count, np.nan)  # whole, but not every device has one
    world.update(
        "fleet",
        slots,
        receive_time=1.0,
        telemetry={"count": (count, "1"), "volt": (volt, "V"), "gaps": (gaps, "1")},
    )
    update = Update("fleet", slots, frozenset({"count", "volt", "gaps"}), 1.0)
    ((topic, data),) = FoxgloveMessages().build(world.tables["fleet"], update, ["/telemetry/fleet"])
    assert topic == "/telemetry/fleet" and isinstance(data, bytes)
    assert json.loads(data) == {
        "device": [f"r{i}" for i in range(devices)],
        "units": {"count": "1", "gaps": "1", "volt": "V"},
        "count": list(range(devices)),
        "volt": [i + 0.25 for i in range(devices)],
        "gaps": [float(i) if i % 2 == 1 else None for i in range(devices)],
    }
    assert b'"count":[0' in data  # integers only where every device has one
    assert b'"gaps":[null' + (b",1.0" if devices > 1 else b"]") in data


def test_a_cube_is_its_led_colour_else_its_kinds() -> None:
    world = World()
    slots = world.table("show").slots(["a", "b", "c"], kind="drone")
    led = np.array([0.0, 127.5, 300.0])  # 300: clipped to 1
    telemetry = {f: (led, "1") for f in LED_FIELDS}
    world.update("show", slots, receive_time=1.0, telemetry=telemetry)
    builder = FoxgloveMessages()
    table = world.tables["show"]

    def cubes() -> list[list[float]]:
        update = Update("show", slots, frozenset(LED_FIELDS), 1.0)
        ((_, data),) = builder.build(table, update, [SCENE_TOPIC])
        assert isinstance(data, bytes)
        colours = [e.cubes[0].color for e in SceneUpdatePb.FromString(data).entities]
        return [[c.r, c.g, c.b, c.a] for c in colours]

    assert cubes() == [[0.0] * 3 + [1.0], [0.5] * 3 + [1.0], [1.0] * 4]  # every device lit
    led = np.array([51.0, np.nan, 300.0])  # b: no LED colour, its kind's
    world.update("show", slots, receive_time=2.0, telemetry={f: (led, "1") for f in LED_FIELDS})
    assert cubes() == [[0.2] * 3 + [1.0], [0.2, 0.6, 1.0, 1.0]]  # only the changed ones


def test_a_swarms_messages_hold_the_latest_values_as_the_devices_change() -> None:
    """The layout a set of devices' messages is kept in (and their ids' JSON) gives each
    build the values of that moment, and another set of devices its own."""
    world = World()
    n = 600  # 2 fields: more telemetry values than a robot's (`FEW_VALUES`)
    slots = world.table("swarm").slots(f"d{i}" for i in range(n))
    table = world.tables["swarm"]
    builder = FoxgloveMessages()
    fields = frozenset({POSITION, "volt", "mode"})
    for step, chosen in enumerate([slots, slots, slots[::7], slots]):
        volt = np.arange(n) + 0.5 * step
        position = np.column_stack([volt, -volt, np.full(n, step)])
        telemetry = {"volt": (volt, "V"), "mode": (np.full(n, float(step)), "1")}
        world.update("swarm", slots, receive_time=step, position=position, telemetry=telemetry)
        topics = [TF_TOPIC, "/telemetry/swarm"]
        built = dict(builder.build(table, Update("swarm", chosen, fields, step), topics))
        assert isinstance(built[TF_TOPIC], bytes) and isinstance(built["/telemetry/swarm"], bytes)
        transforms = FrameTransformsPb.FromString(built[TF_TOPIC]).transforms
        assert [t.child_frame_id for t in transforms] == [f"swarm/d{s}" for s in chosen]
        expect = position[chosen]
        got = [[t.translation.x, t.translation.y, t.translation.z] for t in transforms]
        assert got == expect.tolist()
        assert json.loads(built["/telemetry/swarm"]) == {
            "device": [f"d{s}" for s in chosen],
            "units": {"mode": "1", "volt": "V"},
            "mode": [step] * len(chosen),
            "volt": volt[chosen].tolist(),
        }
