"""The plugins' smoke scripts: "not available" here, and the check itself on real sessions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ortplug.testing.smoke import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, run_smoke

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("plugin", "reason"),
    [
        ("cuda", "no usable NVIDIA driver"),
        ("tensorrt", "no usable NVIDIA driver"),
        ("coreml", "CoreML runs on macOS only"),
    ],
)
def test_smoke_script_says_not_available_on_this_host(plugin: str, reason: str) -> None:
    script = ROOT / "plugins" / plugin / "scripts" / "smoke.py"
    result = subprocess.run(
        [sys.executable, str(script), "--repeat", "3"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == EXIT_UNAVAILABLE, result.stderr
    assert result.stdout.startswith(f"not available: {reason}")


def test_smoke_check_passes_for_a_provider_that_runs_the_model() -> None:
    lines: list[str] = []
    assert run_smoke("cpu", repeat=3, out=lines.append) == EXIT_OK
    assert lines[-1] == "ok: CPUExecutionProvider took 100% of the nodes"
    assert any(line.startswith("latency ") and "ratio" in line for line in lines)


def test_smoke_check_fails_when_the_provider_takes_no_nodes() -> None:
    # The test plugin's Azure provider is realized by ONNX Runtime but runs no graph node.
    lines: list[str] = []
    code = run_smoke("azure", repeat=3, extra={"ortplug_azuretest": True}, out=lines.append)
    assert code == EXIT_FAILED
    assert lines[-1].startswith("FAILED: the policy chose azure but rejected: the reference ")
    assert lines[-1].endswith(
        "its accelerators took no node of the graph (the CPU provider ran all 4)"
    )


def test_smoke_check_of_an_uninstalled_kind_is_unavailable() -> None:
    lines: list[str] = []
    assert run_smoke("acme", out=lines.append) == EXIT_UNAVAILABLE
    assert lines == [lines[0]] and lines[0].startswith(
        "not available: no installed plugin provides 'acme'"
    )
