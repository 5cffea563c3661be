"""Test machinery stays out of the production path (issue 36, item 5): a build consults no test
hook, the misbehaving test providers come in through the public ``ProviderType.session_wrapper``,
and the pytest plugin every pytest start loads imports neither numpy nor ONNX Runtime.
Real ONNX Runtime sessions (the Azure provider, in every wheel), real models.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest
from ortplug import HostCapabilities, LocalCheckpoint, OnnxBackend, PluginHost, ProviderType
from ortplug.plugins import hookimpl
from ortplug.testing import demo_model, make_plugin_host
from ortplug_misbehaving import MisbehavingPlugin

_AZURE = "AzureExecutionProvider"


class _Counting:
    """A layer over a real session that counts its runs."""

    def __init__(self, session: Any, config: object) -> None:
        self.session = session
        self.config = config
        self.runs = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self.session.run(*args, **kwargs)


_served: list[_Counting] = []


def _counting(session: Any, config: object) -> _Counting:
    _served.append(_Counting(session, config))
    return _served[-1]


@attrs.frozen
class _Layered:
    """A provider config on ONNX Runtime's Azure provider."""

    kind: ClassVar[str] = "layered"
    tag: str = "a"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return _AZURE, {}

    def ortplug_testing_wrap(self, session: Any) -> Any:
        """The hook builds consulted before: no build may call it now."""
        raise AssertionError("a production build consulted a test hook")


class _LayeredPlugin:
    def __init__(self, wrapper: Any = None) -> None:
        self.wrapper = wrapper

    @hookimpl
    def ortplug_provider_types(self) -> Any:
        wrapper = {} if self.wrapper is None else {"session_wrapper": self.wrapper}
        yield ProviderType("layered", _AZURE, _Layered, **wrapper)


def _build(plugins: PluginHost) -> OnnxBackend:
    checkpoint = LocalCheckpoint(demo_model()).resolve()
    return OnnxBackend.from_checkpoint(
        checkpoint, providers=[_Layered("b"), "cpu"], plugins=plugins, verify=False
    )


def test_a_session_wrapper_serves_the_sessions_its_kind_is_realized_in() -> None:
    _served.clear()
    backend = _build(make_plugin_host(("layered", _LayeredPlugin(_counting))))
    assert _AZURE in backend.providers
    backend.run({"x": np.ones((2, 8), np.float32)})
    assert len(_served) == 1 and _served[0].config == _Layered("b")
    assert _served[0].runs == 1


def test_a_build_consults_no_test_hook_on_a_config() -> None:
    backend = _build(make_plugin_host(("layered", _LayeredPlugin())))
    outputs = backend.run({"x": np.ones((2, 8), np.float32)})
    assert _AZURE in backend.providers and outputs["probs"].shape == (2, 3)


def test_a_session_wrapper_must_be_callable() -> None:
    with pytest.raises(TypeError, match="session_wrapper"):
        ProviderType("layered", _AZURE, _Layered, session_wrapper="not callable")


def test_the_misbehaving_providers_come_in_through_their_type() -> None:
    plugins = make_plugin_host(("bad", MisbehavingPlugin("off")))
    (spec,) = [s for s in plugins.provider_registry().specs() if s.type.kind == "misbehaving"]
    assert spec.type.session_wrapper is not None
    checkpoint = LocalCheckpoint(demo_model()).resolve()
    backend = OnnxBackend.from_checkpoint(
        checkpoint, providers=["misbehaving", "cpu"], plugins=plugins, verify=False
    )
    x = {"x": np.ones((2, 8), np.float32)}
    reference = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"]).run(x)
    assert not np.allclose(backend.run(x)["probs"], reference["probs"])  # "off": shifted


def _fresh_python(code: str, tmp_path: Path) -> list[str]:
    """The modules ``code`` leaves imported in a fresh interpreter (its last line's list)."""
    script = textwrap.dedent(code) + "\nimport sys; print(' '.join(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"ORTPLUG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_pytest_plugin_imports_neither_numpy_nor_onnxruntime(tmp_path: Path) -> None:
    (point,) = [p for p in entry_points(group="pytest11") if p.name == "ortplug"]
    loaded = _fresh_python(
        f"""
        import pytest
        from importlib.metadata import entry_points
        (point,) = [p for p in entry_points(group="pytest11") if p.value == {point.value!r}]
        point.load()
        """,
        tmp_path,
    )
    assert point.value in loaded
    heavy = [name for name in loaded if name.split(".")[0] in ("numpy", "onnxruntime", "attrs")]
    assert heavy == [] and "ortplug.testing" not in loaded


def test_the_fixtures_import_the_helpers_when_used(
    plugin_host: PluginHost, cpu_host: HostCapabilities, ortplug_cache: Path
) -> None:
    assert "cpu" in plugin_host.provider_registry().kinds()
    assert cpu_host.fact("cpu", "usable_cpus") == 8
    assert ortplug_cache.name == "ortplug-cache"


_ADD_ONS = ("ortplug_serve", "ortplug_ray", "ortplug_dropin", "ortplug_variants", "ray", "onnx")


@pytest.mark.parametrize("providers", [None, ["cpu"]])
def test_a_cpu_build_imports_no_add_on_and_no_test_machinery(
    tmp_path: Path, providers: list[str] | None
) -> None:
    loaded = _fresh_python(
        f"""
        import numpy as np
        from ortplug import LocalCheckpoint, OnnxBackend
        checkpoint = LocalCheckpoint({str(demo_model())!r}).resolve()
        backend = OnnxBackend.from_checkpoint(checkpoint, providers={providers!r})
        assert backend.providers == ("CPUExecutionProvider",), backend.providers
        backend.run({{"x": np.ones((1, 8), np.float32)}})
        """,
        tmp_path,
    )
    assert "ortplug.session.build" in loaded  # it did build
    assert [name for name in loaded if name.split(".")[0] in _ADD_ONS] == []
    assert [name for name in loaded if name.startswith(("ortplug.testing", "ortplug.dropin"))] == []
