"""ortplug-variants: int8 and fp16 precision variants of a model, written with ONNX Runtime's own
tools beside its weights and listed in its metadata manifest, and ``ortplug variants``.

The core reads the manifest, selects among the variants and proves each before it serves; this
add-on writes them. ``ortplug.verification.precision_variants.NAME`` (the spelling before the
add-on) resolves here for one more release.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BUILDERS",
    "CALIBRATION_BATCHES",
    "calibration_feeds",
    "make_fp16",
    "make_int8",
    "write_buildable_variants",
    "write_variants",
]


def __getattr__(name: str) -> Any:
    """The writing names, imported on first use: ``ortplug variants`` parses without onnx or numpy."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import writing

    return getattr(writing, name)
