"""VRPN buttons, dials, analogs and text: print each press, release, turn and message.

robowire sim vrpn &                      # or a VRPN server with buttons (a wand, a game pad)
python examples/vrpn_buttons.py vrpn://Button0,Dial0,Analog0@127.0.0.1:3883 3
"""

import sys
import time

import robowire


def say(line: str) -> None:
    """One write per line: each kind of callback runs on its own thread, and print() writes
    a line and its newline apart, so lines from two threads could run together."""
    sys.stdout.write(line + "\n")


url = sys.argv[1] if len(sys.argv) > 1 else "vrpn://Button0,Dial0,Analog0@127.0.0.1:3883"
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
with robowire.connect(url) as live:
    live.on_button(lambda e: say(f"{e.name} button {e.button} {'down' if e.pressed else 'up'}"))
    live.on_dial(lambda e: say(f"{e.name} dial {e.dial} turned {e.delta:+.2f}"))
    live.on_analog(lambda e: say(f"{e.name} channels {[round(c, 2) for c in e.channels]}"))
    live.on_text(lambda e: say(f"{e.name} says ({e.level}): {e.text}"))
    time.sleep(seconds)
