"""Building sessions: the load timeout and the record of which provider took which nodes."""

from __future__ import annotations

import models
import numpy as np
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig


def test_a_session_build_over_its_time_limit_is_cancelled(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.long_chain_model(20_000)).resolve()  # ~0.7 s to load
    options = SessionOptionsConfig(load_timeout_s=0.05)
    with pytest.raises(TimeoutError, match=r"took longer than load_timeout_s=0.05"):
        OnnxBackend.from_checkpoint(checkpoint, session_options=options, plugins=plugin_host)


def test_a_build_within_its_time_limit_is_unaffected(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.long_chain_model(10)).resolve()
    options = SessionOptionsConfig(load_timeout_s=60)
    with OnnxBackend.from_checkpoint(
        checkpoint, session_options=options, plugins=plugin_host
    ) as backend:
        assert backend.run({"t0": np.zeros(1, np.float32)})["t10"].item() == 10.0


def test_load_timeout_is_validated_and_read_from_dicts() -> None:
    assert SessionOptionsConfig.from_dict({"load_timeout_s": 1.5}).load_timeout_s == 1.5
    for bad in (0, -1, True, "10"):
        with pytest.raises(
            ValueError, match="load_timeout_s: expected a positive number of seconds"
        ):
            SessionOptionsConfig(load_timeout_s=bad)


def test_node_assignment_counts_nodes_per_provider(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.long_chain_model(5)).resolve()
    options = SessionOptionsConfig(graph_optimization_level="disable")  # recorded by default
    backend = OnnxBackend.from_checkpoint(checkpoint, session_options=options, plugins=plugin_host)
    assert backend.node_assignment() == {"CPUExecutionProvider": 5}


def test_node_assignment_says_how_to_record_it(plugin_host) -> None:
    checkpoint = InMemoryCheckpoint(models.add_model()).resolve()
    options = SessionOptionsConfig(config_entries={"session.record_ep_graph_assignment_info": "0"})
    backend = OnnxBackend.from_checkpoint(checkpoint, session_options=options, plugins=plugin_host)
    with pytest.raises(RuntimeError, match="session.record_ep_graph_assignment_info"):
        backend.node_assignment()
    backend.close()
    with pytest.raises(RuntimeError, match="closed"):
        backend.node_assignment()
