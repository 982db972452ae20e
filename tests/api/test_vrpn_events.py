"""`Live.on_button`, `on_analog`, `on_dial` and `on_text` against `robowire sim vrpn`, the
mainline `vrpn_server` (vrpn_Button_Example, vrpn_Dial_Example), and our own publisher."""

from __future__ import annotations

import itertools
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.api.simulators import simulator
from tests.support import free_port

import robowire
from mainline import SERVER, needs_client, needs_server, start_print_devices, stop_print_devices
from robowire.live import AnalogEvent, ButtonEvent, DialEvent, TextEvent


def until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll `condition` (the callbacks run on their own threads) until it holds."""
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, f"not within {seconds:g} s: {what}"
        time.sleep(0.02)


def test_buttons_dials_and_analogs_of_the_simulator() -> None:
    with (
        simulator("vrpn", count=1, rate=50) as (host, port),
        robowire.connect(f"vrpn://Tracker0,Analog0,Button0,Dial0@{host}:{port}") as live,
    ):
        buttons: list[ButtonEvent] = []
        dials: list[DialEvent] = []
        analogs: list[AnalogEvent] = []
        live.on_button(buttons.append)
        live.on_dial(dials.append)
        live.on_analog(analogs.append)
        # the simulator toggles its 2 buttons every second and turns its dials by 0.25
        until(lambda: sum(not e.pressed for e in buttons if e.button == 0) >= 2, "2 releases")
        until(lambda: len(dials) >= 6 and len(analogs) >= 10, "dial turns and analog reports")
    presses = [e.pressed for e in buttons if e.button == 0]
    assert all(a != b for a, b in itertools.pairwise(presses))  # every change once
    assert {e.name for e in buttons} == {"Button0"} and {e.button for e in buttons} == {0, 1}
    assert {(e.name, e.delta) for e in dials} == {("Dial0", 0.25)}
    turns = [e.total for e in dials if e.dial == 0]
    assert turns == pytest.approx([turns[0] + 0.25 * k for k in range(len(turns))])
    assert all(e.name == "Analog0" and len(e.channels) == 4 for e in analogs)
    assert all(abs(e.time - time.time()) < 60 for e in (*buttons, *dials, *analogs))


@needs_server
def test_buttons_and_dials_of_the_mainline_server(tmp_path: Path) -> None:
    config = tmp_path / "vrpn.cfg"
    config.write_text(
        "vrpn_Button_Example\tButton0\t2\t10.0\n"  # 2 buttons toggling 10 times a second
        "vrpn_Dial_Example\tDial0\t2\t2.0\t10.0\n"  # 2 dials at 2 rev/s, 10 reports a second
    )
    port = free_port()
    server = subprocess.Popen(
        [str(SERVER), "-f", str(config), "-NIC", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with robowire.connect(f"vrpn://Button0,Dial0@127.0.0.1:{port}?retry=0.2") as live:
            buttons: list[ButtonEvent] = []
            dials: list[DialEvent] = []
            live.on_button(buttons.append)
            live.on_dial(dials.append)
            until(lambda: len(buttons) >= 8 and len(dials) >= 8, "presses, releases and turns")
    finally:
        server.terminate()
        server.wait(timeout=10)
    for button in (0, 1):
        states = [e.pressed for e in buttons if e.button == button]
        assert True in states and False in states
        assert all(a != b for a, b in itertools.pairwise(states))
    assert {e.dial for e in dials} == {0, 1}
    assert all(e.name == "Dial0" and e.delta == pytest.approx(0.2) for e in dials)  # 2 rev/s / 10


@needs_client
def test_text_from_our_publisher_reaches_on_text_and_the_mainline_client() -> None:
    with robowire.publish("vrpn://127.0.0.1:0") as pub:
        assert pub.address is not None
        host, port = pub.address
        texts: list[TextEvent] = []
        client = start_print_devices(f"Tracker0@tcp://{host}:{port}")
        with robowire.connect(f"vrpn://Tracker0@{host}:{port}") as live:
            live.on_text(texts.append)
            for k in range(200):  # 1 s at least: the mainline client needs a moment to start
                pub.set("Tracker0/0", position=(1.0, 2.0, 0.1 * k))
                pub.log("Tracker0", f"battery low {k}", "warning")
                time.sleep(0.05)
                if len(texts) >= 3 and k >= 20:
                    break
        printed = stop_print_devices(client)
    assert [(e.name, e.level) for e in texts[:3]] == [("Tracker0", "warning")] * 3
    assert texts[0].text.startswith("battery low ")
    assert "from Tracker0: battery low " in printed, printed
    with pytest.raises(ValueError, match="level must be info, warning, error"):
        pub.log("Tracker0", "x", "loud")
