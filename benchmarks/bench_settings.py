"""What following the environment costs: ``settings()`` now against the read-once value it was.

    python benchmarks/bench_settings.py [--rounds 31] [--builds 50]

``ortplug.settings.settings()`` compares ``os.environ`` with the copy its last read was made
from, and parses again only when they differ (issue 37, item 8); before, it parsed once per
process and kept the value. Printed, each measured in this run:

1. one call: ``settings()`` against the read-once function (a lock and a list, as it was);
2. how many times a cached build of the tiny model (``OnnxBackend.from_checkpoint``) reads the
   settings, counted by wrapping the function where ortplug's modules hold it;
3. the cached build's time with ``settings()`` against the same build with the read-once
   function put in its place, interleaved in rounds (median ratio; about 1.00 is no cost), and the cost the
   call count times the per-call difference makes;
4. one call right after another variable changed (the parse that change costs, once).
"""

from __future__ import annotations

import _thread
import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import ortplug.settings as settings_module
from bench_backend import tiny_model
from ortplug import LocalCheckpoint, OnnxBackend, PluginHost
from ortplug.settings import Settings

SettingsFn = Callable[[], Settings]


def read_once() -> SettingsFn:
    """The function as it was before: ``os.environ`` parsed at the first call, then kept."""
    lock = _thread.allocate_lock()
    current: list[Settings] = []

    def settings() -> Settings:
        with lock:
            if not current:
                current.append(Settings.from_environ(os.environ, strict=False))
            return current[0]

    return settings


@contextmanager
def in_place_of_settings(replacement: SettingsFn) -> Iterator[None]:
    """Put ``replacement`` wherever an ortplug module holds ``settings`` (and in the module
    itself, for the imports made inside functions); put the real one back after."""
    real = settings_module.settings
    holders = [m for n, m in list(sys.modules.items())
               if n.startswith("ortplug") and getattr(m, "settings", None) is real]  # fmt: skip
    for module in holders:
        module.settings = replacement  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in holders:
            module.settings = real  # type: ignore[attr-defined]


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--builds", type=int, default=50)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {len(os.environ)} environment variables")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ORTPLUG_CACHE_DIR"] = str(Path(tmp) / "cache")
        checkpoint = LocalCheckpoint(tiny_model(Path(tmp) / "tiny.onnx")).resolve()
        plugins = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
        OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)  # probe the host once
        old, new = read_once(), settings_module.settings
        old(), new()

        calls = [(per_call_us(new, 20000), per_call_us(old, 20000)) for _ in range(args.rounds)]
        print("\n1. one settings() call, unchanged environment (median of rounds)")
        print(f"  following the environment {statistics.median(c[0] for c in calls):8.3f} us")
        print(f"  read once (before)        {statistics.median(c[1] for c in calls):8.3f} us")

        counted = [0]

        def counting() -> Settings:
            counted[0] += 1
            return new()

        with in_place_of_settings(counting):
            OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
        print(f"\n2. settings() calls per cached build: {counted[0]}")

        def builds_ms(fn: SettingsFn) -> float:
            with in_place_of_settings(fn):
                start = time.perf_counter()
                for _ in range(args.builds):
                    OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
                return (time.perf_counter() - start) / args.builds * 1e3

        ratios, times = [], []
        for r in range(args.rounds):
            if r % 2:  # the order alternates round by round
                now, before = builds_ms(new), builds_ms(old)
            else:
                before, now = builds_ms(old), builds_ms(new)
            ratios.append(now / before)
            times.append((now, before))
        print(f"\n3. cached build of the tiny model ({args.rounds} rounds x {args.builds} builds)")
        print(f"  following the environment {statistics.median(t[0] for t in times):8.3f} ms")
        print(f"  read once (before)        {statistics.median(t[1] for t in times):8.3f} ms")
        print(f"  ratio now / before        {statistics.median(ratios):8.3f}"
              f"  (per-round min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
        extra = counted[0] * (statistics.median(c[0] - c[1] for c in calls))
        share = extra / 1e3 / statistics.median(t[1] for t in times)
        print(f"  calls x per-call difference: {extra:.2f} us per build ({share:.3%} of one)")

        changed = []
        for i in range(200):
            os.environ["BENCH_SETTINGS_OTHER"] = str(i)
            start = time.perf_counter()
            new()
            changed.append((time.perf_counter() - start) * 1e6)
        del os.environ["BENCH_SETTINGS_OTHER"]
        print("\n4. one settings() call right after a variable changed (parsed again)")
        print(f"  {statistics.median(changed):8.3f} us")


if __name__ == "__main__":
    main()
