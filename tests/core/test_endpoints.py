import pytest

from robowire import protocols
from robowire.addresses import parse_endpoint
from robowire.endpoints import numbers, place, split_host_port
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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.0.0.2", ("10.0.0.2", 9742)),
        ("10.0.0.2:7000", ("10.0.0.2", 7000)),
        (":7000", ("127.0.0.1", 7000)),
        ("[::1]:7000", ("::1", 7000)),
        ("::1", ("::1", 9742)),
        ("ugcs://vsm.example:5558/", ("vsm.example", 5558)),
    ],
)
def test_host_and_port_with_defaults(text, expected):
    assert split_host_port(text, 9742) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("host:x", "--to host:x: the port must be a number"),
        ("host:0", "--to host:0: the port must be 1..65535"),
        ("host:70000", "--to host:70000: the port must be 1..65535"),
    ],
)
def test_a_bad_port_names_itself(text, error):
    with pytest.raises(ConfigError) as caught:
        split_host_port(text, 9742)
    assert str(caught.value) == error


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Tracker0@localhost", ("vrpn", "vrpn", "Tracker0", "localhost", None)),
        ("Tracker0@10.0.0.5:3884", ("vrpn", "vrpn", "Tracker0", "10.0.0.5", 3884)),
        ("Tracker0@tcp://10.0.0.5:3884", ("vrpn", "vrpn+tcp", "Tracker0", "10.0.0.5", 3884)),
        ("Head@x-vrpn://mocap", ("vrpn", "vrpn", "Head", "mocap", None)),
    ],
)
def test_vrpn_own_names(text, expected):
    """VRPN's `Device@host[:port]` forms, as vrpn_get_connection_by_name reads them."""
    e = parse_endpoint(text)
    assert (e.protocol, e.scheme, e.user, e.host, e.port) == expected
    assert str(e) == text  # errors and names say what the user wrote


def test_vrpn_file_names_and_files_with_at_signs():
    e = parse_endpoint("Tracker0@file://logs/run.vrpn")
    assert (e.protocol, e.path) == ("vrpn", "logs/run.vrpn")
    assert parse_endpoint("me@home.rec").path == "me@home.rec"  # a file, not a VRPN host
    with pytest.raises(ConfigError, match="'Tracker0@h:99999'"):
        parse_endpoint("Tracker0@h:99999")


def test_number_lists_and_places_are_parsed_once_for_every_protocol() -> None:
    assert numbers("1, 2.5,3", "scale", "spyglass", (1, 3)) == [1.0, 2.5, 3.0]
    for text, reason in [("1,2", "takes 1 or 3 numbers"), ("1,x", "must be numbers"),
                         ("1,nan,1", "must be finite")]:  # fmt: skip
        with pytest.raises(ConfigError, match=f"spyglass: scale {reason}"):
            numbers(text, "scale", "spyglass", (1, 3))
    assert place("56.9,24.1,12", "origin", "ugcs sim") == (56.9, 24.1, 12.0)
    assert place("56.9,24.1", "origin", "x", altitude=0.0) == (56.9, 24.1, 0.0)
    for text in ("56.9,24.1", "95,0,0", "0,181,0", "1,2,3,4", "a,b,c"):
        with pytest.raises(ConfigError, match=r"ugcs sim: origin must be LAT,LON,ALT in degrees"):
            place(text, "origin", "ugcs sim")
