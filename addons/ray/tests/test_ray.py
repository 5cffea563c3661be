"""Batch inference on a real local Ray cluster: checkpoints in, batches shaped, columns, errors, CLI."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

import hosts
import models
import numpy as np
import onnx
import pandas as pd
import pytest
import ray
from onnx import TensorProto, helper
from ortplug import (
    CheckpointMetadata,
    InMemoryCheckpoint,
    LocalCheckpoint,
    OnnxBackend,
    ResolvedCheckpoint,
    SessionOptionsConfig,
)
from ortplug.errors import OptionError, OptionTypeError
from ortplug.selection import ProviderSelection
from ortplug_ray import (
    BackendConfig,
    BatchError,
    OnnxPredictor,
    PortableCheckpoint,
    actor_resources,
    default_batch_size,
    predict,
    worker_error,
)

REPOSITORY = Path(__file__).resolve().parents[3]  # the core was installed from its folder
DEMO = str(files("ortplug.data") / "demo.onnx")
STATIC = str(files("ortplug.data") / "demo_static.onnx")  # the demo MLP with its batch fixed at 4
SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
ROWS = np.random.default_rng(7).standard_normal((300, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.raise_original_map_exception = True
    yield
    ray.shutdown()


def _dataset(rows: np.ndarray, column: str = "x"):
    return ray.data.range(len(rows)).map_batches(
        lambda b: {"id": b["id"], column: rows[b["id"]]}, batch_format="numpy"
    )


def _expected(rows: np.ndarray, checkpoint=None, providers: list[str] | None = None) -> np.ndarray:
    """What one backend here gives (the same chain as the workers: same host, same policy)."""
    checkpoint = checkpoint or InMemoryCheckpoint(Path(DEMO).read_bytes())
    backend = OnnxBackend.from_checkpoint(checkpoint.resolve(), providers)
    return np.asarray(backend.run({"x": rows})["probs"])


def _grid_model(tmp_path: Path) -> Path:
    """A [batch, 2, 4] float input summed over its last axis: rows are 2-D."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph([node], "grid", [x], [y], initializer=[axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "grid.onnx"
    onnx.save(model, path)
    return path


# -- checkpoints travel ------------------------------------------------------------------------


def test_every_checkpoint_form_becomes_one_that_pickles(tmp_path) -> None:
    metadata = CheckpointMetadata.from_model(DEMO)
    meta_file = tmp_path / "elsewhere.json"
    meta_file.write_text(
        CheckpointMetadata(
            model_family="scorer", input_names=["x"], output_names=["probs"], extra={"k": 1}
        ).to_json()
    )
    data = Path(DEMO).read_bytes()
    forms = {
        "path": DEMO,
        "pathlike": Path(DEMO),
        "bytes": data,
        "local": LocalCheckpoint(DEMO),
        "local+metadata file": LocalCheckpoint(DEMO, metadata_path=meta_file),
        "resolved": ResolvedCheckpoint(Path(DEMO), metadata),
        "in memory": InMemoryCheckpoint(data, initializers={"b2": np.ones(3, np.float32)}),
    }
    for name, form in forms.items():
        config = pickle.loads(pickle.dumps(BackendConfig(model=form)))
        resolved = config.checkpoint()
        assert resolved.metadata == _resolved(form).metadata, name
        assert resolved.source == (data if name in ("bytes", "in memory") else DEMO), name
    from_file = BackendConfig(model=forms["local+metadata file"]).checkpoint().metadata
    assert (from_file.model_family, dict(from_file.extra)) == ("scorer", {"k": 1})
    kept = BackendConfig(model=forms["in memory"]).checkpoint().initializers
    np.testing.assert_array_equal(kept["b2"], np.ones(3, np.float32))
    with pytest.raises(TypeError, match="checkpoint: expected a LocalCheckpoint, .* got int"):
        BackendConfig(model=3)  # type: ignore[arg-type]


