"""Precision variants and verification, measured in one run, as ratios.

    python benchmarks/bench_variants.py [--rounds 7] [--calls 30] [--skip-webgpu]

1. An MLP (512 -> 3x1024 -> 10, batch 32) and light_resnet50 (the onnx package's test
   model, its ConstantOfShape weights replaced by seeded random ones) with int8 and fp16
   variants built by ``ortplug_variants`` (the variants add-on): which variant the default policy
   picks on this host (its own CPU probe: VNNI/AMX or not), its verdict, and its median
   latency against the CPU provider on the fp32 reference, interleaved in rounds.
2. A deliberately broken int8 variant (calibrated on inputs 1000x too small): the
   policy's warning, with the output, the difference and the tolerance.
3. WebGPU on this host's adapter (lavapipe needs ORTPLUG_WEBGPU_ALLOW_SOFTWARE=1, which
   this script sets): an fp16 variant verified within the fp16 tolerance, then rejected
   under rtol=1e-4 atol=1e-5, where fp32 on WebGPU serves.
4. Verification cost: a build of the MLP's fp16 variant that verifies (empty cache) against
   one that reads the cached verdict, and one with verify=False.

Needs ``onnx`` (model building, ONNX Runtime's quantization tools) besides ortplug[cpu].
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LIGHT_RESNET50 = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"


def mlp(path: Path, din: int = 512, hidden: int = 1024, layers: int = 3) -> Path:
    rng = np.random.default_rng(1)
    nodes, weights, previous, width = [], [], "x", din
    for i in range(layers):
        w = (rng.standard_normal((width, hidden)) * np.sqrt(2 / width)).astype(np.float32)
        b = (0.01 * rng.standard_normal(hidden)).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("Gemm", [previous, f"w{i}", f"b{i}"], [f"g{i}"]),
            helper.make_node("Relu", [f"g{i}"], [f"h{i}"]),
        ]
        previous, width = f"h{i}", hidden
    head = (rng.standard_normal((width, 10)) * np.sqrt(1 / width)).astype(np.float32)
    weights += [
        numpy_helper.from_array(head, "wo"),
        numpy_helper.from_array(np.zeros(10, np.float32), "bo"),
    ]
    nodes.append(helper.make_node("Gemm", [previous, "wo", "bo"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", din])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    path.with_name(path.stem + ".metadata.json").write_text(
        '{"input_names": ["x"], "output_names": ["logits"], "model_family": "mlp", '
        '"extra": {"dim_ranges": {"batch": [1, 32, 64]}}}'
    )
    return path


def resnet50(path: Path) -> Path:
    """light_resnet50 with seeded random weights (He-scaled convolutions, batch norms near identity)."""
    model = onnx.load(str(LIGHT_RESNET50))
    graph = model.graph
    rng = np.random.default_rng(0)
    shapes = {t.name: numpy_helper.to_array(t).tolist() for t in graph.initializer}
    consumer = {name: (n.op_type, i) for n in graph.node for i, name in enumerate(n.input)}
    generated, kept = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        shape = shapes[node.input[0]]
        op, index = consumer.get(node.output[0], ("", 0))
        if op == "Conv" and index == 1:
            value = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
        elif op == "BatchNormalization":
            noise = 0.1 * rng.standard_normal(shape)
            value = {1: 1 + noise, 4: 1 + np.abs(noise)}.get(index, noise)
        else:
            value = rng.standard_normal(shape) / (10 * np.sqrt(max(shape)))
        generated.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
    used = {name for n in kept for name in n.input}
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(generated)
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    data = graph.input[0]
    del graph.input[:]
    graph.input.append(data)
    model.ir_version = 4  # initializers need not be graph inputs
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def median_ms(fn: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def interleaved(
    runs: dict[str, Callable[[], object]], rounds: int, calls: int
) -> dict[str, list[float]]:
    names = list(runs)
    for fn in runs.values():
        median_ms(fn, 3)  # warm up
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(median_ms(runs[name], calls))
    return samples


def build_ms(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1e3, result


def section_int8(
    label: str, path: Path, feed: dict[str, np.ndarray], rounds: int, calls: int
) -> None:
    from ortplug import LocalCheckpoint, OnnxBackend
    from ortplug_variants import write_variants

    seconds, _ = build_ms(lambda: write_variants(LocalCheckpoint(path).resolve(), ["int8", "fp16"]))
    checkpoint = LocalCheckpoint(path).resolve()
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
    chosen = OnnxBackend.from_checkpoint(checkpoint)  # the default policy, this host's own probe
    verdict = chosen.report.verification
    print(f"\n1. {label}: variants built in {seconds / 1e3:.1f} s")
    print(
        f"  policy chose  {chosen.metadata.precision} on {', '.join(chosen.providers)}: {chosen.chain_reasons[0][1]}"
    )
    print(f"  verdict       {verdict.describe() if verdict else 'none (reference weights)'}")
    samples = interleaved(
        {
            "fp32 reference, CPU": lambda: reference.run(feed),
            "policy's choice": lambda: chosen.run(feed),
        },
        rounds,
        calls,
    )
    base = samples["fp32 reference, CPU"]
    for name, values in samples.items():
        ratio = statistics.median(b / v for b, v in zip(base, values))
        print(
            f"  {name:<22} median {statistics.median(values):8.3f} ms   speedup vs fp32 {ratio:5.2f}x"
        )


def section_broken(path: Path) -> None:
    from ortplug import LocalCheckpoint, OnnxBackend, VerificationWarning
    from ortplug_variants import calibration_feeds, make_int8

    checkpoint = LocalCheckpoint(path).resolve()
    tiny = [{k: v * 1e-3 for k, v in feed.items()} for feed in calibration_feeds(checkpoint)]
    make_int8(checkpoint, path.with_name(path.stem + ".int8.onnx"), tiny)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VerificationWarning)
        backend = OnnxBackend.from_checkpoint(LocalCheckpoint(path).resolve())
    print("\n2. broken int8 variant (calibrated on inputs 1000x too small)")
    for warning in caught:
        if issubclass(warning.category, VerificationWarning):
            print(f"  warning  {warning.message}")
    print(f"  serves   {backend.metadata.precision} on {', '.join(backend.providers)}")


def section_webgpu(folder: Path) -> None:
    from ortplug import LocalCheckpoint, OnnxBackend, Tolerance, VerificationWarning
    from ortplug.plugin_host.manager import reset_plugin_host
    from ortplug_variants import write_variants

    os.environ["ORTPLUG_WEBGPU_ALLOW_SOFTWARE"] = "1"  # lavapipe; a real GPU needs no opt-in
    reset_plugin_host()  # the WebGPU plugin reads the opt-in when it registers

    path = mlp(folder / "small.onnx", din=64, hidden=128, layers=2)
    write_variants(LocalCheckpoint(path).resolve(), ["fp16"])
    checkpoint = LocalCheckpoint(path).resolve()
    print("\n3. WebGPU, fp16 variant")
    try:
        ms, backend = build_ms(lambda: OnnxBackend.from_checkpoint(checkpoint))
    except Exception as exc:  # no adapter Dawn runs on: say so, the rest of the benchmark stands
        print(f"  not available: {type(exc).__name__}: {exc}")
        return
    verdict = backend.report.verification
    print(
        f"  default      {', '.join(backend.providers)} in {ms:.0f} ms: {verdict.describe() if verdict else 'nothing verified'}"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VerificationWarning)
        tight = OnnxBackend.from_checkpoint(checkpoint, verify=Tolerance(1e-4, 1e-5))
    for warning in caught:
        print(f"  rtol=1e-4 atol=1e-5  warning: {warning.message}")
    print(
        f"  rtol=1e-4 atol=1e-5  serves {tight.metadata.precision} on {', '.join(tight.providers)}"
    )


def section_cost(path: Path) -> None:
    from ortplug import LocalCheckpoint, OnnxBackend
    from ortplug.checkpoint import select_variant
    from ortplug_variants import write_variants

    os.environ["ORTPLUG_CACHE_DIR"] = str(path.parent / "cost-cache")  # nothing verified yet
    write_variants(LocalCheckpoint(path).resolve(), ["fp16"])
    fp16 = select_variant(LocalCheckpoint(path).resolve(), "fp16")

    def verified() -> object:
        return OnnxBackend.from_checkpoint(fp16, providers=["cpu"], verify=True)

    first_ms, first = build_ms(verified)
    cached_ms, cached = build_ms(verified)
    plain_ms, _ = build_ms(
        lambda: OnnxBackend.from_checkpoint(fp16, providers=["cpu"], verify=False)
    )
    print("\n4. verification cost (the MLP's fp16 variant on the CPU, one build each)")
    print(
        f"  first build, verifies       {first_ms:8.1f} ms (verdict {first.report.verification.cost_ms:.1f} ms)"
    )
    print(
        f"  second build, cached        {cached_ms:8.1f} ms (verdict {cached.report.verification.cost_ms:.2f} ms)"
    )
    print(f"  verify=False (no check)     {plain_ms:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--skip-webgpu", action="store_true")
    args = parser.parse_args()
    # the first verified choice serves: this benchmark shows verification, not the timing that
    # would let the CPU win over lavapipe's WebGPU (benchmarks/bench_proven_choice.py times it)
    os.environ["ORTPLUG_MEASURE"] = "0"
    with tempfile.TemporaryDirectory(prefix="ortplug-bench-variants-") as work:
        folder = Path(work)
        os.environ["ORTPLUG_CACHE_DIR"] = str(folder / "cache")
        from ortplug import get_plugin_host

        flags = get_plugin_host().host_capabilities().fact("cpu", "isa_flags")
        print(f"host CPU ISA flags: {', '.join(flags or ['unknown'])}")
        batch = np.random.default_rng(0).standard_normal((32, 512)).astype(np.float32)
        section_int8(
            "MLP 512-3x1024-10, batch 32",
            mlp(folder / "mlp.onnx"),
            {"x": batch},
            args.rounds,
            args.calls,
        )
        image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        net = resnet50(folder / "resnet50.onnx")
        name = onnx.load(str(net), load_external_data=False).graph.input[0].name
        section_int8(
            "light_resnet50 (random weights), batch 1",
            net,
            {name: image},
            args.rounds,
            max(3, args.calls // 5),
        )
        section_broken(folder / "mlp.onnx")
        if not args.skip_webgpu:
            section_webgpu(folder)
        section_cost(folder / "mlp.onnx")


if __name__ == "__main__":
    main()
