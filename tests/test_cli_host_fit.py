"""Host fit on the command line: ``info``, ``doctor`` and ``doctor --fix`` as real processes.

Hardware comes from fake roots (``ORTPLUG_OVERRIDE_HARDWARE_ROOT``), so every test runs the same
on any host. The one ``slow`` test makes a throwaway venv with two runtime wheels from the
registry and no CPU plugin, and lets ``doctor --fix --yes`` repair it from this tree's folders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import fake_roots
import pytest
from dists import dist_info

REPOSITORY = Path(__file__).resolve().parents[1]
_ROOT_ENV = "ORTPLUG_OVERRIDE_HARDWARE_ROOT"
_LINUX = {"ORTPLUG_OVERRIDE_PLATFORM": "linux", "ORTPLUG_OVERRIDE_MACHINE": "x86_64"}
#: How ``--fix`` runs pip: with the working directory off its path.
_SAFE_PATH = "-P" if sys.version_info >= (3, 11) else "-I"
_PIP = f"{sys.executable} {_SAFE_PATH} -m pip"


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _cli_with([sys.executable], *args, **env)


def _cli_with(python: list[str], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ortplug ARGS`` run by the ``python`` command line (another user's, another Python)."""
    return subprocess.run(
        [*python, "-m", "ortplug.cli.main", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **_LINUX, **env},
        timeout=300,
    )


def _runtimes() -> list[str]:
    from ortplug.host.runtime import installed_runtimes

    return [f"{r.name} {r.version}" for r in installed_runtimes()]


def test_info_names_the_hardware_and_what_it_calls_for(tmp_path: Path) -> None:
    done = _cli("info", "--json", **{_ROOT_ENV: str(fake_roots.nvidia(tmp_path))})
    fit = json.loads(done.stdout)["fit"]
    assert fit["hardware"]["gpus"] == ["NVIDIA H200"]
    assert fit["hardware"]["facts"] == {"cuda.driver_version": "580.65.06"}
    assert "cuda" in fit["applies"]
    runtime = fit["findings"][0]
    assert runtime["subject"] == "runtime" and not runtime["ok"]
    assert (
        "this host needs onnxruntime-gpu[cuda,cudnn]==1.31.1 (for ortplug-cuda)"
        in runtime["detail"]
    )
    text = _cli("info", **{_ROOT_ENV: str(tmp_path)}).stdout
    assert "hardware     linux x86_64: NVIDIA H200, NVIDIA driver 580.65.06," in text
    assert (
        f"fit          {runtime['detail']}; fix it with: pip uninstall -y onnxruntime && pip install "
        in text
    )


def test_doctor_fix_on_a_cpu_host_has_nothing_to_do(tmp_path: Path) -> None:
    done = _cli("doctor", "--fix", **{_ROOT_ENV: str(fake_roots.mesa_without_gpu(tmp_path))})
    assert done.returncode == 0, done.stderr
    assert "nothing to do: this environment has what this host's hardware calls for" in done.stdout
    assert " -m pip " not in done.stdout


def test_doctor_fix_prints_the_cuda_commands_and_changes_nothing(tmp_path: Path) -> None:
    before = _runtimes()
    done = _cli("doctor", "--fix", **{_ROOT_ENV: str(fake_roots.nvidia(tmp_path))})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"{_PIP} uninstall -y onnxruntime" in lines
    (install,) = [line for line in lines if line.startswith(f"{_PIP} install")]
    assert install.startswith(f"{_PIP} install --no-user ")
    assert "[cuda]'" in install and "--user " not in install  # ortplug[cuda] or .../core[cuda]
    assert lines[-1] == "dry run: nothing was changed; run ortplug doctor --fix --yes to run these"
    assert _runtimes() == before


