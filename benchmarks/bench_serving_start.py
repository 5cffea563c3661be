"""What a throughput build costs once its layout is recorded: against a latency build, fresh processes.

    python benchmarks/bench_serving_start.py [--rounds 5] [--models magika,...] [--against PYTHON]

Per model of ``bench_throughput.py``'s set (pip packages: ``pip install magika
rapidocr-onnxruntime nudenet``; the same one-row requests, as the checkpoint's samples), one
process makes the record (a first throughput build, which measures); then, in ``--rounds``
interleaved rounds (the order turning each round), a fresh process builds the model with the
latency hint and another with ``performance_hint="throughput"``, each timing
``OnnxBackend.from_checkpoint`` and its first result (the interpreter's start and ``import
ortplug`` are the same on both sides and left out; the serving add-on's import is in). Printed:
each side's median milliseconds and the ratio; the goal is a recorded throughput build at most
1.2x a latency build. ``--against`` runs the same processes with another interpreter (another
ortplug, e.g. the old main's venv) in the same rounds, for a before/after. The chain is
``--providers`` (default ``cpu``: the latency build the issue measured).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_throughput import installed_models

#: What each child process runs: one build, timed, then its first result; one JSON line.
_CHILD = """
import json, sys, time
import numpy as np
path, samples, hint, providers = sys.argv[1:5]
import attrs
from ortplug import LocalCheckpoint, OnnxBackend, ResolvedCheckpoint
checkpoint = LocalCheckpoint(path).resolve()
extra = {**checkpoint.metadata.extra, "samples": samples}
checkpoint = ResolvedCheckpoint(checkpoint.weights_path, attrs.evolve(checkpoint.metadata, extra=extra))
feed = {name: np.load(f"{samples}/{name}.npy") for name in checkpoint.metadata.input_names}
started = time.perf_counter()
backend = OnnxBackend.from_checkpoint(checkpoint, providers.split(","), performance_hint=hint)
built = time.perf_counter() - started
backend.run(feed)
first = time.perf_counter() - started
serving = backend.serving
print(json.dumps({"build_s": built, "first_s": first,
                  "source": None if serving is None else serving.source}))
backend.close()
"""

SIDES = ("latency", "throughput")


def _child(python: str, cache: Path, path: Path, samples: Path, hint: str, chain: str) -> dict:
    env = {**os.environ, "ORTPLUG_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [python, "-c", _CHILD, str(path), str(samples), hint, chain],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{python} {hint} build of {path} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--models", help="a comma-separated subset of the model names")
    parser.add_argument("--providers", default="cpu", help="the chain both builds ask for (cpu)")
    parser.add_argument("--against", help="another interpreter, run in the same rounds")
    args = parser.parse_args()
    pythons = {"this": sys.executable}
    if args.against:
        pythons["against"] = args.against
    work = Path(tempfile.mkdtemp(prefix="bench-serving-start-"))
    rng = np.random.default_rng(0)
    print(f"{os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} at the start")  # fmt: skip
    print(
        f"| {'model':<14} | python  | latency build ms | throughput build ms (recorded) | "
        "ratio | first result ratio |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for model, path in installed_models(args.models):
        samples = work / model.name.replace(" ", "_")
        samples.mkdir()
        for name, value in model.request(rng).items():
            np.save(samples / f"{name}.npy", value)
        times: dict[str, dict[str, list[dict]]] = {}
        for label, python in pythons.items():
            cache = work / f"cache-{label}"
            first = _child(python, cache, path, samples, "throughput", args.providers)
            if first["source"] is None or not first["source"].startswith("measured"):
                print(f"{model.name} ({label}): the first throughput build: {first['source']}")
            times[label] = {side: [] for side in SIDES}
        for index in range(args.rounds):
            for label, python in pythons.items():
                cache = work / f"cache-{label}"
                for side in SIDES[index % 2 :] + SIDES[: index % 2]:
                    ran = _child(python, cache, path, samples, side, args.providers)
                    times[label][side].append(ran)
        for label, sides in times.items():
            recorded = [r["source"] or "" for r in sides["throughput"]]
            if not all(source.startswith("recorded") for source in recorded):
                print(f"{model.name} ({label}): not every throughput build read the record")
            build = {s: statistics.median(r["build_s"] for r in sides[s]) for s in SIDES}
            first = {s: statistics.median(r["first_s"] for r in sides[s]) for s in SIDES}
            print(
                f"| {model.name:<14} | {label:<7} | {build['latency'] * 1e3:>16.1f} | "
                f"{build['throughput'] * 1e3:>30.1f} | "
                f"{build['throughput'] / build['latency']:>4.2f}x | "
                f"{first['throughput'] / first['latency']:>17.2f}x |"
            )
    print(f"load average {', '.join(f'{v:.2f}' for v in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
