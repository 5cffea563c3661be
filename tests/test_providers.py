"""parse_provider and the provider registry: every accepted form, and clear errors."""

from __future__ import annotations

import pytest
from ortplug import PluginHost, ProviderType, hookimpl, parse_provider
from ortplug.errors import OrtplugPluginWarning
from ortplug_cpu import CpuProvider
from plugin_objects import FakeCudaPlugin, FakeCudaProvider


@pytest.fixture
def host(plugin_host: PluginHost) -> PluginHost:
    assert plugin_host.register(FakeCudaPlugin(), name="fakecuda")
    return plugin_host


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cpu", CpuProvider()),
        ("CPUExecutionProvider", CpuProvider()),
        ({"kind": "cpu", "use_arena": False}, CpuProvider(use_arena=False)),
        ("gpu", FakeCudaProvider()),
        ("CUDAExecutionProvider", FakeCudaProvider()),
        ({"kind": "fakecuda", "device_id": 1}, FakeCudaProvider(device_id=1)),
        (FakeCudaProvider(device_id=2), FakeCudaProvider(device_id=2)),
    ],
)
def test_every_form_parses(host, value, expected) -> None:
    assert parse_provider(value, plugins=host) == expected


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ("tpu", ["unknown provider 'tpu'", "known kinds: cpu, fakecuda"]),
        ("cpuu", ["did you mean 'cpu'?"]),
        (
            {"kind": "cpu", "arena": True},
            ["provider 'cpu'", "unknown option(s) ['arena']", "use_arena"],
        ),
        ({"kind": "fakecuda", "device_id": -1}, ["provider 'fakecuda'", "device_id", "-1"]),
        ({"device_id": 1}, ["'kind' string", "cpu, fakecuda"]),
        (3, ["expected a provider config", "int 3"]),
    ],
)
def test_bad_providers_are_named(host, value, fragments) -> None:
    with pytest.raises(ValueError) as info:
        parse_provider(value, plugins=host)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_cpu_config_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="threads: expected a thread count from 1 to"):
        CpuProvider(threads=0)
    with pytest.raises(ValueError, match="use_arena: expected true, false or null"):
        CpuProvider(use_arena="yes")  # type: ignore[arg-type]
    assert CpuProvider().to_ort() == ("CPUExecutionProvider", {})


class _ClaimsGpuAlias:
    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("othergpu", "OtherExecutionProvider", _OtherGpu, aliases=("gpu",))


class _OtherGpu:
    kind = "othergpu"

    def to_ort(self):
        return "OtherExecutionProvider", {}


def test_alias_claimed_twice_skips_the_later_plugin_and_names_both(host) -> None:
    assert host.register(_ClaimsGpuAlias(), name="other")
    with pytest.warns(OrtplugPluginWarning) as caught:
        registry = host.provider_registry()
    message = str(caught[0].message)
    assert "'gpu'" in message and "'fakecuda'" in message and "'other'" in message
    assert "ORTPLUG_DISABLE_PLUGINS=other" in message
    assert registry.lookup("gpu").plugin == "fakecuda"  # the first claim stands
    assert "other" not in host.plugin_names()
    assert {p.name: p.status for p in host.plugin_infos()}["other"] == "failed"


def test_provider_type_must_match_its_config_class() -> None:
    with pytest.raises(ValueError, match="declares kind 'fakecuda'"):
        ProviderType("cuda", "CUDAExecutionProvider", FakeCudaProvider)
