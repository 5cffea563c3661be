"""``ortplug exec``'s start-up hook: patch ONNX Runtime before the program's first import.

``ortplug exec`` puts this folder first on ``PYTHONPATH``; Python imports this module at
start-up. It then runs the ``sitecustomize`` it shadows, if there is one.
"""

from __future__ import annotations

import os
import sys


def _start() -> None:
    try:
        from ortplug_dropin._exec_hook import start
    except ImportError as exc:  # a Python without ortplug: run the program as it is
        sys.stderr.write(
            f"ortplug exec: {sys.executable} cannot import ortplug_dropin ({exc}); not patched\n"
        )
        return
    start()


def _run_shadowed() -> None:
    """Run the next ``sitecustomize`` on the path (the one this module hides)."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start()
_run_shadowed()
