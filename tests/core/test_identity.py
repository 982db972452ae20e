"""Native identity: a sink of the source's own protocol keeps its names; collisions qualify."""

import logging

import pytest

from robowire.gateway import open_source
from robowire.world.identity import SinkNames
from robowire.world.table import SourceTable


def table(source: str, protocol: str | None, *ids: str) -> SourceTable:
    out = SourceTable(source, protocol=protocol)
    for device_id in ids:
        out.slot(device_id)
    return out


def test_native_ids_go_out_unchanged_and_foreign_ones_are_mapped() -> None:
    names = SinkNames("vrpn", lambda name: name.replace("/", "_"))
    native = table("vrpn@a:3883", "vrpn", "Tracker0/0", "Tracker0/1")
    foreign = table("ugcs@b:5556", "ugcs", "SIM/1")
    assert names.names(native, [1, 0]) == ["Tracker0/1", "Tracker0/0"]
    assert names.name(foreign, 0) == "SIM_1"


def test_a_collision_keeps_the_first_and_qualifies_the_second_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    names = SinkNames("ugcs")
    first = table("ugcs@a:5556", "ugcs", "SIM-0001")
    second = table("ugcs@b:5556", "ugcs", "SIM-0001", "SIM-0002")
    with caplog.at_level(logging.WARNING):
        assert names.names(first, [0]) == ["SIM-0001"]
        assert names.names(second, [0, 1]) == ["ugcs@b:5556/SIM-0001", "SIM-0002"]
        assert names.names(second, [0]) == ["ugcs@b:5556/SIM-0001"]  # fixed once seen
    assert len(caplog.records) == 1
    assert "SIM-0001" in caplog.records[0].getMessage()


def test_a_source_opened_from_a_url_names_its_protocol() -> None:
    assert open_source("vrpn://Tracker0@127.0.0.1:3883").protocol == "vrpn"
    assert open_source("ugcs://127.0.0.1:5556").protocol == "ugcs"


def test_a_split_keeps_a_senders_devices_together_through_a_collision(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VRPN: "Tracker0/0" and "Tracker0/1" are sensors of one sender; a second source's
    Tracker0 is renamed as a whole (said once), its sensors kept."""

    def split(device_id: str) -> tuple[str, str]:
        head, cut, rest = device_id.partition("/")
        return head, cut + rest

    names = SinkNames("vrpn", lambda name: name.replace("/", "_").replace("@", "_"), split=split)
    first = table("vrpn@a", "vrpn", "Tracker0/0", "Tracker0/1", "Analog0")
    second = table("vrpn@b", "vrpn", "Tracker0/1", "Tracker0/2", "Tracker0")
    with caplog.at_level(logging.WARNING):
        assert names.names(first, [0, 1, 2]) == ["Tracker0/0", "Tracker0/1", "Analog0"]
        assert names.names(second, [0, 1, 2]) == [
            "vrpn_b_Tracker0/1",
            "vrpn_b_Tracker0/2",
            "vrpn_b_Tracker0",
        ]
    assert len(caplog.records) == 1
    assert names.name_of(first, "Tracker0") == "Tracker0"  # a log event's sender
