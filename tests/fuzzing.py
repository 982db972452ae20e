"""The one place the fuzzing machinery lives: targets, seeds, mutators and chunkers.

Both runners use it:
  * `tests/fuzz_suite/` (hypothesis, in `make test`): random bytes and mutated seeds, fed in
    random chunkings, a modest derandomized number of examples per target;
  * `fuzz/` (atheris, `make fuzz` / `python -m fuzz TARGET --time 60`): coverage-guided,
    seeded with the same seeds.

A target is `run(data, cuts)`: it feeds `data` to one decoder or one session, split at
`cuts` (chunk sizes, cycled) where the input is a stream. The contract it checks:
  * a decoder may raise only the project's typed errors (`RobowireError`; anything else,
    IndexError, struct.error, UnicodeDecodeError, MemoryError, ... escapes and fails);
  * a session never raises: bad bytes are counted (`stats.dropped`) and dropped;
  * nothing grows without bound: session buffers stay within the protocol's frame limit.

Seeds come from the real captures in tests/data/ (and, for formats without a capture there,
from the project's encoders). Every crash a fuzzer found lives in tests/data/fuzz/<target>/
and is replayed by the regression test.
"""

from __future__ import annotations

import io
import json
import os
import random
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from robowire.errors import RobowireError
from support import sample_capture

DATA = Path(__file__).resolve().parent / "data"
CAPTURES = DATA / "captures"
CRASHES = DATA / "fuzz"

Run = Callable[[bytes, Sequence[int]], None]


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # "decoder" or "session"
    run: Run
    seeds: Callable[[], list[bytes]]
    doc: str


TARGETS: dict[str, Target] = {}


def target(name: str, kind: str, seeds: Callable[[], list[bytes]]) -> Callable[[Run], Run]:
    def register(run: Run) -> Run:
        TARGETS[name] = Target(name, kind, run, seeds, (run.__doc__ or "").strip())
        return run

    return register


# -- the contract ------------------------------------------------------------------------------


def typed_only(call: Callable[[], Any]) -> Any:
    """Run a decoder; a RobowireError (DecodeError, ConfigError for a file that is not the
    format at all) is a correct answer to bad bytes; any other exception propagates."""
    try:
        return call()
    except RobowireError:
        return None


def chunks(data: bytes, cuts: Sequence[int]) -> Iterator[bytes]:
    """`data` in pieces of the sizes in `cuts` (cycled; 0 counts as 1); whole if no cuts."""
    if not cuts:
        if data:
            yield data
        return
    pos, i = 0, 0
    while pos < len(data):
        size = max(1, cuts[i % len(cuts)])
        yield data[pos : pos + size]
        pos += size
        i += 1


def check_stats(stats: Any) -> None:
    """A session's counters stay sane whatever it was fed."""
    assert stats.dropped >= 0 and stats.messages_in >= 0
    assert all(isinstance(v, int) and v >= 0 for v in stats.extra.values()), stats.extra


def as_file(data: bytes, suffix: str) -> Iterator[str]:
    """A temporary file holding `data` (for readers that take a path)."""
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="robowire-fuzz-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


def read_path(data: bytes, suffix: str, read: Callable[[str], Any]) -> None:
    for path in as_file(data, suffix):
        typed_only(lambda p=path: read(p))


# -- mutators (shared by hypothesis and the atheris custom mutator) ----------------------------


def flip_bits(data: bytes, rng: random.Random, n: int = 4) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(n):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def set_bytes(data: bytes, rng: random.Random) -> bytes:
    """Overwrite a few bytes with values that break length fields: 0, 0xFF, 0x7F, 0x80."""
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(out))
        out[i] = rng.choice((0, 0xFF, 0x7F, 0x80, 1))
    return bytes(out)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def splice(data: bytes, other: bytes, rng: random.Random) -> bytes:
    a = rng.randrange(len(data) + 1)
    b = rng.randrange(len(other) + 1)
    c = rng.randrange(b, len(other) + 1)
    return data[:a] + other[b:c] + data[a:]