def test_a_variant_travels_with_its_reference_and_is_still_verified(tmp_path) -> None:
    """On a worker the variant was its own reference: a variant computing other numbers served."""
    from ortplug import VerificationError
    from ortplug.checkpoint import select_variant

    def model(op: str) -> bytes:
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        )  # fmt: skip
        return helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]
        ).SerializeToString()

    (tmp_path / "m.onnx").write_bytes(model("Identity"))
    (tmp_path / "m.bad.onnx").write_bytes(model("Neg"))
    metadata = CheckpointMetadata.from_model(tmp_path / "m.onnx").to_dict()
    metadata["variants"] = [{"name": "bad", "file": "m.bad.onnx", "precision": "fp16"}]
    (tmp_path / "m.metadata.json").write_text(json.dumps(metadata))
    variant = select_variant(LocalCheckpoint(tmp_path / "m.onnx").resolve(), "bad")
    config = pickle.loads(pickle.dumps(BackendConfig(model=variant, providers=["cpu"])))
    resolved = config.checkpoint()
    assert (resolved.variant, resolved.reference is not None) == ("bad", True)
    with pytest.raises(VerificationError, match="variant bad .* failed verification"):
        config.build()


def _resolved(form):
    if isinstance(form, ResolvedCheckpoint):
        return form
    if isinstance(form, bytes):
        return InMemoryCheckpoint(form).resolve()
    if isinstance(form, (str, Path)):
        return LocalCheckpoint(form).resolve()
    return form.resolve()


