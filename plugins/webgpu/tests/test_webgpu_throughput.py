"""cumulative_throughput on a real second device: the CPU and WebGPU (lavapipe here) serve together."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, ServingConfig
from ortplug.testing import make_plugin_host
from ortplug_webgpu import plugin as webgpu_plugin
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV
from webgpu_models import relu_model


@pytest.mark.usefixtures("adapter")
def test_cumulative_throughput_serves_on_the_cpu_and_webgpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    plugins = make_plugin_host(("webgpu", webgpu_plugin))
    checkpoint = InMemoryCheckpoint(relu_model()).resolve()
    given = ServingConfig(streams=1, threads_per_stream=1, max_batch=1, max_delay_ms=0)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(64)]
    with OnnxBackend.from_checkpoint(
        checkpoint, plugins=plugins, performance_hint="cumulative_throughput", serving=given
    ) as backend:
        serving = backend.serving
        assert serving is not None
        assert {d.label for d in serving.devices if d.serving} == {"cpu", "webgpu"}, serving.lines()
        results: list[object] = [None] * len(xs)

        def call(index: int) -> None:
            results[index] = backend.run({"x": xs[index]})["y"]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(xs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for x, y in zip(xs, results):
            assert np.allclose(y, np.maximum(x, 0))
        server = backend.dispatcher
        assert server is not None
        assert {d.label: bool(d.requests) for d in server.devices} == {"cpu": True, "webgpu": True}
