import pytest

from robowire import protocols
from robowire.endpoints import parse_endpoint
from robowire.errors import ConfigError


def test_network_urls():
    e = parse_endpoint("vrpn://Tracker0@10.0.0.5:3883?time=receive")
    assert (e.protocol, e.scheme, e.user, e.host, e.port) == (
        "vrpn",
        "vrpn",
        "Tracker0",
        "10.0.0.5",
        3883,
    )
    assert e.option("time", "sender") == "receive" and not e.is_file
    e = parse_endpoint("vrpn+tcp://Tracker0@host")
    assert (e.protocol, e.scheme, e.port, e.port_or(3883)) == ("vrpn", "vrpn+tcp", None, 3883)
    assert parse_endpoint("spyglass://127.0.0.1:7870").port == 7870


def test_files():
    assert parse_endpoint("demo.rec").protocol == "spyglass"
    e = parse_endpoint("vrpn:capture.pcap")
    assert (e.protocol, e.path, e.is_file) == ("vrpn", "capture.pcap", True)
    assert parse_endpoint("spyglass:-").path == "-"


@pytest.mark.parametrize(
    "text, words",
    [
        ("ftp://host", "unknown scheme"),
        ("capture.pcap", "cannot tell the protocol"),
        ("vrpn://host:99999", "bad port"),
    ],
)
def test_bad_endpoints_are_one_line_config_errors(text, words):
    with pytest.raises(ConfigError, match=words) as info:
        parse_endpoint(text)
    assert "\n" not in str(info.value)


def test_unknown_protocol():
    with pytest.raises(ConfigError, match="unknown protocol"):
        protocols.get("carrier-pigeon")
