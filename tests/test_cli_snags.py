"""What a tester and a new user found on the command line (issue 37, item 9): each snag as a
test that failed before its fix, through the installed console script or ``main`` in-process.

Real ONNX Runtime sessions on small models built with ``onnx.helper``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dists import dist_info
from variant_models import broken_int8, mlp_with_variants

ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
VNNI = {"ORTPLUG_OVERRIDE_CPU_ISA_FLAGS": '["avx2", "avx512_vnni"]'}


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "ORTPLUG_PLUGINS": "cpu", **env}
    return subprocess.run(
        [ORTPLUG, *args], capture_output=True, text=True, env=environment, timeout=300
    )


# -- info --model: the chain and its candidates agree ----------------------------------------------


@pytest.mark.parametrize("measure", ["0", "1"])
def test_the_first_info_chain_says_what_its_candidates_say(tmp_path: Path, measure: str) -> None:
    """Regression: the first ``info --model`` of a model whose int8 variant verification
    rejects called the chain "int8 variant on a CPU with int8 dot products" above its own
    candidate line saying int8 was rejected (the policy's reason for a choice that does not
    serve); it now names what serves, before and after the build records its choice."""
    broken_int8(mlp_with_variants(tmp_path, "int8"))
    model = str(tmp_path / "mlp.onnx")
    for _ in range(2):  # the first info (it builds) and the next (the recorded choice)
        done = _cli("info", "--model", model, "--json", ORTPLUG_MEASURE=measure, **VNNI)
        assert done.returncode == 0, done.stderr
        info = json.loads(done.stdout)
        (served,) = [c for c in info["candidates"] if c["chosen"]]
        (int8,) = [c for c in info["candidates"] if c["variant"] == "int8"]
        assert served["variant"] is None and "rejected" in int8["reason"]
        assert [row["kind"] for row in info["chain"]] == served["chain"] == ["cpu"]
        reason = info["chain"][0]["reason"]
        assert "int8 dot products" not in reason, reason
    if measure == "0":  # nothing recorded: the chain says why the policy's choice does not serve
        assert reason == (
            "reference weights (fp32) serve: the CPU reference; the policy's first choice, "
            "variant int8 on [cpu], does not (its candidate line says why)"
        )
    else:
        assert reason.startswith("measured on this model's first build here: cpu was the fastest")


# -- doctor: a manifest typo -------------------------------------------------------------------------

MANIFEST_PLUGIN = Path(__file__).parent / "plugin_dists" / "ortplug-manifesttest" / "src"


def test_a_manifest_typo_is_one_doctor_fail_with_the_fix_for_it(tmp_path: Path) -> None:
    """Regression: a plugin whose ortplug.json has a typo was one FAIL for its declaration and a
    second one for what then failed without the kinds and probes the declaration holds (its
    offer hook: "provider kind ... is not registered by any plugin ...; contribute it with
    ortplug_provider_types", a plugin author's fix; now its config class's import), a failure
    that only follows from the typo. It is one FAIL, naming the file and what to do."""
    site = tmp_path / "site"
    shutil.copytree(MANIFEST_PLUGIN / "ortplug_manifesttest", site / "ortplug_manifesttest")
    dist_info(
        site, "ortplug-manifesttest", {"manifesttest": "ortplug_manifesttest.plugin"}, "0.0.1"
    )
    plugin = site / "ortplug_manifesttest" / "plugin.py"  # it offers for any model, as most do
    condition = 'metadata.extra.get("ortplug_manifesttest") and host.fact("manifesttest", "usable")'
    plugin.write_text(plugin.read_text().replace(condition, "metadata"))
    manifest = site / "ortplug_manifesttest" / "ortplug.json"
    declared = json.loads(manifest.read_text())
    kind = declared["plugins"]["manifesttest"]["kinds"][0]
    kind["ort_nmae"] = kind.pop("ort_name")  # the typo
    manifest.write_text(json.dumps(declared))
    done = _cli("doctor", "--json", PYTHONPATH=str(site), ORTPLUG_PLUGINS="cpu,manifesttest")
    checks = json.loads(done.stdout)["checks"]
    said = [c for c in checks if not c["ok"] and "manifesttest" in c["name"] + c["detail"]]
    assert len(said) == 1, said
    (check,) = said
    assert check["name"] == "plugin manifesttest"
    assert check["detail"].startswith(
        "failed in declaration: DeclarationError: plugin 'manifesttest': "
        "ortplug_manifesttest/ortplug.json: plugins.manifesttest.kinds[0]: unknown field(s) "
        "['ort_nmae']; expected some of kind, ort_name, "
    )
    assert "contribute it with" not in check["detail"]
    assert check["detail"].endswith("; so it also failed in import")  # its config class's
    assert check["fix"] == (
        "its ortplug.json does not check: reinstall ortplug-manifesttest 0.0.1 if it was changed "
        "here, else report it to its maker; or disable it with "
        "ORTPLUG_DISABLE_PLUGINS=manifesttest"
    )


# -- --version --json ----------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("--version", "--json"), ("--json", "--version")])
def test_version_json_is_the_version_lines_as_json(order: tuple[str, str]) -> None:
    """Regression: ``ortplug --version --json`` printed the text lines (``--json`` ignored)."""
    text = _cli("--version")
    done = _cli(*order)
    assert (text.returncode, done.returncode, done.stderr) == (0, 0, "")
    found = json.loads(done.stdout)
    lines = [f"ortplug {found['ortplug']}"]
    lines += [f"runtime {r['name']} {r['version']}" for r in found["runtimes"]]
    lines += [
        f"plugin {p['entry_point']}: {p['distribution']} {p['version']}" for p in found["plugins"]
    ]
    assert lines == text.stdout.splitlines()
    assert {p["entry_point"] for p in found["plugins"]} >= {"cpu"} and found["runtimes"]


# -- exec of a program that is not there -----------------------------------------------------------
