"""Startup fallback: the CPU serves at once, the accelerator takes over between runs.

The accelerator here is ONNX Runtime's Azure provider (in every CPU wheel, through the
test-only ortplug-azuretest plugin): a real second provider whose session the backend
switches to. The WebGPU plugin's tests do the same on a real GPU device.
"""

from __future__ import annotations

import threading

import models
import numpy as np
import ortplug_azuretest
import pytest
from ortplug import (
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderFallbackWarning,
    StartupFallback,
)
from plugin_objects import FakeCudaPlugin

CPU_EP = "CPUExecutionProvider"
AZURE = ("AzureExecutionProvider", "CPUExecutionProvider")
ONE = np.ones((1, 4), np.float32)


@pytest.fixture
def azure_host(plugin_host: PluginHost) -> PluginHost:
    assert plugin_host.register(ortplug_azuretest, name="azuretest")
    return plugin_host


def _checkpoint(nodes: int = 1):
    return InMemoryCheckpoint(models.add_model(nodes=nodes)).resolve()


def test_the_cpu_serves_first_then_the_accelerator(azure_host: PluginHost) -> None:
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(nodes=3000),
        providers=["azure", "cpu"],
        plugins=azure_host,
        startup_fallback=StartupFallback(real_traffic_checks=0),
        # switches once verified (tests/test_real_traffic.py: after agreeing)
    )
    assert backend.providers == (CPU_EP,)
    assert "startup fallback" in dict(backend.chain_reasons)["cpu"]
    assert backend.run({"a": ONE, "b": ONE})["c"][0, 0] == 2.0
    assert backend.wait_ready(timeout=60)
    assert backend.providers == AZURE
    assert backend.startup_error is None
    assert backend.report.realized == AZURE
    assert backend.run({"a": ONE, "b": ONE})["c"][0, 0] == 2.0


def test_no_run_fails_or_blocks_across_the_switch(azure_host: PluginHost) -> None:
    """A thread hammers run(); every result is right, and runs land on both sides."""
    # Thousands of nodes: building the accelerator's session takes a while, so the CPU serves.
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(nodes=3000),
        providers=["azure", "cpu"],
        plugins=azure_host,
        startup_fallback=True,
    )
    sides = {"cpu": 0, "accelerator": 0, "during the switch": 0}
    errors: list[BaseException] = []
    stop = threading.Event()

    def hammer() -> None:
        value = 0.0
        while not stop.is_set():
            value += 1.0
            before = backend.providers
            try:
                out = backend.run({"a": np.full((1, 4), value, np.float32), "b": ONE})["c"]
            except BaseException as exc:
                errors.append(exc)
                return
            if not np.array_equal(out, np.full((1, 4), value + 1, np.float32)):
                errors.append(AssertionError(f"wrong result {out} for {value}"))
                return
            after = backend.providers
            side = (
                "during the switch"
                if before != after
                else "cpu"
                if after == (CPU_EP,)
                else "accelerator"
            )
            sides[side] += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        assert backend.wait_ready(timeout=60)
        runs_at_switch = sum(sides.values())
        while sum(sides.values()) < runs_at_switch + 50 and thread.is_alive():
            threading.Event().wait(0.01)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert errors == []
    assert backend.providers == AZURE
    assert sides["cpu"] > 0 and sides["accelerator"] >= 50, sides


def test_run_into_bind_and_async_work_across_the_switch(azure_host: PluginHost) -> None:
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(),
        providers=["azure", "cpu"],
        plugins=azure_host,
        startup_fallback=StartupFallback(real_traffic_checks=0),
    )
    binding = backend.bind()  # made on the CPU session: it stays there
    binding.bind_input("a", ONE)
    binding.bind_input("b", ONE)
    binding.bind_output("c")
    out = np.empty((1, 4), np.float32)
    backend.run_into({"a": ONE, "b": ONE}, {"c": out})
    assert out[0, 0] == 2.0
    assert backend.wait_ready(timeout=60) and backend.providers == AZURE
    out[:] = 0
    backend.run_into({"a": ONE, "b": ONE * 2}, {"c": out})  # a fresh binding on the new session
    assert out[0, 0] == 3.0
    binding.run()
    assert binding.outputs()["c"][0, 0] == 2.0
    done = threading.Event()
    results: list[object] = []
    backend.run_async({"a": ONE, "b": ONE}, lambda r, e: (results.append(r or e), done.set()))
    assert done.wait(30) and results[0]["c"][0, 0] == 2.0  # type: ignore[index]


def test_an_accelerator_that_does_not_come_up_leaves_the_cpu_serving(
    plugin_host: PluginHost,
) -> None:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    with pytest.warns(ProviderFallbackWarning, match="did not come up, the CPU keeps serving"):
        backend = OnnxBackend.from_checkpoint(
            _checkpoint(), providers=["fakecuda", "cpu"], plugins=plugin_host, startup_fallback=True
        )
        assert backend.wait_ready(timeout=60)
    assert backend.providers == (CPU_EP,)
    assert "CUDAExecutionProvider" in str(backend.startup_error)
    assert backend.run({"a": ONE, "b": ONE})["c"][0, 0] == 2.0


def test_a_cpu_only_chain_builds_as_usual(plugin_host: PluginHost) -> None:
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(), providers=["cpu"], plugins=plugin_host, startup_fallback=True
    )
    assert backend.wait_ready(timeout=0) and backend.providers == (CPU_EP,)


def test_closing_before_the_switch_discards_the_accelerator(azure_host: PluginHost) -> None:
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(), providers=["azure", "cpu"], plugins=azure_host, startup_fallback=True
    )
    backend.close()
    assert backend.wait_ready(timeout=60)
    assert backend.closed


def test_the_cpu_session_is_released_after_the_switch(azure_host: PluginHost) -> None:
    import gc
    import weakref

    backend = OnnxBackend.from_checkpoint(
        _checkpoint(nodes=500),
        providers=["azure", "cpu"],
        plugins=azure_host,
        startup_fallback=StartupFallback(real_traffic_checks=0, spot_check=0),
        # a spot check keeps the CPU reference to run calls again on
    )
    cpu_session = weakref.ref(backend._served.session)
    backend.run_into({"a": ONE, "b": ONE}, {"c": np.empty((1, 4), np.float32)})  # a CPU IO binding
    assert backend.wait_ready(timeout=60) and backend.providers == AZURE
    gc.collect()
    assert cpu_session() is None


def test_run_command_serves_its_first_run_on_the_cpu() -> None:
    """The real CLI, the azuretest plugin installed as a distribution."""
    import json
    import subprocess
    import sys

    command = [sys.executable, "-m", "ortplug.cli.main", "run", "--providers", "azure,cpu"]
    done = subprocess.run(
        [*command, "--startup-fallback", "--json", "--repeat", "2"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["realized"] == list(AZURE)  # the timed runs wait for the switch
    assert report["first_run_on"] in ([CPU_EP], list(AZURE))  # the build may win the race
