"""Precision variants of one model (fp32 reference, fp16, int8, per-EP compiled) and their tolerances."""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..errors import OptionError, OptionTypeError

__all__ = [
    "COMPUTE_PRECISIONS",
    "DEFAULT_TOLERANCES",
    "MAX_VARIANTS",
    "PRECISIONS",
    "Tolerance",
    "Variant",
    "check_verify",
    "default_tolerance",
    "parse_variants",
]

PRECISIONS = ("fp32", "fp16", "bf16", "int8")

#: Variant names are folder- and file-name safe: a package's variant folders carry them.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _non_negative(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise OptionError(
            f"tolerance {attribute.name}: expected a finite number >= 0, got {value!r}"
        )


def _as_float(value: float) -> float:
    """A real number as ``float``; anything else (``None``, text, a bool) as given, for the
    validator to refuse naming the field (``float()`` raised a bare TypeError or ValueError)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


@attrs.frozen
class Tolerance:
    """How far each output element may be from the reference's, element by element:
    ``|candidate - reference| <= atol + rtol * |reference|`` (numpy's ``allclose`` rule)."""

    rtol: float = attrs.field(converter=_as_float, validator=_non_negative)
    atol: float = attrs.field(converter=_as_float, validator=_non_negative)

    def describe(self) -> str:
        """``rtol=0.05 atol=0.0001``."""
        return f"rtol={self.rtol:g} atol={self.atol:g}"

    def to_dict(self) -> dict[str, float]:
        """JSON form, as in the manifest."""
        return {"rtol": self.rtol, "atol": self.atol}


#: Per precision, what a correct run of that precision stays within, element by element
#: (``|candidate - reference| <= atol + rtol * |reference|``): fp16 and tf32 keep ~3 significant
#: digits of each value, bf16 ~2, an int8 quantization a few percent; the absolute part covers the
#: rounding of sums whose terms are larger than their result (values near zero).
#: ``tf32`` is a compute precision only (NVIDIA's 10-bit-mantissa matmuls on fp32 weights).
DEFAULT_TOLERANCES = {
    "fp32": Tolerance(rtol=1e-3, atol=1e-4),
    "fp16": Tolerance(rtol=1e-2, atol=3e-2),
    "bf16": Tolerance(rtol=3e-2, atol=5e-2),
    "int8": Tolerance(rtol=5e-2, atol=5e-2),
    "tf32": Tolerance(rtol=1e-2, atol=1e-2),
}
#: The precisions a provider may compute at (``ProviderOffer.precision``): the stored ones and tf32.
COMPUTE_PRECISIONS = tuple(DEFAULT_TOLERANCES)


def check_verify(verify: object) -> bool | Tolerance | None:
    """``verify`` of ``from_checkpoint`` as given, when it is ``None``, a bool or a :class:`Tolerance`."""
    if verify is None or isinstance(verify, (bool, Tolerance)):
        return verify
    raise OptionTypeError(
        f"verify: expected True, False, None or a Tolerance(rtol, atol), got {verify!r}"
    )


def default_tolerance(precision: str) -> Tolerance:
    """The default tolerance of a precision (see :data:`DEFAULT_TOLERANCES`)."""
    return DEFAULT_TOLERANCES[precision]


def _check_name(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise OptionError(
            "variant name: expected letters, digits, '.', '_' or '-' (at most 64, not starting "
            f"with a symbol), got {value!r}"
        )


def _check_file(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"variant file: expected a non-empty path, got {value!r}")


def _check_precision(_: Any, __: Any, value: Any) -> None:
    if value not in PRECISIONS:
        raise OptionError(
            f"variant precision: expected one of {', '.join(PRECISIONS)}, got {value!r}"
        )


def _tolerance(value: object) -> Tolerance | None:
    if value is None or isinstance(value, Tolerance):
        return value
    if isinstance(value, Mapping) and set(value) == {"rtol", "atol"}:
        return Tolerance(value["rtol"], value["atol"])
    raise OptionError(f'variant tolerance: expected {{"rtol": R, "atol": A}}, got {value!r}')


def _optional_text(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise OptionError(f"variant {attribute.name}: expected a non-empty string, got {value!r}")


@attrs.frozen(kw_only=True)
class Variant:
    """One precision (or per-provider) variant of a checkpoint's model (``tolerance`` ``None``:
    its precision's default; ``ep``: the provider it was made for, ``None``: any)."""

    name: str = attrs.field(validator=_check_name)
    file: str = attrs.field(validator=_check_file)
    precision: str = attrs.field(validator=_check_precision)
    tolerance: Tolerance | None = attrs.field(default=None, converter=_tolerance)
    ep: str | None = attrs.field(default=None, validator=_optional_text)

    @property
    def effective_tolerance(self) -> Tolerance:
        """Its own tolerance, else its precision's default."""
        return self.tolerance or default_tolerance(self.precision)

    def runs_on(self, ort_name: str) -> bool:
        """Whether this variant may run on the provider ``ort_name`` (its ``ep``, or any)."""
        return self.ep is None or self.ep == ort_name

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry (fields left at their default are omitted)."""
        entry: dict[str, Any] = {"name": self.name, "file": self.file, "precision": self.precision}
        if self.tolerance is not None:
            entry["tolerance"] = self.tolerance.to_dict()
        if self.ep is not None:
            entry["ep"] = self.ep
        return entry


_FIELDS = frozenset(f.name for f in attrs.fields(Variant))


def _variant(index: int, value: object) -> Variant:
    if isinstance(value, Variant):
        return value
    if not isinstance(value, Mapping):
        raise OptionError(f"variants[{index}]: expected an object, got {value!r}")
    unknown = sorted(set(value) - _FIELDS)
    missing = sorted({"name", "file", "precision"} - set(value))
    if unknown or missing:
        problem = f"unknown field(s) {unknown}" if unknown else f"missing field(s) {missing}"
        raise OptionError(f"variants[{index}]: {problem}; allowed: {', '.join(sorted(_FIELDS))}")
    try:
        return Variant(**dict(value))
    except OptionError as exc:
        raise OptionError(f"variants[{index}]: {exc}") from None


#: The most variants one model may declare: each is a file to check, verify and time.
MAX_VARIANTS = 256


def parse_variants(value: Iterable[object]) -> tuple[Variant, ...]:
    """Variants from the manifest's JSON list (or ``Variant`` values); names must be unique."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise OptionError(f"variants: expected a list of variant objects, got {value!r}")
    items = list(value)
    if len(items) > MAX_VARIANTS:
        raise OptionError(
            f"variants: expected at most {MAX_VARIANTS} variants (each is a model file to "
            f"check, verify and time), got {len(items)}"
        )
    variants = tuple(_variant(i, item) for i, item in enumerate(items))
    counts = collections.Counter(v.name for v in variants)
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise OptionError(f"variants: names must be unique, {repeated} repeat")
    return variants
