"""Plugin-EP libraries: lazy, once-per-process registration, devices, and every failure reported."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import ClassVar

import attrs
import models
import onnxruntime as ort
import pytest
from ortplug import (
    InMemoryCheckpoint,
    OnnxBackend,
    PluginHost,
    ProviderNotRealizedError,
    ProviderOffer,
    ProviderType,
    hookimpl,
)
from ortplug.host.ep_libraries import EpLibrary, ensure_library
from ortplug.plugins.ep_package import LibraryProvider


def test_a_missing_library_file_is_reported(tmp_path) -> None:
    status = ensure_library(
        EpLibrary("ortplug.test-missing", "MissingEP", path=str(tmp_path / "nope.so"))
    )
    assert not status.usable
    assert status.problem() == f"library file not found: {tmp_path / 'nope.so'}"


def test_a_file_that_is_no_library_is_reported(tmp_path) -> None:
    fake = tmp_path / "libfake_ep.so"
    fake.write_bytes(b"not an ELF file")
    status = ensure_library(EpLibrary("ortplug.test-fake", "FakeEP", path=str(fake)))
    assert status.devices == ()
    assert status.problem().startswith(f"ONNX Runtime {ort.__version__} could not load {fake}")


def test_a_package_that_is_not_installed_is_reported() -> None:
    status = ensure_library(
        EpLibrary("ortplug.test-nopkg", "NoEP", package="onnxruntime_ep_does_not_exist")
    )
    assert status.problem() == (
        "onnxruntime_ep_does_not_exist: ModuleNotFoundError: No module named 'onnxruntime_ep_does_not_exist'"
    )


def test_registration_is_lazy_once_and_accepts_already_registered() -> None:
    import onnxruntime_ep_openvino

    path = onnxruntime_ep_openvino.get_library_path()
    ort.register_execution_provider_library(
        "ortplug.test-pre", path
    )  # someone else got there first
    library = EpLibrary(
        "ortplug.test-pre", "OpenVINOExecutionProvider", package="onnxruntime_ep_openvino"
    )
    status = ensure_library(library)
    assert status.error is None and status.path == path
    assert ensure_library(library) is status  # once per process
    for device in status.devices:
        assert device.ep_name == "OpenVINOExecutionProvider" and device.type in (
            "CPU",
            "GPU",
            "NPU",
        )
    if not status.devices:
        assert "offers no device on this host" in status.problem()


def test_a_provider_found_runnable_is_not_loaded_again_to_be_offered(tmp_path) -> None:
    # a later process answers from the probe cache; the library loads when a session needs it
    code = (
        "import onnxruntime as ort\n"
        "from ortplug.host.ep_libraries import EpLibrary, ensure_library, offer_problem\n"
        "library = EpLibrary('ortplug.test-offer', 'OpenVINOExecutionProvider',"
        " package='onnxruntime_ep_openvino')\n"
        "loaded = lambda: any(d.ep_name == 'OpenVINOExecutionProvider' for d in ort.get_ep_devices())\n"
        "print(offer_problem(library, 'OpenVINOExecutionProvider'), loaded(),"
        " ensure_library(library).usable, loaded())"
    )
    env = {**os.environ, "ORTPLUG_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        for _ in range(2)
    ]
    offered = ensure_library(
        EpLibrary(
            "ortplug.test-host", "OpenVINOExecutionProvider", package="onnxruntime_ep_openvino"
        )
    ).devices
    if offered:  # found runnable once, then answered from the cache without loading it
        assert [run.stdout for run in runs] == ["None True True True\n", "None False True True\n"]
    else:  # a host it offers no device on (an AMD CPU): said in each process, nothing kept
        said = "registered but OpenVINOExecutionProvider offers no device on this host"
        assert all(
            said in run.stdout and run.stdout.endswith(" False False False\n") for run in runs
        )


def test_mutually_exclusive_library_locations() -> None:
    with pytest.raises(ValueError, match="expected exactly one of path= or package="):
        EpLibrary("x", "XEP")
    with pytest.raises(ValueError, match="EpLibrary.ep_names: expected provider names"):
        EpLibrary("x", [], path="/x.so")


@attrs.frozen(kw_only=True)
class _GhostProvider(LibraryProvider):
    kind: ClassVar[str] = "ghost"
    ort_name: ClassVar[str] = "GhostExecutionProvider"


class _GhostPlugin:
    """Claims a plugin-EP library at a path that does not exist, and offers it anyway."""

    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("ghost", "GhostExecutionProvider", _GhostProvider,
                           library=EpLibrary("ortplug.test-ghost", "GhostExecutionProvider", path="/nonexistent/libghost.so"))  # fmt: skip

    @hookimpl
    def ortplug_offer_providers(self):
        yield ProviderOffer(_GhostProvider(), preference=90, reason="claims a library")


@pytest.fixture
def ghost_host(plugin_host) -> PluginHost:
    assert plugin_host.register(_GhostPlugin(), name="ghost")
    return plugin_host


def test_a_plugin_whose_library_is_missing_keeps_the_host_working(ghost_host) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(ProviderNotRealizedError) as caught:
        OnnxBackend.from_checkpoint(checkpoint, providers=["ghost", "cpu"], plugins=ghost_host)
    assert "library file not found: /nonexistent/libghost.so" in str(caught.value)
    assert caught.value.missing == ("GhostExecutionProvider",)
    assert "checked by ortplug" in caught.value.declines["ghost"]  # ortplug's part, named
    # A policy never offers it: the core declines it at offer time, with the reason.
    backend = OnnxBackend.from_checkpoint(checkpoint, plugins=ghost_host)
    assert backend.providers == ("CPUExecutionProvider",)
    (reason,) = [r for kind, r in backend.report.declined if kind == "ghost"]
    assert "libghost.so" in reason
    assert "checked by ortplug" in reason


def test_a_library_provider_cannot_share_a_session_with_a_deviceless_builtin(plugin_host) -> None:
    import ortplug_openvino
    from ortplug_azuretest import AzureProvider

    assert plugin_host.register(ortplug_openvino.plugin, name="openvino")
    import ortplug_azuretest

    assert plugin_host.register(ortplug_azuretest, name="azuretest")
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(
        ProviderNotRealizedError, match="cannot share a session with AzureExecutionProvider"
    ):
        OnnxBackend.from_checkpoint(
            checkpoint, providers=[AzureProvider(), "openvino", "cpu"], plugins=plugin_host
        )
