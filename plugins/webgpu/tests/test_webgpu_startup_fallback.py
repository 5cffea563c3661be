"""Startup fallback on a real accelerator: WebGPU's first run compiles shaders, the CPU serves meanwhile."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend
from ortplug.testing import make_plugin_host
from ortplug_webgpu import plugin as webgpu_plugin
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV
from webgpu_models import fp16_cnn

WEBGPU, CPU = "WebGpuExecutionProvider", "CPUExecutionProvider"


@pytest.mark.usefixtures("adapter")
def test_runs_never_fail_or_block_across_the_switch_to_webgpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    plugins = make_plugin_host(("webgpu", webgpu_plugin))
    checkpoint = InMemoryCheckpoint(fp16_cnn()).resolve()
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=plugins)
    backend = OnnxBackend.from_checkpoint(
        checkpoint, providers=["webgpu", "cpu"], plugins=plugins, startup_fallback=True
    )
    assert backend.providers == (CPU,)  # shader compilation takes seconds: the CPU serves
    specs = backend.inputs
    rng = np.random.default_rng(0)
    feeds = [
        {v.name: rng.random(v.shape).astype(v.dtype) for v in specs}  # type: ignore[arg-type]
        for _ in range(4)
    ]
    expected = [reference.run(feed) for feed in feeds]
    counts = {CPU: 0, WEBGPU: 0}
    errors: list[BaseException] = []
    stop = threading.Event()

    def hammer() -> None:
        index = 0
        while not stop.is_set():
            index = (index + 1) % len(feeds)
            before = backend.providers
            try:
                out = backend.run(feeds[index])
            except BaseException as exc:
                errors.append(exc)
                return
            for name, value in expected[index].items():
                if not np.allclose(out[name], value, rtol=1e-2, atol=1e-2):
                    errors.append(AssertionError(f"{name} differs on {before}"))
                    return
            if before == backend.providers:
                counts[WEBGPU if WEBGPU in before else CPU] += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        assert backend.wait_ready(timeout=300), "WebGPU did not come up within 300 s"
        target = counts[WEBGPU] + 3
        while counts[WEBGPU] < target and thread.is_alive() and not errors:
            threading.Event().wait(0.05)
    finally:
        stop.set()
        thread.join(timeout=120)
    assert errors == []
    assert backend.startup_error is None
    assert backend.providers[0] == WEBGPU
    assert counts[CPU] > 0 and counts[WEBGPU] >= 3, counts


@pytest.mark.usefixtures("adapter")
def test_exiting_while_webgpu_comes_up_is_clean(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The bring-up is stopped and waited for at exit: no abort from native code."""
    import os
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from ortplug import OnnxBackend\n"
        "from ortplug.testing import demo_static_model\n"
        "from ortplug import LocalCheckpoint\n"
        "b = OnnxBackend.from_checkpoint(LocalCheckpoint(demo_static_model()).resolve(),"
        " providers=['webgpu', 'cpu'], startup_fallback=True)\n"
        "b.run({s.name: np.zeros(s.shape, np.float32) for s in b.input_specs})\n"
        "print('served on', b.providers[0])\n"
    )
    env = {
        **os.environ,
        ALLOW_SOFTWARE_ENV: "1",
        "MESA_SHADER_CACHE_DIR": str(tmp_path / "cold"),  # shaders compile: the exit comes first
    }
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "served on CPUExecutionProvider" in done.stdout
    assert "terminate called" not in done.stderr
