"""HostCapabilities: built by hand, detected, and overridden through ORTPLUG_OVERRIDE_*."""

from __future__ import annotations

import pytest
from ortplug import HostProbe, PluginHost
from ortplug.host.capabilities import compose_host, override_variable

PROBE = HostProbe(name="gpu", facts=("devices", "names"), detect=lambda: {"devices": 0})


def test_built_by_hand_is_frozen_and_queryable(cpu_host) -> None:
    assert cpu_host.fact("cpu", "usable_cpus") == 8
    assert cpu_host.fact("cuda", "devices", 0) == 0
    assert cpu_host.has_provider("CPUExecutionProvider")
    with pytest.raises(AttributeError):
        cpu_host.platform = "darwin"  # type: ignore[misc]


def test_overrides_force_probe_facts_as_json() -> None:
    env = {
        override_variable("gpu", "devices"): "2",
        override_variable("gpu", "names"): '["H100", "H100"]',
        "ORTPLUG_OVERRIDE_PLATFORM": "darwin",
        "ORTPLUG_OVERRIDE_AVAILABLE_PROVIDERS": "CoreMLExecutionProvider,CPUExecutionProvider",
    }
    host = compose_host([(PROBE, {"devices": 0, "undeclared": 1})], environ=env)
    assert host.fact("gpu", "devices") == 2
    assert host.fact("gpu", "names") == ["H100", "H100"]
    assert "undeclared" not in host.facts["gpu"]
    assert host.platform == "darwin"
    assert host.available_providers == ("CoreMLExecutionProvider", "CPUExecutionProvider")


def test_empty_override_means_absent() -> None:
    host = compose_host([(PROBE, {"devices": 3})], environ={"ORTPLUG_OVERRIDE_GPU_DEVICES": ""})
    assert host.fact("gpu", "devices") is None


def test_detect_uses_the_plugin_host_and_caches(plugin_host: PluginHost) -> None:
    first = plugin_host.host_capabilities()
    assert first is plugin_host.host_capabilities()
    assert first.ort_version and "CPUExecutionProvider" in first.available_providers
    assert set(first.to_dict()) == {
        "platform",
        "machine",
        "ort_version",
        "available_providers",
        "facts",
    }


_PROCESS_FACTS = """
import json
from ortplug.plugin_host.manager import get_plugin_host
from ortplug.selection.autotune import host_signature
host = get_plugin_host().host_capabilities()
print(json.dumps(host_signature(host)))
"""


def test_a_plugin_ep_registration_leaves_the_host_facts_as_they_were(tmp_path) -> None:
    """The OpenVINO example's probe registers its library in a cold process only: the providers
    it adds must not enter the host's facts, or every record keyed by them misses next time."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "ORTPLUG_CACHE_DIR": str(tmp_path / "cache")}
    signatures = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _PROCESS_FACTS],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(2)
    ]
    assert signatures[0] == signatures[1]
    assert not any(p.startswith("OpenVINO") for p in signatures[0]["providers"])
