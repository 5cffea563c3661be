"""ortplug-ray installs alone on the core and the CPU plugin in a fresh venv: before it, each old
name and ``ortplug batch`` is one line naming the install; after it (Ray is big: an import and a
``predict`` smoke on a tiny dataset, not the whole suite), it scores rows as the backend does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import onnxruntime as ort
import ortplug_ray
import pytest
from venvs import ROOT, fresh_venv, pip_in, python_in, refused_names

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


_SMOKE = (
    "import numpy as np, ray\n"
    "from importlib.resources import files\n"
    "from ortplug import LocalCheckpoint, OnnxBackend\n"
    "from ortplug_ray import predict\n"
    "model = str(files('ortplug.data') / 'demo.onnx')\n"
    "rows = np.random.default_rng(0).standard_normal((12, 8)).astype(np.float32)\n"
    "ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False)\n"
    "ds = ray.data.from_numpy(rows).map_batches(lambda b: {'x': b['data']})\n"
    "out = predict(ds, model, providers=['cpu'], batch_size=4, concurrency=1).take_all()\n"
    "got = np.stack([row['logits'] for row in out])\n"
    "want = OnnxBackend.from_checkpoint(LocalCheckpoint(model).resolve(), ['cpu']).run({'x': rows})\n"
    "np.testing.assert_allclose(got, want['logits'], rtol=1e-6, atol=1e-6)\n"
    "print(len(out))\n"
)


@pytest.fixture(scope="module")
def core_and_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core, the CPU plugin and this ONNX Runtime."""
    return fresh_venv(
        tmp_path_factory.mktemp("ray-alone") / "venv",
        str(ROOT / "core"),
        str(ROOT / "plugins" / "cpu"),
        f"onnxruntime=={ort.__version__}",
    )


def test_the_ray_add_on_installs_alone_and_predicts_there(core_and_cpu: Path, tmp_path) -> None:
    python = python_in(core_and_cpu)
    install = subprocess.run(
        [python, "-c", "from ortplug.addons import RAY; print(RAY.install_line())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    hint = f"needs the Ray add-on (ortplug-ray), which is not installed; install it with: {install}"
    names = list(ortplug_ray.__all__)
    said = refused_names(python, "ortplug.integrations.ray", names)
    assert said == [f"ortplug.integrations.ray.{n} {hint}" for n in names]
    command = [python, "-m", "ortplug.cli.main", "batch", "m.onnx", "--input-dir", str(tmp_path),
               "--output-dir", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"ortplug batch: error: ortplug batch {hint}\n"

    pip_in(core_and_cpu, "install", "--quiet", str(ROOT / "addons" / "ray"))  # with ray[data]
    smoke = subprocess.run([python, "-c", _SMOKE], capture_output=True, text=True, timeout=600)
    assert (smoke.returncode, smoke.stdout) == (0, "12\n"), smoke.stderr[-3000:]
