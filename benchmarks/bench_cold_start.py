"""Cold start: time to the first result in a fresh process, ortplug against raw ONNX Runtime.

    python benchmarks/bench_cold_start.py [--rounds 15] [--model PATH]

Every case is a fresh interpreter, the cases interleaved round by round, the
median reported with its ratio to the baseline measured in the same run:

* ``import ortplug`` against ``import numpy``; ``ortplug --help`` against ``python -c pass``;
* the first result (from spawning the process to the first run's outputs) of the model
  (default: the demo model shipped in the core) through
  ``LocalCheckpoint(...).resolve()`` + ``OnnxBackend.from_checkpoint`` + one ``run``,
  against raw ``InferenceSession(path).run``: with every installed plugin, with only the
  CPU plugin (``ORTPLUG_PLUGINS=cpu``), and with an explicit ``providers=["cpu"]``;
* the floor: raw ONNX Runtime's first result in a process that also imports the
  libraries ortplug is built on (attrs, pluggy, platformdirs: its cache folder).

Each case's CPU time (user + system, the whole process) is printed beside it: on a host
that other work shares, a process waiting for a core is not charged for the wait, so that
column moves less from run to run than the wall time (both include ONNX Runtime's pool
threads, for raw ONNX Runtime as for ortplug).

Bytecode is written (as a pip-installed package has it) and the probe cache is
warmed by one untimed round first, in the default cache folder under a private
``XDG_CACHE_HOME`` (found by platformdirs, as for a user who sets no
``ORTPLUG_CACHE_DIR``): the figures are a user's second and later processes.
``--cold-cache`` empties the probe cache before every ortplug run instead.

``--weights-mb N`` runs a generated model instead, one MatMul over N MB of fp32
weights (written to the private temporary folder, then left to settle for 2 s as a
user's model file has): what a process pays per model byte (ortplug fingerprints
the weights; a big model's digest is kept per file version, so later processes
read it back instead of hashing).

``--against PYTHON`` times every ortplug case a second time, in the same rounds, under another
interpreter with ortplug installed (an older checkout's venv, say), each such line marked
``[against]``: a before/after comparison in one run, on the same machine state.

``--webgpu`` adds the WebGPU chain (software adapter opted in; source the
lavapipe env first): its first result with and without ``startup_fallback``
against the CPU-only chain, each run with an empty Mesa shader cache so the
accelerator's first run compiles its shaders, as on a first start.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_FEED = (
    "import numpy as np\n"
    "def feed(specs):\n"
    "    return {s.name: np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in s.shape or ()],"
    " np.float32) for s in specs}\n"
)
_RAW = (
    "import onnxruntime as ort\n" + _FEED + "s = ort.InferenceSession(MODEL)\n"
    "s.run(None, feed(s.get_inputs()))\n" + "import time; print('FIRST', time.time(), flush=True)\n"
)
#: What ortplug's start-up cannot do without: its required libraries and its cache folder.
_LIBRARIES = "import attrs, pluggy, platformdirs\nplatformdirs.user_cache_dir('ortplug')\n"
_ORTPLUG = (
    "from ortplug import LocalCheckpoint, OnnxBackend\n"
    + _FEED
    + "b = OnnxBackend.from_checkpoint(LocalCheckpoint(MODEL).resolve()EXTRA)\n"
    "b.run(feed(b.input_specs))\n" + "import time; print('FIRST', time.time(), flush=True)\n"
)


def _weights_model(folder: Path, megabytes: int) -> Path:
    """A model of one MatMul over ``megabytes`` MB of fp32 weights, written to ``folder``."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save_model

    rows = 1024
    columns = max(1, megabytes * (1 << 20) // (4 * rows))
    weights = np.random.default_rng(0).random((rows, columns), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, columns])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / f"weights_{megabytes}mb.onnx"
    save_model(model, path)
    time.sleep(2.0)  # settled, as a model file written before today's run is
    return path


