"""Run every benchmark module (`bench/bench_*.py`), or the ones named: `python -m bench udp`.

Each prints ratios measured side by side in one run: this machine is shared and noisy, so
absolute times mean little.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import bench


def main(names: list[str]) -> int:
    modules = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")
    )
    if names:
        modules = [m for m in modules if any(n in m for n in names)]
    failed = 0
    for name in modules:
        print(f"== {name.removeprefix('bench_')}", flush=True)
        start = time.perf_counter()
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception:  # one broken benchmark must not hide the others' figures
            failed += 1
            traceback.print_exc()
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
