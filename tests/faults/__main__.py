"""`python -m tests.faults proxy ...`: the fault proxy from the command line, between a peer
and robowire (or any two programs) on loopback. See `proxy --help`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections import Counter

from .plan import DatagramFaults, DatagramPlan, StreamPlan
from .proxy import Address, TcpProxy, UdpProxy

EXAMPLES = """examples:
  # VRSP through a lossy, reordering Wi-Fi: the sim sends to 7700, the gateway listens on 7701
  python -m tests.faults proxy --udp --listen 127.0.0.1:7700 --to 127.0.0.1:7701 \\
      --loss 10 --reorder 5 --duplicate 2 --seed 1
  robowire sim vrsp --to 127.0.0.1:7700 &  robowire listen vrsp://127.0.0.1:7701
  # VRPN over TCP cut (RST) every 5 s, stalled 3 s of every 10
  python -m tests.faults proxy --tcp --listen 127.0.0.1:3884 --to 127.0.0.1:3883 \\
      --cut-every 5 --cut rst
"""


def address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def percent(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"{text} is not a percentage (0-100)")
    return value / 100.0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m tests.faults")
    commands = top.add_subparsers(dest="command", required=True)
    p = commands.add_parser(
        "proxy",
        help="relay UDP or TCP on loopback, with faults",
        description="Relay datagrams or a byte stream from --listen to --to, doing the faults "
        "asked for (seeded: the same seed, the same faults), and print what it did.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--udp", action="store_true", help="relay datagrams")
    kind.add_argument("--tcp", action="store_true", help="relay TCP connections")
    p.add_argument("--listen", type=address, required=True, help="HOST:PORT to listen on")
    p.add_argument("--to", type=address, required=True, help="HOST:PORT to relay to")
    p.add_argument("--seed", type=int, default=0, help="the RNG's seed (default 0)")
    p.add_argument(
        "--both", action="store_true", help="UDP: faults both ways (default: towards --to)"
    )
    u = p.add_argument_group("datagram faults (UDP)")
    u.add_argument("--loss", type=percent, default=0.0, help="percent of datagrams lost")
    u.add_argument("--burst", type=int, default=0, help="datagrams lost in a row ...")
    u.add_argument("--burst-every", type=int, default=0, help="... every this many")
    u.add_argument("--duplicate", type=percent, default=0.0, help="percent sent twice")
    u.add_argument("--reorder", type=percent, default=0.0, help="percent held back ...")
    u.add_argument("--depth", type=int, default=8, help="... behind up to this many (8)")
    u.add_argument("--jitter", type=float, default=0.0, help="ms of random delay, at most")
    u.add_argument("--truncate", type=percent, default=0.0, help="percent cut short")
    u.add_argument("--flip", type=percent, default=0.0, help="percent with one bit flipped")
    t = p.add_argument_group("stream faults (TCP)")
    t.add_argument("--cut", choices=("rst", "fin"), default="rst", help="how a cut ends")
    t.add_argument("--cut-after", type=int, help="cut each connection after N bytes")
    t.add_argument("--cut-every", type=float, help="cut every connection every N seconds")
    t.add_argument("--stall-every", type=float, help="stop relaying every N seconds ...")
    t.add_argument("--stall-for", type=float, default=3.0, help="... for N seconds (3)")
    p.add_argument("--report", type=float, default=5.0, help="print counts every N s (5)")
    return top


def faults(args: argparse.Namespace) -> DatagramFaults:
    return DatagramFaults(
        loss=args.loss,
        burst=args.burst,
        burst_every=args.burst_every,
        duplicate=args.duplicate,
        reorder=args.reorder,
        reorder_depth=args.depth,
        jitter=args.jitter / 1000.0,
        truncate=args.truncate,
        flip=args.flip,
    )


def said(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())


async def run_udp(args: argparse.Namespace) -> None:
    up = DatagramPlan(faults(args), seed=args.seed)
    down = DatagramPlan(faults(args) if args.both else DatagramFaults(), seed=args.seed + 1)
    async with UdpProxy(args.to, up, down, listen=args.listen) as proxy:
        print(f"relaying UDP {proxy.address} -> {args.to}", flush=True)
        try:
            while True:
                await asyncio.sleep(args.report)
                print(f"up: {said(up.counts)} | down: {said(down.counts)}", flush=True)
        finally:
            print(f"up: {said(up.counts)} | down: {said(down.counts)}", flush=True)


async def run_tcp(args: argparse.Namespace) -> None:
    def plans() -> tuple[StreamPlan, StreamPlan]:
        return StreamPlan(args.cut_after, args.cut), StreamPlan(args.cut_after, args.cut)

    async with TcpProxy(args.to, listen=args.listen, plans=plans) as proxy:
        print(f"relaying TCP {proxy.address} -> {args.to}", flush=True)
        loop = asyncio.get_running_loop()
        start = next_report = loop.time()
        try:
            while True:
                await asyncio.sleep(0.05)
                now = loop.time() - start
                if args.cut_every and now // args.cut_every != (now - 0.05) // args.cut_every:
                    proxy.cut(args.cut)
                if args.stall_every:
                    stalled = now % args.stall_every >= args.stall_every - args.stall_for
                    for d in ("up", "down"):
                        (proxy.pause if stalled else proxy.resume)(d)  # type: ignore[arg-type]
                if loop.time() >= next_report + args.report:
                    next_report = loop.time()
                    print(said(proxy.counts), flush=True)
        finally:
            print(said(proxy.counts), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_udp(args) if args.udp else run_tcp(args))
    except OSError as exc:
        print(f"error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
