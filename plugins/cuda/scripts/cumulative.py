"""Check of performance_hint="cumulative_throughput" on a real host with two or more NVIDIA GPUs.

Builds the static demo model (or --model M.onnx) with the cumulative throughput hint, checks
that the backend serves on every GPU the cuda probe lists (``cuda:0``, ``cuda:1``, ...), that
concurrent callers get outputs equal to the CPU provider's (within the verification tolerance
the build used) and that every GPU served some of them, and prints each device's layout and
measured requests per second beside the requests each served. Exits 0 when it did; 2 with
"not available: <reason>" on a host without two usable GPUs; 1 when the check failed.

    python plugins/cuda/scripts/cumulative.py [--model M.onnx] [--callers 16] [--requests 2000]
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from ortplug import OnnxBackend, get_plugin_host
from ortplug.testing.smoke import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, _checkpoint
from ortplug.verification.sample_inputs import accepted_inputs


def _gpus() -> list[int]:
    """The GPU indexes the cuda probe lists; raises ``LookupError`` naming why none can serve."""
    plugins = get_plugin_host()
    if not plugins.provider_registry().has_kind("cuda"):
        raise LookupError("the cuda plugin is not installed (pip install ./plugins/cuda)")
    host = plugins.host_capabilities()
    problem = host.fact("cuda", "driver_error") or host.fact("cuda", "library_error")
    if problem:
        raise LookupError(str(problem))
    if not host.has_provider("CUDAExecutionProvider"):
        raise LookupError(f"onnxruntime {host.ort_version} has no CUDAExecutionProvider")
    devices = host.fact("cuda", "devices") or []
    indexes = sorted(d["index"] for d in devices if isinstance(d, dict) and "index" in d)
    if len(indexes) < 2:
        raise LookupError(f"{len(indexes)} CUDA device(s) listed; the check needs two or more")
    return indexes


def _served(backend: OnnxBackend, feed: dict[str, Any], callers: int, requests: int) -> list[Any]:
    """``requests`` runs of ``feed`` from ``callers`` threads; every result."""
    results: list[Any] = []
    lock = threading.Lock()
    left = [requests]

    def call() -> None:
        while True:
            with lock:
                if not left[0]:
                    return
                left[0] -= 1
            try:
                outputs: Any = backend.run(feed)
            except Exception as exc:
                outputs = exc
            with lock:
                results.append(outputs)

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def check(model: str | None, callers: int, requests: int) -> int:
    """Run the check; print what happened; the exit code."""
    try:
        gpus = _gpus()
    except LookupError as exc:
        print(f"not available: {exc}")
        return EXIT_UNAVAILABLE
    checkpoint = _checkpoint(model, {})
    print(f"cumulative_throughput: {checkpoint.label} on GPUs {gpus} and the CPU")
    with OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]) as cpu:
        feed = dict(accepted_inputs(cpu.run, cpu.input_specs, checkpoint.metadata.extra).feed)
        expected = cpu.run(feed)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="cumulative_throughput"
    ) as backend:
        serving = backend.serving
        if serving is None:
            print("FAILED: the backend has no serving report")
            return EXIT_FAILED
        for line in serving.lines():
            print(line)
        serving_labels = {d.label for d in serving.devices if d.serving}
        missing = [f"cuda:{i}" for i in gpus if f"cuda:{i}" not in serving_labels]
        if missing:
            print(f"FAILED: not serving on {missing}")
            return EXIT_FAILED
        results = _served(backend, feed, callers, requests)
        server = backend._server
        counts = {d.label: d.requests for d in server.devices} if server is not None else {}
        verdict = backend.report.verification
    failures = [r for r in results if isinstance(r, Exception)]
    if failures:
        print(f"FAILED: {len(failures)} of {len(results)} requests raised: {failures[0]}")
        return EXIT_FAILED
    tolerance = verdict.tolerance if verdict is not None else None  # the build's, for the GPUs
    rtol, atol = (tolerance.rtol, tolerance.atol) if tolerance is not None else (1e-3, 1e-4)
    wrong = [
        name
        for outputs in results
        for name, value in outputs.items()
        if not np.allclose(value, expected[name], rtol=rtol, atol=atol)
    ]
    if wrong:
        print(f"FAILED: outputs {sorted(set(wrong))} differ from the CPU provider's")
        return EXIT_FAILED
    print(f"requests   {counts} of {requests} from {callers} callers")
    idle = [f"cuda:{i}" for i in gpus if not counts.get(f"cuda:{i}")]
    if idle:
        print(f"FAILED: {idle} served no request")
        return EXIT_FAILED
    print(f"ok: every GPU of {gpus} served, outputs agree with the CPU provider")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="check cumulative_throughput on several GPUs")
    parser.add_argument("--model", help="an .onnx file (default: the static demo model)")
    parser.add_argument("--callers", type=int, default=16, help="concurrent callers (16)")
    parser.add_argument("--requests", type=int, default=2000, help="requests in all (2000)")
    args = parser.parse_args(argv)
    return check(args.model, args.callers, args.requests)


if __name__ == "__main__":
    sys.exit(main())