def test_doctor_fix_on_a_real_h200_hosts_files_names_the_cuda13_extra(tmp_path: Path) -> None:
    data = json.loads(
        _cli("doctor", "--fix", "--json", **{_ROOT_ENV: str(fake_roots.h200(tmp_path))}).stdout
    )
    hardware = data["plan"]["hardware"]
    assert (hardware["gpus"], hardware["facts"]) == (
        ["NVIDIA H200"], {"cuda.driver_version": "580.159.04"}
    )  # fmt: skip
    assert any("[cuda]'" in command for command in data["commands"])
    assert data["plan"]["applies"] == ["tensorrt", "cuda", "openvino", "cpu"]  # an Intel Xeon


def test_doctor_fix_picks_the_cuda12_build_for_an_older_driver(tmp_path: Path) -> None:
    root = fake_roots.nvidia(tmp_path, driver="550.54.15")
    data = json.loads(_cli("doctor", "--fix", "--json", **{_ROOT_ENV: str(root)}).stdout)
    assert data["plan"]["hardware"]["facts"] == {"cuda.driver_version": "550.54.15"}
    assert any("[cuda12]'" in command for command in data["commands"])


def test_doctor_json_carries_the_host_fit_checks(tmp_path: Path) -> None:
    done = _cli("doctor", "--json", **{_ROOT_ENV: str(fake_roots.nvidia(tmp_path))})
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    runtime = checks["host fit runtime"]
    assert not runtime["ok"] and runtime["fix"].startswith("pip uninstall -y onnxruntime && ")


def test_a_bad_catalog_file_is_one_line_everywhere(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.json"
    bad.write_text('{"ortplug": 1, "plugins": {"x": {"hooks": [], "kinds": [{"kind": "x"}]}}}')
    env = {"ORTPLUG_CATALOG": str(bad), _ROOT_ENV: str(fake_roots.bare_cpu(tmp_path / "root"))}
    fix = _cli("doctor", "--fix", **env)
    assert fix.returncode == 1 and fix.stdout == ""
    assert fix.stderr == (
        f"ortplug doctor: error: ORTPLUG_CATALOG={bad}: plugins.x.kinds[0]: missing field(s) "
        "['ort_name']\n"
    )
    checks = {c["name"]: c for c in json.loads(_cli("doctor", "--json", **env).stdout)["checks"]}
    assert (
        checks["host fit"]["detail"] == fix.stderr.removeprefix("ortplug doctor: error: ").strip()
    )
    assert checks["host fit"]["fix"] == "fix that file, or unset ORTPLUG_CATALOG"
    assert f"fit          PROBLEM ORTPLUG_CATALOG={bad}: " in _cli("info", **env).stdout


def test_yes_without_fix_is_a_usage_error() -> None:
    done = _cli("doctor", "--yes")
    assert done.returncode == 2
    assert (
        done.stderr
        == "ortplug doctor: error: --yes: only with --fix (ortplug doctor --fix --yes)\n"
    )


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A fake NVIDIA root and a cache folder another user can read and write (pytest's own
    temporary folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="ortplug-fit-"))
    try:
        fake_roots.nvidia(folder / "root")
        (folder / "cache").mkdir()
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o644)
        (folder / "cache").chmod(0o700)  # a cache others can write is refused: nobody's own
        os.chown(folder / "cache", 65534, 65534)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="runs the command as another user: needs root and setpriv",
)
def test_an_environment_this_user_cannot_write_is_refused(shared_root: Path) -> None:
    before = _runtimes()
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    env = {_ROOT_ENV: str(shared_root / "root"), "ORTPLUG_CACHE_DIR": str(shared_root / "cache")}
    done = _cli_with(nobody, "doctor", "--fix", "--yes", HOME=str(shared_root), **env)
    assert done.returncode == 1 and done.stdout == ""
    purelib = __import__("sysconfig").get_path("purelib")
    assert done.stderr.startswith(f"ortplug doctor: error: {purelib} (the packages of ")
    assert "is not writable by this user; run ortplug as the environment's owner" in done.stderr
    assert done.stderr.count("\n") == 1
    assert _runtimes() == before
    dry = _cli_with(nobody, "doctor", "--fix", HOME=str(shared_root), **env)
    assert "note: --yes would refuse: " in dry.stdout


