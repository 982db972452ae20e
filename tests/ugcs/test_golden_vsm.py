"""Our VSM session against the SDK's, on the golden capture (the SDK's hello-world VSM and a
UCS-side client): where the VSM's bytes do not depend on its devices, ours are the same."""

from __future__ import annotations

import json
from pathlib import Path

from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import defs, pb
from robowire.protocols.ugcs.device import CommandSpec, DeviceSpec, IdCounter, SubsystemSpec
from robowire.protocols.ugcs.events import CommandReceived
from robowire.protocols.ugcs.session_vsm import VsmSession

CAPTURE = (
    Path(__file__).resolve().parents[1] / "data" / "captures" / "ugcs" / "capture_hello_basic.jsonl"
)


def lines() -> list[tuple[str, bytes]]:
    assert CAPTURE.is_file()  # a missing file fails, never skips
    out = []
    for line in CAPTURE.read_text().splitlines():
        item = json.loads(line)
        out.append((item["dir"], bytes.fromhex(item["hex"])))
    return out


def test_register_peer_is_byte_for_byte_the_sdks() -> None:
    direction, sdk_peer = lines()[0]
    assert direction == "vsm->ucs"
    sdk = codec.decode_frames(sdk_peer)[0].register_peer
    session = VsmSession(peer_id=sdk.peer_id, name=sdk.name)  # the same instance id and name
    link = session.connect(0.0)
    assert link.data_to_send() == sdk_peer


def test_the_ucs_side_of_the_capture_gets_the_sdks_answers_to_pings() -> None:
    """The client's Register_peer, then its ping (message 1001): the SDK answered
    `09 08 00 10 e9 07 42 02 08 00`, and so do we."""
    session = VsmSession(peer_id=1, name="robowire")
    link = session.connect(0.0)
    link.data_to_send()
    ucs = [data for direction, data in lines() if direction == "ucs->vsm"]
    link.feed(ucs[0], 0.0)  # the client's Register_peer (4.4): accepted, no devices here
    assert session.link_state(link.conn).name == "REGISTERED"
    ping = next(d for d in ucs if codec.decode_frames(d)[0].device_id == 0 and d is not ucs[0])
    link.feed(ping, 2.0)
    sdk_reply = next(
        d
        for direction, d in lines()
        if direction == "vsm->ucs" and codec.decode_frames(d)[0].message_id == 1001
    )
    assert link.data_to_send() == sdk_reply


def test_our_command_reply_has_the_sdks_bytes() -> None:
    """The SDK's reply to `arm` (device 20, message 1002) is `09 08 14 10 ea 07 42 02 08 00`;
    our session's reply to the same request is the same bytes."""
    sdk_reply = next(
        d
        for direction, d in lines()
        if direction == "vsm->ucs" and codec.decode_frames(d)[0].message_id == 1002
    )
    arm = DeviceSpec(subsystems=(SubsystemSpec(type=1, commands=(CommandSpec("arm"),)),))
    session = VsmSession(peer_id=1, ids=IdCounter(19))  # arm gets id 19, the device 20
    info = session.register(arm, 0)
    assert info.device_id == 20
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(next(d for direction, d in lines() if direction == "ucs->vsm"), 0.0)
    (reg,) = codec.decode_frames(link.data_to_send())
    ack = pb.Vsm_message(device_id=20, message_id=reg.message_id)
    ack.device_response.code = defs.STATUS_OK
    link.feed(codec.encode(ack), 0.0)
    link.data_to_send()
    request = pb.Vsm_message(device_id=20, message_id=1002, response_required=True)
    request.device_commands.add(command_id=19)
    (event,) = link.feed(codec.encode(request), 1.0)
    assert isinstance(event, CommandReceived)
    session.respond(event.conn, event.device_id, event.message_id, defs.STATUS_OK)
    assert link.data_to_send() == sdk_reply
