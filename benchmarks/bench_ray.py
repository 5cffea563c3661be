"""Throughput of ``ortplug.integrations.ray.predict`` against one backend in a plain loop.

Prints rows per second of each, and their ratio, measured in one run on this
machine's local Ray cluster (start-up excluded, the datasets materialized
before timing). On a single small machine Ray's per-batch scheduling costs
are visible; the point of Ray is adding machines.
"""

from __future__ import annotations

import argparse
import os
import time
from importlib.resources import files
from pathlib import Path

import numpy as np
import ray
from ortplug import InMemoryCheckpoint, OnnxBackend
from ortplug.integrations.ray import predict


def _loop_rows_per_s(model: Path, name: str, rows: np.ndarray, batch: int) -> float:
    backend = OnnxBackend.from_checkpoint(InMemoryCheckpoint(model.read_bytes()).resolve())
    backend.run({name: rows[:batch]})
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        backend.run({name: rows[start : start + batch]})
    return len(rows) / (time.perf_counter() - started)


def _ray_rows_per_s(model: Path, name: str, rows: np.ndarray, batch: int) -> float:
    dataset = ray.data.from_numpy(rows).rename_columns({"data": name}).materialize()
    predict(dataset, model, batch_size=batch).materialize()  # actors warm, caches filled
    started = time.perf_counter()
    predict(dataset, model, batch_size=batch).materialize()
    return len(rows) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--images", type=int, default=128)
    args = parser.parse_args()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"ray {ray.__version__}, {os.cpu_count()} CPUs; rows per second (higher is better)")
    demo = Path(str(files("ortplug.data") / "demo.onnx"))
    rows = np.random.default_rng(0).standard_normal((args.rows, 8)).astype(np.float32)
    loop = _loop_rows_per_s(demo, "x", rows, args.batch)
    on_ray = _ray_rows_per_s(demo, "x", rows, args.batch)
    print(f"  demo MLP, {args.rows} rows, batch {args.batch}")
    print(f"  one backend, plain loop   {loop:>14,.0f}")
    print(f"  ray predict               {on_ray:>14,.0f}   ratio {on_ray / loop:.3f}")
    import onnx

    squeeze = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
    images = np.random.default_rng(0).random((args.images, 3, 224, 224), np.float32)
    loop = _loop_rows_per_s(squeeze, "data_0", images, 1)
    on_ray = _ray_rows_per_s(squeeze, "data_0", images, 1)
    print(f"  light_squeezenet (static batch 1), {args.images} images")
    print(f"  one backend, plain loop   {loop:>14,.1f}")
    print(f"  ray predict               {on_ray:>14,.1f}   ratio {on_ray / loop:.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