def duplicate(data: bytes, rng: random.Random) -> bytes:
    a = rng.randrange(len(data) + 1)
    b = rng.randrange(a, len(data) + 1)
    return data[:b] + data[a:b] + data[b:]


def repeat_byte(data: bytes, rng: random.Random) -> bytes:
    """One of the bytes repeated up to 4,096 times (deep nesting: `[[[[…`, long runs)."""
    if not data:
        return data
    a = rng.randrange(len(data))
    return data[:a] + data[a : a + 1] * rng.randrange(2, 4097) + data[a:]


def mutate(data: bytes, pool: Sequence[bytes], rng: random.Random) -> bytes:
    """One to three mutations of `data`: bit flips, hot bytes, truncation, splices of other
    real capture bytes from `pool`, duplicated ranges, a byte repeated."""
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(6)
        if op == 5:
            data = repeat_byte(data, rng)
            continue
        if op == 0:
            data = flip_bits(data, rng, rng.randrange(1, 9))
        elif op == 1:
            data = set_bytes(data, rng)
        elif op == 2:
            data = truncate(data, rng)
        elif op == 3 and pool:
            data = splice(data, rng.choice(pool), rng)
        else:
            data = duplicate(data, rng)
    return data


# -- seeds: the real captures in tests/data/ ---------------------------------------------------


def _read(*parts: str) -> bytes:
    return CAPTURES.joinpath(*parts).read_bytes()  # a missing file fails, never skips


def _cap(data: bytes, limit: int = 16 << 10) -> bytes:
    return data[:limit]


@cache
def spyglass_stream() -> bytes:
    from robowire.protocols.spyglass.rec import iter_rec

    entries = list(
        iter_rec(io.BytesIO((DATA / "spyglass" / "recording-2009-05-28.rec").read_bytes()))
    )
    return b"".join(e.data for e in entries[:200])


def spyglass_seeds() -> list[bytes]:
    stream = spyglass_stream()
    return [stream[:2000], stream[:64], _cap(stream)]


def spyglass_rec_seeds() -> list[bytes]:
    return [(DATA / "spyglass" / "recording-2009-05-28.rec").read_bytes()[:4000]]


def vrpn_s2c_seeds() -> list[bytes]:
    s2c = _read("vrpn", "tcp_tracker.s2c.bin")
    return [_cap(s2c, 4000), _cap(s2c)]


def vrpn_c2s_seeds() -> list[bytes]:
    return [_cap(_read("vrpn", "tcp_tracker.c2s.bin"))]


def vrpn_frame_seeds() -> list[bytes]:
    """Streams without the cookie: message framing only."""
    return [s[24:] for s in vrpn_s2c_seeds() + vrpn_c2s_seeds()]


def vrpn_log_seeds() -> list[bytes]:
    return [_cap(_read("vrpn", "log_server_out.vrpn"))]


def pcap_seeds() -> list[bytes]:
    return [_cap(_read("vrpn", "tcp_tracker.pcap"), 32 << 10)]


def _hex_lines(path: Path, field: str) -> list[bytes]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(bytes.fromhex(json.loads(line)[field]))
    return out


def xrp_datagrams() -> list[bytes]:
    out = []
    for line in _read("xrp", "capture_normal.txt").decode().splitlines():
        parts = line.split()
        if len(parts) == 4 and not line.startswith("#"):
            out.append(bytes.fromhex(parts[3]))
    return out


def xrp_seeds() -> list[bytes]:
    grams = xrp_datagrams()
    return [*grams[:6], b"".join(grams[:3])]


def xrp_text_seeds() -> list[bytes]:
    return [b"\n".join(_read("xrp", "capture_normal.txt").splitlines()[:20]) + b"\n"]


