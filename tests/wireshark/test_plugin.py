"""The Wireshark plugin against robowire's own decoders, message for message.

Each capture in tests/data goes through tshark 4.x with the plugin (`-T json`) and through
`robowire decode PROTOCOL FILE --json`. Every message robowire prints must be a message of
the plugin's protocol in the same order, with the same type, and every field robowire prints
(ids, positions, values, lists, nested blocks and records) equal in the plugin's
`<abbr>.<field>` items. UgCS payloads are compared field by field with what Wireshark's protobuf
dissector shows from robowire's .proto files. tshark missing is a failure: CI installs it.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from google.protobuf import descriptor, json_format
from google.protobuf.message import Message

from robowire import protocols
from robowire.cli import main
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb
from robowire.wireshark import PLUGIN, tshark_options

DATA = Path(__file__).resolve().parents[1] / "data"
DISSECTED = [p.name for p in protocols.landed() if p.wireshark]
"""The protocols the plugin dissects, as each `WireProtocol` says (`wireshark=True`)."""
CAPTURES = {
    str(path.relative_to(DATA)): path.parent.name
    for name in DISSECTED
    for path in sorted((DATA / "captures" / name).glob("*.pcap*"))
}
"""Every capture of those protocols in tests/data (captures/NAME/), by protocol."""
# where a capture is, not what a message is (tshark has its own frame and stream offsets)
WHERE = {"direction", "time", "offset", "flow", "frame", "datagram", "msg_time", "packet_time"}
# the same list's or block's fields under another prefix in the plugin (xrp.<block>.<field>)
XRP_BLOCKS = {"XRPMotor": "motor", "XRPServo": "servo", "DIO": "dio", "AnalogIn": "analog"}
XRP_BLOCKS |= {"Gyro": "gyro", "Accel": "accel", "Encoder": "encoder", "unknown": "block"}


def tshark() -> str:
    path = shutil.which("tshark")
    if path is None:
        pytest.fail("tshark is not installed (apt-get install tshark); .ci/run installs it")
    return path


def robowire_decode(protocol: str, path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["decode", protocol, str(path), "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def wireshark_decode(abbr: str, path: Path) -> list[dict[str, Any]]:
    """Every `abbr` protocol item tshark shows, in frame and tree order."""
    command = [tshark(), "-X", f"lua_script:{PLUGIN}", *tshark_options()]
    command += ["-o", "protobuf.pbf_as_hf:TRUE", "-r", str(path)]
    command += ["-T", "json", "--no-duplicate-keys"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Lua: Error" not in done.stderr, done.stderr
    out: list[dict[str, Any]] = []
    for packet in json.loads(done.stdout):
        items = packet["_source"]["layers"].get(abbr, [])
        out += items if isinstance(items, list) else [items]
    return out


def items(node: Any) -> list[Any]:
    return node if isinstance(node, list) else [node]


def field(tree: dict[str, Any], abbr: str, key: str) -> Any:
    """The item for robowire's `key`: `<abbr>.<key>`, else the one item named `*.<key>`."""
    if f"{abbr}.{key}" in tree:
        return tree[f"{abbr}.{key}"]
    found = [k for k in tree if k.endswith("." + key) and not k.endswith("_tree")]
    assert len(found) == 1, f"no single item for {key!r} among {sorted(tree)}"
    return tree[found[0]]


def leaves(node: Any) -> Iterator[Any]:
    """The values of a vector or list item's children, in order."""
    for key, value in node.items():
        if not key.endswith("_tree"):
            yield from items(value)


def same(expected: Any, shown: Any, where: str) -> None:
    if isinstance(expected, bool):
        assert shown in ("1", "True", "true") if expected else ("0", "False"), where
    elif isinstance(expected, int | float):
        # Wireshark shows binary32 fields to 6 significant digits; robowire prints VRSP's
        # binary16 values rounded to 6 decimals
        assert math.isclose(_number(shown), expected, rel_tol=1e-5, abs_tol=1e-6), where
    elif isinstance(expected, str) and expected.startswith("0x"):
        assert int(shown, 0) == int(expected, 16), f"{where}: {shown}"
    else:
        assert shown == expected, f"{where}: {shown!r} != {expected!r}"


def _number(text: str) -> float:
    return float(int(text, 16)) if text.startswith("0x") else float(text)


