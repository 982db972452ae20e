"""One log line per kind of fault at its first occurrence, then summaries: never a line per
lost datagram."""

from __future__ import annotations

import logging

import pytest

from robowire.sequence import FaultLog


def test_the_first_fault_of_a_kind_is_said_then_a_summary_a_minute_at_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    faults = FaultLog("vrsp@127.0.0.1:9742", logging.getLogger("robowire.test"))
    with caplog.at_level(logging.WARNING, logger="robowire.test"):
        for second in range(180):  # a loss a second for three minutes, no duplicates
            faults.update({"settled": second + 1, "duplicated": 0}, float(second))
    lines = caplog.messages
    assert lines[0] == (
        "vrsp@127.0.0.1:9742: 1 lost on the wire (the first; counted in its status, said "
        "again at most every 60 s)"
    )
    assert lines[1:] == [
        "vrsp@127.0.0.1:9742: 60 more lost on the wire in 60 s (61 in all)",
        "vrsp@127.0.0.1:9742: 60 more lost on the wire in 60 s (121 in all)",
    ]
