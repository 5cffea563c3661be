"""Load TensorRT's libnvinfer and ask its version, through ctypes only.

Run in a child interpreter by ``probes.py`` (``python -I _trtquery.py '<json>'``)
because loading the library can hang or crash; prints one JSON object. The
argument names ``major`` (the libnvinfer ABI ONNX Runtime links) and
``library_dirs`` (absolute folders of the tensorrt-*-libs wheels, searched
first; relative ones are ignored; ``run_probe_script`` drops relative
``LD_LIBRARY_PATH`` entries).
"""

import ctypes
import json
import os
import sys
from typing import Any

_WINDOWS = sys.platform == "win32"


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
    print(json.dumps(main(json.loads(sys.argv[1]))))