def compare(expected: dict[str, Any], tree: dict[str, Any], abbr: str, where: str) -> None:
    """Every field robowire printed, in the plugin's tree."""
    for key, value in expected.items():
        at = f"{where}.{key}"
        if key in WHERE or value is None:
            continue
        if abbr == "xrp" and key == "blocks":
            blocks = items(tree["xrp.block"])
            assert len(blocks) == len(value), at
            for i, (block, shown) in enumerate(zip(value, blocks, strict=True)):
                assert shown["xrp.block.type"] == block["type"], at
                same(block["tag"], shown["xrp.block.tag"], at)
                prefix = XRP_BLOCKS[block["type"]]
                for name, v in block.items():
                    if name not in ("type", "tag"):
                        same(v, shown[f"xrp.{prefix}.{name}"], f"{at}[{i}].{name}")
            continue
        if abbr == "vrsp" and isinstance(value, dict) and key == "definition":  # the DEF read
            same(value["datagram"] + 1, tree["vrsp.def_frame"], at)
            continue
        if abbr == "vrsp" and key == "definitions":
            blocks = items(tree["vrsp.definitions"]["vrsp.block"])
            for block, shown in zip(value, blocks, strict=True):
                same(block["devices"], shown["vrsp.devices"], at)
                same(block["definition"]["DefinitionID"], shown["vrsp.definition_id"], at)
                assert shown["vrsp.device_model"] == block["definition"]["DeviceModel"], at
                assert [int(i) for i in leaves(shown["vrsp.ids"])] == block["ids"], at
            continue
        if abbr == "vrsp" and key == "records":
            records = items(tree["vrsp.records"]["vrsp.record"])
            assert len(records) == len(value), at
            for i, (record, shown) in enumerate(zip(value, records, strict=True)):
                compare(record, shown, abbr, f"{at}[{i}]")
            continue
        if abbr == "vrsp" and key == "payloads":
            shown_payloads = items(tree["vrsp.payloads"]["vrsp.payload"])
            for i, (payload, shown) in enumerate(zip(value, shown_payloads, strict=True)):
                compare(payload, shown, abbr, f"{at}[{i}]")
            continue
        if abbr == "spyglass" and key == "points":
            points = items(tree["spyglass.points"]["spyglass.point"])
            assert [[_number(c) for c in leaves(p)] for p in points] == value, at
            continue
        shown = field(tree, abbr, key)
        if isinstance(value, dict):
            compare(value, shown, abbr, at)
        elif isinstance(value, list):
            got = list(leaves(shown))
            assert len(got) == len(value), f"{at}: {got} != {value}"
            for i, (v, s) in enumerate(zip(value, got, strict=True)):
                same(v, s, f"{at}[{i}]")
        else:
            same(value, shown, at)


# -- UgCS: the protobuf dissector's fields ----------------------------------------------------


def pb_fields(message: Message) -> Iterator[tuple[str, str]]:
    """(full field name, canonical value) of every scalar field set in a message, nested."""
    for spec, value in message.ListFields():
        values = value if spec.is_repeated else [value]
        for v in values:
            if spec.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
                yield from pb_fields(v)
            else:
                yield spec.full_name, canonical(spec, v)


def canonical(spec: descriptor.FieldDescriptor, value: Any) -> str:
    if spec.type in (spec.TYPE_FLOAT, spec.TYPE_DOUBLE):
        return f"{float(value):.6g}"
    if spec.type == spec.TYPE_BOOL:
        return "1" if value in (True, "1", "True", "true") else "0"
    if spec.type == spec.TYPE_BYTES:
        return value.hex() if isinstance(value, bytes) else value.replace(":", "")
    return str(value)