def _webgpu_cases(model: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    python = sys.executable
    env = {"ORTPLUG_WEBGPU_ALLOW_SOFTWARE": "1", "ORT_WEBGPU_EP_ALLOW_SOFTWARE_ADAPTER": "1"}
    chain = ", providers=['webgpu', 'cpu']"

    def script(extra: str) -> str:
        return _ORTPLUG.replace("MODEL", repr(model)).replace("EXTRA", extra)

    return {
        "cpu chain first result": (
            [python, "-W", "ignore", "-c", script(", providers=['cpu']")],
            env,
        ),
        "webgpu chain first result": ([python, "-W", "ignore", "-c", script(chain)], env),
        "webgpu + startup fallback": (
            [python, "-W", "ignore", "-c", script(chain + ", startup_fallback=True")],
            env,
        ),
    }


def _cases(model: str, cli: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    python = sys.executable
    first = _ORTPLUG.replace("MODEL", repr(model)).replace("EXTRA", "")
    explicit = _ORTPLUG.replace("MODEL", repr(model)).replace("EXTRA", ", providers=['cpu']")
    raw = _RAW.replace("MODEL", repr(model))
    return {
        "python -c pass": ([python, "-c", "pass"], {}),
        "import numpy": ([python, "-c", "import numpy"], {}),
        "import ortplug": ([python, "-c", "import ortplug"], {}),
        "ortplug --help": ([cli, "--help"], {}),
        "raw ORT first result": ([python, "-c", raw], {}),
        "raw ORT + ortplug's libraries": ([python, "-c", _LIBRARIES + raw], {}),
        "ortplug, all plugins": ([python, "-W", "ignore", "-c", first], {}),
        "ortplug, CPU plugin only": (
            [python, "-W", "ignore", "-c", first],
            {"ORTPLUG_PLUGINS": "cpu"},
        ),
        "ortplug, providers=['cpu']": ([python, "-W", "ignore", "-c", explicit], {}),
    }


#: The mark of a case timed under ``--against``'s interpreter.
_AGAINST = "[against]"


def _against(
    cases: dict[str, tuple[list[str], dict[str, str]]], python: str
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The ortplug cases again under ``python`` (its own ``ortplug`` script for ``--help``)."""
    folder = Path(python).parent
    twins = {}
    for name, (command, env) in cases.items():
        if "ortplug" not in name or name.startswith("raw"):
            continue
        if command[0] == sys.executable:
            twin = [python, *command[1:]]
        else:
            twin = [shutil.which("ortplug", path=str(folder)) or "ortplug", *command[1:]]
        twins[f"{name} {_AGAINST}"] = (twin, env)
    return twins


_RATIOS = {
    "import ortplug": ("import numpy", "diff"),
    "ortplug --help": ("python -c pass", "ratio"),
    "raw ORT + ortplug's libraries": ("raw ORT first result", "ratio"),
    "ortplug, all plugins": ("raw ORT first result", "ratio"),
    "ortplug, CPU plugin only": ("raw ORT first result", "ratio"),
    "ortplug, providers=['cpu']": ("raw ORT first result", "ratio"),
    "webgpu chain first result": ("cpu chain first result", "ratio"),
    "webgpu + startup fallback": ("cpu chain first result", "ratio"),
}


def _against_text(name: str, medians: dict[str, float]) -> str:
    """The case's figure against its baseline's (``_RATIOS``), or nothing."""
    ratio = _RATIOS.get(name.removesuffix(f" {_AGAINST}"))
    if ratio is None:
        return ""
    base, how = ratio
    value = medians[name]
    if how == "ratio":
        return f"{value / medians[base]:.2f}x {base}"
    return f"{value - medians[base]:+.0f} ms over {base}"


def _time(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Milliseconds from spawning ``command`` to its first result (its ``FIRST`` line), else to its
    exit; and the CPU milliseconds (user + system) the whole process took.

    The first result is what a user waits for; the exit (which also waits for a
    startup fallback's bring-up to stop) is not. The CPU time is the steadier figure on a
    host other work shares (a process waiting for a core is not charged for the wait).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed:\n{done.stderr}")
    firsts = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FIRST ")]
    return ((float(firsts[0]) if firsts else ended) - started) * 1000, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--model", default=None, help="default: the demo model shipped in the core")
    parser.add_argument(
        "--weights-mb", type=int, default=None, help="a generated model of N MB of weights"
    )
    parser.add_argument("--cold-cache", action="store_true", help="empty the probe cache each run")
    parser.add_argument("--webgpu", action="store_true", help="add the WebGPU chain's cases")
    parser.add_argument(
        "--against", default=None, help="also time the ortplug cases under this interpreter"
    )
    args = parser.parse_args()
    from ortplug.testing import demo_model

    cli = shutil.which("ortplug", path=str(Path(sys.executable).parent)) or "ortplug"
    cache = Path(tempfile.mkdtemp(prefix="ortplug-bench-cache-"))
    if args.weights_mb:
        model = str(_weights_model(cache, args.weights_mb))
    else:
        model = str(Path(args.model or demo_model()).resolve())
    unset = ("PYTHONDONTWRITEBYTECODE", "ORTPLUG_CACHE_DIR")
    base_env = {k: v for k, v in os.environ.items() if k not in unset}
    base_env["XDG_CACHE_HOME"] = str(cache)
    cases = _webgpu_cases(model) if args.webgpu else _cases(model, cli)
    if args.against:
        cases.update(_against(cases, args.against))
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for round_number in range(args.rounds + 1):  # round 0 writes bytecode and the caches
            for name, (command, extra_env) in cases.items():
                if args.cold_cache and name.startswith("ortplug,"):
                    shutil.rmtree(cache / "ortplug" / "probes", ignore_errors=True)
                env = {**base_env, **extra_env}
                if args.webgpu:  # every start compiles its shaders
                    env["MESA_SHADER_CACHE_DIR"] = tempfile.mkdtemp(dir=cache)
                elapsed, used = _time(command, env)
                if round_number:
                    times[name].append(elapsed)
                    cpu[name].append(used)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"cold start, {args.rounds} rounds, medians, model {Path(model).name}")
    print(f"{'case':40} {'ms':>8}  against{'':40} {'cpu ms':>8}  against")
    for name, value in medians.items():
        against = _against_text(name, medians)
        used = cpu_medians[name]
        print(
            f"{name:40} {value:8.1f}  {against:47} {used:8.1f}  {_against_text(name, cpu_medians)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
