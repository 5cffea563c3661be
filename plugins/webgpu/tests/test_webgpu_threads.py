"""Threads running WebGPU sessions at once, on this host's adapter (Mesa's lavapipe in CI).

The WebGPU provider does not declare concurrent runs: runs at once (``run``, ``run_into``,
``run_async`` and IO bindings from four threads, on one backend or on two sharing the device)
failed with Dawn validation errors, returned wrong outputs or crashed the process (SIGSEGV in
most processes). ortplug serialises them; each case runs in fresh processes, a few times, since
a crash takes the process down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV

#: Runs each of four threads makes, each thread on one of the ways to run a backend.
_SCRIPT = """
import json, sys, threading
import numpy as np
from ortplug import InMemoryCheckpoint, OnnxBackend
from ortplug.testing import demo_model, make_plugin_host
from ortplug_webgpu import plugin

host = make_plugin_host(("webgpu", plugin))
checkpoint = InMemoryCheckpoint(demo_model().read_bytes()).resolve()
backends = [
    OnnxBackend.from_checkpoint(checkpoint, providers=["webgpu", "cpu"], plugins=host, verify=False)
    for _ in range(int(sys.argv[1]))
]
feed = {"x": np.random.default_rng(0).random((3, 8)).astype(np.float32)}
expected = backends[0].run(feed)
wrong, errors = [], []

def asynchronous(backend):
    done, got = threading.Event(), {}
    backend.run_async(feed, lambda outputs, error: (got.update(o=outputs, e=error), done.set()))
    assert done.wait(60)
    if got["e"] is not None:
        raise got["e"]
    return got["o"]

def bound(backend):
    binding = backend.bind().bind_input("x", feed["x"])
    for name in expected:
        binding.bind_output(name)
    binding.run()
    return binding.outputs()

def into(backend):
    return dict(backend.run_into(feed, {n: np.empty_like(v) for n, v in expected.items()}))

def work(backend, call):
    for _ in range(25):
        try:
            got = call(backend)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        wrong.extend(n for n in expected if not np.array_equal(got[n], expected[n]))

calls = [lambda b: b.run(feed), asynchronous, bound, into]
threads = [threading.Thread(target=work, args=(backends[i % len(backends)], call))
           for i, call in enumerate(calls)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"providers": [list(b.providers) for b in backends], "wrong": len(wrong),
                  "errors": errors[:3]}))
"""


@pytest.fixture
def opted_in(adapter: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The software opt-in where the adapter is a software one (lavapipe)."""
    if adapter["type"] == "cpu":
        monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")


@pytest.mark.usefixtures("opted_in")
@pytest.mark.parametrize(
    "backends", [pytest.param(1, id="one-backend"), pytest.param(2, id="two-backends-one-device")]
)
def test_four_threads_running_webgpu_sessions_at_once_get_the_single_threaded_outputs(
    backends: int,
) -> None:
    for attempt in range(3):  # a crash came in most processes, never in all of them
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(backends)],
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (attempt, done.returncode, done.stderr[-2000:])
        report = json.loads(done.stdout.splitlines()[-1])
        webgpu = ["WebGpuExecutionProvider", "CPUExecutionProvider"]
        assert report == {"providers": [webgpu] * backends, "wrong": 0, "errors": []}, attempt
