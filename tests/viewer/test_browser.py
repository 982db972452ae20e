"""The web viewer in a real headless Chromium (Debian's), driven by Playwright.

Real processes on loopback: `robowire serve http://127.0.0.1:0 --from vrsp://127.0.0.1:PORT`
(the viewer) and `robowire sim vrsp --drones 30 --to 127.0.0.1:PORT` (30 drones, ids 1..30,
with positions, LED colours, headings and latitude/longitude). One browser page is shared by
the tests below, in order: it loads, lists the drones, sees them move, picks one in the 3-D view,
shows a selected drone's telemetry with units, draws them on the map, shows the source's status
and decodes state frames laid out by hand from the spec; a screenshot is saved to
test-artifacts/viewer.png, and the page must have logged no console or WebGL error.
Skipped, saying how to install it, where Debian's chromium is missing (see conftest.py).
"""

from __future__ import annotations

import math
import re
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DRONES = 30
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = pytest.mark.timeout(180)  # (a wait is up to 60 s: see Viewer.wait)


@pytest.fixture(scope="module")
def viewer(cli: Callable[..., Any], free_udp_port: Callable[[], int], open_viewer: Any) -> Any:
    port = free_udp_port()
    server = cli("serve", "http://127.0.0.1:0", "--from", f"vrsp://127.0.0.1:{port}")
    url = server.wait_for(r"viewer listening on (http://127\.0\.0\.1:\d+/)").group(1)
    cli("sim", "vrsp", "--drones", str(DRONES), "--to", f"127.0.0.1:{port}")
    page = open_viewer(url)
    page.source = f"vrsp@127.0.0.1:{port}"
    return page


def test_page_loads_and_lists_the_simulated_drones(viewer: Any) -> None:
    viewer.wait(f"window.robowire && robowire.store.devices.length >= {DRONES}")
    devices = viewer.js("robowire.devices()")
    assert sorted(d["name"] for d in devices) == sorted(str(i) for i in range(1, DRONES + 1))
    assert {d["kind"] for d in devices} == {"drone"}
    assert {d["source"] for d in devices} == {viewer.source}
    # the list: a group header for the source with its count, rows for the drones in view
    header = f"{viewer.source} ({DRONES})"
    viewer.wait(f"document.querySelector('#list .row.group').textContent === '{header}'")
    # search narrows the (virtualised) list to the matching drones; it matches source names
    # too, so the query is a drone number that the source's port does not contain
    query = next(str(n) for n in range(10, DRONES + 1) if str(n) not in viewer.source)
    viewer.page.fill("#search", query)
    viewer.wait("[...document.querySelectorAll('#list .row:not([hidden]) .name')].length === 1")
    names = viewer.page.locator("#list .row:not([hidden]) .name").all_inner_texts()
    assert names == [query]
    viewer.page.fill("#search", "")
    assert viewer.page.locator("#conn").inner_text() == "live"


def test_positions_change_over_time(viewer: Any) -> None:
    viewer.wait(
        f"robowire.devices().filter(d => d.position.every(Number.isFinite)).length === {DRONES}"
    )
    before = {d["name"]: d["position"] for d in viewer.js("robowire.devices()")}
    frame = viewer.js("robowire.store.frame")
    viewer.wait(f"robowire.store.frame >= {frame + 10}")
    moved = "robowire.devices().filter(d => d.position.some((v, k) => v !== was[d.name][k]))"
    viewer.wait(f"(was) => {moved}.length > {DRONES // 2}", before)  # more than half moved
    assert viewer.js("robowire.stats.rendered") > 10


