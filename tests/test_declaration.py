"""Plugin declarations: the format is checked with one-line errors, and the scan remembers them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ortplug.plugin_host.manager import PluginHost
from ortplug.plugins import CONTRACTS
from ortplug.plugins.declaration import (
    HOOKS,
    DeclarationError,
    Identity,
    parse_declarations,
    read_declaration,
)

REPOSITORY = Path(__file__).resolve().parents[1]
SHIPPED = {
    "cpu": "ortplug_cpu.plugin",
    "cuda": "ortplug_cuda.plugin",
    "tensorrt": "ortplug_tensorrt.plugin",
    "coreml": "ortplug_coreml.plugin",
    "webgpu": "ortplug_webgpu.plugin",
    "openvino": "ortplug_openvino:plugin",
}

_GOOD = {
    "kinds": [
        {
            "kind": "acme",
            "ort_name": "AcmeExecutionProvider",
            "aliases": ["npu"],
            "library": {"name": "ortplug.acme", "package": "onnxruntime_ep_acme"},
            "platforms": ["linux"],
            "requires": ["acme.devices"],
            "config": "ortplug_acme.config:AcmeProvider",
        }
    ],
    "probes": [
        {
            "name": "acme",
            "facts": ["devices"],
            "detect": "ortplug_acme.probes:detect",
            "identity": {"env": ["ACME_HOME"]},
        }
    ],
    "hooks": ["ortplug_offer_providers", "ortplug_doctor_checks"],
    "metadata_keys": [{"name": "acme_tiles", "types": ["int"], "description": "tiles"}],
}


def _parse(plugin: dict[str, object]) -> None:
    parse_declarations({"ortplug": 1, "plugins": {"acme": plugin}}, "ortplug_acme/ortplug.json")


def test_the_hooks_a_declaration_may_list_are_the_hook_specs() -> None:
    assert frozenset(CONTRACTS) == HOOKS


def test_a_good_declaration_reads_back_as_written() -> None:
    found = parse_declarations({"ortplug": 1, "plugins": {"acme": _GOOD}}, "acme/ortplug.json")
    declaration = found["acme"]
    assert declaration.kind("NPU") is declaration.kinds[0]
    assert declaration.kinds[0].required_probes() == ("acme",)
    assert declaration.metadata_keys[0].value_types() == (int,)
    hooks: list[str] = _GOOD["hooks"]  # type: ignore[assignment]
    assert declaration.to_json() == {**_GOOD, "hooks": sorted(hooks)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hooks": ["ortplug_offer_provider"]}, r"plugins\.acme\.hooks: unknown hook\(s\)"),
        ({"kinds": [{"kind": "acme"}]}, r"kinds\[0\]: missing field\(s\) \['ort_name'\]"),
        (
            {"kinds": [{**_GOOD["kinds"][0], "aliases": "npu"}]},  # type: ignore[index]
            r"kinds\[0\]\.aliases: expected a list of strings, got 'npu'",
        ),
        (
            {"kinds": [{**_GOOD["kinds"][0], "requires": ["devices"]}]},  # type: ignore[index]
            r"requires\[0\]: expected 'probe\.fact', got 'devices'",
        ),
        (
            {"probes": [{**_GOOD["probes"][0], "identity": {"file": []}}]},  # type: ignore[index]
            r"probes\[0\]\.identity: unknown field\(s\) \['file'\]",
        ),
        (
            {"metadata_keys": [{"name": "tiles", "types": ["integer"]}]},
            r"metadata_keys\[0\]\.types: expected type names",
        ),
        (
            {"kinds": [{**_GOOD["kinds"][0], "library": {"name": "x"}}]},  # type: ignore[index]
            r"library: expected exactly one of package or path",
        ),
        (
            {"kinds": [{"kind": "acme", "ort_name": "AcmeExecutionProvider"}]},
            r"kinds\[0\]: expected 'config' \(an import path.*got none",
        ),
        (
            {"probes": [{"name": "acme", "facts": ["devices"]}]},
            r"probes\[0\]: expected 'detect' \(an import path.*got none",
        ),
        (
            {"hooks": ["ortplug_offer_providers", "ortplug_provider_types"]},
            r"hooks: lists ortplug_provider_types, a hook of the hook form; a plugin is one "
            r"form: declare its kinds \(each with its 'config' class by import path\) in "
            r"ortplug.json and delete that hook, or delete ortplug.json \(the hook form\)",
        ),
    ],
)
def test_a_bad_declaration_is_one_line_naming_the_field(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(DeclarationError, match=message) as caught:
        _parse({**_GOOD, **change})
    assert "\n" not in str(caught.value)
    assert "ortplug_acme/ortplug.json: plugins.acme" in str(caught.value)


def test_a_file_of_another_format_or_for_another_entry_point_names_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "ortplug_acme"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (package / "ortplug.json").write_text(json.dumps({"ortplug": 2, "plugins": {}}))
    with pytest.raises(DeclarationError, match=r"plugin 'acme': ortplug_acme/ortplug.json: "):
        read_declaration("acme", "ortplug_acme.plugin:hooks")
    (package / "ortplug.json").write_text(json.dumps({"ortplug": 1, "plugins": {"other": _GOOD}}))
    with pytest.raises(DeclarationError, match=r"declares \['other'\], not the entry point"):
        read_declaration("acme", "ortplug_acme.plugin:hooks")
    (package / "ortplug.json").write_text("{")
    with pytest.raises(DeclarationError, match="not readable JSON"):
        read_declaration("acme", "ortplug_acme")
    assert "ortplug_acme" not in sys.modules


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_plugin_ships_a_declaration_that_checks(name: str) -> None:
    declaration = read_declaration(name, SHIPPED[name])
    assert declaration is not None
    assert [kind.kind for kind in declaration.kinds] == [name]
    assert [probe.name for probe in declaration.probes] == [name]


def test_an_identity_is_stats_and_environment_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.json").write_text("{}")
    monkeypatch.setenv("ACME_HOME", "/opt/acme")
    identity = Identity(files=(str(tmp_path / "*.json"),), env=("ACME_HOME",))
    before = identity()
    assert before["env"] == {"ACME_HOME": "/opt/acme"}
    (tmp_path / "b.json").write_text("{}")  # a new driver file: the identity changes
    assert identity() != before


def test_the_scan_remembers_each_plugins_declaration(tmp_path: Path) -> None:
    """A fresh process reads the declarations from the remembered scan, importing no plugin."""
    script = (
        "import sys\n"
        "from ortplug.plugin_host import entry_points as _entry_points\n"
        "rows = {e.name: e for e in _entry_points.discover('ortplug')}\n"
        "print(sorted(k['kind'] for k in rows['cuda'].declaration['kinds']))\n"
        "print('ortplug_cuda.plugin' in sys.modules)\n"
    )
    env = {**os.environ, "ORTPLUG_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # the scan, then the remembered scan
        command = [sys.executable, "-c", script]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["['cuda']", "False"]
    assert len(list((tmp_path / "entry-points").glob("*.json"))) == 1


def test_every_shipped_plugin_contributes_what_it_declares() -> None:
    """Imported, each shipped plugin's kinds, probes, hooks and metadata keys match its file."""
    host = PluginHost(environ={})
    assert set(SHIPPED) <= set(host.plugin_names())
    assert [f.message() for f in host.failures if f.phase == "declaration"] == []


