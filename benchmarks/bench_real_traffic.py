"""What checking on real traffic costs the caller of a startup fallback, per call.

    python benchmarks/bench_real_traffic.py [--rounds 15] [--calls 2000]
    python benchmarks/bench_real_traffic.py --exposure [--trials 12]   (bench_exposure.py: wrong
        results after a takeover, measured against the statement in ortplug.pipeline.real_traffic)

1. after the switch: ``OnnxBackend.run`` on the candidate with the spot check off
   (``spot_check=0``), at its default rate (0.01) and at 0.1;
2. before it: the CPU reference serving alone, and serving while the candidate shadows it;
3. what the spot check adds to a call by itself: a run that returns at once, bare and tapped
   at the default rate (no ONNX Runtime run in the way of the measurement).

The candidate is ortplug's test provider (``ortplug_misbehaving``, ``"magnitude"`` fed
values below its threshold: ONNX Runtime's CPU kernels under another provider's name, right, so
it verifies on every host; its own cost, a look at the inputs, is in every row after the
switch, and its runs compete with the CPU reference's for the same cores while it shadows), on
the tiny Add model of ``bench_backend.py`` and the ``onnx`` package's light_squeezenet, medians
of interleaved rounds. Needs the ``onnx`` package besides ortplug[cpu].
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from bench_backend import interleaved, per_call_us, report, tiny_model
from ortplug import LocalCheckpoint, OnnxBackend
from ortplug.pipeline.real_traffic import DECAY
from ortplug.pipeline.traffic_check import TrafficCheck
from ortplug.settings import Settings
from ortplug.testing import make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin


def _backend(model: Path, **traffic: float) -> OnnxBackend:
    """A startup fallback whose candidate serves (or shadows, with ``real_traffic_checks`` huge)."""
    plugins = make_plugin_host(("bench", MisbehavingPlugin("magnitude", magnitude=1e9)))
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(model).resolve(),
        plugins=plugins,
        startup_fallback=True,
        measure=False,
        **traffic,  # type: ignore[arg-type]
    )
    deadline = time.monotonic() + 120
    while not (backend.wait_ready(0.01) or backend.shadowing):
        if time.monotonic() > deadline:
            raise SystemExit(f"{model.name}: no candidate came up: {backend.startup_status}")
    return backend


def bench(label: str, model: Path, feed: dict[str, np.ndarray], rounds: int, calls: int) -> None:
    after = {
        "spot_check=0": _backend(model, real_traffic_checks=0, spot_check=0.0),
        "spot_check=0.01 (default)": _backend(model, real_traffic_checks=0),
        "spot_check=0.1": _backend(model, real_traffic_checks=0, spot_check=0.1),
    }
    before = {
        "CPU alone": OnnxBackend.from_checkpoint(
            LocalCheckpoint(model).resolve(), providers=["cpu"]
        ),
        "CPU, candidate shadowing": _backend(model, real_traffic_checks=10**9),
    }
    for name, backend in {**after, **before}.items():
        if name != "CPU alone" and not (backend.wait_ready(0) or backend.shadowing):
            raise SystemExit(f"{label}: {name}: {backend.startup_status}")
    for group, title, base in (
        (after, f"1. per call after the switch, {label}", "spot_check=0"),
        (before, f"2. per call before it, {label}", "CPU alone"),
    ):
        fns: dict[str, Callable[[], object]] = {
            n: (lambda b=b: b.run(feed)) for n, b in group.items()
        }
        for fn in fns.values():
            per_call_us(fn, max(10, calls // 10))  # warm up
        samples = interleaved(
            {n: (lambda fn=fn: per_call_us(fn, calls)) for n, fn in fns.items()}, rounds
        )
        report(f"{title} ({rounds} rounds x {calls} calls)", samples, base, "us")
    for name, backend in {**after, **before}.items():
        print(f"  {name}: {backend.startup_status or 'no startup fallback'}")
        backend.close()


#: The spot check's default share (``ORTPLUG_SPOT_CHECK`` unset).
DEFAULT_SPOT_CHECK = Settings().spot_check


def bench_tap(model: Path, feed: dict[str, np.ndarray], rounds: int, calls: int) -> None:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    results = session.run(None, feed)
    names = [output.name for output in session.get_outputs()]
    check = TrafficCheck(
        session, lambda request, outcome: True, name="bench", capacity=1,
        rate=DEFAULT_SPOT_CHECK, cpu_share=0.1, decay=DECAY,
    )  # fmt: skip

    def bare(names: list[str], feed: object) -> list[np.ndarray]:
        return results

    tapped = check.wrap(bare, None)
    for _ in range(DECAY * 200):  # past the high share right after a takeover: the default rate
        tapped(names, feed)
    runs = {"bare": bare, f"tapped at {DEFAULT_SPOT_CHECK}": tapped}
    samples = interleaved(
        {n: (lambda r=r: per_call_us(lambda: r(names, feed), calls)) for n, r in runs.items()},
        rounds,
    )
    report(f"3. the spot check's own cost per call ({rounds} rounds x {calls} calls)", samples,
           "bare", "us")  # fmt: skip
    check.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--exposure", action="store_true", help="run bench_exposure.py instead")
    args, rest = parser.parse_known_args()
    if args.exposure:
        import bench_exposure

        bench_exposure.main(rest)
        return
    print(f"onnxruntime {ort.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    warnings.simplefilter("ignore")  # the test provider is not an accelerator it knows
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ORTPLUG_CACHE_DIR"] = tmp  # verdicts of this run only
        tiny = tiny_model(Path(tmp) / "tiny.onnx")
        ones = np.ones((1, 4), np.float32)
        bench("tiny Add [1,4]", tiny, {"a": ones, "b": ones}, args.rounds, args.calls)
        bench_tap(tiny, {"a": ones, "b": ones}, args.rounds, args.calls * 10)
        squeeze = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
        image = {"data_0": np.random.default_rng(0).random((1, 3, 224, 224), np.float32)}
        rounds, calls = max(3, args.rounds // 3), max(20, args.calls // 100)
        bench("light_squeezenet", squeeze, image, rounds, calls)


if __name__ == "__main__":
    main()