def ugcs_stream(direction: str) -> bytes:
    lines = _read("ugcs", "capture_hello_basic.jsonl").decode().splitlines()
    return b"".join(
        bytes.fromhex(json.loads(line)["hex"])
        for line in lines
        if line.strip() and json.loads(line)["dir"] == direction
    )


def ugcs_vsm_to_ucs_seeds() -> list[bytes]:
    return [_cap(ugcs_stream("vsm->ucs"))]


def ugcs_ucs_to_vsm_seeds() -> list[bytes]:
    return [_cap(ugcs_stream("ucs->vsm"))]


def ugcs_both_seeds() -> list[bytes]:
    return ugcs_vsm_to_ucs_seeds() + ugcs_ucs_to_vsm_seeds()


@cache
def vrsp_datagrams() -> tuple[bytes, ...]:
    """A DEF for three drones of the example definition (tests/data) and two DATA frames."""
    from robowire.protocols.vrsp.codec import (
        DefinitionTable,
        VrspDef,
        decode_packet,
        definition_from_json,
        empty_swarm,
        encode_data,
        encode_def,
    )

    obj = json.loads(_read("vrsp", "verge_example_definition.json"))
    definition = definition_from_json(obj)
    ids = np.array([1, 2, 3], np.uint16)
    defs = encode_def(7, (47.0, 8.0, 400.0), [(definition, ids)])
    packet = decode_packet(defs[0])
    assert isinstance(packet, VrspDef)
    table = DefinitionTable.from_def(packet)
    swarm = empty_swarm(3, len(definition.payloads))
    swarm.ids[:] = ids
    swarm.position[:] = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    datas = encode_data(table, swarm, 1) + encode_data(table, swarm, 2, max_size=80)
    return (*defs, *datas)


def vrsp_def() -> Any:
    from robowire.protocols.vrsp.codec import VrspDef, decode_packet

    packet = decode_packet(vrsp_datagrams()[0])
    assert isinstance(packet, VrspDef)
    return packet


def vrsp_seeds() -> list[bytes]:
    grams = vrsp_datagrams()
    return [*grams, b"".join(grams)]


def vrsp_json_seeds() -> list[bytes]:
    return [_read("vrsp", "verge_example_definition.json")]


def zenoh_seeds() -> list[bytes]:
    from robowire.zenoh import codec

    state = codec.State(
        receive_time=12.5,
        slots=np.array([3, 7], np.uint32),
        columns={
            "position": codec.Column(values=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])),
            "battery": codec.Column(values=np.array([0.5, 0.25]), unit="V", telemetry=True),
        },
    )
    devices = codec.Devices(
        slots=(0,), ids=("d1",), kinds=("drone",), names=("D",), links=((),), attributes=({},)
    )
    log = codec.Log(device="d1", text="armed", level="info", time=3.0)
    batch = codec.encode_batch([("a", codec.encode(state)), ("b/c", codec.encode(state))])
    return [codec.encode(state), codec.encode(devices), codec.encode(log), batch]


def ros2_seeds() -> list[bytes]:
    from robowire.ros2 import cdr

    stamp = {"stamp": {"sec": 5, "nanosec": 7}, "frame_id": "world"}
    pose = {"position": {"x": 1.0}, "orientation": {"w": 1.0}}
    transform = {"header": stamp, "child_frame_id": "robot1", "transform": {"rotation": {"w": 1}}}
    return [
        cdr.encode("tf2_msgs/msg/TFMessage", {"transforms": [transform, transform]}),
        cdr.encode("geometry_msgs/msg/PoseStamped", {"header": stamp, "pose": pose}),
        cdr.encode("nav_msgs/msg/Odometry", {"header": stamp, "child_frame_id": "c"}),
        cdr.encode("sensor_msgs/msg/NavSatFix", {"header": stamp, "latitude": 47.0}),
    ]


