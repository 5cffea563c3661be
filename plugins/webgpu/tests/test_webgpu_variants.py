"""An fp16 variant on the real WebGPU provider (Mesa's lavapipe in CI), verified against the CPU reference.

Nothing is injected: the adapter is the one Dawn finds here, the fp16 variant is made by
``ortplug_variants`` (ONNX Runtime's float16 converter), and both verdicts come
from real outputs. Like the other lavapipe tests these fail, saying why, without a driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ortplug import OnnxBackend, PluginHost, ResolvedCheckpoint, Tolerance, VerificationError
from ortplug.checkpoint import select_variant
from ortplug.errors import VerificationWarning
from ortplug_webgpu.plugin import FP16_PREFERENCE, PREFERENCE
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV
from variant_models import mlp_with_variants

WEBGPU, CPU = "WebGpuExecutionProvider", "CPUExecutionProvider"


@pytest.fixture(autouse=True)
def _first_verified_choice_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about verification: nothing is timed (lavapipe would lose to the CPU)."""
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mlp")
    mlp_with_variants(folder, "fp16")
    return folder / "mlp.onnx"


@pytest.fixture
def checkpoint(
    built: Path, adapter: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> ResolvedCheckpoint:
    if adapter["type"] == "cpu":
        monkeypatch.setenv(ALLOW_SOFTWARE_ENV, "1")
    # these test the fp16 variant's verification on WebGPU: served once verified, not after the
    # real requests a lossy variant otherwise agrees on first (tests/test_lossy_real_traffic.py)
    monkeypatch.setenv("ORTPLUG_REAL_TRAFFIC_CHECKS", "0")
    from ortplug import LocalCheckpoint

    return LocalCheckpoint(built).resolve()


def test_the_fp16_variant_runs_on_webgpu_verified_within_fp16_tolerance(
    checkpoint: ResolvedCheckpoint, webgpu_host: PluginHost
) -> None:
    assert FP16_PREFERENCE > PREFERENCE
    with OnnxBackend.from_checkpoint(checkpoint, plugins=webgpu_host) as backend:
        assert backend.providers == (WEBGPU, CPU) and backend.metadata.precision == "fp16"
        assert backend.node_assignment().get(WEBGPU, 0) > 0
        verdict = backend.report.verification
        assert verdict is not None and verdict.passed and verdict.variant == "fp16"
        assert verdict.providers == (WEBGPU, CPU) and verdict.tolerance == Tolerance(1e-2, 3e-2)
        (check,) = verdict.checks
        assert 0 < check.max_abs < 0.05  # fp16 arithmetic: close to the CPU's fp32, not equal


def test_under_a_tight_tolerance_fp16_is_rejected_and_fp32_webgpu_takes_over(
    checkpoint: ResolvedCheckpoint, webgpu_host: PluginHost
) -> None:
    tight = Tolerance(1e-4, 1e-5)  # fp32 on the GPU stays within it; fp16 cannot
    with pytest.warns(VerificationWarning) as caught:
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=webgpu_host, verify=tight)
    (warning,) = caught
    message = str(warning.message)
    assert f"variant fp16 (fp16) on {WEBGPU}, {CPU} failed verification: output 'logits'" in message
    assert (
        "(rtol=0.0001 atol=1e-05, |diff| <= atol + rtol*|reference|;" in message
        and message.endswith("taking the next choice: the reference weights on [webgpu, cpu]")
    )
    assert backend.providers == (WEBGPU, CPU) and backend.metadata.precision == "fp32"
    verdict = backend.report.verification
    assert verdict is not None and verdict.passed and verdict.variant is None
    with pytest.raises(
        VerificationError, match=f"variant fp16 .* on {WEBGPU}, {CPU} failed"
    ) as raised:
        OnnxBackend.from_checkpoint(
            select_variant(checkpoint, "fp16"),
            providers=["webgpu", "cpu"],
            plugins=webgpu_host,
            verify=tight,
        )
    assert raised.value.verdict is not None and WEBGPU in raised.value.verdict.providers
