"""The one error tree of robowire.

    RobowireError
    ├── DecodeError      bytes that are not a valid message (protocol, offset, reason)
    ├── SessionError     a peer broke the session's rules (bad order, version mismatch, ...)
    │   └── LocalProtocolError  our side did: a send in a state that does not allow it
    ├── TransportError   a socket could not be opened, or a peer went away
    └── ConfigError      a bad URL, option or file given by the user

Codecs raise DecodeError only; sessions never raise on bad bytes (they count and drop), but a
send the session's state does not allow raises LocalProtocolError at once (h11's rule: a
silent no-op would hide the caller's bug; callers check the state first, or catch it);
the CLI turns any RobowireError into one line on stderr and a non-zero exit.
"""

from __future__ import annotations


class RobowireError(Exception):
    """Base of every error robowire raises on purpose."""


class DecodeError(RobowireError, ValueError):
    """Bytes that do not decode: which protocol, where in the input, and why."""

    def __init__(self, protocol: str, offset: int, reason: str) -> None:
        super().__init__(f"{protocol}: {reason} (at byte {offset})")
        self.protocol = protocol
        self.offset = offset
        self.reason = reason

    def shifted(self, by: int) -> DecodeError:
        """The same error with its offset moved by `by` bytes (for errors inside a larger input)."""
        return DecodeError(self.protocol, self.offset + by, self.reason)


class SessionError(RobowireError):
    """A peer broke the rules of the protocol's session."""


class LocalProtocolError(SessionError):
    """Our own side broke the session's rules: it asked `protocol`'s session to `action` in a
    `state` that does not allow it (e.g. send before the handshake). A bug in the caller,
    never caused by the peer's bytes."""

    def __init__(self, protocol: str, action: str, state: str) -> None:
        super().__init__(f"{protocol}: cannot {action} in state {state}")
        self.protocol = protocol
        self.action = action
        self.state = state


class TransportError(RobowireError, OSError):
    """A socket could not be opened or a connection failed."""


class ConfigError(RobowireError, ValueError):
    """A URL, option or file given by the user is not usable."""
