"""The ``doctor`` and ``inspect`` commands."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from ..backend import OnnxBackend
from ..checkpoint import LocalCheckpoint
from ..checkpoint.onnx_wire import summarize_file
from ..plugin_host.manager import get_plugin_host
from ..printable import printable
from ._doctor import run_checks
from ._json import print_json

__all__ = ["doctor", "inspect"]


def doctor(args: argparse.Namespace) -> int:
    """Run every check; print each with its fix; exit 1 when something is wrong."""
    if args.fix or args.yes:
        from ._fix import fix

        return fix(args)
    checks = run_checks(get_plugin_host())
    failed = [c for c in checks if not c.ok]
    if args.json:
        print_json({"ok": not failed, "checks": [c.to_dict() for c in checks]})
    else:
        for check in checks:  # names and details may quote hardware, probes, declarations
            print(printable(f"{'ok  ' if check.ok else 'FAIL'}  {check.name:<28} {check.detail}"))
            if not check.ok:
                print(printable(f"      {'':<28} fix: {check.fix}"))
        print(f"{len(failed)} problem(s) found" if failed else "no problems found")
    return 1 if failed else 0


#: A symbolic dimension longer than this is shown cut (``--json`` has it whole).
_LONG_DIM = 50


def _shape(shape: Any, symbols: Sequence[str] = ()) -> str:
    if shape is None:
        return "[any]"
    return "[" + ", ".join(_dim(d, symbols) for d in shape) + "]"


def _dim(dim: Any, symbols: Sequence[str]) -> str:
    """A dimension as shown: a long expression cut, with the input dimensions it is of."""
    text = "?" if dim is None else str(dim)
    if len(text) <= _LONG_DIM:
        return text
    used = [s for s in symbols if re.search(rf"(?<![\w.]){re.escape(s)}(?![\w.])", text)]
    of = f" of {', '.join(used)}" if used else ""
    return f"{text[:_LONG_DIM]}… (a {len(text)}-character expression{of})"


def inspect(args: argparse.Namespace) -> int:
    """A model's interface, metadata and where the current policy would run its nodes."""
    checkpoint = LocalCheckpoint(args.model).resolve()
    path = checkpoint.weights_path  # a model package's reference weights
    assert path is not None  # a checkpoint on disk
    summary = summarize_file(path)
    with OnnxBackend.from_checkpoint(checkpoint) as backend:
        report = backend.report
        data: dict[str, Any] = {
            "model": str(path),
            "producer": summary.producer,
            "graph": summary.graph_name,
            "opsets": {domain or "ai.onnx": version for domain, version in summary.opsets},
            "metadata": checkpoint.metadata.to_dict(),
            "inputs": [
                {"name": i.name, "type": i.type, "shape": list(i.shape or ())}
                for i in backend.inputs
            ],
            "outputs": [
                {"name": o.name, "type": o.type, "shape": list(o.shape or ())}
                for o in backend.outputs
            ],
            "placement": report.to_dict(),
            "variants": [
                {**v.to_dict(), "tolerance": v.effective_tolerance.to_dict()}
                for v in checkpoint.metadata.variants
            ],
        }
    if args.json:
        print_json(data)
        return 0
    meta = checkpoint.metadata
    print(f"model      {path} ({path.stat().st_size} bytes)")
    print(f"producer   {summary.producer or '?'}; graph {summary.graph_name or '?'}; opsets "
          + ", ".join(f"{d} {v}" for d, v in data["opsets"].items()))  # fmt: skip
    print(f"metadata   {meta.model_family}, {meta.precision}, "
          f"{'static' if meta.static_shapes else 'dynamic'} shapes")  # fmt: skip
    named = (d for i in data["inputs"] for d in i["shape"] if isinstance(d, str))
    symbols = list(dict.fromkeys(d for d in named if len(d) <= _LONG_DIM))  # the inputs' own
    for kind in ("input", "output"):
        for item in data[kind + "s"]:
            print(f"{kind:<10} {item['name']}: {item['type']} {_shape(item['shape'], symbols)}")
    for variant in checkpoint.metadata.variants:
        made_for = f", for {variant.ep}" if variant.ep else ""
        print(f"variant    {variant.name}: {variant.file} ({variant.precision}, "
              f"{variant.effective_tolerance.describe()}{made_for})")  # fmt: skip
    for line in report.lines():
        print(line)
    return 0