def test_a_path_missing_on_the_worker_names_the_node_and_the_fix(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(DEMO, model)
    config = BackendConfig(model=LocalCheckpoint(model))
    model.unlink()
    with pytest.raises(FileNotFoundError, match=r"ONNX model not found on node here: .*m\.onnx; "):
        config.checkpoint()


def test_metadata_file_and_policy_inputs_reach_the_workers(cluster, tmp_path) -> None:
    """The metadata file is read on the driver (then deleted): the workers' policy still sees it."""
    meta_file = tmp_path / "scorer.json"
    meta_file.write_text(
        CheckpointMetadata(
            model_family="scorer",
            input_names=["x"],
            output_names=["logits", "probs"],
            extra={"tiles": 3},
        ).to_json()
    )

    class Recording:  # defined here so that Ray pickles it by value
        def choose(self, request):
            cpu = request.plugins.provider_registry().parse("cpu")
            seen = f"{request.metadata.model_family} {dict(request.metadata.extra)} "
            seen += f"fingerprint={request.checkpoint.fingerprint()[:12]}"
            return ProviderSelection(chain=(cpu,), reasons=(seen,))

    scored = predict(
        _dataset(ROWS[:20]),
        LocalCheckpoint(DEMO, metadata_path=meta_file),
        policy=Recording(),
        chain_column="chain",
    )
    meta_file.unlink()
    rows = scored.take_all()
    report = json.loads(rows[0]["chain"])
    fingerprint = LocalCheckpoint(DEMO).resolve().fingerprint()[:12]
    assert report["reasons"] == {"cpu": f"scorer {{'tiles': 3}} fingerprint={fingerprint}"}
    assert report["providers"] == ["CPUExecutionProvider"] and report["threads"] == 1
    assert report["node"] == ray.get_runtime_context().get_node_id()


def test_in_memory_external_data_reaches_the_workers(cluster, tmp_path) -> None:
    model = onnx.load(DEMO)
    onnx.external_data_helper.convert_model_to_external_data(
        model, location="weights.bin", size_threshold=0
    )
    onnx.save_model(model, tmp_path / "split.onnx")
    checkpoint = InMemoryCheckpoint(
        (tmp_path / "split.onnx").read_bytes(),
        external_data={"weights.bin": (tmp_path / "weights.bin").read_bytes()},
    )
    scored = predict(_dataset(ROWS[:40]), checkpoint, providers=["cpu"]).take_all()
    probs = np.stack([row["probs"] for row in scored])
    np.testing.assert_allclose(probs, _expected(ROWS[:40], providers=["cpu"]), atol=1e-6)


# -- batches shaped for the model ------------------------------------------------------------


def test_predict_scores_every_row_in_order(cluster) -> None:
    scored = predict(_dataset(ROWS), DEMO, batch_size=64).take_all()
    assert [row["id"] for row in scored] == list(range(len(ROWS)))
    probs = np.stack([row["probs"] for row in scored])
    np.testing.assert_allclose(probs, _expected(ROWS), atol=1e-5)
    assert set(scored[0]) == {"id", "x", "logits", "probs"}


def test_a_static_batch_splits_ray_batches_into_model_runs(cluster) -> None:
    """103 rows in Ray batches of 10 through a model fixed at 4 rows: runs of 4, the last padded."""
    scored = predict(_dataset(ROWS[:103]), STATIC, batch_size=10, id_column="id").take_all()
    assert [row["id"] for row in scored] == list(range(103))
    probs = np.stack([row["probs"] for row in scored])
    np.testing.assert_allclose(probs, _expected(ROWS[:103]), atol=1e-6)


def test_a_gpu_chain_on_a_cluster_without_gpus_is_refused_at_once(cluster) -> None:
    """Ray waited forever for a GPU the cluster does not have (ortplug batch hung, silent)."""
    from ortplug.errors import OptionError

    with pytest.raises(
        OptionError, match=r"\[CUDAExecutionProvider, CPUExecutionProvider\] needs a GPU"
    ):
        predict(_dataset(ROWS[:8]), DEMO, providers=["cuda", "cpu"])


def test_the_predictor_runs_static_batches_through_one_binding() -> None:
    predictor = OnnxPredictor(BackendConfig(model=STATIC, providers=("cpu",)))
    assert predictor.static_batch == 4
    for rows in (1, 4, 9):  # fewer than a run, exactly one, two runs and a padded one
        out = predictor({"x": ROWS[:rows]})
        assert out["probs"].shape == (rows, 3)
        np.testing.assert_allclose(out["probs"], _expected(ROWS[:rows]), atol=1e-6)
    empty = predictor({"x": ROWS[:0]})
    assert (empty["probs"].shape, empty["probs"].dtype) == ((0, 3), np.float32)
    assert OnnxPredictor(BackendConfig(model=DEMO)).static_batch is None


def test_static_runs_read_their_rows_in_place_and_leave_the_batch_alone() -> None:
    """The runs after the first bind each run's rows where they lie in the column: a strided or
    Fortran-order column scores as its rows do, and the batch's arrays are not written."""
    predictor = OnnxPredictor(BackendConfig(model=STATIC, providers=("cpu",)))
    strided, rows = ROWS[:22:2], ROWS[:11]
    for column, scored in ((strided, strided), (np.asfortranarray(rows), rows), (rows, rows)):
        kept = column.copy()
        out = predictor({"x": column})  # 11 rows: runs of 4, 4 and 3 padded
        np.testing.assert_allclose(out["probs"], _expected(scored), atol=1e-6)
        np.testing.assert_array_equal(column, kept)


def test_a_static_batch_of_the_wrong_dtype_is_named_before_any_run() -> None:
    predictor = OnnxPredictor(BackendConfig(model=STATIC, providers=("cpu",)))
    with pytest.raises(BatchError, match=r"^rows 0\.\.3: InputValidationError: input 'x': "):
        predictor.rows_from({"x": ROWS[:9].astype(np.float64)}, 0)


def test_the_default_batch_size_comes_from_the_model_and_the_device() -> None:
    # 8 float32 per row: the byte budget allows more than the row cap
    assert default_batch_size(BackendConfig(model=DEMO)) == 1 << 16
    assert default_batch_size(BackendConfig(model=DEMO), gpu=True) == 1 << 18
    assert default_batch_size(BackendConfig(model=STATIC)) % 4 == 0
    # 3x224x224 float32 per image: 16 MiB holds 27 of them on a CPU, 128 MiB holds 222 on a GPU
    assert default_batch_size(BackendConfig(model=SQUEEZENET)) == 27
    assert default_batch_size(BackendConfig(model=SQUEEZENET), gpu=True) == 222


# -- columns -----------------------------------------------------------------------------------


def test_columns_map_to_inputs_and_outputs(cluster) -> None:
    scored = predict(
        _dataset(ROWS[:50], column="features"), DEMO,
        input_columns={"features": "x"}, output_columns={"probs": "score"}, providers=["cpu"],
    ).take_all()  # fmt: skip
    assert set(scored[0]) == {"id", "features", "score"}
    np.testing.assert_allclose(
        np.stack([r["score"] for r in scored]), _expected(ROWS[:50], providers=["cpu"]), atol=1e-6
    )


def test_kept_columns_are_the_only_inputs_copied_to_the_output() -> None:
    batch = {"id": np.arange(5), "x": ROWS[:5], "note": np.array(list("abcde"))}
    out = OnnxPredictor(BackendConfig(model=DEMO, keep_columns=["id"]))(batch)
    assert sorted(out) == ["id", "logits", "probs"]
    assert sorted(OnnxPredictor(BackendConfig(model=DEMO))(batch)) == [
        "id", "logits", "note", "probs", "x",
    ]  # fmt: skip
    with pytest.raises(BatchError, match=r"column\(s\) \['key'\] missing; the batch has"):
        OnnxPredictor(BackendConfig(model=DEMO, keep_columns=["key"]))(batch)
    with pytest.raises(OptionTypeError, match=r"got the string 'id' \(write \['id'\]\)"):
        BackendConfig(model=DEMO, keep_columns="id")


def test_list_columns_written_by_pandas_are_stacked_to_the_model_dtype(cluster, tmp_path) -> None:
    frame = pd.DataFrame({"key": [f"r{i}" for i in range(60)], "x": list(ROWS[:60].astype(float))})
    frame.to_parquet(tmp_path / "part.parquet")
    scored = predict(ray.data.read_parquet(str(tmp_path)), DEMO, id_column="key").take_all()
    assert [row["key"] for row in scored] == [f"r{i}" for i in range(60)]
    np.testing.assert_allclose(
        np.stack([r["probs"] for r in scored]), _expected(ROWS[:60]), atol=1e-6
    )


def test_nested_list_rows_are_stacked_to_the_input_shape(tmp_path) -> None:
    predictor = OnnxPredictor(BackendConfig(model=_grid_model(tmp_path)))
    rows = np.empty(3, object)
    rows[:] = [[np.arange(4.0) + r, np.arange(4.0)] for r in range(3)]  # pyarrow's list<list>
    out = predictor({"x": rows})
    assert out["y"].dtype == np.float32
    np.testing.assert_array_equal(out["y"], [[6 + 4 * r, 6] for r in range(3)])


def _object_column(values: list[object]) -> np.ndarray:
    column = np.empty(len(values), object)
    column[:] = values
    return column


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [np.zeros(8), np.zeros(8), np.zeros(7)],
            r"batch 0 \(actor pid \d+[^)]*\), row 2 \(id 'c'\): column 'x': expected shape \[8\] per "
            r"row \(input 'x' is \[batch, 8\]\), got \[7\] \(row 0 has \[8\]\)",
        ),
        (
            [np.zeros(8), None, np.zeros(8)],
            r"row 1 \(id 'b'\): column 'x': expected shape \[8\] per row .*, got a value that is "
            r"not one \(the value is null\)",
        ),
        (
            [np.zeros(8), np.zeros((2, 4)), np.zeros(8)],
            r"row 1 \(id 'b'\): column 'x': expected shape \[8\] per row .*, got \[2, 4\]",
        ),
        (
            [np.array(["a"] * 8)] * 3,
            r"rows 0\.\.2 \(ids 'a', 'b', 'c'\): column 'x': values of dtype <U1 do not cast to "
            r"float32 \(tensor\(float\)\) for input 'x'",
        ),
    ],
)
def test_an_object_column_that_does_not_fit_names_column_row_and_shape(rows, message) -> None:
    predictor = OnnxPredictor(BackendConfig(model=DEMO, id_column="key"))
    with pytest.raises(BatchError, match=message) as caught:
        predictor({"key": np.array(["a", "b", "c"]), "x": _object_column(rows)})
    assert "\n" not in str(caught.value) and caught.value.ids