def test_the_shipped_schema_is_the_one_the_checking_tables_write() -> None:
    """One model validates a declaration and writes its JSON schema; the core ships the file."""
    from ortplug.plugins.declaration import SCHEMA_FILE, declaration_schema, schema_text

    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text()
    source = REPOSITORY / "core/src/ortplug/plugins/ortplug.schema.json"
    assert source.read_text(encoding="utf-8") == schema_text()  # the checkout's copy too
    done = subprocess.run(
        [sys.executable, "-m", "ortplug.plugins.declaration", "--schema"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == declaration_schema()


def test_every_shipped_declaration_validates_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from ortplug.plugins.declaration import declaration_schema

    schema = declaration_schema()
    files = [*REPOSITORY.glob("plugins/*/src/*/ortplug.json")]
    files += [*REPOSITORY.glob("examples/*/src/*/ortplug.json")]
    assert len(files) == 6
    for path in files:
        jsonschema.validate(json.loads(path.read_text()), schema)
    bad = {"ortplug": 1, "plugins": {"acme": {**_GOOD, "kinds": [{"kind": "acme"}]}}}
    with pytest.raises(jsonschema.ValidationError, match="'ort_name' is a required property"):
        jsonschema.validate(bad, schema)


def test_a_declared_kind_points_at_its_config_class_and_no_hook_gives_it() -> None:
    kind = {"kind": "acme", "ort_name": "AcmeExecutionProvider"}
    hooks = ["ortplug_provider_types", "ortplug_host_probes", "ortplug_offer_providers"]
    with pytest.raises(
        DeclarationError,
        match=r"lists ortplug_host_probes, ortplug_provider_types, hooks of the hook form",
    ) as caught:
        _parse({"kinds": [{**kind, "config": "acme.c:Acme"}], "hooks": hooks})
    assert "delete those hooks, or delete ortplug.json (the hook form)" in str(caught.value)
    with pytest.raises(DeclarationError, match=r"config: expected an import path like"):
        _parse({"kinds": [{**kind, "config": "acme.c.Acme"}], "hooks": []})
    with pytest.raises(DeclarationError, match=r"device: expected one of cpu, gpu, npu, any"):
        _parse({"kinds": [{**kind, "config": "acme.c:Acme", "device": "tpu"}], "hooks": []})
    probe = {"name": "acme", "facts": ["devices"], "detect": "acme.p:detect"}
    found = parse_declarations(
        {
            "ortplug": 1,
            "plugins": {
                "acme": {
                    "kinds": [{**kind, "config": "acme.c:Acme", "device": "npu"}],
                    "probes": [{**probe, "types": {"devices": ["list"]}, "timeout": 30}],
                    "hooks": [],
                }
            },
        },
        "acme/ortplug.json",
    )["acme"]
    assert (found.kinds[0].config, found.kinds[0].device) == ("acme.c:Acme", "npu")
    assert found.probes[0].value_types() == {"devices": (list,)}
    assert found.probes[0].timeout == 30.0


def test_a_dotted_package_in_an_identity_is_found_without_importing_it(tmp_path: Path) -> None:
    """T11: ``packages: ["acmepkg.sub"]`` stats the subpackage; neither package runs."""
    sub = tmp_path / "acmepkg" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "acmepkg" / "__init__.py").write_text("raise SystemExit('acmepkg was imported')\n")
    (sub / "__init__.py").write_text("raise SystemExit('acmepkg.sub was imported')\n")
    script = (
        "import sys\n"
        "from ortplug.plugins.declaration import Identity\n"
        "rows = Identity(packages=('acmepkg.sub', 'acmepkg.nosuch', 'nosuchpkg.sub'))()\n"
        "print(sorted(k for k in sys.modules if k.startswith('acmepkg')))\n"
        "print(rows['packages'][0][0].endswith('sub/__init__.py'), len(rows['packages']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the subpackage's file and folder, then one row for each name not found
    assert done.stdout.split("\n")[:2] == ["[]", "True 4"]


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_config_class_takes_its_names_from_the_manifest(name: str) -> None:
    """One source of truth: the class's kind and ort_name are read from its manifest's kind, and
    no shipped source restates them."""
    import importlib

    declaration = read_declaration(name, SHIPPED[name])
    assert declaration is not None
    (kind,) = declaration.kinds
    module, _, attribute = str(kind.config).partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    assert (cls.kind, cls.ort_name) == (kind.kind, kind.ort_name)
    source = Path(sys.modules[module].__file__ or "").read_text(encoding="utf-8")
    assert (
        f'"{kind.ort_name}"' not in source and f'kind: ClassVar[str] = "{kind.kind}"' not in source
    )


def test_a_config_class_no_manifest_kind_names_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "ortplug_acmecfg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    declared = {**_GOOD, "kinds": [{**_GOOD["kinds"][0], "config": "ortplug_acmecfg.c:Other"}]}  # type: ignore[index]
    (package / "ortplug.json").write_text(json.dumps({"ortplug": 1, "plugins": {"acme": declared}}))
    (package / "c.py").write_text(
        "from typing import ClassVar\n"
        "from ortplug.plugins import declared_kind\n"
        "@declared_kind\n"
        "class Acme:\n"
        "    kind: ClassVar[str]\n"
        "    ort_name: ClassVar[str]\n"
        "@declared_kind\n"
        "class Other:\n"
        "    kind: ClassVar[str]\n"
        "    ort_name: ClassVar[str]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DeclarationError) as caught:
        import ortplug_acmecfg.c  # noqa: F401
    assert str(caught.value) == (
        "Acme: expected a kind in ortplug_acmecfg/ortplug.json whose config is "
        "'ortplug_acmecfg.c:Acme', got none; declare it there, or set kind and ort_name on the "
        "class (hook form)"
    )
    (package / "c.py").write_text(
        (package / "c.py").read_text().split("@declared_kind\nclass Acme")[0]
        + "@declared_kind\nclass Other:\n    pass\n"
    )
    sys.modules.pop("ortplug_acmecfg.c", None)
    from ortplug_acmecfg.c import Other

    assert (Other.kind, Other.ort_name) == ("acme", "AcmeExecutionProvider")