def viewer_seeds() -> list[bytes]:
    from robowire.viewer.frames import BLOCK, HEADER

    plain = BLOCK.pack(3, 0, 2) + bytes(2 * 52)
    beam = BLOCK.pack(4, 1, 1) + bytes(64)
    return [HEADER.pack(1, 0, 2, 5, 1.5) + plain + beam, HEADER.pack(1, 0, 0, 0, 0.0)]


@cache
def mcap_seed() -> bytes:
    from mcap.writer import Writer

    out = io.BytesIO()
    writer = Writer(out)
    writer.start()
    schema = writer.register_schema("update", "jsonschema", b"{}")
    channel = writer.register_channel("/robowire/demo", "json", schema)
    raw = writer.register_channel("/raw/vrpn/demo", "application/octet-stream", 0)
    for i in range(5):
        body = json.dumps({"id": f"d{i}", "position": [i, 0, 0]}).encode()
        writer.add_message(channel, log_time=i * 1000, data=body, publish_time=i * 1000)
        writer.add_message(raw, log_time=i * 1000, data=bytes(8), publish_time=i * 1000)
    writer.finish()
    return out.getvalue()


@cache
def mcap_recorder_seed() -> bytes:
    """A recording as the recorder writes it: protobuf `robowire.Update`s, Foxglove channels."""
    import tempfile

    import numpy as np

    from robowire.recording import McapRecorder
    from robowire.world import World

    world = World()
    with tempfile.TemporaryDirectory() as tmp, world.subscribe(every_update=True) as changes:
        recorder = McapRecorder(f"{tmp}/seed.mcap")
        recorder.open()
        slots = world.table("demo").slots(["d0", "d1", "d2"], kind="drone")
        for i in range(3):
            world.update(
                "demo", slots, receive_time=float(i), position=np.full((3, 3), float(i)),
                geodetic=np.full((3, 3), 1.5), telemetry={"led_red": (np.arange(3.0), "1")},
            )  # fmt: skip
            recorder.write(world, changes.pull())
        recorder.finish(world)
        with open(f"{tmp}/seed.mcap", "rb") as f:
            return f.read()


def mcap_seeds() -> list[bytes]:
    return [mcap_seed(), mcap_recorder_seed()]


@cache
def rosbag2_seeds() -> list[bytes]:
    """A ROS 2 bag's storage files: MCAP as robowire's BagWriter writes it, SQLite as
    rosbags' Writer does (a /tf TFMessage with one transform, three times)."""
    import tempfile

    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from robowire.ros2 import types
    from robowire.ros2.bag import BagWriter, Qos, Topic

    store = get_typestore(Stores.ROS2_KILTED)
    t, tf = store.types, "tf2_msgs/msg/TFMessage"
    stamp = t["builtin_interfaces/msg/Time"](sec=1, nanosec=2)
    transform = t["geometry_msgs/msg/TransformStamped"](
        header=t["std_msgs/msg/Header"](stamp=stamp, frame_id="world"),
        child_frame_id="d0",
        transform=t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=1.0, y=2.0, z=3.0),
            rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    data = bytes(store.serialize_cdr(t[tf](transforms=[transform]), tf))
    with tempfile.TemporaryDirectory() as tmp:
        ours = BagWriter(f"{tmp}/ours")
        channel = ours.topic(Topic("/tf", tf, types.definition(tf), types.rihs01(tf)), Qos())
        with Writer(f"{tmp}/theirs", version=9, storage_plugin=StoragePlugin.SQLITE3) as theirs:
            connection = theirs.add_connection("/tf", tf, typestore=store)
            for i in range(3):
                ours.write(channel, i * 1000, data)
                theirs.write(connection, i * 1000, data)
        ours.close()
        return [ours.file.read_bytes(), next(Path(f"{tmp}/theirs").glob("*.db3")).read_bytes()]


# -- decoders ----------------------------------------------------------------------------------


