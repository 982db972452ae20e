"""Who may use a gateway's HTTP endpoints: the Host and Origin allowlists and the token.

One check for every HTTP and WebSocket path robowire serves (the viewer's `/`, `/static/*`,
`/status` and `/ws`, and the `--status-port` endpoint). A server builds one `Gate` over its
`Access` and asks `gate.check(...)` for each request before anything else; a refusal is a
403 with one line of text, counted in the service's `stats.extra["refused"]` (the `refused`
column of `robowire status`), and logged once per Host or Origin.

* **Host** (every path; DNS rebinding): the name in the Host header must be `localhost`, a
  loopback address, the address the server is bound to (any IP address when bound to
  0.0.0.0 or ::), the name the server was started with, or a name given with
  `--allow-host`. An IP address cannot be rebound, so only names are at stake.
* **Origin** (`/ws`; cross-site WebSocket hijacking): a browser always sends Origin on a
  WebSocket handshake; it must be the page's own, `http(s)://` + the Host the request came
  to (which passed the Host check), or one given with `--allow-origin`. A request with no
  Origin is not from a web page (a script, a test, `websockets`' client) and passes: such a
  client runs as a user of this machine and could read the printed token anyway.
* **Token**: with `--allow-control` a random token (`secrets.token_urlsafe`) is made at
  start and printed in the viewer's URL (`?token=…`); `--token T` or `ROBOWIRE_TOKEN` sets it
  instead. A WebSocket opened with `/ws?token=T` may send commands; one without gets no
  command catalog and every command is refused. A token that was *set* (`--token`,
  `ROBOWIRE_TOKEN`) guards viewing too: `/status` and `/ws` need it (the page's own files,
  `/` and `/static/*`, are the same for everybody and carry no data). Tokens are compared
  with `hmac.compare_digest`.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from robowire.service import Service

log = logging.getLogger("robowire")

FORBIDDEN = 403
WRONG_HOST = "forbidden: the Host header names another site (robowire --allow-host NAME)\n"
WRONG_ORIGIN = "forbidden: a page from another site (robowire --allow-origin ORIGIN)\n"
NEEDS_TOKEN = "forbidden: the token printed at start is needed (?token=...)\n"
CONTROL_NEEDS_TOKEN = "control needs the token printed at start"
TOKEN_ENV = "ROBOWIRE_TOKEN"
REMEMBERED = 256  # distinct refused Hosts and Origins logged; beyond, only counted
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?")


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """What a gateway's HTTP endpoints allow (the CLI's --allow-host, --allow-origin,
    --token, --allow-control); the default allows this machine's own pages, no control."""

    hosts: frozenset[str] = frozenset()
    origins: frozenset[str] = frozenset()
    token: str | None = None
    view_needs_token: bool = False

    @classmethod
    def of(
        cls,
        hosts: tuple[str, ...] = (),
        origins: tuple[str, ...] = (),
        token: str | None = None,
        allow_control: bool = False,
    ) -> Access:
        """The access the options give: a token that was set guards viewing too; control
        alone makes a random one that guards control only."""
        made = secrets.token_urlsafe(32) if allow_control and token is None else None
        return cls(
            hosts=frozenset(h.lower() for h in hosts),
            origins=frozenset(_origin(o) for o in origins),
            token=token if token is not None else made,
            view_needs_token=token is not None,
        )

    def has_token(self, target: str) -> bool:
        """Whether the request target (`/ws?token=…`) carries this access's token."""
        if self.token is None:
            return False
        given = parse_qs(urlsplit(target).query).get("token", [])
        return len(given) == 1 and hmac.compare_digest(given[0].encode(), self.token.encode())


def _origin(text: str) -> str:
    return text.strip().rstrip("/").lower()


def _name(host: str) -> str | None:
    """The name in a Host header (lower case, no brackets, no port); None if malformed."""
    found = _HOST.fullmatch(host.strip())
    return found.group(1).strip("[]").lower() if found else None


@dataclass(slots=True)
class Gate:
    """Checks every request of one server (`service`, bound at `service.address`, started as
    `served_as`) against `access`; counts and logs its refusals."""

    service: Service
    access: Access = field(default_factory=Access)
    served_as: str = "127.0.0.1"
    _said: set[str] = field(default_factory=set, init=False, repr=False)

    def host_allowed(self, name: str) -> bool:
        if name == "localhost" or name in self.access.hosts or name == self.served_as.lower():
            return True
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            return False
        bound = self.service.address
        if ip.is_loopback or bound is None:
            return ip.is_loopback
        at = ipaddress.ip_address(bound[0])
        return ip == at or at.is_unspecified

    def check(
        self,
        target: str,
        hosts: list[str],
        origins: list[str],
        *,
        websocket: bool = False,
        data: bool = True,
    ) -> tuple[int, str] | None:
        """None if the request for `target` may go on; else (status, text) to answer it with.

        `hosts` and `origins` are every value of those headers (more than one: refused);
        `websocket`: a WebSocket handshake (its Origin is checked); `data`: what it asks for
        is the gateway's (not the page's own files), so a token set for viewing is needed."""
        name = _name(hosts[0]) if len(hosts) == 1 else None
        if name is None or not self.host_allowed(name):
            shown = " ".join(hosts) or "none"
            return self._refuse(f"Host {shown[:100]}: not this server's name", WRONG_HOST)
        if websocket and origins:
            origin = _origin(origins[0])
            own = {f"{scheme}://{hosts[0].strip().lower()}" for scheme in ("http", "https")}
            if len(origins) > 1 or (origin not in own and origin not in self.access.origins):
                shown = " ".join(origins)
                return self._refuse(f"Origin {shown[:100]}: a page of another site", WRONG_ORIGIN)
        if data and self.access.view_needs_token and not self.access.has_token(target):
            return self._refuse("no token, or a wrong one", NEEDS_TOKEN)
        return None

    def _refuse(self, why: str, text: str) -> tuple[int, str]:
        stats = self.service.stats
        stats.extra["refused"] = stats.extra.get("refused", 0) + 1
        if len(self._said) < REMEMBERED and why not in self._said:  # once per Host, Origin
            self._said.add(why)
            log.warning("%s: refused a request (%s)", self.service.name, why)
        return FORBIDDEN, text
