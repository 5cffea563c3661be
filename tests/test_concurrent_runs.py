"""Thread safety declared and enforced: a provider kind says whether ONNX Runtime runs its sessions
from several threads at once safely (``concurrent_runs``); ortplug serialises the runs of every
other kind's sessions, on every path that runs one, and verifies the claim of those that make it.

The provider is the misbehaving test provider (``ortplug_misbehaving``, real ONNX Runtime
sessions) in its ``"concurrent"`` mode: its outputs are wrong for a run that overlapped another,
and ``most_in_flight`` counts the most runs ever in flight at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ortplug import (
    InMemoryCheckpoint,
    OnnxBackend,
    OptionError,
    PluginHost,
    ProviderType,
    StartupFallback,
    Verification,
    VerificationError,
)
from ortplug.plugin_host._manifest_types import provider_types
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.plugins.declaration import DeclarationError, parse_declarations
from ortplug.testing import demo_model, make_plugin_host
from ortplug_dropin import InferenceSession
from ortplug_misbehaving import MisbehavingPlugin, MisbehavingProvider

_MANIFESTTEST = Path(__file__).resolve().parent / "plugin_dists/ortplug-manifesttest/src"

DEMO = demo_model().read_bytes()
BAD = ("AzureExecutionProvider", "CPUExecutionProvider")
FEED = {"x": np.random.default_rng(0).random((3, 8)).astype(np.float32)}
THREADS, RUNS = 8, 3


@pytest.fixture(scope="module")
def expected() -> Mapping[str, np.ndarray]:
    with OnnxBackend.from_checkpoint(InMemoryCheckpoint(DEMO), providers=["cpu"]) as cpu:
        return cpu.run(FEED)


def _plugin(misbehaviour: str = "concurrent", **kwargs: Any) -> MisbehavingPlugin:
    return MisbehavingPlugin(misbehaviour, delay_s=0.005, **kwargs)


def _backend(plugin: MisbehavingPlugin, **kwargs: Any) -> OnnxBackend:
    return OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(DEMO),
        providers=[plugin.config, "cpu"],
        plugins=make_plugin_host(("bad", plugin)),
        **kwargs,
    )


def _run_async(backend: OnnxBackend) -> Mapping[str, Any]:
    done, got = threading.Event(), {}
    backend.run_async(FEED, lambda outputs, error: (got.update(outputs or {}), done.set()))
    assert done.wait(30)
    return got


def _paths(backend: OnnxBackend) -> list[Callable[[], Mapping[str, Any]]]:
    """One call of each way a user thread runs a backend."""

    def bound() -> Mapping[str, Any]:
        binding = backend.bind().bind_input("x", FEED["x"])
        for name in backend.output_names:
            binding.bind_output(name)
        binding.run()
        return binding.outputs()

    def into() -> Mapping[str, Any]:
        outputs = {name: np.empty((3, 3), np.float32) for name in backend.output_names}
        return dict(backend.run_into(FEED, outputs))

    return [lambda: backend.run(FEED), lambda: _run_async(backend), bound, into]


def _hammer(calls: list[Callable[[], Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """Every call ``RUNS`` times from each of ``THREADS`` threads started together."""
    start = threading.Barrier(THREADS)
    results: list[Mapping[str, Any]] = []
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            start.wait(30)
            for _ in range(RUNS):
                results.append(calls[index % len(calls)]())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(results) == THREADS * RUNS
    return results


def _wrong(results: list[Mapping[str, Any]], expected: Mapping[str, np.ndarray]) -> int:
    return sum(
        any(not np.allclose(result[name], expected[name], atol=1e-6) for name in expected)
        for result in results
    )


def test_runs_of_a_kind_that_does_not_declare_concurrent_runs_never_overlap(expected) -> None:
    plugin = _plugin()
    with _backend(plugin, verify=False) as backend:
        assert backend.providers == BAD
        results = _hammer(_paths(backend))
    assert plugin.most_in_flight == 1
    assert _wrong(results, expected) == 0


def test_runs_of_a_kind_that_declares_concurrent_runs_take_no_lock(expected) -> None:
    plugin = _plugin(concurrent_runs=True)
    with _backend(plugin, verify=False) as backend:
        results = _hammer([lambda: backend.run(FEED)])
    assert plugin.most_in_flight > 1  # the runs overlapped: nothing serialised them
    assert _wrong(results, expected) > 0  # and this provider is wrong when they do


def test_verification_rejects_a_provider_that_claims_concurrent_runs_and_is_wrong_in_them() -> None:
    plugin = _plugin(concurrent_runs=True)
    with pytest.raises(VerificationError, match=r"output 'logits': .*\(on 4 threads at once\)"):
        _backend(plugin).close()


def test_verification_runs_at_once_only_what_claims_concurrent_runs() -> None:
    claims = _plugin("slow", concurrent_runs=True)
    with _backend(claims, measure=False) as backend:
        verdict = backend.report.verification
    assert verdict is not None and verdict.passed, verdict
    assert verdict.covered[-2] == "4 threads at once"
    assert claims.most_in_flight > 1
    serial = _plugin()  # wrong only in runs at once, which it never has: it passes, serialised
    with _backend(serial, measure=False) as backend:
        verdict = backend.report.verification
        assert verdict is not None and verdict.passed, verdict
        assert "4 threads at once" not in verdict.covered
    assert serial.most_in_flight == 1


def test_the_lock_follows_the_session_a_startup_fallback_switches_to(expected) -> None:
    plugin = _plugin()
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(DEMO),
        plugins=make_plugin_host(("bad", plugin)),
        startup_fallback=StartupFallback(real_traffic_checks=0),
        verify=Verification(measure=False),
    )
    with backend:
        assert backend.wait_ready(60) and backend.providers == BAD, backend.startup_status
        results = _hammer(_paths(backend))
    assert plugin.most_in_flight == 1
    assert _wrong(results, expected) == 0


def test_the_drop_in_session_serialises_its_runs(expected, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drop-in runs ONNX Runtime's own session object: while another run holds the provider's
    lock, each of its ways to run waits its turn (a CPU-only drop-in keeps ONNX Runtime's methods)."""
    monkeypatch.setenv("ORTPLUG_PLUGINS", "cpu")
    plugin = _plugin()
    assert get_plugin_host().register(plugin, name="bad")
    session = InferenceSession(DEMO, providers=[plugin.config, "cpu"])
    assert tuple(session.get_providers()) == BAD and session.backend is not None
    lock = session.backend.run_lock
    assert lock is not None and lock.kinds == ("misbehaving",)
    got: list[Mapping[str, Any]] = []

    def plain() -> None:
        got.append(dict(zip(expected, session.run(list(expected), FEED))))

    def bound() -> None:
        binding = session.io_binding()
        binding.bind_cpu_input("x", FEED["x"])
        for name in expected:
            binding.bind_output(name)
        session.run_with_iobinding(binding)
        got.append(dict(zip(expected, binding.copy_outputs_to_cpu())))

    def asynchronous() -> None:
        done = threading.Event()
        session.run_async(None, FEED, lambda results, _, error: (got.append(
            dict(zip(expected, results))), done.set()))  # fmt: skip
        assert done.wait(30)

    for call in (plain, bound, asynchronous):
        with lock:  # another run holds the provider
            waiting = threading.Thread(target=call)
            waiting.start()
            waiting.join(0.3)
            assert waiting.is_alive(), call.__name__
        waiting.join(30)
        assert not waiting.is_alive()
    assert len(got) == 3 and _wrong(got, expected) == 0
    session.set_providers(["CPUExecutionProvider"])  # ONNX Runtime's own form: its own methods
    assert "run" not in vars(session) and "run" not in vars(InferenceSession(DEMO))


