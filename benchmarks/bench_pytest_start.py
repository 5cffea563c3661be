"""What ortplug's pytest plugin costs every pytest start: a project's run that uses none of its fixtures.

    python benchmarks/bench_pytest_start.py [--rounds 15] [--against PYTHON]

pytest loads every installed ``pytest11`` plugin at each start, so ortplug's is paid by every
project in an environment where ortplug is installed. Every case is a fresh interpreter in an
empty folder, the cases interleaved round by round, medians reported:

* ``pytest`` collecting nothing, with every plugin, against the same with ``-p no:ortplug``
  (the difference is what ortplug's plugin costs);
* importing the ``pytest11`` module after ``import pytest`` (as pytest does), against
  ``import pytest`` and finding the entry point alone; and what that import adds, from
  ``python -X importtime``.

``--against PYTHON`` times the same cases under another interpreter with ortplug installed (an
older checkout's venv), each such line marked ``[against]``: before and after in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_PLUGIN = (
    "from importlib.metadata import entry_points\n"
    "(p,) = [p for p in entry_points(group='pytest11') if p.name == 'ortplug']\n"
)


def _cases(python: str) -> dict[str, list[str]]:
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return {
        "pytest, nothing collected": pytest,
        "pytest -p no:ortplug": [*pytest, "-p", "no:ortplug"],
        "import pytest, find the plugin": [python, "-c", "import pytest\n" + _PLUGIN],
        "import pytest + ortplug's pytest11": [
            python,
            "-c",
            "import pytest\n" + _PLUGIN + "p.load()",
        ],
    }


_DIFFS = {
    "pytest, nothing collected": "pytest -p no:ortplug",
    "import pytest + ortplug's pytest11": "import pytest, find the plugin",
}


def _time(command: list[str], folder: str) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one run: the CPU figure is the steadier on a
    host other work shares."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, cwd=folder, capture_output=True, check=False)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def _imports(python: str, folder: str) -> str:
    """The pytest11 module's value, and its import's own cost and module count (``-X importtime``)."""
    code = "import pytest\n" + _PLUGIN + "print(p.value)\nimport sys; n = len(sys.modules)\n"
    code += "__import__(p.module)\nprint(len(sys.modules) - n)"  # seen by importtime
    done = subprocess.run(
        [python, "-X", "importtime", "-c", code], cwd=folder, capture_output=True, text=True
    )
    value, count = done.stdout.split()
    lines = [line for line in done.stderr.splitlines() if line.split("|")[-1].strip() == value]
    cumulative = lines[-1].split("|")[1].strip() if lines else "?"
    return f"{value}: {count} modules newly imported, {int(cumulative) / 1000:.1f} ms cumulative"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--against", default=None, help="also time the cases under this interpreter"
    )
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ortplug-bench-pytest-")
    pythons = {"": sys.executable}
    if args.against:
        pythons[" [against]"] = args.against
    cases = {
        f"{name}{mark}": command
        for mark, python in pythons.items()
        for name, command in _cases(python).items()
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for round_number in range(args.rounds + 1):  # round 0 writes bytecode
        for name, command in cases.items():
            elapsed, used = _time(command, folder)
            if round_number:
                times[name].append(elapsed)
                cpu[name].append(used)
    os.rmdir(folder)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"pytest start, {args.rounds} rounds, medians, in an empty folder")
    print(f"{'case':48} {'ms':>8} {'cpu ms':>8}  against (wall, cpu)")
    for name, value in medians.items():
        base = _DIFFS.get(name.removesuffix(" [against]"))
        mark = " [against]" if name.endswith(" [against]") else ""
        against = ""
        if base:
            wall = value - medians[base + mark]
            used = cpu_medians[name] - cpu_medians[base + mark]
            against = f"{wall:+.0f} ms, {used:+.0f} cpu ms over {base}"
        print(f"{name:48} {value:8.1f} {cpu_medians[name]:8.1f}  {against}")
    for mark, python in pythons.items():
        print(f"imports{mark}: {_imports(python, tempfile.gettempdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
