"""IO binding edges (issue 24 item 32): outputs before the first run, inputs that are not
C-contiguous, a reused binding fed a new batch size."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import models
import numpy as np
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend

W = np.arange(12, dtype=np.float32).reshape(4, 3)  # matmul_model's weights


@pytest.fixture
def matmul(plugin_host) -> OnnxBackend:
    """y = x @ W with x [batch, 4], on the CPU."""
    checkpoint = InMemoryCheckpoint(models.matmul_model()).resolve()
    return OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"], plugins=plugin_host)


def test_outputs_before_the_first_run_is_an_error_not_a_crash() -> None:
    """ONNX Runtime itself segfaults here: run in a child so a crash fails this test only."""
    code = textwrap.dedent(
        """
        import models, numpy as np
        from ortplug import InMemoryCheckpoint, OnnxBackend
        checkpoint = InMemoryCheckpoint(models.matmul_model()).resolve()
        backend = OnnxBackend.from_checkpoint(checkpoint, providers=["cpu"])
        binding = backend.bind().bind_input("x", np.ones((2, 4), np.float32)).bind_output("y")
        for read in (binding.outputs, binding.ort_values):
            try:
                read()
            except RuntimeError as exc:
                print(exc)
        binding.run()
        print(binding.outputs()["y"].shape)
        """
    )
    tests = str(Path(__file__).parent)  # the child imports the test models too
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (tests, os.environ.get("PYTHONPATH")))),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.splitlines() == [
        "outputs(): output(s) 'y' are allocated by the next run(); call run() first",
        "ort_values(): output(s) 'y' are allocated by the next run(); call run() first",
        "(2, 3)",
    ]


def test_outputs_bound_to_arrays_can_be_read_before_a_run(matmul) -> None:
    target = np.full((2, 3), 7, np.float32)
    binding = matmul.bind().bind_input("x", np.ones((2, 4), np.float32)).bind_output("y", target)
    assert binding.outputs()["y"].tolist() == target.tolist()


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.asfortranarray(np.ones((2, 4), np.float32)),
        lambda: np.ones((2, 8), np.float32)[:, ::2],  # a strided view
    ],
    ids=["fortran", "strided"],
)
def test_in_place_updates_of_a_copied_input_are_seen_by_the_next_run(matmul, make) -> None:
    x = make()
    assert not x.flags.c_contiguous
    binding = matmul.bind().bind_input("x", x).bind_output("y")
    binding.run()
    np.testing.assert_allclose(binding.outputs()["y"], np.ones((2, 4)) @ W)
    x[...] = 2
    binding.run()
    np.testing.assert_allclose(binding.outputs()["y"], np.full((2, 4), 2) @ W)


def test_a_reused_binding_follows_a_new_batch_size(matmul) -> None:
    binding = matmul.bind().bind_input("x", np.ones((2, 4), np.float32)).bind_output("y")
    binding.run()
    assert binding.outputs()["y"].shape == (2, 3)
    for batch in (5, 1, 5):
        x = np.full((batch, 4), batch, np.float32)
        binding.bind_input("x", x).run()
        np.testing.assert_allclose(binding.outputs()["y"], x @ W)


def test_an_output_array_of_the_old_shape_says_what_to_do(matmul) -> None:
    binding = matmul.bind().bind_input("x", np.ones((2, 4), np.float32))
    binding.bind_output("y", np.zeros((2, 3), np.float32)).run()
    binding.bind_input("x", np.ones((5, 4), np.float32))
    with pytest.raises(
        RuntimeError, match=r"bind an array of the new shape, or bind_output\(name\)"
    ):
        binding.run()