def test_the_shipped_plugins_declare_what_onnx_runtime_documents() -> None:
    registry = PluginHost(environ={}).provider_registry()  # imported through their declarations
    claims = {kind: registry.lookup(kind).type.concurrent_runs for kind in
              ("cpu", "cuda", "tensorrt", "coreml", "webgpu")}  # fmt: skip
    assert claims == {"cpu": True, "cuda": True, "tensorrt": True, "coreml": True, "webgpu": False}
    assert ProviderType("misbehaving", BAD[0], MisbehavingProvider).concurrent_runs is False


def test_a_claim_that_is_not_a_bool_is_one_clear_error() -> None:
    with pytest.raises(
        OptionError, match=r"^ProviderType.concurrent_runs: expected True or False, got str 'yes'$"
    ):
        ProviderType("misbehaving", BAD[0], MisbehavingProvider, concurrent_runs="yes")  # type: ignore[arg-type]
    kind = {"kind": "acme", "ort_name": "AcmeExecutionProvider", "concurrent_runs": "yes"}
    data = {"ortplug": 1, "plugins": {"acme": {"kinds": [kind], "hooks": []}}}
    with pytest.raises(
        DeclarationError,
        match=r"plugins.acme.kinds\[0\].concurrent_runs: expected true or false, got 'yes'$",
    ):
        parse_declarations(data, "ortplug_acme/ortplug.json")


def test_a_declared_kinds_concurrent_runs_is_its_provider_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The manifest is the one source: the type built from it says what the kind declares (the
    mixed form, whose hook-given type could disagree with its manifest, is gone)."""
    monkeypatch.syspath_prepend(str(_MANIFESTTEST))
    config = "ortplug_manifesttest.config:ManifestAzureProvider"
    for flag in (True, False):
        kind = {"kind": "manifestazure", "ort_name": BAD[0], "config": config}
        data = {"ortplug": 1, "plugins": {"m": {"kinds": [{**kind, "concurrent_runs": flag}],
                                               "hooks": ["ortplug_offer_providers"]}}}  # fmt: skip
        (ptype,) = provider_types(parse_declarations(data, "m/ortplug.json")["m"])
        assert ptype.concurrent_runs is flag
