"""Property tests: definitions and swarms survive encode -> decode; random and damaged bytes
give only DecodeError (and never a crash of the receiver)."""

from __future__ import annotations

import contextlib
import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robowire.errors import DecodeError
from robowire.protocols.vrsp.codec import (
    LIGHT_LEVEL,
    PYRO,
    DefinitionTable,
    VrspData,
    decode_packet,
    definition_from_json,
    definition_to_json,
    encode_data,
    encode_def,
    payload_kind,
)
from robowire.protocols.vrsp.definitions import (
    Cue,
    DefType,
    DeviceDefinition,
    MountType,
    Payload,
    Quaternion,
    Swarm,
)
from robowire.protocols.vrsp.session import ReceiverSession

from .conftest import blocks_of, swarm_of

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
text = st.text(max_size=20)
quaternions = st.builds(Quaternion, finite, finite, finite, finite)
colors = st.tuples(*[st.integers(0, 255)] * 3)


@st.composite
def payloads(draw: st.DrawFn) -> Payload:
    def_type = draw(st.sampled_from(DefType))
    cues: tuple[Cue, ...] = ()
    if def_type is DefType.PYRO:
        ids = draw(st.lists(st.integers(1, 255), unique=True, max_size=6))
        cues = tuple(Cue(id=i, vdl=draw(text), mount_direction=draw(quaternions)) for i in ids)
    return Payload(
        def_type=def_type,
        mount=draw(st.sampled_from(MountType)),
        lumens=draw(st.none() | finite),
        color=None if def_type is DefType.PYRO else draw(st.none() | colors),
        light_type=draw(st.none() | st.sampled_from(["Spotlight", "Point"])),
        spot_angle=draw(st.none() | finite),
        cues=cues,
    )


@st.composite
def definitions(draw: st.DrawFn, definition_id: int | None = None) -> DeviceDefinition:
    return DeviceDefinition(
        definition_id=draw(st.integers(0, 10_000)) if definition_id is None else definition_id,
        model=draw(text),
        lumens=draw(st.none() | finite),
        payloads=tuple(draw(st.lists(payloads(), max_size=4))),
    )


@given(definitions())
def test_definitions_round_trip_through_json(definition: DeviceDefinition) -> None:
    text_ = json.dumps(definition_to_json(definition))
    assert definition_from_json(json.loads(text_)) == definition


@st.composite
def swarms(draw: st.DrawFn) -> tuple[DefinitionTable, Swarm]:
    count = draw(st.integers(1, 3))
    defs = [draw(definitions(i)) for i in range(count)]
    n = draw(st.integers(0, 300))
    ids = draw(st.lists(st.integers(0, 65535), min_size=n, max_size=n, unique=True))
    owner = draw(st.lists(st.integers(0, count - 1), min_size=n, max_size=n))
    blocks = [(d, np.array([i for i, o in zip(ids, owner, strict=False) if o == k], np.uint16))
              for k, d in enumerate(defs)]  # fmt: skip
    table = DefinitionTable.build(draw(st.integers(0, 2**32 - 1)), (1.0, 2.0, 3.0), blocks)
    k = table.slots
    swarm = swarm_of(ids, k)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    swarm.position[:] = rng.normal(0, 100, (n, 3)).astype(np.float32)
    swarm.has_color[:] = rng.random(n) < 0.5
    swarm.color[swarm.has_color] = rng.integers(0, 256, (int(swarm.has_color.sum()), 3))
    swarm.has_heading[:] = rng.random(n) < 0.5
    swarm.heading[swarm.has_heading] = rng.uniform(0, 360, int(swarm.has_heading.sum())).astype(
        np.float16
    )
    swarm.has_orientation[:] = rng.random(n) < 0.5
    q = rng.normal(0, 1, (int(swarm.has_orientation.sum()), 4)).astype(np.float16)
    swarm.orientation[swarm.has_orientation] = q
    for row, o in enumerate(owner):  # only what each drone's definition puts on the wire
        for j, payload in enumerate(defs[o].payloads):
            kind = payload_kind(payload)
            if kind == PYRO:
                swarm.cue[row, j] = rng.integers(0, 256)
                swarm.cue_ms[row, j] = rng.integers(0, 65536)
            elif kind == LIGHT_LEVEL:
                swarm.light[row, j, 0] = rng.integers(0, 256)
            else:
                swarm.light[row, j] = rng.integers(0, 256, 3)
            if payload.mount is not MountType.STATIC:
                swarm.gimbal[row, j] = rng.normal(0, 1, 4).astype(np.float16)
    return table, swarm


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(swarms(), st.sampled_from([200, 1472, 65507]))
def test_swarms_round_trip(case: tuple[DefinitionTable, Swarm], size: int) -> None:
    table, swarm = case
    max_record = 2 + 12 + 1 + 3 + 2 + 8 + 4 * (3 + 8)
    if size == 200 and any(len(d.payloads) > 3 for d in table.definitions):
        size = 1472
    datagrams = encode_data(table, swarm, 42, max_size=max(size, max_record + 25))
    assert all(len(d) <= max(size, max_record + 25) for d in datagrams)
    packets = [decode_packet(d) for d in datagrams]
    assert all(isinstance(p, VrspData) and p.frame == 42 for p in packets)
    body = b"".join(p.body for p in packets if isinstance(p, VrspData))
    back = table.decode(body, sum(p.count for p in packets if isinstance(p, VrspData)))
    got, want = np.argsort(back.ids), np.argsort(swarm.ids)
    for name in Swarm.__slots__:
        a, b = getattr(back, name)[got], getattr(swarm, name)[want]
        if name in ("color", "heading", "orientation"):
            mask = getattr(swarm, "has_" + name)[want]
            a, b = a[mask], b[mask]
        assert np.array_equal(a, b, equal_nan=True), name


def _table() -> DefinitionTable:
    return DefinitionTable.build(7, (0.0, 0.0, 0.0), blocks_of([1, 2, 3], [4, 5]))


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_decode_error(data: bytes) -> None:
    for candidate in (data, b"\x09VRSP_DATA\x01" + data, b"\x08VRSP_DEF\x01" + data):
        try:
            packet = decode_packet(candidate)
        except DecodeError:
            continue
        if isinstance(packet, VrspData):
            with contextlib.suppress(DecodeError):
                _table().decode(packet.body, packet.count)


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_random_record_bytes_raise_only_decode_error(body: bytes) -> None:
    table = _table()
    for call in (lambda: table.decode(body), lambda: table.decode_implicit(body)):
        with contextlib.suppress(DecodeError):
            call()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_datagrams_never_crash_the_receiver(data: st.DataObject) -> None:
    table = _table()
    swarm = swarm_of([1, 4, 5], table.slots)
    datagrams = encode_def(7, (0.0, 0.0, 0.0), blocks_of([1, 2, 3], [4, 5]))
    datagrams += encode_data(table, swarm, 1) + encode_data(table, swarm, 2, max_size=80)
    receiver = ReceiverSession()
    for datagram in datagrams:
        damaged = bytearray(datagram)
        for _ in range(data.draw(st.integers(0, 3))):
            at = data.draw(st.integers(0, len(damaged) - 1))
            damaged[at] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(damaged)))
        receiver.feed_datagram(bytes(damaged[:cut] if data.draw(st.booleans()) else damaged),
                               ("peer", 1), 0.0)  # fmt: skip
