"""The mission file form and the user-unit conversions of `UcsClient` (no sockets)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from robowire.errors import ConfigError
from robowire.protocols.ugcs.client import Mission, split_host, to_wire
from robowire.protocols.ugcs.codec import ValueKind, defs
from robowire.protocols.ugcs.device import FieldInfo

EXAMPLE = Path(__file__).parents[2] / "examples" / "ugcs-square.json"


def test_the_example_mission_file() -> None:
    mission = Mission.load(str(EXAMPLE))
    names = [name for name, _ in mission.items]
    # takeoff; speed 8 then the first corner; the second corner; speed 5 then the third; the
    # fourth (same speed: no set_speed); land
    assert names == ["takeoff_mission", "set_speed", "move", "move", "set_speed", "move",
                     "move", "land_mission"]  # fmt: skip
    assert mission.waypoint_of_item == (0, 1, 1, 2, 3, 3, 4, 5)
    assert mission.items[1][1] == {"ground_speed": 8.0}
    first = mission.items[2][1]
    assert first == {"latitude": 56.9504983, "longitude": 24.1052, "altitude_amsl": 40,
                     "acceptance_radius": 2}  # fmt: skip
    assert mission.attributes == {"name": "square", "safe_altitude": 40}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "a JSON object"),
        ({"waypoints": []}, "non-empty list"),
        ({"waypoints": [{"latitude": 1, "longitude": 2}]}, "'altitude'"),
        ({"waypoints": [{"latitude": 1, "longitude": 2, "altitude": 3, "speed": -1}]}, "speed"),
        ({"waypoints": [{"command": 5}]}, "'command'"),
        ({"waypoints": [{"command": "wait"}], "extra": 1}, "unknown key"),
    ],
)
def test_bad_mission_files_say_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Mission.from_json(data)


def test_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        Mission.load(str(path))
    with pytest.raises(ConfigError, match=r"m2\.json"):
        Mission.load(str(tmp_path / "m2.json"))
    path.write_text(json.dumps({"waypoints": [{"command": "wait", "time": 2}]}))
    assert Mission.load(str(path)).items == (("wait", {"time": 2}),)


def info(semantic: int) -> FieldInfo:
    return FieldInfo(field_id=1, name="x", semantic=semantic, kind=ValueKind.FLOAT)


def test_degrees_become_radians_by_semantic_only() -> None:
    assert to_wire(info(defs.FIELD_SEMANTIC_LATITUDE), 90) == pytest.approx(math.pi / 2)
    assert to_wire(info(defs.FIELD_SEMANTIC_HEADING), 180.0) == pytest.approx(math.pi)
    assert to_wire(info(defs.FIELD_SEMANTIC_ALTITUDE_AMSL), 40.0) == 40.0
    assert to_wire(info(defs.FIELD_SEMANTIC_LATITUDE), None) is None
    assert to_wire(info(defs.FIELD_SEMANTIC_ENUM), "land") == "land"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1", ("127.0.0.1", 5556)),
        ("127.0.0.1:5566", ("127.0.0.1", 5566)),
        ("vsm.example", ("vsm.example", 5556)),
        ("[::1]:7000", ("::1", 7000)),
    ],
)
def test_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert split_host(text) == expected


def test_a_bad_port_is_a_config_error() -> None:
    for text in ("host:port", "host:70000"):
        with pytest.raises(ConfigError):
            split_host(text)
