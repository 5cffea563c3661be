"""Load one plugin-EP library in a child interpreter and say whether it loaded.

Run by :mod:`ortplug.host.ep_libraries` (``python -I _ep_trial.py '<json>'``) before a
library is loaded into the process for the first time: a library that aborts or
segfaults on load takes this child down, not the process. The argument names the
library's ``name`` and ``path`` and the ``sys_path`` folders holding the parent's
``onnxruntime``. Prints one JSON object: ``{"loaded": true}`` or ``{"load_error": ...}``.
Not imported as part of the package.
"""

import json
import sys
from typing import Any


def main(argument: dict[str, Any]) -> dict[str, Any]:
    sys.path[:0] = [str(folder) for folder in argument.get("sys_path", [])]
    import onnxruntime

    try:
        onnxruntime.register_execution_provider_library(argument["name"], argument["path"])
        onnxruntime.get_ep_devices()
    except Exception as exc:  # an error the parent would get as well: it reports it itself
        return {"load_error": f"{type(exc).__name__}: {exc}"}
    return {"loaded": True}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
