"""docs/architecture.md's "Add a protocol", followed step by step: a tiny UDP protocol
("beacon", defined only here, never shipped) is one package of the files the doc's table names,
plus the one registry line, and robowire treats it as one of its own: `decode`, `listen` (a
capture and live), `sim`, `serve`, `bridge`, `demo`, the bridge matrix, fuzzing, `publish` and
the roles test, with no other file touched.

The package is written to a temporary folder that joins `robowire.protocols`' search path, and
the registry gets its line: in this process (monkeypatched) and in the CLI processes (a
launcher that does the same two things, then runs the `robowire` command).

Beacon: a datagram is b"BCN1", a little-endian u16 count, then per beacon its u32 id and its
x, y, z (float32, metres ENU). No handshake, no timers: no session module, no events module
(its sources' sessions are `StatelessSession`s).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import re
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import dpkt
import pytest

import support
from robowire import protocols

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
LINE = ("beacon", "robowire.protocols.beacon:PROTOCOL")  # the one line in REGISTRY

PACKAGE = {
    "__init__.py": '''
        """Beacon: a tiny stateless UDP protocol (positions of numbered beacons)."""

        from __future__ import annotations

        from robowire.protocols.base import Demo, WireProtocol
        from robowire.protocols.beacon.codec import DEFAULT_PORT
        from robowire.protocols.beacon.codec import PROTOCOL as NAME
        from robowire.protocols.beacon.dissect import dissect, read_capture
        from robowire.protocols.beacon.services import (
            BeaconFileSource,
            BeaconSim,
            BeaconSink,
            BeaconSource,
        )

        PROTOCOL = WireProtocol(
            name=NAME,
            title="Beacon",
            default_port=DEFAULT_PORT,
            schemes=(NAME,),
            open_source=BeaconSource,
            open_file=BeaconFileSource,
            open_sink=BeaconSink,
            open_sim=BeaconSim,
            dissect=dissect,
            read_capture=read_capture,
            kind="beacon",
            sends=True,  # its simulator and sink send to a source that binds
            demo=Demo(url="beacon://{host}:{port}"),
        )
    ''',
    "codec.py": '''
        """Beacon datagrams <-> `Fix`es: b"BCN1", u16 count, then (u32 id, 3 x float32) each."""

        from __future__ import annotations

        import struct
        from collections.abc import Sequence
        from dataclasses import dataclass
        from typing import ClassVar

        from robowire.errors import DecodeError

        PROTOCOL = "beacon"
        DEFAULT_PORT = 47_000
        MAGIC = b"BCN1"
        HEAD = struct.Struct("<4sH")
        FIX = struct.Struct("<I3f")
        PER_DATAGRAM = (1472 - HEAD.size) // FIX.size  # fixes in one datagram at most
        MAX_DATAGRAM = HEAD.size + PER_DATAGRAM * FIX.size


        @dataclass(frozen=True, slots=True, kw_only=True)
        class Fix:
            WIRE_NAME: ClassVar[str] = "fix"
            id: int
            position: tuple[float, float, float]


        def encode(fixes: Sequence[Fix]) -> list[bytes]:
            """The datagrams that carry `fixes`."""
            parts = (fixes[i : i + PER_DATAGRAM] for i in range(0, len(fixes), PER_DATAGRAM))
            return [
                HEAD.pack(MAGIC, len(part)) + b"".join(FIX.pack(f.id, *f.position) for f in part)
                for part in parts
            ]


        def decode(data: bytes) -> list[Fix]:
            if len(data) < HEAD.size or data[:4] != MAGIC:
                raise DecodeError(PROTOCOL, 0, "not a beacon datagram")
            _, count = HEAD.unpack_from(data)
            if len(data) != HEAD.size + count * FIX.size:
                raise DecodeError(PROTOCOL, 4, f"{count} fixes but {len(data)} bytes")
            fixes = FIX.iter_unpack(memoryview(data)[HEAD.size :])
            return [Fix(id=i, position=(x, y, z)) for i, x, y, z in fixes]
    ''',
    "adapter.py": '''
        """Fixes -> world updates; world columns -> fixes (the one wire conversion: the sink
        encodes the world's columns with it, the simulator its model's)."""

        from __future__ import annotations

        import zlib
        from collections.abc import Sequence

        import numpy as np
        import numpy.typing as npt

        from robowire.protocols.beacon.codec import Fix
        from robowire.world import World

        KIND = "beacon"


        class BeaconAdapter:
            def __init__(self, world: World, source: str) -> None:
                self.world = world
                self.source = source

            def apply(self, events: Sequence[object], receive_time: float) -> int:
                fixes = [e for e in events if isinstance(e, Fix)]  # (drops are counted already)
                if fixes:
                    slots = self.world.table(self.source).slots((str(f.id) for f in fixes), KIND)
                    position = np.array([f.position for f in fixes], dtype=np.float64)
                    update = self.world.update
                    update(self.source, slots, receive_time=receive_time, position=position)
                return len(fixes)


        def fixes(ids: Sequence[str], position: npt.NDArray[np.float64]) -> list[Fix]:
            """Devices with a position as fixes: a numeric id as it is, any other by its CRC."""
            return [
                Fix(
                    id=int(d) if d.isdigit() and int(d) < 2**32 else zlib.crc32(d.encode()),
                    position=(float(p[0]), float(p[1]), float(p[2])),
                )
                for d, p in zip(ids, position, strict=True)
                if not np.isnan(p).any()
            ]
    ''',
    "model.py": '''
        """The simulator: beacons 1..N on circles about the origin (numpy, all at once)."""

        from __future__ import annotations

        import numpy as np
        import numpy.typing as npt


        class Orbits:
            def __init__(self, count: int) -> None:
                self.ids = [str(i + 1) for i in range(count)]
                self.radius = 1.0 + np.arange(count, dtype=np.float64)
                self.phase = np.linspace(0.0, 2 * np.pi, count, endpoint=False)

            def positions(self, t: float) -> npt.NDArray[np.float64]:
                angle = self.phase + 0.5 * t
                x, y = self.radius * np.cos(angle), self.radius * np.sin(angle)
                return np.column_stack([x, y, np.ones_like(angle)])
    ''',
    "services.py": '''
        """Beacon's services on the datagram templates: a receiver, a capture source, a sink
        and a simulator that send."""

        from __future__ import annotations

        from robowire.capture import CaptureReader, Record
        from robowire.endpoints import Endpoint
        from robowire.protocols.beacon.adapter import BeaconAdapter, fixes
        from robowire.protocols.beacon.codec import DEFAULT_PORT, PROTOCOL, decode, encode
        from robowire.protocols.beacon.model import Orbits
        from robowire.protocols.datagram import (
            DatagramSim,
            DatagramSink,
            DatagramSource,
            StatelessSession,
        )
        from robowire.service import CaptureSource, SimOptions
        from robowire.world import LogEvent, Update, World


        class BeaconSource(DatagramSource):
            def __init__(self, endpoint: Endpoint) -> None:
                super().__init__(PROTOCOL, endpoint.host, endpoint.port_or(DEFAULT_PORT))
                self.session = StatelessSession(PROTOCOL, decode)

            def new_adapter(self, world: World) -> BeaconAdapter:
                return BeaconAdapter(world, self.name)


        class BeaconFileSource(CaptureSource):
            time_default = "receive"

            def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
                super().__init__(PROTOCOL, endpoint, read)

            def new_adapter(self, world: World) -> BeaconAdapter:
                return BeaconAdapter(world, self.name)

            def new_session(self, record: Record) -> StatelessSession:
                return StatelessSession(PROTOCOL, decode)


        class BeaconSink(DatagramSink):
            def __init__(self, endpoint: Endpoint) -> None:
                super().__init__(PROTOCOL, endpoint, DEFAULT_PORT)

            def write(self, world: World, items: list[Update | LogEvent]) -> bool:
                for item in items:
                    if isinstance(item, Update) and "position" in item.fields:
                        table = world.tables[item.source]
                        ids = [table.ids[slot] for slot in item.slots]
                        self.send(encode(fixes(ids, table.position[item.slots])))
                return True


        class BeaconSim(DatagramSim):
            def __init__(self, options: SimOptions) -> None:
                super().__init__(PROTOCOL, options, DEFAULT_PORT)
                self.model = Orbits(options.count or 3)
                self.period = 1.0 / (options.rate or 10.0)
                self.start: float | None = None
                self.due: float | None = None

            def step(self, now: float) -> None:
                self.start = now if self.start is None else self.start
                self.send(encode(fixes(self.model.ids, self.model.positions(now - self.start))))
                self.due = now + self.period

            def next_deadline(self) -> float | None:
                return self.due
    ''',
    "dissect.py": '''
        """`robowire decode beacon FILE`: one dict per fix (an error line per bad datagram)."""

        from __future__ import annotations

        from collections.abc import Iterator
        from typing import Any

        from robowire.capture import Record
        from robowire.errors import DecodeError
        from robowire.protocols.beacon.codec import MAX_DATAGRAM, decode
        from robowire.protocols.datagram import datagram_records


        def read_capture(path: str) -> Iterator[Record]:
            return datagram_records(path, MAX_DATAGRAM)


        def dissect(path: str) -> Iterator[dict[str, Any]]:
            for index, record in enumerate(read_capture(path)):
                try:
                    found = decode(record.data)
                except DecodeError as exc:
                    yield {"datagram": index, "error": exc.reason, "offset": exc.offset}
                    continue
                for fix in found:
                    yield {
                        "datagram": index,
                        "type": fix.WIRE_NAME,
                        "id": fix.id,
                        "position": list(fix.position),
                    }
    ''',
}

# the sample capture, from the spec above (not from the package's encoder): beacons 1 and 2,
# then beacon 3, then a datagram that is not beacon's
CAPTURED = [
    b"BCN1" + struct.pack("<H", 2) + struct.pack("<I3f", 1, 1.0, 2.0, 3.0)
    + struct.pack("<I3f", 2, -1.5, 0.25, 10.0),
    b"BCN1" + struct.pack("<H", 1) + struct.pack("<I3f", 3, 0.5, 0.5, 0.5),
]  # fmt: skip


def write_capture(path: Path, datagrams: list[bytes]) -> None:
    """A pcap of `datagrams` to the default port on loopback (as tools/make_pcaps.py frames)."""
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
        for i, data in enumerate(datagrams):
            datagram = dpkt.udp.UDP(sport=50_000, dport=47_000, data=data)
            datagram.ulen = len(datagram)
            ip = dpkt.ip.IP(src=b"\x7f\0\0\1", dst=b"\x7f\0\0\1", p=dpkt.ip.IP_PROTO_UDP)
            ip.data, ip.len = datagram, 20 + len(datagram)
            frame = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            writer.writepkt(bytes(frame), ts=1_795_336_000.0 + i / 10)


@pytest.fixture(scope="module")
def beacon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package written where the doc says (a `protocols/beacon/` folder), its capture in
    a captures folder of its own, and the registry line; yields the folder holding both."""
    base = tmp_path_factory.mktemp("added")
    package = base / "protocols" / "beacon"
    package.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    (base / "captures" / "beacon").mkdir(parents=True)
    write_capture(base / "captures" / "beacon" / "capture.pcap", CAPTURED)
    (base / "robowire_with_beacon.py").write_text(LAUNCHER.format(folder=str(package.parent)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(protocols, "__path__", [*protocols.__path__, str(package.parent)])
        patch.setitem(protocols.REGISTRY, *LINE)
        patch.setattr(support, "CAPTURES", base / "captures")
        yield base
    for module in [m for m in sys.modules if m.startswith("robowire.protocols.beacon")]:
        del sys.modules[module]


LAUNCHER = """\
import robowire.protocols

robowire.protocols.__path__.append({folder!r})
robowire.protocols.REGISTRY["beacon"] = "robowire.protocols.beacon:PROTOCOL"

from robowire.cli import main

main(prog_name="robowire")
"""


def run(base: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The `robowire` command with beacon registered."""
    return subprocess.run(
        [sys.executable, str(base / "robowire_with_beacon.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "160"},
        check=False,
    )


def start(base: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(base / "robowire_with_beacon.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )


def lines_of(process: subprocess.Popen[str], timeout: float = 30) -> list[dict[str, object]]:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the doc's steps -----------------------------------------------------------------------------


def test_the_package_is_the_files_the_doc_lists_and_nothing_else(beacon: Path) -> None:
    section = DOC.read_text().split("## Add a protocol", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `src/robowire/protocols/foo/(\w+\.py)` \|", section, re.MULTILINE)
    optional = re.findall(r"^\| `src/robowire/protocols/foo/(\w+\.py)` \| \(", section, re.M)
    written = {p.name for p in (beacon / "protocols" / "beacon").glob("*.py")}
    assert written == set(listed) - set(optional)  # the stateless one: no session, no events
    assert {"session.py", "events.py"} == set(optional)
    line = f'"{LINE[0]}": "{LINE[1]}",'.replace("beacon", "foo")
    assert line in section  # the registry line, as the doc writes it
    assert "tests/core/test_add_a_protocol.py" in section


def test_the_roles_test_passes_for_it(beacon: Path, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("roles", Path(__file__).with_name(
        "test_protocol_roles.py"))  # fmt: skip
    assert spec is not None and spec.loader is not None
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    assert "beacon" in protocols.names()
    roles.test_it_has_the_modules_of_the_shape("beacon")
    roles.test_it_opens_a_live_source_and_a_file_source("beacon")
    roles.test_it_reads_and_dissects_its_capture("beacon")
    roles.test_its_own_file_formats_are_told_by_suffix("beacon", tmp_path)
    roles.test_the_sink_and_the_simulator_it_declares_open("beacon")


def test_decode(beacon: Path) -> None:
    capture = beacon / "captures" / "beacon" / "capture.pcap"
    result = run(beacon, "decode", "beacon", str(capture))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(x["id"], x["position"]) for x in lines] == [
        (1, [1.0, 2.0, 3.0]),
        (2, [-1.5, 0.25, 10.0]),
        (3, [0.5, 0.5, 0.5]),
    ]


def test_listen_to_a_capture(beacon: Path) -> None:
    result = run(beacon, "listen", f"beacon:{beacon / 'captures' / 'beacon' / 'capture.pcap'}",
                 "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {(r["device"], r["kind"], tuple(r["position"])) for r in rows} == {
        ("1", "beacon", (1.0, 2.0, 3.0)),
        ("2", "beacon", (-1.5, 0.25, 10.0)),
        ("3", "beacon", (0.5, 0.5, 0.5)),
    }


def test_listen_to_its_simulator(beacon: Path) -> None:
    port = support.free_udp_port()
    listener = start(beacon, "listen", f"beacon://127.0.0.1:{port}", "--json", "--count", "3")
    sim = start(beacon, "sim", "beacon", "--to", f"127.0.0.1:{port}", "--count", "3")
    try:
        rows = lines_of(listener)
    finally:
        stop(sim, listener)
    assert {r["device"] for r in rows} <= {"1", "2", "3"} and rows[0]["kind"] == "beacon"
    assert all(abs(r["position"][2] - 1.0) < 1e-6 for r in rows)  # the model's height


@pytest.mark.parametrize("command", ["serve", "bridge"])
def test_serve_and_bridge_send_what_a_source_reads(beacon: Path, command: str) -> None:
    """sim -> (a source of the serving gateway) -> its beacon sink -> a listener."""
    into, out = support.free_udp_port(), support.free_udp_port()
    listener = start(beacon, "listen", f"beacon://127.0.0.1:{out}", "--json", "--count", "3")
    source, sink = f"beacon://127.0.0.1:{into}", f"beacon://127.0.0.1:{out}"
    args = (
        ("serve", sink, "--from", source)
        if command == "serve"
        else ("bridge", source, "--to", sink)
    )
    gateway = start(beacon, *args)
    sim = start(beacon, "sim", "beacon", "--to", f"127.0.0.1:{into}", "--count", "3")
    try:
        rows = lines_of(listener)
    finally:
        stop(sim, gateway, listener)
    assert {r["device"] for r in rows} <= {"1", "2", "3"}
    assert all(r["kind"] == "beacon" for r in rows)


def test_demo_runs_its_simulator(beacon: Path) -> None:
    result = run(beacon, "demo", "--duration", "4", "--count", "3", "--viewer-port", "0")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^demo: beacon simulator sending to 127\.0\.0\.1:\d+$", result.stderr, re.M)
    counts = dict(re.findall(r"^(\w+)@127\.0\.0\.1:\d+: (\d+) messages in", result.stdout, re.M))
    assert int(counts["beacon"]) > 0, result.stdout


def test_the_bridge_matrix_has_it(beacon: Path) -> None:
    from bridge import farend, test_matrix

    assert "beacon" in farend.sources() and "beacon" in farend.sinks()
    legs = ("beacon", "zenoh", "http", "foxglove")
    outcome = asyncio.run(
        farend.run_source(
            "beacon", legs, lambda s, k, w, seen: not test_matrix.problems(s, k, w, seen)
        )
    )
    assert farend.complete("beacon", outcome.world)
    for sink in legs:
        assert not test_matrix.problems("beacon", sink, outcome.world, outcome.seen[sink]), sink


def test_fuzzing_has_a_target_for_it(beacon: Path) -> None:
    import fuzzing

    target = fuzzing.protocol_targets()["beacon-capture"]
    seeds = target.seeds()
    assert seeds and all(seeds)
    rng = random.Random(0)
    for _ in range(200):
        target.run(fuzzing.mutate(rng.choice(seeds), seeds, rng), [])
    target.run(bytes(rng.getrandbits(8) for _ in range(300)), [])


def test_publish_sends_its_devices_as_beacons(beacon: Path) -> None:
    import robowire

    port = support.free_udp_port()
    listener = start(beacon, "listen", f"beacon://127.0.0.1:{port}", "--json", "--count", "1")
    try:
        with robowire.publish(f"beacon://127.0.0.1:{port}") as pub:
            assert pub.kind == "beacon"
            for _ in range(100):  # until the listener has bound and read one
                pub.set("7", position=(1.0, 2.0, 3.0))
                if listener.poll() is not None:
                    break
                time.sleep(0.1)
        rows = lines_of(listener)
    finally:
        stop(listener)
    assert (rows[0]["device"], rows[0]["kind"], rows[0]["position"]) == ("7", "beacon", [1, 2, 3])
