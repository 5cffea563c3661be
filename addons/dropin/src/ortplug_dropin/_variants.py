"""What the drop-in takes from a caller's ``ortplug.*`` settings without failing the app: the
opt-in to precision variants, and warnings said once.

An app gave ONNX Runtime one model file: under the drop-in another file (the int8 or fp16
variant its manifest lists) serves in its place only when the user opted in, with the session
config entry :data:`VARIANTS_ENTRY` (``"1"``), ``ortplug exec --allow-variants`` or the variable
:data:`VARIANTS_VARIABLE` (``1``); then one line on stderr says which variant serves. A bad
value is warned of once and read as no opt-in, as ONNX Runtime ignores entries it does not know.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up cost)
if TYPE_CHECKING:
    from ortplug.backend import OnnxBackend

__all__ = ["VARIANTS_ENTRY", "VARIANTS_VARIABLE", "say_variant", "variant_opt_in", "warn_once"]

#: The session config entry that lets the drop-in serve a precision variant (``"1"``).
VARIANTS_ENTRY = "ortplug.allow_variants"
#: The environment variable that does (``ortplug exec --allow-variants`` sets it).
VARIANTS_VARIABLE = "ORTPLUG_ALLOW_VARIANTS"

_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """An :class:`~ortplug.errors.OrtplugConfigWarning` at the app's call, once per process."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    import warnings

    from ortplug.errors import OrtplugConfigWarning
    from ortplug.log import user_stacklevel

    warnings.warn(message, OrtplugConfigWarning, stacklevel=user_stacklevel())


def variant_opt_in(entry: str | None) -> str | None:
    """How the user opted in to variants (``None``: not): the session config entry ``entry``
    when the options hold it, else :data:`VARIANTS_VARIABLE`."""
    if entry is not None:
        source, value = f"session config entry {VARIANTS_ENTRY}", entry
    else:
        given = os.environ.get(VARIANTS_VARIABLE)
        if given is None:
            return None
        source, value = VARIANTS_VARIABLE, given
    if value in ("0", ""):
        return None
    if value == "1":
        return f"{source}=1"
    warn_once(
        f"{source}: expected 1 (serve a verified precision variant the model's manifest lists) "
        f"or 0, got {value!r}; variants are not used"
    )
    return None


def say_variant(backend: OnnxBackend, model: str, opt_in: str) -> None:
    """One line on stderr when the session serves a variant in place of the app's file."""
    chosen = next((c for c in backend.report.candidates if c.chosen and c.variant), None)
    if chosen is None:
        return
    sys.stderr.write(
        f"ortplug: {model}: serving its {chosen.variant} variant ({chosen.precision}) on "
        f"[{', '.join(chosen.chain)}] in place of the file given (opted in: {opt_in})\n"
    )
