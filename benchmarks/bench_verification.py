"""What verification costs a model's first build, against the verification of a baseline commit (main).

    python benchmarks/bench_verification.py [--reps 3] [--baseline main] [--models mlp light_squeezenet ...]

Per model of a small real set (an MLP built with ``onnx.helper``, light models shipped inside the
``onnx`` package, and ``magika``'s own model when it is installed), the median of ``--reps``
first builds, each on a fresh cache folder, nothing timed (``ORTPLUG_MEASURE=0``), the trees
interleaved, each rep in a fresh child process per tree (imports and the plugin scan are paid
before the builds are timed: what a fresh process pays besides is ``bench_proven_choice.py``'s):

* ``plain``  — ``verify=False``: the candidate built, nothing checked (this tree);
* ``now``    — this tree's verification (the installed ortplug): the first feed, the probe feeds
  (batches 1, 2, two drawn, 8 and 9, another size, magnitudes, ids), every output alone, the
  first feed after 10 runs, ``run_async``, runs at once on their own feeds where a provider
  declares them safe, the feeds again up to 100 runs or 1 s, the aliasing check and the reused
  IO binding;
* ``today``  — the baseline's (``--baseline``, a git ref of this repository, extracted with
  ``git archive`` and imported from there in its child processes: the same interpreter and
  ONNX Runtime).

The candidate is ortplug's test provider (``ortplug_misbehaving``, ``"slow"`` with no
delay: ONNX Runtime's CPU kernels under another provider's name, so it must be verified on a
CPU-only host) in an explicit chain ``[misbehaving, cpu]``; its runs cost what the CPU
provider's cost, where an accelerator's may cost less (or, on a software GPU, far more).
``verdict ms`` is what the verdict itself took (the CPU reference built and run included);
``runs`` how many labelled runs each covered (besides the reused IO binding's). Last, the spot
check's own cost per call at its default rate, from ``bench_real_traffic.py`` (its
``bench_tap``). Needs ``onnx`` and ``git`` besides ortplug[cpu].
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
TREES = ("now", "today")


def build(verify: bool, model: Path, scratch: Path) -> tuple[float, float | None, int]:
    """One first build on a fresh cache: its ms, the verdict's ms and its runs."""
    from ortplug import LocalCheckpoint, OnnxBackend
    from ortplug.settings import refresh_settings
    from ortplug.testing import make_plugin_host
    from ortplug_misbehaving import MisbehavingPlugin, MisbehavingProvider

    os.environ["ORTPLUG_CACHE_DIR"] = tempfile.mkdtemp(dir=scratch)
    refresh_settings()
    plugins = make_plugin_host(("bench", MisbehavingPlugin("slow", delay_s=0)))
    checkpoint = LocalCheckpoint(model).resolve()
    chain = [MisbehavingProvider("slow", 0), "cpu"]
    started = time.perf_counter()
    backend = OnnxBackend.from_checkpoint(checkpoint, providers=chain, plugins=plugins,
                                          verify=None if verify else False, measure=False)  # fmt: skip
    ms = (time.perf_counter() - started) * 1e3
    verdict = backend.report.verification
    backend.close()
    if verdict is not None and not verdict.passed:
        raise SystemExit(f"{model.name}: {verdict.describe()}")
    if verdict is None:
        return ms, None, 0
    return ms, verdict.cost_ms, len(verdict.covered)


def _models(names: list[str], scratch: Path) -> Iterator[tuple[str, Path]]:
    from bench_proven_choice import mlp

    for name in names:
        if name == "mlp":
            yield "mlp 64-256-256-10", mlp(scratch / "mlp.onnx")
        elif name == "magika":
            spec = importlib.util.find_spec("magika")
            if spec is None or spec.origin is None:
                continue
            found = sorted(Path(spec.origin).parent.glob("models/*/model.onnx"))
            if found:
                yield f"magika {found[-1].parent.name}", found[-1]
        else:
            yield name, LIGHT / f"{name}.onnx"


def child(models: list[str], plain: bool) -> None:
    """One rep of every model in this process's ortplug: JSON on stdout."""
    os.environ["ORTPLUG_MEASURE"] = "0"
    warnings.simplefilter("ignore")  # the test provider is not an accelerator ortplug knows
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-verification-") as folder:
        scratch = Path(folder)
        for label, model in _models(models, scratch):
            build(True, model, scratch)  # imports, kernels: paid once before the timed builds
            ms, verdict_ms, runs = build(True, model, scratch)
            out[label] = {"ms": ms, "verdict_ms": verdict_ms, "runs": runs}
            if plain:
                out[label]["plain_ms"] = build(False, model, scratch)[0]
    print(json.dumps(out))


def _baseline(ref: str, scratch: Path) -> Path:
    """``ref``'s ``core/src``, extracted: where the baseline's ortplug is imported from."""
    repo = HERE.parent
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "core/src"],
                             capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    return scratch / "core" / "src"


def _rep(tree: str, models: list[str], baseline: Path) -> dict[str, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        ([str(baseline)] if tree == "today" else []) + [str(HERE)])}  # fmt: skip
    command = [sys.executable, __file__, "--child", "--models", *models]
    if tree == "now":
        command.append("--plain")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--models",
        nargs="*",
        default=["mlp", "light_squeezenet", "light_shufflenet", "light_resnet50", "magika"],
    )
    args = parser.parse_args()
    if args.child:
        child(args.models, args.plain)
        return
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs; median of {args.reps} first builds; "
          f"today = {args.baseline}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-verification-") as folder:
        baseline = _baseline(args.baseline, Path(folder))
        reps: dict[str, list[dict[str, dict[str, float]]]] = {tree: [] for tree in TREES}
        for rep in range(args.reps):
            for tree in TREES[rep % 2 :] + TREES[: rep % 2]:  # alternated: neither always first
                reps[tree].append(_rep(tree, args.models, baseline))
        print(f"{'model':<24}{'plain ms':>9}{'today ms':>10}{'now ms':>9}{'now/today':>10}"
              f"{'verdict ms today':>18}{'now':>8}{'now/today':>10}{'runs':>11}")  # fmt: skip
        for label in reps["now"][0]:

            def med(tree: str, field: str, label: str = label) -> float:
                return statistics.median(r[label][field] for r in reps[tree])

            plain, today, now = med("now", "plain_ms"), med("today", "ms"), med("now", "ms")
            vtoday, vnow = med("today", "verdict_ms"), med("now", "verdict_ms")
            runs = f"{reps['today'][0][label]['runs']:.0f} / {reps['now'][0][label]['runs']:.0f}"
            print(f"{label:<24}{plain:>9,.0f}{today:>10,.0f}{now:>9,.0f}{now / today:>9.2f}x"
                  f"{vtoday:>18,.0f}{vnow:>8,.0f}{vnow / vtoday:>9.2f}x{runs:>11}")  # fmt: skip
    from bench_backend import tiny_model
    from bench_real_traffic import bench_tap

    print(
        "\nthe spot check after a switch, at its default rate (bench_real_traffic.py's bench_tap):"
    )
    with tempfile.TemporaryDirectory() as folder:
        tiny = tiny_model(Path(folder) / "tiny.onnx")
        ones = np.ones((1, 4), np.float32)
        bench_tap(tiny, {"a": ones, "b": ones}, 7, 20000)


if __name__ == "__main__":
    main()
