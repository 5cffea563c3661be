"""Real WebGPU sessions on this host's adapter (Mesa's lavapipe in CI): placement, outputs, fallbacks.

They need a Vulkan driver Dawn runs on; ``.ci/run`` installs lavapipe with
``plugins/webgpu/scripts/setup_lavapipe.sh``. Without one they fail, saying
why: they are never skipped. On lavapipe a run is 40-50x slower than CPU and a
first run compiles shaders (Mesa's cache, shared by the whole test run, makes
later ones cheap), so each model is built once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ortplug import (
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderNotRealizedError,
    ResolvedCheckpoint,
    SessionOptionsConfig,
    Verification,
)
from ortplug.testing import demo_static_model, make_plugin_host
from ortplug_webgpu import WebGpuProvider
from ortplug_webgpu import plugin as webgpu_plugin
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV, ORT_SOFTWARE_ENV, detect_webgpu
from ortplug_webgpu.shader_cache import MESA_CACHE_ENV, shader_cache_key
from webgpu_models import fp16_cnn, random_resnet50, relu_model

WEBGPU, CPU = "WebGpuExecutionProvider", "CPUExecutionProvider"


@pytest.fixture
def opted_in(adapter: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The software opt-in where the adapter is a software one (lavapipe)."""
    if adapter["type"] == "cpu":
        monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")


def _checkpoint(model: bytes) -> ResolvedCheckpoint:
    return InMemoryCheckpoint(model).resolve()


def _feed(backend: OnnxBackend, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        value.name: rng.random(value.shape).astype(value.dtype)  # type: ignore[arg-type]
        for value in backend.inputs
    }


def test_the_probe_names_the_adapter_dawn_runs_on(adapter: dict[str, Any]) -> None:
    facts = detect_webgpu(check_dawn=True)
    assert facts["backend"] == "Vulkan" and facts["vulkan_loader"]
    assert adapter in facts["adapters"]
    assert adapter["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
    assert adapter["name"] and adapter["vendor"] and adapter["backend"] == "Vulkan"
    assert facts["software"] is (adapter["type"] == "cpu")
    assert facts["ep_version"] and facts["error"] is None


def test_a_software_adapter_is_declined_by_default_and_offered_with_the_opt_in(
    webgpu_host: PluginHost, adapter: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = _checkpoint(demo_static_model().read_bytes())

    def explain(plugins: PluginHost) -> Any:
        policy = DefaultProviderPolicy(plugins)
        return policy.explain(checkpoint.metadata, plugins.host_capabilities(), checkpoint)

    default = explain(webgpu_host)
    monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")  # before the host is probed, as a user would
    opted = explain(make_plugin_host(("webgpu", webgpu_plugin)))
    assert [config.kind for config in opted.chain] == ["webgpu", "cpu"]
    if adapter["type"] == "cpu":
        assert [config.kind for config in default.chain] == ["cpu"]
        assert default.decline_reasons()["webgpu"].startswith("only a software adapter: ")
    else:
        assert [config.kind for config in default.chain] == ["webgpu", "cpu"]


@pytest.fixture(scope="module")
def resnet50() -> Iterator[tuple[OnnxBackend, OnnxBackend]]:
    """resnet50 (random weights) on the explicit chain ["webgpu", "cpu"], and on CPU alone."""
    checkpoint = _checkpoint(random_resnet50())
    with (
        OnnxBackend.from_checkpoint(checkpoint, providers=["webgpu", "cpu"]) as webgpu,
        OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]) as cpu,
    ):
        yield webgpu, cpu


def test_resnet50_runs_on_webgpu_with_its_sums_on_cpu(
    resnet50: tuple[OnnxBackend, OnnxBackend],
) -> None:
    webgpu, _ = resnet50
    assert list(webgpu.providers) == [WEBGPU, CPU]
    # The WebGPU EP has no Sum kernel: the 16 residual additions stay on CPU.
    assert webgpu.node_assignment() == {WEBGPU: 109, CPU: 16}
    assert webgpu.report.accelerator_share == pytest.approx(109 / 125)


