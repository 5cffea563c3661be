"""What a new plugin author ran into (issue 23's snags), each pinned by a test."""

from __future__ import annotations

from typing import ClassVar

import attrs
import models
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, OrtplugPluginWarning, PluginHost
from ortplug.errors import OptionError, ProviderNotRealizedError
from ortplug.host.ep_libraries import ensure_library
from ortplug.plugins import (
    CheckpointMetadata,
    EpLibrary,
    EpPackageHookPlugin,
    HostProbe,
    LibraryProvider,
    ProviderDecline,
    ProviderOffer,
    hookimpl,
)
from ortplug.testing import make_host, make_plugin_host
from ortplug_cpu import CpuProvider

META = CheckpointMetadata(input_names=["a", "b"], output_names=["c"])


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ProviderOffer(CpuProvider(), "high", "fast"),
            "ProviderOffer.preference: expected int, got str 'high'",
        ),
        (
            lambda: ProviderOffer(CpuProvider(), True, "fast"),
            "ProviderOffer.preference: expected int, got bool True",
        ),
        (lambda: ProviderDecline("acme", None), "ProviderDecline.reason: expected str, got"),
    ],
)
def test_a_wrong_field_of_an_offer_is_one_line(build, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError) as caught:
        build()
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert "Attribute(" not in str(caught.value)


class _OneWrongItem:
    @hookimpl
    def ortplug_offer_providers(self):
        yield ProviderOffer(CpuProvider(threads=1), preference=3, reason="kept")
        yield "not an offer"


def test_one_wrong_item_leaves_the_rest_of_the_answer(plugin_host: PluginHost, cpu_host) -> None:
    assert plugin_host.register(_OneWrongItem(), name="sloppy")
    with pytest.warns(OrtplugPluginWarning, match="got str 'not an offer'; 1 such item"):
        answers = plugin_host.offer_providers(META, cpu_host)
    assert [a.reason for a in answers if a.plugin == "sloppy"] == ["kept"]


def test_hostprobe_types_are_json_types_and_say_so() -> None:
    HostProbe(name="acme", facts=("n",), detect=dict, types={"n": (int, float)})
    with pytest.raises(OptionError, match=r"HostProbe.types\['n'\]: expected one of bool, int"):
        HostProbe(name="acme", facts=("n",), detect=dict, types={"n": tuple})


@attrs.frozen(kw_only=True)
class _JsonProvider(LibraryProvider):
    kind: ClassVar[str] = "jsonep"
    ort_name: ClassVar[str] = "JsonExecutionProvider"


def test_a_package_that_is_no_plugin_ep_package_says_so() -> None:
    """``json`` has no get_library_path(): the status and an explicit chain say what is wrong."""
    library = EpLibrary("ortplug.jsonep", ("JsonExecutionProvider",), package="json")
    problem = ensure_library(library).problem()
    assert problem is not None and "'json' has no get_library_path()" in problem
    assert "EpLibrary(path=...)" in problem
    plugins = make_plugin_host(("jsonep", EpPackageHookPlugin("json", _JsonProvider)))
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    with pytest.raises(ProviderNotRealizedError, match="has no get_library_path"):
        OnnxBackend.from_checkpoint(checkpoint, providers=["jsonep", "cpu"], plugins=plugins)


def test_a_plugin_ep_offer_is_testable_with_injected_facts_and_no_library() -> None:
    """make_host facts (or overrides) stand for the library: the core does not load a real one."""
    plugin = EpPackageHookPlugin("onnxruntime_ep_absent", _JsonProvider, preference=30)
    plugins = make_plugin_host(("jsonep", plugin))
    device = {"ep_name": "JsonExecutionProvider", "type": "NPU", "vendor": "Acme", "name": "N1"}
    host = make_host(jsonep={"devices": [device], "library": "/nowhere.so", "error": None})
    answers = plugins.offer_providers(META, host)
    offers = [a for a in answers if isinstance(a, ProviderOffer) and a.config.kind == "jsonep"]
    assert [o.preference for o in offers] == [30]
    forced = make_plugin_host(
        ("jsonep", plugin),
        environ={"ORTPLUG_OVERRIDE_JSONEP_DEVICES": f"[{device!r}]".replace("'", '"')},
    )
    answers = forced.offer_providers(META, forced.host_capabilities())
    assert any(isinstance(a, ProviderOffer) and a.config.kind == "jsonep" for a in answers)


