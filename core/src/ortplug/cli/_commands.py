"""The ``run``, ``info`` and ``plugins`` commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import math
import statistics
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend import OnnxBackend
from ..backend.options import Verification
from ..checkpoint import LocalCheckpoint, ResolvedCheckpoint
from ..errors import OptionError
from ..host.runtime import (
    duplicate_runtime_problem,
    install_hint,
    installed_runtimes,
    onnxruntime_or_none,
)
from ..pipeline.report import Candidate
from ..plugin_host.first_party import runtime_install
from ..plugin_host.manager import get_plugin_host
from ..printable import printable
from ..progress import show_progress
from ..selection import DefaultProviderPolicy
from ._json import print_json
from ._providers import resolve_chain
from ._served import recorded_servings, served_candidates, serving_lines
from ._usage import UsageError
from .inputs import first_run, given_usage, load_inputs, quiet_run_options, reference_feed

if TYPE_CHECKING:
    from ..backend.dispatch import ServingSummary
    from ..verification.verdicts import Verdict

__all__ = ["info", "plugins", "run"]


@contextlib.contextmanager
def _model_path(model: Path | None) -> Iterator[Path]:
    """The given model path, or the demo model shipped inside the package."""
    if model is not None:
        yield model
        return
    with importlib.resources.as_file(importlib.resources.files("ortplug.data") / "demo.onnx") as p:
        yield p


def _policy_rows(
    checkpoint: ResolvedCheckpoint, served: Candidate | None = None
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The chain the default policy picks for ``checkpoint`` here and the declined providers;
    with ``served`` other than the policy's first choice, the chain that serves, saying so."""
    host = get_plugin_host()
    selection = DefaultProviderPolicy(host).explain(
        checkpoint.metadata, host.host_capabilities(), checkpoint
    )
    chain = [{"kind": c.kind, "reason": selection.reason_for(c)} for c in selection.chain]
    declined = [{"kind": d.kind, "reason": f"{d.reason} [{d.plugin}]"} for d in selection.declined]
    kinds = tuple(c.kind for c in selection.chain)
    proposed = (selection.variant, kinds) == (served.variant, served.chain) if served else True
    if served is not None and selection.precision is not None:
        proposed = proposed and selection.precision == served.precision
    if not proposed and served is not None:
        weights = f"variant {served.variant}" if served.variant else "reference weights"
        first = f"variant {selection.variant}" if selection.variant else "reference weights"
        mode = f" at {selection.precision}" if selection.precision else ""
        reason = (
            f"{weights} ({served.precision}) serve: {served.reason}; the policy's first choice, "
            f"{first}{mode} on [{', '.join(kinds)}], does not (its candidate line says why)"
        )
        chain = [{"kind": kind, "reason": reason} for kind in served.chain]
    return chain, declined


def _summary(value: object) -> dict[str, Any]:
    """What one output holds, for every ONNX value kind: tensor, sequence, map, or none."""
    if isinstance(value, np.ndarray):
        return {
            "kind": "tensor",
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "first": [_plain(v) for v in value.ravel()[:4]],
        }
    if isinstance(value, (list, tuple)):
        return {"kind": "sequence", "length": len(value), "first": [_summary(v) for v in value[:2]]}
    if isinstance(value, Mapping):
        first = list(value.items())[:4]
        return {"kind": "map", "size": len(value), "first": {str(k): _plain(v) for k, v in first}}
    if value is None:
        return {"kind": "none"}
    return {"kind": type(value).__name__, "value": repr(value)}


def _plain(value: object) -> object:
    """A tensor element or map value as JSON: numbers and text as they are, else summarized."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return _summary(value)


def _number(value: object) -> str:
    """A value as people read it: floats to 4 digits, text quoted (a label, not a number)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value) if isinstance(value, str) else str(value)


def _describe(summary: Mapping[str, Any]) -> str:
    """One output summary as people read it: ``float32 (1, 3) [0.1, 0.2, 0.7, ...]``."""
    kind = summary["kind"]
    if kind == "tensor":
        first = [_number(v) for v in summary["first"]]
        if math.prod(summary["shape"]) > len(first):
            first.append("...")
        return f"{summary['dtype']} {tuple(summary['shape'])} [{', '.join(first)}]"
    if kind == "sequence":
        more = ", ..." if summary["length"] > len(summary["first"]) else ""
        items = ", ".join(_describe(item) for item in summary["first"])
        return f"sequence of {summary['length']} [{items}{more}]"
    if kind == "map":
        more = ", ..." if summary["size"] > len(summary["first"]) else ""
        items = ", ".join(
            f"{k}: {_describe(v) if isinstance(v, Mapping) else _number(v)}"
            for k, v in summary["first"].items()
        )
        return f"map of {summary['size']} {{{items}{more}}}"
    if kind == "none":
        return "none (an optional output that was not produced)"
    return f"{kind} {summary['value']}"


