"""Every registered protocol provides every role its `WireProtocol` declares, and has the
modules of the common shape (docs/architecture.md, "Add a protocol")."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

from robowire import protocols, sinks
from robowire.addresses import parse_endpoint
from robowire.protocols.base import MODULES
from robowire.service import CaptureSource, Sim, SimOptions, Sink, Source

CAPTURES = Path(__file__).parents[1] / "data" / "captures"
NAMES = protocols.names()


def capture_of(name: str) -> Path:
    """The protocol's pcap in tests/data/captures (a missing one fails the test)."""
    found = sorted((CAPTURES / name).glob("*.pcap"))
    assert found, f"no pcap capture of {name} in {CAPTURES / name}"
    return found[0]


def test_every_protocol_in_the_registry_loads() -> None:
    assert [p.name for p in protocols.landed()] == NAMES
    assert {"spyglass", "vrpn", "xrp", "ugcs", "vrsp"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_it_has_the_modules_of_the_shape(name: str) -> None:
    package = importlib.import_module(protocols.get(name).open_source.__module__).__package__
    assert package is not None
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations is not None
    modules = {m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)}
    for module in MODULES:  # `session_<role>` modules count as `session`
        assert module in modules or any(m.startswith(f"{module}_") for m in modules), module


@pytest.mark.parametrize("name", NAMES)
def test_it_opens_a_live_source_and_a_file_source(name: str) -> None:
    protocol = protocols.get(name)
    assert {"source", "file", "dissect", "capture"} <= set(protocol.roles())
    live = protocol.source(parse_endpoint(f"{protocol.schemes[0]}://127.0.0.1:0"))
    assert isinstance(live, Source) and not isinstance(live, CaptureSource)
    capture = capture_of(name)
    from_file = protocol.source(parse_endpoint(f"{name}:{capture}"))
    assert isinstance(from_file, CaptureSource)


@pytest.mark.parametrize("name", NAMES)
def test_it_reads_and_dissects_its_capture(name: str) -> None:
    protocol = protocols.get(name)
    capture = str(capture_of(name))
    assert next(iter(protocol.records(capture))).data
    first = next(iter(protocol.dissect(capture)))
    assert isinstance(first, dict) and "error" not in first


@pytest.mark.parametrize("name", NAMES)
def test_its_own_file_formats_are_told_by_suffix(name: str, tmp_path: Path) -> None:
    protocol = protocols.get(name)
    for form in protocol.formats:
        for suffix in form.suffixes:
            path = str(tmp_path / f"file{suffix}")
            assert protocol.reader(path) is form.read
            assert protocols.of_file(path) is protocol
            assert parse_endpoint(path).protocol == name


@pytest.mark.parametrize("name", NAMES)
def test_the_sink_and_the_simulator_it_declares_open(name: str) -> None:
    protocol = protocols.get(name)
    if "sink" in protocol.roles():
        endpoint = parse_endpoint(f"{protocol.schemes[0]}://127.0.0.1:0")
        assert isinstance(sinks.open_sink(endpoint), Sink)
    if "sim" in protocol.roles():
        assert isinstance(protocol.open_sim(SimOptions(port=0)), Sim)
    if protocol.record is not None:
        assert protocol.formats, "a file sink writes one of its own formats"


def test_the_sink_registry_opens_every_sink_the_cli_can_serve_to() -> None:
    for scheme in sinks.names():
        address = "" if scheme == "ros2" else "127.0.0.1:1"  # DDS discovers: no host, no port
        sink = sinks.open_sink(parse_endpoint(f"{scheme}://{address}"))
        assert isinstance(sink, Sink)


def test_a_recording_goes_to_the_format_its_suffix_names(tmp_path: Path) -> None:
    from robowire.recording import McapRecorder

    assert isinstance(sinks.open_recorder(str(tmp_path / "run.mcap")), McapRecorder)
    for name in NAMES:
        protocol = protocols.get(name)
        for suffix in protocol.suffixes() if protocol.record is not None else ():
            recorder = sinks.open_recorder(str(tmp_path / f"run{suffix}"))
            assert type(recorder) is type(protocol.record(str(tmp_path / "x")))
