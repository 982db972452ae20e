"""Endpoints: one parsed address (a network URL or a file), and the one parser of the numbers
(single, lists and places on Earth) in its options and in `--set` settings.

Which protocol an address names is the registries' business: `robowire.addresses` parses
URLs, file names and protocols' own address forms (`parse_endpoint`) into an `Endpoint`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

from robowire.errors import ConfigError

Sign = Literal["any", "non-negative", "positive"]
Place = tuple[float, float, float]  # latitude deg, longitude deg, altitude m (WGS84)


def number(
    settings: Mapping[str, str],
    name: str,
    default: float,
    where: str,
    sign: Sign = "non-negative",
) -> float:
    """The finite number setting `name` (a URL option or `--set` key), `default` when not
    given, or a ConfigError saying `where: name must ...`. Seconds, speeds and rates are
    non-negative (the default); coordinates take `sign="any"`."""
    text = settings.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {name} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {name} must be finite, not {text!r}")
    if sign == "non-negative" and value < 0:
        raise ConfigError(f"{where}: {name} must not be negative, not {text!r}")
    if sign == "positive" and value <= 0:
        raise ConfigError(f"{where}: {name} must be positive, not {text!r}")
    return value


def numbers(text: str, name: str, where: str, counts: Collection[int] = ()) -> list[float]:
    """The comma-separated finite numbers of setting `name` (`scale=1,1,2`), as many as one of
    `counts` says (any number when empty), or a ConfigError saying `where: name must ...`."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"{where}: {name} must be numbers, not {text!r}") from None
    if not all(math.isfinite(value) for value in values):
        raise ConfigError(f"{where}: {name} must be finite, not {text!r}")
    if counts and len(values) not in counts:
        wanted = " or ".join(str(n) for n in sorted(counts))
        raise ConfigError(f"{where}: {name} takes {wanted} numbers, not {text!r}")
    return values


def place(text: str, name: str, where: str, *, altitude: float | None = None) -> Place:
    """A place on Earth, `LAT,LON,ALT` in degrees and metres (`LAT,LON` too when `altitude`
    gives the default), or a ConfigError saying `where: name must be ...`."""
    form = "LAT,LON,ALT" if altitude is None else "LAT,LON[,ALT]"
    try:
        values = numbers(text, name, where, (3,) if altitude is None else (2, 3))
    except ConfigError:
        values = []
    if not values or not (-90 <= values[0] <= 90 and -180 <= values[1] <= 180):
        raise ConfigError(f"{where}: {name} must be {form} in degrees and metres, not {text!r}")
    return (values[0], values[1], values[2] if len(values) == 3 else float(altitude or 0.0))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One parsed endpoint: a network address or a file, and the protocol that speaks it."""

    raw: str
    protocol: str
    scheme: str
    host: str = "127.0.0.1"
    port: int | None = None
    user: str | None = None  # the part before "@" (device names)
    host_given: bool = True  # False: the URL named no host (`xrp://`), `host` is the default
    path: str | None = None  # set for files; "-" is stdin
    options: dict[str, str] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        return self.path is not None

    def port_or(self, default: int) -> int:
        return default if self.port is None else self.port

    def option(self, name: str, default: str) -> str:
        return self.options.get(name, default)

    def float_option(self, name: str, default: float, sign: Sign = "non-negative") -> float:
        """A number option (seconds, a speed, a rate: `number`), or ConfigError."""
        return number(self.options, name, default, self.raw, sign)

    def check_options(self, known: Collection[str], role: str) -> None:
        """ConfigError naming the first option `role` does not know (a typo is never ignored)."""
        for name in self.options:
            if name not in known:
                allowed = ", ".join(sorted(known)) or "none"
                raise ConfigError(
                    f"{self.raw}: unknown option {name!r} for {role} (known: {allowed})"
                )

    def __str__(self) -> str:
        return self.raw


def split_host_port(
    text: str, default_port: int, default_host: str = "127.0.0.1", what: str = "--to"
) -> tuple[str, int]:
    """`HOST[:PORT]` (also `[v6]:PORT`, or `scheme://HOST[:PORT]`) -> (host, port), with the
    defaults for what is left out; ConfigError naming `what` for a bad port."""
    rest = text.split("://", 1)[-1].rstrip("/")
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port or ("::" in rest and not rest.startswith("[")):
        return rest.strip("[]") or default_host, default_port  # no port (or a bare IPv6)
    try:
        value = int(port)
    except ValueError:
        raise ConfigError(f"{what} {text}: the port must be a number") from None
    if not 0 < value < 65536:
        raise ConfigError(f"{what} {text}: the port must be 1..65535")
    return host.strip("[]") or default_host, value
