"""The option values ``OnnxBackend.from_checkpoint`` groups its proving and start-up knobs into,
checked once before anything builds; the keywords they replaced warn for one release."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from ..checkpoint import Tolerance
from ..checkpoint.variants import check_verify
from ..errors import OptionError, OptionTypeError
from ..log import user_stacklevel

__all__ = ["StartupFallback", "Verification", "legacy_keywords", "startup_of", "verification_of"]


@attrs.frozen
class Verification:
    """How candidates are proven before one serves (``verify=Verification(...)``).

    ``enabled=False``: no check, the reference weights only; ``tolerance``: default, the
    precision's; ``inputs``: real arrays by input name, verified on first; ``measure``: time the
    verified choices on a first build and serve the fastest (``None``: unless
    ``ORTPLUG_MEASURE=0``); ``min_accelerator_share`` (0..1): below it, a session is a fallback.
    """

    enabled: bool = True
    tolerance: Tolerance | None = None
    inputs: Mapping[str, Any] | None = attrs.field(default=None, eq=False)
    measure: bool | None = None
    min_accelerator_share: float | None = None

    @property
    def verify(self) -> bool | Tolerance | None:
        """The pipeline's ``verify``: ``False`` (off), a tolerance, or ``None`` (each default)."""
        return False if not self.enabled else self.tolerance


@attrs.frozen
class StartupFallback:
    """Serve on the CPU reference at once and prove the accelerator behind it (``True``: these
    defaults): ``real_traffic_checks`` real requests to agree on first (default 8), ``spot_check``
    the share re-run on the CPU once it serves (0.01); ``ORTPLUG_*`` variables set the defaults."""

    real_traffic_checks: int | None = None
    spot_check: float | None = None


def verification_of(verify: object) -> Verification:
    """``verify=`` as a :class:`Verification` (a bool, ``None``, a tolerance, or one)."""
    if isinstance(verify, Verification):
        if verify.tolerance is not None:
            check_verify(verify.tolerance)
        if verify.measure is not None and not isinstance(verify.measure, bool):
            raise OptionTypeError(
                f"Verification.measure: expected True, False or None, got {verify.measure!r}"
            )
        if not verify.enabled and verify.inputs is not None:
            raise OptionError("Verification.inputs: used only with enabled=True, got enabled=False")
        return verify
    checked = check_verify(verify)
    if checked is False:
        return Verification(enabled=False)
    return Verification(tolerance=checked if isinstance(checked, Tolerance) else None)


def startup_of(startup_fallback: object, verification: Verification) -> StartupFallback | None:
    """``startup_fallback=`` as a :class:`StartupFallback` (``None``: off)."""
    if startup_fallback is False:
        return None
    if startup_fallback is True:
        return StartupFallback()
    if not isinstance(startup_fallback, StartupFallback):
        raise OptionTypeError(
            "startup_fallback: expected True, False or a StartupFallback, got "
            f"{type(startup_fallback).__name__}"
        )
    checked = (startup_fallback.real_traffic_checks, startup_fallback.spot_check)
    if not verification.enabled and checked != (None, None):
        raise OptionError(
            "StartupFallback.real_traffic_checks, spot_check: used only with verification on, "
            "got verify=False"
        )
    return startup_fallback


_F = TypeVar("_F", bound=Callable[..., Any])
#: The keywords of earlier releases: which value each moved into, and its field there.
_MOVED = {
    "verify_inputs": ("verify", "inputs"),
    "measure": ("verify", "measure"),
    "min_accelerator_share": ("verify", "min_accelerator_share"),
    "real_traffic_checks": ("startup_fallback", "real_traffic_checks"),
    "spot_check": ("startup_fallback", "spot_check"),
}


def _moved_into(keyword: str, value: object, given: Mapping[str, Any]) -> object:
    """The ``verify`` or ``startup_fallback`` value with the legacy ``keyword`` moved into it."""
    target, field = _MOVED[keyword]
    current = given.get(target)
    change: dict[str, Any] = {field: value}
    if target == "verify":
        base = current if isinstance(current, Verification) else verification_of(current)
        if field == "inputs" and not base.enabled:
            raise OptionError(
                f"verify_inputs: used only with verification on, got verify={current!r}"
            )
        return attrs.evolve(base, **change)
    if current in (None, False):
        raise OptionError(
            f"{keyword}: used only with startup_fallback=True and verification on, "
            f"got startup_fallback={current!r}"
        )
    base_startup = current if isinstance(current, StartupFallback) else StartupFallback()
    return attrs.evolve(base_startup, **change)


def legacy_keywords(build: _F) -> _F:
    """Accept the keywords of earlier releases for one more, each said once as deprecated."""

    @functools.wraps(build)
    def accepting(*args: Any, **kwargs: Any) -> Any:
        legacy = [key for key in _MOVED if key in kwargs]
        for keyword in sorted(legacy, key=lambda k: _MOVED[k][0] == "verify"):
            value = kwargs.pop(keyword)
            if value is None:
                continue
            target, field = _MOVED[keyword]
            spelled = "Verification" if target == "verify" else "StartupFallback"
            warnings.warn(
                f"from_checkpoint({keyword}=...) is deprecated: pass "
                f"{target}={spelled}({field}=...)",
                DeprecationWarning,
                stacklevel=user_stacklevel(),
            )
            kwargs[target] = _moved_into(keyword, value, kwargs)
        return build(*args, **kwargs)

    return accepting  # type: ignore[return-value]
