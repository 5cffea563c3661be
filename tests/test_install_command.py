"""Every install line ortplug prints is spelled by one function: the checkout's folders when the
core was installed from one (nothing is on the registry yet), else the registry's names."""

from __future__ import annotations

from pathlib import Path

import pytest
from ortplug.host.install_command import (
    core_checkout,
    core_extras,
    install_targets,
    pip_install,
)
from ortplug.host.runtime import RuntimeDistribution, duplicate_runtimes, install_hint
from ortplug.plugin_host.first_party import runtime_install

REPOSITORY = Path(__file__).resolve().parents[1]
_EXTRAS = {
    "cpu": frozenset({"onnxruntime", "ortplug-cpu"}),
    "cuda": frozenset({"onnxruntime-gpu", "ortplug-cpu", "ortplug-cuda"}),
    "ray": frozenset({"ray"}),
}
#: The README's install matrix, from this checkout.
_CPU = f"pip install '{REPOSITORY}/core[cpu]' {REPOSITORY}/plugins/cpu"
_CUDA = f"pip install '{REPOSITORY}/core[cuda]' {REPOSITORY}/plugins/cpu {REPOSITORY}/plugins/cuda"


@pytest.fixture(autouse=True)
def _installed_from_this_checkout() -> None:
    """requirements-test.txt installs the core from this tree's folder, as the README does."""
    assert core_checkout() == REPOSITORY


def test_published_it_is_the_registrys_names() -> None:
    assert install_targets(["ortplug[cuda]"], None, _EXTRAS) == ["ortplug[cuda]"]
    assert install_targets(["ortplug[cpu]", "ortplug-openvino", "acme>=2"], None, _EXTRAS) == [
        "ortplug[cpu]", "ortplug-openvino", "acme>=2"
    ]  # fmt: skip


def test_from_a_checkout_it_is_its_folders() -> None:
    assert install_targets(["ortplug[cuda]"], REPOSITORY, _EXTRAS) == [
        f"{REPOSITORY}/core[cuda]", f"{REPOSITORY}/plugins/cpu", f"{REPOSITORY}/plugins/cuda"
    ]  # fmt: skip
    assert install_targets(["ortplug[ray]"], REPOSITORY, _EXTRAS) == [f"{REPOSITORY}/core[ray]"]
    assert install_targets(["ortplug-openvino"], REPOSITORY, _EXTRAS) == [
        f"{REPOSITORY}/examples/ortplug-openvino"
    ]
    assert pip_install("ortplug[cuda]") == _CUDA
    assert core_extras()["cuda"] >= {"onnxruntime-gpu", "ortplug-cpu", "ortplug-cuda"}


@pytest.mark.parametrize("extra", ["serve", "ray", "dropin", "variants"])
def test_an_add_on_s_install_line_from_a_checkout_names_its_folder(extra) -> None:
    """``pip install '.../core[dropin]'`` alone fails: ortplug-dropin is not on the registry."""
    line = pip_install(f"ortplug[{extra}]")
    assert line == f"pip install '{REPOSITORY}/core[{extra}]' {REPOSITORY}/addons/{extra}"


def test_doctors_fix_lines_name_the_checkout_as_host_fit_does() -> None:
    """The runtime checks said ``pip install 'ortplug[cpu]'`` (and ``[cuda]``), which pip
    cannot find while ortplug is not published, beside host fit lines naming the folders."""
    assert f"e.g. {_CPU} (CPU hosts)" in install_hint()
    two = (
        RuntimeDistribution("onnxruntime", "1.32.0"),
        RuntimeDistribution("onnxruntime-gpu", "1"),
    )
    found = duplicate_runtimes(two, runtime_install)
    assert found is not None
    assert found[1] == f"pip uninstall -y onnxruntime onnxruntime-gpu && {_CUDA}"
