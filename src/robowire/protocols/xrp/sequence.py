"""The WPILib side's rule for the robot's sequence numbers, and what a listener adds: a robot
that rebooted is recognised, sans I/O. Kept apart from the decoding (`session_wpilib` asks
`accept(seq, now)` once per status).

WPILib (W `XRP::HandleXRPUpdate`) drops a status whose seq is not newer than the last accepted
one, except across the wrap (last > 65532 and seq < 3), and never resets `last`: a robot that
reboots (its seq starts again at 0) is ignored until its seq passes the old one (issue 37: 7 s
of a frozen robot; the fact sheet's run `reboot`: 4.3 s). That rule stays where a program
drives the robot as WPILib would (`reboots=False`, the `XrpClient`).

With `reboots=True` (the gateway's source and a capture's replay) a reboot is a restart of the
sequence: two statuses in a row that WPILib would drop, the second just after the first
(1..`RESTART_STEP` later), both among a new session's first `RESTART_GAP` numbers (a reboot
starts at 0), and either far behind the last accepted one (more than `RESTART_GAP`, farther
than any reordering) or after the robot was silent for `RESTART_SILENCE` seconds (its own
watchdog's time: a robot that rebooted soon after booting). The second is accepted as the
new session's first (`restarted` says so), the first is counted as received. A single stale,
duplicate or reordered status is still dropped, as WPILib does.

A listener also takes a leap ahead of more than `LEAP` statuses only once the next status
follows it: one status whose number was damaged (no checksum of XRP's own guards it) would
otherwise make every status after it stale, for up to 55 minutes.

`counts` is the loss, duplicate and reordering accounting of the robot's statuses
(`robowire.sequence`); a reboot restarts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robowire.sequence import SequenceCounts

CLIENT_WRAP_WINDOW = 3  # client accepts seq < 3 after last > 65532
RESTART_GAP = 64  # statuses: 3.2 s of a robot's 20 Hz, far more than any reordering
RESTART_STEP = 8  # the second status of a restart follows the first within this many
RESTART_SILENCE = 0.5  # s: the robot's watchdog
LEAP = 1024  # statuses (51 s of a robot): a leap ahead this far is taken once one follows it


def client_accepts(seq: int, last: int) -> bool:
    """WPILib's rule (W `XRP::HandleXRPUpdate`)."""
    if seq > last:
        return True
    return 0xFFFF - last < CLIENT_WRAP_WINDOW and seq < CLIENT_WRAP_WINDOW


@dataclass(slots=True)
class StatusSequence:
    """The robot's sequence as the WPILib side takes it (see the module docstring)."""

    reboots: bool = True
    last: int = 0
    heard: float | None = None  # when the last status was accepted
    restarts: int = 0
    restarted: bool = False  # the last status accepted began a new session
    counts: SequenceCounts = field(default_factory=SequenceCounts)
    _candidate: int | None = None
    _leap: int | None = None  # a status far ahead, not yet followed

    def accept(self, seq: int, now: float) -> bool:
        """Whether the status numbered `seq`, received at `now`, is taken in."""
        self.restarted = False
        if client_accepts(seq, self.last):
            if self.reboots and self.heard is not None and (seq - self.last) & 0xFFFF > LEAP:
                leap, self._leap = self._leap, seq  # taken once the next one follows it
                if leap is None or not 0 < (seq - leap) & 0xFFFF <= RESTART_STEP:
                    self.counts.see(seq)
                    return False
            self.counts.see(seq)
            self.last, self.heard, self._candidate, self._leap = seq, now, None, None
            return True
        self.counts.see(seq)
        if not self.reboots:
            return False
        behind = (self.last - seq) & 0xFFFF
        silent = self.heard is None or now - self.heard >= RESTART_SILENCE
        candidate, self._candidate = self._candidate, None
        if seq < RESTART_GAP and (behind > RESTART_GAP or silent):
            if candidate is not None and 0 < (seq - candidate) & 0xFFFF <= RESTART_STEP:
                self.counts.restart()  # the new session's numbers, from its first we saw
                self.counts.see(candidate)
                self.counts.see(seq)
                self.last, self.heard = seq, now
                self.restarts += 1
                self.restarted = True
                return True
            self._candidate = seq
        return False

    def accept_run(self, first: int, count: int, now: float) -> bool:
        """Statuses `first`, `first` + 1, ... (`count` of them, mod 2^16, in order), received at
        `now`, taken in at once when each is the one after the last accepted (WPILib takes each,
        none restarts anything), exactly as `accept` would take them one by one; False, and
        nothing taken, when the first is not the one after the last (use `accept`)."""
        if (first - self.last) & 0xFFFF != 1 or not self.counts.see_run(first, count):
            return False
        self.restarted = False
        self.last, self.heard = (first + count - 1) & 0xFFFF, now
        self._candidate = self._leap = None
        return True
