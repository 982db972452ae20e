"""The benchmark table's machinery on a made-up result set: the cells each figure fills, the
text table, the JSON document, `--compare` arithmetic and the latency plot (no benchmark runs).
"""

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # `bench` is a top-level package beside src/, not installed

from bench import table  # noqa: E402

FIGURES = {
    "vrpn": {"decode_rate": 2_500_000.0, "decode_ratio": 3.25, "codec_rate": 9e6},
    "ingest": {"vrpn_rate": 299_000.0},
    "load": {
        "vrpn.1000.p50_ms": 0.2,
        "vrpn.1000.p99_ms": 0.9,
        "vrpn.10000.p50_ms": 0.25,
        "vrpn.10000.p99_ms": 1.5,
        "vrpn.10000.cpu": 0.12,
        "vrpn.10000.rate": 10_000.0,
        "vrsp.300000.p50_ms": 6.0,
        "vrsp.300000.p99_ms": 150.0,
        "vrsp.3000.p50_ms": 1.0,
        "vrsp.3000.p99_ms": 4.0,
    },
    "spyglass": {"decode_rate": 400_000.0, "decode_ratio": 0.5, "lag_p50_ms": float("nan")},
    "serve": {"server_peer_ratio": 2.5, "client_peer_ratio": 0.6, "client_rate": 25_000.0},
}


def test_each_protocol_row_takes_its_figures_and_leaves_missing_cells_empty():
    rows = table.table_rows(FIGURES)
    assert list(rows) == [
        "VRPN", "VRPN trackers", "VRPN client", "XRP", "XRP burst", "UgCS", "VRSP", "SpyGlass",
        "gateway",
        "gateway 1k", "Zenoh", "Zenoh 100", "recorder", "rosbag2", "Foxglove", "ROS 2",
        "ROS 2 listen",
    ]  # fmt: skip
    assert rows["VRPN"] == {
        "load": "10 sensors at 1 kHz",
        "decode_rate": 2_500_000.0,
        "decode_ratio": 3.25,
        "ingest_rate": 299_000.0,
        "latency_p50_ms": 0.25,
        "latency_p99_ms": 1.5,
        "cpu_share": 0.12,
        "peer_ratio": 2.5,  # CPU per message over the mainline vrpn_server's
        "peer_target": "<=1",
        "peer_low": None,  # no spread figures: the module ran one round
        "peer_high": None,
    }
    assert rows["SpyGlass"]["peer_ratio"] == 0.5 and rows["SpyGlass"]["peer_target"] == ">=0.8"
    assert rows["UgCS"]["peer_ratio"] is None and rows["UgCS"]["peer_target"] == ">=0.6"
    assert rows["XRP"]["peer_target"] == ">=0.5"
    assert rows["VRSP"]["latency_p99_ms"] == 150.0
    assert rows["VRSP"]["decode_rate"] is None  # bench_vrsp did not run
    assert rows["SpyGlass"]["latency_p50_ms"] is None  # nan is "no figure", not a number
    assert all(v is None for k, v in rows["XRP"].items() if k not in ("load", "peer_target"))
    assert rows["VRPN client"]["ingest_rate"] == 25_000.0


def test_xrp_is_judged_as_a_live_robot_feeds_it_and_its_bursts_on_a_row_of_their_own():
    xrp = {
        "decode_single_rate": 200_000.0,  # one status a wake-up, what XrpSource meets live
        "decode_single_ratio": 0.08,
        "decode_single_ratio_low": 0.07,
        "decode_single_ratio_high": 0.09,
        "decode_rate": 3_000_000.0,  # wake-ups of 64: one StatusBatch each
        "decode_ratio": 1.2,
        "decode_ratio_low": 1.1,
        "decode_ratio_high": 1.3,
    }
    rows = table.table_rows({"xrp": xrp})
    live, burst = rows["XRP"], rows["XRP burst"]
    assert (live["decode_rate"], live["decode_ratio"]) == (200_000.0, 0.08)
    assert (live["peer_ratio"], live["peer_low"], live["peer_high"]) == (0.08, 0.07, 0.09)
    assert (burst["decode_rate"], burst["peer_ratio"], burst["peer_low"]) == (3e6, 1.2, 1.1)
    assert burst["load"] == "wake-ups of 64 statuses" and burst["peer_target"] == ">=0.5"
    text = table.render({"xrp": xrp})
    lines = {line.split("|")[1].strip(): line for line in text.splitlines()}
    assert "0.08x [0.07-0.09] (>=0.5) miss" in lines["XRP"]
    assert lines["XRP burst"].split("|")[-2].strip() == "1.20x [1.10-1.30] (>=0.5)"  # met


