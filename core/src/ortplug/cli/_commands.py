"""The ``run``, ``info`` and ``plugins`` commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._runtime import (
    INSTALL_HINT,
    duplicate_runtime_problem,
    installed_runtimes,
    onnxruntime_or_none,
)
from ..backend import OnnxBackend
from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint
from ..errors import OptionError
from ..plugins.manager import get_plugin_host
from ..selection import DefaultProviderPolicy
from ._inputs import build_feed, parse_input_args

__all__ = ["info", "plugins", "run"]


@contextlib.contextmanager
def _model_path(model: str | None) -> Iterator[Path]:
    """The given model path, or the demo model shipped inside the package."""
    if model:
        yield Path(model)
        return
    with importlib.resources.as_file(importlib.resources.files("ortplug.data") / "demo.onnx") as p:
        yield p


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _policy_rows(
    checkpoint: ResolvedCheckpoint,
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The chain the default policy picks for ``checkpoint`` here and the declined providers."""
    host = get_plugin_host()
    selection = DefaultProviderPolicy(host).explain(
        checkpoint.metadata, host.host_capabilities(), checkpoint
    )
    chain = [{"kind": c.kind, "reason": selection.reason_for(c)} for c in selection.chain]
    declined = [{"kind": d.kind, "reason": f"{d.reason} [{d.plugin}]"} for d in selection.declined]
    return chain, declined


def _summary(array: np.ndarray) -> dict[str, Any]:
    flat = np.asarray(array).ravel()[:4]
    return {
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "first": [v.item() if hasattr(v, "item") else v for v in flat],
    }


def run(args: argparse.Namespace) -> int:
    """Build a backend, run it once and ``--repeat`` times, print chain, outputs and latency."""
    if args.repeat < 1:
        raise OptionError(f"--repeat: expected a positive count, got {args.repeat}")
    providers = [p.strip() for p in args.providers.split(",")] if args.providers else None
    with _model_path(args.model) as path:
        checkpoint = LocalCheckpoint(path).resolve()
        started = time.perf_counter()
        backend = OnnxBackend.from_checkpoint(checkpoint, providers=providers)
        build_ms = (time.perf_counter() - started) * 1e3
    chain = [{"kind": kind, "reason": reason} for kind, reason in backend.chain_reasons]
    options = backend.session_options
    settings = {
        k: v for k, v in (options.to_dict() if options else {}).items() if k != "config_entries"
    }
    with backend:
        feed, generated = build_feed(backend.input_specs, parse_input_args(args.input))
        started = time.perf_counter()
        outputs = backend.run(feed)
        first_ms = (time.perf_counter() - started) * 1e3
        timings = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            backend.run(feed)
            timings.append((time.perf_counter() - started) * 1e3)
        realized = list(backend.providers)
    report: dict[str, Any] = {
        "model": str(args.model or "demo.onnx (shipped with ortplug)"),
        "metadata": checkpoint.metadata.to_dict(),
        "chain": chain,
        "session_options": settings,
        "realized": realized,
        "generated_inputs": generated,
        "outputs": {name: _summary(value) for name, value in outputs.items()},
        "latency_ms": {
            "build": round(build_ms, 3),
            "first_run": round(first_ms, 3),
            "median": round(statistics.median(timings), 4),
            "min": round(min(timings), 4),
            "runs": len(timings),
        },
    }
    if args.json:
        _print_json(report)
        return 0
    meta = checkpoint.metadata
    shapes = "static" if meta.static_shapes else "dynamic"
    print(f"model     {report['model']} ({meta.model_family}, {meta.precision}, {shapes} shapes)")
    for row in chain:
        print(f"chain     {row['kind']:<10} {row['reason']}")
    print(f"realized  {', '.join(realized)}")
    if settings:
        print("options   " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    if generated:
        print(f"inputs    generated from seed 0: {', '.join(generated)}")
    for name, out in report["outputs"].items():
        first = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in out["first"])
        print(f"output    {name}: {out['dtype']} {tuple(out['shape'])} [{first}, ...]")
    lat = report["latency_ms"]
    print(
        f"latency   median {lat['median']} ms, min {lat['min']} ms over {lat['runs']} runs "
        f"(build {lat['build']} ms, first run {lat['first_run']} ms)"
    )
    return 0


def info(args: argparse.Namespace) -> int:
    """Host facts per probe, plugins, available providers and the chain for a model."""
    plugin_host = get_plugin_host()
    host = plugin_host.host_capabilities()
    runtime = onnxruntime_or_none()
    runtimes = installed_runtimes()
    problem = duplicate_runtime_problem(runtimes)
    data: dict[str, Any] = {
        "onnxruntime": host.ort_version,
        "runtime_distributions": [f"{d.name} {d.version}" for d in runtimes],
        "problems": [problem] if problem else [],
        "host": host.to_dict(),
        "plugins": [p.to_dict() for p in plugin_host.plugin_infos()],
        "provider_kinds": plugin_host.provider_registry().kinds(),
    }
    if runtime is None:
        data["install"] = INSTALL_HINT
    with _model_path(args.model) as path:
        checkpoint = LocalCheckpoint(path).resolve()
        data["model"] = str(args.model or "demo.onnx (shipped with ortplug)")
        data["chain"], data["declined"] = _policy_rows(checkpoint)
    if args.json:
        _print_json(data)
        return 0
    print(f"onnxruntime  {host.ort_version or 'not installed: ' + INSTALL_HINT}")
    print(f"wheels       {', '.join(data['runtime_distributions']) or 'none'}")
    for line in data["problems"]:
        print(f"PROBLEM      {line}")
    print(f"platform     {host.platform} {host.machine}")
    print(f"providers    {', '.join(host.available_providers) or 'none'} (in this ORT build)")
    for probe, facts in host.facts.items():
        for name, value in facts.items():
            print(f"fact         {probe}.{name} = {value}")
    for plugin in plugin_host.plugin_infos():
        version = f" {plugin.distribution} {plugin.version}" if plugin.distribution else ""
        error = f" ({plugin.error})" if plugin.error else ""
        print(f"plugin       {plugin.name}{version}: {plugin.status}{error}")
    print(f"model        {data['model']}")
    for row in data["chain"]:
        print(f"chain        {row['kind']:<10} {row['reason']}")
    for row in data["declined"]:
        print(f"declined     {row['kind']:<10} {row['reason']}")
    return 0


def plugins(args: argparse.Namespace) -> int:
    """Every plugin with its distribution, status and hooks (or error)."""
    rows = get_plugin_host().plugin_infos()
    if args.json:
        _print_json([row.to_dict() for row in rows])
        return 0
    for row in rows:
        dist = f"{row.distribution} {row.version}" if row.distribution else "(built in)"
        detail = row.error or ", ".join(row.hooks)
        print(f"{row.name:<28} {dist:<24} {row.status:<8} {detail}")
    return 0