def test_clicking_a_drone_in_the_3d_view_shows_its_telemetry_with_units(viewer: Any) -> None:
    # frame the drones and keep the camera still (as a user who has moved it)
    viewer.js("robowire.scene.fitAll(); robowire.scene.camera.userMoved = true")
    end = time.monotonic() + 60.0  # (a loaded machine draws few frames a second)
    while time.monotonic() < end:  # the drones fly: click where drone 5 is drawn now, again
        xy = viewer.js(
            """() => {
            const d = robowire.find('5'), p = robowire.store.position(d);
            const s = robowire.scene.camera.project(p[0], p[1], p[2], [0, 0]);
            const r = document.getElementById('scene').getBoundingClientRect();
            return [r.left + s[0], r.top + s[1]];
          }"""
        )
        viewer.page.mouse.click(xy[0], xy[1])
        if viewer.js("robowire.selected !== null"):
            break
    assert viewer.js("robowire.selected !== null")
    name = viewer.js("robowire.selected.name")
    assert name.isdigit()  # one of the drones (a neighbour may be drawn on top of drone 5)
    # select drone 5 from the list to know exactly which one the panel shows
    viewer.page.fill("#search", "5")
    viewer.page.locator("#list .row:not([hidden]) .name", has_text=re.compile(r"^5$")).click()
    viewer.wait("robowire.selected && robowire.selected.name === '5'")
    viewer.wait("document.querySelector('#panel-body tr[data-field=heading]') !== null")
    assert viewer.page.locator("#panel-title").inner_text() == "5 (drone)"
    rows = viewer.page.locator("#panel-body tr[data-field]")
    fields = {
        r.get_attribute("data-field"): (
            r.locator("td.v").inner_text(),
            r.locator("td.u").inner_text(),
        )
        for r in rows.all()
    }
    # VRSP drones report an LED colour and a heading; the pose comes with metres and degrees
    for led in ("led_red", "led_green", "led_blue"):
        assert 0 <= float(fields[led][0]) <= 255
    assert fields["heading"][1] == "°"
    assert fields["east"][1] == "m" and fields["north"][1] == "m" and fields["up"][1] == "m"
    assert fields["latitude"][1] == "°" and fields["longitude"][1] == "°"
    assert -90 <= float(fields["latitude"][0]) <= 90
    assert fields["id"][0] == "5"
    # the sparklines fill as telemetry arrives
    viewer.wait(
        "[...document.querySelectorAll('#panel-body canvas')].some(c => "
        "c.getContext('2d').getImageData(0, 0, c.width, c.height).data.some(v => v > 0))"
    )
    viewer.page.fill("#search", "")


def test_the_map_shows_the_drones_with_latitude_and_longitude(viewer: Any) -> None:
    viewer.wait(f"document.getElementById('geo-info').textContent === '{DRONES} with lat/lon'")
    # a click on drone 12's dot on the map selects it (where it is drawn now: again if it moved)
    viewer.js("robowire.select(null)")
    end = time.monotonic() + 60.0
    while viewer.js("robowire.selected === null") and time.monotonic() < end:
        xy = viewer.js(
            """() => {
            const d = robowire.find('12'), g = robowire.store.geodetic(d);
            const geo = document.getElementById('geo'), r = geo.getBoundingClientRect();
            const view = robowire.geo, s = view.toXY(g[0], g[1], [0, 0]);
            return [r.left + s[0], r.top + s[1]];
          }"""
        )
        viewer.page.mouse.click(xy[0], xy[1])
    viewer.wait("robowire.selected && /^\\d+$/.test(robowire.selected.name)")


def test_the_status_panel_shows_the_source_connected_with_a_rate(viewer: Any) -> None:
    row = viewer.page.locator(f'#status-body tr[data-service="{viewer.source}"]')
    viewer.wait(
        "(() => { const r = document.querySelector(`#status-body tr[data-service='"
        + viewer.source
        + "']`); return r && r.cells[2].textContent === 'connected' "
        "&& parseFloat(r.cells[5].textContent) > 0; })()"
    )
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "source"
    assert int(cells[4]) == DRONES


def test_the_status_panel_says_which_worker_a_service_runs_in(viewer: Any) -> None:
    """A site with workers: the gateway's status has each worker's own sources after its
    row, with `worker` (docs/config.md); the panel names it as `robowire status` does."""
    names = viewer.js(
        """async (services) => {
          const { StatusTable } = await import('/static/status.js');
          const body = document.createElement('tbody');
          new StatusTable(body, null).update({ type: 'status', services });
          return Array.from(body.rows, (r) => [r.dataset.service, r.cells[0].textContent]);
        }""",
        [
            {"name": "worker ingest", "role": "worker", "state": "connected"},
            {"name": "mocap", "role": "source", "state": "connected", "worker": "ingest"},
            {"name": "viewer", "role": "sink", "state": "listening"},
        ],
    )
    assert names == [
        ["worker ingest", "worker ingest"],
        ["mocap", "mocap (worker ingest)"],
        ["viewer", "viewer"],
    ]


