"""Smoke check of one provider plugin on real hardware (``plugins/*/scripts/smoke.py``): exit 0 it ran
the model, 1 the check failed, 2 ``not available: <reason>`` on this host."""

from __future__ import annotations

import argparse
import importlib.resources
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..backend import OnnxBackend
from ..checkpoint import InMemoryCheckpoint, LocalCheckpoint, ResolvedCheckpoint
from ..plugin_host.manager import get_plugin_host
from ..selection import DefaultProviderPolicy
from ..session.timing import median_ms
from ..verification.sample_inputs import accepted_inputs

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNAVAILABLE", "main", "run_smoke"]

EXIT_OK, EXIT_FAILED, EXIT_UNAVAILABLE = 0, 1, 2


class _Unavailable(Exception):
    """The provider cannot run on this host; the message is the reason."""


def _checkpoint(model: str | None, extra: Mapping[str, Any]) -> ResolvedCheckpoint:
    if model:
        resolved = LocalCheckpoint(model).resolve()
    else:
        data = importlib.resources.files("ortplug.data") / "demo_static.onnx"
        resolved = InMemoryCheckpoint(data.read_bytes()).resolve()
    if extra:
        metadata = attrs.evolve(resolved.metadata, extra={**resolved.metadata.extra, **extra})
        resolved = attrs.evolve(resolved, metadata=metadata)
    return resolved


def _check_available(kind: str, checkpoint: ResolvedCheckpoint) -> str:
    """The ORT name of ``kind`` when the policy would pick it here; else raise ``_Unavailable``."""
    plugins = get_plugin_host()
    try:
        spec = plugins.provider_registry().lookup(kind)
    except ValueError as exc:
        raise _Unavailable(f"no installed plugin provides {kind!r} ({exc})") from exc
    host = plugins.host_capabilities()
    selection = DefaultProviderPolicy(plugins).explain(checkpoint.metadata, host, checkpoint)
    if kind not in [config.kind for config in selection.chain]:
        reasons = [d.reason for d in selection.declined if d.kind == kind]
        raise _Unavailable(reasons[0] if reasons else "the policy did not choose it")
    return str(spec.type.ort_name)


def _check_sessions(
    kind: str,
    ort_name: str,
    checkpoint: ResolvedCheckpoint,
    repeat: int,
    out: Callable[[str], None],
) -> float | None:
    """Build through the policy and explicitly; the provider's share of nodes (None: not realized)."""
    with OnnxBackend.from_checkpoint(checkpoint) as chosen:
        realized = list(chosen.providers)
        out(f"policy chain   {[k for k, _ in chosen.chain_reasons]} -> realized {realized}")
        if ort_name not in realized:
            rejected = [c.reason for c in chosen.report.candidates if kind in c.chain]
            why = rejected[0] if rejected else f"it was not realized: {chosen.build_messages}"
            out(f"FAILED: the policy chose {kind} but {why}")
            return None
    chain = list(dict.fromkeys([kind, "cpu"]))
    explicit = OnnxBackend.from_checkpoint(checkpoint, providers=chain)
    cpu = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
    with explicit, cpu:
        nodes = explicit.node_assignment()
        out(f"explicit chain {list(explicit.providers)}; nodes per provider {nodes}")
        feed = accepted_inputs(cpu.run, cpu.input_specs, checkpoint.metadata.extra).feed
        explicit.run(feed)
        cpu.run(feed)  # warm both before timing
        accelerated = median_ms(lambda: explicit.run(feed), repeat)
        baseline = median_ms(lambda: cpu.run(feed), repeat)
        out(
            f"latency        {kind} {accelerated:.3f} ms, cpu {baseline:.3f} ms "
            f"(ratio {accelerated / baseline:.2f}x over {repeat} runs)"
        )
    return nodes.get(ort_name, 0) / (sum(nodes.values()) or 1)


def run_smoke(
    kind: str,
    *,
    model: str | None = None,
    extra: Mapping[str, Any] | None = None,
    repeat: int = 50,
    out: Callable[[str], None] = print,
) -> int:
    """Run the smoke check for provider ``kind``; print what happened; return the exit code."""
    try:
        checkpoint = _checkpoint(model, extra or {})
        ort_name = _check_available(kind, checkpoint)
    except _Unavailable as exc:
        out(f"not available: {exc}")
        return EXIT_UNAVAILABLE
    out(f"{kind}: checking {checkpoint.label} ({ort_name})")
    try:
        share = _check_sessions(kind, ort_name, checkpoint, repeat, out)
    except Exception as exc:  # a smoke check reports every failure as one line
        out(f"FAILED: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    if share is None:
        return EXIT_FAILED
    if share < 0.5:
        out(f"FAILED: {ort_name} took {share:.0%} of the nodes; the rest fell back to CPU")
        return EXIT_FAILED
    out(f"ok: {ort_name} took {share:.0%} of the nodes")
    return EXIT_OK


def main(
    kind: str, argv: Sequence[str] | None = None, extra: Mapping[str, Any] | None = None
) -> int:
    """Command line of the smoke scripts: ``[--model M.onnx] [--repeat N]``."""
    parser = argparse.ArgumentParser(description=f"smoke check of the {kind} provider on this host")
    parser.add_argument("--model", help="an .onnx file (default: the static demo model)")
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per provider (50)")
    args = parser.parse_args(argv)
    return run_smoke(kind, model=args.model, extra=extra, repeat=args.repeat)
