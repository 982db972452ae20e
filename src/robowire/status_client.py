"""`robowire status`: read a running gateway's `GET /status` and show it.

A gateway answers `/status` on its web viewer's port (`serve http://…`, `demo`) or on the port
its command was given with `--status-port P`. The answer is `robowire.status.status_message`.
A gateway started with `--token T` wants it: `?token=T` on the URL, or `ROBOWIRE_TOKEN=T`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit

from rich.table import Table

from robowire.access import TOKEN_ENV
from robowire.errors import ConfigError, TransportError
from robowire.timebase import RATE_TOLERANCE

DEFAULT_URL = "http://127.0.0.1:8080"
TIMEOUT = 3.0
COLUMNS = (
    "name", "role", "state", "address", "devices", "messages", "rate", "errors", "dropped",
    "refused", "shed",
)  # fmt: skip
WIRE = {"lost": "lost", "duplicated": "dup", "reordered": "reord", "reconnected": "reconn"}
STATE_STYLES = {
    "connected": "green",
    "listening": "green",
    "waiting": "yellow",
    "failed": "bold red",
    "finished": "dim",
}


def status_url(text: str) -> str:
    """`HOST:PORT`, `http://HOST:PORT[/]` or a URL ending in /status -> the /status URL (its
    `?token=`, or else `ROBOWIRE_TOKEN`'s, kept)."""
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{text}: expected http://HOST:PORT (a viewer or --status-port)")
    try:
        _ = parts.port  # raises on a bad port
    except ValueError:
        raise ConfigError(f"{text}: bad port") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/status"):
        path += "/status"
    query = parts.query
    if not query and os.environ.get(TOKEN_ENV):
        query = f"token={quote(os.environ[TOKEN_ENV], safe='')}"
    return f"{parts.scheme}://{parts.netloc}{path}" + (f"?{query}" if query else "")


def fetch_status(url: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    """The status message at `url` (a /status URL); TransportError (one line) otherwise."""
    shown = url.split("?")[0]  # a token is not repeated on the screen
    try:
        # a gateway is asked directly (no proxy from the environment: it is usually local)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=timeout) as response:
            body = response.read(16 << 20)
    except urllib.error.HTTPError as exc:
        said = exc.read(200).decode(errors="replace").strip() if exc.code == 403 else ""
        said = said.removeprefix("forbidden: ")
        why = said or "not a robowire gateway?"
        raise TransportError(f"{shown}: {exc.code} {exc.reason} ({why})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        reason = getattr(reason, "strerror", None) or str(reason)
        raise TransportError(f"cannot reach a gateway at {shown}: {reason}") from None
    try:
        message = json.loads(body)
    except ValueError:
        raise TransportError(f"{shown}: the answer is not JSON (not a robowire gateway?)") from None
    if not isinstance(message, dict) or not isinstance(message.get("services"), list):
        raise TransportError(f"{shown}: the answer has no services (not a robowire gateway?)")
    return message


def status_table(message: dict[str, Any], url: str = "") -> Table:
    """Every service of a status message, one row each."""
    title = f"robowire status {url.split('?')[0]}".strip()
    table = Table(title=title, title_justify="left")
    for column in COLUMNS:
        numeric = column not in ("name", "role", "state", "address")
        table.add_column(
            "rate/s" if column == "rate" else column, justify="right" if numeric else "left"
        )
    table.add_column("clock", justify="right")  # the sender's clock minus ours
    table.add_column("wire", overflow="fold")  # lost, duplicated, reordered, reconnected
    table.add_column("last drop", overflow="fold")
    for service in message["services"]:
        state = str(service.get("state", "?"))
        cells = [
            str(service.get("name", "?"))
            + (f" (worker {service['worker']})" if service.get("worker") else ""),
            str(service.get("role", "?")),
            f"[{STATE_STYLES.get(state, 'white')}]{state}[/]",
            str(service.get("address") or "-"),
            f"{service.get('devices', 0):,}",
            f"{service.get('messages', 0):,}",
            f"{float(service.get('rate', 0.0)):,.1f}",
            f"{service.get('errors', 0):,}",
            f"{service.get('dropped', 0):,}",
            f"{service.get('refused', 0):,}",
            f"{service.get('shed', 0):,}",
            _offset(service.get("clock_offset"), service.get("clock_rate")),
            _wire(service),
            str(service.get("last_drop") or ""),
        ]
        table.add_row(*cells)
    return table


def _wire(service: dict[str, Any]) -> str:
    """A source's wire accounting, the counts that are not 0 ("lost 3, dup 1"), else empty."""
    return ", ".join(f"{short} {service[k]:,}" for k, short in WIRE.items() if service.get(k))


def _offset(seconds: object, rate: object = None) -> str:
    """A clock offset in milliseconds, signed; `-` when unknown; and the sender clock's rate
    when it is broken (`robowire.timebase.RATE_TOLERANCE`)."""
    if not isinstance(seconds, int | float):
        return "-"
    said = f"{seconds * 1e3:+,.0f} ms"
    if isinstance(rate, int | float) and abs(rate - 1.0) > RATE_TOLERANCE:
        said += f", its clock runs at {rate:+.2f}x"
    return said
