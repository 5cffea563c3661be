"""A batch's parts queued at once on a throughput backend's streams, waited for in order."""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from ortplug.backend import OnnxBackend

__all__ = ["Parallel"]


class Parallel:
    """Feeds queued at once on a throughput backend's streams (``run_async``), waited for."""

    def __init__(self, backend: OnnxBackend, outputs: list[str], options: Any) -> None:
        self.backend, self.outputs, self.options = backend, outputs, options

    def run(
        self, feeds: Sequence[Mapping[str, np.ndarray]]
    ) -> list[tuple[Mapping[str, Any] | None, Exception | None]]:
        """Each feed's outputs or error, in order."""
        results: list[tuple[Mapping[str, Any] | None, Exception | None]] = [(None, None)] * len(
            feeds
        )
        left = [len(feeds)]
        lock, done = threading.Lock(), threading.Event()

        def settle(
            index: int, outputs: Mapping[str, Any] | None, error: BaseException | None
        ) -> None:
            failure = None if error is None else _as_exception(error)
            results[index] = (outputs, failure)
            with lock:
                left[0] -= 1
                if not left[0]:
                    done.set()

        for index, feed in enumerate(feeds):
            try:
                self.backend.run_async(
                    dict(feed),
                    functools.partial(settle, index),
                    self.outputs,
                    run_options=self.options,
                )
            except Exception as exc:  # not queued (closed, bad inputs): its part's error
                settle(index, None, exc)
        done.wait()
        return results


def _as_exception(error: BaseException) -> Exception:
    return error if isinstance(error, Exception) else RuntimeError(str(error))
