"""The ``batch`` command: a folder of inputs through a model, locally or on Ray Data (``--ray``).

Inputs are ``DIR/<input name>.npy`` (rows on the first axis) or, with
``--ray``, Parquet files whose columns are the input names. Outputs are
``OUT/<output name>.npy`` in input row order, or Parquet files with ``--ray``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import OnnxBackend
from ..checkpoint import LocalCheckpoint
from ._inputs import quiet_run_options
from ._providers import resolve_chain
from ._usage import UsageError

__all__ = ["batch"]


def _load_npy_inputs(folder: Path, names: list[str]) -> dict[str, np.ndarray]:
    missing = [name for name in names if not (folder / f"{name}.npy").is_file()]
    if missing:
        raise UsageError(
            f"--input-dir {folder}: expected {', '.join(f'{n}.npy' for n in names)}; missing "
            f"{', '.join(f'{n}.npy' for n in missing)}"
        )
    arrays = {name: np.load(folder / f"{name}.npy", allow_pickle=False) for name in names}
    rows = {name: len(array) for name, array in arrays.items()}
    if len(set(rows.values())) != 1:
        raise UsageError(f"--input-dir {folder}: inputs have different row counts {rows}")
    return arrays


def _run_local(
    model: Path, arrays: dict[str, np.ndarray], batch_size: int, providers: list[Any] | None
) -> dict[str, np.ndarray]:
    with OnnxBackend.from_checkpoint(LocalCheckpoint(model).resolve(), providers) as backend:
        rows = len(next(iter(arrays.values())))
        parts: dict[str, list[np.ndarray]] = {name: [] for name in backend.output_names}
        for start in range(0, rows, batch_size):
            feed = {name: array[start : start + batch_size] for name, array in arrays.items()}
            try:
                outputs = backend.run(feed, run_options=quiet_run_options())
            except Exception as exc:
                raise RuntimeError(
                    f"batch {start // batch_size} (rows {start}..{start + len(next(iter(feed.values()))) - 1}): {exc}"
                ) from exc
            for name, value in outputs.items():
                parts[name].append(value)
    return {name: np.concatenate(values) for name, values in parts.items()}


def _run_ray_npy(
    model: Path, arrays: dict[str, np.ndarray], batch_size: int, providers: list[str] | None
) -> dict[str, np.ndarray]:
    import ray

    from ..integrations.ray import predict

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    rows = len(next(iter(arrays.values())))
    index = ray.data.range(rows)
    dataset = index.map_batches(
        lambda b: {n: a[b["id"]] for n, a in arrays.items()}, batch_format="numpy"
    )
    names = _output_names(model)
    scored = predict(
        dataset,
        model,
        providers=providers,
        batch_size=batch_size,
        output_columns={n: n for n in names},
    )
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for chunk in scored.select_columns(names).iter_batches(batch_size=None, batch_format="numpy"):
        for name in names:
            parts[name].append(chunk[name])
    return {name: np.concatenate(values) for name, values in parts.items()}


def _output_names(model: Path) -> list[str]:
    return list(LocalCheckpoint(model).resolve().metadata.output_names)


def batch(args: argparse.Namespace) -> int:
    """Run every row of ``--input-dir`` through the model; write the outputs to ``--output-dir``."""
    model, source, target = Path(args.model), Path(args.input_dir), Path(args.output_dir)
    # configs (typed options included); the Ray helpers hand them to predict() as they are
    providers: list[Any] | None = resolve_chain(args.providers) if args.providers else None
    target.mkdir(parents=True, exist_ok=True)
    if sorted(source.glob("*.parquet")):
        if not args.ray:
            raise UsageError(
                f"--input-dir {source}: Parquet input needs --ray (pip install 'ortplug[ray]')"
            )
        written = _run_ray_parquet(model, source, target, args.batch_size, providers)
        summary: dict[str, Any] = {"format": "parquet", "rows": written, "output_dir": str(target)}
    else:
        names = list(LocalCheckpoint(model).resolve().metadata.input_names)
        arrays = _load_npy_inputs(source, names)
        run = _run_ray_npy if args.ray else _run_local
        outputs = run(model, arrays, args.batch_size, providers)
        for name, value in outputs.items():
            np.save(target / f"{name}.npy", value)
        rows = len(next(iter(arrays.values())))
        summary = {
            "format": "npy",
            "rows": rows,
            "outputs": {n: list(v.shape) for n, v in outputs.items()},
            "output_dir": str(target),
        }
    summary["engine"] = "ray" if args.ray else "local"
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{summary['rows']} rows through {model.name} ({summary['engine']}) -> {target}")
    return 0


def _run_ray_parquet(
    model: Path, source: Path, target: Path, batch_size: int, providers: list[str] | None
) -> int:
    import ray

    from ..integrations.ray import predict

    dataset = ray.data.read_parquet(str(source))
    scored = predict(dataset, model, providers=providers, batch_size=batch_size)
    scored.write_parquet(str(target))
    return int(scored.count())