def shown_fields(node: Any) -> Iterator[tuple[str, str]]:
    """(full field name, canonical value) of every scalar `pbf.` item in a tshark tree."""
    pool = pb.DESCRIPTOR.pool
    if isinstance(node, list):
        for item in node:
            yield from shown_fields(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key.startswith("pbf.") and not key.endswith("_tree") and key + "_tree" not in node:
            spec = pool.FindFieldByName(key[4:])
            if spec.type != spec.TYPE_MESSAGE:
                for v in items(value):
                    yield spec.full_name, canonical(spec, v)
        elif isinstance(value, dict | list):
            yield from shown_fields(value)


# -- the tests --------------------------------------------------------------------------------


def test_every_pcap_in_tests_data_is_covered() -> None:
    found = {str(p.relative_to(DATA)) for p in DATA.rglob("*.pcap*")}
    dissected = {p for p in found if Path(p).parts[:2] in {("captures", n) for n in DISSECTED}}
    assert dissected == set(CAPTURES), "a capture in tests/data without a plugin comparison"
    assert set(CAPTURES.values()) == set(DISSECTED), "a dissected protocol without a capture"


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_plugin_matches_robowire_decode(capture: str) -> None:
    protocol = CAPTURES[capture]
    path = DATA / capture
    expected = robowire_decode(protocol, path)
    shown = wireshark_decode(protocol, path)
    assert [m.get(f"{protocol}.type") for m in shown] == [m.get("type") for m in expected]
    for i, (message, tree) in enumerate(zip(expected, shown, strict=True)):
        where = f"{capture} message {i} ({message['type']})"
        if protocol == "ugcs":
            message = dict(message)
            raw = message.pop("message")
            payload = tree["ugcs.payload_tree"]["protobuf"]
            parsed = pb.Vsm_message()
            json_format.ParseDict(raw, parsed)
            fields = Counter(pb_fields(parsed))
            assert fields, where
            assert Counter(shown_fields(payload)) == fields, where
        compare(message, tree, protocol, where)


def test_default_ports_are_the_protocols() -> None:
    """The plugin's PORTS table is exactly the dissected protocols' default ports, and each
    has its dissector (`Proto("NAME", ...)`) in the plugin."""
    text = PLUGIN.read_text()
    table = re.search(r"^local PORTS = \{(.*)\}$", text, re.MULTILINE)
    assert table is not None
    ports = {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", table.group(1))}
    assert ports == {name: protocols.get(name).default_port for name in DISSECTED}
    for name in DISSECTED:
        assert re.search(rf'Proto\("{name}",', text), name


def test_every_vrpn_body_type(tmp_path: Path) -> None:
    """One message of each VRPN body type robowire knows (imager bodies aside: the plugin
    shows them as bytes), described and sent in one UDP datagram, read both ways."""
    import dpkt

    from robowire.protocols.vrpn import messages as m
    from robowire.protocols.vrpn.codec import SystemType, encode_frame, encode_name
    from robowire.protocols.vrpn.registry import ALL_BODY_TYPES, IMAGER_TYPES

    samples: list[m.Body] = [
        m.TrackerPosQuat(sensor=2, position=(1.5, -2.25, 3.0), quaternion=(0.1, 0.2, 0.3, 0.9)),
        m.TrackerVelocity(sensor=1, velocity=(0.5, 0.25, -1.0), velocity_quaternion_dt=0.01),
        m.TrackerAcceleration(sensor=0, acceleration=(9.81, 0, 0), acceleration_quaternion_dt=2),
        m.TrackerToRoom(position=(1, 2, 3)),
        m.TrackerUnitToSensor(sensor=3, quaternion=(0, 0, 1, 0)),
        m.TrackerWorkspace(minimum=(-1, -2, -3), maximum=(4, 5, 6)),
        m.TrackerRequestToRoom(),
        m.TrackerRequestUnitToSensor(),
        m.TrackerRequestWorkspace(),
        m.TrackerResetOrigin(),
        m.TrackerSetUpdateRate(rate=120.0),
        m.TextMessage(text="hello wireshark", severity=1, level=7),
        m.Ping(),
        m.Pong(),
        m.AnalogChannel(channels=(0.5, -1.0, 3.25)),
        m.ButtonChange(button=4, state=1),
        m.ButtonStates(states=(1, 0, 1)),
        m.ButtonAdmin(button=-99, mode=20),
        m.ButtonAlert(button=2, mode=21),
        m.DialUpdate(delta=0.125, dial=1),
        m.AnalogOutputChangeRequest(channel=3, value=-0.75),
        m.AnalogOutputChangeChannelsRequest(values=(1.0, 2.0)),
        m.AnalogOutputNumChannelsReport(num_channels=8),
        m.PoserRequestPosQuat(position=(1, 1, 1)),
        m.PoserRequestRelativePosQuat(position=(2, 2, 2)),
        m.PoserRequestVelocity(velocity=(0.5, 0, 0), dt=0.5),
        m.PoserRequestRelativeVelocity(velocity=(0, 0.5, 0), dt=0.25),
    ]
    assert {type(s) for s in samples} == set(ALL_BODY_TYPES) - set(IMAGER_TYPES)
    data = encode_frame(0, SystemType.SENDER_DESCRIPTION, encode_name("Device0"))
    for i, sample in enumerate(samples):
        data += encode_frame(i, SystemType.TYPE_DESCRIPTION, encode_name(sample.WIRE_NAME))
    for i, sample in enumerate(samples):
        data += encode_frame(0, i, sample.encode(), sec=1_795_336_000, usec=i, seq=i)
    datagram = dpkt.udp.UDP(sport=50_000, dport=protocols.get("vrpn").default_port, data=data)
    datagram.ulen = len(datagram)
    host = b"\x7f\x00\x00\x01"
    ip = dpkt.ip.IP(src=host, dst=host, p=dpkt.ip.IP_PROTO_UDP, ttl=64, data=datagram)
    ip.len = len(ip)
    path = tmp_path / "every-type.pcap"
    with path.open("wb") as f:
        dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_RAW).writepkt(bytes(ip), ts=1_795_336_000)
    expected = robowire_decode("vrpn", path)
    shown = wireshark_decode("vrpn", path)
    assert [s.get("vrpn.type") for s in shown] == [e["type"] for e in expected]
    assert {e["type"] for e in expected} >= {s.WIRE_NAME for s in samples}
    for i, (message, tree) in enumerate(zip(expected, shown, strict=True)):
        compare(message, tree, "vrpn", f"message {i} ({message['type']})")