def test_a_tensor_column_of_the_wrong_shape_names_the_rows() -> None:
    predictor = OnnxPredictor(BackendConfig(model=DEMO, id_column="id"))
    with pytest.raises(BatchError, match=r"rows 0\.\.4 \(ids 10\.\.14\): column 'x': expected "
                       r"shape \[8\] per row \(input 'x' is \[batch, 8\]\), got \[7\]") as caught:  # fmt: skip
        predictor({"id": np.arange(10, 15), "x": ROWS[:5, :7]})
    assert caught.value.ids == (10, 11, 12, 13, 14)


# -- placement and resources -------------------------------------------------------------------


def test_actors_size_threads_to_the_cpus_ray_gives_them(cluster) -> None:
    @ray.remote(num_cpus=1)
    def threads_in_task() -> int | None:
        from ortplug_ray._placement import assigned_cpus

        return assigned_cpus()

    assert ray.get(threads_in_task.remote()) == 1
    config = BackendConfig(model=DEMO, providers=("cpu",))
    assert config.build(threads=2).session_options.intra_op_num_threads == 2
    mine = BackendConfig(model=DEMO, session_options=SessionOptionsConfig(intra_op_num_threads=1))
    assert mine.build(threads=2).session_options.intra_op_num_threads == 1  # the user's wins


