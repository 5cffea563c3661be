"""Load one plugin-EP library in a child interpreter (``python -I _ep_trial.py '<json>'``) and print
whether it loaded, so a library that crashes on load takes the child down, not the process."""

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