def test_resnet50_outputs_match_cpu(resnet50: tuple[OnnxBackend, OnnxBackend]) -> None:
    webgpu, cpu = resnet50
    softmax, logits = (value.name for value in cpu.outputs)
    feed = _feed(cpu)
    expected, got = cpu.run(feed), webgpu.run(feed)
    scale = float(np.abs(expected[logits]).max())
    np.testing.assert_allclose(got[logits], expected[logits], rtol=0, atol=1e-3 * scale)
    np.testing.assert_allclose(got[softmax], expected[softmax], atol=1e-4)


@pytest.mark.parametrize(
    ("model", "atol"),
    [
        pytest.param(lambda: demo_static_model().read_bytes(), 1e-5, id="fp32-mlp"),
        pytest.param(fp16_cnn, 1e-2, id="fp16-cnn"),
    ],
)
@pytest.mark.usefixtures("opted_in")
def test_the_policy_chain_runs_on_webgpu_and_matches_cpu(
    webgpu_host: PluginHost, model: Any, atol: float
) -> None:
    checkpoint = _checkpoint(model())
    with (  # the first verified choice (timed, lavapipe's WebGPU loses to the CPU: below)
        OnnxBackend.from_checkpoint(
            checkpoint, plugins=webgpu_host, verify=Verification(measure=False)
        ) as chosen,
        OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=webgpu_host) as cpu,
    ):
        assert [kind for kind, _ in chosen.chain_reasons] == ["webgpu", "cpu"]
        assert list(chosen.providers) == [WEBGPU, CPU]
        assert set(chosen.node_assignment()) == {WEBGPU}
        feed = _feed(cpu)
        for name, expected in cpu.run(feed).items():
            got = chosen.run(feed)[name]
            assert got.dtype == expected.dtype
            np.testing.assert_allclose(
                got.astype(np.float32), expected.astype(np.float32), atol=atol
            )


@pytest.mark.usefixtures("opted_in")
def test_webgpu_is_verified_and_loses_to_the_faster_cpu(
    adapter: dict[str, Any], webgpu_host: PluginHost
) -> None:
    """The real slower-than-the-CPU accelerator: verified, timed, and the CPU reference serves."""
    if adapter["type"] != "cpu":
        pytest.skip("a hardware adapter may well be faster than the CPU")
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(demo_static_model().read_bytes()), plugins=webgpu_host
    )
    webgpu, cpu = backend.report.candidates
    assert (
        webgpu.chain == ("webgpu", "cpu") and webgpu.verdict is not None and webgpu.verdict.passed
    )
    assert (webgpu.chosen, webgpu.reason) == (False, "verified, not faster than the CPU reference")
    assert cpu.chosen and backend.providers == (CPU,)


@pytest.mark.usefixtures("opted_in")
def test_the_static_batch_predictor_is_exact_on_webgpu() -> None:
    """WebGPU (a plugin EP) copies a bound CPU input when it is bound: the predictor binds again."""
    from ortplug_ray import BackendConfig, OnnxPredictor

    config = BackendConfig(model=str(demo_static_model()), providers=("webgpu", "cpu"))
    predictor = OnnxPredictor(config)
    assert predictor.backend.providers == (WEBGPU, CPU)
    rows = np.random.default_rng(2).random((103, 8), np.float32)
    with OnnxBackend.from_checkpoint(
        _checkpoint(demo_static_model().read_bytes()), providers=["cpu"]
    ) as cpu:
        expected = [cpu.run({"x": rows[i : i + 4]})["probs"] for i in range(0, 100, 4)]
    np.testing.assert_allclose(
        predictor({"x": rows})["probs"][:100], np.concatenate(expected), atol=1e-5
    )