def test_resources_follow_the_chain() -> None:
    cpu = BackendConfig(model=DEMO)
    assert actor_resources(cpu, hosts.cpu_only(), num_cpus=3) == {"num_cpus": 3}
    explicit_gpu = BackendConfig(model=DEMO, providers=("cuda", "cpu"))
    assert actor_resources(explicit_gpu, hosts.cpu_only()) == {"num_cpus": 1, "num_gpus": 1}
    assert actor_resources(cpu, hosts.linux_gpu()) == {"num_cpus": 1, "num_gpus": 1}  # CUDA there


def test_backend_config_travels_by_pickle() -> None:
    config = BackendConfig(
        model=Path(DEMO).read_bytes(),
        providers=("cpu",),
        session_options=SessionOptionsConfig(intra_op_num_threads=1),
        input_columns={"features": "x"},
        id_column="id",
        chain_column="chain",
    )
    assert pickle.loads(pickle.dumps(config)) == config
    assert isinstance(config.model, PortableCheckpoint)


# -- the command line ---------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with the CPU plugin only: these tests expect the CPU provider on any host."""
    env = {**os.environ, "ORTPLUG_PLUGINS": "cpu"}
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True, timeout=600, env=env)


def _ray_logs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("ortplug-batch-ray-*.log"))


def test_batch_command_locally_and_on_ray(tmp_path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    np.save(source / "x.npy", ROWS)
    logs = _ray_logs()
    for engine in ("local", "ray"):
        flags = ["--ray"] if engine == "ray" else []
        done = _cli("batch", DEMO, "--input-dir", str(source), "--output-dir", str(tmp_path / engine),
                    "--batch-size", "64", "--json", *flags)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout)
        assert (summary["engine"], summary["rows"], summary["outputs"]["probs"]) == (
            engine,
            300,
            [300, 3],
        )
        np.testing.assert_allclose(
            np.load(tmp_path / engine / "probs.npy"), _expected(ROWS), atol=1e-5
        )
    (actor,) = summary["actors"]
    assert (actor["rows"], actor["providers"], actor["threads"]) == (
        300,
        ["CPUExecutionProvider"],
        1,
    )
    assert done.stderr == ""  # Ray's own output goes to a log file
    assert _ray_logs() <= logs  # removed after a run that worked


