"""The CDR decoders of `listen ros2://` against bytes that rosbags serialises (`serialize_cdr`
of its ROS 2 typestore, not robowire's code): hypothesis round trips of every type read, the
/tf decoder's remembered layout, and random or cut bytes giving only DecodeError."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.ros2.publisher import serialize

from robowire.errors import DecodeError
from robowire.ros2 import decode

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
anyfloat = st.floats(width=64)
frame_names = st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=40)
seconds = st.integers(-(2**31), 2**31 - 1)
nanoseconds = st.integers(0, 999_999_999)


@st.composite
def headers(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "stamp": {"sec": draw(seconds), "nanosec": draw(nanoseconds)},
        "frame_id": draw(frame_names),
    }


def vector(values: list[float]) -> dict[str, float]:
    return dict(zip("xyz", values, strict=True))


def quaternion(values: list[float]) -> dict[str, float]:
    return dict(zip("xyzw", values, strict=True))


vectors = st.lists(anyfloat, min_size=3, max_size=3)
quaternions = st.lists(anyfloat, min_size=4, max_size=4)


def stamp_of(header: dict[str, Any]) -> float:
    return header["stamp"]["sec"] + header["stamp"]["nanosec"] * 1e-9


def same(actual: Any, expected: list[float]) -> None:
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


def wxyz(xyzw: list[float]) -> list[float]:
    return [xyzw[3], *xyzw[:3]]


@st.composite
def transforms(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "header": draw(headers()),
        "child_frame_id": draw(frame_names),
        "transform": {
            "translation": vector(draw(vectors)),
            "rotation": quaternion(draw(quaternions)),
        },
    }


def check_transform(decoded: decode.Decoded, row: int, message: dict[str, Any]) -> None:
    assert decoded.frames[row] == message["header"]["frame_id"]
    assert decoded.children[row] == message["child_frame_id"]
    assert decoded.stamps[row] == stamp_of(message["header"])
    translation = message["transform"]["translation"]
    rotation = message["transform"]["rotation"]
    same(decoded.position[row], [translation[k] for k in "xyz"])  # type: ignore[index]
    same(decoded.orientation[row], [rotation[k] for k in "wxyz"])  # type: ignore[index]


@given(st.lists(transforms(), max_size=12))
def test_tf_messages_decode_as_rosbags_wrote_them(items: list[dict[str, Any]]) -> None:
    data = serialize(decode.TF, {"transforms": items})
    decoded = decode.TfDecoder()(data)
    assert len(decoded) == len(items)
    for row, item in enumerate(items):
        check_transform(decoded, row, item)


@given(transforms())
def test_transform_stamped_decodes(item: dict[str, Any]) -> None:
    decoded = decode.decode_transform(serialize(decode.TRANSFORM, item))
    check_transform(decoded, 0, item)


@given(headers(), vectors, quaternions, st.lists(finite, min_size=36, max_size=36))
def test_poses_decode(
    header: dict[str, Any], position: list[float], rotation: list[float], covariance: list[float]
) -> None:
    pose = {"position": vector(position), "orientation": quaternion(rotation)}
    plain = decode.decode_pose(serialize(decode.POSE, {"header": header, "pose": pose}))
    data = serialize(
        decode.POSE_COVARIANCE,
        {"header": header, "pose": {"pose": pose, "covariance": covariance}},
    )
    for decoded in (plain, decode.decode_pose_covariance(data)):
        assert decoded.frames == (header["frame_id"],)
        assert decoded.stamps[0] == stamp_of(header)
        same(decoded.position, [position])
        same(decoded.orientation, [wxyz(rotation)])
        assert decoded.velocity is None


@given(headers(), frame_names, vectors, quaternions, vectors, vectors)
def test_odometry_decodes(
    header: dict[str, Any],
    child: str,
    position: list[float],
    rotation: list[float],
    linear: list[float],
    angular: list[float],
) -> None:
    message = {
        "header": header,
        "child_frame_id": child,
        "pose": {"pose": {"position": vector(position), "orientation": quaternion(rotation)}},
        "twist": {"twist": {"linear": vector(linear), "angular": vector(angular)}},
    }
    decoded = decode.decode_odometry(serialize(decode.ODOMETRY, message))
    assert (decoded.frames, decoded.children) == ((header["frame_id"],), (child,))
    same(decoded.position, [position])
    same(decoded.orientation, [wxyz(rotation)])
    same(decoded.velocity, [linear])
    same(decoded.angular, [angular])


@given(headers(), vectors, vectors)
def test_twist_decodes(header: dict[str, Any], linear: list[float], angular: list[float]) -> None:
    message = {"header": header, "twist": {"linear": vector(linear), "angular": vector(angular)}}
    decoded = decode.decode_twist(serialize(decode.TWIST, message))
    assert decoded.stamps[0] == stamp_of(header)
    same(decoded.velocity, [linear])
    same(decoded.angular, [angular])
    assert decoded.position is None


@given(headers(), st.integers(-128, 127), st.integers(0, 65535), vectors, st.integers(0, 255))
def test_nav_sat_fix_decodes(
    header: dict[str, Any], status: int, service: int, fix: list[float], kind: int
) -> None:
    message = {
        "header": header,
        "status": {"status": status, "service": service},
        "latitude": fix[0],
        "longitude": fix[1],
        "altitude": fix[2],
        "position_covariance": [float(i) for i in range(9)],
        "position_covariance_type": kind,
    }
    decoded = decode.decode_fix(serialize(decode.FIX, message))
    same(decoded.geodetic, [fix])
    same(decoded.fix, [status])
    assert decoded.frames == (header["frame_id"],)


def test_the_tf_decoder_reuses_a_layout_only_for_the_same_strings() -> None:
    def tf(names: list[str], x: float) -> bytes:
        return serialize(
            decode.TF,
            {
                "transforms": [
                    {
                        "header": {"stamp": {"sec": 3, "nanosec": 500}, "frame_id": "world"},
                        "child_frame_id": name,
                        "transform": {"translation": {"x": x}, "rotation": {"w": 1.0}},
                    }
                    for name in names
                ]
            },
        )

    decoder = decode.TfDecoder()
    first = decoder(tf(["a", "b"], 1.0))
    again = decoder(tf(["a", "b"], 2.0))
    renamed = decoder(tf(["a", "c"], 3.0))  # same length, another name: parsed afresh
    assert decoder.parsed == 2
    other = decoder(tf(["robot_base"], 4.0))  # another publisher's frames, between
    assert decoder(tf(["a", "c"], 5.0)).children == ("a", "c")
    assert decoder.parsed == 3  # each size's layout kept
    assert other.children == ("robot_base",)
    assert first.children == again.children == ("a", "b")
    assert renamed.children == ("a", "c")
    same(again.position[:, 0], [2.0, 2.0])  # type: ignore[index]
    same(renamed.position[:, 0], [3.0, 3.0])  # type: ignore[index]
    same(again.stamps, [3 + 500e-9] * 2)
    same(again.orientation, [[1.0, 0.0, 0.0, 0.0]] * 2)


def test_bad_headers_and_lengths_are_decode_errors() -> None:
    good = serialize(decode.POSE, {"header": {"frame_id": "world"}})
    with pytest.raises(DecodeError, match="big-endian"):
        decode.decode_pose(b"\x00\x00\x00\x00" + good[4:])
    with pytest.raises(DecodeError, match="not plain CDR"):
        decode.decode_pose(b"\x00\x07\x00\x00" + good[4:])
    with pytest.raises(DecodeError, match="bytes wanted"):
        decode.decode_pose(good[:-1])
    huge = bytearray(serialize(decode.TF, {"transforms": []}))
    huge[4:8] = (2**31).to_bytes(4, "little")
    with pytest.raises(DecodeError, match="cannot fit"):
        decode.TfDecoder()(bytes(huge))


every_decoder = st.sampled_from(sorted(decode.READABLE))


@given(every_decoder, st.binary(max_size=300))
def test_random_bytes_give_only_decode_errors(ros_type: str, data: bytes) -> None:
    decoder = decode.decoder(ros_type)
    assert decoder is not None
    for payload in (data, b"\x00\x01\x00\x00" + data):
        with contextlib.suppress(DecodeError):
            decoder(payload)


@given(st.lists(transforms(), min_size=1, max_size=4), st.data())
def test_cut_or_damaged_tf_messages_give_only_decode_errors(
    items: list[dict[str, Any]], data: st.DataObject
) -> None:
    payload = bytearray(serialize(decode.TF, {"transforms": items}))
    decoder = decode.TfDecoder()
    decoder(bytes(payload))  # a layout remembered: damage must not slip past it
    cut = data.draw(st.integers(0, len(payload) - 1))
    at = data.draw(st.integers(0, len(payload) - 1))
    payload[at] = data.draw(st.integers(0, 255))
    for damaged in (bytes(payload[:cut]), bytes(payload)):
        with contextlib.suppress(DecodeError):
            decoder(damaged)
