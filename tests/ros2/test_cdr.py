"""CDR encoders (robowire.ros2.cdr) against rosbags' own CDR serialiser and deserialiser:
the same message gives the same bytes, for every type robowire writes, and /tf and markers
built from columns decode to the values the columns hold."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.typesys import Stores, get_typestore

from robowire.ros2 import cdr, types

STORE = get_typestore(Stores.LATEST)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
NAMES = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=0, max_size=12)


def theirs(name: str, value: dict) -> bytes:
    """`value` (nested dicts) as rosbags' message object, serialised by rosbags."""
    return bytes(STORE.serialize_cdr(build(name, value), name))


def build(name: str, value: dict):
    cls = STORE.types[name]
    kwargs = {}
    for field_name, desc in STORE.fielddefs[name][1]:
        got = value.get(field_name)
        kind, rest = desc
        if kind == 2:  # nested
            kwargs[field_name] = build(rest, got or {})
        elif kind == 3:  # array
            (_, (base, _)), count = rest
            kwargs[field_name] = np.zeros(count, dtype=DTYPE.get(base, "u1"))
        elif kind == 4:  # sequence
            inner_kind, inner = rest[0]
            if inner_kind == 2:
                kwargs[field_name] = [build(inner, v) for v in (got or [])]
            elif inner[0] == "string":
                kwargs[field_name] = list(got or [])
            else:
                kwargs[field_name] = np.array(got or [], dtype=DTYPE[inner[0]])
        else:
            base = rest[0]
            kwargs[field_name] = got if got is not None else ("" if base == "string" else 0)
            if base in ("float32", "float64") and got is None:
                kwargs[field_name] = 0.0
            if base == "bool":
                kwargs[field_name] = bool(got)
    return cls(**kwargs)


DTYPE = {"float64": "f8", "float32": "f4", "uint8": "u1", "char": "u1", "int8": "i1"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("geometry_msgs/msg/PoseStamped", {"header": {"frame_id": "world", "stamp": {"sec": 3}}}),
        ("sensor_msgs/msg/NavSatFix", {"header": {"frame_id": "gps"}, "latitude": 47.5}),
        ("sensor_msgs/msg/BatteryState", {"voltage": 11.5, "serial_number": "UAV-1"}),
        (
            "diagnostic_msgs/msg/DiagnosticArray",
            {"status": [{"name": "a", "values": [{"key": "v [V]", "value": "1"}]}, {}]},
        ),
        ("visualization_msgs/msg/Marker", {"ns": "x", "type": 7, "text": "abc"}),
        ("tf2_msgs/msg/TFMessage", {"transforms": [{"child_frame_id": "a"}, {}]}),
        ("rmw_dds_common/msg/ParticipantEntitiesInfo", {"node_entities_info_seq": [{}]}),
    ],
)
def test_same_bytes_as_rosbags(name: str, value: dict) -> None:
    assert cdr.encode(name, value) == theirs(name, value)


@given(
    st.lists(st.tuples(NAMES, st.lists(FLOATS, min_size=7, max_size=7)), min_size=1, max_size=8),
    NAMES,
    st.floats(0, 2e9),
)
@settings(max_examples=60)
def test_tf_from_columns_is_what_rosbags_writes(rows: list, parent: str, time: float) -> None:
    names = cdr.Names()
    names.extend(["unused", *(name for name, _ in rows)])
    slots = np.arange(1, len(rows) + 1)
    values = np.array([v for _, v in rows])
    data = cdr.TfMessages(parent, names).encode(
        slots, np.full(len(rows), time), values[:, :3], values[:, 3:]
    )
    sec, nanosec = cdr.stamps(np.array([time]))[0].tolist()
    transforms = [
        {
            "header": {"stamp": {"sec": sec, "nanosec": nanosec}, "frame_id": parent},
            "child_frame_id": name,
            "transform": {
                "translation": dict(zip("xyz", v[:3], strict=True)),
                "rotation": dict(zip("wxyz", v[3:], strict=True)),
            },
        }
        for name, v in rows
    ]
    assert data == theirs("tf2_msgs/msg/TFMessage", {"transforms": transforms})


@given(st.integers(1, 40), NAMES, st.data())
@settings(max_examples=40)
def test_repeated_markers_decode_to_their_columns(count: int, ns: str, data: st.DataObject) -> None:
    batch = cdr.Repeated("visualization_msgs/msg/Marker", {"ns": ns, "text": ns[:3]})
    buffer = batch.buffer(count)
    pose = np.array(data.draw(st.lists(FLOATS, min_size=7 * count, max_size=7 * count)))
    batch.fill("pose.position.x", pose.reshape(count, 7), 7)
    batch.fill("id", np.arange(count))
    sample = cdr.HEADER + np.uint32(count).tobytes() + bytes(buffer)
    message = STORE.deserialize_cdr(sample, "visualization_msgs/msg/MarkerArray")
    for i, marker in enumerate(message.markers):
        p, q = marker.pose.position, marker.pose.orientation
        assert [p.x, p.y, p.z, q.x, q.y, q.z, q.w] == pose[7 * i : 7 * i + 7].tolist()
        assert (marker.id, marker.ns) == (i, ns)


def test_a_batch_of_separate_samples() -> None:
    batch = cdr.Repeated(
        "geometry_msgs/msg/PoseStamped", {"header": {"frame_id": "w"}}, sequence=False
    )
    batch.buffer(3)
    batch.fill("header.stamp.sec", cdr.stamps(np.array([1.5, 2.25, 3.0])), 2)
    batch.fill("pose.position.x", np.arange(21.0).reshape(3, 7), 7)
    message = STORE.deserialize_cdr(cdr.HEADER + batch.element(1), "geometry_msgs/msg/PoseStamped")
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (2, 250_000_000)
    assert message.pose.orientation.w == 13.0


def test_a_template_writes_its_numbers_in_place() -> None:
    template = cdr.Template("sensor_msgs/msg/NavSatFix", {"header": {"frame_id": "gps"}})
    data = template.encode({"latitude": 47.5, "header.stamp.sec": -3, "altitude": 1e300})
    assert data == theirs(
        "sensor_msgs/msg/NavSatFix",
        {"header": {"frame_id": "gps", "stamp": {"sec": -3}}, "latitude": 47.5, "altitude": 1e300},
    )


def test_stamps() -> None:
    got = cdr.stamps(np.array([0.0, 1.999999999999, 1700000000.5]))
    assert got.tolist() == [[0, 0], [1, 999_999_999], [1700000000, 500_000_000]]
    assert math.isclose(float(got[2, 0]) + got[2, 1] * 1e-9, 1700000000.5)


def test_numpy_sequences_of_points_and_colours() -> None:
    points = np.arange(6.0).reshape(2, 3)
    colours = np.ones((2, 4), dtype=np.float32)
    data = cdr.encode("visualization_msgs/msg/Marker", {"points": points, "colors": colours})
    message = STORE.deserialize_cdr(data, "visualization_msgs/msg/Marker")
    assert [(p.x, p.y, p.z) for p in message.points] == [(0, 1, 2), (3, 4, 5)]
    assert [c.a for c in message.colors] == [1.0, 1.0]


def test_every_type_encodes_empty_as_rosbags_does() -> None:
    for name in types.MESSAGES:
        assert cdr.encode(name, {}) == theirs(name, {}), name
