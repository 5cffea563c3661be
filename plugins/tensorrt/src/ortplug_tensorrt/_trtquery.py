"""Load TensorRT's libnvinfer and ask its version, through ctypes only.

Run in a child interpreter by ``probes.py`` (``python -I _trtquery.py '<json>'``)
because loading the library can hang or crash; prints one JSON object. The
argument names ``major`` (the libnvinfer ABI ONNX Runtime links) and
``library_dirs`` (folders of the tensorrt-*-libs wheels, searched first).
"""

import ctypes
import json
import os
import sys
from typing import Any


def main(argument: dict[str, Any]) -> dict[str, Any]:
    major = argument["major"]
    name = f"nvinfer_{major}.dll" if sys.platform == "win32" else f"libnvinfer.so.{major}"
    errors = []
    for folder in [*argument.get("library_dirs", []), None]:
        path = os.path.join(folder, name) if folder else name
        if folder and not os.path.exists(path):
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
    print(json.dumps(main(json.loads(sys.argv[1]))))
