"""A source's problems said once each (`listen BAG`, `listen ros2+zenoh://`): a log line and
the status's last drop, the first time; what was said is kept (`said`) for status and tests."""

from __future__ import annotations

import logging

from robowire.service import Source

log = logging.getLogger("robowire")


class Said:
    """Says each text once for `source`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.said: set[str] = set()

    def __call__(self, text: str) -> None:
        if text in self.said:
            return
        self.said.add(text)
        log.info("%s: %s", self.source.name, text)
        self.source.stats.last_drop_reason = text
