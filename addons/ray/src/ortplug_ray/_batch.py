"""The ``batch`` command: a folder of inputs through a model, locally or on Ray Data (``--ray``).

Inputs are ``DIR/<input name>.npy`` (rows on the first axis) or, with
``--ray``, Parquet files whose columns are the input names. Outputs are
``OUT/<output name>.npy`` in input row order, or Parquet files with ``--ray``
(with an ``ortplug_chain`` column: the actor, node and providers of each row).
A tensor name's characters a file name cannot hold, or should not (``/``, ``:``,
a leading dot), are percent-encoded: ``dense/BiasAdd:0`` is ``dense%2FBiasAdd%3A0.npy``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from ortplug.checkpoint import LocalCheckpoint
from ortplug.cli.arguments import UsageError, print_json, resolve_chain
from ortplug.cli.inputs import quiet_run_options
from ortplug.host.install_command import pip_install
from ortplug.progress import progress, show_progress

from ._ray_session import ray_session
from .config import BackendConfig
from .dataset import predict
from .predictor import OnnxPredictor

__all__ = ["batch", "tensor_file"]


def _make_output_dir(target: Path) -> None:
    """Create ``--output-dir`` and its parents; a path that cannot be a folder is a usage error."""
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "a file" if target.exists() and not target.is_dir() else exc.strerror or exc
        raise UsageError(
            f"--output-dir: expected a folder that exists or can be created, got "
            f"{str(target)!r} ({reason})"
        ) from exc


def tensor_file(name: str) -> str:
    """The ``.npy`` file of a tensor: its name, percent-encoded where a file name cannot hold it
    (a model's names are untrusted: ``../x`` or ``/etc/x`` must not leave the folder)."""
    encoded = quote(name, safe="-_.")
    if encoded.startswith(".") or not encoded:
        encoded = "%2E" + encoded[1:] if encoded else "%00"
    return f"{encoded}.npy"


def _load_npy_inputs(folder: Path, names: list[str]) -> dict[str, np.ndarray]:
    files = {name: tensor_file(name) for name in names}
    missing = [file for file in files.values() if not (folder / file).is_file()]
    if missing:
        raise UsageError(
            f"--input-dir {folder}: expected {', '.join(files.values())}; missing "
            f"{', '.join(missing)}"
        )
    arrays = {name: np.load(folder / file, allow_pickle=False) for name, file in files.items()}
    scalars = [files[name] for name, array in arrays.items() if array.ndim == 0]
    if scalars:
        raise UsageError(
            f"--input-dir {folder}: expected rows on the first axis, got a single value in "
            f"{', '.join(scalars)}"
        )
    rows = {name: len(array) for name, array in arrays.items()}
    if len(set(rows.values())) != 1:
        raise UsageError(f"--input-dir {folder}: inputs have different row counts {rows}")
    return arrays


def _run_local(
    model: Path,
    arrays: dict[str, np.ndarray],
    batch_size: int,
    providers: list[Any] | None,
    hint: str,
) -> dict[str, np.ndarray]:
    """The rows in batches through one backend in this process, shaped as on Ray (a static
    model batch: runs of that size, the last padded) by the same predictor."""
    config = BackendConfig(model=model, providers=providers, keep_columns=[], performance_hint=hint)
    predictor = OnnxPredictor(config, quiet_run_options())
    try:
        rows = len(next(iter(arrays.values())))
        parts: dict[str, list[np.ndarray]] = {name: [] for name in predictor.outputs}
        with progress("batch", rows, unit="row") as shown:  # a bar where the command asked
            for start in range(0, max(rows, 1), batch_size):  # no rows: one empty run
                stop = start + batch_size
                outputs = predictor.rows_from({n: a[start:stop] for n, a in arrays.items()}, start)
                for name, values in parts.items():
                    values.append(outputs[name])
                shown.advance(min(stop, rows) - start)
    finally:
        predictor.backend.close()
    return {name: np.concatenate(values) for name, values in parts.items()}


#: The column each row's actor report goes to on Ray (written to Parquet outputs too).
_CHAIN = "ortplug_chain"


def _actors(reports: Counter[str]) -> list[dict[str, Any]]:
    """Each actor's report (node, pid, threads, providers) with the rows it ran."""
    return [{**json.loads(report), "rows": rows} for report, rows in sorted(reports.items())]


def _run_ray_npy(
    model: Path,
    arrays: dict[str, np.ndarray],
    batch_size: int,
    providers: list[Any] | None,
    hint: str,
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    if not len(next(iter(arrays.values()))):  # no rows to hand out: typed empty outputs
        return _run_local(model, arrays, batch_size, providers, hint), []
    names = _output_names(model)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    reports: Counter[str] = Counter()
    total = len(next(iter(arrays.values())))
    # the bar before Ray's session: it keeps the terminal while Ray's output goes to a log
    with progress("batch on Ray", total, unit="row") as shown, ray_session() as ray:
        refs = {name: ray.put(array) for name, array in arrays.items()}  # once, not per task

        def rows(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            ids = batch["id"]
            return {"id": ids, **{name: ray.get(ref)[ids] for name, ref in refs.items()}}

        dataset = ray.data.range(len(next(iter(arrays.values())))).map_batches(rows)
        scored = predict(
            dataset,
            model,
            providers=providers,
            batch_size=batch_size,
            output_columns={n: n for n in names},
            keep_columns=[],  # the inputs are here already: nothing to copy back
            id_column="id",
            chain_column=_CHAIN,
            performance_hint=hint,
        )
        for chunk in scored.iter_batches(batch_size=None, batch_format="numpy"):
            for name in names:
                parts[name].append(chunk[name])
            reports.update(chunk[_CHAIN].tolist())
            shown.advance(len(chunk[_CHAIN]))
    return {name: np.concatenate(values) for name, values in parts.items()}, _actors(reports)


def _output_names(model: Path) -> list[str]:
    return list(LocalCheckpoint(model).resolve().metadata.output_names)


@show_progress()  # the rows on a terminal's stderr (Parquet on Ray: Ray writes them, unseen)
def batch(args: argparse.Namespace) -> int:
    """Run every row of ``--input-dir`` through the model; write the outputs to ``--output-dir``."""
    model, source, target = Path(args.model), Path(args.input_dir), Path(args.output_dir)
    # configs (typed options included); the Ray helpers hand them to predict() as they are
    providers: list[Any] | None = resolve_chain(args.providers) if args.providers else None
    _make_output_dir(target)
    if sorted(source.glob("*.parquet")):
        if not args.ray:
            raise UsageError(
                f"--input-dir {source}: Parquet input needs --ray ({pip_install('ortplug[ray]')})"
            )
        if any(target.glob("*.parquet")):  # Ray adds files beside them: rows twice, counted so
            raise UsageError(
                f"--output-dir: expected a folder without Parquet files, got {str(target)!r} "
                "(an earlier run's outputs?); give an empty or new folder"
            )
        written, actors = _run_ray_parquet(
            model, source, target, args.batch_size, providers, hint=args.hint
        )
        summary: dict[str, Any] = {"format": "parquet", "rows": written, "output_dir": str(target)}
    else:
        names = list(LocalCheckpoint(model).resolve().metadata.input_names)
        arrays = _load_npy_inputs(source, names)
        if args.ray:
            outputs, actors = _run_ray_npy(model, arrays, args.batch_size, providers, args.hint)
        else:
            outputs = _run_local(model, arrays, args.batch_size, providers, args.hint)
        for name, value in outputs.items():
            np.save(target / tensor_file(name), value)
        rows = len(next(iter(arrays.values())))
        summary = {
            "format": "npy",
            "rows": rows,
            "outputs": {n: list(v.shape) for n, v in outputs.items()},
            "output_dir": str(target),
        }
    summary["engine"] = "ray" if args.ray else "local"
    engine = summary["engine"]
    if args.ray:
        summary["actors"] = actors
        chains = sorted({",".join(a["providers"]) for a in actors})
        nodes = len({a["node"] for a in actors})
        engine = f"ray: {len(actors)} actor(s) on {nodes} node(s), {'; '.join(chains)}"
    summary["performance_hint"] = args.hint
    if args.hint != "latency":
        engine += f", {args.hint} hint"
    if args.json:
        print_json(summary)
    else:
        print(f"{summary['rows']} rows through {model.name} ({engine}) -> {target}")
    return 0


def _run_ray_parquet(
    model: Path,
    source: Path,
    target: Path,
    batch_size: int,
    providers: list[Any] | None,
    *,
    hint: str,
) -> tuple[int, list[dict[str, Any]]]:
    with ray_session() as ray:
        dataset = ray.data.read_parquet(str(source))
        scored = predict(
            dataset,
            model,
            providers=providers,
            batch_size=batch_size,
            chain_column=_CHAIN,
            performance_hint=hint,
        )
        scored.write_parquet(str(target))
        # read back one dictionary-encoded column: counting the lazy dataset would run it again
        written = ray.data.read_parquet(str(target), columns=[_CHAIN])
        reports: Counter[str] = Counter()
        for chunk in written.iter_batches(batch_size=None, batch_format="numpy"):
            reports.update(chunk[_CHAIN].tolist())
    return sum(reports.values()), _actors(reports)
