"""Site files: `robowire up -c site.toml` (TOML -> checked dataclasses -> services).

The format is described in docs/config.md. Every problem is one `ConfigError` line naming the
file and the key path, `site.toml: sink[2].transform.scale: must be a positive number`
(tables numbered from 1), found before anything starts. Strings may use `${VAR}` or
`${VAR:-default}` (environment variables), so one file can serve several machines or tests.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError, RobowireError
from robowire.projection import Rules, Transform, yaw_quaternion
from robowire.service import SimOptions
from robowire.timebase import TIME_MODES


@dataclass(frozen=True, slots=True)
class SourceConfig:
    url: str
    name: str | None = None
    time: str | None = None
    worker: str | None = None  # the worker process that runs it (None: the gateway itself)


@dataclass(frozen=True, slots=True)
class SinkConfig:
    url: str  # for a recorder, its file (`record = "run.mcap"`)
    rules: Rules = field(default_factory=Rules)
    rate: float | None = None
    worker: str | None = None
    record: bool = False  # `url` is an MCAP file to record into


@dataclass(frozen=True, slots=True)
class Workers:
    """The `[workers]` table: where the gateway and its worker processes meet."""

    bus: str  # a zenoh:// URL: the gateway listens there, its workers connect
    remote: tuple[str, ...] = ()  # workers started elsewhere (another machine), not spawned


@dataclass(frozen=True, slots=True)
class SimConfig:
    protocol: str
    options: SimOptions


@dataclass(frozen=True, slots=True)
class Site:
    """A checked site file."""

    path: str
    sources: tuple[SourceConfig, ...]
    sinks: tuple[SinkConfig, ...]
    sims: tuple[SimConfig, ...]
    workers: Workers | None = None

    @property
    def worker_names(self) -> tuple[str, ...]:
        """Every worker a source or sink names, in the order they first appear."""
        named = [c.worker for c in self.sources] + [c.worker for c in self.sinks]
        return tuple(dict.fromkeys(n for n in named if n is not None))


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Checker:
    """Reads one table, naming the key path in every error."""

    def __init__(self, file: str, where: str, table: Any, env: Mapping[str, str]) -> None:
        self.file, self.where, self.env = file, where, env
        if not isinstance(table, dict):
            self.fail("", "must be a table")
        self.table: dict[str, Any] = table

    def fail(self, key: str, message: str) -> NoReturn:
        path = f"{self.where}.{key}" if key else self.where
        raise ConfigError(f"{self.file}: {path}: {message}")

    def only(self, known: set[str]) -> None:
        for key in self.table:
            if key not in known:
                self.fail(key, f"unknown key (known: {', '.join(sorted(known))})")

    def expand(self, key: str, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = self.env.get(name, default)
            if found is None:
                self.fail(key, f"${{{name}}} is not set")
            return str(found)

        return _VAR.sub(value, text)

    def string(self, key: str, *, required: bool = False) -> str | None:
        value = self.table.get(key)
        if value is None:
            if required:
                self.fail(key, "is required")
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(key, "must be a non-empty string")
        return self.expand(key, value)

    def number(self, key: str, *, positive: bool = False) -> float | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(self.expand(key, value))
            except ValueError:
                value = None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, "must be a positive number" if positive else "must be a number")
        if not math.isfinite(value) or (positive and value <= 0):
            self.fail(key, "must be a positive number" if positive else "must be finite")
        return float(value)

    def integer(self, key: str, low: int, high: int) -> int | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            text = self.expand(key, value)
            value = int(text) if text.strip().isdigit() else None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(key, f"must be a whole number from {low} to {high}")
        return value

    def vector(self, key: str, size: int) -> tuple[float, ...] | None:
        value = self.table.get(key)
        if value is None:
            return None
        ok = isinstance(value, list) and len(value) == size
        ok = ok and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
        if not ok:
            self.fail(key, f"must be a list of {size} numbers")
        return tuple(float(v) for v in value)

    def globs(self, key: str, *, empty: bool = False) -> tuple[str, ...] | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not (value or empty):
            self.fail(key, "must be a list of name patterns")
        for pattern in value:
            if not isinstance(pattern, str) or not pattern:
                self.fail(key, "must be a list of non-empty name patterns")
            if pattern.count("[") != pattern.count("]"):
                self.fail(key, f"bad pattern {pattern!r}: unbalanced [ ]")
        return tuple(self.expand(key, p) for p in value)

    def boolean(self, key: str) -> bool | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, bool):
            self.fail(key, "must be true or false")
        return value

    def sub(self, key: str) -> _Checker | None:
        value = self.table.get(key)
        if value is None:
            return None
        return _Checker(self.file, f"{self.where}.{key}", value, self.env)


def _url(check: _Checker, key: str) -> str:

    url = check.string(key, required=True)
    assert url is not None
    try:
        parse_endpoint(url)
    except RobowireError as exc:
        check.fail(key, str(exc))
    return url


_WORKER_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _worker(check: _Checker) -> str | None:
    name = check.string("worker")
    if name is not None and not _WORKER_NAME.fullmatch(name):
        check.fail("worker", "must be a name of letters, digits, '_', '.' or '-'")
    return name


def _source(check: _Checker) -> SourceConfig:
    check.only({"url", "name", "time", "worker"})
    url = _url(check, "url")
    time = check.string("time")
    if time is not None and time not in TIME_MODES:
        check.fail("time", f"must be one of {', '.join(TIME_MODES)}")
    return SourceConfig(url, check.string("name"), time, _worker(check))


def _transform(check: _Checker) -> Transform:
    check.only({"offset", "rotation", "yaw_deg", "scale", "origin"})
    rotation = check.vector("rotation", 4)
    yaw = check.number("yaw_deg")
    if rotation is not None and yaw is not None:
        check.fail("yaw_deg", "give rotation or yaw_deg, not both")
    quaternion = (1.0, 0.0, 0.0, 0.0)
    if rotation is not None:
        norm = math.sqrt(sum(v * v for v in rotation))
        if norm < 1e-9:
            check.fail("rotation", "must be a non-zero quaternion [w, x, y, z]")
        w, x, y, z = (v / norm for v in rotation)
        quaternion = (w, x, y, z)
    elif yaw is not None:
        quaternion = yaw_quaternion(yaw)
    origin = check.vector("origin", 3)
    if origin is not None:
        if not -90 <= origin[0] <= 90:
            check.fail("origin", "latitude must be from -90 to 90 degrees")
        if not -180 <= origin[1] <= 180:
            check.fail("origin", "longitude must be from -180 to 180 degrees")
    offset = check.vector("offset", 3) or (0.0, 0.0, 0.0)
    scale = check.number("scale", positive=True)
    return Transform(
        offset=(offset[0], offset[1], offset[2]),
        rotation=quaternion,
        scale=1.0 if scale is None else scale,
        origin=None if origin is None else (origin[0], origin[1], origin[2]),
    )


def _sink(check: _Checker) -> SinkConfig:
    known = {"url", "sources", "devices", "kinds", "fields", "pose", "rate", "device_rate"}
    check.only(known | {"rename", "transform", "worker", "record"})
    record = check.string("record")
    if record is not None and "url" in check.table:
        check.fail("record", "give url or record, not both")
    if record is not None and not record.lower().endswith(".mcap"):
        check.fail("record", "must be an .mcap file")
    url = record if record is not None else _url(check, "url")
    rename: dict[str, str] = {}
    renames = check.sub("rename")
    if renames is not None:
        for device, new in renames.table.items():
            if not isinstance(new, str) or not new:
                renames.fail(device, "must be a non-empty string (the new device id)")
            rename[device] = new
        if len(set(rename.values())) < len(rename):
            check.fail("rename", "two devices renamed to the same id")
    transform = check.sub("transform")
    pose = check.boolean("pose")
    rules = Rules(
        sources=check.globs("sources") or (),
        devices=check.globs("devices") or (),
        kinds=check.globs("kinds") or (),
        fields=check.globs("fields", empty=True),
        pose=True if pose is None else pose,
        device_rate=check.number("device_rate", positive=True),
        rename=rename,
        transform=None if transform is None else _transform(transform),
    )
    rate = check.number("rate", positive=True)
    return SinkConfig(url, rules, rate, _worker(check), record is not None)


def _workers(check: _Checker, named: tuple[str, ...]) -> Workers:
    check.only({"bus", "remote"})
    bus = _url(check, "bus")
    if not bus.startswith("zenoh://"):
        check.fail("bus", "must be a zenoh://HOST:PORT URL")
    remote = check.globs("remote", empty=True) or ()
    for name in remote:
        if name not in named:
            check.fail("remote", f"{name!r} is not a worker of any source or sink")
    return Workers(bus, remote)


def _sim(check: _Checker) -> SimConfig:
    check.only({"protocol", "host", "port", "count", "rate", "seed", "to", "settings"})
    protocol = check.string("protocol", required=True)
    assert protocol is not None
    settings: dict[str, str] = {}
    extra = check.sub("settings")
    if extra is not None:
        for key, value in extra.table.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                extra.fail(key, "must be a string or a number")
            settings[key] = extra.expand(key, str(value))
    count = check.integer("count", 1, 10_000_000)
    seed = check.integer("seed", 0, 2**32 - 1)
    options = SimOptions(
        host=check.string("host") or "127.0.0.1",
        port=check.integer("port", 0, 65535),
        count=count,
        rate=check.number("rate", positive=True),
        seed=0 if seed is None else seed,
        target=check.string("to"),
        options=settings,
    )
    return SimConfig(protocol.lower(), options)


def _tables(file: str, document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"{file}: {key}: must be an array of tables ([[{key}]])")
    return value


def parse(text: str, file: str = "site.toml", env: Mapping[str, str] | None = None) -> Site:
    """Check a site file's text; raises ConfigError (one line) at the first problem."""
    environment = os.environ if env is None else env
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    for key in document:
        if key not in ("source", "sink", "sim", "workers"):
            raise ConfigError(f"{file}: {key}: unknown key (known: sim, sink, source, workers)")

    def each(key: str) -> list[_Checker]:
        return [
            _Checker(file, f"{key}[{i}]", table, environment)
            for i, table in enumerate(_tables(file, document, key), 1)
        ]

    sources = tuple(_source(c) for c in each("source"))
    sinks = tuple(_sink(c) for c in each("sink"))
    sims = tuple(_sim(c) for c in each("sim"))
    if not sources:
        raise ConfigError(f"{file}: source: at least one [[source]] is needed")
    if not sinks:
        raise ConfigError(f"{file}: sink: at least one [[sink]] is needed")
    seen: set[str] = set()
    for i, source in enumerate(sources, 1):
        if source.name is not None and source.name in seen:
            raise ConfigError(f"{file}: source[{i}].name: {source.name!r} is used twice")
        seen.add(source.name or "")
    site = Site(file, sources, sinks, sims)
    table = document.get("workers")
    if table is None:
        if site.worker_names:
            raise ConfigError(f"{file}: workers: a [workers] table with a bus is needed")
        return site
    workers = _workers(_Checker(file, "workers", table, environment), site.worker_names)
    return Site(file, sources, sinks, sims, workers)


def load(path: str | Path, env: Mapping[str, str] | None = None) -> Site:
    """Read and check a site file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse(text, file.name, env)


def with_time(where: str, url: str, time: str) -> str:
    """The source URL with the `time` option every source takes (`?time=`)."""

    endpoint = parse_endpoint(url)
    if endpoint.option("time", time) != time:
        raise ConfigError(f"{where}.time: the URL says time={endpoint.option('time', '')}")
    if "time" in endpoint.options:
        return url
    return f"{url}{'&' if '?' in url else '?'}time={time}"
