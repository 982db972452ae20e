"""`python -m robowire.cli`: the `robowire` command."""

from robowire.cli import main

main(prog_name="robowire")
