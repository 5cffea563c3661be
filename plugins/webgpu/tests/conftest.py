"""Fixtures of the ortplug-webgpu tests: ortplug.testing's, a private cache, the WebGPU plugin host.

Set before any test runs (the EP reads its switch once, when the library is
first registered in this process): ``ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER=1``,
so the EP lists a device on a host whose only adapter is lavapipe, whatever
test registers it first; the plugin's own decision stays with
``ORTPLUG_WEBGPU_ALLOW_SOFTWARE``. Mesa's shader cache is shared by every
test of the run (and kept between runs): per-test cache folders would
compile every shader again, seconds each on lavapipe.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ortplug import PluginHost
from ortplug.testing import make_plugin_host
from ortplug_webgpu import plugin as webgpu_plugin
from ortplug_webgpu.probes import ALLOW_SOFTWARE_ENV, ORT_SOFTWARE_ENV, detect_webgpu
from ortplug_webgpu.shader_cache import MESA_CACHE_ENV, shader_cache_path

os.environ[ORT_SOFTWARE_ENV] = "1"
os.environ.setdefault(MESA_CACHE_ENV, str(shader_cache_path()))


@pytest.fixture(autouse=True)
def _private_cache(ortplug_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches go to a temporary folder; no opt-in from the caller's environment leaks in."""
    monkeypatch.delenv(ALLOW_SOFTWARE_ENV, raising=False)
    monkeypatch.delenv("ORTPLUG_TENSORRT", raising=False)
    return ortplug_cache


@pytest.fixture
def webgpu_host() -> PluginHost:
    """Built-in defaults, the CPU plugin and the WebGPU plugin, registered directly."""
    return make_plugin_host(("webgpu", webgpu_plugin))


#: How a host without a GPU gets a device the WebGPU EP runs on (what ``.ci/run`` does).
_SETUP = "bash plugins/webgpu/scripts/setup_lavapipe.sh DIR && source DIR/env.sh"


@pytest.fixture(scope="module")
def adapter() -> dict[str, Any]:
    """The adapter Dawn runs on here; the tests that need one fail (not skip) when there is none."""
    facts = detect_webgpu(check_dawn=True)
    if not facts.get("usable"):
        pytest.fail(
            f"no adapter the WebGPU EP runs on: {facts.get('error')}; install a Vulkan driver "
            f"(CI without a GPU: {_SETUP})",
            pytrace=False,
        )
    return dict(facts["adapter"])
