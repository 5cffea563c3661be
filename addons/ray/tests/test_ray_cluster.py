"""A real two-node Ray cluster on this machine (1 CPU per node): actors on both, rows as one process."""

from __future__ import annotations

import json
from importlib.resources import files

import numpy as np
import pytest
import ray
from ortplug import LocalCheckpoint, OnnxBackend, SessionOptionsConfig
from ortplug_ray import predict
from ray.cluster_utils import Cluster

STATIC = str(files("ortplug.data") / "demo_static.onnx")  # the demo MLP with its batch fixed at 4
ROWS = np.random.default_rng(11).standard_normal((96, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    cluster.wait_for_nodes()
    # Which node runs rows must not depend on timing: the pool's actors all start before a block
    # is handed out, else the first one ready may take every block
    ray.data.DataContext.get_current().wait_for_min_actors_s = 120
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def _one_process(rows: np.ndarray) -> np.ndarray:
    """The same model in one process, one intra-op thread, in runs of its static batch."""
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(STATIC).resolve(), ["cpu"], SessionOptionsConfig(intra_op_num_threads=1)
    )
    return np.concatenate(
        [backend.run({"x": rows[i : i + 4]})["probs"] for i in range(0, len(rows), 4)]
    )


def test_actors_run_on_both_nodes_with_results_equal_to_one_process(two_nodes) -> None:
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(nodes) == 2 and ray.cluster_resources()["CPU"] == 2
    # blocks already in the object store: no read task needs a CPU beside the two actors
    dataset = ray.data.from_items(
        [{"id": i, "x": row} for i, row in enumerate(ROWS)], override_num_blocks=12
    )
    scored = predict(
        dataset, STATIC, providers=["cpu"], batch_size=8, concurrency=2,
        keep_columns=["id"], id_column="id", chain_column="chain",
    ).take_all()  # fmt: skip
    assert set(scored[0]) == {"id", "logits", "probs", "chain"}  # x stays in the object store
    scored.sort(key=lambda row: row["id"])
    assert [row["id"] for row in scored] == list(range(len(ROWS)))
    np.testing.assert_array_equal(np.stack([r["probs"] for r in scored]), _one_process(ROWS))
    reports = {row["chain"] for row in scored}
    placed = [json.loads(report) for report in reports]
    assert {report["node"] for report in placed} == nodes  # one actor per node
    assert [report["threads"] for report in placed] == [1, 1]  # each node gave its actor 1 CPU
    assert all(report["providers"] == ["CPUExecutionProvider"] for report in placed)
