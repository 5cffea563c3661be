"""The Ray add-on's errors: a batch that failed (named by its rows), and Ray Data missing.

On the driver Ray raises its own exception around a worker's; :func:`worker_error` gets the
ortplug error back out of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ortplug.errors import OrtplugError
from ortplug.host.install_command import pip_install

__all__ = ["BatchError", "RayNotInstalledError", "require_ray", "worker_error"]


class RayNotInstalledError(OrtplugError, ImportError):
    """Ray Data is not importable; the message names the command that installs it."""


class BatchError(OrtplugError, RuntimeError):
    """One batch failed; the one-line message names the batch, the actor, the rows and the cause.

    ``ids`` holds the failing rows' values of the id column, when one was given.
    On the driver Ray raises its own exception around this one; :func:`worker_error`
    gets it back.
    """

    def __init__(self, message: str, ids: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.ids = tuple(ids)

    def __str__(self) -> str:
        return self.message  # one line, though Ray appends its retry advice to ``args``


def worker_error(error: BaseException) -> OrtplugError | None:
    """The ortplug error a worker raised (a ``BatchError`` first), out of what Ray raised here.

    Ray keeps a batch's error in its ``cause`` when
    ``DataContext.raise_original_map_exception`` is set (``ortplug batch --ray``
    sets it); otherwise Ray Data wraps it in a ``UserCodeException`` that keeps
    only its traceback text.
    """
    found: list[OrtplugError] = []
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        cause = getattr(current, "cause", None)  # a RayTaskError: the worker's own exception
        if isinstance(cause, BaseException):
            pending.append(cause)
        elif isinstance(current, OrtplugError):  # not Ray's copy that subclasses it
            found.append(current)
        pending += [current.__context__, current.__cause__]
    batch = [e for e in found if isinstance(e, BatchError)]
    return (batch or found or [None])[0]


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or :class:`RayNotInstalledError` naming the install command."""
    try:
        import ray
        import ray.data  # ray without the [data] extra lacks its dependencies
    except ImportError as exc:
        raise RayNotInstalledError(
            f"Ray Data is not installed (import failed: {exc}); install it with: "
            f"{pip_install('ortplug[ray]')}"
        ) from exc
    return ray
