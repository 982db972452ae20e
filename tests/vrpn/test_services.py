"""The VRPN services as the registry and the gateway open them."""

from __future__ import annotations

import pytest

from robowire import protocols
from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError
from robowire.gateway import open_source
from robowire.protocols.vrpn import services
from robowire.protocols.vrpn.services import VrpnSim, VrpnSink, VrpnSource
from robowire.service import SimOptions


def test_glue_names() -> None:
    vrpn = protocols.get("vrpn")
    assert vrpn.open_source is services.VrpnSource
    assert vrpn.name == "vrpn" and vrpn.default_port == 3883
    assert vrpn.command is None


def test_source_urls() -> None:
    udp = protocols.get("vrpn").source(parse_endpoint("vrpn://Tracker0,Analog0@example.org"))
    assert isinstance(udp, VrpnSource)
    assert udp.udp and udp.port == 3883 and udp.devices == ["Tracker0", "Analog0"]
    assert udp.name == "vrpn@example.org:3883"
    tcp = open_source("vrpn+tcp://127.0.0.1:4000?time=receive")  # `time`: every source's
    assert isinstance(tcp, VrpnSource)
    assert not tcp.udp and tcp.devices == [] and tcp.time_mode == "receive"
    for bad in ("vrpn://T@h?time=server", "vrpn://T@h?retry=soon", f"vrpn://{'x' * 96}@h"):
        with pytest.raises(ConfigError):
            open_source(bad)


def test_sink_and_sim() -> None:
    sink = services.open_sink(parse_endpoint("vrpn://127.0.0.1:0?tracker=All"))
    assert isinstance(sink, VrpnSink) and sink.single == "All"
    sim = services.open_sim(SimOptions(count=4, rate=1000, options={"tracker": "Head"}))
    assert isinstance(sim, VrpnSim) and sim.port == 3883 and sim.tracker == "Head"
    for options in (SimOptions(rate=2000), SimOptions(count=0)):
        with pytest.raises(ConfigError):
            services.open_sim(options)