@target("spyglass-codec", "decoder", spyglass_seeds)
def spyglass_codec(data: bytes, cuts: Sequence[int]) -> None:
    """split + decode_batch + decode_columns + next_packet + decode (strict, lenient, WISEBED)."""
    from robowire.protocols.spyglass import codec

    starts, end, _error = codec.split(data)
    assert end <= len(data)
    typed = codec.decode_batch(data, starts, end)
    if starts:  # the columnar decoder keeps exactly the packets the typed one decodes
        columns, drops = codec.decode_columns(data, starts, end)
        assert len(columns) + len(drops) == len(starts)
        kept = [p for p in typed if not isinstance(p, Exception)]
        assert repr(columns.packets()) == repr(kept)  # repr: a NaN value equals itself
    offset = 0
    while True:
        got = typed_only(lambda o=offset: codec.next_packet(data, o))
        if not got:
            break
        offset += got[1]
    typed_only(lambda: codec.decode(data))
    typed_only(lambda: codec.decode(data, strict_length=False))
    typed_only(lambda: codec.decode(data, wisebed=True))
    typed_only(lambda: codec.decode_variable(data))


@target("spyglass-rec", "decoder", spyglass_rec_seeds)
def spyglass_rec(data: bytes, cuts: Sequence[int]) -> None:
    """The .rec capture reader (read_rec and rec_records)."""
    from robowire.protocols.spyglass.rec import read_rec, rec_records

    chunk = max(1, cuts[0]) if cuts else 1 << 16
    typed_only(lambda: list(read_rec(io.BytesIO(data))))
    typed_only(lambda: list(rec_records(io.BytesIO(data))))
    from robowire.protocols.spyglass.rec import iter_rec

    typed_only(lambda: list(iter_rec(io.BytesIO(data), chunk)))


@target("vrpn-codec", "decoder", vrpn_frame_seeds)
def vrpn_codec(data: bytes, cuts: Sequence[int]) -> None:
    """Cookie, stream frames, datagrams, scan, names, LOB, system and typed message bodies."""
    from robowire.protocols.vrpn import codec, registry, system

    typed_only(lambda: codec.decode_cookie(data))
    typed_only(lambda: codec.decode_datagram(data))
    typed_only(lambda: codec.scan(data))
    typed_only(lambda: codec.decode_name(data))
    typed_only(lambda: codec.decode_lob(data))
    offset = 0
    while True:
        got = typed_only(lambda o=offset: codec.decode_frame(data, o))
        if not got:
            break
        frame, used = got
        assert used > 0
        offset += used
        typed_only(lambda f=frame: system.decode_system(f.type, f.sender, f.body))
    for name in registry.BODY_TYPES:
        typed_only(lambda n=name: registry.decode_body(n, data))


@target("vrpn-logfile", "decoder", vrpn_log_seeds)
def vrpn_logfile(data: bytes, cuts: Sequence[int]) -> None:
    """The .vrpn log reader (iter_log) and the stream -> log conversion."""
    from robowire.protocols.vrpn import logfile

    logfile.is_log(data)
    typed_only(lambda: list(logfile.iter_log(data)))
    typed_only(lambda: logfile.stream_to_log(data))


@target("xrp-codec", "decoder", xrp_seeds)
def xrp_codec(data: bytes, cuts: Sequence[int]) -> None:
    """decode_packet / decode_datagram / decode_status of one datagram."""
    from robowire.protocols.xrp import codec

    typed_only(lambda: codec.decode_packet(data))
    typed_only(lambda: codec.decode_datagram(data))
    typed_only(lambda: codec.decode_status(data))


@target("xrp-text", "decoder", xrp_text_seeds)
def xrp_text(data: bytes, cuts: Sequence[int]) -> None:
    """The XRP text capture reader (`<t> <dir> <len> <hex>` lines)."""
    from robowire.protocols.xrp.dissect import dissect, read_capture

    read_path(data, ".txt", lambda p: list(read_capture(p)))
    read_path(data, ".txt", lambda p: list(dissect(p)))


