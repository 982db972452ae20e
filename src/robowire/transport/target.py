"""A recording's file: whole records appended, and one clear error when it can grow no more.

A recorder (`record -o run.vrpn`, `run.rec`, a ROS 2 bag's MCAP) hands `FileTarget.write`
whole records (one or several at once). Each write goes to the file at once (no buffer of its
own: a process killed after a `write` has it on disk), whole or not at all: when the disk is
full (ENOSPC) or the file may not grow (EFBIG, `RLIMIT_FSIZE`), the part of it that went is
cut off again, so the file ends at its last whole record and any reader (the mainline VRPN
client playing a log, a SpyGlass player, an MCAP reader) reads it to that end without
meeting half a record. That first failure raises `TransportError` with the one line the
user sees; the file is closed then, and later writes do nothing (the error has been said).
"""

from __future__ import annotations

import contextlib
import os

from robowire.errors import ConfigError, TransportError


class FileTarget:
    """The file at `path`, created (or emptied) for whole records; `unit` names them in the
    error line ("record", "chunk"). It has what a writer of a stream needs (`write`, `tell`,
    `flush`, `close`), so the `mcap` package's `Writer` writes through it too."""

    def __init__(self, path: str, unit: str = "record") -> None:
        self.path = path
        self.unit = unit
        self.error: str | None = None  # why it can grow no more (said once, by `write`)
        self._size = 0  # bytes of whole records written
        try:
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror}") from None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append `data` (whole records) to the file, all of it or none."""
        fd = self._fd
        if fd is None:
            return 0
        view = memoryview(data)
        done = 0
        try:
            while done < len(view):
                done += os.write(fd, view[done:])
        except OSError as exc:
            self._fail(fd, exc)
        self._size += done
        return done

    def _fail(self, fd: int, exc: OSError) -> None:
        with contextlib.suppress(OSError):  # the part of the record that went: cut off again
            os.ftruncate(fd, self._size)
        self.close()
        self.error = (
            f"cannot write {self.path}: {exc.strerror or exc}; it holds what came before, up to"
            f" its last complete {self.unit}"
        )
        raise TransportError(self.error) from None

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        """(Every write is on disk already: nothing is buffered here.)"""

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