def test_the_device_panel_shows_values_json_could_not_carry_as_a_dash(viewer: Any) -> None:
    """A broken device's infinite velocity or orientation component reaches the page as null
    (JSON has no inf; orjson writes null): the panel shows a dash for it, and the rest."""
    shown = viewer.js(
        """async (m) => {
          const { Panel } = await import('/static/panel.js');
          const body = document.createElement('div');
          const panel = new Panel(document.createElement('span'), body);
          panel.show({ source: { name: m.source }, slot: m.slot, name: m.id, kind: m.kind,
                       id: m.id });
          panel.telemetry(m);
          return Object.fromEntries(Array.from(body.querySelectorAll('tr[data-field]'),
            (r) => [r.dataset.field, r.cells[1].textContent]));
        }""",
        {
            "source": "s",
            "slot": 0,
            "id": "x",
            "kind": "drone",
            "position": [None, 2.0, 3.0],
            "orientation": [None, 0.0, 0.0, 0.0],
            "velocity": [1.0, None, 0.5],
            "fields": {"battery": [None, "V"]},
        },
    )
    assert shown["orientation wxyz"] == "—, 0, 0, 0"
    assert shown["velocity"] == "1, —, 0.5"
    assert shown["east"] == "—" and shown["north"] == "2"
    assert shown["battery"] == "—"


def _block(source: int, slots: list[int], beam: bool) -> bytes:
    """A state-frame block laid out by hand from viewer-spec.md (not by the server's encoder)."""
    n = len(slots)
    out = struct.pack("<HHI", source, 1 if beam else 0, n)
    out += struct.pack(f"<{n}I", *slots)
    out += struct.pack(f"<{3 * n}f", *[s + k / 4 for s in slots for k in range(3)])
    out += struct.pack(f"<{4 * n}f", *[1.0, 0.0, 0.0, 0.0] * n)
    out += bytes([10, 20, 30, 255] * n)
    out += struct.pack(f"<{n}f", *[90.0] * n)
    out += struct.pack(f"<{3 * n}f", *[47.5, 8.5, float("nan")] * n)
    if beam:
        out += struct.pack(f"<{3 * n}f", *[0.0, 0.0, -1.0] * n)
    return out


DECODE = """async (bytes) => {
  const { decodeFrame } = await import('/static/net.js');
  const f = decodeFrame(new Uint8Array(bytes).buffer);
  const plain = (a) => (a ? Array.from(a, (v) => (Number.isNaN(v) ? 'NaN' : v)) : null);
  return { frame: f.frame, time: f.time, blocks: f.blocks.map((b) => ({
    source: b.source, n: b.n, slot: plain(b.slot), position: plain(b.position),
    colour: plain(b.colour), heading: plain(b.heading), geodetic: plain(b.geodetic),
    beam: plain(b.beam) })) };
}"""


def test_the_page_decodes_state_frames_laid_out_as_the_spec_says(viewer: Any) -> None:
    blocks = [_block(3, [7, 2], beam=True), _block(0, [5], beam=False)]
    frame = struct.pack("<BBHId", 1, 0, len(blocks), 4242, 1.5e9) + b"".join(blocks)
    decoded = viewer.js(DECODE, list(frame))
    assert decoded["frame"] == 4242 and decoded["time"] == 1.5e9
    first, second = decoded["blocks"]
    assert (first["source"], first["n"], first["slot"]) == (3, 2, [7, 2])
    assert first["position"] == [7.0, 7.25, 7.5, 2.0, 2.25, 2.5]
    assert first["colour"] == [10, 20, 30, 255] * 2
    assert first["heading"] == [90.0, 90.0]
    assert [round(v, 4) if v != "NaN" else v for v in first["geodetic"]] == [47.5, 8.5, "NaN"] * 2
    assert first["beam"] == [0.0, 0.0, -1.0] * 2
    assert (second["source"], second["slot"], second["beam"]) == (0, [5], None)
    assert not math.isnan(second["position"][0])
    # a frame cut short is refused (RangeError), not read past its end
    error = viewer.js(
        "async (bytes) => { const { decodeFrame } = await import('/static/net.js');"
        " try { decodeFrame(new Uint8Array(bytes).buffer); return null; }"
        " catch (e) { return e.name; } }",
        list(frame[:-5]),
    )
    assert error == "RangeError"


def test_screenshot_and_no_console_errors(viewer: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "viewer.png"
    viewer.page.screenshot(path=str(path))
    print(f"viewer screenshot: {path}")
    assert path.stat().st_size > 10_000
    assert viewer.errors == []
