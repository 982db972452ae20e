"""Run atheris on one target per process (libFuzzer owns the process it runs in).

The parent writes each target's seeds (the real captures in tests/data/) into a corpus
directory, runs `python -m fuzz --child TARGET` for `--time` seconds, and copies every crash
libFuzzer writes into tests/data/fuzz/TARGET/, where the regression test in
tests/fuzz_suite replays it from then on. Exit status: 1 if any target crashed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fuzzing import CRASHES, TARGETS  # noqa: E402

WORK = ROOT / ".fuzz"  # corpora and libFuzzer's artifacts (git-ignored)


def cuts_for(data: bytes) -> list[int]:
    """A chunking derived from the input without consuming any of it (so the seeds stay the
    real captures): whole for a third of the lengths, else two cycled chunk sizes."""
    if len(data) % 3 == 0:
        return []
    return [1 + len(data) % 97, 1 + (len(data) // 97) % 13]


def child(name: str, seconds: int, corpus: Path, artifacts: Path) -> None:
    import atheris

    fuzz_target = TARGETS[name]
    with atheris.instrument_imports(include=["robowire"]):
        for seed in fuzz_target.seeds():  # imports (and so instruments) what the target uses
            fuzz_target.run(seed, [])

    def one(data: bytes) -> None:
        fuzz_target.run(data, cuts_for(data))

    argv = [
        sys.argv[0],
        str(corpus),
        f"-max_total_time={seconds}",
        "-rss_limit_mb=2048",
        "-timeout=20",
        "-max_len=65536",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
    ]
    atheris.Setup(argv, one)
    atheris.Fuzz()


def run(name: str, seconds: int) -> list[Path]:
    corpus = WORK / "corpus" / name
    artifacts = WORK / "artifacts" / name
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(TARGETS[name].seeds()):
        (corpus / f"seed-{i}").write_bytes(seed)
    before = set(artifacts.iterdir())
    start = time.monotonic()
    command = [sys.executable, "-m", "fuzz", "--child", name, "--time", str(seconds)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    stats = [line for line in result.stderr.splitlines() if line.startswith("stat::")]
    runs = next((line.split()[-1] for line in stats if "number_of_executed_units" in line), "?")
    crashes = sorted(set(artifacts.iterdir()) - before)
    saved = []
    for crash in crashes:
        dest = CRASHES / name / crash.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(crash, dest)
        saved.append(dest)
    status = "ok" if result.returncode == 0 else f"CRASH (exit {result.returncode})"
    print(f"{name:22} {status:18} {runs:>9} runs in {took:5.0f} s", flush=True)
    if result.returncode != 0:
        tail = [line for line in result.stderr.splitlines() if not line.startswith("#")]
        print("\n".join("    " + line for line in tail[-25:]), flush=True)
        for dest in saved:
            print(f"    saved {dest.relative_to(ROOT)} (replayed by tests/fuzz_suite)")
    return saved


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz",
        description="Coverage-guided fuzzing (atheris) of robowire's decoders and sessions.",
        epilog="example: python -m fuzz vrpn-session-client ugcs-codec --time 60",
    )
    parser.add_argument("targets", nargs="*", help="target names (see --list)")
    parser.add_argument("--all", action="store_true", help="every target, one after another")
    parser.add_argument("--list", action="store_true", help="print the targets and exit")
    parser.add_argument("--time", type=int, default=60, help="seconds per target (default 60)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        corpus = WORK / "corpus" / args.child
        child(args.child, args.time, corpus, WORK / "artifacts" / args.child)
        return 0
    if args.list:
        for name, fuzz_target in TARGETS.items():
            print(f"{name:22} {fuzz_target.kind:8} {fuzz_target.doc.splitlines()[0]}")
        return 0
    names = list(TARGETS) if args.all else args.targets
    unknown = [n for n in names if n not in TARGETS]
    if unknown or not names:
        parser.error(f"unknown target {unknown[0]}" if unknown else "name a target, or --all")
    crashed = 0
    for name in names:
        crashed += bool(run(name, args.time))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
