"""Ray ``predict`` refuses a column written twice before the job starts (issue 24 item 33):
an output over an input column, an output mapped over another input, the chain column."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import pytest
import ray
from ortplug.errors import OptionError
from ortplug_ray import BackendConfig, BatchError, OnnxPredictor, predict

DEMO = str(files("ortplug.data") / "demo.onnx")  # x [batch, 8] -> logits, probs
ROWS = np.random.default_rng(3).standard_normal((20, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def cluster():
    ray.init(
        address="local",
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def _dataset(**columns: np.ndarray):
    return ray.data.from_numpy(ROWS).map_batches(
        lambda batch: {"id": np.arange(len(batch["data"])), "x": batch["data"], **{
            name: value[: len(batch["data"])] for name, value in columns.items()
        }},
        batch_format="numpy",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "options", "message"),
    [
        ({"probs": np.zeros(20)}, {},
         "output 'probs' would be written as column 'probs' over input column 'probs'"),
        ({}, {"output_columns": {"probs": "x"}},
         "output 'probs' would be written as column 'x' over input column 'x'"),
        ({}, {"chain_column": "id"},
         "chain_column would be written as column 'id' over input column 'id'"),
        ({}, {"output_columns": {"probs": "p", "logits": "p"}},
         "output 'logits' would be written as column 'p' over the column of output 'probs'"),
        ({}, {"chain_column": "probs"},
         "chain_column would be written as column 'probs' over the column of output 'probs'"),
    ],
)  # fmt: skip
def test_a_column_clash_is_refused_before_the_job_starts(cluster, extra, options, message):
    dataset = _dataset(**extra)
    with pytest.raises(OptionError, match=f"^predict: {message}: map it to another name"):
        predict(dataset, DEMO, providers=["cpu"], **options)


def test_no_clash_when_the_input_column_is_not_kept(cluster) -> None:
    dataset = _dataset(probs=np.zeros(20))
    scored = predict(dataset, DEMO, providers=["cpu"], keep_columns=["id"]).take_all()
    assert sorted(scored[0]) == ["id", "logits", "probs"]
    assert len(scored) == 20 and scored[0]["probs"].shape == (3,)


def test_the_predictor_refuses_a_clash_in_a_batch_too() -> None:
    batch = {"id": np.arange(4), "x": ROWS[:4]}
    predictor = OnnxPredictor(BackendConfig(model=DEMO, providers=["cpu"], chain_column="x"))
    with pytest.raises(BatchError, match="chain_column would be written as column 'x' over input"):
        predictor(batch)