def _clean_env(**changes: str) -> dict[str, str]:
    """This process's environment without the opt-ins, with ``changes``; only the CPU and WebGPU plugins."""
    env = {k: v for k, v in os.environ.items() if k not in (ALLOW_SOFTWARE_ENV, ORT_SOFTWARE_ENV)}
    env["ORTPLUG_PLUGINS"] = "cpu,webgpu"
    env.update(changes)
    return env


def _ortplug(args: list[str], env: dict[str, str]) -> str:
    command = [
        sys.executable,
        "-c",
        "import sys; from ortplug.cli.main import main; sys.exit(main())",
    ]
    done = subprocess.run(command + args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_ortplug_info_and_run_in_a_fresh_process(adapter: dict[str, Any], tmp_path: Path) -> None:
    model = tmp_path / "relu.onnx"
    model.write_bytes(relu_model())
    cache = tmp_path / "cache"
    env = _clean_env(ORTPLUG_CACHE_DIR=str(cache))
    env.pop(MESA_CACHE_ENV, None)
    default = _ortplug(["info", "--model", str(model)], env)
    opted = _ortplug(["info", "--model", str(model)], {**env, ALLOW_SOFTWARE_ENV: "1"})
    (chain,) = [line for line in opted.splitlines() if line.startswith("chain ")]
    if adapter["type"] == "cpu":  # offered (its candidate line below), then measured slower
        assert chain.startswith("chain        cpu        measured on this model's first build")
    else:
        assert chain.startswith("chain        webgpu")
    if adapter["type"] == "cpu":
        assert "declined     webgpu     only a software adapter: " in default
        assert "chain        webgpu" not in default
    # info --model built, verified and timed the candidates; the winner is recorded for run
    (webgpu,) = [
        line for line in opted.splitlines() if line.startswith("candidate    [webgpu, cpu]")
    ]
    assert " ms, " in webgpu and "verified" in webgpu
    ran = _ortplug(["run", str(model), "--repeat", "2"], {**env, ALLOW_SOFTWARE_ENV: "1"})
    if adapter["type"] == "cpu":  # lavapipe is slower than the CPU provider: the CPU serves
        assert f"realized  {CPU}\n" in ran and "measured on this model's first build here" in ran
    else:
        assert f"realized  {WEBGPU}, {CPU}" in ran
    shaders = cache / "webgpu" / "shaders" / shader_cache_key()
    assert shaders.is_dir() and any(path.is_file() for path in shaders.rglob("*")), (
        f"Mesa wrote no shader cache under {shaders}"
    )


_HIDDEN_DRIVER = """
import json, warnings
from ortplug import (OnnxBackend, InMemoryCheckpoint, ProviderFallbackWarning,
                     ProviderNotRealizedError)
from ortplug.testing import demo_static_model, make_plugin_host
from ortplug_webgpu import plugin

checkpoint = InMemoryCheckpoint(demo_static_model().read_bytes()).resolve()
host = make_plugin_host(("webgpu", plugin))
answer = {"facts": dict(host.host_capabilities().facts["webgpu"])}
try:
    OnnxBackend.from_checkpoint(checkpoint, providers=["webgpu", "cpu"], plugins=host)
except ProviderNotRealizedError as exc:
    answer["strict"] = {"message": str(exc), "missing": list(exc.missing), "declines": exc.declines}
with OnnxBackend.from_checkpoint(checkpoint, plugins=host) as backend:
    answer["policy"] = {"realized": list(backend.providers), "declined": dict(backend.report.declined)}
forced = make_plugin_host(("webgpu", plugin), environ=json.loads(__import__("sys").argv[1]))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with OnnxBackend.from_checkpoint(checkpoint, plugins=forced) as backend:
        answer["forced"] = {
            "chain": [kind for kind, _ in backend.chain_reasons],
            "realized": list(backend.providers),
            "warnings": [str(w.message) for w in caught if w.category is ProviderFallbackWarning],
        }
print(json.dumps(answer))
"""


@pytest.fixture(scope="module")
def hidden_driver(adapter: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A process that sees no Vulkan driver (opted in, so the EP still lists a device)."""
    hidden = str(tmp_path_factory.mktemp("no-driver") / "none.json")
    env = _clean_env(
        VK_DRIVER_FILES=hidden,
        VK_ICD_FILENAMES=hidden,
        ORTPLUG_CACHE_DIR=str(tmp_path_factory.mktemp("cache")),
        **{ALLOW_SOFTWARE_ENV: "1"},
    )
    # The facts a probe would give with a working driver: the policy offers WebGPU, the build fails.
    forced = {
        "ORTPLUG_OVERRIDE_WEBGPU_VULKAN_LOADER": "libvulkan.so.1",
        "ORTPLUG_OVERRIDE_WEBGPU_ADAPTERS": json.dumps([adapter]),
        "ORTPLUG_OVERRIDE_WEBGPU_ADAPTER": json.dumps(adapter),
        "ORTPLUG_OVERRIDE_WEBGPU_USABLE": "true",
        "ORTPLUG_OVERRIDE_WEBGPU_ERROR": "",
    }
    command = [sys.executable, "-c", _HIDDEN_DRIVER, json.dumps(forced)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_hidden_driver_is_seen_by_the_probe(hidden_driver: Any) -> None:
    facts = hidden_driver["facts"]
    assert facts["adapters"] == [] and facts["usable"] is False
    assert "VK_ERROR_INCOMPATIBLE_DRIVER" in facts["error"]


def test_a_hidden_driver_makes_the_explicit_chain_fail(hidden_driver: Any) -> None:
    strict = hidden_driver["strict"]
    assert strict["missing"] == [WEBGPU]
    assert "No supported adapters" in strict["message"]
    assert strict["declines"]["webgpu"].startswith("no Vulkan adapter for Dawn: ")


def test_a_hidden_driver_falls_back_to_cpu_with_the_plugins_reason(hidden_driver: Any) -> None:
    policy = hidden_driver["policy"]
    assert policy["realized"] == [CPU]
    assert policy["declined"]["webgpu"].startswith("no Vulkan adapter for Dawn: ")
    forced = hidden_driver["forced"]  # offered on stale facts, then the build fails: graceful
    assert forced["chain"] == ["webgpu", "cpu"] and forced["realized"] == [CPU]
    assert any("No supported adapters" in warning for warning in forced["warnings"])


def test_a_callers_session_options_carry_one_device_chain_session_after_session(
    webgpu_host: PluginHost, adapter: dict[str, Any], opted_in: None
) -> None:
    """A plugin-EP chain is appended to the caller's own SessionOptions (the drop-in's) once:
    ONNX Runtime refuses a provider appended twice and cannot take one off, so a second session of
    the same chain reuses it, another chain is refused naming the fix, a CPU one runs by name."""
    import onnxruntime as ort

    checkpoint = _checkpoint(relu_model())
    callers = SessionOptionsConfig.from_ort(ort.SessionOptions())
    x = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)}
    for _ in range(2):
        with OnnxBackend.from_checkpoint(
            checkpoint, providers=["webgpu", "cpu"], plugins=webgpu_host, session_options=callers
        ) as backend:
            assert backend.providers == (WEBGPU, CPU)
            assert np.array_equal(backend.run(x)["y"], np.maximum(x["x"], 0))
    other = WebGpuProvider(validation_mode="disabled")
    with pytest.raises(ProviderNotRealizedError, match="already carries .WebGpuExecutionProvider"):
        OnnxBackend.from_checkpoint(
            checkpoint, providers=[other, "cpu"], plugins=webgpu_host, session_options=callers
        )
    with OnnxBackend.from_checkpoint(
        checkpoint, providers=["cpu"], plugins=webgpu_host, session_options=callers
    ) as backend:
        assert backend.providers == (CPU,)
