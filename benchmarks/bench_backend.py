"""Benchmarks of ortplug against raw ONNX Runtime, printed as ratios measured in one run.

    python benchmarks/bench_backend.py [--rounds 15] [--calls 2000]

1. per-call cost of OnnxBackend.run vs raw InferenceSession.run(None, feed) vs a
   seed-style wrapper (output names from get_outputs() and a dict built every call),
   on a tiny model (Add of two [1, 4] float32), interleaved in rounds;
2. ``import ortplug`` vs ``import numpy`` and CLI start-up, in fresh processes;
3. session build through the policy vs a raw InferenceSession;
4. intra-op thread spinning on vs off (latency and CPU time per call).

``--against PYTHON`` runs sections 1 to 3 under another interpreter with ortplug installed too
(an older checkout's venv, say), round by round in the same run, each of its lines marked
``[against]``: a before/after comparison on the same machine state. Sections 1 and 3 then run
each round in a fresh child process per side (each side's ratio is to its own raw ONNX Runtime).

Needs the ``onnx`` package (to build the tiny model) besides ortplug[cpu].
"""

from __future__ import annotations

import argparse
import json
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


def run_variants(model: Path) -> dict[str, Callable[[], object]]:
    """Section 1's variants: each a call to time."""
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

    return {
        "raw sess.run(None, feed)": lambda: session.run(None, feed),
        "OnnxBackend.run(feed)": lambda: backend.run(feed),
        "seed-style wrapper": seed_style,
        "OnnxBackend.run_into(feed, out)": lambda: backend.run_into(feed, into),
        "raw run_with_iobinding (floor)": lambda: session.run_with_iobinding(raw_binding),
        "Binding.run() (bound once)": bound.run,
    }


def bench_run(model: Path, rounds: int, calls: int, against: str | None) -> None:
    title = f"1. per-call cost, tiny Add [1,4] ({rounds} rounds x {calls} calls)"
    if against is not None:  # each side in fresh child processes, round by round
        pythons = {"": sys.executable, " [against]": against}
        for label, samples in _rounds_in_children(pythons, "run", model, rounds, calls).items():
            report(f"{title}{label}", samples, "raw sess.run(None, feed)", "us")
        return
    calls_by_variant = run_variants(model)
    for fn in calls_by_variant.values():
        per_call_us(fn, 500)  # warm up
    variants = {
        name: (lambda fn=fn: per_call_us(fn, calls)) for name, fn in calls_by_variant.items()
    }
    report(title, interleaved(variants, rounds), "raw sess.run(None, feed)", "us")


def _rounds_in_children(
    pythons: dict[str, str], section: str, model: Path, rounds: int, calls: int
) -> dict[str, dict[str, list[float]]]:
    """``section``'s samples under each interpreter: per round one child process each, their
    order alternating; each child interleaves the round's variants as this process does."""
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in pythons}
    for index in range(rounds):
        order = list(pythons) if index % 2 == 0 else list(reversed(pythons))
        for label in order:
            argv = [pythons[label], __file__, "--one-round", section, "--model", str(model)]
            done = subprocess.run(
                [*argv, "--calls", str(calls)], check=True, capture_output=True, text=True
            )
            for name, value in json.loads(done.stdout).items():
                samples[label].setdefault(name, []).append(value)
    return samples


def one_round(section: str, model: Path, calls: int) -> dict[str, float]:
    """One round of ``section`` in this process (for another interpreter's ``--against``)."""
    if section == "run":
        variants = run_variants(model)
        for fn in variants.values():
            per_call_us(fn, 500)
        return {name: per_call_us(fn, calls) for name, fn in variants.items()}
    return {name: fn() for name, fn in build_variants(model).items()}


def fresh_process_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1e3


def _startup_variants(py: str, mark: str = "") -> dict[str, Callable[[], float]]:
    cli = shutil.which("ortplug", path=os.path.dirname(py)) or "ortplug"
    return {
        f"python -c 'import numpy'{mark}": lambda: fresh_process_ms([py, "-c", "import numpy"]),
        f"python -c 'import ortplug'{mark}": lambda: fresh_process_ms([py, "-c", "import ortplug"]),
        f"python -c 'import onnxruntime'{mark}": lambda: fresh_process_ms(
            [py, "-c", "import onnxruntime"]
        ),
        f"ortplug --help{mark}": lambda: fresh_process_ms([cli, "--help"]),
        f"ortplug run --repeat 1{mark}": lambda: fresh_process_ms([cli, "run", "--repeat", "1"]),
    }


def bench_startup(rounds: int, against: str | None) -> None:
    variants = _startup_variants(sys.executable)
    if against is not None:
        variants |= _startup_variants(against, " [against]")
    samples = interleaved(variants, rounds)
    report(f"2. start-up in fresh processes ({rounds} rounds)", samples,
           "python -c 'import numpy'", "ms")  # fmt: skip
    extra = [o - n for o, n in zip(samples["python -c 'import ortplug'"],
                                   samples["python -c 'import numpy'"])]  # fmt: skip
    print(
        f"  import ortplug costs {statistics.median(extra):.1f} ms more than import numpy (median)"
    )


def build_variants(model: Path) -> dict[str, Callable[[], float]]:
    """Section 3's variants: each 20 builds, timed."""
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

    return {
        "raw InferenceSession(path)": lambda: timed(
            lambda: ort.InferenceSession(str(model), providers=CPU)
        ),
        "OnnxBackend.from_checkpoint (policy)": lambda: timed(
            lambda: OnnxBackend.from_checkpoint(checkpoint, plugins=plugins)
        ),
        "resolve + from_checkpoint (policy)": lambda: timed(
            lambda: OnnxBackend.from_checkpoint(LocalCheckpoint(model).resolve(), plugins=plugins)
        ),
    }


def bench_build(model: Path, rounds: int, label: str, against: str | None) -> None:
    title = f"3. session build, {label} ({rounds} rounds x 20 builds)"
    if against is not None:  # each side in fresh child processes, round by round
        pythons = {"": sys.executable, " [against]": against}
        for mark, samples in _rounds_in_children(pythons, "build", model, rounds, 0).items():
            report(f"{title}{mark}", samples, "raw InferenceSession(path)", "ms")
        return
    report(title, interleaved(build_variants(model), rounds), "raw InferenceSession(path)", "ms")


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
    parser.add_argument("--against", metavar="PYTHON", help="also time sections 1-3 under PYTHON")
    parser.add_argument("--one-round", choices=["run", "build"], help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:  # a child of --against: one round, as JSON
        print(json.dumps(one_round(args.one_round, args.model, args.calls)))
        return
    print(f"onnxruntime {ort.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp) / "tiny.onnx")
        bench_run(model, args.rounds, args.calls, args.against)
        bench_startup(max(5, args.rounds // 2), args.against)
        import onnx

        squeeze = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
        bench_build(model, args.rounds, "tiny model", args.against)
        bench_build(squeeze, max(3, args.rounds // 3), "light_squeezenet", args.against)
        tiny_feed = {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)}
        squeeze_feed = {"data_0": np.random.default_rng(0).random((1, 3, 224, 224), np.float32)}
        bench_spinning(
            {"tiny": (model, tiny_feed), "squeezenet": (squeeze, squeeze_feed)},
            max(3, args.rounds // 3),
        )


if __name__ == "__main__":
    main()
