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
        ({"intra_op_num_threads": -2}, "intra_op_num_threads: expected a thread count from 0 to"),
        ({"log_severity_level": 7}, "log_severity_level: expected 0 (verbose) to 4 (fatal)"),
        ({"config_entries": {"k": 1}}, "config_entries: expected string keys and values"),
        ({"threads": 2}, "unknown field(s) ['threads']"),
    ],
)
def test_bad_options_name_the_field(data: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        SessionOptionsConfig.from_dict(data)
    assert fragment in str(info.value)


def test_every_field_reaches_onnxruntime_session_options(tmp_path) -> None:
    config = SessionOptionsConfig.from_dict(
        {
            "graph_optimization_level": "basic",
            "intra_op_num_threads": 2,
            "inter_op_num_threads": 1,
            "execution_mode": "sequential",
            "deterministic_compute": True,
            "enable_cpu_mem_arena": False,
            "enable_mem_pattern": False,
            "enable_mem_reuse": False,
            "optimized_model_path": str(tmp_path / "opt.onnx"),
            "enable_profiling": True,
            "profile_file_prefix": "p",
            "log_id": "svc-a",
            "log_severity_level": 3,
            "log_verbosity_level": 1,
            "use_per_session_threads": True,
            "free_dimension_overrides": [{"by": "denotation", "key": "DATA_BATCH", "value": 2}],
            "config_entries": {"session.intra_op.allow_spinning": "0"},
        }
    )
    options = config.to_ort(ort)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (2, 1)
    assert options.use_deterministic_compute is True
    assert (options.enable_cpu_mem_arena, options.enable_mem_pattern, options.enable_mem_reuse) == (
        False,
        False,
        False,
    )
    assert options.optimized_model_filepath == str(tmp_path / "opt.onnx")
    assert (options.enable_profiling, options.profile_file_prefix) == (True, "p")
    assert (options.logid, options.log_severity_level, options.log_verbosity_level) == (
        "svc-a",
        3,
        1,
    )
    assert options.use_per_session_threads is True
    assert SessionOptionsConfig.from_dict(config.to_dict()) == config


def test_free_dimension_override_by_name_fixes_the_input_shape(plugin_host) -> None:
    import models
    from ortplug import FreeDimensionOverride, InMemoryCheckpoint, OnnxBackend

    checkpoint = InMemoryCheckpoint(models.shared_dim_model()).resolve()
    config = SessionOptionsConfig(free_dimension_overrides={"batch": 3})
    assert config.free_dimension_overrides == (FreeDimensionOverride("name", "batch", 3),)
    backend = OnnxBackend.from_checkpoint(checkpoint, session_options=config, plugins=plugin_host)
    assert [i.shape for i in backend.inputs] == [(3, 4), (3, 4)]
    with pytest.raises(
        ValueError,
        match=r"free_dimension_overrides: \['batc'\] not a symbolic dimension of the inputs of <model bytes>; it has \['batch'\]",
    ):
        OnnxBackend.from_checkpoint(
            checkpoint,
            session_options=SessionOptionsConfig(free_dimension_overrides={"batc": 3}),
            plugins=plugin_host,
        )


def test_optimized_model_path_writes_the_optimized_graph(plugin_host, tmp_path) -> None:
    import models
    from ortplug import InMemoryCheckpoint, OnnxBackend

    target = tmp_path / "optimized.onnx"
    OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model()).resolve(),
        session_options=SessionOptionsConfig(optimized_model_path=str(target)),
        plugins=plugin_host,
    )
    assert target.stat().st_size > 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"free_dimension_overrides": {"batch": 0}}, "free_dimension_overrides: bad entry"),
        (
            {"free_dimension_overrides": [{"by": "shape", "key": "n", "value": 1}]},
            "'by' must be in ('name', 'denotation')",
        ),
        (
            {"free_dimension_overrides": [{"key": "n", "value": 1}]},
            "expected exactly the keys by, key, value",
        ),
        ({"free_dimension_overrides": 3}, "free_dimension_overrides: expected {dim_name: size}"),
        ({"custom_op_libraries": [3]}, "custom_op_libraries: expected a path or a list of paths"),
        ({"log_verbosity_level": -1}, "log_verbosity_level: expected an integer >= 0"),
        ({"log_id": ""}, "log_id: expected a non-empty string or null"),
        ({"deterministic_compute": "yes"}, "deterministic_compute: expected true, false or null"),
    ],
)
def test_bad_new_fields_name_themselves(data: dict, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        SessionOptionsConfig.from_dict(data)
    assert fragment in str(info.value)


def test_a_custom_op_library_that_does_not_exist_is_named(tmp_path) -> None:
    config = SessionOptionsConfig(custom_op_libraries=[tmp_path / "libmissing.so"])
    with pytest.raises(
        FileNotFoundError, match="custom_op_libraries: file not found: .*libmissing.so"
    ):
        config.to_ort(ort)


def test_shared_thread_pools_need_configure_first(plugin_host) -> None:
    import models
    from ortplug import InMemoryCheckpoint, OnnxBackend

    with pytest.raises(
        ValueError,
        match=r"use_per_session_threads=False needs the process-wide thread pools: call ortplug.configure",
    ):
        OnnxBackend.from_checkpoint(
            InMemoryCheckpoint(models.add_model()).resolve(),
            session_options=SessionOptionsConfig(use_per_session_threads=False),
            plugins=plugin_host,
        )