def test_batch_command_reads_pandas_parquet_with_a_list_column(tmp_path) -> None:
    (tmp_path / "in").mkdir()
    frame = pd.DataFrame({"x": list(ROWS.astype(float))})  # list<double>, read back as objects
    frame.to_parquet(tmp_path / "in" / "part-0.parquet")
    done = _cli("batch", DEMO, "--input-dir", str(tmp_path / "in"),
                "--output-dir", str(tmp_path / "out"), "--ray", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["rows"] == 300 and sum(a["rows"] for a in summary["actors"]) == 300
    written = pd.read_parquet(tmp_path / "out")
    np.testing.assert_allclose(np.stack(written["probs"]), _expected(ROWS), atol=1e-6)
    report = json.loads(written["ortplug_chain"][0])
    assert report["providers"] == ["CPUExecutionProvider"]
    again = _cli("batch", DEMO, "--input-dir", str(tmp_path / "in"),
                 "--output-dir", str(tmp_path / "out"), "--ray")  # fmt: skip
    assert again.returncode == 2 and "expected a folder without Parquet files" in again.stderr
    assert len(pd.read_parquet(tmp_path / "out")) == 300  # not added to: rows were doubled


def test_batch_command_on_ray_prints_one_line_per_error(tmp_path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    np.save(source / "x.npy", ROWS.astype(np.float64))
    done = _cli("batch", DEMO, "--input-dir", str(source), "--output-dir", str(tmp_path / "out"),
                "--ray", "--batch-size", "100")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("ortplug batch: error: batch 0 (actor pid ")
    assert "rows 0..99 (ids 0..99): InputValidationError: input 'x': expected dtype float32 " in (
        done.stderr
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _batch_on_ray(tmp_path: Path, record: str | None, ray_address: str | None):
    """``ortplug batch --ray`` with a ``ray start`` record and/or RAY_ADDRESS of its own."""
    source = tmp_path / "in"
    source.mkdir(parents=True)
    np.save(source / "x.npy", ROWS)
    ray_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    env = {**os.environ, "RAY_TMPDIR": str(ray_dir)}
    if record is not None:
        (ray_dir / "ray").mkdir()
        (ray_dir / "ray" / "ray_current_cluster").write_text(record)
    if ray_address is not None:
        env["RAY_ADDRESS"] = ray_address
    try:
        done = subprocess.run(
            [ORTPLUG, "batch", DEMO, "--input-dir", str(source), "--output-dir",
             str(tmp_path / "out"), "--ray"],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    finally:
        shutil.rmtree(ray_dir)
    assert done.returncode == 1
    return done.stderr.splitlines(), f"{ray_dir}/ray/ray_current_cluster"


@pytest.mark.parametrize("recorded_by", ["ray start", "RAY_ADDRESS"])
def test_a_cluster_that_is_gone_is_named_not_waited_for(tmp_path, recorded_by) -> None:
    # ray.init() waits for minutes on a dead address (a `ray start` record outlives a reboot)
    address = f"127.0.0.1:{_closed_port()}"
    if recorded_by == "ray start":
        lines, record = _batch_on_ray(tmp_path, address, None)
        origin = f"recorded in {record} by `ray start`"
        fix = (
            f"delete {record} (`ray stop` does too, stopping every Ray process here), "
            "or set RAY_ADDRESS=local"
        )
    else:
        lines, _ = _batch_on_ray(tmp_path, None, address)
        origin, fix = "from RAY_ADDRESS", "or set RAY_ADDRESS=local"
    assert lines == [
        f"ortplug batch: error: no Ray cluster answers at {address} (Connection refused; "
        f"{origin}): start that cluster, {fix}"
    ]


def test_an_empty_record_or_a_wrong_address_is_named(tmp_path) -> None:
    # Ray reads an empty record as the address '' and fails on it, naming neither
    lines, record = _batch_on_ray(tmp_path / "empty", "", None)
    assert lines == [
        f"ortplug batch: error: '' (recorded in {record} by `ray start`) is not a Ray address "
        f"(host:port or ray://host:port): delete {record} or set RAY_ADDRESS=local"
    ]
    lines, _ = _batch_on_ray(tmp_path / "nonsense", None, "nonsense")
    assert lines == [
        "ortplug batch: error: 'nonsense' (from RAY_ADDRESS) is not a Ray address "
        "(host:port or ray://host:port): fix it or set RAY_ADDRESS=local"
    ]


def test_batch_command_without_ray_names_the_install_command(tmp_path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    np.save(source / "x.npy", ROWS)
    code = (
        "import sys; sys.modules['ray'] = None\n"  # what an install without Ray looks like
        "from ortplug.cli.main import main\n"
        f"sys.exit(main(['batch', {DEMO!r}, '--input-dir', {str(source)!r}, "
        f"'--output-dir', {str(tmp_path / 'out')!r}, '--ray']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "ortplug batch: error: Ray Data is not installed (import failed: import of ray halted; "
        f"None in sys.modules); install it with: pip install '{REPOSITORY}/core[ray]' {REPOSITORY}/addons/ray"
    ]


def test_parquet_input_needs_ray(tmp_path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "part-0.parquet").write_bytes(b"")
    done = _cli("batch", DEMO, "--input-dir", str(source), "--output-dir", str(tmp_path / "out"))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"ortplug batch: error: --input-dir {source}: Parquet input needs --ray "
        f"(pip install '{REPOSITORY}/core[ray]' {REPOSITORY}/addons/ray)"
    ]


# Failed datasets release their actors lazily: these run last so no later test waits for CPUs.


def test_a_failing_batch_names_itself_its_rows_and_the_input(cluster) -> None:
    bad = _dataset(ROWS.astype(np.float64))
    with pytest.raises(BatchError) as caught:  # Ray's exception subclasses the worker's
        predict(bad, DEMO, batch_size=100, providers=["cpu"], id_column="id").take_all()
    error = worker_error(caught.value)
    assert type(error) is BatchError and error.ids == tuple(range(100))
    assert str(error).startswith("batch 0 (actor pid ")
    assert str(error).endswith(
        "rows 0..99 (ids 0..99): InputValidationError: input 'x': expected dtype float32 "
        "(tensor(float)), got float64"
    )


def test_a_missing_column_is_named(cluster) -> None:
    with pytest.raises(BatchError) as caught:
        predict(_dataset(ROWS, column="y"), DEMO, providers=["cpu"]).take_all()
    assert str(worker_error(caught.value)).endswith(
        "column(s) ['x'] missing; the batch has ['id', 'y']"
    )


# -- the throughput hint ------------------------------------------------------------------------


@pytest.mark.parametrize("model", [DEMO, STATIC])
def test_the_throughput_hint_runs_a_batch_in_parts_on_its_streams(model: str, monkeypatch) -> None:
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")  # the defaults: one single-thread stream per CPU
    plain = OnnxPredictor(BackendConfig(model=model, providers=("cpu",)))
    predictor = OnnxPredictor(
        BackendConfig(model=model, providers=("cpu",), performance_hint="throughput")
    )
    report = json.loads(predictor.report)
    assert (report["performance_hint"], report["streams"]) == ("throughput", predictor.streams)
    if predictor.streams == 1:
        pytest.skip("one CPU: the throughput hint serves with one stream, no parts")
    for rows in (1, 2, 7, 203):  # one row, one per stream, uneven parts, many static runs
        out = predictor({"x": ROWS[:rows]})
        assert np.array_equal(out["probs"], plain({"x": ROWS[:rows]})["probs"])
    server = predictor.backend.dispatcher
    assert server is not None and sum(d.runs for d in server.devices) > 4


def test_a_bad_row_in_a_part_is_named_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ORTPLUG_MEASURE", "0")  # the defaults: one single-thread stream per CPU
    ids = np.tile(np.arange(3, dtype=np.int64), (40, 1))
    ids[29, 1] = 12  # one id out of the table, in the second half
    predictor = OnnxPredictor(
        BackendConfig(
            model=models.write(tmp_path, "gather.onnx", models.gather_model()),
            performance_hint="throughput",
        )
    )
    if predictor.streams == 1:
        pytest.skip("one CPU: the throughput hint serves with one stream, no parts")
    with pytest.raises(BatchError, match=r"row 29: ") as caught:
        predictor({"ids": ids})
    assert "rows" not in str(caught.value).split(":")[0]
    good = predictor({"ids": np.delete(ids, 29, axis=0)})
    assert good["y"].shape == (39, 3, 4)


def test_a_throughput_actor_keeps_to_the_cpus_ray_gave_it(cluster) -> None:
    """One CPU per actor: its streams share that CPU (the host's two would oversubscribe it)."""
    scored = predict(
        _dataset(ROWS[:50]), DEMO, batch_size=16, performance_hint="throughput", chain_column="c"
    ).take_all()
    assert [row["id"] for row in scored] == list(range(50))
    np.testing.assert_allclose(
        np.stack([r["probs"] for r in scored]), _expected(ROWS[:50]), atol=1e-6
    )
    report = json.loads(scored[0]["c"])
    assert (report["performance_hint"], report["streams"], report["threads"]) == (
        "throughput",
        1,
        1,
    )


def test_the_hint_sizes_each_actors_calls() -> None:
    from ortplug_ray.resources import actor_pool as _actor_pool
    from ortplug_ray.resources import concurrent_calls as _calls

    assert (_calls("latency", False, 4), _calls("throughput", False, 4)) == (1, 4)
    assert _calls("cumulative_throughput", True, 4) == 2  # an accelerator measures 1 or 2 streams
    pool = _actor_pool(ray, 3, 4)
    assert pool.min_size == pool.max_size == 3
    if "enable_true_multi_threading" in inspect.signature(ray.data.ActorPoolStrategy).parameters:
        assert pool.max_concurrent_calls_per_actor == 4
        assert _actor_pool(ray, 3, 1).max_concurrent_calls_per_actor is None
    with pytest.raises(OptionError, match=r"performance_hint: expected one of latency, throughput"):
        BackendConfig(model=DEMO, performance_hint="fast")


#: A Ray session of ``ortplug batch --ray`` in which Ray's driver prints a raylet warning as it does
#: (``print_to_stdstream``: "N PYTHON worker processes have been started", seen on a loaded host).
_RAYLET_WARNING = (
    "from ortplug_ray._ray_session import ray_session\n"
    "from ray._private.worker import print_to_stdstream\n"
    "with ray_session():\n"
    "    line = {'lines': ['a warning'], 'pid': 'raylet', 'is_err': False}\n"
    "    print_to_stdstream(line, ignore_prefix=False)\n"
    "print('{}')\n"
)


def test_what_ray_prints_on_the_driver_stays_out_of_the_command_s_stdout() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "ORTPLUG_DEBUG")}
    done = subprocess.run(
        [sys.executable, "-c", _RAYLET_WARNING],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "{}\n"  # what --json prints, alone
