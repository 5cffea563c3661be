"""Issue 24 item 36, the smaller defects, each its own test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import models
import pytest
from ortplug import CheckpointMetadata, LocalCheckpoint, PluginHost
from ortplug.checkpoint import select_variant
from ortplug.cli.main import main
from ortplug.errors import CheckpointError, OrtplugPluginWarning
from ortplug.testing import make_host

BROKEN_CPU_DIST = Path(__file__).parent / "data" / "fake_dists_broken_cpu"


def _exit_code(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def test_host_to_dict_is_json_ready_with_set_valued_facts() -> None:
    host = make_host(gpu={"flags": {"b", "a"}, "ids": frozenset({2, 10})})
    data = json.loads(json.dumps(host.to_dict()))
    assert data["facts"]["gpu"] == {"flags": ["a", "b"], "ids": [2, 10]}


def test_a_broken_cpu_entry_point_of_another_distribution_leaves_the_real_one(monkeypatch):
    monkeypatch.syspath_prepend(str(BROKEN_CPU_DIST))  # found before the real ortplug-cpu
    with pytest.warns(OrtplugPluginWarning, match=r"'cpu' \(ortplug-broken-cpu 1.0\) failed"):
        host = PluginHost(environ={})
    assert "cpu" in host.provider_registry().kinds()
    assert "cpu" in host.plugin_names()


@pytest.mark.parametrize("flag", ["--repeat", "--rounds", "--calls"])
def test_a_count_flag_has_a_sane_maximum(flag: str, tmp_path, capsys) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    command = "run" if flag == "--repeat" else "bench"
    assert _exit_code(command, str(model), flag, "1" + "0" * 22) == 2
    assert f"argument {flag}: expected a positive integer up to 1000000" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_a_variant_file_that_is_not_a_regular_file_says_what_it_is(tmp_path, kind) -> None:
    weights = models.write(tmp_path, "m.onnx", models.add_model())
    metadata = json.loads(CheckpointMetadata.from_model(weights).to_json())
    metadata["variants"] = [{"name": "int8", "file": "m.int8.onnx", "precision": "int8"}]
    (tmp_path / "m.metadata.json").write_text(json.dumps(metadata))
    target = tmp_path / "m.int8.onnx"
    if kind == "device":
        target.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    expected = "is a folder" if kind == "folder" else "is not a regular file"
    reference = LocalCheckpoint(weights).resolve()  # a variant's file is read when chosen
    with pytest.raises(CheckpointError, match=f"variant 'int8' of .*m.int8.onnx {expected}"):
        select_variant(reference, "int8")