@target("ugcs-codec", "decoder", ugcs_both_seeds)
def ugcs_codec(data: bytes, cuts: Sequence[int]) -> None:
    """FrameReader fed in chunks, decode_frames, decode_message."""
    from robowire.protocols.ugcs import codec

    reader = codec.FrameReader()
    for piece in chunks(data, cuts):
        _msgs, _error = reader.feed(piece)
        assert reader.pending <= codec.MAX_FRAME + codec.MAX_VARINT_BYTES
    typed_only(lambda: codec.decode_frames(data))
    typed_only(lambda: codec.decode_message(data))


@target("vrsp-codec", "decoder", vrsp_seeds)
def vrsp_codec(data: bytes, cuts: Sequence[int]) -> None:
    """decode_packet of any datagram, and the DATA records against the seed's DEF table."""
    from robowire.protocols.vrsp import codec

    typed_only(lambda: codec.decode_packet(data))
    typed_only(lambda: codec.decode_implicit(data))
    table = codec.DefinitionTable.from_def(vrsp_def())
    typed_only(lambda: table.decode(data))
    typed_only(lambda: table.decode(data, 3))
    typed_only(lambda: table.decode_implicit(data))


@target("vrsp-definitions", "decoder", vrsp_json_seeds)
def vrsp_definitions(data: bytes, cuts: Sequence[int]) -> None:
    """A definition's JSON (as bytes inside a VRSP_DEF block, and as a parsed object)."""
    from robowire.protocols.vrsp import codec

    block = struct.pack("<II", 1, len(data)) + data + struct.pack("<H", 1)
    typed_only(lambda: codec.decode_packet(vrsp_def_head() + block))
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return  # not JSON at all: the DEF path above turns that into a DecodeError
    typed_only(lambda: codec.definition_from_json(obj))


def vrsp_def_head() -> bytes:
    """The seed DEF datagram without its definition blocks (identifier, version, instance,
    device count 3, root)."""
    datagram = vrsp_datagrams()[0]
    blocks = sum(8 + len(b.text.encode()) + 2 * len(b.ids) for b in vrsp_def().blocks)
    return datagram[: len(datagram) - blocks]


@target("zenoh-codec", "decoder", zenoh_seeds)
def zenoh_codec(data: bytes, cuts: Sequence[int]) -> None:
    """The zenoh payload codec."""
    from robowire.zenoh import codec

    typed_only(lambda: codec.decode(data))


@target("ros2-decode", "decoder", ros2_seeds)
def ros2_decode(data: bytes, cuts: Sequence[int]) -> None:
    """`listen ros2://`'s CDR decoders, every type (/tf's with a layout remembered first)."""
    from robowire.ros2 import decode

    for ros_type in sorted(decode.READABLE):
        decoder = decode.decoder(ros_type)
        assert decoder is not None
        typed_only(partial(decoder, data))
    remembered = decode.TfDecoder()
    remembered(ros2_seeds()[0])
    typed_only(lambda: remembered(data))


@target("viewer-frames", "decoder", viewer_seeds)
def viewer_frames(data: bytes, cuts: Sequence[int]) -> None:
    """The viewer's binary state frame decoder."""
    from robowire.viewer.frames import decode_frame

    typed_only(lambda: decode_frame(data))


@target("mcap-reader", "decoder", mcap_seeds)
def mcap_reader(data: bytes, cuts: Sequence[int]) -> None:
    """The MCAP recording reader (messages, world records, contents, raw records)."""
    from robowire.recording import reader

    read_path(data, ".mcap", lambda p: list(reader.read_recording(p)))
    read_path(data, ".mcap", lambda p: reader.contents(p))
    read_path(data, ".mcap", lambda p: list(reader.raw_records(p, "vrpn/demo", 3883)))


