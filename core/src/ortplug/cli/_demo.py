"""Where the demo model shipped with ortplug is, for ``run --help`` (which imports next to nothing).

The kept help pages hold :data:`DEMO_MARK` in its place: the path is each installation's own.
"""

from __future__ import annotations

import os

__all__ = ["DEMO_MARK", "DEMO_MODEL", "with_demo_path"]

#: ``ortplug run``'s model when none is given: ``ortplug/data/demo.onnx`` of this installation.
DEMO_MODEL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "demo.onnx"
)
#: What a kept help page says where the demo model's path goes.
DEMO_MARK = "<the demo model's path>"


def with_demo_path(page: str) -> str:
    """A help page with the demo model's path in place of :data:`DEMO_MARK`."""
    return page.replace(DEMO_MARK, DEMO_MODEL)
