"""Batch inference on a real local Ray cluster: one backend per actor, columns in and out, errors."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import hosts
import numpy as np
import pytest
import ray
from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig
from ortplug.integrations.ray import BackendConfig, actor_resources, predict

DEMO = str(files("ortplug.data") / "demo.onnx")
ORTPLUG = shutil.which("ortplug", path=os.path.dirname(sys.executable)) or "ortplug"
ROWS = np.random.default_rng(7).standard_normal((300, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    yield
    ray.shutdown()


def _dataset(rows: np.ndarray, column: str = "x"):
    return ray.data.range(len(rows)).map_batches(
        lambda b: {"id": b["id"], column: rows[b["id"]]}, batch_format="numpy"
    )


def _expected(rows: np.ndarray, providers: list[str] | None = None) -> np.ndarray:
    """What one backend here gives (the same chain as the workers: same host, same policy)."""
    checkpoint = InMemoryCheckpoint(Path(DEMO).read_bytes()).resolve()
    backend = OnnxBackend.from_checkpoint(checkpoint, providers)
    return np.asarray(backend.run({"x": rows})["probs"])


def test_predict_scores_every_row_in_order(cluster) -> None:
    scored = predict(_dataset(ROWS), DEMO, batch_size=64).take_all()
    assert [row["id"] for row in scored] == list(range(len(ROWS)))
    probs = np.stack([row["probs"] for row in scored])
    np.testing.assert_allclose(probs, _expected(ROWS), atol=1e-5)
    assert set(scored[0]) == {"id", "x", "logits", "probs"}


def test_columns_map_to_inputs_and_outputs(cluster) -> None:
    scored = predict(
        _dataset(ROWS[:50], column="features"), DEMO,
        input_columns={"features": "x"}, output_columns={"probs": "score"}, providers=["cpu"],
    ).take_all()  # fmt: skip
    assert set(scored[0]) == {"id", "features", "score"}
    np.testing.assert_allclose(
        np.stack([r["score"] for r in scored]), _expected(ROWS[:50], ["cpu"]), atol=1e-6
    )


def test_actors_size_threads_to_the_cpus_ray_gives_them(cluster) -> None:
    @ray.remote(num_cpus=1)
    def threads_in_task() -> int | None:
        from ortplug.integrations.ray import _assigned_cpus

        return _assigned_cpus()

    assert ray.get(threads_in_task.remote()) == 1
    config = BackendConfig(model=DEMO, providers=("cpu",))
    assert config.build(threads=2).session_options.intra_op_num_threads == 2
    mine = BackendConfig(model=DEMO, session_options={"intra_op_num_threads": 1})
    assert (
        mine.build(threads=2).session_options.intra_op_num_threads == 1
    )  # the user's setting wins


def test_resources_follow_the_chain() -> None:
    cpu = BackendConfig(model=DEMO)
    assert actor_resources(cpu, hosts.cpu_only(), num_cpus=3) == {"num_cpus": 3}
    explicit_gpu = BackendConfig(model=DEMO, providers=("cuda", "cpu"))
    assert actor_resources(explicit_gpu, hosts.cpu_only()) == {"num_cpus": 1, "num_gpus": 1}
    assert actor_resources(cpu, hosts.linux_gpu()) == {
        "num_cpus": 1,
        "num_gpus": 1,
    }  # the policy picks CUDA there


def test_backend_config_travels_by_pickle() -> None:
    config = BackendConfig(
        model=Path(DEMO).read_bytes(),
        providers=("cpu",),
        session_options=SessionOptionsConfig(intra_op_num_threads=1).to_dict(),
        input_columns={"features": "x"},
    )
    assert pickle.loads(pickle.dumps(config)) == config


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORTPLUG, *args], capture_output=True, text=True, timeout=600)


def test_batch_command_locally_and_on_ray(tmp_path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    np.save(source / "x.npy", ROWS)
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


def test_batch_command_reads_and_writes_parquet_on_ray(cluster, tmp_path) -> None:
    ray.data.from_numpy(ROWS).rename_columns({"data": "x"}).write_parquet(str(tmp_path / "in"))
    done = _cli(
        "batch",
        DEMO,
        "--input-dir",
        str(tmp_path / "in"),
        "--output-dir",
        str(tmp_path / "out"),
        "--ray",
        "--json",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["rows"] == 300
    rows = ray.data.read_parquet(str(tmp_path / "out")).take_all()
    assert len(rows) == 300 and rows[0]["probs"].shape == (3,)


@pytest.mark.parametrize(
    ("setup", "flags", "message"),
    [
        ("empty", [], "--input-dir {src}: expected x.npy; missing x.npy"),
        ("parquet", [], "Parquet input needs --ray (pip install 'ortplug[ray]')"),
        ("npy", ["--batch-size", "0"], "--batch-size: expected a positive integer, got '0'"),
    ],
)
def test_batch_command_errors_are_one_line(tmp_path, setup, flags, message) -> None:
    source = tmp_path / "in"
    source.mkdir()
    if setup == "parquet":
        (source / "part-0.parquet").write_bytes(b"")
    if setup == "npy":
        np.save(source / "x.npy", ROWS)
    done = _cli(
        "batch", DEMO, "--input-dir", str(source), "--output-dir", str(tmp_path / "out"), *flags
    )
    assert done.returncode == 2  # a usage error: what was typed is wrong
    assert message.format(src=source) in done.stderr and len(done.stderr.strip().splitlines()) == 1


# Failed datasets release their actors lazily: these run last so no later test waits for CPUs.


def test_a_failing_batch_names_itself_and_the_input(cluster) -> None:
    bad = _dataset(ROWS.astype(np.float64))
    with pytest.raises(Exception) as caught:
        predict(bad, DEMO, batch_size=100, providers=["cpu"]).take_all()
    message = str(caught.value)
    assert "BatchError" in message and "batch 0 (100 rows, actor pid" in message
    assert "input 'x': expected dtype float32 (tensor(float)), got float64" in message


def test_a_missing_column_is_named(cluster) -> None:
    with pytest.raises(
        Exception, match=r"column\(s\) \['x'\] missing; the batch has \['id', 'y'\]"
    ):
        predict(_dataset(ROWS, column="y"), DEMO, providers=["cpu"]).take_all()
