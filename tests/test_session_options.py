"""SessionOptionsConfig: names ORT and seed 003 use, dict round-trip, errors that name the field."""

from __future__ import annotations

import onnxruntime as ort
import pytest
from ortplug import SessionOptionsConfig


def test_short_and_ort_names_are_accepted_and_applied() -> None:
    config = SessionOptionsConfig(
        graph_optimization_level="ORT_ENABLE_EXTENDED",
        execution_mode=ort.ExecutionMode.ORT_PARALLEL,
        intra_op_num_threads=3,
        config_entries={"session.intra_op.allow_spinning": "0"},
    )
    assert (config.graph_optimization_level, config.execution_mode) == ("extended", "parallel")
    options = config.to_ort(ort)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.intra_op_num_threads == 3
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_dict_round_trip() -> None:
    config = SessionOptionsConfig(graph_optimization_level="all", config_entries={"k": "v"})
    assert SessionOptionsConfig.from_dict(config.to_dict()) == config
    assert config.to_dict() == {"graph_optimization_level": "all", "config_entries": {"k": "v"}}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"graph_optimization_level": "max"}, "graph_optimization_level: expected one of disable"),
        ({"execution_mode": "async"}, "execution_mode: expected one of sequential, parallel"),
        ({"intra_op_num_threads": -2}, "intra_op_num_threads: expected a non-negative integer"),
        ({"log_severity_level": 7}, "log_severity_level: expected 0 (verbose) to 4 (fatal)"),
        ({"config_entries": {"k": 1}}, "config_entries: expected string keys and values"),
        ({"threads": 2}, "unknown field(s) ['threads']"),
    ],
)
def test_bad_options_name_the_field(data: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        SessionOptionsConfig.from_dict(data)
    assert fragment in str(info.value)
