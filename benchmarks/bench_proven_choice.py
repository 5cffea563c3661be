"""What the proven choice costs: a model's first build with verification and measurement, and later builds.

    ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1 python benchmarks/bench_proven_choice.py [--reps 3]

Per model of a small real set (an MLP built with ``onnx.helper`` and the light
models shipped inside the ``onnx`` package), each build in a fresh process, the
median of ``--reps`` processes, as a ratio to a plain build (``verify=False``:
the policy's choice built, nothing checked or timed, a fresh cache):

* ``verified``  — first build, verification only (``measure=False``), fresh cache;
* ``proven``    — first build, verification and measurement (the default), fresh cache;
* ``second``    — a later process, on the cache the proven first build left (the verdict
  and the measured winner are recorded: the winner is built directly).

The plugin set is named (``ORTPLUG_PLUGINS``, default ``cpu,webgpu``) so the numbers
do not depend on what else is installed; with no accelerator offered the proven
choice has nothing to prove and every ratio is about 1. ``chosen`` is what serves.
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
import onnx
from onnx import TensorProto, helper, numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODES = ("plain", "verified", "proven", "second")

_CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from ortplug import LocalCheckpoint, OnnxBackend
mode, model = sys.argv[1], sys.argv[2]
kwargs = {"plain": {"verify": False}, "verified": {"measure": False}}.get(mode, {})
checkpoint = LocalCheckpoint(model).resolve()
started = time.perf_counter()
backend = OnnxBackend.from_checkpoint(checkpoint, **kwargs)
ms = (time.perf_counter() - started) * 1e3
print(json.dumps({"ms": ms, "chosen": [k for k, _ in backend.chain_reasons]}))
"""


def mlp(path: Path) -> Path:
    """A 3-layer MLP (256 wide) with a dynamic batch."""
    rng = np.random.default_rng(0)
    nodes, inits, previous = [], [], "x"
    for i, (rows, cols) in enumerate([(64, 256), (256, 256), (256, 10)]):
        inits.append(
            numpy_helper.from_array(rng.standard_normal((rows, cols), np.float32) * 0.1, f"w{i}")
        )
        nodes.append(helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]))
        previous = f"m{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [previous], [f"r{i}"]))
            previous = f"r{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, ["batch", 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def build(mode: str, model: Path, cache: Path) -> dict[str, object]:
    env = {**os.environ, "ORTPLUG_CACHE_DIR": str(cache)}
    env.setdefault("ORTPLUG_PLUGINS", "cpu,webgpu")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, "first" if mode == "second" else mode, str(model)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{mode} build of {model.name} failed:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench(model: Path, reps: int, scratch: Path) -> dict[str, object]:
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    chosen: dict[str, object] = {}
    for rep in range(reps):
        for mode in ("plain", "verified", "proven"):
            cache = scratch / f"{model.stem}-{mode}-{rep}"
            result = build(mode, model, cache)
            times[mode].append(float(result["ms"]))  # type: ignore[arg-type]
            chosen[mode] = result["chosen"]
        result = build("second", model, scratch / f"{model.stem}-proven-{rep}")
        times["second"].append(float(result["ms"]))  # type: ignore[arg-type]
        chosen["second"] = result["chosen"]
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    return {"model": model.stem, "medians_ms": medians, "chosen": chosen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--models",
        nargs="*",
        default=["mlp", "light_squeezenet", "light_shufflenet", "light_resnet50"],
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-proven-") as folder:
        scratch = Path(folder)
        rows = []
        for name in args.models:
            model = mlp(scratch / "mlp.onnx") if name == "mlp" else LIGHT / f"{name}.onnx"
            rows.append(bench(model, args.reps, scratch))
    print(
        f"plugins {os.environ.get('ORTPLUG_PLUGINS', 'cpu,webgpu')}, median of {args.reps} processes each"
    )
    print(
        f"{'model':<18} {'plain ms':>9} {'verified':>9} {'proven':>9} {'second':>9}  chosen (proven / second)"
    )
    for row in rows:
        ms = row["medians_ms"]
        plain = ms["plain"]  # type: ignore[index]
        ratios = " ".join(f"{ms[m] / plain:>8.2f}x" for m in ("verified", "proven", "second"))  # type: ignore[index]
        chosen = row["chosen"]
        print(f"{row['model']:<18} {plain:>9.1f} {ratios}  {chosen['proven']} / {chosen['second']}")  # type: ignore[index]


if __name__ == "__main__":
    main()