class _BrokenPolicyHooks:
    @hookimpl
    def ortplug_offer_providers(self):
        raise RuntimeError("offer bug")

    @hookimpl
    def ortplug_adjust_session_options(self):
        raise RuntimeError("options bug")


def test_doctor_fails_a_plugin_whose_policy_hooks_fail(plugin_host: PluginHost) -> None:
    from ortplug.cli._doctor import run_checks

    assert plugin_host.register(_BrokenPolicyHooks(), name="broken")
    with pytest.warns(OrtplugPluginWarning):
        checks = run_checks(plugin_host)
    failed = {check.detail for check in checks if not check.ok and check.name == "plugin broken"}
    assert failed == {
        "failed in ortplug_offer_providers: RuntimeError: offer bug",
        "failed in ortplug_adjust_session_options: RuntimeError: options bug",
    }
    (row,) = [row for row in plugin_host.plugin_infos() if row.name == "broken"]
    assert row.status == "failing"


def _offering(config: object, ort_name: str) -> object:
    """A plugin whose type names ``config``'s kind ``ort_name``, offering ``config`` first."""

    class Offering:
        @hookimpl
        def ortplug_provider_types(self):
            from ortplug.plugins import ProviderType

            kind = config.kind  # type: ignore[attr-defined]
            yield ProviderType(kind=kind, ort_name=ort_name, config_cls=type(config))

        @hookimpl
        def ortplug_offer_providers(self):
            yield ProviderOffer(config, preference=90, reason="fast")  # type: ignore[arg-type]

    return Offering()


@attrs.frozen
class _CopiedCpuConfig:
    """A new provider's config copied from the CPU one, its ``to_ort()`` left as it was."""

    kind: ClassVar[str] = "ggmlish"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "CPUExecutionProvider", {}


def test_an_offer_whose_config_runs_another_provider_is_refused_naming_both(
    plugin_host: PluginHost, cpu_host
) -> None:
    """Its config ran the CPU provider: it counted as the CPU reference and was never verified."""
    plugin = _offering(_CopiedCpuConfig(), "GgmlExecutionProvider")
    assert plugin_host.register(plugin, name="ggmlish")
    with pytest.warns(OrtplugPluginWarning) as caught:
        answers = plugin_host.offer_providers(META, cpu_host)
    (line,) = [str(w.message) for w in caught if "ggmlish" in str(w.message)]
    assert "'CPUExecutionProvider'" in line and "'GgmlExecutionProvider'" in line
    assert "\n" not in line
    kinds = [a.config.kind for a in answers if isinstance(a, ProviderOffer)]
    assert "ggmlish" not in kinds and "cpu" in kinds


def test_forgetting_the_libraries_lets_a_later_test_register_one_afresh() -> None:
    """ONNX Runtime's registration is process-wide: without this, tests depend on their order."""
    import onnxruntime as ort
    from ortplug.testing import forget_ep_libraries

    library = EpLibrary(
        "ortplug.forgettest", "OpenVINOExecutionProvider", package="onnxruntime_ep_openvino"
    )
    status = ensure_library(library)
    assert status.error is None, status.error  # registered (devices or none)
    assert "ortplug.forgettest" in forget_ep_libraries()
    ort.register_execution_provider_library("ortplug.forgettest", status.path)  # not "already"
    ort.unregister_execution_provider_library("ortplug.forgettest")
    assert ensure_library(library) is not status  # known no more: registered afresh
    assert "ortplug.forgettest" in forget_ep_libraries()


@attrs.frozen
class _BrokenConfig:
    kind: ClassVar[str] = "brokenort"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        raise KeyError("device_id")


def test_a_config_whose_to_ort_raises_is_that_plugins_failure_not_the_builds(
    plugin_host: PluginHost, cpu_host
) -> None:
    plugin = _offering(_BrokenConfig(), "BrokenExecutionProvider")
    assert plugin_host.register(plugin, name="brokenort")
    with pytest.warns(OrtplugPluginWarning, match="'brokenort'.*KeyError"):
        answers = plugin_host.offer_providers(META, cpu_host)
    kinds = [a.config.kind for a in answers if isinstance(a, ProviderOffer)]
    assert kinds == ["cpu"]
