"""The recorder keeps the `mcap` writer's chunk indexes packed as bytes (memory that grows with
every chunk until the file ends): the file is the very same as the writer makes alone."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from robowire.recording.writer import PackedChunkIndexes


def recording(path: Path, packed: bool, chunks: int = 200) -> tuple[bytes, int]:
    """A file of `chunks` chunks of 20 channels' messages, and the bytes its writer held."""
    out = path.open("wb")
    writer = Writer(out, chunk_size=4096, compression=CompressionType.NONE)
    if packed:
        PackedChunkIndexes.install(writer)
    writer.start(profile="", library="test")
    schema = writer.register_schema("s", "jsonschema", b"{}")
    channels = [writer.register_channel(f"/c{k}", "json", schema) for k in range(20)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for n in range(chunks * 20):
        writer.add_message(channels[n % 20], n, b"x" * 200, n)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    writer.finish()
    out.close()
    return path.read_bytes(), held


def test_a_recording_with_packed_chunk_indexes_is_byte_for_byte_the_writers_own(tmp_path: Path):
    plain, plain_held = recording(tmp_path / "plain.mcap", packed=False)
    packed, packed_held = recording(tmp_path / "packed.mcap", packed=True)
    assert packed == plain
    summary = make_reader(io.BytesIO(packed)).get_summary()
    assert summary is not None and len(summary.chunk_indexes) >= 190
    assert packed_held < plain_held / 3  # what a long recording holds until it ends
