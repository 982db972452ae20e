"""`robowire decode vrsp FILE`: every VRSP datagram of a capture as one JSON-ready dict, and
the capture reader the file source shares.

Inputs: pcap/pcapng (every UDP datagram), or a raw file holding one datagram. A VRSP_DATA
datagram is decoded with the definition table of the latest VRSP_DEF of its instance seen
before it in the capture; its line names that DEF (`definition`: the DEF's datagram index and
instance) and each record's definition id. DATA whose DEF has not been seen yet is an error
line, and decoding goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from robowire.capture import Record
from robowire.errors import DecodeError
from robowire.protocols.datagram import datagram_records
from robowire.protocols.vrsp.codec import (
    LIGHT_LEVEL,
    MAX_DATAGRAM,
    PYRO,
    DefinitionTable,
    VrspData,
    VrspDef,
    decode_implicit,
    decode_packet,
    definition_to_json,
    payload_kind,
)
from robowire.protocols.vrsp.definitions import MountType, Swarm


def read_capture(path: str) -> Iterator[Record]:
    """The UDP datagrams of a pcap/pcapng, or a raw file as one datagram."""
    return datagram_records(path, MAX_DATAGRAM)


def _round(values: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in values]


def def_to_json(packet: VrspDef) -> dict[str, Any]:
    return {
        "version": packet.version,
        "instance": packet.instance,
        "device_count": packet.device_count,
        "root": {
            "latitude": packet.root[0],
            "longitude": packet.root[1],
            "altitude": packet.root[2],
        },
        "definitions": [
            {
                "devices": len(b.ids),
                "definition": definition_to_json(b.definition),
                "ids": b.ids.tolist(),
            }
            for b in packet.blocks
        ],
    }


def records_to_json(table: DefinitionTable, swarm: Swarm) -> list[dict[str, Any]]:
    """Every record of a decoded DATA packet, with the definition it was read with."""
    out = []
    for i, device in enumerate(swarm.ids.tolist()):
        definition = table.definitions[int(table.index_of[device])]
        record: dict[str, Any] = {
            "id": device,
            "definition": definition.definition_id,
            "position": _round(swarm.position[i]),
        }
        if swarm.has_color[i]:
            record["color"] = swarm.color[i].tolist()
        if swarm.has_heading[i]:
            record["heading"] = round(float(swarm.heading[i]), 3)
        if swarm.has_orientation[i]:
            record["orientation"] = _round(swarm.orientation[i])
        payloads = []
        for j, payload in enumerate(definition.payloads):
            item: dict[str, Any] = {"type": payload.def_type.value}
            kind = payload_kind(payload)
            if kind == PYRO:
                item["cue"] = int(swarm.cue[i, j])
                item["ms_since_trigger"] = int(swarm.cue_ms[i, j])
            elif kind == LIGHT_LEVEL:
                item["intensity"] = int(swarm.light[i, j, 0])
            else:
                item["rgb"] = swarm.light[i, j].tolist()
            if payload.mount is not MountType.STATIC:
                item["gimbal"] = _round(swarm.gimbal[i, j])
            payloads.append(item)
        if payloads:
            record["payloads"] = payloads
        out.append(record)
    return out


def dissect(path: str) -> Iterator[dict[str, Any]]:
    """Every datagram of the capture, one dict each (see the module docstring)."""
    tables: dict[int, tuple[DefinitionTable, int]] = {}  # instance -> table, DEF datagram index
    index = 0
    try:
        for record in read_capture(path):
            head: dict[str, Any] = {"direction": record.flow, "datagram": index}
            if record.time is not None:
                head["time"] = record.time
            index += 1
            data = record.data
            try:
                packet = decode_packet(data)
            except DecodeError as exc:
                if "frame header cut short" not in exc.reason:
                    yield {"error": exc.reason, "offset": exc.offset, **head, "length": len(data)}
                    continue
                packet = decode_implicit(data)
            try:
                if isinstance(packet, VrspDef):
                    known = tables.get(packet.instance)
                    if known is None or known[0].device_count != packet.device_count:
                        tables[packet.instance] = (
                            DefinitionTable.from_def(packet),
                            head["datagram"],
                        )
                    else:
                        known[0].add(packet)
                    yield {"type": packet.WIRE_NAME, **head, "length": len(data),
                           **def_to_json(packet)}  # fmt: skip
                    continue
                yield {"type": packet.WIRE_NAME, **head, "length": len(data),
                       **_data_json(packet, data, tables)}  # fmt: skip
            except DecodeError as exc:
                yield {"error": exc.reason, "offset": exc.offset, **head, "length": len(data)}
    except DecodeError as exc:  # the capture is cut or damaged here: the rest is lost
        yield {"error": exc.reason, "offset": exc.offset, "direction": "?"}


def _data_json(
    packet: VrspData, data: bytes, tables: dict[int, tuple[DefinitionTable, int]]
) -> dict[str, Any]:
    out: dict[str, Any] = {"version": packet.version, "instance": packet.instance}
    known = tables.get(packet.instance)
    if known is None:  # the header still says what it is; its records need the DEF
        if packet.frame is not None:
            out.update(frame=packet.frame, part=packet.part, parts=packet.parts)
        out.update(definition=None, records=None, record_count=packet.count,
                   note="no VRSP_DEF of this instance before it: records not decoded")  # fmt: skip
        return out
    table, def_index = known
    if packet.frame is None:
        swarm = table.decode_implicit(packet.body, packet.body_offset)
        out["framing"] = "implicit"
    else:
        try:
            swarm = table.decode(packet.body, packet.count, packet.body_offset)
            out.update(frame=packet.frame, part=packet.part, parts=packet.parts)
        except DecodeError:
            implicit = decode_implicit(data)
            try:
                swarm = table.decode_implicit(implicit.body, implicit.body_offset)
            except DecodeError:
                swarm = table.decode(packet.body, packet.count, packet.body_offset)  # its error
            out["framing"] = "implicit"
    out["definition"] = {"datagram": def_index, "instance": table.instance}
    out["records"] = records_to_json(table, swarm)
    return out