@target("rosbag2-reader", "decoder", rosbag2_seeds)
def rosbag2_reader(data: bytes, cuts: Sequence[int]) -> None:
    """A ROS 2 bag's storage file read alone (MCAP and SQLite), and what `listen BAG` decodes."""
    from robowire.ros2 import decode
    from robowire.ros2.bag import open_bag, read

    def play(path: str) -> None:
        for message in read(open_bag(path)):
            decoder = decode.decoder(message.topic.type)
            if decoder is not None:
                typed_only(lambda m=message, d=decoder: d(m.data))

    read_path(data, ".mcap", play)
    read_path(data, ".db3", play)


@target(
    "rmw-zenoh", "decoder", lambda: [bytes(33), b"0/tf/tf2_msgs::msg::dds_::TFMessage_/RIHS01_0"]
)
def rmw_zenoh_format(data: bytes, cuts: Sequence[int]) -> None:
    """rmw_zenoh's attachment, data keys and liveliness tokens (`listen ros2+zenoh://`)."""
    from robowire.ros2 import rmw_zenoh

    typed_only(lambda: rmw_zenoh.parse_attachment(data))
    text = data.decode("utf-8", "replace")
    rmw_zenoh.parse_data_key(text)
    rmw_zenoh.parse_token(text)


@target("pcap", "decoder", pcap_seeds)
def pcap(data: bytes, cuts: Sequence[int]) -> None:
    """The pcap/pcapng capture reader (with TCP reassembly) and the capture sniffer."""
    from robowire.capture import read_capture, read_pcap

    read_path(data, ".pcap", lambda p: list(read_pcap(p)))
    read_path(data, ".bin", lambda p: list(read_capture(p)))


# -- every registered protocol, from the registry ------------------------------------------------


def capture_seeds(name: str) -> Callable[[], list[bytes]]:
    """A protocol's first records in its sample capture: one each, and their bytes joined."""

    def seeds() -> list[bytes]:
        from robowire import protocols

        records = protocols.get(name).records(str(sample_capture(name)))
        first = [r.data for _, r in zip(range(8), records, strict=False)]
        return [*first[:4], _cap(b"".join(first))]

    return seeds


def protocol_target(name: str) -> Target:
    """`robowire decode NAME` of the bytes as a raw capture: the protocol's capture reader,
    codec and dissector, whatever protocol it is (`WireProtocol.dissect`)."""

    def run(data: bytes, cuts: Sequence[int]) -> None:
        from robowire import protocols

        protocol = protocols.get(name)
        read_path(data, ".bin", lambda p: list(protocol.dissect(p)))

    doc = f"robowire decode {name} FILE of the bytes as a raw capture (reader, codec, dissect)."
    return Target(f"{name}-capture", "decoder", run, capture_seeds(name), doc)


def protocol_targets() -> dict[str, Target]:
    """One `protocol_target` per protocol the registry has now."""
    from robowire import protocols

    return {t.name: t for t in map(protocol_target, protocols.names())}


TARGETS.update(protocol_targets())


# -- sessions ----------------------------------------------------------------------------------


def _stream_session(session: Any, data: bytes, cuts: Sequence[int]) -> None:
    now = 1.0
    for piece in chunks(data, cuts):
        events = session.feed(piece, now)
        assert isinstance(events, list)
        session.data_to_send()
        now += 0.01
    session.tick(now + 10.0)
    session.data_to_send()
    session.feed_eof(now + 10.0)
    check_stats(session.stats)


@target("spyglass-session", "session", spyglass_seeds)
def spyglass_session(data: bytes, cuts: Sequence[int]) -> None:
    """SpyglassSession fed a stream in chunks."""
    from robowire.protocols.spyglass.session import SpyglassSession

    _stream_session(SpyglassSession(), data, cuts)


