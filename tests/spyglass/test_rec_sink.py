"""`robowire record ... -o run.rec`: the world written as a SpyGlass `.rec` recording
(`RecSink`), read back with our reader."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from spyglass_strategies import DEMO

from robowire.errors import DecodeError
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass import rec
from robowire.protocols.spyglass.services import RecSink
from robowire.world import Update, World

OBJECT = 65535  # the trajectory object "1:40" is a device of its own, numbered from the top


def record(source: Path, output: Path) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "record", str(source), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert f"written to {output}" in run.stderr
    return run.stderr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("rec") / "run.rec"
    record(DEMO, output)
    return output


def test_recording_the_demo_keeps_nodes_positions_and_neighbours(recorded: Path) -> None:
    original = list(rec.read_rec(DEMO))
    written = list(rec.read_rec(recorded))
    assert written
    # every sender is a node again, with its own id; the trajectory object is its packet again
    assert {p.sender for p in written} == {p.sender for p in original}
    assert OBJECT not in {p.sender for p in written}
    nodes = written
    # each packet is one the recording had: same sender, time and position
    by_key = {(p.sender, p.seconds, p.milliseconds): p for p in original}
    for packet in nodes:
        was = by_key[(packet.sender, packet.seconds, packet.milliseconds)]
        assert (packet.x, packet.y, packet.z) == (was.x, was.y, was.z)
        if isinstance(packet, c.NeighborhoodPacket) and isinstance(was, c.NeighborhoodPacket):
            assert packet.neighbors == was.neighbors
        if isinstance(packet, c.DataPacket) and packet.semantic_type == 20:
            assert isinstance(was, c.DataPacket) and packet.values == was.values
    # every node ends with the neighbours it last reported
    last_said = {p.sender: p.neighbors for p in original if isinstance(p, c.NeighborhoodPacket)}
    last_written = {p.sender: p.neighbors for p in nodes if isinstance(p, c.NeighborhoodPacket)}
    assert {s: last_written[s] for s in last_said} == last_said
    # packet times in order, within the recording's
    times = [p.time for p in nodes]
    assert times == sorted(times)
    assert original[0].time <= times[0] and times[-1] <= original[-1].time


def test_record_layout_byte_for_byte(tmp_path: Path) -> None:
    """Two devices, written by hand from the fact sheet's layout: N, then the packet
    (uint16 length, version 2, syntax, semantic, uint16 sender, uint32 s, uint16 ms,
    int16 x y z, payload), big-endian; records in time order."""
    world = World()
    world.update_device("s", "5", receive_time=2e9, source_time=1243547390.944,
                        position=(12, -3, 250), links=["7"])  # fmt: skip
    world.update_device("s", "7", receive_time=100.5, position=(-1, 2, 0),
                        telemetry={"data.20": (21.5, "1")})  # fmt: skip
    path = tmp_path / "two.rec"
    sink = RecSink(str(path))
    fields = frozenset({"position", "links", "data.20"})
    assert sink.write(world, [Update("s", np.arange(2), fields, 2e9)])
    sink.finish(world)
    expected = bytes.fromhex(
        # node 7 (receive time 100.5): neighbourhood (uint16 list, type 10), no neighbours
        "13"
        "0011"
        "02"
        "02"
        "0a"
        "0007"
        "00000064"
        "01f4"
        "ffff"
        "0002"
        "0000"
        # then its telemetry data.20 = 21.5: float list (6), semantic type 20
        "17"
        "0015"
        "02"
        "06"
        "14"
        "0007"
        "00000064"
        "01f4"
        "ffff"
        "0002"
        "0000"
        "41ac0000"
        # node 5 (source time 1243547390.944): neighbourhood with neighbour 7
        "15"
        "0013"
        "02"
        "02"
        "0a"
        "0005"
        "4a1f06fe"
        "03b0"
        "000c"
        "fffd"
        "00fa"
        "0007"
    )
    assert path.read_bytes() == expected
    assert sink.messages == 3


def test_a_killed_recording_reads_up_to_its_last_whole_record(
    recorded: Path, tmp_path: Path
) -> None:
    """The recorder flushes each write: a SIGKILL leaves whole records and at most a part of
    one (here: the file cut in the middle of its 101st record)."""
    data = recorded.read_bytes()
    end = 0
    for _ in range(100):
        end += 1 + data[end]
    cut = tmp_path / "killed.rec"
    cut.write_bytes(data[: end + 1 + data[end] // 2])
    read: list[c.Packet] = []
    with pytest.raises(DecodeError) as error:
        read.extend(rec.read_rec(cut))
    assert read == list(rec.read_rec(recorded))[:100]
    assert error.value.offset == end


def test_record_rec_of_a_killed_recording_keeps_its_whole_records(
    recorded: Path, tmp_path: Path
) -> None:
    data = recorded.read_bytes()
    cut = tmp_path / "killed.rec"
    cut.write_bytes(data[: 1 + data[0] + 3])  # one whole record, then 3 bytes of the next
    again = tmp_path / "again.rec"
    said = record(cut, again)
    assert "cut off" in said  # the one drop, said once
    first = next(rec.read_rec(recorded))
    (packet,) = rec.read_rec(again)
    assert packet == first  # the same packet again: a SpyGlass file is recorded as itself


def test_a_node_with_too_many_neighbours_is_dropped_and_counted(tmp_path: Path) -> None:
    """19 + 2 x 119 bytes is over the 255 a record holds: that packet alone is left out."""
    world = World()
    for node in range(1, 121):
        world.update_device("s", str(node), receive_time=10.0, position=(0, 0, 0))
    world.update_device("s", "1", receive_time=11.0, links=[str(n) for n in range(2, 121)])
    world.update_device("s", "2", receive_time=12.0, links=[str(n) for n in range(3, 121)])
    path = tmp_path / "big.rec"
    sink = RecSink(str(path))
    table = world.table("s")
    slots = np.array([table.ids.index("1"), table.ids.index("2")])
    assert sink.write(world, [Update("s", slots, frozenset({"links"}), 12.0)])
    sink.finish(world)
    (packet,) = rec.read_rec(path)
    assert isinstance(packet, c.NeighborhoodPacket)
    assert packet.sender == 2 and packet.neighbors == tuple(range(3, 121))
    assert sink.stats.dropped == 1 and sink.messages == 1
