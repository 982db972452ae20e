"""VRSP codec: hand-built byte vectors (expected bytes written out from the profile, not by the
codec), the example definition from Verge's page, and property tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robowire.protocols.vrsp.codec import (
    DEFAULT_DATAGRAM,
    DefinitionTable,
    VrspData,
    VrspDef,
    decode_implicit,
    decode_packet,
    definition_from_json,
    definition_to_json,
    encode_data,
    encode_def,
)
from robowire.protocols.vrsp.definitions import (
    DefType,
    DeviceDefinition,
    MountType,
    Quaternion,
)

from .conftest import LOADED, PLAIN, as_data, as_def, blocks_of, swarm_of

INSTANCE = bytes.fromhex("04030201")  # 0x01020304, little-endian
DEF_NAME = b"\x08VRSP_DEF"
DATA_NAME = b"\x09VRSP_DATA"
PLAIN_JSON = b'{"DefinitionID":0,"DeviceModel":"X1","PayloadDefinitions":[]}'
ROOT = (
    bytes.fromhex("000000000000F83F")  # 1.5
    + bytes.fromhex("00000000000002C0")  # -2.25
    + bytes.fromhex("0000000000005940")  # 100.0
)
HAND_DEF = (
    DEF_NAME + b"\x01" + INSTANCE
    + bytes.fromhex("02000000") + ROOT
    + bytes.fromhex("02000000") + len(PLAIN_JSON).to_bytes(4, "little") + PLAIN_JSON
    + bytes.fromhex("0500 0700")
)  # fmt: skip
HAND_RECORD = (
    bytes.fromhex("0500")  # id 5
    + bytes.fromhex("0000803F 00000040 000000BF")  # x 1.0, y 2.0, z -0.5
    + bytes.fromhex("03")  # colour + heading
    + bytes.fromhex("FF8000")  # R G B
    + bytes.fromhex("A055")  # 90.0 as float16 (0x55A0)
)
HAND_DATA = (
    DATA_NAME + b"\x01" + INSTANCE
    + bytes.fromhex("07000000 0000 0100 0100")  # frame 7, part 0 of 1, 1 record
    + HAND_RECORD
)  # fmt: skip
LOADED_RECORD = (
    bytes.fromhex("0700")  # id 7
    + bytes(12)  # at the root
    + bytes.fromhex("04")  # orientation
    + bytes.fromhex("003C 0000 0000 0000")  # w 1
    + bytes.fromhex("01 DC05")  # pyro: cue 1, 1500 ms since trigger
    + bytes.fromhex("C8")  # fixed-colour spotlight: intensity 200
    + bytes.fromhex("0038 0038 0038 0038")  # its gimbal: 0.5 0.5 0.5 0.5
    + bytes.fromhex("00FF00")  # laser R G B
    + bytes.fromhex("003C 0000 0000 0000")  # its gimbal: identity
)


def plain_table() -> DefinitionTable:
    return DefinitionTable.build(0x01020304, (1.5, -2.25, 100.0), blocks_of([5, 6], [7]))


# -- hand vectors ------------------------------------------------------------------------------


def test_def_encodes_to_the_hand_built_bytes() -> None:
    plain = DeviceDefinition(definition_id=0, model="X1")
    out = encode_def(0x01020304, (1.5, -2.25, 100.0), [(plain, np.array([5, 7], np.uint16))])
    assert out == [HAND_DEF]


def test_hand_built_def_decodes() -> None:
    packet = decode_packet(HAND_DEF)
    assert isinstance(packet, VrspDef)
    assert packet.instance == 0x01020304 and packet.version == 1
    assert packet.device_count == 2 and packet.root == (1.5, -2.25, 100.0)
    (block,) = packet.blocks
    assert block.definition == DeviceDefinition(definition_id=0, model="X1")
    assert block.ids.tolist() == [5, 7]


def test_data_encodes_to_the_hand_built_bytes() -> None:
    table = DefinitionTable.build(0x01020304, (1.5, -2.25, 100.0), blocks_of([5], []))
    swarm = swarm_of([5])
    swarm.position[0] = (1.0, 2.0, -0.5)
    swarm.has_color[0] = swarm.has_heading[0] = True
    swarm.color[0] = (255, 128, 0)
    swarm.heading[0] = 90.0
    assert encode_data(table, swarm, 7) == [HAND_DATA]


def test_hand_built_data_decodes() -> None:
    packet = decode_packet(HAND_DATA)
    assert isinstance(packet, VrspData)
    assert (packet.instance, packet.frame, packet.part, packet.parts, packet.count) == (
        0x01020304, 7, 0, 1, 1,
    )  # fmt: skip
    swarm = plain_table().decode(packet.body, packet.count)
    assert swarm.ids.tolist() == [5]
    assert swarm.position.tolist() == [[1.0, 2.0, -0.5]]
    assert swarm.has_color.tolist() == [True] and swarm.color.tolist() == [[255, 128, 0]]
    assert swarm.has_heading.tolist() == [True] and swarm.heading.tolist() == [90.0]
    assert swarm.has_orientation.tolist() == [False]


def test_payload_record_decodes_in_definition_order_with_gimbals_after_their_payload() -> None:
    swarm = plain_table().decode(LOADED_RECORD, 1)
    assert swarm.ids.tolist() == [7]
    assert swarm.orientation.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    assert swarm.cue.tolist() == [[1, 0, 0]] and swarm.cue_ms[0, 0] == 1500
    assert swarm.light[0, 1, 0] == 200  # the intensity of the fixed-colour light
    assert swarm.gimbal[0, 1].tolist() == [0.5, 0.5, 0.5, 0.5]
    assert swarm.light[0, 2].tolist() == [0, 255, 0]
    assert swarm.gimbal[0, 2].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_payload_record_encodes_to_the_hand_built_bytes() -> None:
    table = plain_table()
    swarm = swarm_of([7], 3)
    swarm.has_orientation[0] = True
    swarm.orientation[0] = (1, 0, 0, 0)
    swarm.cue[0, 0], swarm.cue_ms[0, 0] = 1, 1500
    swarm.light[0, 1, 0] = 200
    swarm.gimbal[0, 1] = (0.5, 0.5, 0.5, 0.5)
    swarm.light[0, 2] = (0, 255, 0)
    swarm.gimbal[0, 2] = (1, 0, 0, 0)
    body, ends = table.records(swarm)
    assert body == LOADED_RECORD and ends.tolist() == [len(LOADED_RECORD)]


@pytest.mark.parametrize("name", [b"VRSP_DATA\x00", b"VRSP_DATA"], ids=["nul-terminated", "bare"])
def test_identifier_forms_all_decode(name: bytes) -> None:
    packet = decode_packet(name + HAND_DATA[len(DATA_NAME) :])
    assert isinstance(packet, VrspData) and packet.frame == 7 and packet.count == 1
    defs = decode_packet(b"VRSP_DEF\x00" + HAND_DEF[len(DEF_NAME) :])
    assert isinstance(defs, VrspDef) and defs.blocks[0].ids.tolist() == [5, 7]


def test_the_implicit_form_decodes_in_def_order() -> None:
    """The sheet's DATA: header, then records without ids in the DEF's device order."""
    record = bytes.fromhex("0000803F 00000000 00000000 00")  # x 1, no options
    datagram = DATA_NAME + b"\x01" + INSTANCE + record + record.replace(b"\x80\x3f", b"\x00\x40")
    packet = decode_implicit(datagram)
    swarm = plain_table().decode_implicit(packet.body)
    assert swarm.ids.tolist() == [5, 6]  # the DEF's order
    assert swarm.position[:, 0].tolist() == [1.0, 2.0]


def test_the_verge_page_example_definition_decodes(data: Path) -> None:
    obj = json.loads((data / "verge_example_definition.json").read_text())
    definition = definition_from_json(obj)
    assert definition.definition_id == 1
    assert definition.model == "X7"
    assert definition.lumens == 900.0  # "900", a string on the page
    pyro, laser = definition.payloads
    assert pyro.def_type is DefType.PYRO and pyro.mount is MountType.STATIC  # via "MountDef"
    assert [c.id for c in pyro.cues] == [1, 4]
    assert [c.vdl for c in pyro.cues] == ["Silver Waterfall 10s", "red comet three times"]
    assert pyro.cues[0].mount_direction == Quaternion(0, 0, 0, 1)
    assert pyro.cues[1].mount_direction == Quaternion(0, 1, 0, 0)
    assert laser.def_type is DefType.LASER and laser.mount is MountType.GIMBAL_2DOF
    assert laser.color == (255, 0, 0)


def test_prose_spellings_decode_too() -> None:
    obj = {
        "DefinitionID": "3",
        "ModelName": "X1",
        "PayloadDefinitions": [
            {
                "DefType": "Light",
                "MountType": "3DOF",
                "LightLumens": 500,
                "LightType": "Spotlight",
                "SpotAngle": "12.5",
            }
        ],
    }
    definition = definition_from_json(obj)
    assert definition.definition_id == 3 and definition.model == "X1"
    (light,) = definition.payloads
    assert light.mount is MountType.GIMBAL_3DOF and light.spot_angle == 12.5
    assert light.light_type == "Spotlight" and light.lumens == 500.0


def test_encoder_spells_definitions_as_the_profile_says() -> None:
    out = definition_to_json(LOADED)
    assert list(out)[:2] == ["DefinitionID", "DeviceModel"]
    assert [p["MountType"] for p in out["PayloadDefinitions"]] == ["Static", "2DOF", "3DOF"]


def test_a_large_def_splits_into_parts_that_merge_back() -> None:
    ids = np.arange(3000, dtype=np.uint16)
    datagrams = encode_def(9, (0.0, 0.0, 0.0), [(PLAIN, ids[:1000]), (LOADED, ids[1000:])])
    assert len(datagrams) > 1 and max(map(len, datagrams)) <= DEFAULT_DATAGRAM
    packets = [as_def(d) for d in datagrams]
    assert all(p.device_count == 3000 for p in packets)
    table = DefinitionTable.from_def(packets[0])
    assert not table.complete
    for p in packets[1:]:
        table.add(p)
    assert table.complete
    assert table.index_of[:1000].tolist() == [0] * 1000
    assert table.index_of[1000:3000].tolist() == [1] * 2000


def test_a_large_frame_splits_and_stays_in_layout_runs() -> None:
    n = 10_000
    ids = np.arange(n, dtype=np.uint16)
    table = DefinitionTable.build(1, (0.0, 0.0, 0.0), blocks_of(list(range(9000)),
                                                            list(range(9000, n))))  # fmt: skip
    swarm = swarm_of(list(range(n))[::-1], 3)
    swarm.position[:] = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    swarm.has_color[::2] = True
    swarm.color[::2] = (1, 2, 3)
    datagrams = encode_data(table, swarm, 3)
    assert max(map(len, datagrams)) <= DEFAULT_DATAGRAM
    packets = [as_data(d) for d in datagrams]
    assert {p.parts for p in packets} == {len(datagrams)}
    assert [p.part for p in packets] == list(range(len(datagrams)))
    body = b"".join(p.body for p in packets)
    back = table.decode(body, sum(p.count for p in packets))
    order = np.argsort(back.ids)
    assert back.ids[order].tolist() == ids.tolist()
    expected = np.argsort(swarm.ids)
    assert np.array_equal(back.position[order], swarm.position[expected])
    assert np.array_equal(back.has_color[order], swarm.has_color[expected])
