"""robowire's Wireshark plugin (`robowire.lua`, beside this module): where it is, the tshark
options that give UgCS payloads field names, and installing both for the user.

The plugin dissects VRPN, XRP, UgCS VSM, VRSP and SpyGlass (docs/wireshark.md). UgCS VSM
messages go through Wireshark's own protobuf dissector, which needs robowire's `.proto` files
on its search path: the folder holding the `robowire` package (the files import each other by
package path) and the proto folder itself (loaded at start).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().with_name("robowire.lua")
PACKAGE_PARENT = PLUGIN.parents[2]  # the folder holding robowire/ (site-packages or src/)
PROTO_DIR = PACKAGE_PARENT / "robowire" / "protocols" / "ugcs" / "proto"
UAT_FILE = "protobuf_search_paths"


def search_paths() -> list[tuple[Path, bool]]:
    """Protobuf search paths: (folder, load every .proto in it at start)."""
    return [(PACKAGE_PARENT, False), (PROTO_DIR, True)]


def tshark_options() -> list[str]:
    """`-o` options that put robowire's .proto files on tshark's protobuf search path."""
    options: list[str] = []
    for path, load in search_paths():
        options += ["-o", f'uat:protobuf_search_paths:"{path}","{str(load).upper()}"']
    return options


def plugin_folder() -> Path:
    """Wireshark's personal Lua plugin folder (Help > About Wireshark > Folders)."""
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / "Wireshark" / "plugins"
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def config_folder() -> Path:
    """Wireshark's personal configuration folder, where preference tables (UATs) live."""
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / "Wireshark"
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "wireshark"


def install(plugins: Path | None = None, config: Path | None = None) -> tuple[Path, Path]:
    """Copy the plugin into `plugins` and add the protobuf search paths to the UAT file in
    `config` (entries already there are kept). Returns both files' paths."""
    plugins = plugin_folder() if plugins is None else plugins
    config = config_folder() if config is None else config
    plugins.mkdir(parents=True, exist_ok=True)
    target = plugins / PLUGIN.name
    shutil.copyfile(PLUGIN, target)
    config.mkdir(parents=True, exist_ok=True)
    uat = config / UAT_FILE
    lines = uat.read_text().splitlines() if uat.exists() else []
    for path, load in search_paths():
        entry = f'"{path}","{str(load).upper()}"'
        if not any(line.startswith(f'"{path}",') for line in lines):
            lines.append(entry)
    uat.write_text("\n".join(lines) + "\n")
    return target, uat
