"""``ProviderReport``: why a session runs where it runs, in one value (``backend.report``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..session.placement import accelerator_share

if TYPE_CHECKING:
    from ..session.plan import SessionPlan
    from ..verification.verdicts import Verdict

__all__ = ["Candidate", "ProviderReport", "ServingSummary"]


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


class ServingSummary(Protocol):
    """How a dispatcher serves, for ``backend.serving``, ``report`` and the command line."""

    @property
    def hint(self) -> str:
        """The performance hint served."""
        ...

    @property
    def streams(self) -> int:
        """How many runs it serves at once (a caller feeding it in parallel keeps them busy)."""
        ...

    def lines(self) -> list[str]:
        """Human-readable lines, one per device or decision."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The same as JSON-ready values."""
        ...


@attrs.frozen
class Candidate:
    """One candidate a build weighed: its chain and weights, verdict (``None``: not checked),
    median time (``None``: not timed), and why it was chosen or not."""

    chain: tuple[str, ...]
    variant: str | None
    precision: str
    verdict: Verdict | None
    median_ms: float | None
    chosen: bool
    reason: str

    def describe(self) -> str:
        """``[webgpu, cpu] reference weights (fp32): 1.84 ms, slower than the CPU reference``."""
        weights = f"variant {self.variant}" if self.variant else "reference weights"
        timed = "" if self.median_ms is None else f" {self.median_ms:.3g} ms,"
        mark = "chosen: " if self.chosen else ""
        return f"[{', '.join(self.chain)}] {weights} ({self.precision}):{timed} {mark}{self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "chain": list(self.chain),
            "variant": self.variant,
            "precision": self.precision,
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "median_ms": None if self.median_ms is None else round(self.median_ms, 4),
            "chosen": self.chosen,
            "reason": self.reason,
        }


@attrs.frozen
class ProviderReport:
    """Requested and realized chain, options, node placement, ORT's messages, host and reasons.

    ``nodes``: graph nodes per realized provider; ``reasons``/``declined``: ``(kind, reason)``
    pairs; ``verification``: the verdict (``None``: nothing checked); ``candidates``: what the
    build weighed; ``startup``/``serving``: a startup fallback's state, a throughput hint's plan.
    """

    requested: tuple[str, ...]
    realized: tuple[str, ...]
    provider_options: Mapping[str, Mapping[str, str]] = attrs.field(converter=_frozen)
    nodes: Mapping[str, int] = attrs.field(converter=_frozen)
    messages: tuple[str, ...]
    reasons: tuple[tuple[str, str], ...]
    declined: tuple[tuple[str, str], ...]
    host: Mapping[str, Any] = attrs.field(converter=_frozen)
    verification: Verdict | None = None
    candidates: tuple[Candidate, ...] = ()
    precision: str | None = None
    startup: str | None = None
    serving: ServingSummary | None = None

    @classmethod
    def of(cls, plan: SessionPlan | None, **facts: Any) -> ProviderReport:
        """The report of a session built from ``plan`` (``None``: a wrapped session): the plan's
        declines, host and precision, and ``facts`` (the other fields) as given."""
        return cls(
            declined=plan.declined if plan else (),
            host=plan.host.to_dict() if plan else {},
            precision=plan.precision if plan else None,
            **facts,
        )

    @property
    def accelerator_share(self) -> float | None:
        """The share of graph nodes that did not land on the CPU provider (``None``: unknown)."""
        return accelerator_share(self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "requested": list(self.requested),
            "realized": list(self.realized),
            "provider_options": {k: dict(v) for k, v in self.provider_options.items()},
            "nodes": dict(self.nodes),
            "accelerator_share": self.accelerator_share,
            "messages": list(self.messages),
            "reasons": [list(r) for r in self.reasons],
            "declined": [list(d) for d in self.declined],
            "host": dict(self.host),
            "verification": None if self.verification is None else self.verification.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "precision": self.precision,
            "startup": self.startup,
            "serving": None if self.serving is None else self.serving.to_dict(),
        }

    def lines(self) -> list[str]:
        """The report as people read it, one fact per line."""
        out = [f"requested  {', '.join(self.requested) or 'chosen by ONNX Runtime'}"]
        out.append(f"realized   {', '.join(self.realized)}")
        if self.nodes:
            share = self.accelerator_share
            placed = ", ".join(f"{name} {count}" for name, count in self.nodes.items())
            tail = f" ({share:.0%} off the CPU)" if share is not None else ""
            out.append(f"nodes      {placed}{tail}")
        if self.precision is not None:
            out.append(f"precision  {self.precision} (the lead provider's reduced-precision mode)")
        out += [f"chosen     {kind}: {reason}" for kind, reason in self.reasons]
        out += [f"declined   {kind}: {reason}" for kind, reason in self.declined]
        if self.verification is not None:
            out.append(f"verdict    {self.verification.describe()}")
        out += [f"candidate  {candidate.describe()}" for candidate in self.candidates]
        if self.startup is not None:
            out.append(f"startup    {self.startup}")
        if self.serving is not None:
            out += self.serving.lines()
        out += [f"onnxrt     {message}" for message in self.messages]
        return out