@target("vrpn-session-client", "session", vrpn_s2c_seeds)
def vrpn_client(data: bytes, cuts: Sequence[int]) -> None:
    """VrpnSession in the client role: the server's stream in chunks, then as datagrams."""
    from robowire.protocols.vrpn.session import Role, VrpnSession

    session = VrpnSession(Role.CLIENT, senders=["Tracker0"], now=0.0)
    _stream_session(session, data, cuts)
    session = VrpnSession(Role.CLIENT, senders=["Tracker0"], now=0.0)
    session.feed(data[:24], 0.0)
    for piece in chunks(data[24:], cuts):
        session.feed_datagram(piece, ("127.0.0.1", 3883), 0.5)
    session.datagrams_to_send()
    check_stats(session.stats)


@target("vrpn-session-server", "session", vrpn_c2s_seeds)
def vrpn_server(data: bytes, cuts: Sequence[int]) -> None:
    """VrpnSession in the server role fed a client's stream in chunks."""
    from robowire.protocols.vrpn.session import Role, VrpnSession

    session = VrpnSession(
        Role.SERVER, senders=["Tracker0"], types=["vrpn_Tracker Pos_Quat"], now=0.0
    )
    _stream_session(session, data, cuts)


@target("xrp-session-robot", "session", xrp_seeds)
def xrp_robot(data: bytes, cuts: Sequence[int]) -> None:
    """RobotSession (the robot side) fed WPILib's datagrams."""
    from robowire.protocols.xrp.model import Fleet
    from robowire.protocols.xrp.session_robot import RobotSession

    session = RobotSession(Fleet(1))
    now = 0.0
    for piece in chunks(data, cuts):
        session.feed_datagram(piece, ("127.0.0.1", 50000), now)
        session.tick(now)
        session.datagrams_to_send()
        now += 0.02
    check_stats(session.stats)


@target("xrp-session-wpilib", "session", xrp_seeds)
def xrp_wpilib(data: bytes, cuts: Sequence[int]) -> None:
    """ClientSession (the WPILib side) fed the robot's datagrams."""
    from robowire.protocols.xrp.session_wpilib import ClientSession

    session = ClientSession(("127.0.0.1", 3540))
    now = 0.0
    for piece in chunks(data, cuts):
        session.feed_datagram(piece, ("127.0.0.1", 3540), now)
        session.feed_sent_datagram(piece, now)
        session.tick(now)
        session.datagrams_to_send()
        now += 0.02
    check_stats(session.stats)


@target("ugcs-session-vsm", "session", ugcs_ucs_to_vsm_seeds)
def ugcs_vsm(data: bytes, cuts: Sequence[int]) -> None:
    """VsmSession's link (the vehicle side) fed the UCS's stream in chunks."""
    from robowire.protocols.ugcs.session_vsm import VsmSession

    session = VsmSession(peer_id=1, keep_alive=1.0)
    _stream_session(session.connect(0.0), data, cuts)


@target("ugcs-session-ucs", "session", ugcs_vsm_to_ucs_seeds)
def ugcs_ucs(data: bytes, cuts: Sequence[int]) -> None:
    """UcsSession (the ground-station side) fed a VSM's stream in chunks."""
    from robowire.protocols.ugcs.session_ucs import UcsSession

    _stream_session(UcsSession(0.0, peer_id=1), data, cuts)


@target("vrsp-session", "session", vrsp_seeds)
def vrsp_receiver(data: bytes, cuts: Sequence[int]) -> None:
    """ReceiverSession fed datagrams (the chunks), after the seed's DEF and before it."""
    from robowire.protocols.vrsp.session import ReceiverSession

    for prime in (b"", vrsp_datagrams()[0]):
        session = ReceiverSession()
        if prime:
            session.feed_datagram(prime, ("127.0.0.1", 9000), 0.0)
        for piece in chunks(data, cuts):
            session.feed_datagram(piece, ("127.0.0.1", 9000), 0.1)
        session.tick(1.0)
        session.datagrams_to_send()
        check_stats(session.stats)
        assert session._pending_bytes <= session.max_pending_bytes
