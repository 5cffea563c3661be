"""TensorRT optimization-profile shapes: ``"in1:1x3x224x224,in2:1x77"`` parsed, checked and built."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ortplug.plugins import OptionError

__all__ = [
    "ShapeProfile",
    "check_profiles",
    "format_profile",
    "parse_profile",
    "profiles_from_ranges",
]

#: One profile: input name -> concrete dims.
ShapeProfile = dict[str, tuple[int, ...]]

_ITEM = re.compile(r"^(?P<name>[^:,]+):(?P<dims>\d+(?:x\d+)*)$")


def parse_profile(field: str, text: str) -> ShapeProfile:
    """Parse ``"name:1x3x224x224,other:1x77"``; errors name ``field`` and the bad item."""
    profile: ShapeProfile = {}
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if match is None:
            raise OptionError(
                f"{field}: expected 'input:1x3x224x224' items separated by commas, got {item!r} "
                f"in {text!r}"
            )
        name = match["name"].strip()
        if name in profile:
            raise OptionError(f"{field}: input {name!r} is listed twice in {text!r}")
        profile[name] = tuple(int(d) for d in match["dims"].split("x"))
    return profile


def format_profile(profile: Mapping[str, Sequence[int]]) -> str:
    """The ONNX Runtime string of a profile (inputs in the given order)."""
    return ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in profile.items())


def check_profiles(min_text: str, opt_text: str, max_text: str) -> None:
    """The three profiles name the same inputs with the same ranks and min <= opt <= max."""
    fields = ("profile_min_shapes", "profile_opt_shapes", "profile_max_shapes")
    parsed = [parse_profile(f, t) for f, t in zip(fields, (min_text, opt_text, max_text))]
    names = [sorted(p) for p in parsed]
    if names[0] != names[1] or names[0] != names[2]:
        raise OptionError(
            "profile_min_shapes, profile_opt_shapes and profile_max_shapes must list the same "
            f"inputs, got {names[0]}, {names[1]} and {names[2]}"
        )
    low, mid, high = parsed
    for name in low:
        if not len(low[name]) == len(mid[name]) == len(high[name]):
            raise OptionError(
                f"profile shapes of {name!r}: ranks differ ({low[name]}, {mid[name]}, {high[name]})"
            )
        if any(not a <= b <= c for a, b, c in zip(low[name], mid[name], high[name])):
            raise OptionError(
                f"profile shapes of {name!r}: expected min <= opt <= max in every dimension, got "
                f"{low[name]}, {mid[name]}, {high[name]}"
            )


def profiles_from_ranges(
    input_shapes: Mapping[str, tuple[int | str | None, ...] | None],
    ranges: Mapping[str, Sequence[int]],
) -> tuple[ShapeProfile, ShapeProfile, ShapeProfile] | None:
    """Min/opt/max profiles for the dynamic inputs, from ``{dim_name: [min, opt, max]}``.

    ``None`` when the model has no dynamic input, or a dynamic dimension has no
    range (TensorRT then builds engines for the shapes it sees at run time).
    """
    profiles: tuple[ShapeProfile, ShapeProfile, ShapeProfile] = ({}, {}, {})
    for name, shape in input_shapes.items():
        if shape is None or all(isinstance(d, int) and d > 0 for d in shape):
            continue
        dims: list[tuple[int, int, int]] = []
        for dim in shape:
            if isinstance(dim, int) and dim > 0:
                dims.append((dim, dim, dim))
            elif isinstance(dim, str) and dim in ranges:
                low, mid, high = ranges[dim]
                dims.append((low, mid, high))
            else:
                return None
        for index, profile in enumerate(profiles):
            profile[name] = tuple(d[index] for d in dims)
    return profiles if profiles[0] else None
