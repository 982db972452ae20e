"""CLI glue for VRPN: `robowire listen|serve vrpn://...`, `robowire sim vrpn`, `decode vrpn`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from robowire.capture import read_capture
from robowire.endpoints import Endpoint
from robowire.protocols.vrpn.codec import DEFAULT_PORT as _DEFAULT_PORT
from robowire.protocols.vrpn.dissect import decode_records
from robowire.protocols.vrpn.file_source import VrpnFileSource
from robowire.protocols.vrpn.services import VrpnSink, VrpnSource
from robowire.protocols.vrpn.sim import VrpnSim
from robowire.service import Sim, SimOptions, Sink, Source

NAME = "vrpn"
DEFAULT_PORT: int = _DEFAULT_PORT
command = None


def open_source(endpoint: Endpoint) -> Source:
    """`vrpn://Tracker0@host:3883` (UDP+TCP) or `vrpn+tcp://Tracker0,Analog0@host` (TCP only),
    or a capture file `vrpn:capture.pcap` (pcap/pcapng, or a raw stream from the server).

    Options: `?time=sender|receive` (which time becomes the source time), `?retry=SECONDS`,
    `?rate=HZ` (ask the trackers for that update rate once connected).
    """
    if endpoint.is_file:
        return VrpnFileSource(endpoint)
    return VrpnSource(endpoint)


def open_sink(endpoint: Endpoint) -> Sink:
    """`vrpn://127.0.0.1:3883`: every world device as a tracker; `?tracker=NAME` for one."""
    return VrpnSink(endpoint)


def open_sim(options: SimOptions) -> Sim:
    return VrpnSim(options)


def decode_capture(path: str) -> Iterator[dict[str, Any]]:
    """Every message of a pcap/pcapng capture or of a raw one-direction stream."""
    return decode_records(read_capture(path))
