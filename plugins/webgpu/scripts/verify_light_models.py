"""Verification on the onnx package's light models: nothing correct may be rejected.

    ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1 python plugins/webgpu/scripts/verify_light_models.py [--skip-webgpu]

For each ``light_*.onnx`` model shipped inside the ``onnx`` package (its ConstantOfShape weights
replaced by seeded random ones, so outputs differ between classes), prints the verdict of:

* an identical variant (the same file listed as an fp32 variant) on the CPU provider, and
* the WebGPU provider on this host's adapter (lavapipe here: ``--skip-webgpu`` without one),

with what verification covered and what it cost. Every row must say ``pass``: verification
judges outputs element by element, on several inputs, and a correct candidate must survive it.
Exits 1 when one does not. Not run in CI (minutes on a software adapter).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from ortplug import CheckpointMetadata, LocalCheckpoint, OnnxBackend, VerificationError
from ortplug.checkpoint import Variant, select_variant

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _randomized(path: Path, seed: int = 0) -> onnx.ModelProto:
    """The model with every ConstantOfShape weight replaced by a seeded, fan-in-scaled one."""
    model = onnx.load(str(path))
    graph = model.graph
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t).tolist() for t in graph.initializer}
    filled = {n.output[0]: shapes[n.input[0]] for n in graph.node if n.op_type == "ConstantOfShape"}
    kept = [n for n in graph.node if n.op_type != "ConstantOfShape"]
    used = {name for node in kept for name in node.input}
    initializers = [t for t in graph.initializer if t.name in used]
    for name, shape in filled.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = np.sqrt(1.0 / fan_in) if len(shape) > 1 else 0.05
        value = (
            1 + scale * rng.standard_normal(shape)
            if len(shape) == 1
            else (scale * rng.standard_normal(shape))
        )
        initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
    del graph.node[:]
    graph.node.extend(kept)
    inputs = [i for i in graph.input if i.name not in filled and i.name not in shapes]
    del graph.input[:]
    graph.input.extend(inputs)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    model.ir_version = max(model.ir_version, 4)
    onnx.checker.check_model(model)
    return model


def _identical_variant(folder: Path, model: onnx.ModelProto) -> Path:
    path = folder / "m.onnx"
    onnx.save(model, str(path))
    onnx.save(model, str(folder / "m.same.onnx"))
    metadata = CheckpointMetadata.from_model(path).to_dict()
    metadata["variants"] = [Variant(name="same", file="m.same.onnx", precision="fp32").to_dict()]
    (folder / "m.metadata.json").write_text(CheckpointMetadata.from_dict(metadata).to_json())
    return path


def _verdict(build) -> str:
    started = time.perf_counter()
    try:
        with build() as backend:
            verdict = backend.report.verification
    except VerificationError as exc:
        return f"FAIL  {exc}"
    seconds = time.perf_counter() - started
    if verdict is None:
        return "no verdict"
    return f"pass  {len(verdict.covered)} runs covered, {seconds:.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-webgpu", action="store_true")
    args = parser.parse_args()
    failed = False
    for path in sorted(LIGHT.glob("light_*.onnx")):
        model = _randomized(path)
        with tempfile.TemporaryDirectory() as folder:
            os.environ["ORTPLUG_CACHE_DIR"] = str(Path(folder) / "cache")
            weights = _identical_variant(Path(folder), model)
            variant = select_variant(LocalCheckpoint(weights).resolve(), "same")
            chains = [("identical variant, cpu", variant, ["cpu"])]
            if not args.skip_webgpu:
                chains.append(("webgpu", LocalCheckpoint(weights).resolve(), ["webgpu", "cpu"]))
            for what, checkpoint, chain in chains:
                said = _verdict(
                    partial(OnnxBackend.from_checkpoint, checkpoint, chain, verify=True)
                )
                failed |= not said.startswith("pass")
                print(f"{path.stem:22} {what:22} {said}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
