"""The inputs a throughput build measures its layouts and checks its rows on: the traffic's shapes.

In order: the arrays the caller gave (``verify=Verification(inputs=...)``, ``ortplug bench
--callers --input``), the checkpoint's samples (:func:`~ortplug.verification.sample_inputs.carried_samples`),
then inputs generated for the rest (:func:`~ortplug.verification.sample_inputs.session_inputs`,
run on the served session until one runs). A generated feed the model took only at the last
rung's degenerate sizes (an image of 1x1, as PP-OCR's recognizer ``[N, 3, ?, W]`` refusing
square sizes) stands for no real request: layouts are not measured on it (:func:`probed`).

Each feed has a digest (names, dtypes, shapes, bytes), recorded with the layout, so a later
process uses a record only when it serves the same inputs; generated ones are made again at
the recorded shapes without running the model (:func:`regenerated`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from ortplug.verification.sample_inputs import candidate_feeds, session_inputs

__all__ = ["TrafficInputs", "feed_digest", "known", "probed", "regenerated"]


@attrs.frozen
class TrafficInputs:
    """One feed and where it came from: ``origin`` (``given``, ``samples``, ``generated`` or
    several), how it reads in a report, and whether it is degenerate (see the module docstring)."""

    feed: Mapping[str, np.ndarray] = attrs.field(eq=False)
    origin: str
    shapes: Mapping[str, tuple[int, ...]]
    digest: str
    degenerate: bool = False

    def describe(self) -> str:
        """``samples: x float32 (1, 3, 48, 320)``."""
        arrays = ", ".join(
            f"{name} {self.feed[name].dtype} {tuple(shape)}" for name, shape in self.shapes.items()
        )
        return f"{self.origin}: {arrays}"


def feed_digest(feed: Mapping[str, np.ndarray]) -> str:
    """A digest of ``feed``'s names, dtypes, shapes and values (hex)."""
    digest = hashlib.sha256()
    for name in sorted(feed):
        value = np.ascontiguousarray(feed[name])
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _origin(given: Mapping[str, Any], samples: Mapping[str, Any], generated: bool) -> str:
    origins = ["given"] * bool(given) + ["samples"] * bool(samples) + ["generated"] * generated
    *first, last = origins or ["generated"]
    return f"{', '.join(first)} and {last}" if first else last


def _inputs(
    feed: Mapping[str, np.ndarray],
    given: Mapping[str, np.ndarray],
    samples: Mapping[str, np.ndarray],
    *,
    degenerate: bool = False,
) -> TrafficInputs:
    own = {name: value for name, value in samples.items() if name not in given}
    generated = any(name not in given and name not in samples for name in feed)
    shapes = {name: tuple(int(d) for d in np.shape(value)) for name, value in feed.items()}
    origin = _origin(given, own, generated)
    return TrafficInputs(dict(feed), origin, shapes, feed_digest(feed), degenerate)


def known(
    names: Sequence[str], given: Mapping[str, np.ndarray], samples: Mapping[str, np.ndarray]
) -> TrafficInputs | None:
    """The feed when the given arrays and the samples hold every input (no run needed)."""
    feed = {**samples, **given}
    if any(name not in feed for name in names):
        return None
    return _inputs({name: feed[name] for name in names}, given, samples)


def probed(
    session: Any,
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray],
    samples: Mapping[str, np.ndarray],
) -> TrafficInputs:
    """The first feed ``session`` runs, the given arrays and samples as they are and the rest
    generated (raises :class:`~ortplug.errors.InputsNotAcceptedError` when none runs)."""
    accepted = session_inputs(session, extra, {**samples, **given})
    return _inputs(accepted.feed, given, samples, degenerate=accepted.degenerate)


@attrs.frozen
class _Spec:
    name: str
    type: str
    shape: tuple[int | str | None, ...] | None


def regenerated(
    session: Any,
    extra: Mapping[str, object],
    given: Mapping[str, np.ndarray],
    samples: Mapping[str, np.ndarray],
    shapes: Mapping[str, Sequence[int]],
) -> TrafficInputs | None:
    """The feed :func:`probed` found, made again at its recorded ``shapes`` without running the
    model (generated inputs are seeded); ``None`` when no candidate has those shapes."""
    specs = [
        _Spec(arg.name, arg.type, tuple(arg.shape) if isinstance(arg.shape, list) else None)
        for arg in session.get_inputs()
    ]
    wanted = {name: tuple(shape) for name, shape in shapes.items()}
    for candidate in candidate_feeds(specs, extra, {**samples, **given}):
        found = {name: tuple(np.shape(value)) for name, value in candidate.feed.items()}
        if found == wanted:
            return _inputs(candidate.feed, given, samples, degenerate=candidate.degenerate)
    return None
