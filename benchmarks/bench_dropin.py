"""The drop-in's costs: per ``run()``, per session built, and ``ortplug exec``'s start-up.

    python benchmarks/bench_dropin.py [--rounds 9] [--calls 2000] [--model PATH]

* per call: ``onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])``
  against the drop-in with the same providers and with ``providers=None`` (ortplug's choice)
  on the demo model, ``run(None, feed)``, short blocks alternated, median per call (goal:
  the drop-in within 1.02x; its ``run`` is ONNX Runtime's own);
* per session built: the same two constructors, median wall time of a build (after one untimed
  build of each, so caches are warm: a user's later processes);
* start-up: ``python -c "import onnxruntime"`` plainly, under ``ortplug exec --`` (the whole
  command, ortplug's own start included), and with only the start-up hook on ``PYTHONPATH``
  (what every Python the program starts pays); fresh interpreters, interleaved, median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEMO = Path(__file__).resolve().parent.parent / "core" / "src" / "ortplug" / "data" / "demo.onnx"


def _feed(session: object) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feed = {}
    for spec in session.get_inputs():  # type: ignore[attr-defined]
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        feed[spec.name] = rng.random(shape, dtype=np.float32)
    return feed


def per_call(model: str, rounds: int, calls: int) -> dict[str, float]:
    """Median seconds per ``run`` of each session, interleaved round by round."""
    import onnxruntime as ort
    import ortplug

    sessions = {
        "onnxruntime": ort.InferenceSession(model, providers=["CPUExecutionProvider"]),
        "drop-in, same providers": ortplug.InferenceSession(
            model, providers=["CPUExecutionProvider"]
        ),
        "drop-in, ortplug's choice": ortplug.InferenceSession(model),
    }
    feed = _feed(sessions["onnxruntime"])
    for session in sessions.values():  # warm-up
        for _ in range(calls // 10):
            session.run(None, feed)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    block = max(calls // 20, 1)  # short blocks, alternated: a busy host's drift hits all alike
    for _ in range(rounds * 20):
        for name, session in sessions.items():
            run = session.run
            started = time.perf_counter()
            for _ in range(block):
                run(None, feed)
            times[name].append((time.perf_counter() - started) / block)
    return {name: statistics.median(values) for name, values in times.items()}


def per_build(model: str, rounds: int) -> tuple[float, float]:
    import onnxruntime as ort
    import ortplug

    builders: dict[str, Callable[[], object]] = {
        "onnxruntime": lambda: ort.InferenceSession(model, providers=["CPUExecutionProvider"]),
        "ortplug": lambda: ortplug.InferenceSession(model),
    }
    times: dict[str, list[float]] = {name: [] for name in builders}
    for build in builders.values():
        build()
    for _ in range(rounds):
        for name, build in builders.items():
            started = time.perf_counter()
            build()
            times[name].append(time.perf_counter() - started)
    return statistics.median(times["onnxruntime"]), statistics.median(times["ortplug"])


def start_up(rounds: int, model: str) -> dict[str, float]:
    """Median wall time of fresh interpreters: importing ONNX Runtime, and a first session."""
    from ortplug_dropin._exec import HOOK_DIR

    code = ["-c", "import onnxruntime"]
    first_ort = f"import onnxruntime as o; o.InferenceSession({model!r}, providers=['CPUExecutionProvider'])"
    first_ortplug = f"import ortplug; ortplug.InferenceSession({model!r})"
    path = os.pathsep.join(filter(None, (HOOK_DIR, os.environ.get("PYTHONPATH"))))
    hooked = {**os.environ, "PYTHONPATH": path}
    cases = {
        "plain": ([sys.executable, *code], dict(os.environ)),
        "ortplug exec": (
            [sys.executable, "-m", "ortplug.cli.main", "exec", "--", sys.executable, *code],
            dict(os.environ),
        ),
        "hook only": ([sys.executable, *code], hooked),
        "first session: onnxruntime": ([sys.executable, "-c", first_ort], dict(os.environ)),
        "first session: drop-in": ([sys.executable, "-c", first_ortplug], dict(os.environ)),
    }
    if os.environ.get("BENCH_ORTPLUG_SCRIPT"):  # the console script, as users type it
        script = os.environ["BENCH_ORTPLUG_SCRIPT"]
        cases["ortplug exec (script)"] = (
            [script, "exec", "--", sys.executable, *code],
            dict(os.environ),
        )
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds + 1):
        for name, (command, env) in cases.items():
            started = time.perf_counter()
            subprocess.run(command, env=env, check=True)
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values[1:]) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--model", default=str(DEMO))
    args = parser.parse_args()
    calls = per_call(args.model, args.rounds, args.calls)
    theirs = calls.pop("onnxruntime")
    print(f"per call     onnxruntime {theirs * 1e6:.2f} us")
    for name, ours in calls.items():
        print(f"             {name:26} {ours * 1e6:.2f} us   {ours / theirs:.3f}x")
    theirs, ours = per_build(args.model, args.rounds)
    print(
        f"per build    onnxruntime {theirs * 1e3:8.2f} ms   ortplug {ours * 1e3:8.2f} ms   "
        f"+{(ours - theirs) * 1e3:.2f} ms"
    )
    figures = start_up(args.rounds * 2, args.model)
    plain = figures.pop("plain")
    first = figures.pop("first session: onnxruntime")
    print(f"start-up     import onnxruntime {plain * 1e3:.1f} ms")
    for name, value in figures.items():
        base = first if name.startswith("first") else plain
        print(f"             {name:26} {value * 1e3:.1f} ms   {(value - base) * 1e3:+.1f} ms")
    print(f"             first session: onnxruntime {first * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
