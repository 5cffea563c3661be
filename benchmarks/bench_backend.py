"""Benchmarks of ortplug against raw ONNX Runtime, printed as ratios measured in one run.

    python benchmarks/bench_backend.py [--rounds 15] [--calls 2000]

1. per-call cost of OnnxBackend.run vs raw InferenceSession.run(None, feed) vs a
   seed-style wrapper (output names from get_outputs() and a dict built every call),
   on a tiny model (Add of two [1, 4] float32), interleaved in rounds;
2. ``import ortplug`` vs ``import numpy`` and CLI start-up, in fresh processes;
3. session build through the policy vs a raw InferenceSession;
4. intra-op thread spinning on vs off (latency and CPU time per call).

Needs the ``onnx`` package (to build the tiny model) besides ortplug[cpu].
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper
from ortplug import LocalCheckpoint, OnnxBackend, PluginHost, SessionOptionsConfig
from ortplug_cpu import CpuProvider

CPU = ["CPUExecutionProvider"]


def tiny_model(path: Path) -> Path:
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "ab"]
    out = helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "tiny", inputs, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def interleaved(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every variant once per round, rotating the order, and collect the samples."""
    names = list(variants)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(variants[name]())
    return samples


def report(title: str, samples: dict[str, list[float]], base: str, unit: str) -> None:
    print(f"\n{title}")
    print(f"  {'variant':<34}{'median ' + unit:>14}{'ratio vs ' + base:>22}")
    for name, values in samples.items():
        ratios = [v / b for v, b in zip(values, samples[base])]
        print(
            f"  {name:<34}{statistics.median(values):>14.3f}"
            f"{statistics.median(ratios):>16.3f}  (per-round min {min(ratios):.3f}, max {max(ratios):.3f})"
        )


def bench_run(model: Path, rounds: int, calls: int) -> None:
    session = ort.InferenceSession(str(model), providers=CPU)
    backend = OnnxBackend.from_checkpoint(LocalCheckpoint(model).resolve(), providers=["cpu"])
    feed = {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)}

    def seed_style() -> dict[str, np.ndarray]:
        names = [o.name for o in session.get_outputs()]
        return {n: v for n, v in zip(names, session.run(names, feed))}

    into = {"c": np.empty((1, 4), np.float32)}
    raw_binding = session.io_binding()
    for name, value in feed.items():
        raw_binding.bind_cpu_input(name, value)
    raw_binding.bind_output("c", "cpu")
    bound = backend.bind().bind_input("a", feed["a"]).bind_input("b", feed["b"])
    bound.bind_output("c", np.empty((1, 4), np.float32))

    calls_by_variant: dict[str, Callable[[], object]] = {
        "raw sess.run(None, feed)": lambda: session.run(None, feed),
        "OnnxBackend.run(feed)": lambda: backend.run(feed),
        "seed-style wrapper": seed_style,
        "OnnxBackend.run_into(feed, out)": lambda: backend.run_into(feed, into),
        "raw run_with_iobinding (floor)": lambda: session.run_with_iobinding(raw_binding),
        "Binding.run() (bound once)": bound.run,
    }
    for fn in calls_by_variant.values():
        per_call_us(fn, 500)  # warm up
    samples = interleaved(
        {name: (lambda fn=fn: per_call_us(fn, calls)) for name, fn in calls_by_variant.items()},
        rounds,
    )
    report(f"1. per-call cost, tiny Add [1,4] ({rounds} rounds x {calls} calls)", samples,
           "raw sess.run(None, feed)", "us")  # fmt: skip


def fresh_process_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1e3


def bench_startup(rounds: int) -> None:
    py = sys.executable
    cli = shutil.which("ortplug", path=os.path.dirname(py)) or "ortplug"
    samples = interleaved(
        {
            "python -c 'import numpy'": lambda: fresh_process_ms([py, "-c", "import numpy"]),
            "python -c 'import ortplug'": lambda: fresh_process_ms([py, "-c", "import ortplug"]),
            "python -c 'import onnxruntime'": lambda: fresh_process_ms(
                [py, "-c", "import onnxruntime"]
            ),
            "ortplug --help": lambda: fresh_process_ms([cli, "--help"]),
            "ortplug run --repeat 1": lambda: fresh_process_ms([cli, "run", "--repeat", "1"]),
        },
        rounds,
    )
    report(f"2. start-up in fresh processes ({rounds} rounds)", samples,
           "python -c 'import numpy'", "ms")  # fmt: skip
    extra = [o - n for o, n in zip(samples["python -c 'import ortplug'"],
                                   samples["python -c 'import numpy'"])]  # fmt: skip
    print(
        f"  import ortplug costs {statistics.median(extra):.1f} ms more than import numpy (median)"
    )


def bench_build(model: Path, rounds: int, label: str) -> None:
    # The CPU plugin only, so the policy picks the provider raw ORT uses: the ratio is
    # ortplug's own cost (another installed provider, e.g. OpenVINO, would time its compile).
    plugins = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu"})
    checkpoint = LocalCheckpoint(model).resolve()
    OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)  # probe the host once

    def timed(fn: Callable[[], object], n: int = 20) -> float:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n * 1e3

    samples = interleaved(
        {
            "raw InferenceSession(path)": lambda: timed(
                lambda: ort.InferenceSession(str(model), providers=CPU)
            ),
            "OnnxBackend.from_checkpoint (policy)": lambda: timed(
                lambda: OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
            ),
            "resolve + from_checkpoint (policy)": lambda: timed(
                lambda: OnnxBackend.from_checkpoint(
                    LocalCheckpoint(model).resolve(), plugins=plugins
                )
            ),
        },
        rounds,
    )
    report(f"3. session build, {label} ({rounds} rounds x 20 builds)", samples,
           "raw InferenceSession(path)", "ms")  # fmt: skip


def bench_spinning(models: dict[str, tuple[Path, dict[str, np.ndarray]]], rounds: int) -> None:
    print("\n4. intra-op spinning, 2 threads: median latency and CPU time per call")
    for label, (path, feed) in models.items():
        backends = {
            spin: OnnxBackend.from_checkpoint(
                LocalCheckpoint(path).resolve(),
                providers=[CpuProvider(threads=2, allow_spinning=spin)],
                session_options=SessionOptionsConfig(inter_op_num_threads=1),
            )
            for spin in (True, False)
        }
        calls = 2000 if label == "tiny" else 30
        results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(rounds):
            for spin, backend in backends.items():
                backend.run(feed)
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    backend.run(feed)
                results[spin].append(
                    (
                        (time.perf_counter() - wall) / calls * 1e3,
                        (time.process_time() - cpu) / calls * 1e3,
                    )
                )
        for spin in (True, False):
            wall = statistics.median(w for w, _ in results[spin])
            cpu = statistics.median(c for _, c in results[spin])
            print(
                f"  {label:<12} spinning {'on ' if spin else 'off'}  latency {wall:8.4f} ms  CPU {cpu:8.4f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp) / "tiny.onnx")
        bench_run(model, args.rounds, args.calls)
        bench_startup(max(5, args.rounds // 2))
        import onnx

        squeeze = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
        bench_build(model, args.rounds, "tiny model")
        bench_build(squeeze, max(3, args.rounds // 3), "light_squeezenet")
        tiny_feed = {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)}
        squeeze_feed = {"data_0": np.random.default_rng(0).random((1, 3, 224, 224), np.float32)}
        bench_spinning(
            {"tiny": (model, tiny_feed), "squeezenet": (squeeze, squeeze_feed)},
            max(3, args.rounds // 3),
        )


if __name__ == "__main__":
    main()
