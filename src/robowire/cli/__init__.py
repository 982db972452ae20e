"""The `robowire` command, one module per group of commands:

    common   the main group, shared options, running a command, one-line errors
    live     demo, listen, sim, serve, bridge, up: gateways that run until stopped
    files    decode, record, replay
    tools    status, wireshark

Every command has --help with an example; every error is one line on stderr and a non-zero
exit; Ctrl-C ends a run cleanly. Protocol code is imported only when a command needs it.
Commands parse their arguments and hand them to the gateway (`robowire.gateway`), which
assembles what runs.
"""

from robowire.cli import files, live, tools
from robowire.cli.common import main

__all__ = ["files", "live", "main", "tools"]
