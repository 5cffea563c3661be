"""Run ONNX Runtime's own Python API tests twice: with its class, then with ortplug's drop-in.

ONNX Runtime's tests are not part of this repository: fetch ``onnxruntime/test/python`` and
``onnxruntime/test/testdata`` from an ONNX Runtime commit (matching the installed wheel as
closely as you can) into one folder, then::

    python scripts/ort_api_tests.py FOLDER [--files onnxruntime_test_python.py ...]

Each test file runs in its own pytest process (the global thread pool tests need their own),
once plainly and once under ``ortplug exec --takeover none`` (``onnxruntime.InferenceSession``
is the drop-in; explicit provider lists keep ONNX Runtime's behaviour, ``providers=None`` gets
ortplug's choice; ``--takeover all`` lets ortplug choose for every session instead). Prints both counts per outcome and every test whose outcome differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

#: ONNX Runtime's Python API tests: the session API, IO binding, global thread pools,
#: sparse tensors, ML ops, the onnxruntime.backend API.
FILES = (
    "onnxruntime_test_python.py",
    "onnxruntime_test_python_iobinding.py",
    "onnxruntime_test_python_global_threadpool.py",
    "onnxruntime_test_python_sparse_matmul.py",
    "onnxruntime_test_python_mlops.py",
    "onnxruntime_test_python_backend.py",
    "onnxruntime_test_python_backend_mlops.py",
)


def _outcomes(report: Path) -> dict[str, str]:
    """``{test id: passed|failed|error|skipped}`` from a JUnit XML report."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        outcomes[name] = {"failure": "failed"}.get(outcome, outcome)
    return outcomes


def _run(folder: Path, test_file: str, report: Path, dropin: bool, takeover: str) -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file]
    command += [f"--junitxml={report}", "-o", "junit_family=xunit1"]
    if dropin:
        exec_prefix = [sys.executable, "-m", "ortplug.cli.main", "exec", "--takeover", takeover]
        command = [*exec_prefix, "--", *command]
    env = {**os.environ, "ORTPLUG_PLUGINS": os.environ.get("ORTPLUG_PLUGINS", "cpu")}
    subprocess.run(command, cwd=folder, env=env, capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder holding onnxruntime/test/python")
    parser.add_argument("--files", nargs="*", default=list(FILES), help="test files to run")
    parser.add_argument(
        "--takeover",
        choices=("none", "cpu", "all"),
        default="none",
        help="explicit lists ortplug replaces too (none: the drop-in as a class; all: ortplug "
        "chooses for every session, where tests that check the providers they asked for differ)",
    )
    args = parser.parse_args()
    tests = args.folder / "onnxruntime" / "test" / "python"
    if not (tests / FILES[0]).is_file():
        parser.error(f"{tests}: expected ONNX Runtime's test folder, with {FILES[0]}")
    totals: dict[str, Counter[str]] = {"onnxruntime": Counter(), "ortplug": Counter()}
    differing = []
    with tempfile.TemporaryDirectory() as scratch:
        for test_file in args.files:
            results = {}
            for label, dropin in (("onnxruntime", False), ("ortplug", True)):
                report = Path(scratch) / f"{label}-{test_file}.xml"
                _run(tests, test_file, report, dropin, args.takeover)
                results[label] = _outcomes(report) if report.is_file() else {}
                totals[label].update(results[label].values())
                print(f"{test_file:48} {label:12} {dict(Counter(results[label].values()))}")
            for name in sorted(set(results["onnxruntime"]) | set(results["ortplug"])):
                theirs = results["onnxruntime"].get(name, "absent")
                ours = results["ortplug"].get(name, "absent")
                if theirs != ours:
                    differing.append(f"{name}: onnxruntime {theirs}, ortplug {ours}")
    print()
    for label, counts in totals.items():
        print(f"{label:12} {sum(counts.values())} tests: {dict(sorted(counts.items()))}")
    print(f"differing: {len(differing)}")
    for line in differing:
        print(f"  {line}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
