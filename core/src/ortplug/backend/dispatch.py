"""The seam a serving add-on plugs into: what it is given (:class:`ServingStart`), and what it hands
back to the backend (a :class:`Dispatcher` that runs every call from then on)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..pipeline.report import ServingSummary

if TYPE_CHECKING:
    from ..checkpoint import Tolerance
    from ..pipeline.build_pipeline import BuildResult
    from ..providers.session_options import SessionOptionsConfig
    from ..session.introspection import ValueInfo
    from ..session.plan import SessionPlan

__all__ = ["Dispatcher", "ServingStart", "ServingSummary", "Starter"]


class Dispatcher(Protocol):
    """Runs a backend's calls in place of its session (a request queue and execution streams)."""

    @property
    def report(self) -> ServingSummary:
        """How it serves."""
        ...

    def run(self, names: Sequence[str], feed: Mapping[str, Any]) -> list[Any]:
        """One request's outputs ``names`` for ``feed``, on the caller's thread's behalf."""
        ...

    def submit(
        self, feed: Mapping[str, Any], names: Sequence[str], run_options: Any | None
    ) -> Future[list[Any]]:
        """Queue a request; ``run_options`` (ONNX Runtime's, or ``None``) makes it run alone."""
        ...

    def terminate(self, terminate: bool) -> None:
        """Stop runs in progress and fail queued ones (``True``) or accept runs again."""
        ...

    def close(self, why: str) -> None:
        """Fail queued requests with ``why``, stop the streams and wait for their threads."""
        ...


@attrs.frozen
class ServingStart:
    """What a hint's :data:`Starter` gets: the proven build and how the caller asked to serve it."""

    #: The performance hint asked for.
    hint: str
    #: The ``serving=`` value given to ``from_checkpoint`` (``None``: measure or use the record);
    #: the add-on checks its type.
    config: object | None
    #: What the build pipeline chose: the weights, the plan, the verdict, the candidates.
    result: BuildResult
    #: The session serving now (its runs serialised where a provider requires it).
    session: Any
    #: The other verified choices, prepared on demand (``None``: verification is off).
    others: Callable[[], list[SessionPlan]] | None
    #: The model's inputs and outputs as the session describes them.
    inputs: tuple[ValueInfo, ...]
    outputs: tuple[ValueInfo, ...]
    session_options: SessionOptionsConfig | None
    #: ``from_checkpoint``'s verification setting (``False``: off; a tolerance: at that tolerance).
    verify: bool | Tolerance | None
    #: Whether measuring is wanted (``measure=`` and ``ORTPLUG_MEASURE``).
    measure: bool
    #: The real arrays the caller gave by input name (``Verification(inputs=...)``): the
    #: traffic's shapes, which a serving layout is measured on before any generated input.
    given_inputs: Mapping[str, Any] = attrs.field(factory=dict)


#: Starts serving a hint: the :class:`Dispatcher` the backend hands its calls to from now on.
Starter = Callable[[ServingStart], Dispatcher]
