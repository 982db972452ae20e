"""Site files: every mistake is one line naming its key; the example file is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from robowire import config
from robowire.errors import ConfigError
from robowire.gateway import open_site
from robowire.projection import ProjectedSink
from robowire.service import Sim, Source

EXAMPLE = Path(__file__).parents[2] / "examples" / "site.toml"

GOOD_SOURCE = '[[source]]\nurl = "vrpn://Tracker0@127.0.0.1:3883"\n'
GOOD_SINK = '[[sink]]\nurl = "vrpn://127.0.0.1:3884"\n'


def problem(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        config.parse(text, "site.toml", env or {})
    return str(caught.value)


BAD = [
    # (the file's text, the one line expected)
    ("[[source]\n", "site.toml: not valid TOML: "),
    ("[gateway]\n", "site.toml: gateway: unknown key (known: sim, sink, source, workers)"),
    (GOOD_SINK, "site.toml: source: at least one [[source]] is needed"),
    (GOOD_SOURCE, "site.toml: sink: at least one [[sink]] is needed"),
    ('source = "x"\n' + GOOD_SINK, "site.toml: source: must be an array of tables ([[source]])"),
    ("[[source]]\nname = 'a'\n" + GOOD_SINK, "site.toml: source[1].url: is required"),
    (
        GOOD_SOURCE + "[[source]]\nurl = 'nope://x:1'\n" + GOOD_SINK,
        "site.toml: source[2].url: unknown scheme 'nope'",
    ),
    (
        GOOD_SOURCE + "colour = 'red'\n" + GOOD_SINK,
        "site.toml: source[1].colour: unknown key (known: name, time, url, worker)",
    ),
    (GOOD_SOURCE + "time = 'gps'\n" + GOOD_SINK, "site.toml: source[1].time: must be one of"),
    (
        GOOD_SOURCE + "name = 'm'\n" + GOOD_SOURCE + "name = 'm'\n" + GOOD_SINK,
        "site.toml: source[2].name: 'm' is used twice",
    ),
    (GOOD_SOURCE + GOOD_SINK + "rate = 0\n", "site.toml: sink[1].rate: must be a positive number"),
    (
        GOOD_SOURCE + GOOD_SINK + "device_rate = 'fast'\n",
        "site.toml: sink[1].device_rate: must be a positive number",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "rate = true\n",
        "site.toml: sink[1].rate: must be a positive number",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "devices = 'Tracker0/[0'\n",
        "site.toml: sink[1].devices: bad pattern 'Tracker0/[0': unbalanced [ ]",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "kinds = []\n",
        "site.toml: sink[1].kinds: must be a list of name patterns",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "fields = [1]\n",
        "site.toml: sink[1].fields: must be a list of non-empty name patterns",
    ),
    (GOOD_SOURCE + GOOD_SINK + "pose = 'no'\n", "site.toml: sink[1].pose: must be true or false"),
    (
        GOOD_SOURCE + GOOD_SINK + "rename = { a = 'x', b = 'x' }\n",
        "site.toml: sink[1].rename: two devices renamed to the same id",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "rename = { a = 3 }\n",
        "site.toml: sink[1].rename.a: must be a non-empty string (the new device id)",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + GOOD_SINK + "[sink.transform]\nscale = -1\n",
        "site.toml: sink[2].transform.scale: must be a positive number",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[sink.transform]\noffset = [1, 2]\n",
        "site.toml: sink[1].transform.offset: must be a list of 3 numbers",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[sink.transform]\nrotation = [0, 0, 0, 0]\n",
        "site.toml: sink[1].transform.rotation: must be a non-zero quaternion [w, x, y, z]",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[sink.transform]\nrotation = [1, 0, 0, 0]\nyaw_deg = 90\n",
        "site.toml: sink[1].transform.yaw_deg: give rotation or yaw_deg, not both",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[sink.transform]\norigin = [91, 0, 0]\n",
        "site.toml: sink[1].transform.origin: latitude must be from -90 to 90 degrees",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[sink.transform]\nskew = 1\n",
        "site.toml: sink[1].transform.skew: unknown key",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "transform = 5\n",
        "site.toml: sink[1].transform: must be a table",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[[sim]]\ncount = 3\n",
        "site.toml: sim[1].protocol: is required",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[[sim]]\nprotocol = 'vrpn'\nport = 70000\n",
        "site.toml: sim[1].port: must be a whole number from 0 to 65535",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "[[sim]]\nprotocol = 'vrpn'\nport = '${NOT_SET}'\n",
        "site.toml: sim[1].port: ${NOT_SET} is not set",
    ),
    (
        GOOD_SOURCE + "worker = 'show'\n" + GOOD_SINK,
        "site.toml: workers: a [workers] table with a bus is needed",
    ),
    (
        GOOD_SOURCE + "worker = 'a b'\n" + GOOD_SINK,
        "site.toml: source[1].worker: must be a name of letters, digits, '_', '.' or '-'",
    ),
    (
        "[workers]\nbus = 'vrpn://127.0.0.1:1'\n" + GOOD_SOURCE + GOOD_SINK,
        "site.toml: workers.bus: must be a zenoh://HOST:PORT URL",
    ),
    (
        "[workers]\nbus = 'zenoh://127.0.0.1:7450'\nremote = ['x']\n" + GOOD_SOURCE + GOOD_SINK,
        "site.toml: workers.remote: 'x' is not a worker of any source or sink",
    ),
    (
        GOOD_SOURCE + GOOD_SINK + "record = 'run.mcap'\n",
        "site.toml: sink[1].record: give url or record, not both",
    ),
    (
        GOOD_SOURCE + "[[sink]]\nrecord = 'run.txt'\n",
        "site.toml: sink[1].record: must be an .mcap file",
    ),
]


@pytest.mark.parametrize(("text", "line"), BAD)
def test_each_mistake_is_one_line_naming_its_key(text: str, line: str) -> None:
    message = problem(text)
    assert message.startswith(line), message
    assert "\n" not in message


def test_a_url_a_protocol_refuses_names_its_key_before_anything_runs() -> None:
    site = config.parse(
        GOOD_SOURCE + GOOD_SINK + "[[sink]]\nurl = 'vrpn://127.0.0.1:1?bogus=1'\n", "site.toml", {}
    )
    with pytest.raises(ConfigError, match=r"^site\.toml: sink\[2\]\.url: .*bogus"):
        open_site(site)
    sim = config.parse(GOOD_SOURCE + GOOD_SINK + "[[sim]]\nprotocol = 'robot'\n", "site.toml", {})
    with pytest.raises(ConfigError, match=r"^site\.toml: sim\[1\]: unknown protocol 'robot'"):
        open_site(sim)


def test_variables_fill_strings_with_their_defaults() -> None:
    text = '[[source]]\nurl = "vrpn://Tracker0@127.0.0.1:${P:-3883}"\n' + GOOD_SINK
    assert config.parse(text, "s", {}).sources[0].url == "vrpn://Tracker0@127.0.0.1:3883"
    assert config.parse(text, "s", {"P": "9"}).sources[0].url == "vrpn://Tracker0@127.0.0.1:9"


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no\.toml: no such file"):
        config.load(tmp_path / "no.toml")


def test_the_example_site_file_loads_into_services() -> None:
    site = config.load(EXAMPLE, env={})
    assert [s.url for s in site.sources] == ["vrpn://Tracker0@127.0.0.1:3883"]
    assert [s.name for s in site.sources] == ["mocap"]
    vr, foxglove = site.sinks
    assert vr.url == "vrpn://127.0.0.1:3884"
    assert vr.rules.rename == {"Tracker0/0": "drone-1", "Tracker0/1": "drone-2"}
    assert vr.rules.device_rate == 10
    assert vr.rules.transform is not None
    assert vr.rules.transform.rotation == pytest.approx((0.5**0.5, 0, 0, 0.5**0.5))
    assert vr.rules.transform.offset == (0.0, 0.0, 1.5)
    assert foxglove.rate == 30
    assert foxglove.rules.fields == ("battery*",)
    assert foxglove.rules.transform is not None
    assert foxglove.rules.transform.origin == (47.3977, 8.5456, 488.0)
    assert [(s.protocol, s.options.port, s.options.count) for s in site.sims] == [("vrpn", 3883, 4)]
    services = open_site(site)
    assert [type(s).__name__ for s in services if isinstance(s, Sim)] == ["VrpnSim"]
    assert [s.name for s in services if isinstance(s, Source)] == ["mocap"]
    projected = [s for s in services if isinstance(s, ProjectedSink)]
    assert len(projected) == 2
    assert projected[1].inner.max_rate == 30


def test_time_is_passed_to_the_source() -> None:
    site = config.parse(GOOD_SOURCE + "time = 'receive'\n" + GOOD_SINK, "site.toml", {})
    (source,) = [s for s in open_site(site) if isinstance(s, Source)]
    assert source.time.mode == "receive"
    spyglass = config.parse(  # every source takes it (the Source template's `?time=`)
        "[[source]]\nurl = 'spyglass://127.0.0.1:7870'\ntime = 'corrected'\n" + GOOD_SINK,
        "site.toml",
        {},
    )
    (source,) = [s for s in open_site(spyglass) if isinstance(s, Source)]
    assert source.time.mode == "corrected"
    clash = config.parse(
        "[[source]]\nurl = 'spyglass://127.0.0.1:7870?time=sender'\ntime = 'receive'\n" + GOOD_SINK,
        "site.toml",
        {},
    )
    with pytest.raises(ConfigError, match=r"^site\.toml: source\[1\]\.time: the URL says"):
        open_site(clash)