_SYSTEM_PYTHON = "/usr/bin/python3"


def _system_python_is_this_version() -> bool:
    if not Path(_SYSTEM_PYTHON).exists():
        return False
    check = f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"
    return subprocess.run([_SYSTEM_PYTHON, "-c", check], check=False).returncode == 0


@pytest.mark.skipif(
    not Path(f"/usr/lib/python3.{sys.version_info[1]}/EXTERNALLY-MANAGED").exists()
    or not _system_python_is_this_version(),
    reason="needs a system Python of this version marked EXTERNALLY-MANAGED (PEP 668)",
)
def test_an_externally_managed_environment_is_refused_with_the_reason(tmp_path: Path) -> None:
    site = __import__("sysconfig").get_path(
        "purelib"
    )  # this venv's libraries, on the system Python
    env = {
        _ROOT_ENV: str(fake_roots.nvidia(tmp_path)),
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY / "core/src"), site]),
    }
    done = _cli_with([_SYSTEM_PYTHON], "doctor", "--fix", "--yes", **env)
    assert done.returncode == 1 and done.stdout == ""
    marker = f"/usr/lib/python3.{sys.version_info[1]}/EXTERNALLY-MANAGED"
    assert done.stderr.startswith(
        f"ortplug doctor: error: {_SYSTEM_PYTHON} is an externally managed environment ({marker}): "
    )
    assert done.stderr.rstrip().endswith(
        "nothing was changed (python3 -m venv .venv, then run .venv/bin/ortplug there)"
    )
    assert done.stderr.count("\n") == 1


# --- the slow one: a real repair in a throwaway venv ------------------------------------------