def _until_settled(backend: OnnxBackend, feed: Mapping[str, Any]) -> None:
    """Wait for a startup fallback to settle; while its candidate shadows the CPU reference,
    the request is run again: the real traffic it must agree on before it serves."""
    while not backend.wait_ready(timeout=0.05):
        if backend.shadowing:
            backend.run(feed)


@show_progress()  # the build's verification and a throughput build's measuring, on a terminal
def run(args: argparse.Namespace) -> int:
    """Build a backend, run it once and ``--repeat`` times, print chain, outputs and latency."""
    providers = resolve_chain(args.providers) if args.providers else None
    _check_hint(args)
    with _model_path(args.model) as path:
        checkpoint = LocalCheckpoint(path).resolve()
        given = load_inputs(args.input, checkpoint.metadata.input_names)
        started = time.perf_counter()
        with given_usage():  # verified on first, as the run's feed
            backend = OnnxBackend.from_checkpoint(
                checkpoint,
                providers=providers,
                startup_fallback=args.startup_fallback,
                verify=Verification(inputs=given or None),
                performance_hint=args.hint,
            )
        build_ms = (time.perf_counter() - started) * 1e3
    chain = [{"kind": kind, "reason": reason} for kind, reason in backend.chain_reasons]
    options = backend.session_options
    settings = {
        k: v for k, v in (options.to_dict() if options else {}).items() if k != "config_entries"
    }
    verdict = backend.report.verification
    with backend:
        chosen = reference_feed(checkpoint, backend, given)
        feed, generated = dict(chosen.feed), dict(chosen.generated)
        started = time.perf_counter()
        with first_run(given, generated):
            outputs = backend.run(feed, run_options=quiet_run_options())
        first_ms = (time.perf_counter() - started) * 1e3
        first_run_on = list(backend.providers)
        _until_settled(backend, feed)  # the timed runs measure what serves from now on
        timings = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            backend.run(feed)
            timings.append((time.perf_counter() - started) * 1e3)
        # after wait_ready: what a startup fallback switched to, and its candidates, are known
        realized, candidates = list(backend.providers), backend.report.candidates
    report: dict[str, Any] = {
        "model": str(args.model or "demo.onnx (shipped with ortplug)"),
        "metadata": checkpoint.metadata.to_dict(),
        "chain": chain,
        "session_options": settings,
        "realized": realized,
        "first_run_on": first_run_on,
        "generated_inputs": generated,
        "verification": None if verdict is None else verdict.to_dict(),
        "candidates": [c.to_dict() for c in candidates],
        "performance_hint": args.hint,
        "serving": None if backend.serving is None else backend.serving.to_dict(),
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
        print_json(report)
        return 0
    meta = checkpoint.metadata
    shapes = "static" if meta.static_shapes else "dynamic"
    print(f"model     {report['model']} ({meta.model_family}, {meta.precision}, {shapes} shapes)")
    for row in chain:
        print(f"chain     {row['kind']:<10} {row['reason']}")
    print(f"realized  {', '.join(realized)}")
    _print_checks(verdict, candidates, args.verify, backend.serving)
    if first_run_on != realized:
        print(f"first run {', '.join(first_run_on)} (startup fallback: switched after it)")
    if settings:
        print("options   " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    for name, how in generated.items():
        print(f"generated {name}: {how} (seed 0; pass real data with --input {name}=FILE.npy)")
    for name, out in report["outputs"].items():
        print(f"output    {name}: {_describe(out)}")
    lat = report["latency_ms"]  # fixed decimals: the README shows this line
    print(
        f"latency   median {lat['median']:.4f} ms, min {lat['min']:.4f} ms over {lat['runs']} "
        f"runs (build {lat['build']:.1f} ms, first run {lat['first_run']:.2f} ms)"
    )
    return 0


def _check_hint(args: argparse.Namespace) -> None:
    """``--hint`` other than latency does not go with ``--startup-fallback``: one usage line."""
    if args.startup_fallback and args.hint != "latency":
        raise UsageError(
            f"--hint {args.hint}: expected no --startup-fallback (a throughput build measures "
            "its streams on the session that serves), got --startup-fallback"
        )


def info(args: argparse.Namespace) -> int:
    """Host facts per probe, plugins, available providers and the chain for a model."""
    plugin_host = get_plugin_host()
    if args.refresh:
        plugin_host.refresh_probes()
    host = plugin_host.host_capabilities()
    runtime = onnxruntime_or_none()
    runtimes = installed_runtimes()
    problem = duplicate_runtime_problem(runtimes, runtime_install)
    data: dict[str, Any] = {
        "onnxruntime": host.ort_version,
        "runtime_distributions": [f"{d.name} {d.version}" for d in runtimes],
        "problems": [problem] if problem else [],
        "host": host.to_dict(),
        "plugins": [p.to_dict() for p in plugin_host.plugin_infos()],
        "provider_kinds": plugin_host.provider_registry().kinds(),
    }
    if runtime is None:
        data["install"] = install_hint()
    fit = _fit_lines()
    data["fit"] = fit
    with _model_path(args.model) as path:
        checkpoint = LocalCheckpoint(path).resolve()
        data["model"] = str(args.model or "demo.onnx (shipped with ortplug)")
        candidates = served_candidates(checkpoint) if args.model is not None else ()
        served = next((c for c in candidates if c.chosen), None)
        data["chain"], data["declined"] = _policy_rows(checkpoint, served)  # after the build:
        # the policy then reads the choice a first build measured and recorded
        if args.model is not None:  # the proven choice for this model: built, verified, timed
            data["candidates"] = [c.to_dict() for c in candidates]
        servings = recorded_servings(checkpoint, host) if args.model is not None else None
        if isinstance(servings, str):  # no serving add-on
            data["serving"] = None
        elif servings is not None:  # what a throughput build here measured (none: not yet)
            data["serving"] = {h: None if r is None else r.to_dict() for h, r in servings.items()}
    if args.json:
        print_json(data)
        return 0
    print(f"onnxruntime  {host.ort_version or 'not installed: ' + install_hint()}")
    print(f"wheels       {', '.join(data['runtime_distributions']) or 'none'}")
    for line in data["problems"]:
        print(f"PROBLEM      {line}")
    print(f"platform     {host.platform} {host.machine}")
    print(f"providers    {', '.join(host.available_providers) or 'none'} (in this ORT build)")
    for probe, facts in host.facts.items():
        for name, value in facts.items():
            print(printable(f"fact         {probe}.{name} = {value}"))
    for plugin in plugin_host.plugin_infos():
        made_by = f"{plugin.distribution} {plugin.version}" if plugin.distribution else "(built in)"
        error = f" ({plugin.error})" if plugin.error else ""
        print(f"plugin       {plugin.name} {made_by}: {plugin.status}{error}")
    print(f"hardware     {fit['hardware_line']}")
    for line in fit["lines"]:
        print(f"fit          {line}")
    print(f"model        {data['model']}")
    for row in data["chain"]:
        print(f"chain        {row['kind']:<10} {row['reason']}")
    for row in data["declined"]:
        print(f"declined     {row['kind']:<10} {row['reason']}")
    for candidate in candidates:
        print(f"candidate    {candidate.describe()}")
        if candidate.verdict is not None:  # what its verdict, measured now or cached, ran on
            cached = " (a cached verdict)" if candidate.verdict.cached else ""
            print(f"  covered    {candidate.verdict.coverage()}{cached}")
    for line in [] if servings is None else serving_lines(servings, str(args.model)):
        print(f"serving      {line}")
    return 0


def _fit_lines() -> dict[str, Any]:
    """Host fit for ``info``: the hardware seen, the plan, and one line per finding (a bad
    catalog file is one such line)."""
    from ..fit.hardware import detect_hardware
    from ..fit.planner import check_host

    try:
        plan = check_host()
    except OptionError as exc:
        hardware = detect_hardware()
        return {"hardware": hardware.to_dict(), "hardware_line": hardware.describe(),
                "error": str(exc), "lines": [f"PROBLEM {exc}"]}  # fmt: skip
    lines = [f.line() for f in plan.findings]
    if not plan.steps:
        lines.append("nothing to install or remove for this hardware")
    return {**plan.to_dict(), "hardware_line": plan.hardware.describe(), "lines": lines}


def _print_checks(
    verdict: Verdict | None,
    candidates: tuple[Candidate, ...],
    asked: bool,
    serving: ServingSummary | None,
) -> None:
    """``run``'s verdict line (``asked``: ``--verify`` was given), its candidates, and what
    serves under a throughput hint."""
    if verdict is not None:
        print(f"verdict   {verdict.describe()}")
    elif asked:
        print(
            "verdict   nothing to check: the CPU provider on the reference weights is the reference"
        )
    _print_candidates(candidates, "candidate ")
    _print_lines("serving   ", [] if serving is None else serving.lines())


def _print_candidates(candidates: tuple[Candidate, ...], label: str) -> None:
    _print_lines(label, [candidate.describe() for candidate in candidates])


def _print_lines(label: str, lines: list[str]) -> None:
    for line in lines:
        print(f"{label}{line}")


def plugins(args: argparse.Namespace) -> int:
    """Every plugin with its distribution, status and hooks (or error)."""
    rows = get_plugin_host().plugin_infos()
    if args.json:
        print_json([row.to_dict() for row in rows])
        return 0
    for row in rows:
        dist = f"{row.distribution} {row.version}" if row.distribution else "(built in)"
        detail = row.error or ", ".join(row.hooks) + (f" ({row.note})" if row.note else "")
        print(f"{row.name:<28} {dist:<24} {row.status:<8} {detail}")
    return 0
