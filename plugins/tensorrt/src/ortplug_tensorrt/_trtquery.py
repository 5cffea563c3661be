"""Load TensorRT's libnvinfer and ask its version, through ctypes only.

Run in a child interpreter by ``probes.py`` (``python -I _trtquery.py '<json>'``)
because loading the library can hang or crash; prints one JSON object. The
argument names ``major`` (the libnvinfer ABI ONNX Runtime links) and
``library_dirs`` (absolute folders of the tensorrt-*-libs wheels, searched
first; relative ones are ignored, and so are relative ``LD_LIBRARY_PATH`` entries).
"""

import ctypes
import json
import os
import sys
from typing import Any

_WINDOWS = sys.platform == "win32"


def _drop_relative_loader_path() -> None:
    """Re-run this script without empty or relative ``LD_LIBRARY_PATH`` entries.

    The dynamic loader reads them against the current directory, where a
    planted library must never be picked up; it reads the variable only at start-up.
    """
    value = os.environ.get("LD_LIBRARY_PATH")
    if _WINDOWS or value is None:
        return
    entries = value.replace(";", ":").split(":")
    kept = [entry for entry in entries if os.path.isabs(entry)]
    if kept == entries:
        return
    env = {key: val for key, val in os.environ.items() if key != "LD_LIBRARY_PATH"}
    if kept:
        env["LD_LIBRARY_PATH"] = ":".join(kept)
    os.execve(sys.executable, [sys.executable, "-I", *sys.argv], env)


def main(argument: dict[str, Any]) -> dict[str, Any]:
    major = argument["major"]
    name = f"nvinfer_{major}.dll" if _WINDOWS else f"libnvinfer.so.{major}"
    errors = []
    absolute = [d for d in argument.get("library_dirs", []) if os.path.isabs(d)]
    for folder in [*absolute, None]:  # a relative folder would resolve against the cwd
        path = os.path.join(folder, name) if folder else name
        if folder and not os.path.isfile(path):
            continue
        try:
            library = ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc))
            continue
        v = library.getInferLibVersion()
        return {"version": f"{v // 10000}.{v % 10000 // 100}.{v % 100}", "library": path}
    detail = " / ".join(errors) or f"{name} not found"
    return {"library_error": f"TensorRT {major} library not loadable ({detail})"}


if __name__ == "__main__":
    _drop_relative_loader_path()
    print(json.dumps(main(json.loads(sys.argv[1]))))
