"""Shared by the SpyGlass tests: hypothesis strategies for packets of every type and syntax
type, the original tool's recording, and a sample data packet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from robowire.protocols.spyglass import codec as c

DEMO = Path(__file__).parents[1] / "data" / "spyglass" / "recording-2009-05-28.rec"
DATA = c.DataPacket(
    semantic_type=20,
    sender=7,
    seconds=100,
    milliseconds=5,
    syntax_type=c.SyntaxType.UINT8_LIST,
    values=(21,),
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
i16 = st.integers(-0x8000, 0x7FFF)
u32 = st.integers(0, 0xFFFFFFFF)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
f32 = st.floats(width=32, allow_nan=False)
ELEMENTS: dict[c.SyntaxType, st.SearchStrategy[Any]] = {
    c.SyntaxType.UINT8_LIST: u8,
    c.SyntaxType.UINT16_LIST: u16,
    c.SyntaxType.INT16_LIST: i16,
    c.SyntaxType.UINT32_LIST: u32,
    c.SyntaxType.INT64_LIST: i64,
    c.SyntaxType.FLOAT_LIST: f32,
}
# Semantic types the default profile leaves to generic data.
DATA_SEMANTICS = st.integers(0, 255).filter(lambda s: s not in (10, 11, 30, 31, 40, 41))


def header(semantic: st.SearchStrategy[int] = u8) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "semantic_type": semantic,
            "sender": u16,
            "seconds": u32,
            "milliseconds": u16,
            "x": i16,
            "y": i16,
            "z": i16,
        }
    )


def _build(cls: type, semantic: st.SearchStrategy[int], **fields: Any) -> st.SearchStrategy[Any]:
    return st.builds(lambda h, f: cls(**h, **f), header(semantic), st.fixed_dictionaries(fields))


def data_packets() -> st.SearchStrategy[c.DataPacket]:
    return st.sampled_from(sorted(ELEMENTS)).flatmap(
        lambda syntax: _build(
            c.DataPacket,
            DATA_SEMANTICS,
            syntax_type=st.just(syntax),
            values=st.lists(ELEMENTS[syntax], max_size=20).map(tuple),
        )
    )


variable_item = st.sampled_from(sorted(ELEMENTS)).flatmap(
    lambda tag: ELEMENTS[tag].map(lambda v: (tag, v))
)


def trajectory(dims: int) -> st.SearchStrategy[tuple[Any, Any]]:
    point = st.tuples(*([i16] * dims))
    return st.integers(2, 8).flatmap(
        lambda n: st.tuples(
            st.lists(point, min_size=n, max_size=n).map(tuple),
            st.lists(st.integers(0, 0x7FFF), min_size=n - 1, max_size=n - 1).map(tuple),
        )
    )


def _trajectory_packet(cls: type, sem: int, dims: int) -> st.SearchStrategy[Any]:
    return st.builds(
        lambda h, t: cls(**h, points=t[0], durations=t[1]), header(st.just(sem)), trajectory(dims)
    )


PROFILE = c.SemanticProfile.parse(
    "10=neighborhood,11=node-link,30=coordinates-2d,31=coordinates-3d,"
    "40=trajectory-3d,41=trajectory-2d"
)


def packets() -> st.SearchStrategy[Any]:
    """Any packet, decodable with PROFILE."""
    return st.one_of(
        _build(c.StdPacket, u8, payload=st.binary(max_size=40)),
        data_packets(),
        _build(c.VariableListPacket, u8, items=st.lists(variable_item, max_size=10).map(tuple)),
        _build(c.NeighborhoodPacket, st.just(10), neighbors=st.lists(u16, max_size=20).map(tuple)),
        _build(
            c.NodeLinkPacket,
            st.just(11),
            destination=u16,
            values=st.lists(u16, max_size=4).map(tuple),
        ),
        _build(
            c.CoordinatesList2Packet,
            st.just(30),
            points=st.lists(st.tuples(i16, i16), max_size=10).map(tuple),
        ),
        _build(
            c.CoordinatesList3Packet,
            st.just(31),
            points=st.lists(st.tuples(i16, i16, i16), max_size=10).map(tuple),
        ),
        _trajectory_packet(c.TrajectoryPacket3, 40, 3),
        _trajectory_packet(c.TrajectoryPacket2, 41, 2),
    )


def cut_recording(path: Path, whole: int) -> Path:
    """A copy of the demo recording: its first `whole` records, then half of the next one."""
    data = DEMO.read_bytes()
    end = 0
    for _ in range(whole):
        end += 1 + data[end]
    path.write_bytes(data[: end + (1 + data[end]) // 2])
    return path
