"""A plugin declared by its ortplug.json alone: the core builds its kind and probe from it."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import models
import numpy as np
import pytest
from dists import dist_info
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    OnnxBackend,
    OrtplugPluginWarning,
    PluginHost,
)
from ortplug.testing import make_plugin_host

SOURCE = Path(__file__).parent / "plugin_dists" / "ortplug-manifesttest" / "src"
PACKAGE = "ortplug_manifesttest"
META = CheckpointMetadata(
    input_names=["a", "b"], output_names=["c"], extra={"ortplug_manifesttest": True}
)


@pytest.fixture(autouse=True)
def _fresh_modules() -> Iterator[None]:
    """Each test imports the plugin from where it put it."""
    yield
    for name in [m for m in sys.modules if m.partition(".")[0] == PACKAGE]:
        del sys.modules[name]


def _site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str | None = None) -> Path:
    """The plugin installed as pip leaves it (package, its ortplug.json, entry point)."""
    site = tmp_path / "site"
    shutil.copytree(SOURCE / PACKAGE, site / PACKAGE)
    dist_info(site, "ortplug-manifesttest", {"manifesttest": f"{PACKAGE}.plugin"}, "0.0.1")
    if config is not None:
        path = site / PACKAGE / "ortplug.json"
        declared = json.loads(path.read_text())
        declared["plugins"]["manifesttest"]["kinds"][0]["config"] = config
        path.write_text(json.dumps(declared))
    monkeypatch.syspath_prepend(str(site))
    return site


def _served(plugins: PluginHost) -> OnnxBackend:
    checkpoint = InMemoryCheckpoint(models.add_model(), META).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugins, verify=False)
    one = np.ones((1, 4), np.float32)
    assert backend.run({"a": one, "b": one})["c"][0, 0] == 2.0
    return backend


def test_the_test_plugin_implements_no_type_or_probe_hook() -> None:
    code = (SOURCE / PACKAGE / "plugin.py").read_text()
    hooks = ("ortplug_provider_types", "ortplug_host_probes", "ortplug_metadata_keys")
    assert not [hook for hook in hooks if hook in code]


def test_a_plugin_declared_by_manifest_alone_is_discovered_builds_and_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _site(tmp_path, monkeypatch)
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu,manifesttest"})
    assert PACKAGE not in sys.modules  # discovery read the declaration, imported nothing
    spec = host.provider_registry().lookup("manifest")  # the declared alias
    from ortplug_manifesttest.config import ManifestAzureProvider

    assert (spec.plugin, spec.type.kind, spec.type.config_cls) == (
        "manifesttest",
        "manifestazure",
        ManifestAzureProvider,
    )
    assert spec.type.description == "ONNX Runtime's Azure provider, declared by manifest alone"
    assert host.metadata_keys()["ortplug_manifesttest"].types == (bool,)
    backend = _served(host)
    assert backend.providers == ("AzureExecutionProvider", "CPUExecutionProvider")
    assert host.host_capabilities().fact("manifesttest", "usable") is True
    assert host.failures == ()


def test_a_manifest_plugin_registered_directly_takes_its_types_from_its_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(SOURCE))
    import ortplug_manifesttest.plugin

    host = make_plugin_host(("manifesttest", ortplug_manifesttest.plugin))
    assert host.provider_registry().parse("manifestazure").to_ort()[0] == "AzureExecutionProvider"
    assert _served(host).providers[0] == "AzureExecutionProvider"


def test_a_wrong_import_path_is_one_line_and_the_host_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _site(tmp_path, monkeypatch, config="ortplug_manifesttest.config:Missing")
    host = PluginHost(environ={"ORTPLUG_PLUGINS": "cpu,manifesttest"})
    with pytest.warns(OrtplugPluginWarning) as caught:
        kinds = host.provider_registry().specs()
    assert "manifestazure" not in {spec.type.kind for spec in kinds}
    (line,) = [str(w.message) for w in caught if "Missing" in str(w.message)]
    assert "\n" not in line
    assert (
        "plugin 'manifesttest': 'ortplug_manifesttest.config:Missing': expected a provider "
        "config class, got AttributeError" in line
    )
    checkpoint = InMemoryCheckpoint(models.add_model(), META).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=host, verify=False)
    assert backend.providers == ("CPUExecutionProvider",)