def test_the_text_table_has_one_line_per_protocol_in_readable_units():
    text = table.render(FIGURES)
    lines = text.splitlines()
    assert lines[0].split("|")[1].strip() == "protocol"
    assert [c.strip() for c in lines[0].split("|")[3:-1]] == [
        "decode/s", "x base", "ingest/s", "p50 ms", "p99 ms", "CPU", "vs peer",
    ]  # fmt: skip
    vrpn = [c.strip() for c in lines[2].split("|")[1:-1]]
    assert vrpn == [
        "VRPN", "10 sensors at 1 kHz", "2.5M", "3.25x", "299.0k", "0.2", "1.5", "12.0%",
        "2.50x (<=1) miss",
    ]  # fmt: skip
    client = [c.strip() for c in lines[4].split("|")[1:-1]]
    assert client[0] == "VRPN client" and client[-1] == "0.60x (<=1)"
    vrsp = [c.strip() for c in lines[8].split("|")[1:-1]]
    assert vrsp[2:] == ["-", "-", "-", "6.0", "150", "-", "-"]
    spyglass = [c.strip() for c in lines[9].split("|")[1:-1]]
    assert spyglass[-1] == "0.50x (>=0.8) miss"  # a missed target says so
    assert len(lines) == 2 + 17
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_a_peer_cell_with_rounds_shows_their_median_and_spread():
    figures = FIGURES | {
        "ugcs": {"decode_ratio": 0.64, "decode_ratio_low": 0.58, "decode_ratio_high": 0.7}
    }
    rows = table.table_rows(figures)
    assert (rows["UgCS"]["peer_low"], rows["UgCS"]["peer_high"]) == (0.58, 0.7)
    line = next(r for r in table.render(figures).splitlines() if r.startswith("| UgCS "))
    assert line.split("|")[-2].strip() == "0.64x [0.58-0.70] (>=0.6)"
    missed = figures | {"ugcs": {"decode_ratio": 0.5, "decode_ratio_low": 0.4}}
    line = next(r for r in table.render(missed).splitlines() if r.startswith("| UgCS "))
    assert line.split("|")[-2].strip() == "0.50x (>=0.6) miss"  # no spread without both ends


def test_the_json_document_names_commit_date_machine_and_every_figure():
    doc = table.document(
        FIGURES,
        commit="abc123",
        date="2026-11-23T15:00:00+00:00",
        machine_info={"cores": 2, "python": "3.11.2"},
        quick=True,
    )
    back = json.loads(json.dumps(doc))  # plain JSON, nothing lost
    assert back["schema"] == 1
    assert back["commit"] == "abc123"
    assert back["date"] == "2026-11-23T15:00:00+00:00"
    assert back["machine"] == {"cores": 2, "python": "3.11.2"}
    assert back["quick"] is True
    assert back["figures"]["vrpn"]["codec_rate"] == 9e6  # figures outside the table kept too
    assert back["table"]["VRPN"]["cpu_share"] == 0.12
    assert back["table"]["UgCS"]["decode_rate"] is None
    default = table.document({}, commit="x")
    assert default["machine"]["cores"] >= 1 and default["machine"]["python"].count(".") == 2


def test_compare_gives_new_over_old_for_each_figure_both_runs_have():
    old = {"figures": {"vrpn": {"decode_rate": 2e6, "gone": 1.0, "zero": 0.0}, "xrp": {"a": 1.0}}}
    new = {"figures": {"vrpn": {"decode_rate": 3e6, "zero": 5.0, "added": 1.0}, "ugcs": {}}}
    rows = table.compare(old, new)
    assert [r[0] for r in rows] == ["vrpn.decode_rate", "vrpn.zero"]
    assert rows[0][1:] == (2e6, 3e6, 1.5)
    assert math.isnan(rows[1][3])


def test_compare_from_the_command_line(tmp_path):
    a, b = tmp_path / "old.json", tmp_path / "new.json"
    a.write_text(json.dumps({"commit": "aaa", "figures": {"xrp": {"decode_rate": 40000.0}}}))
    b.write_text(json.dumps({"commit": "bbb", "figures": {"xrp": {"decode_rate": 50000.0}}}))
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--compare", str(a), str(b)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "old aaa" in out and "new bbb" in out
    line = next(line for line in out.splitlines() if line.startswith("xrp.decode_rate"))
    assert line.split()[1:] == ["4e+04", "5e+04", "1.25"]


def test_latency_curves_and_the_plot(tmp_path):
    curves = table.latency_curves(FIGURES)
    assert curves == {
        "vrpn": [(1000.0, 0.2, 0.9), (10000.0, 0.25, 1.5)],
        "vrsp": [(3000.0, 1.0, 4.0), (300000.0, 6.0, 150.0)],
    }
    path = tmp_path / "latency.png"
    assert table.plot(FIGURES, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not table.plot({"vrpn": {}}, tmp_path / "none.png")


def test_rounds_give_the_median_and_both_ends():
    from bench import rounds

    assert rounds.figures("r", [2.9, 2.4, 3.4]) == {"r": 2.9, "r_low": 2.4, "r_high": 3.4}
    assert rounds.text([2.9, 2.4, 3.4]) == "2.90x (2.40-3.40 over 3 runs)"