def _venv_run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(root / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        env={**clean, **_LINUX, **env},
        timeout=900,
    )


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(sys.platform == "win32", reason="the venv layout and wheels are Linux/macOS")
def test_fix_yes_repairs_two_runtime_wheels_and_a_missing_plugin_slow(tmp_path: Path) -> None:
    """One venv: the core from this tree, onnxruntime and onnxruntime-gpu from the registry, no
    CPU plugin. ``doctor --fix --yes`` removes the GPU wheel, repairs the CPU one and stops at
    a pip that fails; run again, it installs the CPU plugin from this tree; ``info`` then runs
    the demo on it and ``doctor`` passes."""
    root = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(root)
    setup = _venv_run(
        root, "python", "-m", "pip", "install", "--quiet", str(REPOSITORY / "core"),
        "onnxruntime", "onnxruntime-gpu",
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr
    env = {
        _ROOT_ENV: str(fake_roots.bare_cpu(tmp_path / "hw")),
        "ORTPLUG_CACHE_DIR": str(tmp_path / "cache"),
    }
    dry = _venv_run(root, "ortplug", "doctor", "--fix", **env)
    assert dry.returncode == 1, dry.stderr
    python = str(root / "bin" / "python")
    assert f"{python} {_SAFE_PATH} -m pip uninstall -y onnxruntime-gpu" in dry.stdout.splitlines()
    assert (
        f"{python} {_SAFE_PATH} -m pip install --no-user '{REPOSITORY}/core[cpu]' "
        f"{REPOSITORY}/plugins/cpu" in dry.stdout.splitlines()
    )

    # A kind whose install pip cannot find: the steps before it ran, the failing one changed
    # nothing, and what pip said is shown.
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"ortplug": 1, "plugins": {"nosuch": {
        "distribution": "ortplug-nosuch-h25", "hooks": [],
        "kinds": [{"kind": "nosuch", "ort_name": "NoSuchExecutionProvider", "detect": [{}],
                   "install": "ortplug-nosuch-h25"}],
    }}}))  # fmt: skip
    failed = _venv_run(
        root, "ortplug", "doctor", "--fix", "--yes", ORTPLUG_CATALOG=str(catalog), **env
    )
    assert failed.returncode == 1
    assert "ortplug-nosuch-h25" in failed.stderr  # pip's own words, e.g. "No matching distribution"
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith("ortplug doctor: error: pip exited 1 on: ")
    assert last.endswith(
        "the environment is as pip left it (its output is above); nothing after that command ran"
    )
    runtimes = _venv_run(root, "python", "-m", "pip", "list", "--format=json").stdout
    names = {d["name"] for d in json.loads(runtimes)}
    assert "onnxruntime-gpu" not in names and "onnxruntime" in names and "ortplug-cpu" not in names

    done = _venv_run(root, "ortplug", "doctor", "--fix", "--yes", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    changed = next(line for line in done.stdout.splitlines() if line.startswith("changed "))
    assert changed == "changed   + ortplug-cpu 0.1.0"
    assert done.stdout.rstrip().endswith("the environment now fits this host")

    info = _venv_run(root, "ortplug", "info", "--json", **env)
    data = json.loads(info.stdout)
    assert [d.split()[0] for d in data["runtime_distributions"]] == ["onnxruntime"]
    assert data["fit"]["steps"] == [] and data["chain"][0]["kind"] == "cpu"
    doctor = _venv_run(root, "ortplug", "doctor", **env)
    assert doctor.returncode == 0, doctor.stdout
    assert doctor.stdout.rstrip().endswith("no problems found")


_ACME_PLUGIN = """\
from typing import ClassVar

import attrs
from ortplug import hookimpl


@attrs.frozen
class Config:
    kind: ClassVar[str] = {kind!r}
    ort_name: ClassVar[str] = {ort_name!r}

    def to_ort(self):
        return self.ort_name, {{}}


@hookimpl
def ortplug_offer_providers():
    return []
"""


def _acme_site(
    tmp_path: Path, kind: dict[str, object], plugin: str | None = None
) -> dict[str, str]:
    """The environment of ``ortplug`` with distribution ortplug-acme installed (its plugin
    ``acme`` declares ``kind`` and its config class, or is the source ``plugin``), on a bare CPU
    host."""
    site = tmp_path / "site"
    (site / "ortplug_acme").mkdir(parents=True)
    declared = {"kind": "acme", "ort_name": "AcmeExecutionProvider", **kind}
    source = plugin if plugin is not None else _ACME_PLUGIN.format(**declared)
    (site / "ortplug_acme" / "__init__.py").write_text(source)
    (site / "ortplug_acme" / "ortplug.json").write_text(json.dumps({"ortplug": 1, "plugins": {
        "acme": {"hooks": ["ortplug_offer_providers"],
                 "kinds": [{**declared, "config": "ortplug_acme:Config"}]}
    }}))  # fmt: skip
    dist_info(site, "ortplug-acme", {"acme": "ortplug_acme"})
    return {
        _ROOT_ENV: str(fake_roots.bare_cpu(tmp_path / "root")),
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "ORTPLUG_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_an_installed_third_party_plugin_joins_the_catalog_by_its_declaration(
    tmp_path: Path,
) -> None:
    """Its ``ortplug.json`` says: for Acme NPUs (PCI vendor 0x1e52), also install the runtime."""
    env = _acme_site(tmp_path, {"hardware": "Acme NPUs", "detect": [{"pci_vendor": "0x1e52"}],
                                "install": "acme-npu-runtime>=2"})  # fmt: skip
    absent = json.loads(_cli("doctor", "--fix", "--json", **env).stdout)
    assert "acme" not in absent["plan"]["applies"]  # no Acme device: nothing proposed
    fake_roots.pci(Path(env[_ROOT_ENV]), "0000:07:00.0", 0x1E52, 0x0001, 0x120000)
    data = json.loads(_cli("doctor", "--fix", "--json", **env).stdout)
    assert data["plan"]["applies"][0] == "acme"
    (finding,) = [f for f in data["plan"]["findings"] if f["subject"] == "acme"]
    assert finding["detail"] == (
        "vendor 0x1e52 accelerator 0x0001 seen; install acme-npu-runtime>=2 "
        "(declared by ortplug-acme)"
    )
    assert data["commands"] == [f"{_PIP} install --no-user 'acme-npu-runtime>=2'"]


def test_a_blocked_plugins_declaration_proposes_nothing(tmp_path: Path) -> None:
    """A plugin kept out by ``ORTPLUG_DISABLE_PLUGINS`` or ``ORTPLUG_PLUGINS`` adds nothing to
    the plan; let in, its lines name the distribution that declared them."""
    env = _acme_site(tmp_path, {"hardware": "every host", "detect": [{}], "install": "evil-pkg"})
    for blocked in ({"ORTPLUG_DISABLE_PLUGINS": "acme"}, {"ORTPLUG_PLUGINS": "cpu,cuda"}):
        done = _cli("doctor", "--fix", **env, **blocked)
        assert "evil-pkg" not in done.stdout and "acme" not in done.stdout, blocked
    done = _cli("doctor", "--fix", **env)
    assert "fix       a CPU seen; install evil-pkg (declared by ortplug-acme)" in done.stdout
    assert done.stdout.rstrip().splitlines()[-2] == f"{_PIP} install --no-user evil-pkg"


_EVIL_CPU = {"kind": "cpu", "ort_name": "CPUExecutionProvider", "hardware": "a CPU",
             "detect": [{}], "install": "evilpkg", "runtime": "onnxruntime>=1.22",
             "index_url": "https://evil.example/simple"}  # fmt: skip


@pytest.mark.parametrize("let_in", [{}, {"ORTPLUG_PLUGINS": "acme"}], ids=["beside-cpu", "alone"])
def test_a_third_party_never_replaces_the_builtin_cpu_entry(tmp_path: Path, let_in) -> None:
    """A plugin declaring kind ``cpu`` with its own install and index: ``ortplug plugins`` shows
    it failed ("'cpu' is already claimed"), yet ``doctor`` proposed ``install evilpkg (declared by
    ortplug-acme)`` and ``--fix`` a pip line with its index. The catalog takes a kind only from a
    plugin the host lets claim it, and ortplug's own kinds from ortplug's plugins only."""
    env = {**_acme_site(tmp_path, _EVIL_CPU), **let_in}
    if not let_in:
        plugins = _cli("plugins", **env).stdout
        assert "'cpu' is already claimed by plugin 'cpu'" in plugins, plugins
    for args in (["doctor"], ["doctor", "--fix"], ["info"]):
        done = _cli(*args, **env)
        assert "evil" not in done.stdout, (args, done.stdout)
    fix = _cli("doctor", "--fix", "--json", **env).stdout
    assert "evil" not in fix and "declared by" not in fix
    data = json.loads(fix)
    assert data["plan"]["applies"] == ["cpu"] and data["commands"] == []


def test_a_plugin_whose_import_fails_proposes_nothing(tmp_path: Path) -> None:
    env = _acme_site(tmp_path, {"hardware": "every host", "detect": [{}], "install": "evil-pkg"},
                     plugin='raise ImportError("broken on purpose")\n')  # fmt: skip
    done = _cli("doctor", "--fix", **env)
    assert "evil-pkg" not in done.stdout and "acme" not in done.stdout, done.stdout
    doctor = _cli("doctor", **env).stdout
    assert "plugin acme" in doctor and "ImportError: broken on purpose" in doctor, doctor


def test_a_plain_http_index_url_is_refused_and_said(tmp_path: Path) -> None:
    """An ``index_url`` over plain http (anyone on the way could serve their own packages)
    never reaches pip: the declaration does not check, so the plugin is a one-line failure."""
    env = _acme_site(tmp_path, {"detect": [{}], "install": "evil-pkg",
                                "index_url": "http://evil.example/simple"})  # fmt: skip
    refused = (
        "plugin 'acme': ortplug_acme/ortplug.json: plugins.acme.kinds[0].index_url: expected an "
        "https:// index URL (pip would take packages from a plain-http one unverified), got "
        "'http://evil.example/simple'"
    )
    fix = _cli("doctor", "--fix", **env)
    assert f"note      {refused}; so ortplug-acme proposes nothing\n" in fix.stdout
    assert "evil-pkg" not in fix.stdout and "--extra-index-url" not in fix.stdout
    doctor = _cli("doctor", **env)
    failures = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL  plugin acme")]
    assert failures[0].endswith(f"failed in declaration: DeclarationError: {refused}")


def test_fix_yes_never_runs_a_pip_folder_of_the_working_directory(tmp_path: Path) -> None:
    """A ``pip/__main__.py`` planted where the user stands is not what ``--fix --yes`` runs:
    this environment's pip is (with no index it fails on the catalog's made-up install)."""
    planted = tmp_path / "cwd" / "pip"
    planted.mkdir(parents=True)
    ran = tmp_path / "planted-pip-ran"
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text(f"open({str(ran)!r}, 'a').write('ran\\n')\n")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"ortplug": 1, "plugins": {"nosuch": {
        "distribution": "ortplug-nosuch-h31", "hooks": [],
        "kinds": [{"kind": "nosuch", "ort_name": "NoSuchExecutionProvider", "detect": [{}],
                   "install": "ortplug-nosuch-h31"}],
    }}}))  # fmt: skip
    env = {
        **os.environ, **_LINUX, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "ORTPLUG_CATALOG": str(catalog), _ROOT_ENV: str(fake_roots.bare_cpu(tmp_path / "hw")),
    }  # fmt: skip
    ortplug = str(Path(sys.executable).parent / "ortplug")
    done = subprocess.run(
        [ortplug, "doctor", "--fix", "--yes"], cwd=planted.parent, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert not ran.exists(), "the working directory's pip/__main__.py ran"
    assert done.returncode == 1
    assert f" {_SAFE_PATH} -m pip install --no-user ortplug-nosuch-h31\n" in done.stdout
    assert "ortplug-nosuch-h31" in done.stderr  # the real pip's own words
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ortplug doctor: error: pip exited 1 on: ")


def test_doctor_prints_no_terminal_escapes_of_hardware_or_declarations(tmp_path: Path) -> None:
    """A GPU name (the root's files) and a kind's ``hardware`` text (a catalog) holding escape
    sequences that retitle and clear the terminal print as ``?`` marks, in both doctors."""
    escapes = "\x1b]0;owned\x07\x1b[2J"
    root = fake_roots.nvidia(tmp_path / "root")
    information = root / "proc/driver/nvidia/gpus/0000:19:00.0/information"
    information.write_text(f"Model: H200{escapes}\n")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"ortplug": 1, "plugins": {"acme": {
        "distribution": "ortplug-acme", "hooks": [],
        "kinds": [{"kind": "acme", "ort_name": "AcmeExecutionProvider", "detect": [{}],
                   "hardware": f"Acme{escapes} NPUs", "install": "ortplug-acme", "optional": True}],
    }}}))  # fmt: skip
    env = {_ROOT_ENV: str(root), "ORTPLUG_CATALOG": str(catalog)}
    fix = _cli("doctor", "--fix", **env).stdout
    doctor = _cli("doctor", **env).stdout
    for text in (fix, doctor):
        assert "\x1b" not in text and "\x07" not in text
        assert "Acme?]0;owned??[2J NPUs" in text
    assert "hardware  linux x86_64: H200?]0;owned??[2J, NVIDIA driver" in fix
