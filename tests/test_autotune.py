"""Autotune records: saved by bench, used by the default policy, invalidated and sanity-checked."""

from __future__ import annotations

import json
import warnings

import attrs
import models
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig
from ortplug.errors import OrtplugCacheWarning
from ortplug.selection.autotune import TunedSetting, lookup, save, stale_records


def _checkpoint(shape=None):
    return InMemoryCheckpoint(models.add_model(shape)).resolve()


def test_a_saved_setting_drives_the_next_default_build(plugin_host) -> None:
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    before = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert before.session_options.intra_op_num_threads != 1
    save(checkpoint, host, TunedSetting(("cpu",), 1, 1.8, 0.01))
    after = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert after.session_options.intra_op_num_threads == 1
    assert after.chain_reasons == (
        (
            "cpu",
            "autotuned by `ortplug bench --save`: cpu, 1 threads ran 1.80x faster than the policy's default here",
        ),
    )
    # the user's own settings and explicit chains win
    mine = OnnxBackend.from_checkpoint(
        checkpoint,
        session_options=SessionOptionsConfig(intra_op_num_threads=2),
        plugins=plugin_host,
    )
    assert mine.session_options.intra_op_num_threads == 2
    explicit = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=plugin_host)
    assert explicit.chain_reasons == (("cpu", "requested explicitly (strict)"),)


def test_a_changed_model_or_runtime_finds_no_record(plugin_host) -> None:
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    save(checkpoint, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    assert lookup(checkpoint, host) == TunedSetting(("cpu",), 1, 1.2, 0.01)
    assert lookup(_checkpoint([2, 4]), host) is None
    newer = attrs.evolve(host, ort_version="9.9.9")
    assert lookup(checkpoint, newer) is None
    assert stale_records(host.ort_version) == []
    assert len(stale_records("9.9.9")) == 1  # a later ONNX Runtime would call it stale


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "Expecting property name"),
        ('{"schema": 99}', "not an ortplug autotune record"),
        ("[1, 2]", "not an ortplug autotune record"),
    ],
)
def test_a_corrupt_or_foreign_record_is_named_and_ignored(plugin_host, content, reason) -> None:
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    path = save(checkpoint, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    path.write_text(content)
    with pytest.warns(OrtplugCacheWarning, match=f"ignoring autotune record {path}: .*{reason}"):
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert backend.chain_reasons[0][1].startswith("runs every ONNX model")  # the policy decided


def test_a_record_naming_a_provider_no_longer_offered_is_skipped(plugin_host) -> None:
    checkpoint = _checkpoint()
    save(
        checkpoint,
        plugin_host.host_capabilities(),
        TunedSetting(("openvino", "cpu"), None, 3.0, 0.01),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        backend = OnnxBackend.from_checkpoint(checkpoint, plugins=plugin_host)
    assert [kind for kind, _ in backend.chain_reasons] == ["cpu"]


def test_a_record_with_bad_values_is_rejected(plugin_host) -> None:
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    path = save(checkpoint, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    record = json.loads(path.read_text())
    record["setting"]["intra_op_num_threads"] = -3
    path.write_text(json.dumps(record))
    with pytest.warns(
        OrtplugCacheWarning,
        match="intra_op_num_threads: expected a thread count from 1 to .*got -3",
    ):
        assert lookup(checkpoint, host) is None


@pytest.mark.parametrize("outcomes", [["rejected: one", "two"], "rejected", [1], ["x" * 5000]])
def test_outcomes_that_are_not_one_line_per_offered_candidate_are_rejected(
    plugin_host, outcomes
) -> None:
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    setting = TunedSetting(("cpu",), None, 1.0, 0.01, offered=("::cpu",), outcomes=("chosen",))
    path = save(checkpoint, host, setting)
    assert lookup(checkpoint, host) == setting
    record = json.loads(path.read_text())
    record["setting"]["outcomes"] = outcomes
    path.write_text(json.dumps(record))
    with pytest.warns(
        OrtplugCacheWarning, match="outcomes .* is not one line per offered candidate"
    ):
        assert lookup(checkpoint, host) is None


def test_a_long_outcome_is_cut_so_the_record_stays_readable(plugin_host) -> None:
    """A verdict naming every output made an outcome over the limit: the record was refused and
    every later process measured again."""
    checkpoint = _checkpoint()
    host = plugin_host.host_capabilities()
    long = "rejected: " + "out0 max abs diff 0.5; " * 200
    setting = TunedSetting(
        ("cpu",), None, 1.0, 0.01, offered=("::x", "::cpu"), outcomes=(long, "chosen")
    )
    save(checkpoint, host, setting)
    found = lookup(checkpoint, host)
    assert found is not None and found.outcomes[0].endswith("...")
    assert len(found.outcomes[0]) <= 2000 and found.outcomes[0].startswith("rejected: out0")
