"""What verification on several inputs costs a model's first build, against the single-feed one it replaced.

    python benchmarks/bench_verification.py [--reps 3] [--models mlp light_squeezenet ...]

Per model of a small real set (an MLP built with ``onnx.helper``, light models shipped inside the
``onnx`` package, and ``magika``'s own model when it is installed), the median of ``--reps``
first builds, each on a fresh cache folder, nothing timed (``ORTPLUG_MEASURE=0``), the modes
interleaved, all in one process (imports and the plugin scan are paid before: what a fresh
process pays besides is ``bench_proven_choice.py``'s):

* ``plain``     — ``verify=False``: the candidate built, nothing checked;
* ``now``       — this verification: the first feed, the probe feeds (batches, another size,
  magnitudes, ids), the first feed after 10 runs, an output alone, ``run_async``, and the reused
  IO binding;
* ``previous``  — the verification it replaced, emulated: one plain run of the first feed and the
  reused IO binding. The library keeps no switch for it: this script replaces the private
  ``ortplug.verification.verifier.Verifier._measure`` with a single first-feed run while it builds
  in this mode (nothing else is patched, and nothing outside this script changes).

The candidate is ortplug's test provider (``ortplug.testing.misbehaving``, ``"slow"`` with no
delay: ONNX Runtime's CPU kernels under another provider's name, so it must be verified on a
CPU-only host) in an explicit chain ``[misbehaving, cpu]``; its runs cost what the CPU
provider's cost, where an accelerator's may cost less (or, on a software GPU, far more).
``verdict ms`` is what the verdict itself took (the CPU reference built and run included), with
the ratio of this verification's to the previous one's; ``runs`` how many labelled runs each
covered (besides the reused IO binding's). Last, the spot check's own cost per call at its
default rate, from ``bench_real_traffic.py`` (its ``bench_tap``). Needs ``onnx`` besides
ortplug[cpu].
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from bench_backend import tiny_model
from bench_proven_choice import LIGHT, mlp
from bench_real_traffic import bench_tap
from ortplug import LocalCheckpoint, OnnxBackend
from ortplug.backend import verifier as _verified
from ortplug.testing import make_plugin_host
from ortplug.testing.misbehaving import MisbehavingPlugin, MisbehavingProvider

MODES = ("plain", "now", "previous")


def _first_feed_only(self: Any, session: Any, findings: Any) -> str | None:
    """``Verifier._measure`` as it was before the probes: one plain run of the first feed."""
    expected = self._reference_run()
    first = _verified._fed_as(session, expected.feed)
    try:
        outputs = _verified._outputs(session, first)
    except Exception as exc:
        return f"it raised on inputs the CPU reference runs: {exc}"
    findings.judge("the first feed", expected.outputs, outputs)
    return None


@contextmanager
def _previous_verification() -> Iterator[None]:
    measure = _verified.Verifier._measure
    _verified.Verifier._measure = _first_feed_only  # type: ignore[method-assign]
    try:
        yield
    finally:
        _verified.Verifier._measure = measure  # type: ignore[method-assign]


def build(mode: str, model: Path, scratch: Path) -> tuple[float, float | None, int]:
    """One first build in ``mode`` on a fresh cache: its ms, the verdict's ms and its runs."""
    os.environ["ORTPLUG_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch)
    plugins = make_plugin_host(("bench", MisbehavingPlugin("slow", delay_s=0)))
    checkpoint = LocalCheckpoint(model).resolve()
    chain = [MisbehavingProvider("slow", 0), "cpu"]
    verify = False if mode == "plain" else None
    with _previous_verification() if mode == "previous" else nullcontext():
        started = time.perf_counter()
        backend = OnnxBackend.from_checkpoint(checkpoint, providers=chain, plugins=plugins,
                                              verify=verify, measure=False)  # fmt: skip
        ms = (time.perf_counter() - started) * 1e3
    verdict = backend.report.verification
    backend.close()
    if verdict is not None and not verdict.passed:
        raise SystemExit(f"{model.name} ({mode}): {verdict.describe()}")
    if verdict is None:
        return ms, None, 0
    return ms, verdict.cost_ms, len(verdict.covered)


def _models(names: list[str], scratch: Path) -> Iterator[tuple[str, Path]]:
    for name in names:
        if name == "mlp":
            yield "mlp 64-256-256-10", mlp(scratch / "mlp.onnx")
        elif name == "magika":
            spec = importlib.util.find_spec("magika")
            if spec is None or spec.origin is None:
                print("magika: not installed, skipped")
                continue
            found = sorted(Path(spec.origin).parent.glob("models/*/model.onnx"))
            if not found:
                print("magika: no model.onnx in the installed package, skipped")
                continue
            yield f"magika {found[-1].parent.name}", found[-1]
        else:
            yield name, LIGHT / f"{name}.onnx"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--models",
        nargs="*",
        default=["mlp", "light_squeezenet", "light_shufflenet", "light_resnet50", "magika"],
    )
    args = parser.parse_args()
    os.environ["ORTPLUG_MEASURE"] = "0"
    warnings.simplefilter("ignore")  # the test provider is not an accelerator ortplug knows
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs; median of {args.reps} first builds")  # fmt: skip
    print(f"{'model':<24}{'plain ms':>9}{'now ms':>16}{'previous ms':>16}"
          f"{'verdict ms now / previous':>34}{'runs':>9}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-verification-") as folder:
        scratch = Path(folder)
        for label, model in _models(args.models, scratch):
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            verdicts: dict[str, list[float]] = {mode: [] for mode in MODES}
            runs: dict[str, int] = {}
            for rep in range(args.reps):
                for mode in MODES[rep % 3 :] + MODES[: rep % 3]:  # rotated: no mode always first
                    ms, verdict_ms, covered = build(mode, model, scratch)
                    times[mode].append(ms)
                    if verdict_ms is not None:
                        verdicts[mode].append(verdict_ms)
                    runs[mode] = covered
            med = {mode: statistics.median(values) for mode, values in times.items()}
            now, previous = (f"{med[m]:,.0f} ({med[m] / med['plain']:.2f}x)" for m in MODES[1:])
            checked = [statistics.median(verdicts[m]) for m in MODES[1:]]
            verdict = f"{checked[0]:,.0f} / {checked[1]:,.0f} ({checked[0] / checked[1]:.2f}x)"
            print(f"{label:<24}{med['plain']:>9,.0f}{now:>16}{previous:>16}{verdict:>34}"
                  f"{runs['now']:>5} / {runs['previous']}")  # fmt: skip
        print("\nthe spot check after a switch (bench_real_traffic.py's bench_tap):", end="")
        tiny = tiny_model(scratch / "tiny.onnx")
        ones = np.ones((1, 4), np.float32)
        bench_tap(tiny, {"a": ones, "b": ones}, 7, 20000)


if __name__ == "__main__":
    main()
